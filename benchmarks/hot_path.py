"""Hot path per reconcile against python-statemachine build-and-send, in one run.

The hot path is :func:`lifecycle.core.plan.plan`: restore the stored state, choose
the event, fire it through the compiled table, compute conditions and status,
and pick the requeue result, with no I/O. The baselines, measured in the same
process one after another: building a python-statemachine instance of the same
class at the stored state and sending the same event (what a naive engine
would do per reconcile), the same with pytransitions (a ``transitions.Machine``
of the same states and transitions built per reconcile, and one shared machine
whose model is reset to the stored state), and a plain dict lookup.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from lifecycle.core.decide import Facts
from lifecycle.core.plan import plan
from lifecycle.core.values import Observation
from lifecycle.machines.managed import ManagedResourceMachine

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


def _transitions_spec() -> tuple[list[str], list[dict[str, Any]]]:
    """The states and transitions of the managed machine in pytransitions' terms."""
    table = ManagedResourceMachine.table()
    host = ManagedResourceMachine.guard_host()

    def guard(name: str) -> Callable[..., bool]:
        return lambda facts=None, **_: bool(getattr(host, name)(facts))

    transitions = [
        {"trigger": t.event, "source": t.source, "dest": t.target,
         "conditions": [guard(g) for g in t.guards], "unless": [guard(g) for g in t.unless]}
        for t in table.transitions
    ]
    return list(table.states), transitions


_STATES, _TRANSITIONS = _transitions_spec()


class _Model:
    """A bare model object pytransitions attaches its state and triggers to."""


def transitions_build_and_send() -> Any:
    """Build a pytransitions machine at the stored state and trigger the event."""
    from transitions import Machine

    model = _Model()
    Machine(model=model, states=_STATES, transitions=_TRANSITIONS, initial="creating",
            auto_transitions=False)
    model.trigger("available", facts=Facts(state="creating"))  # type: ignore[attr-defined]
    return model


_SHARED_MODEL = _Model()
_SHARED_MACHINE: Any = None


def transitions_reuse() -> Any:
    """One shared pytransitions machine: reset the model to the stored state and trigger."""
    global _SHARED_MACHINE
    if _SHARED_MACHINE is None:
        from transitions import Machine

        _SHARED_MACHINE = Machine(model=_SHARED_MODEL, states=_STATES,
                                  transitions=_TRANSITIONS, initial="creating",
                                  auto_transitions=False)
    _SHARED_MACHINE.set_state("creating", model=_SHARED_MODEL)
    _SHARED_MODEL.trigger("available", facts=Facts(state="creating"))  # type: ignore[attr-defined]
    return _SHARED_MODEL


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


def run(repeat: int = 7, budget: float = 0.3) -> dict[str, Any]:
    """Measure all of them in one run and report the speed-up of the hot path.

    ``budget`` is roughly the seconds one round of each may take; rounds
    alternate between the contenders so a burst of machine noise hits all.
    """
    contenders: dict[str, Callable[[], Any]] = {
        "hot_path": hot_path,
        "statemachine_build_send": statemachine_build_and_send,
        "transitions_build_send": transitions_build_and_send,
        "transitions_reuse": transitions_reuse,
        "dict_lookup": dict_lookup,
    }
    rounds: dict[str, list[dict[str, float]]] = {name: [] for name in contenders}
    for _ in range(repeat):
        for name, fn in contenders.items():
            rounds[name].append(measure(fn, repeat=1, budget=budget))
    out: dict[str, Any] = {}
    for name, results in rounds.items():
        medians = [r["median_us"] for r in results]
        out[name] = {"median_us": statistics.median(medians), "min_us": min(medians),
                     "max_us": max(medians), "rounds": len(medians),
                     "calls_per_round": results[0]["calls_per_round"]}
    hot = out["hot_path"]["median_us"]
    out.update({
        "hot_path_us": hot,
        "statemachine_build_send_us": out["statemachine_build_send"]["median_us"],
        "transitions_build_send_us": out["transitions_build_send"]["median_us"],
        "transitions_reuse_us": out["transitions_reuse"]["median_us"],
        "dict_lookup_us": out["dict_lookup"]["median_us"],
        "hot_path_speedup": out["statemachine_build_send"]["median_us"] / hot,
        "transitions_speedup": out["transitions_build_send"]["median_us"] / hot,
    })
    return out


if __name__ == "__main__":
    import json

    print(json.dumps(run(), indent=2))
