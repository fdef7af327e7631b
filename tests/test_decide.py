"""The pure core: event choice from facts, the decided transition, and the requeue matrix."""

from __future__ import annotations

import pytest

from lifecycle.core.decide import (
    Choice,
    Facts,
    ReconcilePolicy,
    choose_event,
    decide,
    poll_interval,
    requeue,
    transit,
)
from lifecycle.core.errors import (
    CredentialsError,
    ExternalError,
    HandledError,
    Severity,
    TerminalError,
    Throttled,
)
from lifecycle.core.machine import Timing
from lifecycle.core.values import Observation, ProviderStatus, ResultKind
from lifecycle.machines.managed import ManagedResourceMachine as M

ABSENT = Observation.absent()
READY = Observation(exists=True)
DRIFTED = Observation(exists=True, up_to_date=False)
PENDING = Observation(exists=True, status=ProviderStatus.PENDING, message="creating")
BROKEN = Observation(exists=True, status=ProviderStatus.FAILED, message="disk full")
SKIP = ReconcilePolicy.SKIP
DETACH = ReconcilePolicy.DETACH_ON_DELETE


@pytest.mark.parametrize(
    ("facts", "event", "reason"),
    [
        (Facts("unclaimed", observation=ABSENT), "create", "CreateRequested"),
        (Facts("ready", observation=ABSENT), "create", "ExternalResourceVanished"),
        (Facts("creating", observation=ABSENT), "create", "CreateRequested"),
        (Facts("creating", observation=PENDING), "wait", "ProviderPending"),
        (Facts("creating", observation=READY), "available", "Available"),
        (Facts("ready", observation=DRIFTED), "update", "UpdateRequested"),
        (Facts("ready", observation=DRIFTED, policy=SKIP), "available", "ReconcileSkipped"),
        (Facts("unclaimed", observation=ABSENT, policy=SKIP), None, "ExternalResourceAbsent"),
        (Facts("ready", observation=BROKEN), "fail", "ProviderFailed"),
        (Facts("ready", error=ExternalError("boom")), "fail", "ExternalError"),
        (Facts("ready", deleting=True, observation=READY), "delete", "DeleteRequested"),
        (Facts("creating", deleting=True, observation=PENDING), "delete", "DeleteRequested"),
        (Facts("deleting", deleting=True, observation=PENDING), "wait", "DeletionPending"),
        (Facts("deleting", deleting=True, observation=READY), "delete", "DeleteRequested"),
        (Facts("deleting", deleting=True, observation=ABSENT), "gone", "ExternalResourceDeleted"),
        (
            Facts("ready", deleting=True, observation=READY, policy=DETACH),
            "orphan",
            "DeletionOrphaned",
        ),
        (
            Facts("ready", deleting=True, observation=READY, policy=SKIP),
            "orphan",
            "DeletionOrphaned",
        ),
        # Deletion ignores the spec: a drifted resource is deleted, not updated.
        (Facts("ready", deleting=True, observation=DRIFTED), "delete", "DeleteRequested"),
        (Facts("ready"), None, "NotObserved"),
    ],
)
def test_choose_event(facts: Facts, event: str | None, reason: str) -> None:
    choice = choose_event(facts)
    assert (choice.event, choice.reason) == (event, reason)


def test_handled_error_wins_over_deletion() -> None:
    facts = Facts("ready", deleting=True, error=ExternalError("down"), observation=None)
    assert choose_event(facts).event == "fail"


TIMING = Timing(poll=60.0, jitter=0.1, wait={"creating": 5.0, "deleting": 2.0})


@pytest.mark.parametrize(
    ("kwargs", "kind", "after"),
    [
        # Rows of the requeue matrix.
        ({"state": "ready", "dirty": True}, ResultKind.REQUEUE_NOW, 0.0),
        ({"state": "failed", "error": ExternalError("x")}, ResultKind.BACKOFF, 0.0),
        ({"state": "failed", "error": Throttled("slow", retry_after=9)}, ResultKind.BACKOFF, 9.0),
        ({"state": "failed", "error": TerminalError("bad")}, ResultKind.DONE, 0.0),
        ({"state": "creating"}, ResultKind.REQUEUE_AFTER, 5.0),
        ({"state": "deleting"}, ResultKind.REQUEUE_AFTER, 2.0),
        ({"state": "deleted", "final": True}, ResultKind.DONE, 0.0),
    ],
)
def test_requeue_matrix(kwargs: dict, kind: ResultKind, after: float) -> None:
    args = {"final": False, "timing": TIMING, "key": "uid-1", **kwargs}
    result = requeue(**args)
    assert result.kind is kind
    assert result.after == after


def test_ready_in_sync_polls_with_stable_jitter() -> None:
    result = requeue(state="ready", final=False, timing=TIMING, key="uid-1")
    assert result.kind is ResultKind.REQUEUE_AFTER
    assert 54.0 <= result.after <= 66.0
    assert result.after == poll_interval(TIMING, "uid-1")
    spread = {poll_interval(TIMING, f"uid-{i}") for i in range(50)}
    assert len(spread) > 10  # objects do not all poll at the same moment


def test_informational_error_does_not_back_off() -> None:
    note = HandledError("fyi", severity=Severity.INFORMATIONAL)
    assert requeue(state="ready", final=False, timing=TIMING, key="k", error=note).kind is (
        ResultKind.REQUEUE_AFTER
    )


def test_policies() -> None:
    assert ReconcilePolicy.MANAGE.allows_modify and ReconcilePolicy.MANAGE.allows_delete
    assert not SKIP.allows_modify and not SKIP.allows_delete
    assert DETACH.allows_modify and not DETACH.allows_delete


def test_wait_event_in_a_state_without_interval_uses_default_wait() -> None:
    result = requeue(state="provisioning", final=False, timing=TIMING, key="k", waiting=True)
    assert (result.kind, result.after) == (ResultKind.REQUEUE_AFTER, TIMING.default_wait)
    polled = requeue(state="provisioning", final=False, timing=TIMING, key="k")
    assert polled.after != TIMING.default_wait


# ------------------------------------------------------------ decide: event and transition
def test_decide_takes_the_transition_of_the_chosen_event() -> None:
    d = decide(M, Facts("ready", observation=DRIFTED))
    assert d.choice.event == "update" and d.transition is not None
    assert (d.source, d.transition.target) == ("ready", "updating")
    assert d.actions == ("update_external",) and d.error is None


def test_decide_remembers_which_operation_failed() -> None:
    assert decide(M, Facts("ready", error=ExternalError("x"))).failed_operation == "observe"
    assert decide(M, Facts("ready", error=CredentialsError("x"))).failed_operation == "connect"
    # The provider reports a failure: the operation under way is remembered,
    # and the fail edge runs no actions.
    d = decide(M, Facts("creating", observation=BROKEN))
    assert d.transition is not None and d.transition.target == "failed"
    assert d.error is not None and d.error.reason == "ProviderFailed"
    assert d.failed_operation == "create" and d.actions == ()


def test_an_event_the_state_does_not_allow_is_a_handled_error() -> None:
    d = transit(M, "deleting", Choice("create", "CreateRequested"), Facts("deleting"))
    assert d.transition is None and d.actions == ()
    assert d.error is not None and d.error.reason == "EventNotAllowed"


def test_a_guard_that_raises_is_a_handled_error_naming_only_its_class() -> None:
    class Touchy(M):
        def failed_during_update(self, facts: Facts) -> bool:
            raise RuntimeError("secret detail")

    d = decide(Touchy, Facts("failed", observation=PENDING))
    assert d.transition is None and d.failed_operation == "guard"
    assert d.error is not None and d.error.reason == "GuardError"
    assert "secret detail" not in d.error.message and "RuntimeError" in d.error.message
