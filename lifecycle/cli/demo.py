"""``lifecycle demo``: run a demo scenario end to end and judge its outcome.

Scenarios are found through the ``lifecycle.demos`` entry-point group, so a
package can add its own: each is ``scenario(out, options) -> bool``, where
``options`` holds the command's options by name. The bundled ones are
``managed`` (DatabaseInstances on the embedded cluster and simulated cloud,
the default), ``claims`` (claims bound to dynamically provisioned resources)
and ``postgres`` (roles, a database and a grant on a reachable server).
"""

from __future__ import annotations

import argparse
import sys
from importlib.metadata import entry_points
from typing import Any

from lifecycle import registry
from lifecycle.cli import UsageError

__all__ = ["register"]


def _scenario_names() -> list[str]:
    return sorted({ep.name for ep in entry_points(group=registry.DEMOS_GROUP)})


def register(subparsers: Any) -> None:
    """Add the ``demo`` subcommand."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "demo", help="run the engine end to end on an embedded cluster and simulated cloud",
        description="Run a demo scenario end to end and judge its outcome: the managed "
                    "scenario applies four DatabaseInstances to an embedded Kubernetes API "
                    "backed by a simulated cloud, edits one, injects a provider outage into "
                    "another and deletes them all, printing every transition. Exits 0 only if "
                    "every resource ended where expected. Nothing outside the process is "
                    "touched, except with --provider postgres.",
        epilog="On a terminal the managed scenario redraws a live table with coloured states; "
               "NO_COLOR (set and not empty) turns the colours off, and TERM=dumb or a pipe "
               "gives the plain transcript (as --plain), with no escape sequences.")
    parser.add_argument("--fast", action="store_true",
                        help="no pacing between ticks (default: 0.4 s between ticks, to watch)")
    parser.add_argument("--plain", action="store_true",
                        help="one line per transition instead of a live table (default: the "
                             "live table on a terminal, plain lines otherwise)")
    names = ", ".join(_scenario_names()) or "none installed"
    parser.add_argument("--scenario", default="managed", metavar="NAME",
                        help=f"the scenario to run (default: managed; installed: {names})")
    parser.add_argument("--provider", choices=("simcloud", "postgres"), default="simcloud",
                        help="simcloud, the simulated cloud, or postgres, a reachable "
                             "PostgreSQL server, the same as --scenario postgres (default: "
                             "simcloud)")
    parser.add_argument("--host", default="127.0.0.1",
                        help="PostgreSQL host, with --provider postgres (default: 127.0.0.1)")
    parser.add_argument("--port", type=int, default=5432,
                        help="PostgreSQL port (default: 5432)")
    parser.add_argument("--user", default="postgres",
                        help="PostgreSQL admin user (default: postgres)")
    parser.add_argument("--sslmode", default="prefer",
                        help="libpq sslmode: disable, allow, prefer, require, verify-ca or "
                             "verify-full (default: prefer)")
    parser.add_argument("--password-env", default="PGPASSWORD", metavar="VAR",
                        help="environment variable holding the admin password, kept out of "
                             "argv (default: PGPASSWORD)")
    parser.set_defaults(func=_main)


def _main(args: argparse.Namespace) -> int:
    name = "postgres" if args.provider == "postgres" else args.scenario
    try:
        scenario = registry.demo(name)  # another scenario's broken plugin does not matter
    except registry.RegistryError as exc:
        raise UsageError(str(exc)) from None
    options = {k: v for k, v in vars(args).items() if k != "func"}
    return 0 if scenario(sys.stdout, options) else 1
