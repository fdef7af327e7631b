"""The registry: kinds and demos found through entry points, and clear errors."""

from __future__ import annotations

import attrs
import pytest

from lifecycle import registry
from lifecycle.cli import main
from lifecycle.machines.claim import DatabaseClaim
from lifecycle.machines.database import DatabaseInstance
from lifecycle.machines.postgres import Role


def test_bundled_kinds_are_registered_through_entry_points() -> None:
    names = {r.name for r in registry.registrations()}
    assert {"DatabaseInstance", "DatabaseClaim", "Role", "Database", "Grant"} <= names
    found = registry.find("DatabaseInstance")
    assert found.kind is DatabaseInstance
    assert found.source == "lifecycle.machines.registrations:DATABASE"
    assert found.connector is not None and hasattr(found.connector(), "connect")


@pytest.mark.parametrize("name", ["Role", "role", "roles", "roles.postgresql.lifecycle.dev",
                                  "lifecycle.machines.postgres:Role"])
def test_find_by_name_plural_group_or_module(name: str) -> None:
    assert registry.find(name).kind is Role


def test_for_object() -> None:
    assert registry.for_object("db.lifecycle.dev/v1alpha1", "DatabaseInstance").kind is \
        DatabaseInstance
    with pytest.raises(registry.RegistryError, match="no registered kind for Nope"):
        registry.for_object("x/v1", "Nope")


def test_unknown_and_wrong_names_are_one_line_errors() -> None:
    with pytest.raises(registry.RegistryError, match="no registered kind 'Bucket'"):
        registry.find("Bucket")
    with pytest.raises(registry.RegistryError, match="is not a kind"):
        registry.find("lifecycle.machines.managed:ManagedResourceMachine")
    with pytest.raises(registry.RegistryError, match=r"cannot import .no\.such."):
        registry.find("no.such:Thing")
    with pytest.raises(registry.RegistryError, match="expected MODULE:NAME"):
        registry.load("nocolon")


def test_a_module_that_raises_on_import_is_one_line(tmp_path, monkeypatch) -> None:
    (tmp_path / "explodes.py").write_text("raise RuntimeError('boom\\nsecond line')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(registry.RegistryError) as caught:
        registry.load("explodes:Kind")
    assert str(caught.value) == "cannot import 'explodes': RuntimeError: boom"


def _fake_entry_points(monkeypatch, values: dict[str, object]) -> None:
    class EP:
        def __init__(self, name: str, value: object) -> None:
            self.name, self.value, self._obj = name, f"fake.{name}:REGISTRATIONS", value

        def load(self) -> object:
            if isinstance(self._obj, Exception):
                raise self._obj
            return self._obj

    monkeypatch.setattr(registry, "entry_points",
                        lambda group: [EP(n, v) for n, v in values.items()])
    registry.refresh()


def test_malformed_and_duplicate_registrations_are_refused(monkeypatch) -> None:
    try:
        _fake_entry_points(monkeypatch, {"bad": [DatabaseInstance]})
        assert registry.registrations() == []
        assert "must name a Registration or a sequence of them, found Kind" in str(
            registry.failures()[0])
        twice = registry.Registration(DatabaseInstance)
        _fake_entry_points(monkeypatch, {"a": [twice], "b": (twice,)})
        with pytest.raises(registry.RegistryError, match="registered twice"):
            registry.registrations()
        _fake_entry_points(monkeypatch, {"broken": ImportError("no module named psycopg")})
        assert registry.registrations() == []  # left out, not fatal (test_plugin_isolation)
        assert [str(f) for f in registry.failures()] == [
            "entry point broken = fake.broken:REGISTRATIONS: cannot load: ImportError: "
            "no module named psycopg"]
    finally:
        monkeypatch.undo()
        registry.refresh()
    assert registry.find("DatabaseInstance").kind is DatabaseInstance


def test_demo_scenarios_are_registered() -> None:
    assert {"managed", "claims", "postgres"} <= set(registry.demos())


def test_unknown_demo_scenario_is_a_one_line_error(capsys) -> None:
    assert main(["demo", "--scenario", "nope"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("lifecycle demo: no demo scenario 'nope' (installed: ")
    assert len(err.splitlines()) == 1


def test_postgres_demo_without_a_password_is_a_one_line_error(capsys, monkeypatch) -> None:
    monkeypatch.delenv("LIFECYCLE_TEST_NO_SUCH_VAR", raising=False)
    assert main(["demo", "--provider", "postgres", "--password-env",
                 "LIFECYCLE_TEST_NO_SUCH_VAR"]) == 2
    err = capsys.readouterr().err.strip()
    assert "set LIFECYCLE_TEST_NO_SUCH_VAR to the admin password" in err


#: A managed kind registered without a connector, and a claim kind without its binding.
BARE = registry.Registration(attrs.evolve(DatabaseInstance, kind="Bare", plural="bares"))
UNBOUND = registry.Registration(DatabaseClaim)


def test_run_refuses_a_kind_without_a_connector(capsys) -> None:
    assert main(["run", "--embedded", "--kinds", "test_registry:BARE"]) == 2
    err = capsys.readouterr().err.strip()
    assert "Bare registers no connector" in err and len(err.splitlines()) == 1


def test_run_refuses_a_claim_kind_without_its_binding(capsys) -> None:
    assert main(["run", "--embedded", "--kinds", "test_registry:UNBOUND"]) == 2
    err = capsys.readouterr().err.strip()
    assert "DatabaseClaim is a claim kind whose registration names no ClaimBinding" in err
    assert len(err.splitlines()) == 1
