"""Memory per managed resource held by the operator, against the object's JSON size.

The objects are brought to Ready first; then, under ``tracemalloc``, the
operator-side state for each is built as a running operator holds it: the
object in the informer cache (decoded from its JSON text, as off a watch
stream) and its key waiting in the work queue for the next Ready poll. The
reconciler keeps no per-object state: the machine state lives in the cached
object's status and the compiled machine table is shared by the whole kind.

``memory_ratio`` divides the traced bytes per resource by the mean size of
the object's compact JSON (no spaces), for the interning cache the benchmark
runner uses; ``plain_ratio`` is the same for plain ``json.loads`` dicts.
"""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import tracemalloc
from pathlib import Path
from typing import Any

from benchmarks.cache import ObjectCache
from benchmarks.operator import build
from benchmarks.runner import Runner, WorkQueue


def _held(texts: list[str], *, intern: bool) -> tuple[int, ObjectCache, WorkQueue]:
    """Traced bytes of a cache and a queue holding every object (texts not counted)."""
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        cache = ObjectCache(intern=intern)
        queue = WorkQueue()
        for text in texts:
            key = cache.apply("ADDED", text)
            queue.add_after(key, 30.0)
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    return held, cache, queue


def run(n: int = 2_000) -> dict[str, Any]:
    """Bytes per resource with and without interning, and their ratio to JSON size."""
    operator = build(n)
    Runner(operator.reconciler).settle(operator.keys)
    kind = operator.reconciler.kind
    objects, _ = operator.api.list(kind.api_version, kind.kind)
    texts = [json.dumps(obj, separators=(",", ":")) for obj in objects]
    del objects, operator
    json_bytes = sum(len(t.encode()) for t in texts) / len(texts)
    plain, cache, _ = _held(texts, intern=False)
    del cache
    interned, cache, _ = _held(texts, intern=True)
    if len(cache) != n:
        raise RuntimeError(f"cache holds {len(cache)} objects, expected {n}")
    return {
        "n": n,
        "json_bytes_per_object": json_bytes,
        "bytes_per_resource": interned / n,
        "plain_bytes_per_resource": plain / n,
        "memory_ratio": interned / n / json_bytes,
        "plain_ratio": plain / n / json_bytes,
    }


def in_fresh_process(n: int) -> dict[str, Any]:
    """:func:`run` in a new interpreter, so that nothing a suite ran before it is counted.

    In the process that just ran the other benchmarks, memory they left
    behind (the interning table grown from their objects, freed blocks reused
    at other sizes) moves the figure by a tenth or more; a fresh interpreter
    measures only what the operator holds per resource.
    """
    root = Path(__file__).resolve().parent.parent
    done = subprocess.run([sys.executable, "-m", "benchmarks.memory", str(n)], cwd=root,
                          capture_output=True, text=True, check=False, timeout=1800)
    if done.returncode != 0:
        raise RuntimeError(f"the memory benchmark failed: {done.stderr.strip()[-500:]}")
    return json.loads(done.stdout)


if __name__ == "__main__":
    print(json.dumps(run(int(sys.argv[1]) if len(sys.argv) > 1 else 2_000), indent=2))
