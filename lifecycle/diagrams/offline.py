"""Mermaid diagrams that draw without the network: Mermaid's script ships with lifecycle.

The package carries Mermaid's browser bundle (``static/mermaid.min.js.gz``,
the unmodified ``dist/mermaid.min.js`` of the npm package ``mermaid``
:data:`MERMAID_VERSION`, compressed; its MIT licence beside it as
``static/mermaid.LICENSE``), so a diagram is drawn where there is no network
and no page ever loads a script from a CDN. A documentation site built by
Sphinx or MkDocs gets one copy beside its pages (:func:`write_site_copy`, at
:data:`SITE_SCRIPT`), which each page with a Mermaid diagram loads with a
relative URL (:func:`site_script`); a page that must stand alone inlines it
(:func:`inline_script`), as ``lifecycle diagram -f html`` does
(:func:`standalone_html`). A site that serves its own copy of Mermaid names
it instead (the extensions' ``mermaid_url`` setting), and the bundle is left
out.
"""

from __future__ import annotations

import base64
import functools
import gzip
import hashlib
import html
import os
from importlib import resources
from pathlib import Path

from lifecycle.core.machine import LifecycleMachine
from lifecycle.diagrams.mermaid import to_mermaid
from lifecycle.diagrams.model import DiagramError, LiveObject

__all__ = [
    "BUNDLED",
    "INLINE",
    "MERMAID_SHA256",
    "MERMAID_VERSION",
    "SITE_SCRIPT",
    "inline_script",
    "mermaid_js",
    "site_script",
    "standalone_html",
    "write_site_copy",
]

#: The npm ``mermaid`` release whose ``dist/mermaid.min.js`` is bundled.
MERMAID_VERSION = "11.12.0"
#: SHA-256 of that file as published (checked when it is read).
MERMAID_SHA256 = "07e37dfa97b337ccc85365d57eddf99b9706f09db3b59b260d0333b23b343c4b"
#: The ``mermaid_url`` value of the bundled script (the default): one copy served beside
#: the built site's pages where the tool writes one, inlined into the page otherwise.
BUNDLED = "bundled"
#: The ``mermaid_url`` value that always inlines the bundled script into the page.
INLINE = "inline"
#: Where a site's copy of the bundled script is written, below the site's static folder
#: (Sphinx's ``_static``, MkDocs' site folder); its licence is written beside it.
SITE_SCRIPT = "lifecycle-diagrams/mermaid.min.js"

@functools.cache
def mermaid_js() -> str:
    """The bundled Mermaid script, checked against :data:`MERMAID_SHA256`.

    :class:`DiagramError` when the package's copy is missing or altered.
    """
    try:
        packed = resources.files("lifecycle.diagrams").joinpath(
            "static/mermaid.min.js.gz").read_bytes()
        data = gzip.decompress(packed)
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        raise DiagramError(f"the bundled Mermaid script cannot be read: {exc}") from None
    if hashlib.sha256(data).hexdigest() != MERMAID_SHA256:
        raise DiagramError("the bundled Mermaid script is not the published "
                           f"mermaid {MERMAID_VERSION} file (its SHA-256 differs)")
    return data.decode("utf-8")


def inline_script() -> str:
    """``<script>`` elements that define Mermaid from the bundle and draw the page's
    ``<pre class="mermaid">`` blocks when it loads.

    The bundle is a base64 ``data:`` URI, so nothing in it can end the element or be
    read as the page's markup.
    """
    data = base64.b64encode(mermaid_js().encode("utf-8")).decode("ascii")
    return (f'<script data-mermaid="{MERMAID_VERSION} (MIT licence)" '
            f'src="data:text/javascript;base64,{data}"></script>\n'
            "<script>mermaid.initialize({startOnLoad: true});</script>")


def site_script(src: str) -> str:
    """``<script>`` elements that load Mermaid from ``src`` (the URL of a site's copy,
    relative to the page) and draw the page's ``<pre class="mermaid">`` blocks.

    A classic script, not an ES module, so a site opened from disk (``file:``) draws too.
    """
    return (f'<script data-mermaid="{MERMAID_VERSION} (MIT licence)" '
            f'src="{html.escape(src, quote=True)}"></script>\n'
            "<script>mermaid.initialize({startOnLoad: true});</script>")


def write_site_copy(root: Path | str) -> Path:
    """Write the bundled Mermaid script to ``root``/:data:`SITE_SCRIPT` and its licence
    beside it; returns the script's path.

    A copy already there with the published content is kept. Each file is written to a
    temporary name and renamed, so builders writing pages in parallel processes never
    see half a file.
    """
    target = Path(root) / SITE_SCRIPT
    data = mermaid_js().encode("utf-8")
    licence = resources.files("lifecycle.diagrams").joinpath(
        "static/mermaid.LICENSE").read_bytes()
    for path, content in ((target, data), (target.with_name("mermaid.LICENSE"), licence)):
        try:
            if path.stat().st_size == len(content) and path.read_bytes() == content:
                continue
        except OSError:
            pass
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f".{path.name}.{os.getpid()}")
        partial.write_bytes(content)
        os.replace(partial, path)
    return target


def standalone_html(machine: type[LifecycleMachine], live: LiveObject | None = None) -> bytes:
    """A self-contained HTML page drawing the machine's Mermaid diagram with the bundled
    script: it opens in any browser, offline."""
    title = html.escape(machine.table().name if live is None
                        else f"{live.title} on {machine.table().name}")
    page = (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n"
        f"<title>{title}</title>\n"
        "<style>body {font-family: sans-serif; margin: 1em}"
        " pre.mermaid svg {max-width: 100%; height: auto}</style>\n</head>\n<body>\n"
        f'<pre class="mermaid">\n{html.escape(to_mermaid(machine, live))}</pre>\n'
        f"{inline_script()}\n</body>\n</html>\n")
    return page.encode("utf-8")
