"""Hot path per reconcile against python-statemachine build-and-send, in one run.

The hot path is :func:`lifecycle.plan.plan`: restore the stored state, choose
the event, fire it through the compiled table, compute conditions and status,
and pick the requeue result, with no I/O. The baselines, measured in the same
process one after another: building a python-statemachine instance of the same
class at the stored state and sending the same event (what a naive engine
would do per reconcile), and a plain dict lookup.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from lifecycle.decide import Facts
from lifecycle.plan import plan
from lifecycle.values import Observation
from machines.managed import ManagedResourceMachine

NOW = datetime(2026, 1, 1, tzinfo=UTC)
OBJ: dict[str, Any] = {
    "metadata": {"name": "db", "namespace": "default", "uid": "0f5c2d1e-uid", "generation": 2},
    "status": {"state": "creating", "observedGeneration": 1, "conditions": [],
               "stateSince": "2026-01-01T00:00:00Z", "history": []},
}
OBSERVED = Observation(exists=True, up_to_date=True)


def hot_path() -> Any:
    """One planned reconcile: Creating observed available -> Ready."""
    return plan(ManagedResourceMachine, OBJ, observation=OBSERVED, now=NOW)


class _Effects:
    def create(self) -> None: ...
    def update(self) -> None: ...
    def delete(self) -> None: ...


def statemachine_build_and_send() -> Any:
    """Build a python-statemachine instance at the stored state and send the event."""
    machine = ManagedResourceMachine(start_value="creating")
    machine.send("available", facts=Facts(state="creating"), effects=_Effects())
    return machine


_TABLE = {("creating", "available"): "ready"}


def dict_lookup() -> Any:
    """The floor: one dict lookup of (state, event)."""
    return _TABLE[("creating", "available")]


def measure(fn: Callable[[], Any], *, repeat: int = 7, budget: float = 0.3) -> dict[str, float]:
    """Median and spread (min, max) of microseconds per call over ``repeat`` rounds."""
    fn()
    calls = 1
    while True:
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        if time.perf_counter() - start > budget / 10 or calls > 1_000_000:
            break
        calls *= 2
    rounds = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        rounds.append((time.perf_counter() - start) / calls * 1e6)
    return {"median_us": statistics.median(rounds), "min_us": min(rounds),
            "max_us": max(rounds), "calls_per_round": calls}


def run(repeat: int = 7) -> dict[str, Any]:
    """Measure the three in one run and report the speed-up of the hot path."""
    hot = measure(hot_path, repeat=repeat)
    build = measure(statemachine_build_and_send, repeat=repeat)
    lookup = measure(dict_lookup, repeat=repeat)
    return {
        "hot_path": hot,
        "statemachine_build_send": build,
        "dict_lookup": lookup,
        "hot_path_us": hot["median_us"],
        "statemachine_build_send_us": build["median_us"],
        "hot_path_speedup": build["median_us"] / hot["median_us"],
    }


if __name__ == "__main__":
    import json

    print(json.dumps(run(), indent=2))
