"""Resident memory the driver's informer holds per object, against the object's JSON size.

An embedded API server runs in a process of its own with DatabaseInstances
shaped as the operator leaves them (Ready: status, conditions, finalizer,
journal annotations), ``n`` of them in a namespace of their own. For each
``n``, a fresh interpreter builds the driver's informer for that namespace
(:class:`~lifecycle.driver.cluster.KubeCluster` list-and-watch into
:class:`~lifecycle.driver.informer.Informer`), and reads its resident set
size from ``/proc/self/statm`` before the informer starts and once it has
synced (after a garbage collection, so only what the informer keeps counts,
not the list it decoded). Everything imported and warmed up before the first
reading is not counted.

``ratio`` is the RSS growth per object over the mean size of the object's
compact JSON (as the server serves it, no spaces): how many times the
object's own size the operator pays to keep it. A store whose cost per
object grows with ``n`` (a table resized, fragmentation) shows as a ratio
that rises from 1,000 to 10,000.

Run: ``python -m benchmarks.informer_memory [N ...]`` (default 1000 5000 10000).
"""

from __future__ import annotations

import gc
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

SIZES = (1_000, 5_000, 10_000)
ROOT = Path(__file__).resolve().parent.parent


def ready_template() -> dict[str, Any]:
    """One DatabaseInstance as the engine leaves it once Ready (run on an embedded API)."""
    from benchmarks.operator import build
    from benchmarks.runner import Runner

    operator = build(1)
    Runner(operator.reconciler).settle(operator.keys)
    kind = operator.reconciler.kind
    (obj,), _ = operator.api.list(kind.api_version, kind.kind)
    return json.loads(json.dumps(obj))


#: Objects made Ready per second in the measured set: their timestamps (to the second)
#: differ as in an operator's run, so no two far-apart objects look alike.
READY_PER_SECOND = 200


def _object(template: dict[str, Any], namespace: str, index: int) -> dict[str, Any]:
    """The template renamed (its name, Secret reference and journal follow the new name)
    and moved in time: every timestamp ``index / READY_PER_SECOND`` seconds later."""
    from datetime import datetime, timedelta

    name = f"db-{index:06d}"
    text = json.dumps(template).replace(template["metadata"]["name"], name)
    for stamp in set(re.findall(r'"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)"', text)):
        moved = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ") + timedelta(
            seconds=index // READY_PER_SECOND)
        text = text.replace(stamp, moved.strftime("%Y-%m-%dT%H:%M:%SZ"))
    obj = json.loads(text)
    meta = obj["metadata"]
    for field in ("uid", "resourceVersion", "creationTimestamp", "generation",
                  "managedFields"):
        meta.pop(field, None)
    meta["namespace"] = namespace
    return obj


def serve(sizes: list[int]) -> int:
    """The server process: ``sizes`` namespaces of Ready objects; prints its URL."""
    from lifecycle.machines.database import DatabaseInstance
    from lifecycle.sim.apiserver import EmbeddedAPI
    from lifecycle.sim.embedded import register_kinds
    from lifecycle.sim.http import APIServerHTTP

    template = ready_template()
    api = EmbeddedAPI()
    register_kinds(api, [DatabaseInstance])
    kind = DatabaseInstance
    for n in sizes:
        namespace = f"n{n}"
        api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        for index in range(n):
            obj = _object(template, namespace, index)
            made = api.create(obj)
            if obj.get("status"):
                api.replace_status({**made, "status": obj["status"]})
    face = APIServerHTTP(api).start()
    print(json.dumps({"url": face.url, "api_version": kind.api_version, "kind": kind.kind}),
          flush=True)
    sys.stdin.read()  # until the parent closes it
    face.stop()
    return 0


def _rss() -> int:
    with open("/proc/self/statm", encoding="ascii") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def measure(url: str, api_version: str, kind: str, n: int) -> dict[str, Any]:
    """In this (fresh) process: the informer's RSS growth for namespace ``n{n}``."""
    from lifecycle.driver.cache import _Ignore
    from lifecycle.driver.cluster import KubeCluster, api_client
    from lifecycle.driver.informer import Informer, InformerOptions
    from lifecycle.machines.database import DatabaseInstance

    cluster = KubeCluster(api_client(host=url), [DatabaseInstance])
    options = InformerOptions(resync=0)
    # Warm up every code path (and the interpreter's caches) on a tiny namespace first.
    warm = Informer("warm", cluster.list_watcher(api_version, kind, "n1"), _Ignore(),
                    options).start()
    warm.wait_synced(60)
    warm.stop()
    items, _ = cluster.list(api_version, kind, f"n{n}")
    json_bytes = sum(len(json.dumps(o, separators=(",", ":"))) for o in items) / len(items)
    del items
    gc.collect()
    time.sleep(0.2)
    before = _rss()
    informer = Informer("measured", cluster.list_watcher(api_version, kind, f"n{n}"),
                        _Ignore(), options).start()
    if not informer.wait_synced(300):
        raise RuntimeError("the informer did not sync")
    gc.collect()
    time.sleep(0.2)
    after = _rss()
    held = len(informer)
    informer.stop()
    if held != n:
        raise RuntimeError(f"the informer holds {held} objects, expected {n}")
    per_object = (after - before) / n
    return {"n": n, "json_bytes_per_object": json_bytes, "rss_bytes_per_object": per_object,
            "ratio": per_object / json_bytes}


def run(sizes: tuple[int, ...] = SIZES) -> dict[str, Any]:
    """Start the server, measure each size in a fresh interpreter, return the rows."""
    server = subprocess.Popen([sys.executable, "-m", "benchmarks.informer_memory", "serve",
                               "1", *map(str, sizes)], cwd=ROOT, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        where = json.loads(server.stdout.readline())
        rows = []
        for n in sizes:
            done = subprocess.run(
                [sys.executable, "-m", "benchmarks.informer_memory", "measure", where["url"],
                 where["api_version"], where["kind"], str(n)],
                cwd=ROOT, capture_output=True, text=True, check=False, timeout=1800)
            if done.returncode != 0:
                raise RuntimeError(f"measuring n={n} failed: {done.stderr.strip()[-500:]}")
            rows.append(json.loads(done.stdout))
    finally:
        if server.stdin is not None:
            server.stdin.close()
        server.wait(timeout=60)
    return {"rows": rows, "max_ratio": max(r["ratio"] for r in rows)}


def main(argv: list[str]) -> int:
    """``serve SIZES...`` | ``measure URL API_VERSION KIND N`` | ``[N ...]``."""
    if argv[:1] == ["serve"]:
        return serve([int(a) for a in argv[1:]])
    if argv[:1] == ["measure"]:
        print(json.dumps(measure(argv[1], argv[2], argv[3], int(argv[4]))))
        return 0
    result = run(tuple(int(a) for a in argv) or SIZES)
    for row in result["rows"]:
        print(f"n={row['n']:>6}: {row['rss_bytes_per_object']:>8.0f} B RSS per object, "
              f"JSON {row['json_bytes_per_object']:.0f} B, ratio {row['ratio']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
