"""The crash-point explorer over the PostgreSQL kinds, against the session's real server.

Each kind's scenario (create -> Ready, spec update -> Ready, delete ->
Deleted) is explored at every side-effect point, both sides, both
variants. Run just these with ``pytest -m postgres tests/test_verify_postgres.py``.
"""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from lifecycle import verify
from lifecycle.cli import main
from lifecycle.providers.postgres.extension import ExtensionClient
from lifecycle.providers.postgres.role import RoleClient
from lifecycle.providers.postgres.scenarios.testing import PostgresServer
from lifecycle.providers.postgres.schema import SchemaClient
from tests.test_verify import LateFinalizerReconciler

pytestmark = pytest.mark.postgres

KINDS = ("lifecycle.machines.postgres:Role", "lifecycle.machines.postgres:Database",
         "lifecycle.machines.postgres:Grant", "lifecycle.machines.postgres:Schema",
         "lifecycle.machines.postgres:Extension")
NAMES = ("Role", "Database", "Grant", "Schema", "Extension")


def leftovers(server: PostgresServer, prefix: str) -> list[str]:
    """Roles and databases on the server whose name starts with ``prefix``."""
    with server.connect() as conn:
        rows = conn.execute(
            "SELECT rolname FROM pg_roles WHERE starts_with(rolname, %s) UNION ALL "
            "SELECT datname FROM pg_database WHERE starts_with(datname, %s)",
            [prefix, prefix]).fetchall()
    return [row[0] for row in rows]


def test_bundled_discovery_includes_the_postgres_kinds(dsn: str) -> None:
    chosen, skipped = verify.targets()
    names = [t.name for t in chosen]
    for name in NAMES:
        assert name in names
    assert not [s for s, _ in skipped if s in NAMES]


@pytest.mark.parametrize("spec", KINDS)
def test_postgres_kind_has_no_counterexample(spec: str, dsn: str,
                                             server: PostgresServer) -> None:
    (target, *_), _ = verify.targets([spec])  # the kind's own scenario first
    report = verify.explore(target)
    assert report.ok, "\n".join(c.render() for c in report.counterexamples)
    # Every point, both sides, both variants; every phase has points.
    assert len(report.checked) == report.points * 4
    assert {c.phase for c in report.checked} == {"create", "update", "delete"}
    operations = " ".join(report.operations)
    for expected in ("external.create", "external.update", "external.delete",
                     "+finalizer", "intent create:pending", "-finalizer"):
        assert expected in operations
    # Every run's names were fresh and every run cleaned up after itself.
    assert leftovers(server, target.objects[0]) == []


def _target(kind: str = "Role") -> verify.Target:
    (target, *_), _ = verify.targets([f"lifecycle.machines.postgres:{kind}"])
    return target


@pytest.mark.parametrize("kind", ["Role", "Schema", "Extension"])
def test_broken_late_finalizer_leaks_and_is_caught(kind: str, dsn: str,
                                                   server: PostgresServer) -> None:
    target = attrs.evolve(_target(kind), reconciler=LateFinalizerReconciler)
    assert verify.run_scenario(target).problems == []
    ops = verify.run_scenario(target).recorder.operations
    create = next(i for i, op in enumerate(ops, 1) if op.startswith("external.create"))
    report = verify.explore(target, points=[create], sides=["after"],
                            variants=["delete-while-down"])
    assert len(report.counterexamples) == 1
    example = report.counterexamples[0]
    assert any("leaked: no object tracks it" in p for p in example.problems), example.problems
    assert "CRASH after" in example.render()
    # What leaked was removed once the run had been checked (a schema or an extension with
    # the run's database).
    assert leftovers(server, target.objects[0]) == []


def recreating(client_class: type) -> type:
    """Deliberately broken: create drops what it made and creates it again."""

    class Recreating(client_class):  # type: ignore[misc, valid-type]
        def create(self, resource: Any) -> Any:
            super().create(resource)
            self.delete(resource)
            return super().create(resource)

    return Recreating


@pytest.mark.parametrize(("kind", "client_class"), [
    ("Role", RoleClient), ("Schema", SchemaClient), ("Extension", ExtensionClient)])
def test_created_twice_is_caught(kind: str, client_class: type, dsn: str,
                                 server: PostgresServer) -> None:
    base = _target(kind)

    def system() -> verify.ExternalSystem:
        built = base.system()
        built.connector.client_class = recreating(client_class)
        return built

    run = verify.run_scenario(attrs.evolve(base, system=system))
    assert any("was created 2 times" in p for p in run.problems), run.problems
    assert leftovers(server, base.objects[0]) == []


@pytest.mark.parametrize("kind", ["Schema", "Extension"])
def test_the_schema_and_extension_targets_follow_the_server(kind: str, dsn: str,
                                                            server: PostgresServer) -> None:
    from lifecycle.core.contract import ManagedResource, ProviderConfig

    target = _target(kind)
    system = target.system()
    try:
        assert system.names() == set()
        data = target.manifest(target.objects[0])
        name = data["metadata"].get("annotations", {}).get(
            "lifecycle.dev/external-name", f"{target.objects[0]}-0123abcd")
        config = ProviderConfig(name="default", spec=dict(system.provider_spec),
                                credentials=dict(system.credentials))
        resource = ManagedResource(kind=kind, namespace="default", name=target.objects[0],
                                   uid="u", generation=1, external_name=name,
                                   parameters=target.kind.parse_parameters(data["spec"]))
        client = system.connector.connect(resource, config)
        client.create(resource)
        assert client.observe(resource).exists
        client.create(resource)  # creating what exists creates nothing new
        assert system.names() == {name}
        assert system.creations is not None and system.creations(name) == 1
        moved = target.kind.parse_parameters(target.update(data)["spec"])
        client.update(attrs.evolve(resource, parameters=moved))
        assert client.observe(attrs.evolve(resource, parameters=moved)).up_to_date
        assert system.creations(name) == 1
        # names() follows the server: deleted, it is gone.
        client.delete(resource)
        assert system.names() == set()
    finally:
        assert system.close is not None
        system.close()
    assert leftovers(server, target.objects[0]) == []


def test_cli_covers_a_postgres_kind(dsn: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify", "lifecycle.machines.postgres:Grant", "--side", "after",
                 "--variant", "restart"]) == 0
    out = capsys.readouterr().out
    assert "ok   #1   after  restart" in out
    assert "external.create" in out and "external.delete" in out
    assert dsn.split(":")[2].split("@")[0] not in out  # the admin password
    assert out.strip().endswith("verify: OK")
