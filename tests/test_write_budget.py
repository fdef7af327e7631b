"""How many API writes a DatabaseInstance costs, from absent to Ready and back.

The figures are pinned so that a change to the reconciler's write sequence
is a deliberate one: the finalizer, the external name and the pending
journal entry are one object write before the create; the cloud's answer
shows the instance available, so the same pass closes the entry in the same
write as the late-initialised spec, and its one status write observes the
generation that write produced. A deletion the cloud completes at once is
the pending entry and the finalizer's removal: no status, no Event.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from helpers import KIND, make, ready

from lifecycle.core.kind import FINALIZER, INTENT
from lifecycle.core.values import ResultKind
from lifecycle.kube.errors import NotFound, ServerError
from lifecycle.providers.simcloud.scenarios.harness import database_manifest
from lifecycle.testing import Environment


def budget(env: Environment) -> dict[str, int]:
    """The writes made since the last reset, by what they wrote."""
    stats = env.api.stats
    status = stats["replace_status"]
    return {
        "object": env.api.writes(KIND) - status,
        "status": status,
        "secret": env.api.writes("Secret"),
        "event": stats["record_event"],
        "other": env.api.writes() - env.api.writes(KIND) - env.api.writes("Secret"),
    }


def to_ready(env: Environment) -> tuple[dict[str, int], int]:
    """Apply ``db``, run it to Ready; the writes that took and the passes run."""
    env.apply(database_manifest("db"))
    env.api.reset_stats()
    steps = env.run_until_idle()
    assert env.state(KIND, "db") == "ready"
    return budget(env), len(steps)


def test_a_synchronous_create_costs_two_object_writes_one_status_write() -> None:
    # The cloud completes the create within its request, as in the end-to-end benchmark.
    env, _ = make(create_polls=0)
    writes, passes = to_ready(env)
    assert passes == 1
    assert writes == {"object": 2, "status": 1, "secret": 2, "event": 1, "other": 0}
    obj = env.get(KIND, "db")
    assert obj["metadata"]["generation"] == 2  # the late-initialised version
    assert obj["status"]["observedGeneration"] == 2
    assert FINALIZER in obj["metadata"]["finalizers"]
    assert json.loads(obj["metadata"]["annotations"][INTENT])["outcome"] == "succeeded"
    # Settled: the next pass is a poll that writes nothing.
    env.api.reset_stats()
    step = env.reconcile(KIND, "db")
    assert step.result.reason == "Poll"
    assert env.api.writes() == 0


def test_a_create_that_takes_a_poll_more_writes_only_its_status_again() -> None:
    env, _ = make(create_polls=2)
    writes, passes = to_ready(env)
    assert passes == 3
    assert writes == {"object": 2, "status": 3, "secret": 3, "event": 2, "other": 0}


def test_an_update_costs_one_pass_and_a_delete_two_object_writes_only() -> None:
    env, _ = make(create_polls=0, modify_polls=0, delete_polls=0)
    ready(env)
    env.apply(database_manifest("db", storage_gb=30))
    env.api.reset_stats()
    env.run_until_idle()
    assert env.state(KIND, "db") == "ready"
    # The pending entry before the call; observed in the same pass, its close waits for
    # a later write (the object is Ready: the entry is not resumed).
    assert budget(env) == {"object": 1, "status": 1, "secret": 0, "event": 1, "other": 0}

    env.delete(KIND, "db")
    env.api.reset_stats()
    env.run_until_idle()
    assert not env.exists(KIND, "db")
    # The pending entry; its close together with the finalizer's removal, in the same
    # pass: no status or Event for an object that goes with the finalizer.
    assert budget(env) == {"object": 2, "status": 0, "secret": 0, "event": 0, "other": 0}


def test_the_claim_and_the_pending_entry_are_one_write_before_the_create() -> None:
    env, cloud = make(create_polls=0)
    env.apply(database_manifest("db"))
    writes: list[tuple[list[str], dict[str, Any]]] = []
    real_replace = env.api.replace

    def spy(obj: dict[str, Any]) -> dict[str, Any]:
        if obj["kind"] == KIND:
            writes.append(([c.operation for c in cloud.calls], obj["metadata"]))
        return real_replace(obj)

    env.api.replace = spy  # type: ignore[method-assign]
    env.reconcile(KIND, "db")
    (calls, meta), _late_init = writes
    assert calls == ["describe"]  # observed, nothing changed yet
    assert FINALIZER in meta["finalizers"]
    assert json.loads(meta["annotations"][INTENT])["outcome"] == "pending"


@pytest.mark.parametrize("concurrent", [False, True])
def test_late_init_is_observed_unless_the_spec_changed_meanwhile(concurrent: bool) -> None:
    """A user's spec change that races the late-init write is not marked observed."""
    env, _ = make(create_polls=1)  # the late-init is the second pass's
    env.apply(database_manifest("db"))
    env.reconcile(KIND, "db")  # creates
    real_replace = env.api.replace
    raced: list[bool] = []

    def racing(obj: dict[str, Any]) -> dict[str, Any]:
        if concurrent and not raced and obj["kind"] == KIND:
            raced.append(True)
            stored = env.get(KIND, "db")
            stored["spec"]["forProvider"]["storageGB"] = 50
            real_replace(stored)  # the user's edit lands first: ours gets a 409
        return real_replace(obj)

    env.api.replace = racing  # type: ignore[method-assign]
    step = env.reconcile(KIND, "db")
    obj = env.get(KIND, "db")
    assert obj["spec"]["forProvider"]["version"] == "15"
    if concurrent:
        assert obj["metadata"]["generation"] == 3
        assert obj["status"]["observedGeneration"] == 1
        assert step.result.kind is ResultKind.REQUEUE_NOW
    else:
        assert obj["metadata"]["generation"] == 2
        assert obj["status"]["observedGeneration"] == 2
        assert step.result.reason == "Poll"


@pytest.mark.parametrize("error", [NotFound, ServerError])
def test_a_failed_claim_write_ends_the_pass_before_any_create(error: type[Exception]) -> None:
    """The combined write fails as an object write: no create, never a provider error."""
    env, cloud = make(create_polls=0)
    env.apply(database_manifest("db"))
    env.faults.fail("update", KIND, error=error, times=1)
    step = env.reconcile(KIND, "db")
    assert cloud.instances() == {}
    assert env.state(KIND, "db") is None  # no status written: nothing was decided
    if error is NotFound:
        assert step.error is None and step.result is not None
        assert step.result.reason == "NotFound"
        env.enqueue(KIND, "db")  # the object is still there after all: a new event
    else:
        assert step.error is not None and "API error" in step.error
    env.run_until_idle()
    assert env.state(KIND, "db") == "ready"
    assert len(cloud.instances()) == 1
