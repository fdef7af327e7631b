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
import re
import sys
import traceback
from collections.abc import Sequence
from typing import Any

from lifecycle import registry
from lifecycle.core.errors import LifecycleError
from lifecycle.core.machine import LifecycleMachine

__all__ = [
    "CLIENT_METHODS",
    "COMMANDS",
    "EPILOG",
    "EXTRAS",
    "INTERNAL_ERROR",
    "POSTGRES_KIND_NAMES",
    "UsageError",
    "build_parser",
    "check_connector",
    "extra_hint",
    "load",
    "machine_of",
    "main",
]

#: Modules that contribute subcommands, in help order.
COMMANDS = (
    "lifecycle.cli.demo",
    "lifecycle.cli.diagram",
    "lifecycle.cli.plan",
    "lifecycle.cli.verify",
    "lifecycle.cli.run",
    "lifecycle.cli.serve",
    "lifecycle.cli.envtest",
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
        return version("kube-lifecycle")
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


def machine_of(spec: str, option: str = "machine") -> type[LifecycleMachine]:
    """The lifecycle machine ``spec`` names, a :class:`UsageError` with one line otherwise.

    ``spec`` is ``MODULE:NAME`` of a machine class, a kind (anything with a
    ``machine``) or a :class:`~lifecycle.registry.Registration`; or a
    registered kind's name, plural or ``plural.group``. A kind stands for
    its machine. ``option`` names the argument in the message.
    """
    if ":" in spec:
        value: Any = load(spec)
    else:
        try:
            value = registry.find(spec)
        except registry.RegistryError as exc:
            raise UsageError(f"expected MODULE:NAME or a registered kind's name: {exc}") from None
    if isinstance(value, registry.Registration):
        value = value.kind
    machine = value if isinstance(value, type) else getattr(value, "machine", None)
    if not (isinstance(machine, type) and issubclass(machine, LifecycleMachine)
            and "_table" in machine.__dict__):
        raise UsageError(f"{option} {spec} is not a LifecycleMachine class with states, "
                         f"nor a kind with one (got {type(value).__name__})")
    return machine


#: The methods every external client has (see :mod:`lifecycle.core.contract`).
CLIENT_METHODS = ("observe", "create", "update", "delete")


def check_connector(value: object, what: str) -> Any:
    """The connector ``value`` is or makes; a :class:`UsageError` naming what is missing.

    ``value`` is a connector (it has ``connect``) or a factory called without
    arguments that returns one (a class is a factory). When ``connect`` is annotated with the class
    it returns, and that class has no subclasses (a base class may stand for
    any of them), it must have every method of the client contract
    (``observe``, ``create``, ``update``, ``delete``). ``what`` names the
    connector in messages (``--connector app.kinds:make``).
    """
    connector: Any = value  # a user's object: checked by what it has, below
    if isinstance(value, type) or not callable(getattr(value, "connect", None)):
        if not callable(value):
            raise UsageError(f"{what} is neither a connector nor a factory returning one "
                             f"(it has no connect() method)")
        try:
            connector = value()
        except Exception as exc:  # user code: one line, never a traceback
            raise UsageError(f"{what}: calling the connector factory failed: "
                             f"{type(exc).__name__}: {_first_line(exc)}") from None
        if not callable(getattr(connector, "connect", None)):
            raise UsageError(f"{what} returned {type(connector).__name__}, which has no "
                             f"connect() method")
    client = _returned_class(connector.connect)
    if client is not None:
        missing = [m for m in CLIENT_METHODS if not callable(getattr(client, m, None))]
        if missing:
            raise UsageError(f"{what}: connect() returns {client.__name__}, which has no "
                             f"{', '.join(m + '()' for m in missing)} method"
                             f"{'s' if len(missing) > 1 else ''}")
    return connector


def _returned_class(function: Any) -> type | None:
    """The class ``function`` is annotated to return, when that annotation is a plain class."""
    import typing

    try:
        returned = typing.get_type_hints(function).get("return")
    except Exception:  # an annotation that cannot be resolved is not checked
        return None
    if not isinstance(returned, type) or getattr(returned, "_is_protocol", False):
        return None
    if returned.__subclasses__():  # a base class: the client may be any of its subclasses
        return None
    return returned


#: Optional modules, each with the extra of ``kube-lifecycle`` that installs it and what
#: needs it.
EXTRAS = {"psycopg": ("postgres", "the PostgreSQL kinds"),
          "graphviz": ("diagrams", "SVG and PNG diagrams")}
#: The PostgreSQL kinds, by name and plural: registered only when the postgres extra is.
POSTGRES_KIND_NAMES = frozenset({
    "role", "roles", "database", "databases", "grant", "grants", "schema", "schemas",
    "extension", "extensions", "defaultprivileges", "defaultprivilegeses"})
_NOT_REGISTERED = re.compile(r"no registered kind '([^']*)'")


def _importable(module: str) -> bool:
    try:
        importlib.import_module(module)
    except ImportError:
        return False
    return True


def extra_hint(message: str, missing: str | None = None) -> str:
    """The install hint for an error, or ``""``: when ``missing`` (the module a
    ``ModuleNotFoundError`` names) or the message shows that an optional module of
    :data:`EXTRAS` is not installed (a PostgreSQL kind not registered, ``psycopg`` not
    importable), which extra to install, as one clause."""
    root = (missing or "").partition(".")[0]
    if root not in EXTRAS:
        named = _NOT_REGISTERED.search(message)
        asked = named.group(1).lower().partition(".")[0] if named else ""
        if asked in POSTGRES_KIND_NAMES or re.search(
                r"\bpsycopg\b|postgresql\.lifecycle\.dev", message):
            root = "psycopg"
        elif re.search(r"\bgraphviz\b", message) and "kube-lifecycle[" not in message:
            root = "graphviz"
        else:
            return ""
        if _importable(root):
            return ""
    extra, what = EXTRAS[root]
    return (f"{what} need {root}, which is not installed: "
            f"pip install 'kube-lifecycle[{extra}]'")


def _error_line(exc: BaseException) -> str:
    """The one line printed for a failed command: its message, and the install hint of a
    missing optional module after it."""
    line = _first_line(exc)
    missing = exc.name if isinstance(exc, ModuleNotFoundError) else None
    hint = extra_hint(line, missing)
    return f"{line}; {hint}" if hint and line else (hint or line)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``lifecycle`` console script."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (UsageError, LifecycleError, OSError) as exc:
        print(f"lifecycle {args.command}: {_error_line(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except ModuleNotFoundError as exc:
        hint = extra_hint(str(exc), exc.name)
        if not hint:
            return _internal(args.command, exc)
        print(f"lifecycle {args.command}: {hint}", file=sys.stderr)
        return 2
    except Exception as exc:
        return _internal(args.command, exc)


def _internal(command: str, exc: Exception) -> int:
    """Report an unexpected failure as one line (the traceback too with LIFECYCLE_DEBUG=1)."""
    if os.environ.get("LIFECYCLE_DEBUG") == "1":
        traceback.print_exception(exc)
    print(f"lifecycle {command}: internal error: {type(exc).__name__}: "
          f"{_first_line(exc)}", file=sys.stderr)
    return INTERNAL_ERROR


def _first_line(exc: BaseException) -> str:
    """The first line of an exception's message (at most 300 characters)."""
    lines = str(exc).splitlines()
    return lines[0][:300] if lines else ""


if __name__ == "__main__":
    sys.exit(main())
