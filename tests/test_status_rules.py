"""Status bookkeeping rules: condition timestamps, stateSince, idle polling, requeue precedence.

The timestamp rules are checked on the pure path (:func:`lifecycle.core.plan.plan`)
with a clock that moves between passes, so a rule that only holds when every
pass happens at the same instant cannot pass here. The idle-polling rule runs
the bundled kind in the harness for 300 virtual seconds and counts writes.
The requeue rows combine inputs that compete for the result of one pass.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from helpers import KIND, make, ready

from lifecycle.core.decide import requeue
from lifecycle.core.errors import ExternalError, HandledError, Severity, TerminalError, Throttled
from lifecycle.core.kind import FINALIZER
from lifecycle.core.machine import Timing
from lifecycle.core.plan import Plan, plan
from lifecycle.core.values import Observation, ProviderStatus, ResultKind, rfc3339
from lifecycle.machines.managed import ManagedResourceMachine as M

T0 = datetime(2026, 1, 1, tzinfo=UTC)
IN_SYNC = Observation(exists=True)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def stamp(seconds: float) -> str:
    return rfc3339(at(seconds))


def obj(status: dict[str, Any] | None = None, generation: int = 1) -> dict[str, Any]:
    meta = {"name": "x", "uid": "u", "generation": generation, "finalizers": [FINALIZER]}
    return {"metadata": meta, "status": status or {}}


def step(status: dict[str, Any] | None, seconds: float, **kwargs: Any) -> Plan:
    """Plan one pass over an object carrying ``status``, ``seconds`` after T0."""
    return plan(M, obj(status), now=at(seconds), **kwargs)


def condition(p: Plan, type_: str) -> dict[str, Any]:
    found = [c for c in p.settled.status["conditions"] if c["type"] == type_]
    assert len(found) == 1, p.settled.status["conditions"]
    return found[0]


def ready_at(seconds: float) -> dict[str, Any]:
    """The status of an object that was created at 0 and became Ready at ``seconds``."""
    created = step(None, 0, observation=Observation.absent())
    assert created.target == "creating"
    up = step(created.settled.status, seconds, observation=IN_SYNC)
    assert up.target == "ready"
    return up.settled.status


# -------------------------------------------------------- lastTransitionTime
def test_last_transition_time_moves_when_the_status_flips() -> None:
    created = step(None, 0, observation=Observation.absent())
    assert condition(created, "Ready")["status"] == "False"
    assert condition(created, "Ready")["lastTransitionTime"] == stamp(0)
    up = step(created.settled.status, 10, observation=IN_SYNC)
    assert condition(up, "Ready")["status"] == "True"
    assert condition(up, "Ready")["lastTransitionTime"] == stamp(10)
    down = step(up.settled.status, 25, observation=Observation(
        exists=True, status=ProviderStatus.FAILED, message="the service is down"))
    assert down.target == "failed"
    assert condition(down, "Ready")["status"] == "False"
    assert condition(down, "Ready")["lastTransitionTime"] == stamp(25)
    assert condition(down, "Synced")["status"] == "False"
    assert condition(down, "Synced")["lastTransitionTime"] == stamp(25)


def test_a_reason_change_without_a_flip_keeps_last_transition_time() -> None:
    created = step(None, 0, observation=Observation.absent())
    assert (condition(created, "Ready")["status"], condition(created, "Ready")["reason"]) == (
        "False", "Creating")
    failed = step(created.settled.status, 30, error=ExternalError("quota exceeded"))
    ready_cond = condition(failed, "Ready")
    assert (ready_cond["status"], ready_cond["reason"]) == ("False", "Unavailable")
    assert ready_cond["lastTransitionTime"] == stamp(0)


def test_a_message_change_without_a_flip_keeps_last_transition_time() -> None:
    status = ready_at(10)
    first = step(status, 20, error=ExternalError("first problem"))
    assert condition(first, "Synced")["lastTransitionTime"] == stamp(20)
    second = step(first.settled.status, 40, error=ExternalError("a different problem"))
    synced = condition(second, "Synced")
    assert (synced["status"], synced["message"]) == (
        "False", "observe failed (ExternalError): a different problem")
    assert synced["lastTransitionTime"] == stamp(20)


def test_an_unchanged_condition_keeps_last_transition_time_across_passes() -> None:
    status = ready_at(10)
    for seconds in (70, 130, 190):
        p = step(status, seconds, observation=IN_SYNC)
        assert condition(p, "Ready")["lastTransitionTime"] == stamp(10)
        assert condition(p, "Synced")["lastTransitionTime"] == stamp(0)  # True since creation
        status = p.settled.status


# ---------------------------------------------------------------- stateSince
def test_state_since_stays_fixed_while_the_state_is_unchanged() -> None:
    status = ready_at(10)
    assert status["stateSince"] == stamp(10)
    for seconds in (60, 120, 600):
        p = step(status, seconds, observation=IN_SYNC)
        assert p.target == "ready"
        assert p.settled.status["stateSince"] == stamp(10)
        status = p.settled.status


def test_state_since_moves_when_the_state_changes() -> None:
    status = ready_at(10)
    p = step(status, 50, observation=Observation(exists=True, up_to_date=False))
    assert p.target == "updating"
    assert p.settled.status["stateSince"] == stamp(50)


def test_a_failed_object_that_keeps_failing_keeps_its_state_since() -> None:
    status = step(None, 0, observation=Observation.absent()).settled.status  # creating
    first = step(status, 20, error=ExternalError("down"))
    assert first.target == "failed"
    again = step(first.settled.status, 80, error=ExternalError("still down"))
    assert again.target == "failed"
    assert again.settled.status["stateSince"] == stamp(20)


# ------------------------------------------------------------- idle polling
def test_an_idle_ready_object_polled_for_300_seconds_makes_no_status_writes() -> None:
    env, cloud = make()
    ready(env)
    before = env.get(KIND, "db")
    writes = env.api.writes(KIND)
    status_writes = env.api.stats["replace_status"]
    start = env.clock.now()
    polls = env.advance(300)
    assert env.clock.now() - start >= timedelta(seconds=300)
    assert len(polls) >= 4, "the Ready object is polled about once a minute"
    assert len({p.time for p in polls}) == len(polls), "each poll happens at a later moment"
    assert all(p.after == "ready" and p.error is None for p in polls)
    assert cloud.count("describe") >= len(polls)
    assert env.api.stats["replace_status"] - status_writes == 0
    assert env.api.writes(KIND) - writes == 0
    after = env.get(KIND, "db")
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]


# ------------------------------------------------- requeue: competing inputs
TIMING = Timing()


def result(state: str = "ready", **inputs: Any) -> tuple[ResultKind, float, str]:
    r = requeue(state=state, final=inputs.pop("final", False), timing=TIMING, key="uid-1",
                **inputs)
    return r.kind, r.after, r.reason


@pytest.mark.parametrize(
    ("inputs", "expected"),
    [
        # A handled error backs off even while a provider operation is pending.
        ({"state": "creating", "error": ExternalError("down"), "waiting": True},
         (ResultKind.BACKOFF, 0.0, "ExternalError")),
        ({"state": "ready", "error": Throttled("slow", retry_after=7), "waiting": True},
         (ResultKind.BACKOFF, 7.0, "Throttled")),
        # A changed object is reconciled now, before any error backoff.
        ({"state": "failed", "error": ExternalError("down"), "dirty": True},
         (ResultKind.REQUEUE_NOW, 0.0, "ObjectChanged")),
        ({"state": "failed", "error": TerminalError("bad"), "dirty": True},
         (ResultKind.REQUEUE_NOW, 0.0, "ObjectChanged")),
        # A terminal error ends the retries, but not while deleting: that backs off.
        ({"state": "failed", "error": TerminalError("bad")},
         (ResultKind.DONE, 0.0, "TerminalError")),
        ({"state": "deleting", "error": TerminalError("bad"), "deleting": True},
         (ResultKind.BACKOFF, 0.0, "InvalidSpec")),
        ({"state": "deleting", "error": TerminalError("bad"), "deleting": True,
          "waiting": True},
         (ResultKind.BACKOFF, 0.0, "InvalidSpec")),
        ({"state": "creating", "error": TerminalError("bad"), "waiting": True},
         (ResultKind.DONE, 0.0, "TerminalError")),
        # An informational error does not change the requeue: waiting or polling goes on.
        ({"state": "ready", "error": HandledError("fyi", severity=Severity.INFORMATIONAL),
          "waiting": True},
         (ResultKind.REQUEUE_AFTER, TIMING.default_wait, "Waiting")),
        ({"state": "creating", "error": HandledError("fyi", severity=Severity.INFORMATIONAL)},
         (ResultKind.REQUEUE_AFTER, TIMING.wait_for("creating"), "Waiting")),
        # A final state is done whatever else is true.
        ({"state": "deleted", "final": True, "dirty": True, "error": ExternalError("x"),
          "waiting": True},
         (ResultKind.DONE, 0.0, "Deleted")),
        # Dirty wins over waiting.
        ({"state": "creating", "dirty": True, "waiting": True},
         (ResultKind.REQUEUE_NOW, 0.0, "ObjectChanged")),
    ],
)
def test_requeue_precedence_for_competing_inputs(
        inputs: dict[str, Any], expected: tuple[ResultKind, float, str]) -> None:
    assert result(**inputs) == expected
