"""One reconcile of a DatabaseInstance, followed from the queue to the status write.

The walk (:mod:`reconcile_walk`) records each engine module the pass calls
into, consecutive calls in one module being one visit. No module is visited
more than :data:`TARGET` times. A helper bounced through another module (a
call handed down and called back) raises its caller's count, and the test
shows the check fails on one.
"""

from __future__ import annotations

import functools
from typing import Any

import pytest
from helpers import KIND, database_manifest, make
from reconcile_walk import record, short, visits

from lifecycle.core.kind import OPERATION
from lifecycle.runtime import names, retry
from lifecycle.runtime.passes import Pass

#: The most visits of any module in one pass.
TARGET = 2


def create_pass_walk() -> list[str]:
    """The walk of the first reconcile of a new DatabaseInstance (it creates the resource)."""
    env, _ = make()
    env.apply(database_manifest("db"))
    walk = record(lambda: env.reconcile(KIND, "db"))
    assert env.state(KIND, "db") == "creating"
    return walk


def over_target(walk: list[str]) -> dict[str, int]:
    """The modules visited more than :data:`TARGET` times, with their counts."""
    return {short(m): n for m, n in visits(walk).items() if n > TARGET}


def test_the_create_pass_walks_from_the_queue_to_the_status_write() -> None:
    walk = [short(m) for m in create_pass_walk()]
    assert walk[0] == "testing/harness" and walk[-2:] == ["testing/queue", "core/requeue"]
    assert "runtime/reconciler" in walk and walk.index("runtime/reconciler") < walk.index(
        "core/requeue")


def test_no_module_is_visited_more_than_twice() -> None:
    walk = create_pass_walk()
    assert over_target(walk) == {}, " -> ".join(short(m) for m in walk)


def lifecycle_walks() -> dict[str, list[str]]:
    """The walk of each pass of a DatabaseInstance's life, by the state it moves through:
    the create, a poll while creating, an observation when Ready, an update, a pass
    forced by the ``reconcile`` operation annotation, the delete call and the pass that
    sees the resource gone and lets the object go."""
    env, _ = make()
    env.apply(database_manifest("db", storage_gb=20))
    walks: dict[str, list[str]] = {}

    def step(label: str) -> None:
        before = env.state(KIND, "db")
        walk = record(lambda: env.reconcile(KIND, "db"))
        after = env.state(KIND, "db") if env.exists(KIND, "db") else "gone"
        walks[f"{label}: {before} -> {after}"] = walk

    step("create")
    step("poll")
    env.run_until_idle()
    step("observe")
    env.apply(database_manifest("db", storage_gb=50))
    step("update")
    env.run_until_idle()
    env.apply(database_manifest("db", storage_gb=50, annotations={OPERATION: "reconcile"}))
    step("forced")
    env.run_until_idle()
    env.delete(KIND, "db")
    step("delete")
    step("gone")
    return walks


def test_every_pass_of_a_lifetime_visits_each_module_at_most_twice() -> None:
    walks = lifecycle_walks()
    assert list(walks) == [
        "create: None -> creating", "poll: creating -> creating", "observe: ready -> ready",
        "update: ready -> updating", "forced: ready -> updating",
        "delete: ready -> deleting", "gone: deleting -> gone"]
    over = {label: over_target(walk) for label, walk in walks.items() if over_target(walk)}
    assert over == {}, {label: " -> ".join(short(m) for m in walks[label]) for label in over}


class Admitting:
    """A connector that also asks ``admit`` (admitting everything) before the take-over."""

    def __init__(self, connector: Any) -> None:
        self.connector = connector
        self.asked = 0

    def connect(self, resource: Any, config: Any) -> Any:
        return self.connector.connect(resource, config)

    def admit(self, resource: Any, config: Any) -> None:
        self.asked += 1


def test_a_create_pass_that_asks_admit_visits_each_module_at_most_twice() -> None:
    env, _ = make()
    reconciler = env.reconcilers[KIND]
    reconciler.connector = admitting = Admitting(reconciler.connector)
    env.apply(database_manifest("db"))
    walk = record(lambda: env.reconcile(KIND, "db"))
    assert admitting.asked == 1 and env.state(KIND, "db") == "creating"
    assert over_target(walk) == {}, " -> ".join(short(m) for m in walk)


def test_a_bounced_helper_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """The provider-config read handed to a helper in another module that calls it back."""
    original = Pass.provider_config

    def bounced(self: Pass) -> Any:
        found: list[Any] = []
        retry.retry_conflicts(functools.partial(lambda: found.append(original(self))),
                              lambda: None, what="bounced read")
        return found[0]

    plain = visits(short(m) for m in create_pass_walk())
    monkeypatch.setattr(Pass, "provider_config", bounced)
    walk = create_pass_walk()
    # The helper's module is entered, and the pass it calls back once more.
    assert visits(short(m) for m in walk) - plain == {"runtime/retry": 1, "runtime/passes": 1}
    assert plain["runtime/passes"] == TARGET
    assert over_target(walk) == {"runtime/passes": TARGET + 1}


def test_the_walk_collapses_consecutive_calls_and_counts_returns_after_another() -> None:
    """The recorder itself, on two runtime modules."""
    obj = {"metadata": {"name": "db", "uid": "u"}}

    def twice_then_bounced() -> None:
        names.name_key(obj, "x")
        names.name_key(obj, "x")
        retry.retry_conflicts(functools.partial(names.name_key, obj, "x"), lambda: None,
                              what="read")

    walk = record(twice_then_bounced)
    assert walk == ["lifecycle.runtime.names", "lifecycle.runtime.retry",
                    "lifecycle.runtime.names"]
    assert visits(walk)["lifecycle.runtime.names"] == 2


def _module(name: str, source: str) -> dict[str, Any]:
    """The functions of ``source``, defined as if in module ``name``."""
    namespace: dict[str, Any] = {"__name__": name}
    exec(source, namespace)  # the test's own fixed source
    return namespace


def test_a_visit_is_an_entry_from_another_module() -> None:
    """Own helpers after a call out stay in the visit; a callback from another module does
    not; attrs' generated methods are left out."""
    a = _module("lifecycle.runtime.walk_a",
                "def helper():\n    pass\n"
                "def outer(leaf):\n    leaf()\n    helper()\n"
                "def back(call):\n    call(helper)\n")
    b = _module("lifecycle.runtime.walk_b",
                "import attrs\n"
                "@attrs.frozen\nclass Value:\n    x: int = 0\n"
                "def leaf():\n    Value(1)\n"
                "def call(f):\n    f()\n")
    assert record(lambda: a["outer"](b["leaf"])) == ["lifecycle.runtime.walk_a",
                                                     "lifecycle.runtime.walk_b"]
    assert record(lambda: a["back"](b["call"])) == [
        "lifecycle.runtime.walk_a", "lifecycle.runtime.walk_b", "lifecycle.runtime.walk_a"]
    assert record(lambda: b["Value"](2)) == []
