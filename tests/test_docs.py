"""The docs: generated reference pages are fresh and complete, examples run, links resolve."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from lifecycle import diagrams as diagram
from lifecycle.diagrams import reference as docgen
from lifecycle.machines.managed import ManagedResourceMachine

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
HAND_WRITTEN = ["quickstart.md", "concepts.md", "adding-a-kind.md", "dependencies.md",
                "harness.md"]
PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def python_blocks(page: str) -> list[str]:
    """The ```python blocks of a Markdown page, in order."""
    return PYTHON_BLOCK.findall((DOCS / page).read_text())


def test_reference_pages_are_fresh():
    machines = diagram.bundled_machines()
    pages = docgen.reference_pages(machines, diagram.bundled_kinds(), ROOT)
    stale = [str(p.relative_to(ROOT)) for p, text in pages.items()
             if not p.is_file() or p.read_text() != text]
    assert stale == [], f"run `lifecycle diagrams`: {stale}"
    assert {p.name for p in (DOCS / "reference").glob("*.md")} == {p.name for p in pages}


def test_reference_page_lists_every_transition_state_and_event():
    page = docgen.machine_page(ManagedResourceMachine)
    table = ManagedResourceMachine.table()
    section = page.split("## Transitions")[1].split("## Events")[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    assert len(rows) == len(table.transitions)
    assert ("| `failed` | `wait` | failed_during_update | `updating` |   | "
            "Ready=False (Updating), Updating=True | requeue after 5 s; Stuck after 30 min |"
            in rows)
    assert "| `ready` | `delete` |   | `deleting` | delete_external |" in section
    for state in table.states:
        assert f"| `{state}` |" in page.split("## States")[1]
    for event in {t.event for t in table.transitions}:
        assert f"| `{event}` |" in page.split("## Events")[1]
    assert "```mermaid\n---\ntitle: ManagedResourceMachine" in page
    assert "| poll (Ready and in sync) | 1 min ±10 % |" in page
    assert "| `failed_during_update` | guard | Guard: the operation that failed" in page


def test_reference_page_names_the_kinds_using_a_machine():
    from lifecycle.machines.database import DatabaseInstance, DatabaseInstanceMachine

    page = docgen.machine_page(DatabaseInstanceMachine, [DatabaseInstance])
    assert "Used by: `DatabaseInstance` (db.lifecycle.dev/v1alpha1)." in page
    assert "Extends [ManagedResourceMachine](ManagedResourceMachine.md)." in page


def test_markdown_table_cells_escape_pipes():
    assert docgen._row(["a|b", "c"]) == "| a\\|b | c |"


@pytest.mark.parametrize("page", ["quickstart.md", "adding-a-kind.md", "harness.md"])
def test_python_examples_in_the_docs_run(page, capsys):
    blocks = python_blocks(page)
    assert blocks, f"{page} has no python examples"
    namespace: dict[str, object] = {"__name__": f"docs_{page.split('.')[0]}"}
    for number, block in enumerate(blocks, 1):
        # run as written: without this module's `from __future__ import annotations`
        exec(compile(block, f"{page} block {number}", "exec", dont_inherit=True), namespace)


def test_guide_kind_is_shorter_than_the_go_example():
    # Steps 1-4 of the guide are the whole kind: shorter than the same kind written in Go
    # against controller-runtime (about 190 lines).
    kind_blocks = python_blocks("adding-a-kind.md")[:4]
    lines = sum(len(block.splitlines()) for block in kind_blocks)
    assert lines < 190, lines


def test_guide_kind_matches_the_bundled_one():
    namespace: dict[str, object] = {}
    for block in python_blocks("adding-a-kind.md")[:4]:
        exec(block, namespace)
    from lifecycle.machines.database import DatabaseInstance

    guide = namespace["DatabaseInstance"]
    for field in ("group", "version", "kind", "plural", "password", "namespaced"):
        assert getattr(guide, field) == getattr(DatabaseInstance, field), field
    assert guide.machine.timing == DatabaseInstance.machine.timing
    assert guide.machine.table().transitions == DatabaseInstance.machine.table().transitions


@pytest.mark.parametrize("page", [*HAND_WRITTEN, "reference/index.md",
                                  "reference/ManagedResourceMachine.md"])
def test_relative_links_resolve(page):
    path = DOCS / page
    text = path.read_text()
    missing = [target for target in LINK.findall(text)
               if "://" not in target and not (path.parent / target).exists()]
    assert missing == []
