"""Operator throughput on the embedded API with a zero-latency simulated cloud.

For each N, a fresh operator gets N new DatabaseInstances and one worker
reconciles them from created to Ready (the cloud completes a create within
the request; waiting states are requeued at once). A DatabaseInstance takes
two reconciles: claim and create, then observe available (Ready, with the
engine version late-initialised into the spec and that generation observed).

The per-reconcile cost is the worker thread's CPU time over the reconciles it
ran, which is what one core spends; wall-clock figures are reported beside
it. ``flatness_ratio`` is the cost at the largest N over the cost at the
smallest.
"""

from __future__ import annotations

import gc
import json
import statistics
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.operator import build
from benchmarks.runner import Runner


def to_ready(n: int, *, workers: int = 1) -> dict[str, Any]:
    """One round: N created objects to Ready; the figures of that round."""
    operator = build(n)
    gc.collect()
    stats = Runner(operator.reconciler, workers=workers).settle(operator.keys)
    ready = sum(
        1 for obj in operator.api.list(operator.reconciler.kind.api_version,
                                       operator.reconciler.kind.kind)[0]
        if (obj.get("status") or {}).get("state") == "ready"
    )
    del operator
    gc.collect()
    return {
        "n": n,
        "ready": ready,
        "errors": stats.errors,
        "reconciles": stats.reconciles,
        "reconciles_per_object": stats.reconciles / n if n else 0.0,
        "seconds_to_ready": stats.wall_seconds,
        "cpu_seconds": stats.cpu_seconds,
        "cpu_us_per_reconcile": stats.cpu_us_per_reconcile,
        "wall_us_per_reconcile": stats.wall_us_per_reconcile,
        "reconciles_per_cpu_second": stats.per_cpu_second,
        "reconciles_per_second_wall": stats.per_second,
    }


def _summary(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    def spread(key: str) -> dict[str, float]:
        values = [r[key] for r in rounds]
        return {"median": statistics.median(values), "min": min(values), "max": max(values)}

    return {
        "n": rounds[0]["n"],
        "rounds": len(rounds),
        "all_ready": all(r["ready"] == r["n"] for r in rounds),
        "errors": sum(r["errors"] for r in rounds),
        "reconciles_per_object": statistics.median(r["reconciles_per_object"] for r in rounds),
        "seconds_to_ready": spread("seconds_to_ready"),
        "cpu_us_per_reconcile": spread("cpu_us_per_reconcile"),
        "wall_us_per_reconcile": spread("wall_us_per_reconcile"),
        "reconciles_per_cpu_second": spread("reconciles_per_cpu_second"),
        "reconciles_per_second_wall": spread("reconciles_per_second_wall"),
    }


def run(sizes: Sequence[int] = (1_000, 10_000, 100_000),
        rounds: Sequence[int] = (9, 3, 1)) -> dict[str, Any]:
    """Every size for its number of rounds; the headline rate and the flatness ratio."""
    if len(sizes) != len(rounds) or not sizes:
        raise ValueError("sizes and rounds must be non-empty and of equal length")
    to_ready(min(sizes))  # a warm-up round, not counted: first calls, caches, the heap's arenas
    results = [_summary([to_ready(n) for _ in range(r)]) for n, r in zip(sizes, rounds,
                                                                        strict=True)]
    first, last = results[0], results[-1]
    return {
        "sizes": results,
        "reconciles_per_second": first["reconciles_per_cpu_second"]["median"],
        "reconciles_per_second_wall": first["reconciles_per_second_wall"]["median"],
        "flatness_ratio": (last["cpu_us_per_reconcile"]["median"]
                           / first["cpu_us_per_reconcile"]["median"]),
        "flatness_ratio_wall": (last["wall_us_per_reconcile"]["median"]
                                / first["wall_us_per_reconcile"]["median"]),
        "flatness_sizes": [first["n"], last["n"]],
    }


def in_fresh_process(sizes: Sequence[int], rounds: Sequence[int]) -> dict[str, Any]:
    """:func:`run` in a new interpreter, so that nothing a suite ran before it weighs on it.

    Every full garbage collection of a round traverses every object the
    process holds. In the process that just ran the hot-path benchmark, that
    includes what it left behind (the modules of python-statemachine and
    pytransitions, and the garbage of a million small transitions), which
    charged each reconcile a fifth more CPU time than the same rounds in a
    fresh interpreter; the operator itself holds none of it.
    """
    root = Path(__file__).resolve().parent.parent
    asked = json.dumps({"sizes": list(sizes), "rounds": list(rounds)})
    done = subprocess.run([sys.executable, "-m", "benchmarks.throughput", asked], cwd=root,
                          capture_output=True, text=True, check=False, timeout=7200)
    if done.returncode != 0:
        raise RuntimeError(f"the throughput benchmark failed: {done.stderr.strip()[-500:]}")
    return json.loads(done.stdout)


if __name__ == "__main__":
    if len(sys.argv) > 1:
        asked = json.loads(sys.argv[1])
        print(json.dumps(run(asked["sizes"], asked["rounds"])))
    else:
        print(json.dumps(run(), indent=2))
