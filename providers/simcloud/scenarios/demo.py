"""The managed-resource demo: the engine end to end on the embedded cluster and simulated cloud.

Applies a handful of DatabaseInstances, shows each one moving through its
states, edits one (Updating), injects a transient provider failure into
another (Failed, then recovered), deletes them all (Deleting, Deleted), and
ends with a summary table. Exits 0 only if every resource ended where
expected and visited the states the scenario requires.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any, TextIO

import attrs

from lifecycle.core.vocabulary import ConditionTypes
from lifecycle.providers.simcloud import CloudUnavailable, SimCloud
from lifecycle.providers.simcloud.scenarios.harness import database_manifest, simulated_environment
from lifecycle.testing import Environment, Step

__all__ = [
    "KIND", "RESOURCES", "Display", "Expectation", "run_demo", "scenario", "terminal_features",
]

KIND = "DatabaseInstance"


@attrs.frozen
class Expectation:
    """Where a demo resource must end, and the states it must have visited."""

    name: str
    parameters: dict[str, Any]
    must_visit: tuple[str, ...] = ()
    final: str = "deleted"


RESOURCES = (
    Expectation("orders", {"engine": "postgres", "storageGB": 20},
                ("creating", "ready", "updating", "deleting")),
    Expectation("users", {"engine": "postgres", "storageGB": 50},
                ("creating", "ready", "failed", "deleting")),
    Expectation("analytics", {"engine": "mysql", "storageGB": 100, "size": "large"},
                ("creating", "ready", "deleting")),
    Expectation("sessions", {"engine": "mysql", "storageGB": 10},
                ("creating", "ready", "deleting")),
)


def terminal_features(out: TextIO, environ: Mapping[str, str] | None = None) -> tuple[bool, bool]:
    """(live, colour) for ``out``: a live table needs a terminal that moves the cursor (not
    ``TERM=dumb``); colour also needs ``NO_COLOR`` unset or empty (https://no-color.org)."""
    env = os.environ if environ is None else environ
    live = bool(getattr(out, "isatty", lambda: False)()) and env.get("TERM") != "dumb"
    return live, live and not env.get("NO_COLOR")


class Display:
    """Shows progress: a live table on a terminal, one line per transition otherwise."""

    def __init__(self, env: Environment, out: TextIO, live: bool, colour: bool = True) -> None:
        self.env = env
        self.out = out
        self.live = live
        self.colour = colour
        self.paths: dict[str, list[str]] = {r.name: [] for r in RESOURCES}
        self.phase = ""
        self._drawn = 0

    def record(self, steps: list[Step]) -> None:
        """Note the states each step moved through; print transitions in plain mode."""
        for step in steps:
            path = self.paths.setdefault(step.name, [])
            after = step.after or ("deleted" if step.before else None)
            if after and (not path or path[-1] != after):
                path.append(after)
                if not self.live:
                    reason = self._reason(step.name)
                    print(f"  {step.name:<10} {step.before or '-':>9} -> {after:<9} {reason}",
                          file=self.out)

    def banner(self, text: str) -> None:
        """Announce a scenario phase."""
        self.phase = text
        if not self.live:
            print(f"== {text}", file=self.out)

    def draw(self) -> None:
        """Redraw the live table (terminal mode only)."""
        if not self.live:
            return
        lines = [f"lifecycle demo: {self.phase}", "",
                 f"  {'RESOURCE':<10} {'STATE':<10} {'READY':<8} {'SYNCED':<8} PATH"]
        for r in RESOURCES:
            state = self.env.state(KIND, r.name) or "-"
            ready = synced = "-"
            if self.env.exists(KIND, r.name):
                rc = self.env.condition(KIND, r.name, ConditionTypes.READY)
                sc = self.env.condition(KIND, r.name, ConditionTypes.SYNCED)
                ready = rc.status.value if rc else "-"
                synced = sc.status.value if sc else "-"
            path = " > ".join(self.paths.get(r.name, []))
            shown = f"{_paint(state):<19}" if self.colour else f"{state:<10}"
            lines.append(f"  {r.name:<10} {shown} {ready:<8} {synced:<8} {path}")
        if self._drawn:
            self.out.write(f"\x1b[{self._drawn}F\x1b[J")
        self.out.write("\n".join(lines) + "\n")
        self.out.flush()
        self._drawn = len(lines)

    def _reason(self, name: str) -> str:
        try:
            history = (self.env.get(KIND, name).get("status") or {}).get("history") or []
        except Exception:
            return "(finalizer removed)"
        return f"({history[-1]['reason']})" if history else ""


_COLOURS = {"ready": "32", "failed": "31", "deleting": "35", "deleted": "90",
            "creating": "33", "updating": "36"}


def _paint(state: str) -> str:
    return f"\x1b[{_COLOURS.get(state, '0')}m{state}\x1b[0m"


def run_demo(out: TextIO = sys.stdout, *, pace: float = 0.4, live: bool | None = None) -> bool:
    """Run the scenario; return True when every resource ended as expected.

    ``live`` (default: ``out`` is a terminal and ``TERM`` is not ``dumb``) redraws a table
    in place; its states are coloured unless ``NO_COLOR`` is set. Plain mode prints no
    escape sequence at all.
    """
    can_live, colour = terminal_features(out)
    live = can_live if live is None else live
    cloud = SimCloud(seed=7, create_polls=3, modify_polls=2, delete_polls=2)
    env, _ = simulated_environment(cloud=cloud)
    display = Display(env, out, live, colour=colour and live)

    def settle(until: Callable[[], bool], limit: float = 600.0) -> None:
        spent = 0.0
        while not until() and spent < limit:
            display.record(env.advance(1.0))
            spent += 1.0
            display.draw()
            if pace:
                time.sleep(pace)

    def all_in(state: str) -> Callable[[], bool]:
        return lambda: all(env.state(KIND, r.name) == state for r in RESOURCES)

    display.banner("applying four DatabaseInstances")
    for r in RESOURCES:
        env.apply(database_manifest(r.name, **r.parameters))
    settle(all_in("ready"))

    display.banner("editing orders: storage 20 -> 80 GB (Updating)")
    orders = env.get(KIND, "orders")
    orders["spec"]["forProvider"]["storageGB"] = 80
    env.apply(orders)
    settle(lambda: "updating" in display.paths["orders"] and all_in("ready")())

    display.banner("a transient provider outage while users grows to 60 GB "
                   "(Failed, then recovered)")
    cloud.fail_next("modify", CloudUnavailable("the provider is briefly unavailable"), times=2)
    users = env.get(KIND, "users")
    users["spec"]["forProvider"]["storageGB"] = 60
    env.apply(users)
    settle(lambda: "failed" in display.paths["users"] and all_in("ready")())

    display.banner("deleting everything (Deleting, Deleted)")
    for r in RESOURCES:
        env.delete(KIND, r.name)
    settle(lambda: not any(env.exists(KIND, r.name) for r in RESOURCES))
    display.draw()

    ok = True
    rows = []
    for r in RESOURCES:
        final = env.state(KIND, r.name) or "deleted"
        path = display.paths.get(r.name, [])
        missing = [s for s in r.must_visit if s not in path]
        good = final == r.final and not missing
        ok &= good
        rows.append((r.name, final, " > ".join(path), "ok" if good else f"MISSING {missing}"))
    leaked = sorted(cloud.instances())
    ok &= not leaked
    print("\nsummary", file=out)
    print(f"  {'RESOURCE':<10} {'FINAL':<8} {'RESULT':<8} PATH", file=out)
    for name, final, visited, verdict in rows:
        print(f"  {name:<10} {final:<8} {verdict:<8} {visited}", file=out)
    creates = cloud.count("create", ok=True)
    print(f"\n  external creates: {creates} for {len(RESOURCES)} resources; "
          f"left in the cloud: {len(leaked)}; reconciles: {env.steps.total}", file=out)
    print("demo " + ("succeeded" if ok else "FAILED"), file=out)
    return ok


def scenario(out: TextIO, options: Mapping[str, Any]) -> bool:
    """The ``managed`` demo scenario (``lifecycle demo``): options ``fast`` and ``plain``."""
    return run_demo(out, pace=0.0 if options.get("fast") else 0.4,
                    live=False if options.get("plain") else None)
