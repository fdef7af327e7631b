"""The ``lifecycle`` command line: one subcommand per feature module.

Each module in :data:`COMMANDS` exposes ``register(subparsers)``, adding its
subcommand with a ``func(args) -> int`` default. Errors a user can fix are
printed as one line on stderr with exit code 2, never as a traceback; any
other failure inside a command is one ``internal error`` line with exit code
70 (the traceback follows only when ``LIFECYCLE_DEBUG=1``).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback
from collections.abc import Sequence

from lifecycle import registry
from lifecycle.core.errors import LifecycleError

#: Modules that contribute subcommands, in help order.
COMMANDS = (
    "lifecycle.cli.demo",
    "lifecycle.cli.diagram",
    "lifecycle.cli.plan",
    "lifecycle.cli.verify",
    "lifecycle.cli.run",
    "lifecycle.cli.serve",
    "lifecycle.cli.bench",
)


#: Exit code of an unexpected failure inside a command (``EX_SOFTWARE``).
INTERNAL_ERROR = 70

EPILOG = ("Errors are printed as one line on stderr: exit code 2 for a mistake in the "
          "input or options, 70 for an internal error. Set LIFECYCLE_DEBUG=1 to also print "
          "the traceback of an internal error.")


class UsageError(LifecycleError):
    """A command-line mistake: printed as one line, exit code 2."""


def _version() -> str:
    """The installed distribution's version (``unknown`` when not installed)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("lifecycle")
    except PackageNotFoundError:
        return "unknown"


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every registered subcommand."""
    parser = argparse.ArgumentParser(
        prog="lifecycle",
        description="Explicit, validated lifecycle machines for Kubernetes managed resources.",
        epilog=EPILOG,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMANDS:
        importlib.import_module(name).register(sub)
    return parser


def load(spec: str) -> object:
    """Resolve ``MODULE:NAME``; a :class:`UsageError` with one line when it cannot."""
    try:
        return registry.load(spec)
    except registry.RegistryError as exc:
        raise UsageError(str(exc)) from None


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``lifecycle`` console script."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (UsageError, LifecycleError, OSError) as exc:
        print(f"lifecycle {args.command}: {_first_line(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        if os.environ.get("LIFECYCLE_DEBUG") == "1":
            traceback.print_exc()
        print(f"lifecycle {args.command}: internal error: {type(exc).__name__}: "
              f"{_first_line(exc)}", file=sys.stderr)
        return INTERNAL_ERROR


def _first_line(exc: BaseException) -> str:
    """The first line of an exception's message (at most 300 characters)."""
    lines = str(exc).splitlines()
    return lines[0][:300] if lines else ""


if __name__ == "__main__":
    sys.exit(main())
