"""The pure core of a reconcile: which event to fire, and which result to return.

Nothing here does I/O. The reconciler gathers :class:`Facts` (stored state,
deletion, policy, observation, error, generations), asks :func:`choose_event`
for exactly one event, lets the machine table pick the target, and asks
:func:`requeue` for the result, following the requeue matrix of SPEC section 3.
Stored conditions never steer a decision (seed 000): only fresh observations,
the stored state and the failed operation do.
"""

from __future__ import annotations

import enum
import zlib

import attrs

from lifecycle.errors import HandledError, Severity, Throttled
from lifecycle.machine import Timing
from lifecycle.values import Observation, ProviderStatus, Result


class ReconcilePolicy(enum.StrEnum):
    """What the operator may do to the external resource (seed 001)."""

    MANAGE = "manage"
    SKIP = "skip"
    DETACH_ON_DELETE = "detach-on-delete"

    @property
    def allows_modify(self) -> bool:
        """Create and update are allowed."""
        return self is not ReconcilePolicy.SKIP

    @property
    def allows_delete(self) -> bool:
        """Deleting the external resource on object deletion is allowed."""
        return self is ReconcilePolicy.MANAGE


class DeletionPolicy(enum.StrEnum):
    """``spec.deletionPolicy``: delete the external resource, or leave it behind."""

    DELETE = "Delete"
    ORPHAN = "Orphan"


@attrs.frozen
class Facts:
    """Everything the event choice depends on, gathered by the reconciler."""

    state: str
    deleting: bool = False
    policy: ReconcilePolicy = ReconcilePolicy.MANAGE
    observation: Observation | None = None
    error: HandledError | None = None
    failed_operation: str | None = None
    generation: int = 1
    observed_generation: int = 0
    forced: bool = False


@attrs.frozen
class Choice:
    """The event to fire and why; ``event`` is None when nothing should change."""

    event: str | None
    reason: str
    message: str = ""


def choose_event(facts: Facts) -> Choice:
    """Choose exactly one event from the facts of this reconcile.

    Order: a handled error first; then deletion (which pre-empts everything
    and ignores the spec); then the observation.
    """
    if facts.error is not None:
        return Choice("fail", facts.error.reason, facts.error.message)
    obs = facts.observation
    if facts.deleting:
        if not facts.policy.allows_delete:
            return Choice("orphan", "DeletionOrphaned", "policy leaves the external resource")
        if obs is None or not obs.exists:
            return Choice("gone", "ExternalResourceDeleted", "external resource is gone")
        if facts.state == "deleting" and obs.status is ProviderStatus.PENDING:
            return Choice("wait", "DeletionPending", obs.message or "provider is deleting")
        return Choice("delete", "DeleteRequested", "deleting the external resource")
    if obs is None:
        return Choice(None, "NotObserved")
    if not obs.exists:
        if not facts.policy.allows_modify:
            return Choice(
                None,
                "ExternalResourceAbsent",
                "external resource does not exist and reconcile policy 'skip' forbids creating it",
            )
        if facts.state == "ready":
            return Choice("create", "ExternalResourceVanished", "external resource vanished")
        return Choice("create", "CreateRequested", "creating the external resource")
    if obs.status is ProviderStatus.FAILED:
        return Choice("fail", "ProviderFailed", obs.message or "provider reports failure")
    if obs.status is ProviderStatus.PENDING:
        return Choice("wait", "ProviderPending", obs.message or "provider operation pending")
    if not obs.up_to_date and facts.policy.allows_modify:
        return Choice("update", "UpdateRequested", "external resource differs from spec")
    if not obs.up_to_date:
        return Choice(
            "available",
            "ReconcileSkipped",
            "external resource differs from spec; reconcile policy 'skip' forbids updating it",
        )
    return Choice("available", "Available", "")


def poll_interval(timing: Timing, key: str) -> float:
    """The Ready poll interval with a jitter that is stable per object key."""
    spread = (zlib.crc32(key.encode()) % 2001 - 1000) / 1000.0
    return max(0.0, timing.poll * (1.0 + timing.jitter * spread))


def requeue(
    *,
    state: str,
    final: bool,
    timing: Timing,
    key: str,
    error: HandledError | None = None,
    dirty: bool = False,
    waiting: bool = False,
) -> Result:
    """The requeue matrix (SPEC section 3) for the outcome of one reconcile.

    Final state: done. Dirty object: now. Handled error: backoff (at least a
    provider's retry-after), or done when terminal. Waiting on a provider
    operation (``waiting``, or a state with a wait interval): that state's
    wait interval. Otherwise the poll interval with jitter.
    """
    if final:
        return Result.done("Deleted")
    if dirty:
        return Result.now("ObjectChanged")
    if error is not None:
        if error.severity is Severity.TERMINAL:
            return Result.done("TerminalError")
        if error.severity is Severity.RETRYABLE:
            retry_after = error.retry_after if isinstance(error, Throttled) else 0.0
            return Result.backoff(error.reason, at_least=retry_after)
    if waiting or state in timing.wait:
        return Result.later(timing.wait_for(state), "Waiting")
    return Result.later(poll_interval(timing, key), "Poll")
