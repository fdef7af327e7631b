"""A Markdown extension (for MkDocs): fenced ``lifecycle-diagram`` blocks drawn at build time.

In ``mkdocs.yml``::

    markdown_extensions:
      - lifecycle.diagrams.mkdocs

(or ``lifecycle_diagram``, its entry-point name), then in a page::

    ```lifecycle-diagram
    lifecycle.machines.managed:ManagedResourceMachine
    highlight: ready
    ```

The first line is ``MODULE:NAME`` of a machine class, a
:class:`~lifecycle.core.kind.Kind` or a registration, or a registered kind's
name (``DatabaseInstance``); the others are the
options of ``lifecycle diagram``: ``format`` (``svg``, the default, ``png``,
``mermaid`` or ``dot``), ``highlight`` (a state drawn as the current one),
``object`` (a YAML/JSON dump drawn with its state and history; the first
line may then be left out) and ``object-name`` (picks one object of a List).
SVG is inlined, scaled to the content column with a "full size" toggle;
without Graphviz's ``dot`` the diagram is drawn as Mermaid.

Settings: ``base_dir``, the folder ``object`` paths are relative to (default:
the current directory, where ``mkdocs build`` runs), and ``mermaid_url``, the
Mermaid script a page with a Mermaid diagram loads: ``bundled`` (the default)
is the copy of Mermaid that ships with lifecycle, written once into the site
folder (:data:`~lifecycle.diagrams.offline.SITE_SCRIPT`) and loaded by each
such page with a relative URL, so the site draws offline (outside MkDocs,
where there is no site folder, it is inlined into the page); ``inline``
carries it in each page; a URL imports that ES module instead (a copy the
site serves); empty loads none, when the theme already loads Mermaid. A block
that cannot be drawn is a one-line warning naming its target (``mkdocs build
--strict`` then fails) and a short note in the page in place of the diagram.
"""

from __future__ import annotations

import html
import logging
import posixpath
import re
from pathlib import Path
from typing import Any

from markdown import Markdown
from markdown.extensions import Extension
from markdown.preprocessors import Preprocessor

from lifecycle.diagrams.embed import (
    CSS_CLASS,
    MERMAID_URL,
    diagram_html,
    mermaid_script,
    parse_block,
)
from lifecycle.diagrams.model import DiagramError
from lifecycle.diagrams.offline import BUNDLED, SITE_SCRIPT, write_site_copy

__all__ = ["FENCE_WORD", "DiagramPreprocessor", "LifecycleDiagramExtension", "makeExtension"]

# Under the "mkdocs" logger, so that ``mkdocs build --strict`` counts the warnings.
log = logging.getLogger("mkdocs.extensions.lifecycle_diagram")

#: The fence word of a diagram block.
FENCE_WORD = "lifecycle-diagram"

_FENCE = re.compile(r"^(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^`]*?)[ \t]*$")


def _closes(line: str, fence: str) -> bool:
    """True when ``line`` closes a block opened by ``fence`` (same character, as long)."""
    stripped = line.strip()
    return (len(stripped) >= len(fence) and set(stripped) == {fence[0]})


class DiagramPreprocessor(Preprocessor):
    """Replaces each ``lifecycle-diagram`` fenced block with the drawn diagram's HTML."""

    def __init__(self, md: Markdown, extension: LifecycleDiagramExtension) -> None:
        """Keep the extension, whose settings and per-page state it uses."""
        super().__init__(md)
        self.extension = extension

    def run(self, lines: list[str]) -> list[str]:
        """Draw every block of the page (runs before fenced code blocks are read).

        Other fenced blocks are copied untouched, so a ``lifecycle-diagram``
        block quoted inside a longer fence stays text.
        """
        if not any(FENCE_WORD in line for line in lines):
            return lines
        out: list[str] = []
        at = 0
        while at < len(lines):
            opening = _FENCE.match(lines[at])
            if opening is None:
                out.append(lines[at])
                at += 1
                continue
            fence = opening.group("fence")
            end = next((i for i in range(at + 1, len(lines)) if _closes(lines[i], fence)),
                       len(lines))
            if opening.group("info") == FENCE_WORD and end < len(lines):
                out.extend(self._replace(lines[at + 1:end]).split("\n"))
            else:
                out.extend(lines[at:end + 1])
            at = end + 1
        return out

    def _replace(self, body: list[str]) -> str:
        first = next((line.strip() for line in body if line.strip()), "")
        try:
            request = parse_block(body)
            embedded = diagram_html(request, self.extension.getConfig("base_dir") or ".")
        except DiagramError as exc:
            log.warning("lifecycle-diagram %s: %s", first, exc)
            fragment = (f'<p class="{CSS_CLASS}-error">lifecycle-diagram {html.escape(first)}: '
                        f"{html.escape(str(exc))}</p>")
            return "\n\n" + self.md.htmlStash.store(fragment) + "\n\n"
        if embedded.fallback:
            log.info("lifecycle-diagram %s: Graphviz 'dot' is not on PATH; drawn as Mermaid",
                     first)
        fragment = embedded.html
        if embedded.mermaid and not self.extension.mermaid_loaded:
            self.extension.mermaid_loaded = True
            url = self.extension.getConfig("mermaid_url")
            fragment += "\n" + mermaid_script(url, self._site_copy() if url == BUNDLED else "")
        return "\n\n" + self.md.htmlStash.store(fragment) + "\n\n"

    def _site_copy(self) -> str:
        """Under MkDocs, the bundled Mermaid's URL relative to this page, after writing
        it into the site folder; ``""`` outside MkDocs (the page then inlines it).

        The page and the site folder are read from the link-rewriting step MkDocs adds to
        each page's Markdown (its ``file`` and ``config``).
        """
        if "relpath" not in self.md.treeprocessors:
            return ""
        relpath = self.md.treeprocessors["relpath"]
        page, config = getattr(relpath, "file", None), getattr(relpath, "config", None)
        dest = getattr(page, "dest_uri", None)
        try:
            site = config["site_dir"] if config is not None else None
        except (KeyError, TypeError):
            site = None
        if not isinstance(dest, str) or not isinstance(site, str):
            return ""
        write_site_copy(Path(site))
        return posixpath.relpath(SITE_SCRIPT, posixpath.dirname(dest) or ".")


class LifecycleDiagramExtension(Extension):
    """The Markdown extension: registers :class:`DiagramPreprocessor`."""

    def __init__(self, **kwargs: Any) -> None:
        """Settings: ``base_dir`` and ``mermaid_url`` (see the module's documentation)."""
        self.config = {
            "base_dir": [".", "folder that 'object' paths are relative to"],
            "mermaid_url": [MERMAID_URL, "Mermaid script for Mermaid diagrams: 'bundled' "
                            "(one copy in the site folder), 'inline', a URL, or '' for "
                            "none"],
        }
        self.mermaid_loaded = False
        super().__init__(**kwargs)

    def extendMarkdown(self, md: Markdown) -> None:
        """Register the preprocessor ahead of fenced code blocks (priority 25)."""
        md.registerExtension(self)
        md.preprocessors.register(DiagramPreprocessor(md, self), "lifecycle_diagram", 30)

    def reset(self) -> None:
        """Called between pages: the next page loads the Mermaid script again if it needs it."""
        self.mermaid_loaded = False


def makeExtension(**kwargs: Any) -> LifecycleDiagramExtension:
    """The extension, as Markdown loads it by module name."""
    return LifecycleDiagramExtension(**kwargs)
