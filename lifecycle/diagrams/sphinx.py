"""A Sphinx extension: the ``lifecycle-diagram`` directive draws a machine at build time.

Add ``"lifecycle.diagrams.sphinx"`` to ``extensions`` in ``conf.py``, then::

    .. lifecycle-diagram:: lifecycle.machines.managed:ManagedResourceMachine
       :highlight: ready

The argument is ``MODULE:NAME`` of a machine class, a
:class:`~lifecycle.core.kind.Kind` or a registration, or a registered kind's
name (``DatabaseInstance``). The options are those
of ``lifecycle diagram``: ``:format:`` (``svg``, the default, ``png``,
``mermaid`` or ``dot``), ``:highlight:`` (a state drawn as the current one),
``:object:`` (a YAML/JSON dump, relative to the page, drawn with its state and
history; the argument may then be left out) and ``:object-name:`` (picks one
object of a List). SVG is inlined into HTML output; without Graphviz's
``dot`` the diagram is drawn as Mermaid instead. A diagram that cannot be
drawn is a one-line build warning naming the target (an error under ``-W``).

An SVG or PNG diagram is scaled to the content column, with a "full size"
toggle. The ``lifecycle_diagram_mermaid_url`` setting is the Mermaid script a
page with a Mermaid diagram loads: ``"bundled"`` (the default) is the copy of
Mermaid that ships with lifecycle, written once into the HTML output's
``_static`` folder and loaded by each such page, so the site draws offline;
``"inline"`` carries it in each page; a URL imports that ES module instead;
empty loads none, when the theme already does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from docutils import nodes
from docutils.parsers.rst import directives
from sphinx.application import Sphinx
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

from lifecycle.diagrams.embed import (
    MERMAID_URL,
    OPTIONS,
    DiagramRequest,
    diagram_html,
    mermaid_script,
)
from lifecycle.diagrams.model import DiagramError
from lifecycle.diagrams.offline import BUNDLED, MERMAID_VERSION, SITE_SCRIPT, write_site_copy

__all__ = ["LifecycleDiagram", "setup"]

logger = logging.getLogger(__name__)


class _AnyOption(dict):
    """The directive's options: any name is read as text, so that a misspelt option is
    reported as one line by :meth:`DiagramRequest.from_options` listing the valid ones."""

    def __missing__(self, key: str) -> Any:
        return directives.unchanged


class LifecycleDiagram(SphinxDirective):
    """``.. lifecycle-diagram:: MODULE:NAME``: a machine's diagram, drawn at build time."""

    optional_arguments = 1
    final_argument_whitespace = False
    has_content = False
    option_spec: ClassVar[dict[str, Any]] = _AnyOption.fromkeys(OPTIONS, directives.unchanged)

    def run(self) -> list[nodes.Node]:
        """Draw the diagram; on a mistake, warn with the target's name and draw nothing."""
        target = self.arguments[0] if self.arguments else ""
        try:
            request = DiagramRequest.from_options(target, self.options)
            base = Path(self.env.doc2path(self.env.docname)).parent
            embedded = diagram_html(request, base)
        except DiagramError as exc:
            name = target or self.options.get("object", "")
            logger.warning("lifecycle-diagram %s: %s", name, exc, location=self.get_location(),
                           type="lifecycle", subtype="diagram")
            return []
        for path in embedded.depends:
            self.env.note_dependency(path)
        if embedded.fallback:
            logger.info("lifecycle-diagram %s: Graphviz 'dot' is not on PATH; drawn as Mermaid",
                        target or request.object, location=self.get_location())
        fragment = embedded.html
        document = self.state.document
        url = self.config.lifecycle_diagram_mermaid_url
        if embedded.mermaid and url == BUNDLED:  # the site's copy, added by _page_scripts
            return [nodes.raw("", fragment, format="html", lifecycle_mermaid=True)]
        if embedded.mermaid and not getattr(document, "lifecycle_mermaid", False):
            document.lifecycle_mermaid = True
            fragment += "\n" + mermaid_script(url)
        return [nodes.raw("", fragment, format="html")]


def _page_scripts(app: Sphinx, pagename: str, templatename: str, context: dict[str, Any],
                  doctree: nodes.document | None) -> None:
    """A page with a Mermaid diagram loads the bundled Mermaid from the output's
    ``_static`` folder, where the first such page writes it."""
    if doctree is None or not any(node.get("lifecycle_mermaid")
                                  for node in doctree.findall(nodes.raw)):
        return
    write_site_copy(Path(app.outdir) / "_static")
    app.add_js_file(SITE_SCRIPT, priority=800,
                    **{"data-mermaid": f"{MERMAID_VERSION} (MIT licence)"})
    app.add_js_file(None, priority=800, body="mermaid.initialize({startOnLoad: true});")


def setup(app: Sphinx) -> dict[str, Any]:
    """Register the directive and its setting (called by Sphinx)."""
    from importlib.metadata import PackageNotFoundError, version

    app.add_config_value("lifecycle_diagram_mermaid_url", MERMAID_URL, "html",
                         types=frozenset({str}))
    app.add_directive("lifecycle-diagram", LifecycleDiagram)
    app.connect("html-page-context", _page_scripts)
    try:
        release = version("kube-lifecycle")
    except PackageNotFoundError:
        release = "0+unknown"
    return {"version": release, "parallel_read_safe": True, "parallel_write_safe": True}
