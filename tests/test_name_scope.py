"""A kind may scope its external names further than the provider config (``Kind.name_scope``).

A schema's name is unique only within its database: two Schemas of the same
name in different databases are two resources and must not conflict, while
two in the same database still must. The kind below keeps "schemas" in an
in-memory fake keyed by (database, name).
"""

from __future__ import annotations

from typing import Any

import attrs

from lifecycle.core.kind import EXTERNAL_NAME, Kind
from lifecycle.core.machine import Timing
from lifecycle.core.values import Creation, Observation
from lifecycle.machines.managed import ManagedResourceMachine
from lifecycle.runtime.names import NameIndex
from lifecycle.testing import Environment
from lifecycle.testing.plugin import build_environment


@attrs.frozen
class SlotParameters:
    """Where a slot lives and what it holds."""

    database: str = attrs.field(validator=attrs.validators.instance_of(str))
    size: int = 1


class SlotClient:
    """Slots in a dict keyed by (database, external name)."""

    def __init__(self, slots: dict[tuple[str, str], int]) -> None:
        self.slots = slots

    def observe(self, resource: Any) -> Observation:
        key = (resource.parameters.database, resource.external_name)
        if key not in self.slots:
            return Observation.absent()
        return Observation(exists=True, up_to_date=self.slots[key] == resource.parameters.size)

    def create(self, resource: Any) -> Creation:
        self.slots[(resource.parameters.database, resource.external_name)] = (
            resource.parameters.size)
        return Creation()

    def update(self, resource: Any) -> None:
        self.slots[(resource.parameters.database, resource.external_name)] = (
            resource.parameters.size)

    def delete(self, resource: Any) -> None:
        self.slots.pop((resource.parameters.database, resource.external_name), None)


class SlotConnector:
    """Hands every object a client over the same slots."""

    def __init__(self) -> None:
        self.slots: dict[tuple[str, str], int] = {}

    def connect(self, resource: Any, config: Any) -> SlotClient:
        return SlotClient(self.slots)


class SlotMachine(ManagedResourceMachine):
    """The standard lifecycle with short waits."""

    timing = Timing(poll=30.0, wait={"creating": 1.0, "updating": 1.0, "deleting": 1.0})


def slot_kind(scoped: bool) -> Kind:
    """The Slot kind, its names scoped by database or (``scoped=False``) not."""
    return Kind(group="slots.example.org", version="v1", kind="Slot", plural="slots",
                machine=SlotMachine, parameters=SlotParameters,
                name_scope=(lambda p: (p.database,)) if scoped else None)


def slot(name: str, namespace: str, database: str, size: int = 1) -> dict[str, Any]:
    """A Slot named ``shared`` in PostgreSQL terms, in ``database``."""
    return {"apiVersion": "slots.example.org/v1", "kind": "Slot",
            "metadata": {"name": name, "namespace": namespace,
                         "annotations": {EXTERNAL_NAME: "shared"}},
            "spec": {"forProvider": {"database": database, "size": size}}}


def environment(scoped: bool) -> tuple[Environment, SlotConnector]:
    """An Environment serving the Slot kind, with namespaces team-a and team-b."""
    connector = SlotConnector()
    env: Environment = build_environment(kinds=[(slot_kind(scoped), connector)])
    for namespace in ("team-a", "team-b"):
        env.namespace(namespace)
    return env, connector


def test_the_same_name_in_two_databases_is_two_resources_when_the_kind_scopes_names() -> None:
    env, connector = environment(scoped=True)
    env.apply(slot("a", "team-a", "db1", size=1))
    env.apply(slot("b", "team-b", "db2", size=2))
    env.run_until_idle()

    assert env.state("Slot", "a", "team-a") == env.state("Slot", "b", "team-b") == "ready"
    assert connector.slots == {("db1", "shared"): 1, ("db2", "shared"): 2}


def test_the_same_name_in_the_same_database_still_conflicts() -> None:
    env, connector = environment(scoped=True)
    env.apply(slot("a", "team-a", "db1", size=1))
    env.run_until_idle()
    env.apply(slot("b", "team-b", "db1", size=2))
    env.advance(10.0)  # a conflict is retried with backoff, never settled

    failed = env.condition("Slot", "b", "Failed", "team-b")
    assert failed is not None and failed.reason == "ExternalNameConflict"
    assert "held by team-a/a" in failed.message
    assert connector.slots == {("db1", "shared"): 1}  # b never touched a's slot


def test_without_a_scope_the_same_name_in_two_databases_is_a_false_conflict() -> None:
    env, connector = environment(scoped=False)
    env.apply(slot("a", "team-a", "db1", size=1))
    env.run_until_idle()
    env.apply(slot("b", "team-b", "db2", size=2))
    env.advance(10.0)  # a conflict is retried with backoff, never settled

    failed = env.condition("Slot", "b", "Failed", "team-b")
    assert failed is not None and failed.reason == "ExternalNameConflict"
    assert connector.slots == {("db1", "shared"): 1}


def _held(name: str, namespace: str, uid: str, database: str) -> dict[str, Any]:
    obj = slot(name, namespace, database)
    obj["metadata"].update(uid=uid, creationTimestamp=f"2026-01-0{uid[-1]}T00:00:00Z",
                           finalizers=["lifecycle.dev/finalizer"])
    return obj


def test_the_index_keys_names_by_scope_and_follows_a_holder_that_moved() -> None:
    kind = slot_kind(scoped=True)
    a = _held("a", "team-a", "u1", "db1")
    store = {("team-a", "a"): a}
    index = NameIndex(lambda: list(store.values()),
                      lambda ns, name: store.get((ns or "", name)), kind.scope_of)

    assert index.claim(_held("b", "team-b", "u2", "db2"), "shared") is None
    assert index.claim(_held("c", "team-c", "u3", "db1"), "shared") == (
        "u1", "team-a", "a", "2026-01-01T00:00:00Z")
    # a moved to db3 (its spec changed): db1's name is free again.
    store[("team-a", "a")] = _held("a", "team-a", "u1", "db3")
    assert index.claim(_held("c", "team-c", "u3", "db1"), "shared") is None
    # A spec that does not parse has no scope (it is refused before it claims).
    assert kind.scope_of({"spec": {"forProvider": {"size": 1}}}) == ()
