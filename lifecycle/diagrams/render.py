"""Rendering a machine's diagram in any output format.

DOT and Mermaid are text, produced in Python. SVG and PNG are rendered from
the DOT with the ``graphviz`` package and Graphviz's ``dot`` executable.
Rendered bytes may differ between Graphviz versions, so a checked-in SVG
carries the SHA-256 of the DOT it was drawn from (:data:`SOURCE_MARK`), and
freshness is checked on that digest rather than on the SVG's bytes.
"""

from __future__ import annotations

import hashlib

from lifecycle.core.machine import LifecycleMachine
from lifecycle.diagrams.dot import to_dot
from lifecycle.diagrams.mermaid import to_mermaid
from lifecycle.diagrams.model import DiagramError, LiveObject

__all__ = [
    "FORMATS",
    "SOURCE_MARK",
    "SUFFIXES",
    "mark_svg",
    "render",
    "render_dot",
    "source_digest",
    "svg_digest",
    "with_dpi",
]

#: Output formats of ``lifecycle diagram``.
FORMATS = ("dot", "mermaid", "svg", "png")
#: File suffix -> format, used when ``-f`` is not given.
SUFFIXES = {".dot": "dot", ".gv": "dot", ".mmd": "mermaid", ".mermaid": "mermaid",
            ".svg": "svg", ".png": "png"}
#: Comment written into a checked-in SVG: the SHA-256 of the DOT it was rendered from.
SOURCE_MARK = "lifecycle-dot-sha256"


def render(machine: type[LifecycleMachine], fmt: str, live: LiveObject | None = None, *,
           dpi: int | None = None) -> bytes:
    """The diagram in ``fmt`` (dot, mermaid, svg, png) as bytes.

    SVG and PNG need Graphviz's ``dot``; without it :class:`DiagramError`
    says so in one line. A rendered SVG carries the DOT's SHA-256 in a
    comment (:data:`SOURCE_MARK`). ``dpi`` sets a PNG's resolution (default:
    Graphviz's, 96).
    """
    if fmt == "dot":
        return to_dot(machine, live).encode()
    if fmt == "mermaid":
        return to_mermaid(machine, live).encode()
    if fmt not in FORMATS:
        raise DiagramError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    source = to_dot(machine, live)
    data = render_dot(with_dpi(source, dpi) if dpi and fmt == "png" else source, fmt)
    if fmt == "svg":
        data = mark_svg(data, source)
    return data


def render_dot(source: str, fmt: str) -> bytes:
    """Run Graphviz ``dot`` on ``source``; :class:`DiagramError` if it is missing or fails."""
    try:
        import graphviz
    except ModuleNotFoundError:
        raise DiagramError(
            f"cannot render {fmt}: the graphviz Python package is not installed (pip install "
            "'kube-lifecycle[diagrams]'); -f dot and -f mermaid work without it") from None

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


def with_dpi(source: str, dpi: int) -> str:
    """The DOT ``source`` drawn at ``dpi`` dots per inch (a graph attribute after its ``{``)."""
    at = source.find("{")
    if at < 0 or not 24 <= dpi <= 600:
        raise DiagramError(f"cannot set dpi {dpi} on this DOT source")
    return f"{source[:at + 1]}\n  graph [dpi={int(dpi)}];{source[at + 1:]}"


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
