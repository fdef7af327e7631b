"""The ``lifecycle`` command line: one subcommand per feature module.

Each module in :data:`COMMANDS` exposes ``register(subparsers)``, adding its
subcommand with a ``func(args) -> int`` default. Errors a user can fix are
printed as one line on stderr with exit code 2, never as a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
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
        print(f"lifecycle {args.command}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
