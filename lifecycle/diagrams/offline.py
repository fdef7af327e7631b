"""Mermaid diagrams that draw without the network: Mermaid's script ships with lifecycle.

The package carries Mermaid's browser bundle (``static/mermaid.min.js.gz``,
the unmodified ``dist/mermaid.min.js`` of the npm package ``mermaid``
:data:`MERMAID_VERSION`, compressed; its MIT licence beside it as
``static/mermaid.LICENSE``). A page that holds a Mermaid diagram inlines it
(:func:`inline_script`), so the diagram is drawn where there is no network
and no page ever loads a script from a CDN; ``lifecycle diagram -f html``
writes such a page (:func:`standalone_html`). A documentation site that
serves its own copy of Mermaid names it instead (the extensions'
``mermaid_url`` setting), and the bundle is left out.
"""

from __future__ import annotations

import base64
import functools
import gzip
import hashlib
import html
from importlib import resources

from lifecycle.core.machine import LifecycleMachine
from lifecycle.diagrams.mermaid import to_mermaid
from lifecycle.diagrams.model import DiagramError, LiveObject

__all__ = [
    "BUNDLED",
    "MERMAID_SHA256",
    "MERMAID_VERSION",
    "inline_script",
    "mermaid_js",
    "standalone_html",
]

#: The npm ``mermaid`` release whose ``dist/mermaid.min.js`` is bundled.
MERMAID_VERSION = "11.12.0"
#: SHA-256 of that file as published (checked when it is read).
MERMAID_SHA256 = "07e37dfa97b337ccc85365d57eddf99b9706f09db3b59b260d0333b23b343c4b"
#: The ``mermaid_url`` value that inlines the bundled script (the default).
BUNDLED = "bundled"

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
