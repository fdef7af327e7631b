"""The crash-point explorer: it passes the bundled kinds and catches broken engines."""

from __future__ import annotations

import argparse
import io
import json
import sys
import textwrap
from typing import Any

import attrs
import pytest

from lifecycle import registry, verify
from lifecycle.cli import main
from lifecycle.cli.verify import run_cli
from lifecycle.core.kind import FINALIZER, INTENT
from lifecycle.machines.database import DatabaseInstance
from lifecycle.providers.postgres.scenarios.verify import POSTGRES_DSN_ENV
from lifecycle.providers.simcloud.scenarios.verify import simcloud_target
from lifecycle.runtime.passes import Pass
from lifecycle.runtime.reconciler import Reconciler
from lifecycle.verify import Crash, CrashPoint, VerifyError, explore, run_scenario


def _create_committed(meta: dict[str, Any]) -> bool:
    raw = (meta.get("annotations") or {}).get(INTENT)
    if not raw:
        return False
    intent = json.loads(raw)
    return not (intent["operation"] == "create" and intent.get("outcome") != "succeeded")


class LateFinalizerPass(Pass):
    """Deliberately broken: the finalizer is committed only after the external create."""

    def mutate(self, change: Any) -> None:
        def late(meta: dict[str, Any]) -> None:
            change(meta)
            finalizers = meta.get("finalizers") or []
            if not _create_committed(meta):
                if FINALIZER in finalizers:
                    meta["finalizers"] = [f for f in finalizers if f != FINALIZER]
            elif FINALIZER not in finalizers and not meta.get("deletionTimestamp"):
                # Committed with the write that records the create (in the create's own
                # pass for a kind that observes right after creating).
                meta["finalizers"] = [*finalizers, FINALIZER]

        super().mutate(late)

    def commit_staged(self) -> None:
        self.mutate(lambda meta: None)  # every pass ends with a write, staged or not


class LateFinalizerReconciler(Reconciler):
    """A reconciler whose passes write as :class:`LateFinalizerPass` does."""

    pass_type = LateFinalizerPass


def test_crash_is_not_an_exception() -> None:
    assert issubclass(Crash, BaseException)
    assert not issubclass(Crash, Exception)


def test_bundled_database_kind_has_no_counterexample() -> None:
    seen: list[verify.Checked] = []
    report = explore(simcloud_target(DatabaseInstance),
                     on_point=lambda checked, example: seen.append(checked))
    assert report.ok, "\n".join(c.render() for c in report.counterexamples)
    assert report.points >= 20
    # Every point, both sides, both variants.
    assert len(report.checked) == report.points * 4 == len(seen)
    operations = " ".join(report.operations)
    for expected in ("external.create", "external.update", "external.delete",
                     "api.create Secret", "api.replace_status", "api.record_event",
                     "-finalizer"):
        assert expected in operations
    assert {c.phase for c in report.checked} == {"create", "update", "delete"}


def test_points_are_counted_in_the_documented_order() -> None:
    run = run_scenario(simcloud_target(DatabaseInstance))
    ops = run.recorder.operations
    claim = next(i for i, op in enumerate(ops) if "+finalizer" in op)
    journal = next(i for i, op in enumerate(ops) if "intent create:pending" in op)
    create = next(i for i, op in enumerate(ops) if op.startswith("external.create"))
    # The finalizer, the external name and the pending entry are one write, before the call.
    assert claim == journal < create
    assert run.problems == []


def test_broken_late_finalizer_is_caught_with_a_trace() -> None:
    target = attrs.evolve(simcloud_target(DatabaseInstance), reconciler=LateFinalizerReconciler)
    # Without a crash the broken engine looks fine: only crash exploration finds it.
    assert run_scenario(target).problems == []
    report = explore(target)
    assert not report.ok
    leak = [c for c in report.counterexamples
            if any("leaked" in p for p in c.problems)]
    assert leak, [c.problems for c in report.counterexamples]
    example = leak[0]
    assert example.point is not None and example.point.variant == "delete-while-down"
    text = example.render()
    assert "external.create" in text
    assert "CRASH" in text
    assert "user (no engine running): delete alpha" in text
    assert example.replay_command().startswith("lifecycle verify ")
    # The trace replays: the same point fails the same way.
    again = run_scenario(target, example.point)
    assert again.problems == list(example.problems)
    assert again.recorder.trace == list(example.trace)


class ForgetfulClient:
    """Deliberately broken client: create ignores the idempotency key and takes a fresh name."""

    def __init__(self, inner: Any, cloud: Any) -> None:
        self.inner, self.cloud = inner, cloud

    def observe(self, resource: Any) -> Any:
        return self.inner.observe(resource)

    def create(self, resource: Any) -> Any:
        existing = len(self.cloud.instances())
        renamed = attrs.evolve(resource, idempotency_key="",
                               external_name=f"{resource.external_name}-{existing}")
        self.inner.create(renamed)
        return self.inner.create(resource)

    def update(self, resource: Any) -> None:
        self.inner.update(resource)

    def delete(self, resource: Any) -> None:
        self.inner.delete(resource)


def test_broken_client_that_leaks_is_caught() -> None:
    from lifecycle.providers.simcloud import DatabaseConnector, SimCloud

    class Connector:
        def __init__(self, cloud: SimCloud) -> None:
            self.cloud, self.real = cloud, DatabaseConnector(cloud)

        def connect(self, resource: Any, config: Any) -> ForgetfulClient:
            return ForgetfulClient(self.real.connect(resource, config), self.cloud)

    def system() -> verify.ExternalSystem:
        cloud = SimCloud(seed=0)
        return verify.ExternalSystem(Connector(cloud), lambda: set(cloud.instances()),
                                     cloud.creations)

    target = attrs.evolve(simcloud_target(DatabaseInstance), system=system)
    report = explore(target, points=[1], sides=["before"], variants=["restart"])
    assert report.counterexamples
    assert report.counterexamples[0].point is None  # fails even without a crash
    assert any("leaked" in p for p in report.counterexamples[0].problems)


def test_a_client_that_gives_the_resource_another_password_is_caught() -> None:
    from lifecycle.providers.simcloud import DatabaseConnector, SimCloud

    class Mangling:
        """Creates the instance with a password other than the one the engine stored."""

        def __init__(self, inner: Any) -> None:
            self.inner = inner

        def __getattr__(self, name: str) -> Any:
            return getattr(self.inner, name)

        def create(self, resource: Any) -> Any:
            made = self.inner.create(attrs.evolve(resource, password=resource.password + "-x"))
            return attrs.evolve(made, connection={k: v for k, v in made.connection.items()
                                                  if k != "password"})

    class Connector:
        def __init__(self, cloud: SimCloud) -> None:
            self.real = DatabaseConnector(cloud)

        def connect(self, resource: Any, config: Any) -> Mangling:
            return Mangling(self.real.connect(resource, config))

    base = simcloud_target(DatabaseInstance)

    def system() -> verify.ExternalSystem:
        built = base.system()
        cloud = built.connector.cloud  # type: ignore[attr-defined]
        return attrs.evolve(built, connector=Connector(cloud))

    report = explore(attrs.evolve(base, system=system), points=[1], sides=["before"],
                     variants=["restart"])
    assert report.counterexamples
    problems = report.counterexamples[0].problems
    assert any("connection Secret default/alpha-conn does not hold the password external "
               "resource" in p for p in problems), problems
    assert report.counterexamples[0].point is None  # wrong even without a crash
    # The real client passes, and no message ever carries a password.
    assert explore(base, points=[1], sides=["before"], variants=["restart"]).ok


def test_crash_after_point_performs_the_write() -> None:
    target = simcloud_target(DatabaseInstance)
    run = run_scenario(target, CrashPoint(1, "after"))
    assert "CRASH after" in run.recorder.trace[2]
    assert run.recorder.engine == 2
    assert run.problems == []


def test_generic_creation_count_without_a_system_counter() -> None:
    base = simcloud_target(DatabaseInstance)

    def system() -> verify.ExternalSystem:
        built = base.system()
        return attrs.evolve(built, creations=None)

    report = explore(attrs.evolve(base, system=system), points=[4, 5])
    assert report.ok


def test_targets_come_from_the_registry() -> None:
    found = {r.name: r for r in registry.registrations()}
    assert found["DatabaseInstance"].kind is DatabaseInstance
    assert found["DatabaseInstance"].verify_target is not None
    chosen, skipped = verify.targets()
    assert "DatabaseInstance" in [t.name for t in chosen]
    for name, reason in skipped:
        assert reason, name
    # A named kind is labelled with the name it was asked by, so the replay command works.
    # A kind may bring more scenarios: its own first, the others named KIND/scenario.
    named = "lifecycle.machines.database:DatabaseInstance"
    chosen, _ = verify.targets([named])
    assert all(t.kind is DatabaseInstance for t in chosen)
    assert [t.name for t in chosen] == [named, f"{named}/shared-name", f"{named}/adoption",
                                        f"{named}/forged-journal"]
    chosen, _ = verify.targets(["databaseinstances"])
    assert chosen[0].name == "databaseinstances"
    (target,), _ = verify.targets(["DatabaseInstance/adoption"])
    assert target.name == "DatabaseInstance/adoption" and target.waiting == ("alpha",)
    with pytest.raises(verify.VerifyError, match="no verification scenario 'nope'"):
        verify.targets(["DatabaseInstance/nope"])


def test_kinds_without_a_target_are_skipped_with_a_reason(
        monkeypatch: pytest.MonkeyPatch) -> None:
    without = registry.Registration(DatabaseInstance, source="tests:without")
    unavailable = registry.Registration(DatabaseInstance, verify_target=lambda kind: None,
                                        source="tests:unavailable")
    monkeypatch.setattr(registry, "registrations", lambda: [without, unavailable])
    chosen, skipped = verify.targets()
    assert chosen == []
    assert [name for name, _ in skipped] == ["DatabaseInstance", "DatabaseInstance"]
    assert "registers no verification target" in skipped[0][1]
    assert "not available" in skipped[1][1]
    assert all("\n" not in reason for _, reason in skipped)


def test_targets_reject_non_kinds() -> None:
    with pytest.raises(registry.RegistryError):
        verify.targets(["lifecycle.machines.managed:ManagedResourceMachine"])


def test_cli_ok_prints_every_point(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify", "lifecycle.machines.database:DatabaseInstance", "--side", "after",
                 "--variant", "restart"]) == 0
    out = capsys.readouterr().out
    assert "ok   #1   after  restart" in out
    assert "external.create" in out
    assert out.strip().endswith("verify: OK")


def test_cli_bad_argument_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify", "no.such.module:Kind"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err


@pytest.fixture
def broken_module(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> str:
    """A kind registration whose verify_target runs the late-finalizer engine."""
    (tmp_path / "broken_kind.py").write_text(textwrap.dedent("""
        import attrs
        from lifecycle.machines.database import DatabaseInstance
        from lifecycle.providers.simcloud.scenarios.verify import simcloud_target
        from lifecycle.registry import Registration
        from tests.test_verify import LateFinalizerReconciler

        def verify_target(kind):
            return attrs.evolve(simcloud_target(kind), reconciler=LateFinalizerReconciler)

        Broken = Registration(DatabaseInstance, verify_target=verify_target)
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "broken_kind:Broken"
    sys.modules.pop("broken_kind", None)


def test_cli_counterexample_exits_non_zero(broken_module: str,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify", broken_module]) == 1
    out = capsys.readouterr().out
    assert "COUNTEREXAMPLE broken_kind:Broken" in out
    assert "FAIL" in out and "replay: lifecycle verify broken_kind:Broken --point" in out
    assert out.strip().endswith("verify: FAILED")


def test_cli_replay_prints_the_trace(broken_module: str) -> None:
    target = verify.targets([broken_module])[0][0]
    example = next(c for c in explore(target).counterexamples if c.point is not None)
    args = argparse.Namespace(
        kinds=[broken_module], point=example.point.index, side=example.point.side,
        variant=example.point.variant, trace=True)
    out = io.StringIO()
    assert run_cli(args, out) == 1
    text = out.getvalue()
    assert "engine 2 starts" in text and "problem:" in text


def test_postgres_kinds_skipped_without_a_server(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(POSTGRES_DSN_ENV, raising=False)
    chosen, skipped = verify.targets()
    reasons = dict(skipped)
    for name in ("Role", "Database", "Grant"):
        assert POSTGRES_DSN_ENV in reasons[name]
    assert not [t for t in chosen if t.name in ("Role", "Database", "Grant")]
    with pytest.raises(VerifyError, match=POSTGRES_DSN_ENV):
        verify.targets(["lifecycle.machines.postgres:Role"])


@pytest.mark.parametrize("dsn", ["host=127.0.0.1 port=", "postgresql://127.0.0.1/postgres",
                                 "not a dsn ==="])
def test_bad_postgres_dsn_is_a_usage_error(dsn: str, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv(POSTGRES_DSN_ENV, dsn)
    assert main(["verify", "lifecycle.machines.postgres:Role"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_unreachable_postgres_is_a_usage_error_without_the_password(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from lifecycle.providers.postgres.scenarios.testing import free_port

    monkeypatch.setenv(POSTGRES_DSN_ENV,
                       f"postgresql://admin:pw-s3cret-xyz@127.0.0.1:{free_port()}/postgres")
    assert main(["verify", "lifecycle.machines.postgres:Grant"]) == 2
    err = capsys.readouterr().err
    assert "cannot connect to PostgreSQL at 127.0.0.1:" in err
    assert "pw-s3cret-xyz" not in err and err.count("\n") == 1


# --------------------------------------------------------------------------
# The claim kind: dynamic provisioning under crashes
# --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def claim_report() -> verify.Report:
    """One exploration of the bundled DatabaseClaim, shared by the claim tests."""
    from lifecycle.machines.claim import DatabaseClaim

    (target,), _ = verify.targets(["lifecycle.machines.claim:DatabaseClaim"])
    assert target.kind is DatabaseClaim
    return explore(target)


def test_claim_exploration_covers_both_reconcilers(claim_report: verify.Report) -> None:
    assert len(claim_report.checked) == claim_report.points * 4
    operations = " ".join(claim_report.operations)
    for expected in ("api.replace DatabaseClaim", "api.create DatabaseInstance",
                     "external.create", "api.create Secret default/app-db",
                     "api.delete DatabaseInstance", "external.delete",
                     "api.delete Secret default/app-db"):
        assert expected in operations
    # Provisioning records spec.resourceRef before it creates the managed resource.
    ops = claim_report.operations
    ref = next(i for i, op in enumerate(ops) if op == "api.replace DatabaseClaim default/app "
                                                      "(spec)" and i > 2)
    create = next(i for i, op in enumerate(ops) if op.startswith("api.create DatabaseInstance"))
    assert ref < create


def test_claim_kind_has_no_counterexample(claim_report: verify.Report) -> None:
    # Regression: a claim deleted after provisioning but before its Binding status
    # write used to be stuck (release was not allowed from Unbound) and leak.
    assert claim_report.ok, [c.render() for c in claim_report.counterexamples]
