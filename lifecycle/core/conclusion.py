"""The conclusion a managed pass writes back (pure).

After a pass has acted, :func:`conclusion` gives what its write-back writes:
the status, Events and requeue result of the transition taken
(:func:`~lifecycle.core.plan.conclude`); when the pass acted and then saw
what the call left, the call's own conclusion first and the observation's on
it, their Events merged into one (:func:`~lifecycle.core.plan.passage`);
whether the state reached is final, and whether the object goes with it
(:func:`leaving`), in which case its Normal Events are dropped: they would
describe an object nobody can read any more. The notes a pass gathers on the
way (:func:`config_note`, :func:`informational`) are conditions of its
conclusion.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

import attrs

from lifecycle.core import objects
from lifecycle.core.decide import Decision, Facts
from lifecycle.core.errors import HandledError
from lifecycle.core.kind import FINALIZER
from lifecycle.core.machine import LifecycleMachine
from lifecycle.core.plan import Event, Plan, conclude, passage
from lifecycle.core.values import Condition, ConditionStatus
from lifecycle.core.vocabulary import ConditionTypes

__all__ = ["Conclusion", "conclusion", "config_note", "informational", "leaving"]


@attrs.frozen
class Conclusion:
    """What a pass writes back, and how it ends."""

    #: The state the pass started from.
    source: str
    #: The last conclusion: the status to write and the requeue result.
    plan: Plan
    #: The Events to record.
    events: tuple[Event, ...]
    #: Whether the state reached is final (the engine's finalizer is removed).
    final: bool
    #: Whether the object goes with the finalizer (no status is written then).
    leaving: bool


def config_note(reason: str, message: str, generation: int) -> Condition:
    """A ``ConfigValid`` False note of this generation, for the pass's conclusion."""
    return Condition(ConditionTypes.CONFIG_VALID, ConditionStatus.FALSE, reason, message,
                     generation)


def informational(error: HandledError, generation: int) -> Condition:
    """An ``Informational`` note carrying ``error``'s reason and message, for the pass's
    conclusion."""
    return Condition("Informational", ConditionStatus.TRUE, error.reason, error.message,
                     generation)


def leaving(obj: Mapping[str, Any]) -> bool:
    """Whether removing the engine's finalizer lets ``obj`` go (it is deleted, and the
    finalizer is its last)."""
    meta = objects.metadata(obj)
    found = meta.get("finalizers")
    return bool(meta.get("deletionTimestamp")) and (
        not isinstance(found, list) or all(f == FINALIZER for f in found))


def conclusion(machine: type[LifecycleMachine], obj: Mapping[str, Any], facts: Facts,
               decision: Decision, *, first: tuple[Facts, Decision] | None,
               clock: Callable[[], datetime], notes: Sequence[Condition],
               external_name: str, dirty: bool) -> Conclusion:
    """The conclusion of a pass on ``obj`` that decided ``decision`` from ``facts``;
    ``first``: the facts and decision of the call it made before it saw what the call
    left (then ``facts`` and ``decision`` are the observation's)."""
    old = objects.status(obj)
    key = obj["metadata"]["uid"]
    made: Plan | None = None
    if first is not None:  # the call's own conclusion, then the observation's on it
        made = conclude(machine, old, first[0], first[1], now=clock(), key=key, notes=notes,
                        external_name=external_name)
    concluded = conclude(machine, old if made is None else made.settled.status, facts,
                         decision, now=clock(), key=key, notes=notes,
                         external_name=external_name, dirty=dirty)
    events = concluded.settled.events if made is None else passage(made, concluded)
    final = machine.table().states[concluded.target].final
    gone = final and leaving(obj)
    if gone:
        events = tuple(e for e in events if e[0] != "Normal")
    return Conclusion(concluded.source if made is None else made.source, concluded,
                      tuple(events), final, gone)
