"""The whole pure path of one reconcile, without I/O: a dry-run plan.

Given a stored object and what observe returned (or the error it raised),
:func:`plan` applies the same gate as the reconciler (operation annotation,
namespace ownership, pause, policies, terminal failures), chooses the event,
picks the transition, computes the new status and the requeue result, exactly
as the reconciler would if every action succeeded. It is the "plan" of SPEC
section 7 and the hot path measured by the benchmarks.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

import attrs

from lifecycle.core.decide import (
    Choice,
    Facts,
    ReconcilePolicy,
    choose_event,
    gate,
    requeue,
    restore,
)
from lifecycle.core.errors import HandledError
from lifecycle.core.machine import LifecycleMachine, TransitionSpec
from lifecycle.core.status import Settled, paused, settle
from lifecycle.core.values import Observation, ProviderStatus, Result

__all__ = ["OBSERVATIONS", "Plan", "describe", "plan", "restore"]


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


def plan(
    machine: type[LifecycleMachine],
    obj: Mapping[str, Any],
    *,
    observation: Observation | None = None,
    error: HandledError | None = None,
    namespace_annotations: Mapping[str, str] | None = None,
    operator_id: str | None = None,
    policy: ReconcilePolicy = ReconcilePolicy.MANAGE,
    now: datetime,
) -> Plan:
    """Plan one reconcile of ``obj`` given an observation (or the error observe raised).

    ``policy`` is the operator default; annotations on the object and
    ``namespace_annotations`` override it as they do in the reconciler.
    """
    table = machine.table()
    meta = obj.get("metadata") or {}
    status = obj.get("status") if isinstance(obj.get("status"), dict) else {}
    g = gate(machine, obj, namespace_annotations or {}, operator_id=operator_id,
             default_policy=policy)
    generation = meta.get("generation", 1)
    if g.stop is not None:
        return Plan(g.state, Choice(None, g.stop, g.stop_message), None, Settled(dict(status)),
                    Result.done(g.stop))
    if g.paused:
        held = paused(status, g.state, generation, "paused", now)
        return Plan(g.state, Choice(None, "ReconcilePaused"), None, Settled(held),
                    Result.done("Paused"))
    failure = status.get("failure") if isinstance(status.get("failure"), dict) else {}
    facts = Facts(
        state=g.state,
        deleting=g.deleting,
        policy=ReconcilePolicy.DETACH_ON_DELETE if g.orphan else g.policy,
        observation=None if g.orphan else observation,
        error=None if g.orphan else error,
        failed_operation=failure.get("operation"),
        generation=generation,
        observed_generation=status.get("observedGeneration", 0),
        forced=g.forced,
    )
    choice = choose_event(facts)
    transition = None
    if choice.event is not None:
        host = machine.guard_host()
        transition = table.fire(g.state, choice.event, lambda name: getattr(host, name)(facts))
    target = transition.target if transition else g.state
    if choice.event == "fail" and facts.error is None:
        error = HandledError(choice.message, reason=choice.reason)
    elif facts.error is not None:
        error = facts.error
    settled = settle(
        machine=machine, old=status, source=g.state, target=target, generation=generation,
        deleting=g.deleting, policy=facts.policy, choice=choice, transition=transition,
        error=error, failed_operation=None, observation=facts.observation, notes=g.notes,
        now=now,
    )
    result = requeue(state=target, final=table.states[target].final, timing=machine.timing,
                     key=str(meta.get("uid", "")), error=error,
                     waiting=choice.event == "wait", deleting=g.deleting)
    return Plan(g.state, choice, transition, settled, result)


#: What ``lifecycle plan --observed`` can pretend observe returned.
OBSERVATIONS = {
    "absent": Observation.absent(),
    "available": Observation(exists=True),
    "drifted": Observation(exists=True, up_to_date=False),
    "pending": Observation(exists=True, status=ProviderStatus.PENDING,
                           message="provider operation pending"),
    "failed": Observation(exists=True, status=ProviderStatus.FAILED,
                          message="provider reports the resource failed"),
}


def describe(p: Plan) -> str:
    """A few lines a person can read: what the next reconcile would do, and why."""
    lines = [f"state:      {p.source}"]
    detail = f": {p.choice.message}" if p.choice.message else ""
    if p.choice.event is None:
        lines.append(f"event:      none ({p.choice.reason}{detail})")
    else:
        lines.append(f"event:      {p.choice.event} ({p.choice.reason}{detail})")
    if p.transition is not None:
        actions = ", ".join(p.transition.actions) or "none"
        guards = ", ".join(p.transition.guards) or "none"
        lines.append(f"transition: {p.transition.source} -> {p.transition.target} "
                     f"(guards: {guards}; actions: {actions})")
    conditions = {c["type"]: c for c in p.settled.status.get("conditions") or []
                  if isinstance(c, dict)}
    for type_ in ("Ready", "Synced"):
        c = conditions.get(type_)
        if c is not None:
            lines.append(f"{type_ + ':':<11} {c['status']} ({c['reason']})")
    lines.append(f"phase:      {p.settled.status.get('phase', '-')}")
    after = f" after {p.result.after:g}s" if p.result.after else ""
    lines.append(f"result:     {p.result.kind.value}{after} ({p.result.reason})")
    return "\n".join(lines)
