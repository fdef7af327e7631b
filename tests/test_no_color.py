"""``NO_COLOR`` and ``TERM=dumb`` are honoured wherever colour escapes are printed.

The demo's live table colours each state on a terminal. With ``NO_COLOR`` set
(https://no-color.org) it prints no colour, and on a ``TERM=dumb`` terminal,
which cannot move the cursor, it prints the plain transcript with no escape
sequence at all. A test also keeps any new colour escape in the sources from
going unchecked.
"""

from __future__ import annotations

import io
import re
import sys
from pathlib import Path

import pytest

from lifecycle.cli import main
from lifecycle.providers.simcloud.scenarios.demo import terminal_features

ROOT = Path(__file__).resolve().parent.parent
COLOUR = re.compile(r"\x1b\[[0-9;]*m")
ESCAPE = re.compile(r"\x1b\[")


class Terminal(io.StringIO):
    """Standard output that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def demo_output(monkeypatch: pytest.MonkeyPatch, **environ: str) -> str:
    for name in ("NO_COLOR", "TERM"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    out = Terminal()
    monkeypatch.setattr(sys, "stdout", out)
    assert main(["demo", "--fast"]) == 0
    return out.getvalue()


def test_a_terminal_gets_colours_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    assert COLOUR.search(demo_output(monkeypatch, TERM="xterm"))


def test_no_color_prints_no_colour(monkeypatch: pytest.MonkeyPatch) -> None:
    text = demo_output(monkeypatch, TERM="xterm", NO_COLOR="1")
    assert not COLOUR.search(text)
    assert "RESOURCE" in text and "demo succeeded" in text  # still the live table


def test_a_dumb_terminal_gets_no_escape_at_all(monkeypatch: pytest.MonkeyPatch) -> None:
    text = demo_output(monkeypatch, TERM="dumb")
    assert not ESCAPE.search(text)
    assert "== applying four DatabaseInstances" in text  # the plain transcript


def test_terminal_features() -> None:
    tty, pipe = Terminal(), io.StringIO()
    assert terminal_features(tty, {"TERM": "xterm"}) == (True, True)
    assert terminal_features(tty, {"TERM": "xterm", "NO_COLOR": "1"}) == (True, False)
    assert terminal_features(tty, {"TERM": "xterm", "NO_COLOR": ""}) == (True, True)
    assert terminal_features(tty, {"TERM": "dumb"}) == (False, False)
    assert terminal_features(pipe, {}) == (False, False)


def test_every_colour_escape_in_the_sources_is_behind_the_check() -> None:
    """A module printing an escape sequence must consult terminal_features (or NO_COLOR)."""
    unchecked = []
    for folder in ("lifecycle", "machines", "providers"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            text = path.read_text()
            if re.search(r"\\x1b\[|\\033\[|\\u001b\[", text) and not re.search(
                    r"terminal_features|NO_COLOR", text):
                unchecked.append(str(path.relative_to(ROOT)))
    assert unchecked == []
