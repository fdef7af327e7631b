"""Machine diagrams as HTML fragments, for documentation tools.

The Sphinx directive (:mod:`lifecycle.diagrams.sphinx`) and the Markdown
extension for MkDocs (:mod:`lifecycle.diagrams.mkdocs`) both describe a
diagram as a :class:`DiagramRequest` (the options of ``lifecycle diagram``)
and turn it into HTML with :func:`diagram_html`. Nothing here imports a
documentation tool.

The target is named ``MODULE:NAME`` and loaded with
:func:`lifecycle.registry.load`; it may be a machine class, a
:class:`~lifecycle.core.kind.Kind` (its machine is drawn) or a
:class:`~lifecycle.registry.Registration`. A registered kind may also be
named alone (``DatabaseInstance``). SVG is inlined into the page, scaled
to the column with a toggle to its full size (:func:`zoomable`); when
Graphviz's ``dot`` is not on ``PATH``, an SVG or PNG diagram is drawn as
Mermaid instead, in a ``<pre class="mermaid">`` block that Mermaid's
script (bundled with lifecycle, inlined once per page) turns into a
picture in the browser.
"""

from __future__ import annotations

import base64
import hashlib
import html
import inspect
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path

import attrs

from lifecycle.core.machine import LifecycleMachine
from lifecycle.diagrams.discover import has_table
from lifecycle.diagrams.live import load_object, machine_for
from lifecycle.diagrams.mermaid import to_mermaid
from lifecycle.diagrams.model import DiagramError, LiveObject
from lifecycle.diagrams.offline import BUNDLED, INLINE, inline_script, site_script
from lifecycle.diagrams.render import FORMATS, render
from lifecycle.registry import RegistryError, find, load

__all__ = [
    "CSS_CLASS",
    "FIT_STYLE",
    "MERMAID_URL",
    "OPTIONS",
    "PNG_DPI",
    "ZOOM_STYLE",
    "DiagramRequest",
    "Embedded",
    "diagram_html",
    "dot_available",
    "highlighted",
    "mermaid_script",
    "parse_block",
    "png_size",
    "resolve",
    "zoomable",
]

#: Options of a diagram, as written in a page: ``format``, ``highlight``,
#: ``object`` (a YAML/JSON dump) and ``object-name`` (``--name`` of the command).
OPTIONS = ("format", "highlight", "object", "object-name")

#: What a page that holds a Mermaid diagram loads Mermaid from, by default: the copy
#: bundled with lifecycle (:mod:`lifecycle.diagrams.offline`), served once beside the built
#: site's pages (inlined where no site copy can be written), so the page draws offline and
#: never fetches a script from a CDN.
MERMAID_URL = BUNDLED

#: CSS class of the element that wraps every embedded diagram.
CSS_CLASS = "lifecycle-diagram"


@attrs.frozen
class DiagramRequest:
    """One diagram to embed: what to draw and how, as ``lifecycle diagram`` takes it.

    ``target`` is ``MODULE:NAME`` (optional with ``object``, whose machine is
    then found from its registered kind); ``fmt`` is one of
    :data:`~lifecycle.diagrams.render.FORMATS`; ``highlight`` draws a state
    as the current one; ``object`` is a path to a dump of one object (or a
    List, from which ``object_name`` picks one) drawn on the machine with its
    current state and history, as ``lifecycle diagram --object``.
    """

    target: str = ""
    fmt: str = "svg"
    highlight: str = ""
    object: str = ""
    object_name: str = ""

    @classmethod
    def from_options(cls, target: str, options: Mapping[str, str]) -> DiagramRequest:
        """Build a request from page options; :class:`DiagramError` names a bad one."""
        unknown = sorted(set(options) - set(OPTIONS))
        if unknown:
            raise DiagramError(f"unknown option {unknown[0]!r}; the options are "
                               f"{', '.join(OPTIONS)}")
        fmt = (options.get("format") or "svg").strip().lower()
        if fmt not in FORMATS:
            raise DiagramError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
        request = cls(target=target.strip(), fmt=fmt,
                      highlight=(options.get("highlight") or "").strip(),
                      object=(options.get("object") or "").strip(),
                      object_name=(options.get("object-name") or "").strip())
        if not request.target and not request.object:
            raise DiagramError("name a machine or kind (MODULE:NAME or a registered kind's "
                               "name), or an object dump")
        if request.highlight and request.object:
            raise DiagramError("give highlight or object, not both "
                               "(an object's own state is highlighted)")
        if request.object_name and not request.object:
            raise DiagramError("object-name picks an object from an object dump; "
                               "give object too")
        return request


@attrs.frozen
class Embedded:
    """A rendered diagram: its HTML, whether it fell back to Mermaid, and its sources.

    ``mermaid`` is true when the HTML holds a ``<pre class="mermaid">`` block
    (asked for, or drawn instead of SVG/PNG without ``dot``); ``depends`` are
    the files the diagram was drawn from (the machine's module, an object
    dump), for tools that rebuild a page when they change.
    """

    html: str
    mermaid: bool
    fallback: bool
    machine: type[LifecycleMachine]
    depends: tuple[str, ...]


def resolve(target: str) -> type[LifecycleMachine]:
    """The machine named by ``MODULE:NAME``: a machine class, a kind's or a registration's.

    A name without ``:`` is a registered kind's name, plural or ``plural.group``
    (``DatabaseInstance``), as ``lifecycle diagram`` takes it.

    Raises :class:`DiagramError` with one line when it cannot be loaded or is
    none of these (callers name ``target`` in front of it).
    """
    try:
        value = load(target) if ":" in target else find(target)
    except RegistryError as exc:
        raise DiagramError(str(exc)) from None
    for candidate in (value, getattr(value, "machine", None),
                      getattr(getattr(value, "kind", None), "machine", None)):
        if has_table(candidate):
            assert isinstance(candidate, type)
            return candidate
    raise DiagramError(f"{type(value).__name__} is not a LifecycleMachine class with "
                       "states, a Kind or a Registration")


def highlighted(machine: type[LifecycleMachine], state: str) -> LiveObject:
    """A live object that only marks ``state`` of ``machine`` as current."""
    table = machine.table()
    if state not in table.states:
        raise DiagramError(f"{state[:64]!r} is not a state of {table.name}; its states are "
                           f"{', '.join(table.states)}")
    return LiveObject(title=f"state {state}", state=state, history=())


def dot_available() -> bool:
    """True when Graphviz's ``dot`` is on ``PATH``."""
    return shutil.which("dot") is not None


def diagram_html(request: DiagramRequest, base: Path | str = ".") -> Embedded:
    """Draw ``request`` as an HTML fragment; ``object`` paths are relative to ``base``.

    SVG is inlined, PNG embedded as a data URI, DOT shown as text and
    Mermaid as a ``<pre class="mermaid">`` block; SVG and PNG become Mermaid
    when ``dot`` is missing. Raises :class:`DiagramError` with one line.
    """
    machine = resolve(request.target) if request.target else None
    depends: list[str] = []
    live = None
    if request.object:
        path = Path(base) / request.object
        obj = load_object(path, request.object_name or None)
        depends.append(str(path))
        try:
            machine = machine or machine_for(obj)
        except RegistryError as exc:  # a broken registration of some package
            raise DiagramError(str(exc)) from None
        live = LiveObject.from_dict(obj, machine)
    assert machine is not None
    if request.highlight:
        live = highlighted(machine, request.highlight)
    source = _source_file(machine)
    if source:
        depends.insert(0, source)
    fmt = request.fmt
    fallback = fmt in ("svg", "png") and not dot_available()
    if fallback:
        fmt = "mermaid"
    label = html.escape(machine.table().name, quote=True)
    if fmt == "mermaid":
        body = f'<pre class="mermaid">\n{html.escape(to_mermaid(machine, live))}</pre>'
    elif fmt == "dot":
        text = html.escape(render(machine, fmt, live).decode())
        body = f'<pre class="{CSS_CLASS}-dot">{text}</pre>'
    elif fmt == "png":
        png = render(machine, fmt, live, dpi=PNG_DPI)
        width, height = png_size(png)
        scale = 96 / PNG_DPI  # shown at the size of a 96 dpi drawing, sharp when zoomed
        body = (f'<img src="data:image/png;base64,{base64.b64encode(png).decode()}" '
                f'alt="{label}" width="{round(width * scale)}" '
                f'height="{round(height * scale)}" style="{FIT_STYLE}"/>')
    else:
        body = _inline_svg(render(machine, fmt, live))
    if fmt in ("svg", "png"):
        wrapped = zoomable(body, label)
    else:
        wrapped = (f'<div class="{CSS_CLASS}" data-machine="{label}" '
                   f'style="overflow-x: auto">\n{body}\n</div>')
    return Embedded(html=wrapped, mermaid=fmt == "mermaid", fallback=fallback,
                    machine=machine, depends=tuple(depends))


#: Inline style of a drawn diagram: never wider than the column, its height scaled along.
FIT_STYLE = "max-width: 100%; height: auto"
#: Resolution of an embedded PNG: twice a screen's, shown at half its pixel size.
PNG_DPI = 192

#: How a diagram fits the column and shows at full size: a hidden checkbox (toggled by its
#: label, no script needed) lifts the width limit and lets the view scroll both ways.
ZOOM_STYLE = (
    f"<style>.{CSS_CLASS}-view svg, .{CSS_CLASS}-view img {{max-width: 100%; height: auto}}"
    f".{CSS_CLASS}-zoom:checked ~ .{CSS_CLASS}-view {{overflow: auto; max-height: 90vh}}"
    f".{CSS_CLASS}-zoom:checked ~ .{CSS_CLASS}-view svg,"
    f".{CSS_CLASS}-zoom:checked ~ .{CSS_CLASS}-view img {{max-width: none !important}}"
    f".{CSS_CLASS}-full {{cursor: zoom-in; font-size: 0.85em}}"
    f".{CSS_CLASS}-zoom:checked ~ .{CSS_CLASS}-full {{cursor: zoom-out}}"
    f".{CSS_CLASS}-zoom:checked ~ .{CSS_CLASS}-full .{CSS_CLASS}-to-full,"
    f".{CSS_CLASS}-zoom:not(:checked) ~ .{CSS_CLASS}-full .{CSS_CLASS}-to-fit "
    f"{{display: none}}</style>")


def zoomable(body: str, label: str) -> str:
    """``body`` (an ``<svg>`` or ``<img>``) scaled to the column, with a "full size" toggle.

    The picture keeps its drawn size when the column is wide enough and shrinks to the
    column's width otherwise (:data:`FIT_STYLE`); the label under it switches to the full
    size in a view that scrolls both ways, and back. The toggle is a checkbox and CSS
    (:data:`ZOOM_STYLE`), so it works without scripts and in any theme.
    """
    ident = f"{CSS_CLASS}-{hashlib.sha256(body.encode()).hexdigest()[:12]}"
    return (f'<div class="{CSS_CLASS}" data-machine="{label}">\n{ZOOM_STYLE}\n'
            f'<input type="checkbox" class="{CSS_CLASS}-zoom" id="{ident}" hidden/>\n'
            f'<div class="{CSS_CLASS}-view">\n{body}\n</div>\n'
            f'<label class="{CSS_CLASS}-full" for="{ident}" title="{label}: full size or '
            f'fitted to the column"><span class="{CSS_CLASS}-to-full">&#x2922; Full size'
            f'</span><span class="{CSS_CLASS}-to-fit">&#x2922; Fit to the column</span>'
            f'</label>\n</div>')


def png_size(png: bytes) -> tuple[int, int]:
    """The width and height in pixels of a PNG (from its header)."""
    if png[:8] != b"\x89PNG\r\n\x1a\n" or png[12:16] != b"IHDR":
        raise DiagramError("dot produced no PNG image")
    return int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")


def mermaid_script(url: str = MERMAID_URL, site_copy: str = "") -> str:
    """The ``<script>`` that renders a page's Mermaid blocks.

    For :data:`~lifecycle.diagrams.offline.BUNDLED`, the bundled Mermaid loaded from
    ``site_copy`` (the relative URL of the site's copy), or inlined when there is none;
    for :data:`~lifecycle.diagrams.offline.INLINE`, inlined; otherwise an ES module
    imported from ``url`` (a site's own Mermaid), or ``""`` for none (the theme loads
    Mermaid itself).
    """
    if not url:
        return ""
    if url == BUNDLED and site_copy:
        return site_script(site_copy)
    if url in (BUNDLED, INLINE):
        return inline_script()
    return (f'<script type="module">import mermaid from "{html.escape(url, quote=True)}";'
            "mermaid.initialize({startOnLoad: true});</script>")


def parse_block(lines: Iterable[str]) -> DiagramRequest:
    """Read a Markdown block: the target first (optional), then ``option: value`` lines.

    Blank lines and lines starting with ``#`` are skipped. Raises
    :class:`DiagramError` for a line that is neither.
    """
    target = ""
    options: dict[str, str] = {}
    for number, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition(":")
        is_option = sep and key.strip() and (not value or value[0].isspace()) \
            and all(c.isalnum() or c == "-" for c in key.strip())
        if is_option:
            if key.strip() in options:
                raise DiagramError(f"option {key.strip()!r} given twice")
            options[key.strip()] = value.strip()
        elif not target and not options and " " not in line:
            target = line
        else:
            raise DiagramError(f"line {number}: expected the machine or kind first, then "
                               f"'option: value' lines, got {line[:64]!r}")
    return DiagramRequest.from_options(target, options)


def _inline_svg(svg: bytes) -> str:
    """The ``<svg>`` element alone (no XML declaration or doctype inside an HTML page), its
    drawn width and height kept as its largest size and :data:`FIT_STYLE` added."""
    text = svg.decode()
    at = text.find("<svg")
    if at < 0:
        raise DiagramError("dot produced no <svg> element")
    text = text[at:].strip()
    return f'<svg style="{FIT_STYLE}"' + text[len("<svg"):]


def _source_file(machine: type[LifecycleMachine]) -> str:
    try:
        return inspect.getsourcefile(machine) or ""
    except (TypeError, OSError):
        return ""
