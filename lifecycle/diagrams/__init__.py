"""Diagrams of lifecycle machines, drawn from the compiled table.

Everything here reads :meth:`LifecycleMachine.table` and the class's
:class:`~lifecycle.core.machine.Timing`, so a diagram cannot disagree with what
the reconciler runs. Outputs:

* **DOT** and **Mermaid** text, deterministic: the same class always gives
  the same bytes, so both are checked in under ``diagrams/`` and diffed;
* **SVG** and **PNG**, rendered from the DOT with the ``graphviz`` package
  and Graphviz's ``dot`` executable. Rendered bytes may differ between
  Graphviz versions, so a checked-in SVG carries the SHA-256 of the DOT it
  was drawn from (:data:`SOURCE_MARK`); freshness is checked on that.

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

A *live object* (a dict as read from the cluster, or a YAML/JSON dump) is
drawn on the same machine with its current state highlighted and the
transitions of ``status.history`` numbered in order.
"""

from __future__ import annotations

import argparse
import hashlib
import html
import importlib
import pkgutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import yaml

from lifecycle.core.errors import LifecycleError
from lifecycle.core.machine import LifecycleMachine, MachineTable, TransitionSpec

#: Output formats of ``lifecycle diagram``.
FORMATS = ("dot", "mermaid", "svg", "png")
#: File suffix -> format, used when ``-f`` is not given.
SUFFIXES = {".dot": "dot", ".gv": "dot", ".mmd": "mermaid", ".mermaid": "mermaid",
            ".svg": "svg", ".png": "png"}
#: Comment written into a checked-in SVG: the SHA-256 of the DOT it was rendered from.
SOURCE_MARK = "lifecycle-dot-sha256"
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
_DEFAULT_COLOUR = "#212121"
_FILL = {
    "True": "#dcf0dc",
    "False": "#fff3cd",
    "Unknown": "#eeeeee",
    "failed": "#f8d7da",
    "deletion": "#ebe4f5",
}
_HIGHLIGHT = "#ffb300"
_HISTORY = "#e65100"
_MERMAID_RESERVED = frozenset({"end", "state", "note", "class", "classdef", "direction"})


class DiagramError(LifecycleError):
    """A diagram cannot be drawn (bad object dump, missing ``dot``): one line for the user."""


# ---------------------------------------------------------------- the model


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
        return EVENT_COLOURS.get(self.lines[0].event, _DEFAULT_COLOUR)


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
    for (sources, in_deletion), members in sorted(
        bundled.items(), key=lambda item: (item[0][1], [order.index(s) for s in item[0][0]])
    ):
        excluded = tuple(s for s in live if s not in sources)
        suffix = "deletion" if in_deletion else "_".join(
            dict.fromkeys(t.target for t in members))
        hint = next((BUNDLE_HINTS[t.event] for t in members if t.event in BUNDLE_HINTS), "")
        bundle = Bundle(f"any_{suffix}" + ("_except_" + "_".join(excluded) if excluded else ""),
                        sources, excluded, in_deletion, hint)
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


# ------------------------------------------------------------------ DOT


def _h(text: str) -> str:
    return html.escape(text, quote=True)


def _q(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _state_fill(plan: Layout, state: str) -> str:
    spec = plan.table.states[state]
    if state in plan.deletion:
        return _FILL["deletion"]
    if state in backoff_states(plan.table):
        return _FILL["failed"]
    return _FILL.get(spec.ready[0], _FILL["Unknown"])


def _state_node(plan: Layout, state: str, live: LiveObject | None) -> str:
    spec = plan.table.states[state]
    marks = []
    if spec.initial:
        marks.append("initial")
    if spec.final:
        marks.append("final")
    name = f"<B>{_h(spec.name)}</B>"
    if marks:
        name += f' <FONT POINT-SIZE="9">({", ".join(marks)})</FONT>'
    rows = [name]
    if spec.doc:
        rows.append(f'<FONT POINT-SIZE="9"><I>{_h(spec.doc)}</I></FONT>')
    rows.append(f'<FONT POINT-SIZE="9">{_h(conditions_text(plan.table, state))}</FONT>')
    rows.append(f'<FONT POINT-SIZE="9" COLOR="#555555">{_h(plan.requeue[state])}</FONT>')
    if live is not None and state == live.state:
        word = "current state" if live.reconciled else "not reconciled yet"
        rows.append(f'<FONT POINT-SIZE="10" COLOR="{_HISTORY}"><B>{word}</B></FONT>')
    attrs_ = [f"label=<{'<BR/>'.join(rows)}>", f'fillcolor="{_state_fill(plan, state)}"']
    if spec.final:
        attrs_.append("peripheries=2")
    if live is not None and state == live.state:
        attrs_ += [f'color="{_HIGHLIGHT}"', "penwidth=4"]
    return f"  {state} [{', '.join(attrs_)}];"


def _edge_label(edge: Edge) -> str:
    lines = [f'<FONT COLOR="{EVENT_COLOURS.get(line.event, _DEFAULT_COLOUR)}">'
             f"{_h(line.text)}</FONT>" for line in edge.lines]
    return "<" + "<BR/>".join(lines) + ">"


def _edge(edge: Edge, plan: Layout) -> str:
    parts = [f"label={_edge_label(edge)}", f'color="{edge.colour}"',
             f'fontcolor="{edge.colour}"']
    events = {line.event for line in edge.lines}
    if events == {"wait"}:
        parts.append("style=dashed")
    if edge.source == edge.target:
        parts.append("dir=forward")
    if edge.target in plan.deletion and edge.source not in plan.deletion and \
            not edge.source.startswith("any_"):
        parts.append("constraint=false")
    return f"  {edge.source} -> {edge.target} [{', '.join(parts)}];"


def to_dot(machine: type[LifecycleMachine], live: LiveObject | None = None) -> str:
    """The machine as Graphviz DOT text; byte-identical for the same class and object."""
    plan = layout(machine)
    table = plan.table
    title = table.name if live is None else f"{live.title} on {table.name}"
    out = [
        f"digraph {_q(table.name)} {{",
        '  graph [rankdir=TB, nodesep=0.5, ranksep=0.6, fontname="Helvetica", '
        f'labelloc=t, fontsize=16, newrank=true, label=<<B>{_h(title)}</B><BR/>'
        f'<FONT POINT-SIZE="10">{_h(plan.summary)}</FONT>>];',
        '  node [shape=box, style="rounded,filled", fontname="Helvetica", fontsize=12, '
        'margin="0.15,0.08"];',
        '  edge [fontname="Helvetica", fontsize=10, arrowsize=0.8];',
        '  start [shape=circle, style=filled, fillcolor=black, label="", width=0.22];',
        '  end [shape=doublecircle, style=filled, fillcolor=black, label="", width=0.16];',
    ]
    live_states = [s for s in table.states if s not in plan.deletion]
    for state in live_states:
        out.append(_state_node(plan, state, live))
    for bundle in plan.bundles:
        if not bundle.deletion:
            out.append(_bundle_node(bundle))
    if plan.deletion:
        out.append("  subgraph cluster_deletion {")
        out.append('    graph [label=<<B>deletion</B> <FONT POINT-SIZE="10">'
                   "(pre-empts every state)</FONT>>, "
                   'style="dashed,rounded", color="#6a1b9a", fontcolor="#6a1b9a", '
                   "fontsize=12, labelloc=b];")
        for bundle in plan.bundles:
            if bundle.deletion:
                out.append("  " + _bundle_node(bundle))
        for state in plan.deletion:
            out.append("  " + _state_node(plan, state, live))
        out.append("    end;")
        out.append("  }")
    out.extend(_rank_hints(plan))
    out.append(f"  start -> {table.initial} [arrowsize=0.8];")
    for edge in plan.edges:
        out.append(_edge(edge, plan))
    for final in table.finals:
        out.append(f"  {final} -> end;")
    if live is not None:
        out.extend(_history_edges(live))
    out.append("}")
    return "\n".join(out) + "\n"


def _rank_hints(plan: Layout) -> list[str]:
    """Failure beside the available state; the deletion cluster below everything else."""
    table = plan.table
    live = [s for s in table.states if s not in plan.deletion]
    beside = [s for s in live if s in backoff_states(table) or table.states[s].ready[0] == "True"]
    hints = []
    if len(beside) > 1:
        hints.append("  {rank=same; " + "; ".join(beside) + "}")
    for bundle in plan.bundles:
        if bundle.deletion:
            hints.extend(f"  {state} -> {bundle.id} [style=invis];" for state in live)
    return hints


def _bundle_node(bundle: Bundle) -> str:
    return (f'  {bundle.id} [label={_q(bundle.label)}, shape=box, style="dashed,rounded", '
            'color="#616161", fontcolor="#424242", fontsize=11];')


def _history_edges(live: LiveObject) -> list[str]:
    grouped: dict[tuple[str, str], list[str]] = {}
    for number, (source, target, event) in enumerate(live.history, 1):
        grouped.setdefault((source, target), []).append(f"{number}. {event}")
    return [
        f"  {source} -> {target} [xlabel={_q(chr(10).join(labels))}, color=\"{_HISTORY}\", "
        f'fontcolor="{_HISTORY}", penwidth=2.5, constraint=false, fontsize=11];'
        for (source, target), labels in grouped.items()
    ]


# -------------------------------------------------------------- Mermaid


def _mid(node: str) -> str:
    return f"s_{node}" if node.lower() in _MERMAID_RESERVED else node


def to_mermaid(machine: type[LifecycleMachine], live: LiveObject | None = None) -> str:
    """The machine as a Mermaid ``stateDiagram-v2``; byte-identical for the same class."""
    plan = layout(machine)
    table = plan.table
    title = table.name if live is None else f"{live.title} on {table.name}"
    out = ["---", f"title: {title}", "---", "stateDiagram-v2", "    direction TB"]
    for state, spec in table.states.items():
        node = _mid(state)
        marks = [m for m, on in (("initial", spec.initial), ("final", spec.final)) if on]
        out.append(f"    {node} : {spec.name}" + (f" ({', '.join(marks)})" if marks else ""))
        if spec.doc:
            out.append(f"    {node} : {_mtext(spec.doc)}")
        out.append(f"    {node} : {_mtext(conditions_text(table, state))}")
        out.append(f"    {node} : {_mtext(plan.requeue[state])}")
    for bundle in plan.bundles:
        out.append(f'    state "{_mtext(bundle.label.replace(chr(10), ", "))}" as {bundle.id}')
    out.append(f"    [*] --> {_mid(table.initial)}")
    for edge in plan.edges:
        for line in edge.lines:
            out.append(f"    {_mid(edge.source)} --> {_mid(edge.target)} : {_mtext(line.text)}")
    for final in table.finals:
        out.append(f"    {_mid(final)} --> [*]")
    if live is not None:
        for number, (source, target, event) in enumerate(live.history, 1):
            out.append(f"    {_mid(source)} --> {_mid(target)} : ({number}) {_mtext(event)}")
    out.append("    classDef bundle fill:#ffffff,stroke:#616161,stroke-dasharray:5 5")
    out.append(f"    classDef deletion fill:{_FILL['deletion']}")
    out.append(f"    classDef failure fill:{_FILL['failed']}")
    out.append(f"    classDef available fill:{_FILL['True']}")
    out.append(f"    classDef current stroke:{_HIGHLIGHT},stroke-width:4px")
    classes = {
        "bundle": [b.id for b in plan.bundles],
        "deletion": [_mid(s) for s in plan.deletion],
        "failure": [_mid(s) for s in backoff_states(table) if s not in plan.deletion],
        "available": [_mid(s) for s, spec in table.states.items()
                      if spec.ready[0] == "True" and s not in plan.deletion],
    }
    for name, members in classes.items():
        if members:
            out.append(f"    class {','.join(members)} {name}")
    if live is not None:
        out.append(f"    class {_mid(live.state)} current")
    return "\n".join(out) + "\n"


def _mtext(text: str) -> str:
    # ':' and ';' end a Mermaid statement or label; '#' starts an entity code.
    return text.replace(":", " -").replace(";", ",").replace("#", "No.")


# ------------------------------------------------------------ rendering


def render(machine: type[LifecycleMachine], fmt: str, live: LiveObject | None = None) -> bytes:
    """The diagram in ``fmt`` (dot, mermaid, svg, png) as bytes.

    SVG and PNG need Graphviz's ``dot``; without it :class:`DiagramError`
    says so in one line. A rendered SVG carries the DOT's SHA-256 in a
    comment (:data:`SOURCE_MARK`).
    """
    if fmt == "dot":
        return to_dot(machine, live).encode()
    if fmt == "mermaid":
        return to_mermaid(machine, live).encode()
    if fmt not in FORMATS:
        raise DiagramError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    source = to_dot(machine, live)
    data = render_dot(source, fmt)
    if fmt == "svg":
        data = mark_svg(data, source)
    return data


def render_dot(source: str, fmt: str) -> bytes:
    """Run Graphviz ``dot`` on ``source``; :class:`DiagramError` if it is missing or fails."""
    import graphviz

    try:
        return graphviz.Source(source).pipe(format=fmt)
    except graphviz.ExecutableNotFound:
        raise DiagramError(
            f"cannot render {fmt}: Graphviz 'dot' is not on PATH (install the graphviz "
            "system package, e.g. apt-get install graphviz); -f dot and -f mermaid work without it"
        ) from None
    except graphviz.CalledProcessError as exc:
        first = (exc.stderr or b"").decode(errors="replace").strip().splitlines()
        raise DiagramError(f"dot failed: {first[0] if first else exc}") from None


def source_digest(source: str) -> str:
    """The SHA-256 of a DOT source, as written into an SVG's :data:`SOURCE_MARK`."""
    return hashlib.sha256(source.encode()).hexdigest()


def mark_svg(svg: bytes, source: str) -> bytes:
    """Insert the DOT source's digest as a comment right before the ``<svg`` element."""
    mark = f"<!-- {SOURCE_MARK}: {source_digest(source)} -->\n".encode()
    at = svg.find(b"<svg")
    if at < 0:
        raise DiagramError("dot produced no <svg> element")
    return svg[:at] + mark + svg[at:]


def svg_digest(svg: bytes) -> str | None:
    """The DOT digest recorded in an SVG by :func:`mark_svg`, or None."""
    marker = f"<!-- {SOURCE_MARK}: ".encode()
    at = svg.find(marker)
    if at < 0:
        return None
    end = svg.find(b" -->", at)
    return svg[at + len(marker):end].decode(errors="replace")


# ------------------------------------------------------------ live objects


def object_diagram(
    obj: Mapping[str, Any],
    machine: type[LifecycleMachine] | None = None,
    fmt: str = "svg",
) -> bytes:
    """Draw ``obj`` (an object dict) on its machine in ``fmt``.

    Without ``machine`` the machine is found from the object's apiVersion and
    kind among the bundled kinds (:func:`bundled_kinds`).
    """
    if machine is None:
        machine = machine_for(obj)
    return render(machine, fmt, LiveObject.from_dict(obj, machine))


def cluster_diagram(
    cluster: Any, kind: Any, namespace: str | None, name: str, fmt: str = "svg"
) -> bytes:
    """Read ``namespace/name`` of ``kind`` from a cluster and draw it on the kind's machine.

    ``cluster`` is anything with the :class:`lifecycle.kube.cluster.Cluster` ``get``,
    such as the embedded API of :class:`lifecycle.testing.Environment`.
    """
    obj = cluster.get(kind.api_version, kind.kind, namespace, name)
    return object_diagram(obj, kind.machine, fmt)


def load_object(path: str | Path, name: str | None = None) -> dict[str, Any]:
    """Read one object from a YAML or JSON dump (a single object or a List of them).

    With several objects, ``name`` picks one. Raises :class:`DiagramError`
    with one line when the file cannot be used.
    """
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise DiagramError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise DiagramError(f"{path} is not valid YAML or JSON{where}") from None
    objects: list[Any] = []
    for doc in docs:
        if isinstance(doc, Mapping) and isinstance(doc.get("items"), list):
            objects.extend(doc["items"])
        else:
            objects.append(doc)
    if name is not None:
        objects = [o for o in objects if isinstance(o, Mapping)
                   and (o.get("metadata") or {}).get("name") == name]
    if len(objects) != 1:
        which = f" named {name!r}" if name else ""
        hint = "" if name else "; pass --name"
        raise DiagramError(f"{path} holds {len(objects)} objects{which}, expected one{hint}")
    obj = objects[0]
    if not isinstance(obj, Mapping):
        raise DiagramError(f"{path} does not hold a Kubernetes object")
    return dict(obj)


def machine_for(obj: Mapping[str, Any]) -> type[LifecycleMachine]:
    """The machine of the bundled kind matching the object's apiVersion and kind."""
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    for candidate in bundled_kinds():
        if candidate.api_version == api_version and candidate.kind == kind:
            return candidate.machine
    raise DiagramError(f"no bundled kind is {kind!r} of {api_version!r}; name the machine "
                       "as MODULE:CLASS")


# -------------------------------------------------------------- discovery


def _machine_modules() -> list[Any]:
    import lifecycle.machines as machines

    modules = []
    for info in sorted(pkgutil.iter_modules(machines.__path__), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        name = f"lifecycle.machines.{info.name}"
        try:
            modules.append(importlib.import_module(name))
        except Exception as exc:  # a broken module must be named, not crash the command
            raise DiagramError(f"cannot import {name}: {type(exc).__name__}: {exc}") from None
    return modules


def bundled_machines() -> list[type[LifecycleMachine]]:
    """Every machine class defined in a ``machines/*.py`` module, by module then name."""
    found = []
    for module in _machine_modules():
        for _, value in sorted(vars(module).items()):
            if (isinstance(value, type) and issubclass(value, LifecycleMachine)
                    and value.__module__ == module.__name__ and "_table" in value.__dict__):
                found.append(value)
    return found


def bundled_kinds() -> list[Any]:
    """Every :class:`lifecycle.core.kind.Kind` defined in a ``machines/*.py`` module."""
    from lifecycle.core.kind import Kind

    found = []
    for module in _machine_modules():
        for _, value in sorted(vars(module).items()):
            if isinstance(value, Kind) and value not in found:
                found.append(value)
    return found


def project_root() -> Path:
    """The source tree holding ``machines/`` (where ``diagrams/`` and ``docs/`` live)."""
    import lifecycle.machines as machines

    root = Path(machines.__path__[0]).resolve().parent
    return root if (root / "pyproject.toml").exists() else Path.cwd()


def generated_files(
    root: Path | None = None, machines: Sequence[type[LifecycleMachine]] | None = None
) -> dict[Path, bytes]:
    """Every generated file under ``root``: diagrams/ (DOT, Mermaid, SVG) and docs/reference/.

    ``machines`` defaults to :func:`bundled_machines`. Needs Graphviz ``dot``
    for the SVGs.
    """
    from lifecycle.diagrams import reference as docgen

    root = root or project_root()
    files: dict[Path, bytes] = {}
    machines_ = list(bundled_machines() if machines is None else machines)
    names = [m.__name__ for m in machines_]
    clash = sorted({n for n in names if names.count(n) > 1})
    if clash:
        raise DiagramError(f"machine class names must be unique across machines/: {clash}")
    for machine in machines_:
        base = root / "diagrams" / machine.__name__
        source = to_dot(machine)
        files[base.with_suffix(".dot")] = source.encode()
        files[base.with_suffix(".mmd")] = to_mermaid(machine).encode()
        files[base.with_suffix(".svg")] = mark_svg(render_dot(source, "svg"), source)
    kinds = bundled_kinds() if machines is None else []
    for path, text in docgen.reference_pages(machines_, kinds, root).items():
        files[path] = text.encode()
    return files


def stale_files(
    root: Path | None = None, machines: Sequence[type[LifecycleMachine]] | None = None
) -> list[str]:
    """Generated files that are missing or out of date under ``root``, relative paths.

    DOT, Mermaid and Markdown compare byte for byte; an SVG is fresh when the
    DOT digest it carries matches the DOT generated now.
    """
    root = root or project_root()
    files = generated_files(root, machines)
    stale = []
    for path, wanted in sorted(files.items()):
        try:
            have = path.read_bytes()
        except FileNotFoundError:
            stale.append(str(path.relative_to(root)))
            continue
        if path.suffix == ".svg":
            dot = files[path.with_suffix(".dot")].decode()
            if svg_digest(have) != source_digest(dot):
                stale.append(str(path.relative_to(root)))
        elif have != wanted:
            stale.append(str(path.relative_to(root)))
    stale.extend(str(p.relative_to(root)) for p in _leftovers(root, files))
    return sorted(stale)


def _leftovers(root: Path, files: Mapping[Path, bytes]) -> list[Path]:
    """Generated-looking files under diagrams/ and docs/reference/ that nothing generates."""
    found = []
    for folder, suffixes in ((root / "diagrams", {".dot", ".mmd", ".svg"}),
                             (root / "docs" / "reference", {".md"})):
        if folder.is_dir():
            found.extend(p for p in sorted(folder.iterdir())
                         if p.is_file() and p.suffix in suffixes and p not in files)
    return found


def write_generated(
    root: Path | None = None, machines: Sequence[type[LifecycleMachine]] | None = None
) -> list[Path]:
    """Write every generated file, remove stale generated ones; return the files written."""
    root = root or project_root()
    files = generated_files(root, machines)
    for old in _leftovers(root, files):
        old.unlink()
    for path, data in sorted(files.items()):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return sorted(files)


# ------------------------------------------------------------------- CLI


def register(subparsers: Any) -> None:
    """Add the ``diagram`` and ``diagrams`` subcommands."""
    one = subparsers.add_parser(
        "diagram",
        help="draw a machine class (or a live object on its machine)",
        description="Draw every state and transition of a machine class as DOT, Mermaid, "
                    "SVG or PNG. With --object, draw a resource dumped as YAML or JSON on its "
                    "machine, its current state highlighted and its history numbered.",
    )
    one.add_argument("machine", nargs="?", metavar="MODULE:CLASS",
                     help="e.g. lifecycle.machines.managed:ManagedResourceMachine (optional with --object)")
    one.add_argument("-f", "--format", choices=FORMATS,
                     help="output format (default: from -o's suffix, else dot)")
    one.add_argument("-o", "--output", metavar="PATH", help="write here instead of stdout")
    one.add_argument("--object", metavar="FILE", help="a YAML/JSON dump of one object")
    one.add_argument("--name", help="with --object: pick this object from a List")
    one.set_defaults(func=_diagram_command)
    many = subparsers.add_parser(
        "diagrams",
        help="regenerate diagrams/ and docs/reference/ for every bundled machine",
        description="Write SVG, DOT and Mermaid for every machine class in machines/*.py into "
                    "diagrams/, and its reference page into docs/reference/.",
    )
    many.add_argument("--root", metavar="DIR", help="project root (default: the source tree)")
    many.add_argument("--check", action="store_true",
                      help="write nothing; exit 1 listing stale files")
    many.set_defaults(func=_diagrams_command)


def _diagram_command(args: argparse.Namespace) -> int:
    from lifecycle.cli import UsageError, load

    fmt = args.format
    if fmt is None and args.output:
        fmt = SUFFIXES.get(Path(args.output).suffix.lower())
    fmt = fmt or "dot"
    machine: type[LifecycleMachine] | None = None
    if args.machine:
        loaded = load(args.machine)
        if not (isinstance(loaded, type) and issubclass(loaded, LifecycleMachine)
                and "_table" in loaded.__dict__):
            raise UsageError(f"{args.machine} is not a LifecycleMachine class with states")
        machine = loaded
    elif not args.object:
        raise UsageError("name a machine as MODULE:CLASS, or an object dump with --object")
    live = None
    if args.object:
        obj = load_object(args.object, args.name)
        machine = machine or machine_for(obj)
        live = LiveObject.from_dict(obj, machine)
    assert machine is not None
    data = render(machine, fmt, live)
    if args.output:
        Path(args.output).write_bytes(data)
    else:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
    return 0


def _diagrams_command(args: argparse.Namespace) -> int:
    root = Path(args.root) if args.root else project_root()
    if args.check:
        stale = stale_files(root)
        for path in stale:
            print(f"stale: {path}")
        if stale:
            print("run `lifecycle diagrams` to regenerate", file=sys.stderr)
        return 1 if stale else 0
    for path in write_generated(root):
        print(path.relative_to(root))
    return 0


__all__ = [
    "FORMATS",
    "SOURCE_MARK",
    "Bundle",
    "DiagramError",
    "Edge",
    "Layout",
    "LiveObject",
    "bundled_kinds",
    "bundled_machines",
    "cluster_diagram",
    "generated_files",
    "layout",
    "load_object",
    "machine_for",
    "object_diagram",
    "render",
    "stale_files",
    "to_dot",
    "to_mermaid",
    "write_generated",
]
