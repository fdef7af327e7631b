"""``lifecycle diagram -o`` writes what the file's name says, and a user's reference page
links only to pages that were generated."""

from __future__ import annotations

import re
import sys
import textwrap
from pathlib import Path

import pytest

from lifecycle.cli import main
from lifecycle.cli.diagram import output_format
from lifecycle.diagrams.dot import to_dot
from lifecycle.machines.managed import ManagedResourceMachine

MACHINE = "lifecycle.machines.managed:ManagedResourceMachine"


@pytest.mark.parametrize(("argv", "message"), [
    (["-o", "x.jpg"], "-o {out}: lifecycle does not write jpg images; use one of .dot, .gv, "
                      ".htm, .html, .mermaid, .mmd, .png, .svg (or -f FORMAT with a suffix of "
                      "that format)"),
    (["-f", "dot", "-o", "x.jpeg"], "lifecycle does not write jpeg images"),
    (["-o", "x.txt"], "-o {out}: cannot tell the format from the suffix .txt; use one of .dot, "
                      ".gv, .htm, .html, .mermaid, .mmd, .png, .svg, or name the format with -f"),
    (["-f", "mermaid", "-o", "x.html"], "-o {out} names a html file but -f is mermaid; drop -f "
                                        "or give the file a mermaid suffix"),
    (["-f", "svg", "-o", "x.png"], "-o {out} names a png file but -f is svg; drop -f or give "
                                   "the file a svg suffix"),
])
def test_an_output_suffix_that_disagrees_with_the_format_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str],
        message: str) -> None:
    out = tmp_path / argv[-1]
    argv = [*argv[:-1], str(out)]
    assert main(["diagram", MACHINE, *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"lifecycle diagram: {message.format(out=out)}" or message in err
    assert len(err.splitlines()) == 1
    assert not out.exists()  # nothing written, least of all DOT text into an image name


def test_a_suffix_without_a_format_of_its_own_is_fine_with_f(tmp_path: Path) -> None:
    out = tmp_path / "machine.txt"
    assert main(["diagram", MACHINE, "-f", "dot", "-o", str(out)]) == 0
    assert out.read_text() == to_dot(ManagedResourceMachine)
    bare = tmp_path / "machine"
    assert main(["diagram", MACHINE, "-o", str(bare)]) == 0  # no suffix: dot
    assert bare.read_text().startswith("digraph")


def test_output_format_rules() -> None:
    assert output_format(None, None) == "dot"
    assert output_format("mermaid", None) == "mermaid"
    assert output_format(None, "a/b.MMD") == "mermaid"
    assert output_format("svg", "b.svg") == "svg"
    assert output_format(None, "b.gv") == "dot"


USER_MACHINES = '''
from lifecycle.core.machine import Timing
from lifecycle.machines.managed import ManagedResourceMachine


class QueueMachine(ManagedResourceMachine):
    """A queue's lifecycle."""

    timing = Timing(poll=120.0)


class SlowQueueMachine(QueueMachine):
    """A slower queue."""

    timing = Timing(poll=600.0)
'''

LINK = re.compile(r"\]\(([^)#\s]+\.md)(?:#[^)]*)?\)")


def test_a_user_reference_page_links_only_to_generated_pages(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "user_queues.py").write_text(textwrap.dedent(USER_MACHINES))
    monkeypatch.syspath_prepend(str(tmp_path))
    root = tmp_path / "project"
    root.mkdir()
    assert main(["diagrams", "user_queues", "--root", str(root)]) == 0, capsys.readouterr().err
    folder = root / "docs" / "reference"
    pages = sorted(p.name for p in folder.glob("*.md"))
    assert pages == ["QueueMachine.md", "SlowQueueMachine.md", "index.md"]
    for page in folder.glob("*.md"):
        for target in LINK.findall(page.read_text()):
            assert (folder / target).is_file(), f"{page.name} links to missing {target}"
    queue = (folder / "QueueMachine.md").read_text()
    assert ("Extends `ManagedResourceMachine` (`lifecycle.machines.managed."
            "ManagedResourceMachine`), whose reference page is not generated here.") in queue
    slow = (folder / "SlowQueueMachine.md").read_text()
    assert "Extends [QueueMachine](QueueMachine.md)." in slow
    sys.modules.pop("user_queues", None)
