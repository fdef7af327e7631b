"""Lifecycle machines: declared with python-statemachine, validated, compiled to a table.

A kind's lifecycle is a :class:`LifecycleMachine` subclass written in the
python-statemachine DSL. When the class is defined it is

1. checked by python-statemachine itself (one initial state, no state without
   an outgoing transition, one connected graph), then
2. checked by :func:`validate` against the rules of a managed resource: every
   state is reachable from the initial one, a final state is reachable from
   every state (no trap loops), guards are plain method names, and
3. compiled once into an immutable :class:`MachineTable`.

The reconciler runs the table, never a python-statemachine instance: building
one costs about a millisecond, a table lookup about a microsecond. Diagrams,
docs and the reconciler all read the same table, so they cannot disagree.

Guards are methods ``guard(self, facts) -> bool`` and actions are methods
``action(self, effects)``; both are also valid python-statemachine callbacks,
so the declared class still runs as an ordinary machine when sent
``facts=...`` and ``effects=...``.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import attrs
from statemachine import StateMachine
from statemachine.exceptions import InvalidDefinition
from statemachine.factory import StateMachineMetaclass

from lifecycle.core.errors import MachineDefinitionError

__all__ = [
    "LifecycleMachine",
    "LifecycleMeta",
    "MachineTable",
    "StateSpec",
    "Timing",
    "TransitionSpec",
    "camel",
    "compile_table",
    "validate",
]


def _frozen_map(value: Mapping[str, float]) -> Mapping[str, float]:
    return types.MappingProxyType(dict(value))


@attrs.frozen
class Timing:
    """Requeue intervals of a kind, per state where it matters (seconds).

    ``poll`` is the interval for a Ready resource in sync (with ``jitter`` as a
    fraction either side); ``wait`` maps a state to the interval used while a
    provider operation is pending in it (``default_wait`` otherwise);
    ``max_in_state`` maps a state to the longest time a resource may stay in
    it before it is reported Stuck. ``ready_grace`` is how long connect or
    observe may keep failing before a resource last observed Ready reports
    Ready Unknown (None, the default: three poll intervals). ``sweep``, when set,
    is how often the operator reads the provider's catalogue for every Ready
    object of the kind at once and requeues only those whose external resource
    drifted (:mod:`lifecycle.driver.sweep`; the kind's connector must offer
    ``sweep``); None, the default, leaves drift to the ``poll``.
    """

    poll: float = 60.0
    jitter: float = 0.1
    default_wait: float = 5.0
    wait: Mapping[str, float] = attrs.field(
        factory=lambda: {"creating": 5.0, "updating": 5.0, "deleting": 2.0},
        converter=_frozen_map,
    )
    max_in_state: Mapping[str, float] = attrs.field(
        factory=lambda: {"creating": 1800.0, "updating": 1800.0, "deleting": 1800.0},
        converter=_frozen_map,
    )
    ready_grace: float | None = None
    sweep: float | None = attrs.field(
        default=None, validator=attrs.validators.optional(attrs.validators.gt(0.0)))

    def grace(self) -> float:
        """Seconds a failing connect or observe may last before Ready turns Unknown."""
        return self.ready_grace if self.ready_grace is not None else 3.0 * self.poll

    def wait_for(self, state: str) -> float:
        """The wait interval while a provider operation is pending in ``state``."""
        return self.wait.get(state, self.default_wait)


@attrs.frozen
class StateSpec:
    """One state of a compiled machine, with what it shows in conditions.

    ``ready`` is the (status, reason) of the ``Ready`` condition in this state;
    ``activity`` the activity condition type set True while in it, if any.
    """

    id: str
    name: str
    initial: bool
    final: bool
    ready: tuple[str, str]
    activity: str | None
    doc: str = ""


@attrs.frozen
class TransitionSpec:
    """One transition: ``source --event[guards]--> target / actions``."""

    source: str
    event: str
    target: str
    guards: tuple[str, ...] = ()
    unless: tuple[str, ...] = ()
    actions: tuple[str, ...] = ()

    @property
    def is_self(self) -> bool:
        """True when the transition stays in its source state."""
        return self.source == self.target


@attrs.frozen
class MachineTable:
    """The immutable, compiled form of a machine class, run by the reconciler."""

    name: str
    states: Mapping[str, StateSpec]
    initial: str
    events: tuple[str, ...]
    transitions: tuple[TransitionSpec, ...]
    index: Mapping[tuple[str, str], tuple[TransitionSpec, ...]]

    @property
    def finals(self) -> tuple[str, ...]:
        """Ids of the final states."""
        return tuple(s.id for s in self.states.values() if s.final)

    def candidates(self, state: str, event: str) -> tuple[TransitionSpec, ...]:
        """Transitions of ``event`` leaving ``state``, in declaration order."""
        return self.index.get((state, event), ())

    def fire(
        self, state: str, event: str, guard: Callable[[str], bool]
    ) -> TransitionSpec | None:
        """The first transition of ``event`` from ``state`` whose guards hold.

        ``guard(name)`` evaluates one guard; ``None`` means the event is not
        allowed in this state.
        """
        for transition in self.index.get((state, event), ()):
            # Plain loops (no generator objects): guards are asked in order, and
            # asking stops at the first that fails, as all() and any() would.
            held = True
            for name in transition.guards:
                if not guard(name):
                    held = False
                    break
            if held:
                for name in transition.unless:
                    if guard(name):
                        held = False
                        break
            if held:
                return transition
        return None


@functools.lru_cache(maxsize=256)  # state and event names: a small, fixed set
def camel(name: str) -> str:
    """A state or event id as CamelCase (``stuck_in`` -> ``StuckIn``), for reasons."""
    return "".join(part.capitalize() for part in name.split("_"))


def _callbacks(transition: Any, group: str) -> list[Any]:
    return [spec for spec in getattr(transition, group) if not spec.is_convention]


def _guard_names(cls: type, specs: list[Any]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    guards: list[str] = []
    unless: list[str] = []
    for spec in specs:
        name = spec.func
        if not isinstance(name, str) or not name.isidentifier():
            raise MachineDefinitionError(
                f"{cls.__name__}: guard {name!r} must be the name of a method "
                "taking (self, facts); boolean expressions and callables are not supported"
            )
        if not callable(getattr(cls, name, None)):
            raise MachineDefinitionError(f"{cls.__name__}: guard {name!r} is not a method")
        (guards if spec.expected_value else unless).append(name)
    return tuple(guards), tuple(unless)


def compile_table(cls: type[LifecycleMachine]) -> MachineTable:
    """Compile a machine class into its immutable transition table.

    Only transitions whose event belongs to ``cls`` and whose target is one
    of its states are kept: python-statemachine shares state objects with
    subclasses, so a sibling subclass's additions must not leak in.
    """
    state_ids = {s.id for s in cls.states}
    # Events are shared through python-statemachine's state objects too: keep
    # only those of this class that still have a transition after filtering.
    # On the class (not an instance) the metaclass holds the list of events.
    event_ids = [e.id for e in cls.events]  # type: ignore[attr-defined]
    states: dict[str, StateSpec] = {}
    transitions: list[TransitionSpec] = []
    for state in cls.states:
        states[state.id] = StateSpec(
            id=state.id,
            name=state.name,
            initial=state.initial,
            final=state.final,
            ready=cls.ready_condition.get(state.id, ("False", camel(state.id))),
            activity=cls.activity_conditions.get(state.id),
            doc=cls.state_docs.get(state.id, ""),
        )
        for t in state.transitions:
            if t.target.id not in state_ids:
                continue
            guards, unless = _guard_names(cls, _callbacks(t, "cond"))
            actions = tuple(spec.func for spec in _callbacks(t, "on"))
            for event in str(t.event).split():
                if event in event_ids:
                    transitions.append(
                        TransitionSpec(state.id, event, t.target.id, guards, unless, actions)
                    )
    used = {t.event for t in transitions}
    event_ids = [e for e in event_ids if e in used]
    index: dict[tuple[str, str], list[TransitionSpec]] = {}
    for t in transitions:
        index.setdefault((t.source, t.event), []).append(t)
    return MachineTable(
        name=cls.__name__,
        states=types.MappingProxyType(states),
        initial=cls.initial_state.id,
        events=tuple(event_ids),
        transitions=tuple(transitions),
        index=types.MappingProxyType({k: tuple(v) for k, v in index.items()}),
    )


def validate(table: MachineTable) -> None:
    """Check the managed-resource rules; raise :class:`MachineDefinitionError` if broken.

    Rules: exactly one initial state; at least one final state; every state
    reachable from the initial state; a final state reachable from every
    state; final states have no outgoing transitions.
    """
    name = table.name
    initials = [s.id for s in table.states.values() if s.initial]
    if len(initials) != 1:
        raise MachineDefinitionError(f"{name}: needs exactly one initial state, has {initials}")
    finals = set(table.finals)
    if not finals:
        raise MachineDefinitionError(f"{name}: needs a final state (such as 'deleted')")
    edges: dict[str, set[str]] = {s: set() for s in table.states}
    for t in table.transitions:
        edges[t.source].add(t.target)
    leaving_final = sorted({t.source for t in table.transitions if t.source in finals})
    if leaving_final:
        raise MachineDefinitionError(f"{name}: final states {leaving_final} have transitions")

    def reach(start: set[str], graph: Mapping[str, set[str]]) -> set[str]:
        seen, todo = set(start), list(start)
        while todo:
            for nxt in graph[todo.pop()]:
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return seen

    unreachable = sorted(set(table.states) - reach({table.initial}, edges))
    if unreachable:
        raise MachineDefinitionError(
            f"{name}: states {unreachable} cannot be reached from '{table.initial}'"
        )
    reverse: dict[str, set[str]] = {s: set() for s in table.states}
    for source, targets in edges.items():
        for target in targets:
            reverse[target].add(source)
    trapped = sorted(set(table.states) - reach(finals, reverse))
    if trapped:
        raise MachineDefinitionError(
            f"{name}: no path from {trapped} to a final state {sorted(finals)}; "
            "a resource entering them could never be deleted"
        )


class LifecycleMeta(StateMachineMetaclass):
    """Metaclass that validates and compiles every concrete machine class."""

    def __init__(cls, name: str, bases: tuple[type], attrs_: dict[str, Any]) -> None:
        try:
            super().__init__(name, bases, attrs_)
        except InvalidDefinition as exc:
            raise MachineDefinitionError(f"{name}: {exc}") from None
        if cls.states:
            table = compile_table(cls)  # type: ignore[arg-type]
            validate(table)
            cls._table = table
            cls._guard_host = None


class LifecycleMachine(StateMachine, metaclass=LifecycleMeta):
    """Base class of every lifecycle machine; declare states and events below it.

    Class attributes a kind may override: ``timing`` (:class:`Timing`),
    ``ready_condition`` (state id -> (status, reason) of the Ready condition),
    ``activity_conditions`` (state id -> condition type set True while in it),
    ``state_docs`` (state id -> one line for diagrams and docs) and
    ``history_limit`` (transitions kept in status).
    """

    timing: ClassVar[Timing] = Timing()
    ready_condition: ClassVar[Mapping[str, tuple[str, str]]] = {}
    activity_conditions: ClassVar[Mapping[str, str]] = {}
    state_docs: ClassVar[Mapping[str, str]] = {}
    history_limit: ClassVar[int] = 10
    _table: ClassVar[MachineTable]
    _guard_host: ClassVar[LifecycleMachine | None]

    @classmethod
    def table(cls) -> MachineTable:
        """The compiled, immutable transition table of this class."""
        try:
            table: MachineTable = cls.__dict__["_table"]
            return table
        except KeyError:
            raise MachineDefinitionError(f"{cls.__name__} declares no states") from None

    @classmethod
    def guard_host(cls) -> LifecycleMachine:
        """A shared instance whose bound guard and action methods the reconciler calls.

        Built once per class; guards and actions must keep no state on ``self``.
        """
        host = cls.__dict__.get("_guard_host")
        if host is None:
            host = cls()
            cls._guard_host = host
        return host
