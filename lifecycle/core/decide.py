"""The pure core of a reconcile: which event to fire, and which result to return.

Nothing here does I/O. :func:`gate` decides from the stored object alone
whether the pass goes on; the reconciler gathers :class:`Facts` (stored state,
deletion, policy, observation, error, generations); :func:`decide` asks
:func:`choose_event` for exactly one event and lets the machine table pick the
transition (a :class:`Decision`); :func:`requeue` turns the outcome into the
requeue result. Stored conditions never steer a decision: they are a report
for people and may be stale or edited, so only fresh observations, the stored
state and the failed operation do.
"""

from __future__ import annotations

import enum
import zlib
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from lifecycle.core import objects
from lifecycle.core.errors import CredentialsError, HandledError, Severity, Throttled
from lifecycle.core.kind import FINALIZER, OPERATION, OWNER, PAUSED, RECONCILE_POLICY
from lifecycle.core.machine import LifecycleMachine, Timing, TransitionSpec
from lifecycle.core.values import (
    Condition,
    ConditionStatus,
    Observation,
    ProviderStatus,
    Result,
    drift_detail,
)
from lifecycle.core.vocabulary import ConditionTypes, Events, Reasons, States

__all__ = [
    "OPERATION_OF_STATE",
    "Choice",
    "Decision",
    "DeletionPolicy",
    "Facts",
    "Gate",
    "ReconcilePolicy",
    "choose_event",
    "decide",
    "fail_edge",
    "gate",
    "guard_of",
    "poll_interval",
    "requeue",
    "restore",
    "transit",
    "unreachable",
]


class ReconcilePolicy(enum.StrEnum):
    """What the operator may do to the external resource.

    ``manage`` creates, updates and deletes it; ``skip`` only observes and
    reports; ``detach-on-delete`` manages it but leaves it behind when the
    object is deleted.
    """

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

    ``stop`` names why the reconcile ends here (``Ignored``; ``NotOwned``: the
    namespace belongs to another operator; ``NotClaimed``: the object is being
    deleted but never got our finalizer, so nothing of ours exists to clean
    up; ``TerminalError``); ``notes`` are ConfigValid / StatusValid
    conditions about the object itself; ``repaired`` is the corrupt stored
    state value, when there was one; ``generation`` is the object's
    ``metadata.generation`` (1 when missing or malformed).
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
    generation: int = 1


def gate(
    machine: type[LifecycleMachine],
    obj: Mapping[str, Any],
    namespace_annotations: Mapping[str, str],
    *,
    operator_id: str | None = None,
    default_policy: ReconcilePolicy = ReconcilePolicy.MANAGE,
) -> Gate:
    """Whether and how the pass goes on, decided from the object alone (pure).

    Runs before anything is written or called. The ``ignore`` annotation and
    a namespace owned by another operator stop the reconcile at once; the
    reconcile policy resolves object annotation, then namespace annotation,
    then ``default_policy``; an unknown value at one level falls through to
    the next and says so.
    """
    table = machine.table()
    meta = objects.metadata(obj)
    annotations = objects.mapping(meta.get("annotations"))
    status = objects.status(obj)
    generation = objects.generation(obj)
    notes: list[Condition] = []
    stored = status.get("state")
    state = restore(machine, status)
    repaired = None
    if stored is not None and state != stored:
        repaired = str(stored)[:64]
        notes.append(_note(ConditionTypes.STATUS_VALID, "StateRepaired",
                           f"stored state {repaired!r} is not a state of {table.name}; "
                           f"restarted from {state}", generation))
    operation = annotations.get(OPERATION)
    if operation == "ignore":
        return Gate(state, stop="Ignored", generation=generation)
    owner = namespace_annotations.get(OWNER)
    if owner is not None and owner != operator_id:
        return Gate(state, stop="NotOwned",
                    stop_message=f"namespace {meta.get('namespace')} is owned by operator "
                                 f"{owner!r}; skipped", generation=generation)
    if operation not in (None, "reconcile"):
        notes.append(_note(ConditionTypes.CONFIG_VALID, Reasons.UNKNOWN_OPERATION,
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
        notes.append(_note(ConditionTypes.CONFIG_VALID, Reasons.UNKNOWN_RECONCILE_POLICY,
                           f"{where} annotation {RECONCILE_POLICY} has unknown value {value!r}; "
                           f"using {policy.value!r} from the {source}", generation))
    raw = objects.spec(obj).get("deletionPolicy", "Delete")
    try:
        deletion_policy = _DELETION_POLICIES.get(raw)  # as DeletionPolicy(raw), without the call
    except TypeError:  # an unhashable value
        deletion_policy = None
    if deletion_policy is None:
        deletion_policy = DeletionPolicy.DELETE
        notes.append(_note(ConditionTypes.CONFIG_VALID, Reasons.UNKNOWN_DELETION_POLICY,
                           f"spec.deletionPolicy {str(raw)[:64]!r} is not Delete or Orphan; "
                           "using Delete", generation))
    deleting = bool(meta.get("deletionTimestamp"))
    forced = operation == "reconcile"
    stop, paused, orphan = None, False, False
    if deleting and FINALIZER not in (meta.get("finalizers") or []):
        stop = "NotClaimed"
    elif str(annotations.get(PAUSED, "")).lower() == "true":
        paused = True
    else:
        orphan = deleting and (
            not policy.allows_delete or deletion_policy is DeletionPolicy.ORPHAN)
        if state == States.FAILED and not forced and not deleting:
            failure = objects.mapping(status.get("failure"))
            if (failure.get("severity") == Severity.TERMINAL.value
                    and failure.get("generation") == generation):
                stop, orphan = "TerminalError", False
    return Gate(state, stop, "", forced, deleting, paused, orphan, policy, tuple(notes),
                repaired, generation)


_DELETION_POLICIES = {p.value: p for p in DeletionPolicy}


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
        return Choice(Events.FAIL, facts.error.reason, facts.error.message)
    obs = facts.observation
    if facts.deleting:
        if not facts.policy.allows_delete:
            return Choice(Events.ORPHAN, Reasons.DELETION_ORPHANED,
                          "policy leaves the external resource")
        if obs is None or not obs.exists:
            return Choice(Events.GONE, Reasons.EXTERNAL_RESOURCE_DELETED,
                          "external resource is gone")
        if facts.state == States.DELETING and obs.status is ProviderStatus.PENDING:
            return Choice(Events.WAIT, Reasons.DELETION_PENDING,
                          obs.message or "provider is deleting")
        return Choice(Events.DELETE, Reasons.DELETE_REQUESTED, "deleting the external resource")
    if obs is None:
        return Choice(None, "NotObserved")
    if not obs.exists:
        if not facts.policy.allows_modify:
            return Choice(
                None,
                "ExternalResourceAbsent",
                "external resource does not exist and reconcile policy 'skip' forbids creating it",
            )
        if facts.state == States.READY:
            return Choice(Events.CREATE, Reasons.EXTERNAL_RESOURCE_VANISHED,
                          "external resource vanished")
        return Choice(Events.CREATE, Reasons.CREATE_REQUESTED, "creating the external resource")
    if obs.status is ProviderStatus.FAILED:
        return Choice(Events.FAIL, Reasons.PROVIDER_FAILED,
                      obs.message or "provider reports failure")
    if obs.status is ProviderStatus.PENDING:
        return Choice(Events.WAIT, Reasons.PROVIDER_PENDING,
                      obs.message or "provider operation pending")
    if facts.forced and obs.up_to_date and facts.policy.allows_modify:
        # The reconcile annotation forces the "already up to date" shortcut to run.
        return Choice(Events.UPDATE, Reasons.RECONCILE_REQUESTED,
                      "the reconcile annotation asked for a full update")
    if not obs.up_to_date and facts.policy.allows_modify:
        return Choice(Events.UPDATE, Reasons.UPDATE_REQUESTED,
                      "external resource differs from spec" + drift_detail(obs.drifted))
    if not obs.up_to_date:
        return Choice(
            Events.AVAILABLE,
            "ReconcileSkipped",
            "external resource differs from spec; reconcile policy 'skip' forbids updating it",
        )
    return Choice(Events.AVAILABLE, Reasons.AVAILABLE, "")


#: The operation under way in each working state, remembered when it fails.
OPERATION_OF_STATE = {States.CREATING: "create", States.UPDATING: "update",
                      States.DELETING: "delete"}


@attrs.frozen
class Decision:
    """The event chosen for one pass, the transition the table picked, and any error so far.

    ``actions`` are the transition's actions the runner is to run (none when
    the provider itself reported the failure: there is nothing left to do).
    ``failed_operation`` names what failed (``connect``, ``observe``,
    ``guard``, an operation, ...) for ``status.failure``. ``hold`` says the
    provider could not be reached from a state that reports Ready: the state
    is kept (no event fires, no ``fail`` edge is taken), so the Ready
    condition keeps describing the last observation. A runner that hits a
    handled error while running the actions records it with :meth:`failing`.
    """

    source: str
    choice: Choice
    transition: TransitionSpec | None = None
    error: HandledError | None = None
    failed_operation: str | None = None
    actions: tuple[str, ...] = ()
    hold: bool = False

    def failing(self, error: HandledError, operation: str | None) -> Decision:
        """This decision with ``error`` raised by ``operation`` while carrying it out."""
        return attrs.evolve(self, error=error, failed_operation=operation)


def guard_of(machine: type[LifecycleMachine], facts: object) -> Callable[[str], bool]:
    """Evaluate the machine's guards on ``facts``; a guard that raises is a handled error.

    The message names only the exception's class, like every error raised by
    kind or provider code.
    """
    host = machine.guard_host()

    def guard(name: str) -> bool:
        try:
            return bool(getattr(host, name)(facts))
        except HandledError:
            raise
        except Exception as exc:
            raise HandledError(f"guard {name!r} raised {type(exc).__name__}",
                               reason="GuardError") from None

    return guard


def transit(
    machine: type[LifecycleMachine],
    source: str,
    choice: Choice,
    facts: object,
    *,
    error: HandledError | None = None,
    failed_operation: str | None = None,
) -> Decision:
    """Fire ``choice`` from ``source`` through the machine's table (pure, any facts type).

    A guard that raises makes the decision fail with operation ``guard``; an
    event the state does not allow is a handled error ``EventNotAllowed``
    (unless the pass already carries ``error``). Otherwise the transition's
    actions are to be run.
    """
    if choice.event is None:
        return Decision(source, choice, None, error, failed_operation)
    table = machine.table()
    try:
        transition = table.fire(source, choice.event, guard_of(machine, facts))
    except HandledError as exc:
        return Decision(source, choice, None, exc, "guard")
    if transition is None:
        if error is None:
            error = HandledError(
                f"event {choice.event!r} is not allowed in state {source!r} of {table.name}",
                reason="EventNotAllowed")
        return Decision(source, choice, None, error, failed_operation)
    return Decision(source, choice, transition, error, failed_operation, transition.actions)


def unreachable(machine: type[LifecycleMachine], facts: Facts) -> bool:
    """Whether this pass only failed to reach the provider from a state reporting Ready.

    True for a connect or observe error that is not terminal while the
    stored state's Ready condition is True: nothing new is known about the
    external resource, so the state is held (see :attr:`Decision.hold`).
    """
    error = facts.error
    if error is None or error.severity is Severity.TERMINAL:
        return False
    spec = machine.table().states.get(facts.state)
    return spec is not None and spec.ready[0] == ConditionStatus.TRUE.value


def decide(machine: type[LifecycleMachine], facts: Facts) -> Decision:
    """Choose the event of one managed-resource pass and the transition it takes (pure).

    An error from connect or observe is remembered as the failed operation
    ``connect`` (credentials) or ``observe``. When it is not terminal and the
    state reports Ready (:func:`unreachable`), no event fires and the
    decision holds the state; otherwise the ``fail`` event is fired. A
    provider reporting the resource failed becomes a handled error that
    remembers the operation under way in the current state.
    """
    error = facts.error
    operation = None
    if error is not None:
        operation = "connect" if isinstance(error, CredentialsError) else "observe"
        if unreachable(machine, facts):
            return Decision(facts.state, Choice(None, error.reason, error.message), None,
                            error, operation, hold=True)
    choice = choose_event(facts)
    decision = transit(machine, facts.state, choice, facts, error=error,
                       failed_operation=operation)
    if decision.transition is not None and choice.event == Events.FAIL and error is None:
        # The provider reports the resource failed: remember what was under way.
        return Decision(facts.state, choice, decision.transition,
                        HandledError(choice.message, reason=choice.reason),
                        OPERATION_OF_STATE.get(facts.state) or facts.failed_operation)
    return decision


def fail_edge(machine: type[LifecycleMachine], state: str,
              facts: object) -> TransitionSpec | None:
    """The ``fail`` transition from ``state``, or None (no such edge, or a guard raised)."""
    try:
        return machine.table().fire(state, Events.FAIL, guard_of(machine, facts))
    except HandledError:
        return None


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
    """The requeue result for the outcome of one reconcile (the requeue matrix).

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
