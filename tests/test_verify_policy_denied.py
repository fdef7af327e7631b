"""The crash explorer over an object the PostgreSQL policy refuses (``Role/policy-denied``).

The connector's ``admit`` is asked before the engine takes an object over; the explorer's
connector wrapper and the PostgreSQL verify connector pass it through. A Role asking for
``createrole`` (then, updated, for ``replication``) is explored at every side-effect
point, both sides, both variants: it must never hold the finalizer, an external name or
a connection Secret, must carry its ``PolicyDenied`` refusal, nothing may appear on the
server, and it must be deletable. An engine that commits the finalizer before it asks is
caught. Runs against the session's real server (``pytest -m postgres``).
"""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from lifecycle import verify
from lifecycle.cli import main
from lifecycle.machines.postgres import Role
from lifecycle.providers.postgres.scenarios.testing import PostgresServer
from lifecycle.providers.postgres.scenarios.verify import (
    POLICY_DENIED_SCENARIO,
    postgres_settings,
    refused_target,
)
from lifecycle.runtime.passes import Pass
from lifecycle.runtime.reconciler import Reconciler

pytestmark = pytest.mark.postgres


def leftovers(server: PostgresServer, prefix: str) -> list[str]:
    """Roles on the server whose name starts with ``prefix``."""
    with server.connect() as conn:
        return [r[0] for r in conn.execute(
            "SELECT rolname FROM pg_roles WHERE starts_with(rolname, %s)", [prefix]).fetchall()]


class AcquiresBeforeAdmit(Pass):
    """Deliberately broken: stages the finalizer and external name (committed with the
    pass's first write) before it asks the connector's ``admit``."""

    def admitted(self, admit: Any) -> Any:
        self.acquire()
        return super().admitted(admit)


class FinalizerBeforeAdmit(Reconciler):
    """Deliberately broken: takes the object over before it asks the connector's ``admit``."""

    pass_type = AcquiresBeforeAdmit


def target() -> verify.Target:
    settings = postgres_settings()
    assert settings is not None
    return refused_target(Role, settings)


def test_a_refused_role_leaves_nothing_behind_at_every_crash_point(
        dsn: str, server: PostgresServer) -> None:
    explored = target()
    run = verify.run_scenario(explored)
    assert run.problems == []
    trace = "\n".join(run.recorder.trace)
    assert "-> refused (PolicyDenied)" in trace and "-> admitted" not in trace
    report = verify.explore(explored)
    assert report.ok, "\n".join(c.render() for c in report.counterexamples)
    assert report.points > 0 and len(report.checked) == report.points * 4
    operations = " ".join(report.operations)
    # The refusal is written (status, an event); nothing of the engine's is taken and
    # nothing is called on the server.
    assert "api.replace_status" in operations
    for never in ("+finalizer", "external.", "Secret", "intent"):
        assert never not in operations, report.operations
    assert {c.phase for c in report.checked} >= {"create", "update"}
    assert leftovers(server, explored.objects[0]) == []


def test_an_engine_that_takes_the_object_over_before_it_asks_is_caught(
        dsn: str, server: PostgresServer) -> None:
    broken = attrs.evolve(target(), reconciler=FinalizerBeforeAdmit)
    run = verify.run_scenario(broken)
    assert any("holds the finalizer" in p for p in run.problems), run.problems
    report = verify.explore(broken, points=[1], sides=["after"], variants=["restart"])
    assert not report.ok
    assert any("holds the finalizer" in p for c in report.counterexamples
               for p in c.problems)
    assert leftovers(server, broken.objects[0]) == []


def test_the_scenario_is_registered_with_the_role(
        dsn: str, server: PostgresServer, capsys: pytest.CaptureFixture[str]) -> None:
    found, _ = verify.targets([f"Role/{POLICY_DENIED_SCENARIO}"])
    assert [t.name for t in found] == [f"Role/{POLICY_DENIED_SCENARIO}"]
    assert main(["verify", f"Role/{POLICY_DENIED_SCENARIO}", "--points", "1",
                 "--side", "after", "--variant", "delete-while-down"]) == 0
    out = capsys.readouterr().out
    assert out.strip().endswith("verify: OK")
    assert dsn.split(":")[2].split("@")[0] not in out  # the admin password
