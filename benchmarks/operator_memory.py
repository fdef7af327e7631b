"""Where the lifecycle operator's memory goes per object, end to end.

An embedded API server runs in a process of its own
(:class:`~benchmarks.e2e_servers.EmbeddedServer`); the operator is the
``lifecycle run`` command line (the kind as shipped, DatabaseInstance on the
benchmark's simulated cloud) in a child process this module starts, which
also answers two commands on its standard input: ``rss`` (its resident set
size after a garbage collection) and ``snap PATH`` (a :mod:`tracemalloc`
snapshot dumped to ``PATH``, when started with ``--trace``). The benchmark
creates ``n`` DatabaseInstances, waits until all are Ready and the operator
has settled, and reports the RSS growth per object over the object's JSON
size (as the server serves it) and, with ``--trace``, the top allocation
sites (file:line) that grew between the synced and the settled snapshots.

Run: ``python -m benchmarks.operator_memory [--trace] [--top K] N [N ...]``.
"""

from __future__ import annotations

import gc
import json
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

#: Frames kept per traced allocation (``--frames K`` sets it; callers show with K > 1).
SNAPSHOT_FRAMES = 1


def _child(argv: list[str]) -> int:
    """The operator process: ``lifecycle run ARGS`` plus the ``rss``/``snap`` commands."""
    import tracemalloc

    from benchmarks.e2e_servers import rss_bytes

    trace = argv[:1] == ["--trace"]
    if trace:
        frames = int(argv[1])
        argv = argv[2:]
    import os

    def answer(found: dict[str, Any]) -> None:
        sys.stdout.write("@" + json.dumps(found) + "\n")
        sys.stdout.flush()

    def serve() -> None:
        for line in sys.stdin:
            command, _, arg = line.strip().partition(" ")
            gc.collect()
            if command == "trim":  # what glibc's malloc holds free, handed back (diagnostic)
                import ctypes
                ctypes.CDLL("libc.so.6").malloc_trim(0)
            if command == "snap" and trace:
                if not tracemalloc.is_tracing():  # the first snapshot starts tracing
                    tracemalloc.start(frames)
                tracemalloc.take_snapshot().dump(arg)
            traced = tracemalloc.get_traced_memory() if trace else (None, None)
            answer({"rss": rss_bytes(os.getpid()), "traced": traced[0], "peak": traced[1]})

    threading.Thread(target=serve, daemon=True).start()
    from lifecycle.cli import main as lifecycle_main

    return int(lifecycle_main(argv) or 0)


def _ask(process: Any, command: str) -> dict[str, Any]:
    assert process.proc.stdin is not None
    process.proc.stdin.write(command + "\n")
    process.proc.stdin.flush()
    line = process.line(600)
    while not line.startswith("@"):
        line = process.line(600)
    return json.loads(line[1:])


def measure(n: int, *, trace: bool, top: int, workdir: Path,
            frames: int = SNAPSHOT_FRAMES) -> dict[str, Any]:
    """One run at ``n`` objects: RSS growth per object, and the top growth sites if traced."""
    import tracemalloc

    from benchmarks.e2e import GROUP, PLURAL, VERSION, _manifest, _wait_probe, is_ready, settle
    from benchmarks.e2e_servers import Client, EmbeddedServer, Process, Tracker

    server = EmbeddedServer("database", workdir)
    namespace = f"mem-{n}"
    client = Client(server.endpoint)
    client.ensure_namespace(namespace)
    base = f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/{PLURAL}"
    tracker = Tracker(server.endpoint, base, is_ready).start()
    args = ["run", "--kinds", "DatabaseInstance", "--kubeconfig",
            str(server.operator_kubeconfig("lifecycle")), "--namespace", namespace,
            "--probe-address", "127.0.0.1:0", "--connector", "benchmarks.e2e:bench_connector"]
    traced = ["--trace", str(frames)] if trace else []
    operator = Process("benchmarks.operator_memory", "child", *traced, *args, stdin=True,
                       log=workdir / f"operator-{n}.log")
    try:
        _wait_probe(operator, 120)
        time.sleep(0.5)
        before = _ask(operator, f"snap {workdir}/before-{n}.snap")
        for i in range(n):
            client.call("POST", base, _manifest(namespace, f"db-{i:06d}"))
        if not tracker.wait(lambda t: len(t.ready_at) >= n, 60 + 0.2 * n * (3 if trace else 1)):
            raise SystemExit(f"only {len(tracker.ready_at)} of {n} Ready")
        settle(lambda: server.counts("lifecycle"), 120)
        after = _ask(operator, f"snap {workdir}/after-{n}.snap")
        trimmed = _ask(operator, "trim")
        sizes = [len(json.dumps(o, separators=(",", ":"))) for o in tracker.objects.values()]
        size = sum(sizes) / len(sizes)
        growth = (after["rss"] - before["rss"]) / n
        out: dict[str, Any] = {"n": n, "object_json_bytes": size,
                               "rss_growth_bytes_per_object": growth,
                               "memory_ratio_json": growth / size,
                               "rss_growth_after_malloc_trim_bytes_per_object":
                                   (trimmed["rss"] - before["rss"]) / n}
        if trace:
            out["traced_growth_bytes_per_object"] = (after["traced"] - before["traced"]) / n
            out["traced_peak_growth_bytes_per_object"] = (after["peak"] - before["traced"]) / n
            old = tracemalloc.Snapshot.load(f"{workdir}/before-{n}.snap")
            new = tracemalloc.Snapshot.load(f"{workdir}/after-{n}.snap")
            group = "traceback" if frames > 1 else "lineno"
            out["top"] = [
                {"where": " <- ".join(f"{Path(f.filename).name}:{f.lineno}"
                                      for f in reversed(s.traceback)),
                 "bytes_per_object": s.size_diff / n, "blocks_per_object": s.count_diff / n}
                for s in new.compare_to(old, group)[:top]]
        return out
    finally:
        operator.stop()
        tracker.stop()
        server.close()


def main(argv: list[str]) -> int:
    """``[--trace] [--top K] [--frames F] N [N ...]``: one run per N, printed as JSON lines."""
    if argv[:1] == ["child"]:
        return _child(argv[1:])
    trace = "--trace" in argv
    argv = [a for a in argv if a != "--trace"]
    options = {"--top": 25, "--frames": SNAPSHOT_FRAMES}
    for flag in options:
        if flag in argv:
            at = argv.index(flag)
            options[flag] = int(argv[at + 1])
            del argv[at:at + 2]
    top, frames = options["--top"], options["--frames"]
    sizes = [int(a) for a in argv] or [1000, 5000]
    with tempfile.TemporaryDirectory(prefix="opmem-") as tmp:
        for n in sizes:
            found = measure(n, trace=trace, top=top, workdir=Path(tmp), frames=frames)
            rows = found.pop("top", [])
            print(json.dumps(found), flush=True)
            for row in rows:
                print(f"  {row['bytes_per_object']:9.1f} B/obj {row['blocks_per_object']:6.2f} "
                      f"blk/obj  {row['where']}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
