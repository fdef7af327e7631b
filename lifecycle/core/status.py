"""The pure status step: from a decided transition to the new status and its Events.

No I/O: the caller hands in the stored status, an :class:`Outcome` (what the
pass decided and observed, and what came of it) and the time; it gets back
the status to write (compared with the stored one so an unchanged status is
never written) and the Events to record.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Generic, Protocol, TypeVar

import attrs

from lifecycle.core import conditions as cond
from lifecycle.core.decide import Decision, Facts, ReconcilePolicy
from lifecycle.core.errors import Severity
from lifecycle.core.machine import LifecycleMachine, TransitionSpec, camel
from lifecycle.core.values import (
    Condition,
    ConditionStatus,
    HistoryEntry,
    Observation,
    ProviderStatus,
    rfc3339,
)
from lifecycle.core.vocabulary import ConditionTypes, Reasons

__all__ = [
    "ENGINE_KEYS",
    "NOTE_TYPES",
    "STALE",
    "Outcome",
    "PassFacts",
    "Settled",
    "held_ready",
    "kept_history",
    "paused",
    "ready_as_observed",
    "refused_change",
    "settle",
    "stored_conditions",
    "stuck",
    "unreachable_since",
    "valid_timestamp",
]

T, F, U = ConditionStatus.TRUE, ConditionStatus.FALSE, ConditionStatus.UNKNOWN
_STATUS = {s.value: s for s in ConditionStatus}

#: Status keys the engine owns; any other key a kind keeps in status is preserved.
ENGINE_KEYS = frozenset({
    "state", "observedGeneration", "conditions", "phase", "stateSince", "history",
    "failure", "atProvider", "externalName", "operationSince",
})


#: Condition types that report problems with the object itself (annotations,
#: policies, a repaired stored state); True once the problem is gone.
NOTE_TYPES = ConditionTypes.NOTES


class PassFacts(Protocol):
    """What any kind's facts of a pass tell the requeue matrix and a status writer:
    :class:`~lifecycle.core.decide.Facts` for managed resources, a kind's own type
    (:class:`~lifecycle.core.claims.ClaimFacts`) otherwise."""

    @property
    def state(self) -> str:
        """The stored state the pass started from."""
        ...

    @property
    def deleting(self) -> bool:
        """Whether the object is being deleted."""
        ...

    @property
    def generation(self) -> int:
        """The object's ``metadata.generation``."""
        ...


FactsT = TypeVar("FactsT", bound=PassFacts, covariant=True)


@attrs.frozen
class Outcome(Generic[FactsT]):
    """What one pass decided and what came of it: everything :func:`settle` needs.

    ``facts`` are what the pass knew, ``decision`` what it chose (with any
    error met while carrying it out), ``transition`` the transition finally
    taken (the ``fail`` edge when the chosen one's work failed), ``notes``
    the ConfigValid / StatusValid / Informational conditions gathered, and
    ``external_name`` the name the client was given (recorded in status).
    """

    facts: FactsT
    decision: Decision
    transition: TransitionSpec | None
    notes: Sequence[Condition] = ()
    external_name: str = ""

    @property
    def target(self) -> str:
        """The state after the pass."""
        return self.transition.target if self.transition is not None else self.decision.source


@attrs.frozen
class Settled:
    """The status to write and the Events (type, reason, message) to record."""

    status: dict[str, Any]
    events: tuple[tuple[str, str, str], ...] = ()


def settle(machine: type[LifecycleMachine], old: Mapping[str, Any], outcome: Outcome[Facts],
           now: datetime) -> Settled:
    """The new status after one pass, and the Events to record (pure).

    Conditions: Ready from the target state (Unknown while a new generation
    could not be observed; as observed when a change of a resource observed
    available was refused, :func:`refused_change`), Synced from the error or policy, the activity
    conditions, notes, and Stuck; then phase, history, failure, the external
    name and what the provider reported. Keys of ``old`` the engine does not
    own are kept.
    """
    facts, decision = outcome.facts, outcome.decision
    source, transition = decision.source, outcome.transition
    target = transition.target if transition is not None else source
    choice, error, notes = decision.choice, decision.error, outcome.notes
    generation, deleting, observation = facts.generation, facts.deleting, facts.observation
    when = rfc3339(now)
    spec = machine.table().states[target]
    gen = generation
    stored = stored_conditions(old)
    events: list[tuple[str, str, str]] = []
    updates: list[Condition] = []
    observed_before = old.get("observedGeneration")
    present = cond.by_type(stored)  # several types are looked up: one pass over the list
    stored_ready = present.get(cond.READY)
    unobserved = gen != observed_before or (
        stored_ready is not None
        and str(stored_ready.get("reason", "")) == "GenerationNotObserved")
    if refused_change(facts, decision):
        # The spec change was refused; the resource stays as observed: Ready says so.
        updates.append(ready_as_observed(machine, stored, gen))
    elif observation is None and error is not None and unobserved:
        # A new generation that could not be observed: Ready is unknown, not stale.
        updates.append(Condition(cond.READY, U, "GenerationNotObserved", error.message, gen))
    elif decision.hold and error is not None:
        # The provider could not be reached: Ready stays as last observed.
        updates.append(held_ready(stored, spec.ready, error.message, gen, now,
                                  unreachable_since(old, stored, when), machine.timing.grace()))
    else:
        message = error.message if error else (choice.message if transition else "")
        updates.append(Condition(cond.READY, _STATUS[spec.ready[0]], spec.ready[1],
                                 message, gen))
    if error is not None and (decision.hold or refused_change(facts, decision)):
        updates.append(Condition(cond.SYNCED, F, Reasons.RECONCILE_ERROR,
                                 f"{decision.failed_operation} failed ({error.reason}): "
                                 f"{error.message}", gen))
    elif error is not None:
        # A reference still to resolve is named as such: it is waited on, not broken.
        reason = (Reasons.REFERENCE_UNRESOLVED if error.reason == Reasons.REFERENCE_UNRESOLVED
                  else Reasons.RECONCILE_ERROR)
        updates.append(Condition(cond.SYNCED, F, reason, error.message, gen))
    elif choice.reason == "ReconcileSkipped" or facts.policy is ReconcilePolicy.SKIP:
        updates.append(Condition(cond.SYNCED, T, "ReconcileSkipped", choice.message, gen))
    else:
        updates.append(Condition(cond.SYNCED, T, Reasons.RECONCILE_SUCCESS, "", gen))
    for state_id, activity in machine.activity_conditions.items():
        if state_id == target:
            if error is not None and state_id == "failed":
                updates.append(Condition(activity, T, error.reason, error.message, gen))
            else:
                updates.append(Condition(activity, T, choice.reason, choice.message, gen))
        elif activity in present:
            updates.append(Condition(activity, F, spec.ready[1], "", gen))
    updates.extend(notes)
    noted = {n.type for n in notes}
    for note_type in NOTE_TYPES - noted:
        if note_type in present:
            updates.append(Condition(note_type, T, "Valid", "", gen))
    since = valid_timestamp(old.get("stateSince")) if target == source else when
    if since is None:
        since = when  # missing or corrupt: the state is timed from now on
    operation_since = _operation_since(machine, old, source, target, since)
    if decision.hold:
        operation_since = unreachable_since(old, stored, when)
    held = stuck(machine, target, operation_since or since, stored, gen, now)
    if held is not None:
        updates.append(held)
        previous = present.get(ConditionTypes.STUCK)
        if held.status is T and (previous is None or str(previous.get("status")) != T.value):
            events.append(("Warning", ConditionTypes.STUCK, held.message))
    history = kept_history(old.get("history"))
    if transition is not None and transition.source != transition.target:
        reason = error.reason if error else choice.reason
        history.append(HistoryEntry(transition.source, transition.target, transition.event,
                                    reason, when).to_dict())
        detail = error.message if error else (choice.message or choice.reason)
        events.append(("Warning" if error else "Normal", camel(transition.event),
                       f"{transition.source} -> {transition.target}: {detail}"))
    elif error is not None:
        events.append(("Warning", error.reason, error.message))
    merged = cond.merge(stored, updates, when)
    status: dict[str, Any] = {
        **{k: v for k, v in old.items() if k not in ENGINE_KEYS},
        "state": target,
        "observedGeneration": gen,
        "conditions": merged,
        "phase": cond.phase(merged, deleting),
        "stateSince": since,
        "history": history[-machine.history_limit:],
    }
    if operation_since is not None:
        status["operationSince"] = operation_since
    if error is not None:
        status["failure"] = {
            "operation": decision.failed_operation or "reconcile",
            "reason": error.reason,
            "severity": error.severity.value,
            "generation": gen,
        }
    if outcome.external_name:
        status["externalName"] = outcome.external_name
    elif "externalName" in old:
        status["externalName"] = old["externalName"]
    if observation is not None and observation.observed:
        status["atProvider"] = dict(observation.observed)
    elif "atProvider" in old:
        status["atProvider"] = old["atProvider"]
    return Settled(status, tuple(events))


def refused_change(facts: Any, decision: Decision) -> bool:
    """Whether the pass's error refused a change of a resource that is there and usable.

    True when the pass chose to ``update`` an external resource it observed
    existing and available (not pending, not failed), not while deleting,
    and the update (or the guard of its event) raised a terminal error: a
    change to an immutable parameter, a change the provider says it cannot
    make, a policy's refusal. Nothing was changed, so the resource is as it
    was observed: Ready reports that (:func:`ready_as_observed`) and only
    Synced reports the refusal, as in Crossplane's managed resources (Ready
    describes the external resource, Synced the last reconcile).
    """
    error, observation = decision.error, getattr(facts, "observation", None)
    return (error is not None and error.severity is Severity.TERMINAL
            and decision.choice.event == "update" and not getattr(facts, "deleting", False)
            and isinstance(observation, Observation) and observation.exists
            and observation.status is ProviderStatus.AVAILABLE)


def ready_as_observed(machine: type[LifecycleMachine], stored: Sequence[Mapping[str, Any]],
                      gen: int) -> Condition:
    """Ready for a resource observed available: the stored Ready when it is True (as
    last reported), else the Ready of the machine's first state that reports it True
    (``Available`` when none does)."""
    ready = cond.get(stored, cond.READY)
    if ready is not None and ready.status is T:
        return Condition(cond.READY, T, ready.reason, ready.message, gen)
    declared = next((s.ready for s in machine.table().states.values()
                     if s.ready[0] == T.value), (T.value, Reasons.AVAILABLE))
    return Condition(cond.READY, T, declared[1], "", gen)


#: Ready's reason once connect or observe has failed for longer than the grace.
STALE = "ObservationStale"


def unreachable_since(old: Mapping[str, Any], stored: Sequence[Mapping[str, Any]],
                      when: str) -> str:
    """When the provider stopped being reachable, for a pass that holds its state.

    The stored ``operationSince`` when the previous pass failed the same way
    (Synced False with ``ReconcileError``), else ``when``: the first failing
    pass, including the first one after a pause, starts the count. Held
    passes record it in ``status.operationSince``; a successful pass in a
    Ready state drops it.
    """
    synced = cond.get(stored, cond.SYNCED)
    kept = valid_timestamp(old.get("operationSince"))
    if (kept and synced is not None and synced.status is F
            and synced.reason == Reasons.RECONCILE_ERROR):
        return kept
    return when


def held_ready(stored: Sequence[Mapping[str, Any]], declared: tuple[str, str], message: str,
               gen: int, now: datetime, began: str, grace: float) -> Condition:
    """Ready while the provider cannot be reached: as last observed, Unknown after ``grace``.

    ``began`` is when the error began (:func:`unreachable_since`). Within
    the grace the stored Ready is kept as it is (the state's declared Ready
    when none is stored); past it, Ready is Unknown with reason
    ``ObservationStale``.
    """
    try:
        lasted = (now - datetime.fromisoformat(began.replace("Z", "+00:00"))).total_seconds()
    except ValueError:
        lasted = 0.0
    if lasted > grace:
        return Condition(cond.READY, U, STALE,
                         f"the external resource has not been observed for longer than "
                         f"{int(grace)}s: {message}", gen)
    ready = cond.get(stored, cond.READY)
    if ready is None:
        return Condition(cond.READY, _STATUS[declared[0]], declared[1], "", gen)
    return Condition(cond.READY, ready.status, ready.reason, ready.message, gen)


def stored_conditions(status: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The conditions a status holds (an empty list when the field is absent or malformed)."""
    found = status.get("conditions")
    return found if isinstance(found, list) else []


def paused(old: Mapping[str, Any], state: str, generation: int, message: str,
           now: datetime, *, deleting: bool = False) -> dict[str, Any]:
    """The status of a paused object: Synced False ReconcilePaused, nothing else moves.

    The phase is Terminating when ``deleting`` (a deletion timestamp is set).
    """
    stored = stored_conditions(old)
    updates = [Condition(cond.SYNCED, F, "ReconcilePaused", message, generation)]
    ready = cond.get(stored, cond.READY)
    if ready is None or ready.observed_generation != generation:
        # Nothing of this generation has been observed while paused.
        updates.append(Condition(cond.READY, U, "ReconcilePaused", message, generation))
    merged = cond.merge(stored, updates, rfc3339(now))
    return {**old, "conditions": merged, "observedGeneration": generation,
            "phase": cond.phase(merged, deleting), "state": state}


def _operation_since(machine: type[LifecycleMachine], old: Mapping[str, Any], source: str,
                     target: str, since: str) -> str | None:
    """When the operation under way began: kept across detours through Failed.

    A create that keeps failing and resuming (creating -> failed -> creating)
    is one operation, so its time towards Stuck is not reset by each blip.
    """
    kept = valid_timestamp(old.get("operationSince"))
    if target in machine.timing.max_in_state:
        return kept if kept and (source == target or source == "failed") else since
    if target == "failed":
        return kept
    return None


_HISTORY_KEYS = ("from", "to", "event", "reason", "time")


def kept_history(stored: Any) -> list[dict[str, Any]]:
    """The well-formed entries of a stored ``status.history`` (oldest first).

    An entry is kept only if it has every field of a recorded transition as a
    string; anything else (a corrupt or hand-edited entry) is dropped, so the
    engine never writes back a history its own schema would refuse.
    """
    if not isinstance(stored, list):
        return []
    kept = []
    for h in stored:
        if _recorded(h):
            kept.append(dict(h))
        elif isinstance(h, Mapping) and all(isinstance(h.get(k), str) for k in _HISTORY_KEYS):
            kept.append({k: h[k] for k in _HISTORY_KEYS})
    return kept


def _recorded(entry: Any) -> bool:
    """Whether a stored history entry is a plain dict exactly as the engine writes it."""
    if entry.__class__ is not dict or tuple(entry) != _HISTORY_KEYS:
        return False
    a, b, c, d, e = entry.values()
    return (a.__class__ is str and b.__class__ is str and c.__class__ is str
            and d.__class__ is str and e.__class__ is str)


def valid_timestamp(value: Any) -> str | None:
    """``value`` if it is an RFC 3339 timestamp, else None (a missing or corrupt stored value)."""
    if not isinstance(value, str):
        return None
    try:
        datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return value


def stuck(machine: type[LifecycleMachine], state: str, since: str,
           stored: Sequence[Mapping[str, Any]], gen: int, now: datetime) -> Condition | None:
    """The Stuck condition: True once ``state`` has been held past its ``max_in_state``.

    False (reason ``NotStuck``) once it is no longer, if it was ever recorded;
    None when there is nothing to record.
    """
    limit = machine.timing.max_in_state.get(state)
    had = cond.get(stored, ConditionTypes.STUCK) is not None
    held = 0.0
    if limit is not None:
        try:
            held = (now - datetime.fromisoformat(since.replace("Z", "+00:00"))).total_seconds()
        except ValueError:
            held = 0.0
    if limit is not None and held > limit:
        return Condition(ConditionTypes.STUCK, T, f"StuckIn{camel(state)}",
                         f"in {state} for {int(held)}s, longer than {int(limit)}s", gen)
    return Condition(ConditionTypes.STUCK, F, Reasons.NOT_STUCK, "", gen) if had else None
