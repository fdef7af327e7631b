"""The whole pure path of one reconcile, shared by the reconciler and the dry run.

One pass is gate -> facts -> decide -> (the runner's I/O) -> conclude:

* :func:`lifecycle.core.decide.gate` decides from the stored object whether
  the pass goes on; :func:`stopped` and :func:`held` conclude the passes that
  end there (a stop reason, or a paused object);
* :func:`gather` turns the gate and what observe returned (or the error it
  raised) into :class:`~lifecycle.core.decide.Facts`;
* :func:`lifecycle.core.decide.decide` chooses the event and the transition;
* :func:`conclude` computes the new status, the Events and the requeue result.

The reconciler adds only I/O around these steps (reads, object and status
writes, the transition's actions, the connection Secret). :func:`plan` runs
them with no I/O, as the reconciler would if every action succeeded: the dry
run of ``lifecycle plan`` and the hot path measured by the benchmarks.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

import attrs

from lifecycle.core import objects
from lifecycle.core.decide import (
    Choice,
    Decision,
    Facts,
    Gate,
    ReconcilePolicy,
    decide,
    fail_edge,
    gate,
    requeue,
    restore,
)
from lifecycle.core.errors import HandledError
from lifecycle.core.kind import PAUSED
from lifecycle.core.machine import LifecycleMachine, TransitionSpec, camel
from lifecycle.core.status import Outcome, PassFacts, Settled, paused, settle
from lifecycle.core.values import Condition, Observation, ProviderStatus, Result
from lifecycle.core.vocabulary import ConditionTypes, Reasons

__all__ = ["OBSERVATIONS", "PAUSED_MESSAGE", "Plan", "Settler", "acted", "after_action",
           "after_create", "conclude", "created", "describe", "gather", "held", "passage", "plan",
           "restore", "stopped"]

#: A status builder: ``(machine, stored status, outcome, now) -> Settled``.
#: :func:`lifecycle.core.status.settle` builds the status of managed resources.
#: A status writer: :func:`settle`, or a kind's own for its own facts type.
Settler = Callable[[type[LifecycleMachine], Mapping[str, Any], Outcome[Any], datetime], Settled]

#: The Synced / Ready message of a paused object.
PAUSED_MESSAGE = f"annotation {PAUSED} is 'true'"


@attrs.frozen
class Plan:
    """What one reconcile does and why: the conclusion of a pass.

    ``source`` is the state the pass started from, ``transition`` the one
    taken (None when nothing fired), ``settled`` the status to write and the
    Events to record, ``result`` the requeue result.
    """

    source: str
    choice: Choice
    transition: TransitionSpec | None
    settled: Settled
    result: Result

    @property
    def target(self) -> str:
        """The state the object would be in afterwards."""
        return self.transition.target if self.transition else self.source


def stopped(g: Gate, old: Mapping[str, Any]) -> Plan:
    """The conclusion of a pass the gate stopped: nothing changes, done for ``g.stop``."""
    return Plan(g.state, Choice(None, g.stop or "", g.stop_message), None, Settled(dict(old)),
                Result.done(g.stop or ""))


def held(g: Gate, old: Mapping[str, Any], now: datetime) -> Plan:
    """The conclusion of a paused pass: Synced False ``ReconcilePaused``, nothing else moves.

    The phase is Terminating when the object is being deleted, paused or not.
    """
    status = paused(old, g.state, g.generation, PAUSED_MESSAGE, now, deleting=g.deleting)
    return Plan(g.state, Choice(None, "ReconcilePaused"), None, Settled(status),
                Result.done(Reasons.PAUSED))


def gather(
    g: Gate,
    old: Mapping[str, Any],
    *,
    observation: Observation | None = None,
    error: HandledError | None = None,
) -> Facts:
    """The facts of a pass the gate let through: the gate, the stored status ``old``
    (read with :func:`lifecycle.core.objects.status`) and what observe said.

    An orphaning deletion never observes: its facts carry the policy
    ``detach-on-delete`` and no observation or error.
    """
    failure = objects.mapping(old.get("failure"))
    if g.orphan:
        policy, observation, error = ReconcilePolicy.DETACH_ON_DELETE, None, None
    else:
        policy = g.policy
    return Facts(
        state=g.state,
        deleting=g.deleting,
        policy=policy,
        observation=observation,
        error=error,
        failed_operation=failure.get("operation"),
        generation=g.generation,
        forced=g.forced,
    )


def conclude(
    machine: type[LifecycleMachine],
    old: Mapping[str, Any],
    facts: PassFacts,
    decision: Decision,
    *,
    now: datetime,
    key: str,
    notes: Sequence[Condition] = (),
    external_name: str = "",
    dirty: bool = False,
    settler: Settler = settle,
    fallback: bool = True,
    waiting: bool | None = None,
) -> Plan:
    """Status, Events and requeue result of a decided pass (pure).

    With ``fallback`` (the default), when the pass carries an error but the
    transition taken is not a ``fail`` one (its work failed, or the event
    was not allowed), the machine takes its ``fail`` edge instead; without
    it the transition stands as decided. A decision that holds the state
    (the provider could not be reached from a Ready state) never falls back.
    ``key`` (the object's uid) spreads the poll jitter; ``dirty`` says the
    object was changed in a way the next step depends on; ``settler`` builds
    the status (:func:`settle` unless a kind keeps a status of another
    shape); ``waiting`` says the object waits on an operation under way
    (default: when the event chosen is ``wait``).
    """
    transition = decision.transition
    if fallback and decision.error is not None and not decision.hold and (
            transition is None or transition.event != "fail"):
        transition = fail_edge(machine, decision.source, facts)
    outcome = Outcome(facts, decision, transition, notes, external_name)
    settled = settler(machine, old, outcome, now)
    target = transition.target if transition is not None else decision.source
    result = requeue(state=target, final=machine.table().states[target].final,
                     timing=machine.timing, key=key, error=decision.error, dirty=dirty,
                     waiting=decision.choice.event == "wait" if waiting is None else waiting,
                     deleting=facts.deleting)
    return Plan(decision.source, decision.choice, transition, settled, result)


def acted(decision: Decision) -> str | None:
    """The operation a decided pass carried out so far (``create``, ``update`` or
    ``delete``: the event of a transition with actions, without error); None otherwise."""
    transition = decision.transition
    if transition is None or not transition.actions or decision.error is not None:
        return None
    event = decision.choice.event
    return event if event in ("create", "update", "delete") else None


def created(decision: Decision, facts: Facts) -> bool:
    """Whether the pass decided (and so far carried out) a create: the ``create`` event,
    a transition with actions, no error, not deleting."""
    return acted(decision) == "create" and not facts.deleting


def after_action(machine: type[LifecycleMachine], facts: Facts, decision: Decision,
                 seen: Any) -> tuple[Facts, Decision] | None:
    """The facts and decision of ``seen``, the resource as the pass's create, update or
    delete left it, when they move the resource on; None otherwise (the pass then ends
    as the call left it).

    Only progress is taken: a decision that would act again, wait on a
    pending operation, fail, or stay put is dropped; outside a deletion the
    resource must exist (a create not visible yet is waited for, never repeated).
    """
    if acted(decision) is None or decision.transition is None or not isinstance(
            seen, Observation) or not (seen.exists or facts.deleting):
        return None
    state = decision.transition.target
    after = attrs.evolve(facts, state=state, observation=seen, error=None,
                         failed_operation=None)
    following = decide(machine, after)
    step = following.transition
    if (step is None or following.actions or following.error is not None
            or following.choice.event == "wait" or step.target == state):
        return None
    return after, following


def after_create(machine: type[LifecycleMachine], facts: Facts, decision: Decision,
                 seen: Any) -> tuple[Facts, Decision] | None:
    """:func:`after_action` of a pass that created (None for any other pass)."""
    if not created(decision, facts):
        return None
    return after_action(machine, facts, decision, seen)


Event = tuple[str, str, str]


def _step(p: Plan) -> tuple[int, str] | None:
    """Where ``p``'s Normal transition Event is among its Events, and its detail."""
    t = p.transition
    if t is None:
        return None
    prefix = f"{t.source} -> {t.target}: "
    for i, (type_, reason, message) in enumerate(p.settled.events):
        if type_ == "Normal" and reason == camel(t.event) and message.startswith(prefix):
            return i, message[len(prefix):]
    return None


def passage(made: Plan, then: Plan) -> tuple[Event, ...]:
    """The Events of a pass that acted and then saw the result: one Event per pass.

    The two Normal transition Events become one, with the reason of the
    last transition and a message naming the path and each step's detail
    (``"unclaimed -> creating -> ready: creating the external resource;
    Available"``); ``status.history`` still records both transitions. Other
    Events (a Stuck warning) are kept in order.
    """
    a, b = _step(made), _step(then)
    if a is None or b is None or made.transition is None or then.transition is None:
        return made.settled.events + then.settled.events
    first, second = made.transition, then.transition
    joined = ("Normal", camel(second.event),
              f"{first.source} -> {first.target} -> {second.target}: {a[1]}; {b[1]}")
    before = made.settled.events[:a[0]] + made.settled.events[a[0] + 1:]
    after = then.settled.events[:b[0]] + then.settled.events[b[0] + 1:]
    return (*before, joined, *after)


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
    ``namespace_annotations`` override it as they do in the reconciler. The
    result is what the reconciler would do if every action succeeded.
    """
    g = gate(machine, obj, namespace_annotations or {}, operator_id=operator_id,
             default_policy=policy)
    old = objects.status(obj)
    if g.stop is not None:
        return stopped(g, old)
    if g.paused:
        return held(g, old, now)
    facts = gather(g, old, observation=observation, error=error)
    return conclude(machine, old, facts, decide(machine, facts), now=now,
                    key=str(objects.metadata(obj).get("uid", "")), notes=g.notes)


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
    for type_ in (ConditionTypes.READY, ConditionTypes.SYNCED):
        c = conditions.get(type_)
        if c is not None:
            lines.append(f"{type_ + ':':<11} {c['status']} ({c['reason']})")
    lines.append(f"phase:      {p.settled.status.get('phase', '-')}")
    after = f" after {p.result.after:g}s" if p.result.after else ""
    lines.append(f"result:     {p.result.kind.value}{after} ({p.result.reason})")
    return "\n".join(lines)
