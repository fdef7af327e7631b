"""Diagrams people can read: scaled to the docs column with a full-size view, and Mermaid
drawn without the network.

An SVG or PNG diagram embedded by the Sphinx directive or the MkDocs extension never
exceeds the content column (``max-width: 100%``, height scaled along) and keeps its drawn
size as a "full size" view behind a toggle; a PNG is drawn at twice a screen's resolution.
Mermaid's script ships with lifecycle: a Sphinx or MkDocs site gets one copy beside its
pages, which every page with a Mermaid diagram loads by a relative URL; ``lifecycle diagram
-f html`` and plain Markdown inline it (the published file, checked by its SHA-256); and
nothing the package generates or documents loads a script from a CDN.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import html
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from test_doc_extensions import mkdocs_page, mkdocs_project, sphinx_build, sphinx_project

from lifecycle.cli import main
from lifecycle.diagrams import offline
from lifecycle.diagrams.embed import PNG_DPI, DiagramRequest, diagram_html, png_size
from lifecycle.diagrams.mermaid import to_mermaid
from lifecycle.diagrams.model import DiagramError
from lifecycle.diagrams.render import render
from lifecycle.machines.managed import ManagedResourceMachine

ROOT = Path(__file__).resolve().parents[1]
TARGET = "lifecycle.machines.managed:ManagedResourceMachine"
#: Hosts that serve JavaScript libraries; no generated page or doc may load from them.
CDN = re.compile(r"jsdelivr|unpkg\.com|cdnjs|esm\.sh|skypack|https?://cdn\.", re.IGNORECASE)


def fitted(page: str) -> list[str]:
    """What is wrong with how each embedded SVG/PNG diagram of ``page`` fits the column:
    an empty list when each is limited to the column, keeps its drawn size as the largest,
    and has a full-size toggle whose label names its checkbox."""
    problems = []
    blocks = re.findall(r'<div class="lifecycle-diagram" data-machine="[^"]*">(.*?)'
                        r'</label>\s*</div>', page, re.S)
    if not blocks:
        return ["no zoomable diagram in the page"]
    for block in blocks:
        picture = re.search(r"<(svg|img)\b([^>]*)>", block)
        if picture is None:
            problems.append("no <svg> or <img>")
            continue
        attributes = picture.group(2)
        if "max-width: 100%" not in attributes or "height: auto" not in attributes:
            problems.append(f"{picture.group(1)} is not limited to the column")
        if not re.search(r'\bwidth="[\d.]+(pt|px)?"', attributes):
            problems.append(f"{picture.group(1)} lost its drawn width")
        box = re.search(r'<input type="checkbox" class="lifecycle-diagram-zoom" id="([^"]+)"',
                        block)
        if box is None or f'<label class="lifecycle-diagram-full" for="{box.group(1)}"' \
                not in block:
            problems.append("no full-size toggle")
        if ".lifecycle-diagram-zoom:checked ~ .lifecycle-diagram-view svg" not in block or \
                "max-width: none !important" not in block:
            problems.append("the toggle does not lift the width limit")
    return problems


# ------------------------------------------------------------------ fit and full size
@pytest.fixture
def has_dot() -> None:
    """Graphviz's ``dot`` is installed (CI installs the graphviz package)."""
    assert shutil.which("dot"), "Graphviz 'dot' is needed: apt-get install graphviz"


def test_the_check_finds_a_diagram_wider_than_the_column() -> None:
    svg = render(ManagedResourceMachine, "svg").decode()
    before = ('<div class="lifecycle-diagram" data-machine="M" style="overflow-x: auto">'
              f'{svg[svg.find("<svg"):]}</div>')
    assert fitted(before) == ["no zoomable diagram in the page"]
    good = diagram_html(DiagramRequest(target=TARGET)).html
    assert fitted(good) == []
    assert fitted(good.replace("max-width: 100%; height: auto\" width",
                               "\" width")) == ["svg is not limited to the column"]
    assert fitted(re.sub(r'for="[^"]+"', 'for="elsewhere"', good)) == ["no full-size toggle"]


def test_an_svg_keeps_its_drawn_size_as_its_largest(has_dot: None) -> None:
    fragment = diagram_html(DiagramRequest(target=TARGET)).html
    assert fitted(fragment) == []
    drawn = re.search(r'<svg width="([\d.]+)pt"', render(ManagedResourceMachine,
                                                           "svg").decode())
    assert drawn and f'width="{drawn.group(1)}pt"' in fragment
    assert "viewBox=" in fragment  # scales with its aspect ratio


def test_a_png_is_sharp_and_fitted(has_dot: None) -> None:
    fragment = diagram_html(DiagramRequest(target=TARGET, fmt="png")).html
    assert fitted(fragment) == []
    data = base64.b64decode(re.search(r"base64,([^\"]+)", fragment).group(1))
    width, height = png_size(data)
    normal = png_size(render(ManagedResourceMachine, "png"))
    assert width >= 1.9 * normal[0] and height >= 1.9 * normal[1]  # drawn at PNG_DPI
    shown = round(width * 96 / PNG_DPI)
    assert f'width="{shown}"' in fragment and abs(shown - normal[0]) <= 2


def test_png_size_refuses_what_is_not_a_png() -> None:
    with pytest.raises(DiagramError):
        png_size(b"GIF89a" + bytes(30))


def test_sphinx_pages_fit_the_column(tmp_path: Path, has_dot: None) -> None:
    src = sphinx_project(tmp_path, f"""
        .. lifecycle-diagram:: {TARGET}

        .. lifecycle-diagram:: {TARGET}
           :format: png
        """)
    code, page, warnings = sphinx_build(src, "-W")
    assert (code, warnings) == (0, "")
    assert len(re.findall(r'class="lifecycle-diagram"', page)) == 2
    assert fitted(page) == []


def test_mkdocs_pages_fit_the_column(tmp_path: Path, has_dot: None) -> None:
    page = mkdocs_page(mkdocs_project(tmp_path, f"""
        ```lifecycle-diagram
        {TARGET}
        ```

        ```lifecycle-diagram
        {TARGET}
        format: png
        ```
        """))
    assert len(re.findall(r'class="lifecycle-diagram"', page)) == 2
    assert fitted(page) == []


# ------------------------------------------------------------------ Mermaid offline
def bundled_script(page: str) -> bytes:
    """The Mermaid script a page inlines, decoded: the page loads Mermaid once, from its
    own text, and imports it from nowhere."""
    sources = re.findall(r'<script data-mermaid="[^"]*" src="([^"]+)"', page)
    assert len(sources) == 1 and sources[0].startswith("data:text/javascript;base64,"), \
        [s[:60] for s in sources]
    assert "import mermaid from" not in page
    return base64.b64decode(sources[0].split(",", 1)[1])


def test_diagram_html_is_a_page_that_draws_offline(tmp_path: Path) -> None:
    out = tmp_path / "machine.html"
    assert main(["diagram", TARGET, "-o", str(out)]) == 0
    page = out.read_text()
    block = re.search(r'<pre class="mermaid">\n(.*?)</pre>', page, re.S)
    assert block and html.unescape(block.group(1)) == to_mermaid(ManagedResourceMachine)
    script = bundled_script(page)
    assert hashlib.sha256(script).hexdigest() == offline.MERMAID_SHA256
    assert "mermaid.initialize({startOnLoad: true})" in page
    assert not re.search(r'(src|href)="https?:', page) and not CDN.search(page)
    assert main(["diagram", TARGET, "-f", "mermaid", "-o", str(tmp_path / "m.mmd")]) == 0
    assert (tmp_path / "m.mmd").read_text() == to_mermaid(ManagedResourceMachine)


def test_the_bundled_script_defines_mermaid() -> None:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    code = ("const vm = require('vm'); let src = ''; process.stdin.on('data', d => src += d);"
            "process.stdin.on('end', () => { vm.runInThisContext(src);"
            "console.log(typeof mermaid.initialize, typeof mermaid.run); });")
    done = subprocess.run([node, "-e", code], input=offline.mermaid_js(), text=True,
                          capture_output=True, timeout=120, check=False)
    assert done.stdout.split() == ["function", "function"], done.stderr[-2000:]


def site_copy(page: str, site: Path, page_dir: Path | None = None) -> bytes:
    """The Mermaid script a built page loads: one ``<script src>`` to the site's copy,
    relative to the page, and that copy's bytes (its licence beside it)."""
    sources = re.findall(r'<script data-mermaid="[^"]*" src="([^"]+)"', page)
    assert len(sources) == 1 and not sources[0].startswith(("data:", "http", "/")), sources
    copy = ((page_dir or site) / sources[0].split("?")[0]).resolve()
    assert copy.is_relative_to(site.resolve()) and copy.name == "mermaid.min.js"
    assert copy.with_name("mermaid.LICENSE").read_text().startswith("The MIT License")
    assert "base64," not in page
    return copy.read_bytes()


def test_mkdocs_pages_load_one_site_copy_without_dot(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "bin-without-dot"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    config = mkdocs_project(tmp_path, f"```lifecycle-diagram\n{TARGET}\n```\n")
    (tmp_path / "docs" / "guide").mkdir()
    (tmp_path / "docs" / "guide" / "more.md").write_text(
        f"# More\n\n```lifecycle-diagram\n{TARGET}\nformat: mermaid\n```\n")
    page = mkdocs_page(config)
    site = tmp_path / "site"
    assert '<pre class="mermaid">' in page and page.count("mermaid.initialize({") == 1
    assert hashlib.sha256(site_copy(page, site)).hexdigest() == offline.MERMAID_SHA256
    deeper = (site / "guide" / "more" / "index.html").read_text()  # one copy, ../../
    assert hashlib.sha256(site_copy(deeper, site, site / "guide" / "more")).hexdigest() == \
        offline.MERMAID_SHA256
    assert len(page) < 200_000 and len(list(site.rglob("mermaid.min.js"))) == 1


def test_sphinx_pages_load_one_site_copy(tmp_path: Path) -> None:
    src = sphinx_project(tmp_path, f"""
        .. toctree::

           guide/more

        .. lifecycle-diagram:: {TARGET}
           :format: mermaid
        """)
    (src / "guide").mkdir()
    (src / "guide" / "more.rst").write_text(
        f"More\n====\n\n.. lifecycle-diagram:: {TARGET}\n   :format: mermaid\n")
    code, page, warnings = sphinx_build(src, "-W")
    assert (code, warnings) == (0, "")
    html_dir = tmp_path / "html"
    assert page.count("mermaid.initialize({") == 1
    assert hashlib.sha256(site_copy(page, html_dir)).hexdigest() == offline.MERMAID_SHA256
    deeper = (html_dir / "guide" / "more.html").read_text()
    assert hashlib.sha256(site_copy(deeper, html_dir, html_dir / "guide")).hexdigest() == \
        offline.MERMAID_SHA256
    assert len(page) < 200_000 and len(list(html_dir.rglob("mermaid.min.js"))) == 1
    plain = tmp_path / "plain"  # a page without a Mermaid diagram loads nothing
    plain.mkdir()
    _, page, _ = sphinx_build(sphinx_project(plain, f".. lifecycle-diagram:: {TARGET}\n"))
    assert "data-mermaid" not in page and not list((plain / "html").rglob("mermaid.min.js"))


def test_inline_and_plain_markdown_carry_the_bundle_in_the_page(tmp_path: Path) -> None:
    config = mkdocs_project(tmp_path, f"```lifecycle-diagram\n{TARGET}\nformat: mermaid\n```\n",
                            extension={"lifecycle.diagrams.mkdocs": {"mermaid_url": "inline"}})
    page = mkdocs_page(config)
    assert hashlib.sha256(bundled_script(page)).hexdigest() == offline.MERMAID_SHA256
    assert not list((tmp_path / "site").rglob("mermaid.min.js"))
    import markdown  # outside MkDocs there is no site folder: the page carries it

    text = markdown.markdown(f"```lifecycle-diagram\n{TARGET}\nformat: mermaid\n```\n",
                             extensions=["lifecycle.diagrams.mkdocs"])
    assert hashlib.sha256(bundled_script(text)).hexdigest() == offline.MERMAID_SHA256


def test_a_site_copy_is_rewritten_when_altered_and_kept_otherwise(tmp_path: Path) -> None:
    copy = offline.write_site_copy(tmp_path)
    assert copy == tmp_path / offline.SITE_SCRIPT
    stamp = copy.stat().st_mtime_ns
    assert offline.write_site_copy(tmp_path) == copy and copy.stat().st_mtime_ns == stamp
    copy.write_bytes(b"x" * copy.stat().st_size)  # same size, other bytes
    offline.write_site_copy(tmp_path)
    assert hashlib.sha256(copy.read_bytes()).hexdigest() == offline.MERMAID_SHA256
    assert sorted(p.name for p in copy.parent.iterdir()) == ["mermaid.LICENSE",
                                                            "mermaid.min.js"]


def test_a_site_may_name_its_own_copy(tmp_path: Path) -> None:
    own = "/assets/mermaid.esm.min.mjs"
    config = mkdocs_project(tmp_path, f"```lifecycle-diagram\n{TARGET}\nformat: mermaid\n```\n",
                            extension={"lifecycle.diagrams.mkdocs": {"mermaid_url": own}})
    page = mkdocs_page(config)
    assert f'import mermaid from "{own}"' in page and "base64," not in page


def test_nothing_shipped_or_documented_loads_from_a_cdn() -> None:
    files = [*sorted((ROOT / "lifecycle").rglob("*.py")), *sorted((ROOT / "docs").rglob("*.md")),
             ROOT / "README.md"]
    found = [f"{path.relative_to(ROOT)}: {match.group(0)}" for path in files
             for match in CDN.finditer(path.read_text(encoding="utf-8"))]
    assert found == []


def test_an_altered_bundle_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    static = tmp_path / "static"
    static.mkdir()
    (static / "mermaid.min.js.gz").write_bytes(gzip.compress(b"alert('not mermaid')"))
    monkeypatch.setattr(offline.resources, "files", lambda _package: tmp_path)
    offline.mermaid_js.cache_clear()
    try:
        with pytest.raises(DiagramError, match="SHA-256 differs"):
            offline.mermaid_js()
        (static / "mermaid.min.js.gz").write_bytes(b"not gzip")
        with pytest.raises(DiagramError, match="cannot be read"):
            offline.mermaid_js()
    finally:
        offline.mermaid_js.cache_clear()
