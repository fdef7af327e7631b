"""The diagram model: what a machine's picture shows, independent of the output format.

Everything here reads :meth:`LifecycleMachine.table` and the class's
:class:`~lifecycle.core.machine.Timing`, so a diagram cannot disagree with what
the reconciler runs. :func:`layout` groups the compiled transitions into
edges and *any state* bundles; the DOT and Mermaid renderers only format
that :class:`Layout`.

Layout rules that keep the picture readable:

* parallel transitions between two states share one edge, one label line
  per transition (``event [guard] / action``), coloured by event;
* a transition declared from (nearly) every live state, such as ``delete``,
  ``gone``, ``orphan`` or ``fail``, is drawn once from a dashed *any state*
  node that names the states it leaves out, instead of one edge per source;
* the deletion states (those whose only way on is towards a final state)
  sit in a "deletion" cluster with their own *any state* node;
* each state shows the ``Ready`` condition it sets, its activity condition
  and its requeue behaviour (poll, wait, backoff, Stuck limit).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from lifecycle.core.errors import LifecycleError
from lifecycle.core.machine import LifecycleMachine, MachineTable, TransitionSpec

__all__ = [
    "BUNDLE_HINTS",
    "DEFAULT_COLOUR",
    "EVENT_COLOURS",
    "FAIL_EVENT",
    "FILL",
    "HIGHLIGHT",
    "HISTORY_COLOUR",
    "Bundle",
    "DiagramError",
    "Edge",
    "Layout",
    "Line",
    "LiveObject",
    "backoff_states",
    "conditions_text",
    "deletion_states",
    "duration",
    "layout",
    "requeue_text",
    "transition_text",
]

#: The event the engine fires for every handled error; its target backs off.
FAIL_EVENT = "fail"

#: Edge colour per event of the standard machine; other events are drawn black.
EVENT_COLOURS = {
    "create": "#2e7d32",
    "available": "#00796b",
    "update": "#1565c0",
    "wait": "#757575",
    "fail": "#c62828",
    "delete": "#6a1b9a",
    "gone": "#6a1b9a",
    "orphan": "#6a1b9a",
}
#: When the engine fires an event (see :func:`lifecycle.core.decide.choose_event`), shown
#: on an *any state* node.
BUNDLE_HINTS = {
    "fail": "on a handled error",
    "delete": "once deletion is requested",
    "gone": "once deletion is requested",
    "orphan": "once deletion is requested",
}
#: Colour of an event not in :data:`EVENT_COLOURS`.
DEFAULT_COLOUR = "#212121"
#: Node fill per Ready status, and for the failure and deletion states.
FILL = {
    "True": "#dcf0dc",
    "False": "#fff3cd",
    "Unknown": "#eeeeee",
    "failed": "#f8d7da",
    "deletion": "#ebe4f5",
}
#: Outline of the current state of a live object.
HIGHLIGHT = "#ffb300"
#: Colour of the numbered history of a live object.
HISTORY_COLOUR = "#e65100"


class DiagramError(LifecycleError):
    """A diagram cannot be drawn (bad object dump, missing ``dot``): one line for the user."""


@attrs.frozen
class Line:
    """One transition as written on an edge: its event and its full label text."""

    event: str
    text: str


@attrs.frozen
class Edge:
    """Every transition from one node to one state, drawn as a single edge."""

    source: str
    target: str
    lines: tuple[Line, ...]

    @property
    def colour(self) -> str:
        """The colour of the edge: that of its first event."""
        return EVENT_COLOURS.get(self.lines[0].event, DEFAULT_COLOUR)


@attrs.frozen
class Bundle:
    """A dashed *any state* node standing for a set of source states.

    ``excluded`` are the non-final states that are *not* sources, named on
    the node so no transition is hidden.
    """

    id: str
    sources: tuple[str, ...]
    excluded: tuple[str, ...]
    deletion: bool

    hint: str = ""

    @property
    def label(self) -> str:
        """``any state``, or ``any state except a, b``, then the hint on its own line."""
        text = "any state"
        if self.excluded:
            text += " except " + ", ".join(self.excluded)
        return f"{text}\n{self.hint}" if self.hint else text


@attrs.frozen
class Layout:
    """What a diagram shows, independent of the output format."""

    table: MachineTable
    edges: tuple[Edge, ...]
    bundles: tuple[Bundle, ...]
    deletion: tuple[str, ...]
    requeue: Mapping[str, str]
    summary: str


@attrs.frozen
class LiveObject:
    """A resource drawn on its machine: its name, current state and recorded history.

    ``history`` holds ``(source, target, event)`` in the order recorded in
    ``status.history`` (bounded by the machine's ``history_limit``).
    """

    title: str
    state: str
    history: tuple[tuple[str, str, str], ...]
    reconciled: bool = True

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any], machine: type[LifecycleMachine]) -> LiveObject:
        """Read name, state and history from an object; raise :class:`DiagramError` if unusable."""
        if not isinstance(obj, Mapping) or not isinstance(obj.get("metadata"), Mapping):
            raise DiagramError("the object has no metadata; expected a Kubernetes object")
        table = machine.table()
        meta = obj["metadata"]
        name = str(meta.get("name", "?"))
        namespace = meta.get("namespace")
        title = f"{obj.get('kind', '?')} {namespace}/{name}" if namespace else \
            f"{obj.get('kind', '?')} {name}"
        status = obj.get("status")
        if status is None:
            status = {}
        if not isinstance(status, Mapping):
            raise DiagramError("status of the object is not a mapping")
        state = status.get("state")
        reconciled = state is not None
        if state is None:
            state = table.initial
        if state not in table.states:
            raise DiagramError(
                f"status.state {str(state)[:64]!r} is not a state of {table.name}")
        entries = status.get("history") or []
        if not isinstance(entries, Sequence) or isinstance(entries, str):
            raise DiagramError("status.history is not a list")
        history = []
        for number, entry in enumerate(entries, 1):
            if not isinstance(entry, Mapping):
                raise DiagramError(f"status.history entry {number} is not a mapping")
            source, target = entry.get("from"), entry.get("to")
            for end in (source, target):
                if end not in table.states:
                    raise DiagramError(f"status.history entry {number} names "
                                       f"{str(end)[:64]!r}, not a state of {table.name}")
            history.append((str(source), str(target), str(entry.get("event", ""))))
        return cls(title=title, state=str(state), history=tuple(history), reconciled=reconciled)


def duration(seconds: float) -> str:
    """A short human duration: ``5 s``, ``0.5 s``, ``30 min``, ``2 h``."""
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{int(seconds // 3600)} h"
    if seconds >= 60 and seconds % 60 == 0:
        return f"{int(seconds // 60)} min"
    return f"{seconds:g} s"


def transition_text(t: TransitionSpec) -> str:
    """``event [guard, not other] / action`` for one transition."""
    text = t.event
    guards = list(t.guards) + [f"not {u}" for u in t.unless]
    if guards:
        text += " [" + ", ".join(guards) + "]"
    if t.actions:
        text += " / " + ", ".join(t.actions)
    return text


def backoff_states(table: MachineTable) -> tuple[str, ...]:
    """States entered by the fail event: the reconciler backs off while in them."""
    targets = {t.target for t in table.transitions if t.event == FAIL_EVENT}
    return tuple(s for s in table.states if s in targets)


def deletion_states(table: MachineTable) -> tuple[str, ...]:
    """Final states, and states whose only ways on (failure aside) lead towards one."""
    region = set(table.finals)
    changed = True
    while changed:
        changed = False
        for state in table.states:
            if state in region:
                continue
            exits = [t.target for t in table.transitions
                     if t.source == state and t.target != state and t.event != FAIL_EVENT]
            if exits and all(target in region for target in exits):
                region.add(state)
                changed = True
    return tuple(s for s in table.states if s in region)


def requeue_text(machine: type[LifecycleMachine], state: str) -> str:
    """The requeue behaviour in ``state``, following :func:`lifecycle.core.decide.requeue`."""
    table = machine.table()
    timing = machine.timing
    if table.states[state].final:
        return "done (no requeue)"
    if state in backoff_states(table):
        text = "backoff (exponential, at least retry-after); terminal error waits for a new spec"
    elif state in timing.wait:
        text = f"requeue after {duration(timing.wait_for(state))}"
    else:
        text = f"poll every {duration(timing.poll)} ±{timing.jitter * 100:g} %"
    limit = timing.max_in_state.get(state)
    if limit is not None:
        text += f"; Stuck after {duration(limit)}"
    return text


def conditions_text(table: MachineTable, state: str) -> str:
    """``Ready=False (Creating), Creating=True``: the conditions a state sets."""
    spec = table.states[state]
    text = f"Ready={spec.ready[0]} ({spec.ready[1]})"
    if spec.activity:
        text += f", {spec.activity}=True"
    return text


def layout(machine: type[LifecycleMachine]) -> Layout:
    """Group the machine's transitions into edges and *any state* bundles."""
    table = machine.table()
    order = list(table.states)
    live = [s for s in order if not table.states[s].final]
    deletion = deletion_states(table)
    groups: dict[tuple[str, str, tuple[str, ...], tuple[str, ...], tuple[str, ...]],
                 list[TransitionSpec]] = {}
    for t in table.transitions:
        groups.setdefault((t.event, t.target, t.guards, t.unless, t.actions), []).append(t)
    bundled: dict[tuple[tuple[str, ...], bool], list[TransitionSpec]] = {}
    single: list[TransitionSpec] = []
    for members in groups.values():
        sources = {t.source for t in members}
        target = members[0].target
        excluded = [s for s in live if s not in sources and s != target]
        preempts = target in deletion or members[0].event == FAIL_EVENT
        if preempts and len(sources) >= 3 and len(excluded) * 3 <= len(live):
            key = (tuple(s for s in live if s in sources or s == target), target in deletion)
            bundled.setdefault(key, []).append(members[0])
        else:
            single.extend(members)
    bundles: list[Bundle] = []
    edges: list[Edge] = []
    for (bundle_sources, in_deletion), members in sorted(
        bundled.items(), key=lambda item: (item[0][1], [order.index(s) for s in item[0][0]])
    ):
        left_out = tuple(s for s in live if s not in bundle_sources)
        suffix = "deletion" if in_deletion else "_".join(
            dict.fromkeys(t.target for t in members))
        hint = next((BUNDLE_HINTS[t.event] for t in members if t.event in BUNDLE_HINTS), "")
        bundle = Bundle(f"any_{suffix}" + ("_except_" + "_".join(left_out) if left_out else ""),
                        bundle_sources, left_out, in_deletion, hint)
        bundles.append(bundle)
        edges.extend(_merge(bundle.id, members, table))
    by_source: dict[str, list[TransitionSpec]] = {}
    for t in single:
        by_source.setdefault(t.source, []).append(t)
    for source in order:
        edges.extend(_merge(source, by_source.get(source, []), table))
    timing = machine.timing
    summary = (f"poll {duration(timing.poll)} ±{timing.jitter * 100:g} % when in sync; "
               "wait interval while an operation is pending; "
               "backoff after a handled error; requeue now when the object changed")
    return Layout(
        table=table,
        edges=tuple(edges),
        bundles=tuple(bundles),
        deletion=deletion,
        requeue={s: requeue_text(machine, s) for s in order},
        summary=summary,
    )


def _merge(source: str, transitions: list[TransitionSpec], table: MachineTable) -> list[Edge]:
    """One edge per target state, its lines in event-declaration order."""
    events = list(table.events)
    targets: dict[str, list[TransitionSpec]] = {}
    for t in transitions:
        targets.setdefault(t.target, []).append(t)
    edges = []
    for target in table.states:
        if target in targets:
            ordered = sorted(targets[target], key=lambda t: events.index(t.event))
            edges.append(Edge(source, target, tuple(Line(t.event, transition_text(t))
                                                    for t in ordered)))
    return edges
