"""Latency-bound scaling: a cloud whose every call takes 50 ms, with 1 to 64 workers.

The objects are first brought to Ready on a zero-latency cloud; then the
cloud's latency is set and every worker polls Ready objects back to back for
a fixed time. A Ready poll makes exactly one cloud call (describe) and
writes nothing, so a worker can do at most ``1 / latency`` reconciles per
second and the ideal is ``workers / latency``. ``cloud_calls_per_reconcile``
is reported to show the one-call premise held. The object count is four
times the largest worker count, so no worker ever waits for a key.
"""

from __future__ import annotations

import gc
from collections.abc import Sequence
from typing import Any

from benchmarks.operator import build
from benchmarks.runner import Runner

LATENCY = 0.050


def run(workers: Sequence[int] = (1, 4, 16, 64), *, latency: float = LATENCY,
        duration: float = 5.0, objects: int | None = None) -> dict[str, Any]:
    """Achieved against ideal throughput for each worker count, in one operator."""
    if not workers or min(workers) < 1:
        raise ValueError("workers must be positive")
    n = objects if objects is not None else 4 * max(workers)
    operator = build(n)
    Runner(operator.reconciler).settle(operator.keys)
    operator.cloud.set_faults(latency=latency)
    gc.collect()
    rows = []
    for count in workers:
        calls_before = operator.cloud.calls.total
        stats = Runner(operator.reconciler, workers=count).poll(operator.keys, duration)
        calls = operator.cloud.calls.total - calls_before
        ideal = count / latency
        achieved = stats.reconciles / stats.wall_seconds
        rows.append({
            "workers": count,
            "reconciles": stats.reconciles,
            "errors": stats.errors,
            "seconds": stats.wall_seconds,
            "achieved_per_second": achieved,
            "ideal_per_second": ideal,
            "efficiency": achieved / ideal,
            "cloud_calls_per_reconcile": calls / stats.reconciles if stats.reconciles else 0.0,
            "cpu_us_per_reconcile": stats.cpu_us_per_reconcile,
        })
    by_workers = {row["workers"]: row for row in rows}
    out: dict[str, Any] = {"latency_seconds": latency, "objects": n, "duration": duration,
                           "rows": rows}
    for count, row in by_workers.items():
        out[f"latency_efficiency_{count}"] = row["efficiency"]
    return out


if __name__ == "__main__":
    import json

    print(json.dumps(run(), indent=2))
