"""The help of demo, diagram, diagrams, verify, crds, manifests and envtest is complete: a
description, help on every option, each default said, plain text without reStructuredText
markup."""

from __future__ import annotations

import argparse

import pytest

from lifecycle.cli import build_parser

COMMANDS = ("demo", "diagram", "diagrams", "verify", "crds", "manifests", "envtest")


def _subparser(name: str) -> argparse.ArgumentParser:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices[name]


@pytest.mark.parametrize("name", COMMANDS)
def test_every_option_is_explained_with_its_default(name: str) -> None:
    sub = _subparser(name)
    assert sub.description and len(sub.description) > 40, f"{name} has no description"
    missing, undefaulted = [], []
    for action in sub._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        label = "/".join(action.option_strings) or action.dest
        if not action.help:
            missing.append(label)
        elif action.option_strings and "default" not in action.help:
            undefaulted.append(label)
        elif action.default not in (None, False, argparse.SUPPRESS) and \
                str(action.default) not in action.help:
            undefaulted.append(f"{label} (default {action.default!r} not shown)")
    assert missing == [] and undefaulted == []


@pytest.mark.parametrize("name", COMMANDS)
def test_help_is_plain_text(name: str) -> None:
    text = _subparser(name).format_help()
    assert "`" not in text and ":class:" not in text and "``" not in text
