"""The Mermaid renderer: a diagram :class:`~lifecycle.diagrams.model.Layout` as
a ``stateDiagram-v2``, deterministic like the DOT text.

Mermaid ends a label at ``:`` or ``;`` and reads ``#`` as an entity code, so
label text is rewritten to avoid them; state ids that are Mermaid keywords
get an ``s_`` prefix.
"""

from __future__ import annotations

from lifecycle.core.machine import LifecycleMachine
from lifecycle.diagrams.model import (
    FILL,
    HIGHLIGHT,
    LiveObject,
    backoff_states,
    conditions_text,
    layout,
)

__all__ = ["to_mermaid"]

_MERMAID_RESERVED = frozenset({"end", "state", "note", "class", "classdef", "direction"})


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
    out.append(f"    classDef deletion fill:{FILL['deletion']}")
    out.append(f"    classDef failure fill:{FILL['failed']}")
    out.append(f"    classDef available fill:{FILL['True']}")
    out.append(f"    classDef current stroke:{HIGHLIGHT},stroke-width:4px")
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
