"""``lifecycle plan``: a dry run of the next reconcile of a dumped object."""

from __future__ import annotations

from typing import Any

from lifecycle.cli import UsageError, load
from lifecycle.core.errors import HandledError
from lifecycle.core.machine import LifecycleMachine
from lifecycle.core.plan import OBSERVATIONS, describe, plan
from lifecycle.core.values import now


def register(subparsers: Any) -> None:
    """Add the ``plan`` subcommand: a dry run of the next reconcile of a dumped object."""
    parser = subparsers.add_parser(
        "plan", help="show what the next reconcile of an object would do, without doing it",
        description="Dry run: read an object dumped as YAML or JSON, assume what observe "
                    "returns, and print the event, transition, conditions and requeue result "
                    "the reconciler would choose. Nothing is called or written.")
    parser.add_argument("--object", required=True, metavar="FILE",
                        help="a YAML/JSON dump of one object")
    parser.add_argument("--name", help="pick this object from a List")
    parser.add_argument("--machine", metavar="MODULE:CLASS",
                        help="the machine (default: found from the object's kind)")
    parser.add_argument("--observed", choices=sorted(OBSERVATIONS), default="available",
                        help="what observe returns (default: available)")
    parser.add_argument("--error", metavar="MESSAGE",
                        help="assume connect/observe raised a handled error instead")
    parser.set_defaults(func=_main)


def _main(args: Any) -> int:
    from lifecycle.diagrams.live import load_object, machine_for

    obj = load_object(args.object, args.name)
    if args.machine:
        machine = load(args.machine)
        if not (isinstance(machine, type) and issubclass(machine, LifecycleMachine)):
            raise UsageError(f"{args.machine} is not a lifecycle machine class")
    else:
        machine = machine_for(obj)
    error = HandledError(args.error, reason="ExternalError") if args.error else None
    result = plan(machine, obj, observation=None if error else OBSERVATIONS[args.observed],
                  error=error, now=now())
    print(describe(result))
    return 0
