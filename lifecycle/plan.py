"""The whole pure path of one reconcile, without I/O: a dry-run plan.

Given a stored object and what observe returned (or the error it raised),
:func:`plan` restores the state, chooses the event, picks the transition,
computes the new status and the requeue result, exactly as the reconciler
would if every action succeeded. It is the "plan" of SPEC section 7 and the
hot path measured by the benchmarks.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

import attrs

from lifecycle.decide import Choice, Facts, ReconcilePolicy, choose_event, requeue
from lifecycle.errors import HandledError
from lifecycle.machine import LifecycleMachine, TransitionSpec
from lifecycle.status import Settled, settle
from lifecycle.values import Observation, Result


@attrs.frozen
class Plan:
    """What the next reconcile would do and why."""

    source: str
    choice: Choice
    transition: TransitionSpec | None
    settled: Settled
    result: Result

    @property
    def target(self) -> str:
        """The state the object would be in afterwards."""
        return self.transition.target if self.transition else self.source


def restore(machine: type[LifecycleMachine], status: Any) -> str:
    """The stored state, or the initial state when it is missing, unknown or corrupt."""
    table = machine.table()
    state = status.get("state") if isinstance(status, Mapping) else None
    if isinstance(state, str) and state in table.states and not table.states[state].final:
        return state
    return table.initial


def plan(
    machine: type[LifecycleMachine],
    obj: Mapping[str, Any],
    *,
    observation: Observation | None = None,
    error: HandledError | None = None,
    policy: ReconcilePolicy = ReconcilePolicy.MANAGE,
    now: datetime,
) -> Plan:
    """Plan one reconcile of ``obj`` given an observation (or the error observe raised)."""
    table = machine.table()
    meta = obj.get("metadata") or {}
    status = obj.get("status") if isinstance(obj.get("status"), Mapping) else {}
    source = restore(machine, status)
    failure = status.get("failure") if isinstance(status.get("failure"), Mapping) else {}
    generation = meta.get("generation", 1)
    facts = Facts(
        state=source,
        deleting=bool(meta.get("deletionTimestamp")),
        policy=policy,
        observation=observation,
        error=error,
        failed_operation=failure.get("operation"),
        generation=generation,
        observed_generation=status.get("observedGeneration", 0),
    )
    choice = choose_event(facts)
    transition = None
    if choice.event is not None:
        host = machine.guard_host()
        transition = table.fire(source, choice.event, lambda g: getattr(host, g)(facts))
    target = transition.target if transition else source
    if choice.event == "fail" and error is None:
        error = HandledError(choice.message, reason=choice.reason)
    settled = settle(
        machine=machine, old=status, source=source, target=target, generation=generation,
        deleting=facts.deleting, policy=policy, choice=choice, transition=transition,
        error=error, failed_operation=None, observation=observation, notes=(), now=now,
    )
    result = requeue(state=target, final=table.states[target].final, timing=machine.timing,
                     key=str(meta.get("uid", "")), error=error,
                     waiting=choice.event == "wait")
    return Plan(source, choice, transition, settled, result)
