"""Diagrams and reference pages of lifecycle machines, drawn from the compiled table.

A pipeline in one direction, one module per step:

* :mod:`~lifecycle.diagrams.model`: :func:`layout` reads a machine's table and
  timing into a format-free :class:`Layout` (edges, *any state* bundles,
  deletion cluster, per-state conditions and requeue text), and
  :class:`LiveObject` holds a resource's current state and history;
* :mod:`~lifecycle.diagrams.dot` and :mod:`~lifecycle.diagrams.mermaid`: the
  renderers to text, deterministic so both are checked in and diffed;
* :mod:`~lifecycle.diagrams.render`: any format by name, SVG and PNG through
  Graphviz ``dot``, with the DOT's digest marked in a rendered SVG;
* :mod:`~lifecycle.diagrams.live`: objects read from a cluster or a YAML/JSON
  dump, drawn on the machine of their registered kind;
* :mod:`~lifecycle.diagrams.discover`: which machines get files (the registered
  kinds' machines and their ancestors, or those of named modules);
* :mod:`~lifecycle.diagrams.reference` and :mod:`~lifecycle.diagrams.files`:
  the reference pages, and every generated file of a project with its freshness.

Nothing here imports the command line; errors a user can fix are
:class:`DiagramError` (a :class:`~lifecycle.core.errors.LifecycleError`).
"""

from __future__ import annotations

from lifecycle.diagrams.discover import (
    bundled_kinds,
    bundled_machines,
    import_modules,
    kinds_in,
    machines_in,
)
from lifecycle.diagrams.dot import to_dot
from lifecycle.diagrams.files import (
    generated_files,
    project_root,
    stale_files,
    write_generated,
)
from lifecycle.diagrams.live import cluster_diagram, load_object, machine_for, object_diagram
from lifecycle.diagrams.mermaid import to_mermaid
from lifecycle.diagrams.model import (
    Bundle,
    DiagramError,
    Edge,
    Layout,
    Line,
    LiveObject,
    conditions_text,
    duration,
    layout,
    requeue_text,
    transition_text,
)
from lifecycle.diagrams.render import (
    FORMATS,
    SOURCE_MARK,
    SUFFIXES,
    mark_svg,
    render,
    render_dot,
    source_digest,
    svg_digest,
)

__all__ = [
    "FORMATS",
    "SOURCE_MARK",
    "SUFFIXES",
    "Bundle",
    "DiagramError",
    "Edge",
    "Layout",
    "Line",
    "LiveObject",
    "bundled_kinds",
    "bundled_machines",
    "cluster_diagram",
    "conditions_text",
    "duration",
    "generated_files",
    "import_modules",
    "kinds_in",
    "layout",
    "load_object",
    "machine_for",
    "machines_in",
    "mark_svg",
    "object_diagram",
    "project_root",
    "render",
    "render_dot",
    "requeue_text",
    "source_digest",
    "stale_files",
    "svg_digest",
    "to_dot",
    "to_mermaid",
    "transition_text",
    "write_generated",
]
