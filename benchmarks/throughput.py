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
import statistics
from collections.abc import Sequence
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


if __name__ == "__main__":
    import json

    print(json.dumps(run(), indent=2))
