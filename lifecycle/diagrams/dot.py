"""The Graphviz DOT renderer of a diagram :class:`~lifecycle.diagrams.model.Layout`.

The text is deterministic: the same class (and live object) always gives
the same bytes, so DOT files are checked in and diffed. States carry HTML
labels (name, meaning, conditions, requeue); the deletion states sit in a
dashed cluster below the others; a live object's current state is outlined
and its history drawn as numbered extra edges.
"""

from __future__ import annotations

import html

from lifecycle.core.machine import LifecycleMachine
from lifecycle.diagrams.model import (
    DEFAULT_COLOUR,
    EVENT_COLOURS,
    FILL,
    HIGHLIGHT,
    HISTORY_COLOUR,
    Bundle,
    Edge,
    Layout,
    LiveObject,
    backoff_states,
    conditions_text,
    layout,
)

__all__ = ["to_dot"]


def _h(text: str) -> str:
    return html.escape(text, quote=True)


def _q(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _state_fill(plan: Layout, state: str) -> str:
    spec = plan.table.states[state]
    if state in plan.deletion:
        return FILL["deletion"]
    if state in backoff_states(plan.table):
        return FILL["failed"]
    return FILL.get(spec.ready[0], FILL["Unknown"])


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
        rows.append(f'<FONT POINT-SIZE="10" COLOR="{HISTORY_COLOUR}"><B>{word}</B></FONT>')
    attrs_ = [f"label=<{'<BR/>'.join(rows)}>", f'fillcolor="{_state_fill(plan, state)}"']
    if spec.final:
        attrs_.append("peripheries=2")
    if live is not None and state == live.state:
        attrs_ += [f'color="{HIGHLIGHT}"', "penwidth=4"]
    return f"  {state} [{', '.join(attrs_)}];"


def _edge_label(edge: Edge) -> str:
    lines = [f'<FONT COLOR="{EVENT_COLOURS.get(line.event, DEFAULT_COLOUR)}">'
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
        f"  {source} -> {target} [xlabel={_q(chr(10).join(labels))}, color=\"{HISTORY_COLOUR}\", "
        f'fontcolor="{HISTORY_COLOUR}", penwidth=2.5, constraint=false, fontsize=11];'
        for (source, target), labels in grouped.items()
    ]
