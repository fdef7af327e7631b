"""Diagrams where docs live: the Sphinx directive, the MkDocs extension, the API reference.

Small Sphinx and MkDocs projects are built in a temporary directory, in this
process, and their HTML is read back. The expected states come from the
machine's compiled table, never from a list written here.
"""

from __future__ import annotations

import html
import logging
import re
import shutil
import textwrap
from pathlib import Path

import markdown
import pytest
import yaml
from mkdocs.commands.build import build as mkdocs_build
from mkdocs.config import load_config
from mkdocs.exceptions import Abort
from sphinx.cmd.build import build_main

import lifecycle
from lifecycle.diagrams import DiagramError, to_mermaid
from lifecycle.diagrams.embed import DiagramRequest, diagram_html, parse_block, resolve
from lifecycle.diagrams.model import HIGHLIGHT
from lifecycle.machines.database import DatabaseInstanceMachine
from lifecycle.machines.managed import ManagedResourceMachine

ROOT = Path(__file__).resolve().parents[1]
TARGET = "lifecycle.machines.managed:ManagedResourceMachine"
MACHINE = ManagedResourceMachine
SVG = re.compile(r"<svg\b.*?</svg>", re.S)
MERMAID = re.compile(r'<pre class="mermaid">(.*?)</pre>', re.S)


def node_groups(svg: str) -> dict[str, str]:
    """Each Graphviz node of an inline SVG, by its id (the ``<title>``), to its markup."""
    return dict(re.findall(r'<g id="node\d+" class="node">\s*<title>([^<]*)</title>(.*?)</g>',
                           svg, re.S))


def assert_every_state_drawn(svg: str, machine=MACHINE) -> None:
    """Every state of the machine is a node of the SVG, labelled with its display name."""
    nodes = node_groups(svg)
    for state, spec in machine.table().states.items():
        assert state in nodes, f"state {state} is not drawn"
        assert f">{html.escape(spec.name)}<" in nodes[state]


def assert_mermaid_of(page: str, machine=MACHINE) -> None:
    """The page holds the machine's Mermaid text, no SVG, and Mermaid's script once."""
    blocks = MERMAID.findall(page)
    assert len(blocks) == 1 and "<svg" not in page
    text = html.unescape(blocks[0])
    assert text.strip() == to_mermaid(machine).strip()
    for state, spec in machine.table().states.items():
        assert f"    {state} : {spec.name}" in text
    assert page.count("mermaid.initialize") == 1


@pytest.fixture
def no_dot(tmp_path, monkeypatch):
    """PATH without Graphviz's ``dot``."""
    empty = tmp_path / "bin-without-dot"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    assert shutil.which("dot") is None


@pytest.fixture
def has_dot():
    """Graphviz's ``dot`` is installed (CI installs the graphviz package)."""
    assert shutil.which("dot"), "Graphviz 'dot' is needed: apt-get install graphviz"


# ------------------------------------------------------------------ Sphinx


def sphinx_project(root: Path, body: str, conf: str = "") -> Path:
    """A one-page Sphinx project using the directive; returns its source folder."""
    src = root / "src"
    src.mkdir()
    (src / "conf.py").write_text(
        'project = "t"\nextensions = ["lifecycle.diagrams.sphinx"]\n' + conf)
    (src / "index.rst").write_text("Machines\n========\n\n" + textwrap.dedent(body))
    return src


def sphinx_build(src: Path, *options: str) -> tuple[int, str, str]:
    """Build HTML; the exit code, the page and the warnings."""
    out, warnings = src.parent / "html", src.parent / "warnings.txt"
    code = build_main(["-q", "-E", "-b", "html", "-w", str(warnings), *options,
                       str(src), str(out)])
    page = out / "index.html"
    return code, page.read_text() if page.is_file() else "", warnings.read_text()


def test_sphinx_directive_inlines_the_svg_with_every_state(tmp_path, has_dot):
    src = sphinx_project(tmp_path, f"""
        .. lifecycle-diagram:: {TARGET}

        .. lifecycle-diagram:: lifecycle.machines.database:DatabaseInstance
           :highlight: ready
        """)
    code, page, warnings = sphinx_build(src, "-W")
    assert (code, warnings) == (0, "")
    plain, kind = SVG.findall(page)
    assert_every_state_drawn(plain)
    assert HIGHLIGHT not in plain
    # a Kind is drawn on its machine, the highlighted state outlined
    assert_every_state_drawn(kind, DatabaseInstanceMachine)
    nodes = node_groups(kind)
    assert HIGHLIGHT in nodes["ready"] and "current state" in nodes["ready"]
    assert not any(HIGHLIGHT in markup for state, markup in nodes.items() if state != "ready")
    assert "<?xml" not in page and "<!DOCTYPE svg" not in page
    assert "mermaid" not in page


def test_sphinx_directive_falls_back_to_mermaid_without_dot(tmp_path, no_dot):
    src = sphinx_project(tmp_path, f".. lifecycle-diagram:: {TARGET}\n")
    code, page, warnings = sphinx_build(src, "-W")
    assert (code, warnings) == (0, "")
    assert_mermaid_of(page)


def test_sphinx_bad_target_is_one_warning_naming_it(tmp_path):
    src = sphinx_project(tmp_path, """
        .. lifecycle-diagram:: no_such_module:Machine

        .. lifecycle-diagram:: lifecycle.machines.managed:NoSuchMachine

        .. lifecycle-diagram:: lifecycle.machines.managed:ManagedResourceMachine
           :highlight: exploded

        .. lifecycle-diagram:: lifecycle.machines.managed:ManagedResourceMachine
           :colour: red
        """)
    code, page, warnings = sphinx_build(src)
    assert code == 0 and "<svg" not in page
    lines = warnings.strip().splitlines()
    assert len(lines) == 4 and "Traceback" not in warnings
    assert "index.rst:5: WARNING: lifecycle-diagram no_such_module:Machine: cannot import " \
           "'no_such_module'" in lines[0]
    assert "lifecycle.machines.managed:NoSuchMachine" in lines[1]
    assert "'exploded' is not a state of ManagedResourceMachine" in lines[2]
    assert "unknown option 'colour'; the options are format, highlight" in lines[3]
    # with -W the build fails
    code, _, warnings = sphinx_build(src, "-W")
    assert code != 0 and "no_such_module:Machine" in warnings


# ------------------------------------------------------------------ MkDocs


def mkdocs_project(root: Path, page: str, extension: object = "lifecycle.diagrams.mkdocs") -> Path:
    """A one-page MkDocs project using the extension; returns its mkdocs.yml."""
    (root / "docs").mkdir()
    (root / "docs" / "index.md").write_text(textwrap.dedent(page))
    config = root / "mkdocs.yml"
    config.write_text(yaml.safe_dump({"site_name": "t", "markdown_extensions": [extension]}))
    return config


def mkdocs_page(config: Path) -> str:
    """Build the site strictly (a warning aborts it) and return its index page."""
    mkdocs_build(load_config(str(config), strict=True))
    return (config.parent / "site" / "index.html").read_text()


def test_mkdocs_extension_inlines_the_svg_with_every_state(tmp_path, has_dot):
    config = mkdocs_project(tmp_path, f"""
        # Machines

        ```lifecycle-diagram
        {TARGET}
        ```

        Text between.

        ```lifecycle-diagram
        {TARGET}
        highlight: failed
        ```

        ```python
        print("an ordinary fenced block is left alone")
        ```
        """)
    page = mkdocs_page(config)
    plain, marked = SVG.findall(page)
    assert_every_state_drawn(plain)
    assert_every_state_drawn(marked)
    assert HIGHLIGHT in node_groups(marked)["failed"] and HIGHLIGHT not in plain
    assert "<p>Text between.</p>" in page
    assert "an ordinary fenced block is left alone" in page
    assert "language-lifecycle-diagram" not in page and "```lifecycle-diagram" not in page


def test_mkdocs_extension_falls_back_to_mermaid_without_dot(tmp_path, no_dot):
    # registered under its entry-point name too
    config = mkdocs_project(tmp_path, f"```lifecycle-diagram\n{TARGET}\n```\n",
                            extension="lifecycle_diagram")
    assert_mermaid_of(mkdocs_page(config))


def test_mkdocs_draws_an_object_dump_relative_to_base_dir(tmp_path, has_dot):
    dump = {"apiVersion": "db.lifecycle.dev/v1alpha1", "kind": "DatabaseInstance",
            "metadata": {"name": "orders", "namespace": "default"},
            "status": {"state": "ready", "history": [
                {"from": "unclaimed", "to": "creating", "event": "create"},
                {"from": "creating", "to": "ready", "event": "available"}]}}
    config = mkdocs_project(
        tmp_path, "```lifecycle-diagram\nobject: dumps/orders.yaml\nformat: dot\n```\n",
        extension={"lifecycle.diagrams.mkdocs": {"base_dir": str(tmp_path), "mermaid_url": ""}})
    (tmp_path / "dumps").mkdir()
    (tmp_path / "dumps" / "orders.yaml").write_text(yaml.safe_dump(dump))
    page = html.unescape(mkdocs_page(config))
    # the machine is found from the object's registered kind
    assert "DatabaseInstance default/orders on DatabaseInstanceMachine" in page
    assert 'unclaimed -> creating [xlabel="1. create"' in page
    assert "current state" in next(line for line in page.splitlines()
                                   if line.startswith("  ready ["))


def test_mkdocs_bad_target_is_a_warning_naming_it_and_strict_aborts(tmp_path, caplog):
    config = mkdocs_project(tmp_path, "```lifecycle-diagram\nno_such_module:Machine\n```\n")
    with caplog.at_level(logging.WARNING), pytest.raises(Abort):
        mkdocs_page(config)
    ours = [r.getMessage() for r in caplog.records if "lifecycle-diagram" in r.getMessage()]
    assert ours == ["lifecycle-diagram no_such_module:Machine: cannot import "
                    "'no_such_module': ModuleNotFoundError: No module named 'no_such_module'"]
    # without --strict the page is built with the error in place of the diagram
    mkdocs_build(load_config(str(config)))
    page = (tmp_path / "site" / "index.html").read_text()
    assert 'class="lifecycle-diagram-error"' in page and "no_such_module:Machine" in page


# ------------------------------------------------------------------ requests


@pytest.mark.parametrize(("block", "message"), [
    ([TARGET, "colour: red"], "unknown option 'colour'"),
    ([TARGET, "format: jpeg"], "unknown format 'jpeg'"),
    ([TARGET, "highlight: ready", "highlight: failed"], "option 'highlight' given twice"),
    ([TARGET, "just words here"], "line 2: expected the machine or kind first"),
    (["highlight: ready"], "name a machine or kind (MODULE:NAME or a registered"),
    (["object: a.yaml", "highlight: ready"], "give highlight or object, not both"),
    ([TARGET, "object-name: x"], "give object too"),
])
def test_a_bad_block_is_one_line_naming_the_mistake(block, message):
    with pytest.raises(DiagramError, match=re.escape(message)) as caught:
        parse_block(block)
    assert "\n" not in str(caught.value)


def test_a_block_reads_target_options_comments_and_blank_lines():
    request = parse_block(["", f"  {TARGET}  ", "# a comment", "format: Mermaid",
                           "highlight:   ready"])
    assert request == DiagramRequest(target=TARGET, fmt="mermaid", highlight="ready")


def test_only_machines_kinds_and_registrations_resolve():
    assert resolve(TARGET) is MACHINE
    assert resolve("lifecycle.machines.database:DatabaseInstance") is DatabaseInstanceMachine
    # a registered kind by name, as the command line takes it
    assert resolve("DatabaseInstance") is DatabaseInstanceMachine
    with pytest.raises(DiagramError, match="no registered kind 'Nothing'"):
        resolve("Nothing")
    with pytest.raises(DiagramError, match="str is not a LifecycleMachine class"):
        resolve("lifecycle.diagrams.embed:CSS_CLASS")


def test_png_is_a_data_uri_and_dot_is_text(has_dot):
    png = diagram_html(DiagramRequest(target=TARGET, fmt="png")).html
    assert '<img src="data:image/png;base64,iVBORw0KGgo' in png
    dot = html.unescape(diagram_html(DiagramRequest(target=TARGET, fmt="dot")).html)
    assert 'digraph "ManagedResourceMachine"' in dot


# ------------------------------------------------------------------ API reference


def test_api_reference_documents_every_public_name_without_warnings(tmp_path):
    out = tmp_path / "api"
    code = build_main(["-q", "-E", "-W", "-b", "html", "-w", str(tmp_path / "warnings.txt"),
                       str(ROOT / "docs" / "api"), str(out)])
    assert code == 0, (tmp_path / "warnings.txt").read_text()
    page = (out / "index.html").read_text()
    public = [name for name in lifecycle.__all__ if not name.startswith("_")]
    missing = [name for name in public if f'id="lifecycle.{name}"' not in page]
    assert public and missing == []


def test_the_warnings_check_catches_a_broken_docstring(tmp_path, monkeypatch):
    (tmp_path / "broken_api.py").write_text('def f():\n    """Uses `unclosed markup."""\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    src = tmp_path / "src"
    src.mkdir()
    (src / "conf.py").write_text('extensions = ["sphinx.ext.autodoc"]\n')
    (src / "index.rst").write_text("API\n===\n\n.. automodule:: broken_api\n   :members:\n")
    code = build_main(["-q", "-E", "-W", "-b", "html", "-w", str(tmp_path / "w.txt"),
                       str(src), str(tmp_path / "out")])
    assert code != 0
    assert "broken_api.f" in (tmp_path / "w.txt").read_text()


# ------------------------------------------------------------------ the guide's examples


GUIDE = ROOT / "docs" / "diagrams-in-docs.md"


def test_the_guides_sphinx_example_builds(tmp_path, has_dot):
    example = re.search(r"^```rst\n(.*?)^```", GUIDE.read_text(), re.S | re.M).group(1)
    src = sphinx_project(tmp_path, example)
    (src / "dumps").mkdir()
    (src / "dumps" / "orders.yaml").write_text(yaml.safe_dump({
        "apiVersion": "db.lifecycle.dev/v1alpha1", "kind": "DatabaseInstance",
        "metadata": {"name": "orders"}, "status": {"state": "creating"}}))
    code, page, warnings = sphinx_build(src, "-W")
    assert (code, warnings) == (0, "")
    assert len(SVG.findall(page)) == 2
    (mermaid,) = MERMAID.findall(page)
    assert "title: DatabaseInstance orders on DatabaseInstanceMachine" in html.unescape(mermaid)
    assert "class creating current" in mermaid


def test_the_guides_markdown_example_renders(has_dot):
    example = re.search(r"^````markdown\n(.*?)^````", GUIDE.read_text(), re.S | re.M).group(1)
    page = markdown.markdown(example, extensions=["lifecycle.diagrams.mkdocs"])
    (svg,) = SVG.findall(page)
    assert_every_state_drawn(svg)
    assert HIGHLIGHT in node_groups(svg)["ready"]
    # the guide itself quotes the block inside a longer fence: there it stays text
    guide = markdown.markdown(GUIDE.read_text(),
                              extensions=["fenced_code", "lifecycle.diagrams.mkdocs"])
    assert "<svg" not in guide and "```lifecycle-diagram\nlifecycle.machines.managed:" in guide
