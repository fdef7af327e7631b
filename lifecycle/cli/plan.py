"""``lifecycle plan``: a dry run of the next reconcile of a dumped object.

``-o text`` (the default) prints a few lines a person reads; ``-o json``
prints one JSON document a script reads (see :func:`as_json` for its keys).
"""

from __future__ import annotations

import json
from typing import Any

from lifecycle.cli import machine_of
from lifecycle.core.errors import HandledError
from lifecycle.core.plan import OBSERVATIONS, Plan, describe, plan
from lifecycle.core.values import now

__all__ = ["OUTPUTS", "as_json", "register"]

#: Output formats of ``lifecycle plan``.
OUTPUTS = ("text", "json")


def register(subparsers: Any) -> None:
    """Add the ``plan`` subcommand: a dry run of the next reconcile of a dumped object."""
    parser = subparsers.add_parser(
        "plan", help="show what the next reconcile of an object would do, without doing it",
        description="Dry run: read an object dumped as YAML or JSON, assume what observe "
                    "returns, and print the event, transition, conditions and requeue result "
                    "the reconciler would choose. Nothing is called or written.")
    parser.add_argument("--object", required=True, metavar="FILE",
                        help="a YAML/JSON dump of one object")
    parser.add_argument("--name",
                        help="pick this object from a List (default: the only one)")
    parser.add_argument("--machine", metavar="MACHINE|KIND",
                        help="MODULE:NAME of a machine class, a Kind or a Registration, or a "
                             "registered kind's name (default: found from the object's kind)")
    parser.add_argument("--observed", choices=sorted(OBSERVATIONS), default="available",
                        help="what observe returns (default: available)")
    parser.add_argument("--error", metavar="MESSAGE",
                        help="assume connect/observe raised a handled error instead "
                             "(default: none, observe answers --observed)")
    parser.add_argument("-o", "--output", choices=OUTPUTS, default="text",
                        help="text for people (default), json for scripts: one document with "
                             "state, decision, transition, target, conditions, phase, events "
                             "and requeue")
    parser.set_defaults(func=_main)


def as_json(p: Plan) -> dict[str, Any]:
    """The plan as one JSON-ready document.

    Keys: ``state`` (where the pass starts), ``decision`` (``event``, None
    when nothing fires, with its ``reason`` and ``message``), ``transition``
    (``source``, ``event``, ``target``, ``guards``, ``actions``; None when
    no transition is taken), ``target`` (the state afterwards), ``conditions``
    (as they would be written to status), ``phase``, ``events`` (the
    Kubernetes Events, each ``type``, ``reason``, ``message``) and
    ``requeue`` (``kind``: done, requeue-now, requeue-after or backoff;
    ``after`` in seconds; ``reason``).
    """
    t = p.transition
    return {
        "state": p.source,
        "decision": {"event": p.choice.event, "reason": p.choice.reason,
                     "message": p.choice.message},
        "transition": None if t is None else {
            "source": t.source, "event": t.event, "target": t.target,
            "guards": list(t.guards), "actions": list(t.actions)},
        "target": p.target,
        "conditions": [dict(c) for c in p.settled.status.get("conditions") or []
                       if isinstance(c, dict)],
        "phase": p.settled.status.get("phase"),
        "events": [{"type": type_, "reason": reason, "message": message}
                   for type_, reason, message in p.settled.events],
        "requeue": {"kind": p.result.kind.value, "after": p.result.after,
                    "reason": p.result.reason},
    }


def _main(args: Any) -> int:
    from lifecycle.diagrams.live import load_object, machine_for

    obj = load_object(args.object, args.name)
    machine = machine_of(args.machine, "--machine") if args.machine else machine_for(obj)
    error = HandledError(args.error, reason="ExternalError") if args.error else None
    result = plan(machine, obj, observation=None if error else OBSERVATIONS[args.observed],
                  error=error, now=now())
    if args.output == "json":
        print(json.dumps(as_json(result), indent=2, sort_keys=True, default=str))
    else:
        print(describe(result))
    return 0
