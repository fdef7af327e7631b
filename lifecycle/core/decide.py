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
from collections.abc import Mapping
from typing import Any

import attrs

from lifecycle.core.errors import HandledError, Severity, Throttled
from lifecycle.core.kind import FINALIZER, OPERATION, OWNER, PAUSED, RECONCILE_POLICY
from lifecycle.core.machine import LifecycleMachine, Timing
from lifecycle.core.values import Condition, ConditionStatus, Observation, ProviderStatus, Result


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
class Gate:
    """What the object's metadata and stored status allow, before any write or call.

    ``stop`` names why the reconcile ends here (``Ignored``, ``NotOwned``,
    ``NotClaimed``, ``TerminalError``); ``notes`` are ConfigValid / StatusValid
    conditions about the object itself; ``repaired`` is the corrupt stored
    state value, when there was one.
    """

    state: str
    stop: str | None = None
    stop_message: str = ""
    forced: bool = False
    deleting: bool = False
    paused: bool = False
    orphan: bool = False
    policy: ReconcilePolicy = ReconcilePolicy.MANAGE
    notes: tuple[Condition, ...] = ()
    repaired: str | None = None


def gate(
    machine: type[LifecycleMachine],
    obj: Mapping[str, Any],
    namespace_annotations: Mapping[str, str],
    *,
    operator_id: str | None = None,
    default_policy: ReconcilePolicy = ReconcilePolicy.MANAGE,
) -> Gate:
    """Steps 2 to 4 of SPEC section 2, decided from the object alone (pure).

    The ``ignore`` annotation and a namespace owned by another operator stop
    the reconcile before anything is written; the reconcile policy resolves
    object annotation, then namespace annotation, then ``default_policy``;
    an unknown value at one level falls through to the next and says so.
    """
    table = machine.table()
    meta = obj.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    status = obj.get("status") if isinstance(obj.get("status"), dict) else {}
    generation = meta.get("generation", 1)
    generation = generation if isinstance(generation, int) else 1
    notes: list[Condition] = []
    stored = status.get("state")
    state = restore(machine, status)
    repaired = None
    if stored is not None and state != stored:
        repaired = str(stored)[:64]
        notes.append(_note("StatusValid", "StateRepaired",
                           f"stored state {repaired!r} is not a state of {table.name}; "
                           f"restarted from {state}", generation))
    operation = annotations.get(OPERATION)
    if operation == "ignore":
        return Gate(state, stop="Ignored")
    owner = namespace_annotations.get(OWNER)
    if owner is not None and owner != operator_id:
        return Gate(state, stop="NotOwned",
                    stop_message=f"namespace {meta.get('namespace')} is owned by operator "
                                 f"{owner!r}; skipped")
    if operation not in (None, "reconcile"):
        notes.append(_note("ConfigValid", "UnknownOperation",
                           f"annotation {OPERATION} has unknown value {str(operation)[:64]!r}; "
                           "expected 'reconcile' or 'ignore'; ignored", generation))
    policy, source, unknown = default_policy, "operator default", []
    for where, values in (("object", annotations), ("namespace", namespace_annotations)):
        value = values.get(RECONCILE_POLICY)
        if value is None:
            continue
        try:
            policy, source = ReconcilePolicy(value), f"{where} annotation"
            break
        except ValueError:
            unknown.append((where, str(value)[:64]))
    for where, value in unknown:
        notes.append(_note("ConfigValid", "UnknownReconcilePolicy",
                           f"{where} annotation {RECONCILE_POLICY} has unknown value {value!r}; "
                           f"using {policy.value!r} from the {source}", generation))
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
    raw = spec.get("deletionPolicy", "Delete")
    try:
        deletion_policy = DeletionPolicy(raw)
    except (ValueError, TypeError):
        deletion_policy = DeletionPolicy.DELETE
        notes.append(_note("ConfigValid", "UnknownDeletionPolicy",
                           f"spec.deletionPolicy {str(raw)[:64]!r} is not Delete or Orphan; "
                           "using Delete", generation))
    deleting = bool(meta.get("deletionTimestamp"))
    forced = operation == "reconcile"
    common = {"forced": forced, "deleting": deleting, "policy": policy, "notes": tuple(notes),
              "repaired": repaired}
    if deleting and FINALIZER not in (meta.get("finalizers") or []):
        return Gate(state, stop="NotClaimed", **common)
    if str(annotations.get(PAUSED, "")).lower() == "true":
        return Gate(state, paused=True, **common)
    orphan = deleting and (
        not policy.allows_delete or deletion_policy is DeletionPolicy.ORPHAN)
    failure = status.get("failure") if isinstance(status.get("failure"), dict) else {}
    if (
        state == "failed"
        and failure.get("severity") == Severity.TERMINAL.value
        and failure.get("generation") == generation
        and not forced
        and not deleting
    ):
        return Gate(state, stop="TerminalError", **common)
    return Gate(state, orphan=orphan, **common)


def restore(machine: type[LifecycleMachine], status: Any) -> str:
    """The stored state, or the initial state when it is missing, unknown, final or corrupt."""
    table = machine.table()
    state = status.get("state") if isinstance(status, dict) else None
    if isinstance(state, str) and state in table.states and not table.states[state].final:
        return state
    return table.initial


def _note(type_: str, reason: str, message: str, generation: int) -> Condition:
    return Condition(type_, ConditionStatus.FALSE, reason, message, generation)


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
    if facts.forced and obs.up_to_date and facts.policy.allows_modify:
        # The reconcile annotation forces the "already up to date" shortcut to run.
        return Choice("update", "ReconcileRequested",
                      "the reconcile annotation asked for a full update")
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
    deleting: bool = False,
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
        if error.severity is Severity.TERMINAL and not deleting:
            # No retry until the spec changes; but a deletion cannot wait for
            # a spec change (it is ignored while deleting), so it backs off.
            return Result.done("TerminalError")
        if error.severity is not Severity.INFORMATIONAL:
            retry_after = error.retry_after if isinstance(error, Throttled) else 0.0
            return Result.backoff(error.reason, at_least=retry_after)
    if waiting or state in timing.wait:
        return Result.later(timing.wait_for(state), "Waiting")
    return Result.later(poll_interval(timing, key), "Poll")
