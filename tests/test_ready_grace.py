"""Ready reflects the external resource, not whether the provider could be reached.

A connect or observe error that is not terminal, met by an object whose state
reports Ready, holds the state: Synced turns False with the failed operation
and the error's reason, Ready stays as last observed, and turns Unknown only
once the error has lasted longer than the kind's ``Timing.grace()``. Ready
turns False when the provider itself reports the resource failed. The pure
rules are checked on :func:`lifecycle.core.plan.plan` with a moving clock; a
few passes through the reconciler check the same on the embedded API, and a
paused object being deleted reports phase Terminating.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from helpers import KIND, cond, external, make, ready

from lifecycle.core.decide import Facts, decide, unreachable
from lifecycle.core.errors import (
    CredentialsError,
    ExternalError,
    HandledError,
    Severity,
    TerminalError,
    Throttled,
)
from lifecycle.core.kind import FINALIZER, PAUSED
from lifecycle.core.machine import Timing
from lifecycle.core.plan import Plan, plan
from lifecycle.core.values import Observation, ProviderStatus, ResultKind, rfc3339
from lifecycle.machines.managed import ManagedResourceMachine as M
from lifecycle.providers.simcloud import CloudThrottled, CloudUnavailable

T0 = datetime(2026, 1, 1, tzinfo=UTC)
IN_SYNC = Observation(exists=True)
GRACE = M.timing.grace()


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def obj(status: dict[str, Any] | None = None, *, deleting: bool = False,
        annotations: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "x", "uid": "u", "generation": 1, "finalizers": [FINALIZER]}
    if deleting:
        meta["deletionTimestamp"] = rfc3339(T0)
    if annotations:
        meta["annotations"] = annotations
    return {"metadata": meta, "status": status or {}}


def step(status: dict[str, Any] | None, seconds: float, machine: Any = M, **kwargs: Any) -> Plan:
    """One pure pass over an object carrying ``status``, ``seconds`` after T0."""
    deleting = kwargs.pop("deleting", False)
    return plan(machine, obj(status, deleting=deleting), now=at(seconds), **kwargs)


def condition(p: Plan, type_: str) -> dict[str, Any]:
    found = [c for c in p.settled.status["conditions"] if c["type"] == type_]
    assert len(found) == 1, p.settled.status["conditions"]
    return found[0]


def status_of(p: Plan, type_: str) -> tuple[str, str]:
    c = condition(p, type_)
    return c["status"], c["reason"]


def ready_status(machine: Any = M) -> dict[str, Any]:
    """The status of an object created at 0 and Ready at 10."""
    created = step(None, 0, machine, observation=Observation.absent())
    up = step(created.settled.status, 10, machine, observation=IN_SYNC)
    assert up.target == "ready"
    return up.settled.status


# ------------------------------------------------------------- one blip
@pytest.mark.parametrize(
    ("error", "operation"),
    [
        (ExternalError("service unavailable", reason="ProviderUnavailable"), "observe"),
        (Throttled("slow down", retry_after=9.0), "observe"),
        (CredentialsError("provider config missing", reason="ProviderConfigMissing"), "connect"),
    ],
)
def test_one_transient_error_keeps_ready_and_unsyncs(error: HandledError, operation: str) -> None:
    status = ready_status()
    blip = step(status, 20, error=error)
    assert blip.target == "ready" and blip.transition is None
    assert blip.choice.event is None and blip.choice.reason == error.reason
    ready_c = condition(blip, "Ready")
    assert (ready_c["status"], ready_c["reason"]) == ("True", "Available")
    assert ready_c["lastTransitionTime"] == rfc3339(at(10))  # not flipped
    synced = condition(blip, "Synced")
    assert (synced["status"], synced["reason"]) == ("False", "ReconcileError")
    assert synced["message"] == f"{operation} failed ({error.reason}): {error.message}"
    assert blip.settled.status["failure"]["operation"] == operation
    assert blip.settled.status["failure"]["reason"] == error.reason
    assert blip.settled.status["phase"] == "Progressing"
    # Nothing moved: no history entry, no Failed activity, stateSince kept.
    assert blip.settled.status["history"] == status["history"]
    assert "Failed" not in {c["type"] for c in blip.settled.status["conditions"]}
    assert blip.settled.status["stateSince"] == status["stateSince"]
    # The error is still reported and still backs off.
    assert blip.settled.events == (("Warning", error.reason, error.message),)
    assert blip.result.kind is ResultKind.BACKOFF
    assert blip.result.after == (error.retry_after if isinstance(error, Throttled) else 0.0)


def test_recovery_sets_synced_true_and_ready_never_moved() -> None:
    status = ready_status()
    blip = step(status, 20, error=ExternalError("down"))
    back = step(blip.settled.status, 21, observation=IN_SYNC)
    assert back.target == "ready"
    assert status_of(back, "Synced") == ("True", "ReconcileSuccess")
    assert condition(back, "Synced")["lastTransitionTime"] == rfc3339(at(21))
    assert condition(back, "Ready")["lastTransitionTime"] == rfc3339(at(10))
    assert "failure" not in back.settled.status
    assert back.settled.status["phase"] == "Ready"
    assert back.result.kind is ResultKind.REQUEUE_AFTER


# ---------------------------------------------------------------- grace
def test_default_grace_is_three_poll_intervals_and_configurable() -> None:
    assert Timing().grace() == 3 * Timing().poll
    assert Timing(poll=30.0).grace() == 90.0
    assert Timing(poll=30.0, ready_grace=5.0).grace() == 5.0
    assert Timing(ready_grace=0.0).grace() == 0.0


def test_a_persistent_error_turns_ready_unknown_only_after_the_grace() -> None:
    status = step(ready_status(), 20, error=ExternalError("down")).settled.status
    # Synced turned False at 20: within the grace Ready is still True.
    within = step(status, 20 + GRACE, error=ExternalError("still down"))
    assert status_of(within, "Ready") == ("True", "Available")
    past = step(within.settled.status, 20 + GRACE + 1, error=ExternalError("still down"))
    assert past.target == "ready"
    assert status_of(past, "Ready") == ("Unknown", "ObservationStale")
    assert "still down" in condition(past, "Ready")["message"]
    assert f"{int(GRACE)}s" in condition(past, "Ready")["message"]
    assert past.result.kind is ResultKind.BACKOFF
    # Unknown stays Unknown while the error lasts, and recovery restores True.
    later = step(past.settled.status, 20 + 5 * GRACE, error=ExternalError("still down"))
    assert status_of(later, "Ready") == ("Unknown", "ObservationStale")
    back = step(later.settled.status, 20 + 5 * GRACE + 1, observation=IN_SYNC)
    assert status_of(back, "Ready") == ("True", "Available")
    assert status_of(back, "Synced") == ("True", "ReconcileSuccess")


def test_the_grace_is_read_from_the_kinds_timing() -> None:
    class Impatient(M):
        timing = Timing(poll=60.0, ready_grace=5.0)

    status = step(ready_status(Impatient), 20, Impatient, error=ExternalError("down"))
    assert status_of(status, "Ready") == ("True", "Available")
    past = step(status.settled.status, 26, Impatient, error=ExternalError("down"))
    assert status_of(past, "Ready") == ("Unknown", "ObservationStale")
    # The bundled default would still be within its grace at the same instant.
    default = step(status.settled.status, 26, error=ExternalError("down"))
    assert status_of(default, "Ready") == ("True", "Available")


def test_the_grace_counts_from_when_synced_turned_false_not_from_a_pause() -> None:
    status = ready_status()
    conditions = [dict(c) for c in status["conditions"]]
    for c in conditions:
        if c["type"] == "Synced":  # paused long ago, just resumed
            c.update(status="False", reason="ReconcilePaused", lastTransitionTime=rfc3339(T0))
    status = {**status, "conditions": conditions}
    first = step(status, 10 * GRACE, error=ExternalError("down"))
    assert status_of(first, "Ready") == ("True", "Available")
    second = step(first.settled.status, 10 * GRACE + 1, error=ExternalError("down"))
    assert status_of(second, "Ready") == ("True", "Available")
    past = step(second.settled.status, 11 * GRACE + 1, error=ExternalError("down"))
    assert status_of(past, "Ready") == ("Unknown", "ObservationStale")


def test_the_start_of_the_error_is_recorded_and_dropped_on_recovery() -> None:
    status = ready_status()
    assert "operationSince" not in status
    first = step(status, 20, error=ExternalError("down"))
    assert first.settled.status["operationSince"] == rfc3339(at(20))
    again = step(first.settled.status, 30, error=ExternalError("down"))
    assert again.settled.status["operationSince"] == rfc3339(at(20))
    back = step(again.settled.status, 40, observation=IN_SYNC)
    assert "operationSince" not in back.settled.status
    fresh = step(back.settled.status, 50, error=ExternalError("down"))
    assert fresh.settled.status["operationSince"] == rfc3339(at(50))


# ---------------------------------------------------- what may turn it False
def test_provider_reported_unavailable_turns_ready_false() -> None:
    status = ready_status()
    down = step(status, 20, observation=Observation(
        exists=True, status=ProviderStatus.FAILED, message="storage exhausted"))
    assert down.target == "failed"
    assert status_of(down, "Ready") == ("False", "Unavailable")
    assert condition(down, "Ready")["lastTransitionTime"] == rfc3339(at(20))
    assert status_of(down, "Failed") == ("True", "ProviderFailed")


def test_a_terminal_error_keeps_its_fail_edge() -> None:
    status = ready_status()
    refused = step(status, 20, error=TerminalError("bad spec"))
    assert refused.target == "failed"
    assert status_of(refused, "Ready") == ("False", "Unavailable")
    assert refused.result.kind is ResultKind.DONE


def test_states_that_do_not_report_ready_still_detour_through_failed() -> None:
    created = step(None, 0, observation=Observation.absent())
    failed = step(created.settled.status, 5, error=ExternalError("down"))
    assert failed.target == "failed"
    assert status_of(failed, "Ready") == ("False", "Unavailable")
    assert failed.settled.status["operationSince"] == rfc3339(at(0))  # Stuck timer kept


def test_a_new_generation_that_cannot_be_observed_is_still_unknown() -> None:
    status = ready_status()
    newer = plan(M, {**obj(status), "metadata": {**obj(status)["metadata"], "generation": 2}},
                 error=ExternalError("down"), now=at(20))
    assert newer.target == "ready"
    assert status_of(newer, "Ready") == ("Unknown", "GenerationNotObserved")


def test_unreachable_is_decided_from_the_states_ready_and_the_severity() -> None:
    err = ExternalError("x")
    assert unreachable(M, Facts("ready", error=err))
    assert not unreachable(M, Facts("creating", error=err))
    assert not unreachable(M, Facts("ready", error=TerminalError("x")))
    assert not unreachable(M, Facts("ready"))
    assert unreachable(M, Facts("ready", error=HandledError("x", severity=Severity.INFORMATIONAL)))
    held = decide(M, Facts("ready", error=err))
    assert (held.hold, held.transition, held.failed_operation) == (True, None, "observe")
    assert decide(M, Facts("creating", error=err)).hold is False


def test_an_error_while_deleting_a_ready_object_holds_it_terminating() -> None:
    status = ready_status()
    blip = step(status, 20, error=ExternalError("down"), deleting=True)
    assert blip.target == "ready"
    assert blip.settled.status["phase"] == "Terminating"
    assert blip.result.kind is ResultKind.BACKOFF
    gone = step(blip.settled.status, 21, observation=IN_SYNC, deleting=True)
    assert gone.transition is not None and gone.transition.target == "deleting"


# ------------------------------------------------------------- Terminating
def test_a_paused_object_with_a_deletion_timestamp_is_terminating() -> None:
    status = ready_status()
    paused = plan(M, obj(status, deleting=True, annotations={PAUSED: "true"}),
                  observation=IN_SYNC, now=at(20))
    assert paused.result.reason == "Paused"
    assert paused.settled.status["phase"] == "Terminating"
    assert status_of(paused, "Synced") == ("False", "ReconcilePaused")
    alive = plan(M, obj(status, annotations={PAUSED: "true"}), observation=IN_SYNC, now=at(20))
    assert alive.settled.status["phase"] == "Progressing"


# ------------------------------------------------------- through the reconciler
def test_a_describe_outage_keeps_a_ready_object_ready_in_the_reconciler() -> None:
    env, cloud = make()
    ready(env)
    ready_since = env.condition(KIND, "db", "Ready").last_transition_time
    cloud.fail_next("describe", CloudUnavailable("service unavailable"))
    blip = env.reconcile(KIND, "db")
    assert (blip.before, blip.after) == ("ready", "ready")
    assert blip.result.kind is ResultKind.BACKOFF
    assert cond(env, "Ready") == ("True", "Available")
    assert env.condition(KIND, "db", "Ready").last_transition_time == ready_since
    synced = env.condition(KIND, "db", "Synced")
    assert synced.status.value == "False" and "ProviderUnavailable" in synced.message
    assert any(e["type"] == "Warning" and e["reason"] == "ProviderUnavailable"
               for e in env.events("db"))
    env.reconcile(KIND, "db")
    assert cond(env, "Synced") == ("True", "ReconcileSuccess")
    assert cond(env, "Ready") == ("True", "Available")
    assert [to for _, to, _ in env.history(KIND, "db")] == ["creating", "ready"]


def test_throttling_of_a_ready_object_backs_off_without_flipping_ready() -> None:
    env, cloud = make()
    ready(env)
    cloud.fail_next("describe", CloudThrottled("slow down", retry_after=17.0))
    blip = env.reconcile(KIND, "db")
    assert blip.result.kind is ResultKind.BACKOFF and blip.result.after == 17.0
    assert cond(env, "Ready") == ("True", "Available")


def test_an_outage_past_the_grace_reports_unknown_then_recovers() -> None:
    env, cloud = make()
    ready(env)
    grace = env.kinds[KIND].machine.timing.grace()
    cloud.set_faults(error_rate=1.0)  # every call fails from now on
    env.advance(grace / 2)
    assert env.state(KIND, "db") == "ready"
    assert cond(env, "Synced")[0] == "False"
    assert cond(env, "Ready") == ("True", "Available")
    env.advance(2 * grace)  # retries back off to the queue's cap, so give it two
    assert env.state(KIND, "db") == "ready"
    assert cond(env, "Ready") == ("Unknown", "ObservationStale")
    cloud.set_faults(error_rate=0.0)
    env.advance(120.0)
    assert cond(env, "Ready") == ("True", "Available")
    assert cond(env, "Synced") == ("True", "ReconcileSuccess")


def test_a_paused_object_being_deleted_reports_terminating() -> None:
    env, _ = make()
    obj_ = ready(env)
    obj_["metadata"].setdefault("annotations", {})[PAUSED] = "true"
    env.api.replace(obj_)
    env.delete(KIND, "db")
    env.reconcile(KIND, "db")
    stored = env.get(KIND, "db")
    assert stored["metadata"].get("deletionTimestamp")
    assert stored["status"]["phase"] == "Terminating"
    assert cond(env, "Synced") == ("False", "ReconcilePaused")
    assert external(env)  # nothing was deleted while paused
