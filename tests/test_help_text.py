"""The help of every subcommand is complete: a description,
help on every option, each default said (a flag's as on/off), plain text without
reStructuredText markup."""

from __future__ import annotations

import argparse

import pytest

from lifecycle.cli import build_parser

COMMANDS = ("demo", "diagram", "diagrams", "plan", "verify", "run", "crds", "manifests",
            "serve", "envtest", "bench")


def _subparser(name: str) -> argparse.ArgumentParser:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices[name]


def _problems(sub: argparse.ArgumentParser) -> tuple[list[str], list[str]]:
    """The options of ``sub`` without help, and those whose help does not say the default."""
    missing, undefaulted = [], []
    for action in sub._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        label = "/".join(action.option_strings) or action.dest
        if not action.help:
            missing.append(label)
        elif action.option_strings and not action.required and "default" not in action.help:
            undefaulted.append(label)
        elif action.default is True and "default: on" not in action.help:
            undefaulted.append(f"{label} (default on not shown)")
        elif action.default not in (None, False, True, argparse.SUPPRESS) and \
                str(action.default) not in action.help:
            undefaulted.append(f"{label} (default {action.default!r} not shown)")
    return missing, undefaulted


@pytest.mark.parametrize("name", COMMANDS)
def test_every_option_is_explained_with_its_default(name: str) -> None:
    sub = _subparser(name)
    assert sub.description and len(sub.description) > 40, f"{name} has no description"
    assert _problems(sub) == ([], [])


@pytest.mark.parametrize("name", COMMANDS)
def test_help_is_plain_text(name: str) -> None:
    text = _subparser(name).format_help()
    assert "`" not in text and ":class:" not in text and "``" not in text


def test_every_subcommand_is_checked() -> None:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert sorted(action.choices) == sorted(COMMANDS)


def test_the_check_finds_a_missing_default() -> None:
    parser = argparse.ArgumentParser(description="a command whose options are half documented")
    parser.add_argument("--workers", type=int, default=2, help="concurrent reconciles")
    parser.add_argument("--fast", action="store_true", help="no pacing")
    parser.add_argument("--durable", action=argparse.BooleanOptionalAction, default=True,
                        help="fsync every write (default: yes)")
    parser.add_argument("--object", required=True, help="a dump to read")
    assert _problems(parser) == (
        [], ["--workers", "--fast", "--durable/--no-durable (default on not shown)"])
