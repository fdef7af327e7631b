"""The crash-point explorer over the PostgreSQL kinds, against the session's real server.

Each kind's scenario (create -> Ready, spec update -> Ready, delete ->
Deleted) is explored at every side-effect point, both sides, both
variants. Run just these with ``pytest -m postgres tests/test_verify_postgres.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import attrs
import pytest

from lifecycle import verify
from lifecycle.cli import main
from lifecycle.providers.postgres.role import RoleClient
from lifecycle.providers.postgres.testing import (
    PostgresServer,
    postgres_server,  # noqa: F401  (the session fixture)
)
from lifecycle.providers.postgres.verify import POSTGRES_DSN_ENV
from tests.test_verify import LateFinalizerReconciler

pytestmark = pytest.mark.postgres

KINDS = ("lifecycle.machines.postgres:Role", "lifecycle.machines.postgres:Database",
         "lifecycle.machines.postgres:Grant")
NAMES = ("Role", "Database", "Grant")


@pytest.fixture
def server(postgres_server: PostgresServer) -> Iterator[PostgresServer]:  # noqa: F811
    """The session server, started again if a test left it stopped."""
    postgres_server.start()
    yield postgres_server


@pytest.fixture
def dsn(server: PostgresServer, monkeypatch: pytest.MonkeyPatch) -> str:
    """``LIFECYCLE_POSTGRES_DSN`` pointing at the session server."""
    value = (f"postgresql://{server.user}:{server.password}@{server.host}:{server.port}"
             "/postgres?sslmode=disable")
    monkeypatch.setenv(POSTGRES_DSN_ENV, value)
    return value


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
    (target,), _ = verify.targets([spec])
    report = verify.explore(target)
    assert report.ok, "\n".join(c.render() for c in report.counterexamples)
    assert report.points >= 20
    # Every point, both sides, both variants; every phase has points.
    assert len(report.checked) == report.points * 4
    assert {c.phase for c in report.checked} == {"create", "update", "delete"}
    operations = " ".join(report.operations)
    for expected in ("external.create", "external.update", "external.delete",
                     "+finalizer", "intent create:pending", "-finalizer"):
        assert expected in operations
    # Every run's names were fresh and every run cleaned up after itself.
    assert leftovers(server, target.objects[0]) == []


def _role_target() -> verify.Target:
    (target,), _ = verify.targets(["lifecycle.machines.postgres:Role"])
    return target


def test_broken_late_finalizer_leaks_a_role_and_is_caught(dsn: str,
                                                          server: PostgresServer) -> None:
    target = attrs.evolve(_role_target(), reconciler=LateFinalizerReconciler)
    assert verify.run_scenario(target).problems == []
    ops = verify.run_scenario(target).recorder.operations
    create = next(i for i, op in enumerate(ops, 1) if op.startswith("external.create"))
    report = verify.explore(target, points=[create], sides=["after"],
                            variants=["delete-while-down"])
    assert len(report.counterexamples) == 1
    example = report.counterexamples[0]
    assert any("leaked: no object tracks it" in p for p in example.problems), example.problems
    assert "CRASH after" in example.render()
    # The leaked role was removed once the run had been checked.
    assert leftovers(server, target.objects[0]) == []


class RecreatingRoleClient(RoleClient):
    """Deliberately broken: create drops and creates the role again."""

    def create(self, resource: Any) -> Any:
        super().create(resource)
        self.delete(resource)
        return super().create(resource)


def test_role_created_twice_is_caught(dsn: str) -> None:
    base = _role_target()

    def system() -> verify.ExternalSystem:
        built = base.system()
        built.connector.client_class = RecreatingRoleClient
        return built

    run = verify.run_scenario(attrs.evolve(base, system=system))
    assert any("was created 2 times" in p for p in run.problems), run.problems


def test_cli_covers_a_postgres_kind(dsn: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify", "lifecycle.machines.postgres:Grant", "--side", "after",
                 "--variant", "restart"]) == 0
    out = capsys.readouterr().out
    assert "ok   #1   after  restart" in out
    assert "external.create" in out and "external.delete" in out
    assert dsn.split(":")[2].split("@")[0] not in out  # the admin password
    assert out.strip().endswith("verify: OK")
