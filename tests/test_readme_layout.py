"""The README opens with its two commands, then says how to try it and how to develop it.

The two opening commands stay first (CI runs the test command word for word,
on one line); "Try it" is a virtual environment, a plain install and the
demo; "Develop it" is the dev extra, the suite and how long it takes.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def _section(title: str) -> str:
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## )", README, re.S | re.M)
    assert match, f"README has no '## {title}' section"
    return match.group(1)


def test_the_two_opening_commands_come_first_and_ci_runs_the_second() -> None:
    first_block = re.search(r"```sh\n(.*?)```", README, re.S)
    assert first_block is not None
    lines = first_block.group(1).splitlines()
    assert len(lines) == 2 and lines[0] == "pip install -e . && lifecycle demo"
    assert lines[1].startswith("apt-get update && ") and " && python -m pytest" in lines[1]
    assert "pip install -e '.[dev]'" in lines[1]  # the test command: one line, run by CI
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").strip().splitlines()[-1]
    assert ci == lines[1]  # CI runs exactly the README's test command
    assert README.index(first_block.group(0)) < README.index("## ")


def test_try_it_is_a_venv_a_plain_install_and_the_demo() -> None:
    text = _section("Try it")
    assert "python3 -m venv" in text and "pip install ." in text
    assert "lifecycle demo" in text and "[dev]" not in text
    assert "kube-lifecycle" in text


def test_develop_it_is_the_dev_extra_the_suite_and_its_duration() -> None:
    text = _section("Develop it")
    assert "pip install -e '.[dev]'" in text and "python -m pytest" in text
    assert "minutes" in text
    assert README.index("## Try it") < README.index("## Develop it") < README.index(
        "## What it is")
