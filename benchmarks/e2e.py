"""End to end, beside the peers: the kinds as shipped, over HTTP, in processes of their own.

The API server is the embedded one (a fresh process per round, counting at
its HTTP face) or a real kube-apiserver (``--server envtest`` starts one,
``--kubeconfig`` names a running one; calls are counted from its audit log
per user, each operator running as a ServiceAccount of its own): see
:mod:`benchmarks.e2e_servers`. The lifecycle operator is the ``lifecycle``
command line itself, ``lifecycle run --kinds DatabaseInstance --connector
benchmarks.e2e:bench_connector --kubeconfig FILE`` (the kind as shipped, its
own poll interval); the kopf operator of :mod:`benchmarks.kopf_operator`
does the same work and polls at the same interval. Both drive the same
simulated cloud (operations complete within the request). Rounds alternate
which operator goes first, so a change in machine load hits both alike.

Per round and operator, in phases:

* **to Ready**: N objects created by the benchmark; API calls (by verb and
  resource) when every object shows Ready and once the operator has settled
  (no write for a second), operator CPU from sync to settled, the API
  server's CPU when known, wall time from the first create to the last Ready;
* **steady state**: calls per Ready object per poll interval over
  ``steady_polls`` intervals;
* **delete**: all N deleted, calls per object until they are gone and settled;
* **connection resets**: resets, refusals and unanswered closes met by the
  operator (:mod:`benchmarks.e2e_netcount`) and by the benchmark's client.

A further round per operator at ``memory_n`` objects measures the operator's
RSS (``/proc``) when synced and once all are Ready: growth per object over
the object's JSON size. ``peers`` with ``provider-sql`` adds the PostgreSQL
workload of :mod:`benchmarks.e2e_pg`. :func:`run` returns medians over rounds,
per-request breakdowns and the headline keys; ``lifecycle bench --e2e``
prints them.
"""

from __future__ import annotations

import base64
import json
import statistics
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import attrs

from benchmarks import e2e_netcount
from benchmarks.e2e_servers import (
    OBSERVER_HEADER,
    WRITES,
    BenchError,
    Client,
    EmbeddedServer,
    Process,
    RealServer,
    Tracker,
    classify,
    cpu_seconds,
    load_average,
)

__all__ = ["OBSERVER_HEADER", "BenchError", "Config", "classify", "cpu_seconds", "load_average",
           "plot", "run", "summary"]

GROUP, VERSION, PLURAL = "db.lifecycle.dev", "v1alpha1", "databaseinstances"
OPERATORS = ("lifecycle", "kopf")
PEERS = ("kopf", "provider-sql")
SERVERS = ("embedded", "envtest", "kubeconfig")
#: How each lifecycle variant runs: ``lifecycle`` is the ``lifecycle run`` command line;
#: ``lifecycle-direct`` the manager without the cached reader, ``lifecycle-uncached-secrets``
#: with it but reading Secrets from the server (both wired in process, for comparison).
VARIANTS = ("lifecycle", "lifecycle-direct", "lifecycle-uncached-secrets")


@attrs.frozen
class Config:
    """How big a run is and where it runs.

    ``steady_polls`` 0 skips the steady state; ``memory_n`` 0 skips the
    memory round. ``server`` is ``embedded``, ``envtest`` (started for the
    run) or ``kubeconfig`` (``kubeconfig`` and ``audit_log`` name a running
    server and its audit log). ``peers`` with ``provider-sql`` runs the
    PostgreSQL workload (``pg_n`` objects of each kind).
    """

    n: int = 200
    rounds: int = 5
    steady_polls: int = 2
    timeout: float = 300.0
    operators: tuple[str, ...] = OPERATORS
    server: str = "embedded"
    kubeconfig: str | None = None
    audit_log: str | None = None
    memory_n: int = 5000
    peers: tuple[str, ...] = ()
    pg_n: int = 50


def poll_interval() -> float:
    """The shipped DatabaseInstance's Ready poll interval, which every operator uses."""
    from lifecycle.machines.database import DatabaseInstance

    return float(DatabaseInstance.machine.timing.poll)


def bench_cloud() -> Any:
    """The simulated cloud every operator uses: operations complete within the request."""
    from lifecycle.providers.simcloud import SimCloud

    return SimCloud(seed=0, create_polls=0, modify_polls=0, delete_polls=0)


def bench_connector() -> Any:
    """The DatabaseInstance connector on :func:`bench_cloud` (``lifecycle run --connector``)."""
    from lifecycle.providers.simcloud import DatabaseConnector

    return DatabaseConnector(bench_cloud())


def is_ready(obj: dict[str, Any]) -> bool:
    """Whether an object's status carries the condition Ready=True."""
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(isinstance(c, dict) and c.get("type") == "Ready" and c.get("status") == "True"
               for c in conditions)


# ---------------------------------------------------------------- operators
def _variant(kubeconfig: str, namespace: str, variant: str) -> int:
    """A lifecycle variant wired in process (two workers), printing ``ready`` once synced."""
    import signal

    from prometheus_client import disable_created_metrics

    from lifecycle.driver.cache import cached_manager
    from lifecycle.driver.cluster import KubeCluster, api_client
    from lifecycle.driver.manager import Manager, ManagerOptions
    from lifecycle.machines.database import DatabaseInstance

    disable_created_metrics()
    cluster = KubeCluster(api_client(kubeconfig=kubeconfig), [DatabaseInstance])
    pairs = [(DatabaseInstance, bench_connector())]
    options = ManagerOptions(workers=2, namespace=namespace)
    if variant == "lifecycle-direct":
        manager = Manager(cluster, pairs, options)
    else:
        manager = cached_manager(cluster, pairs, options,
                                 secrets=variant != "lifecycle-uncached-secrets")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    manager.start()
    manager.wait_synced()
    print("ready", flush=True)
    stop.wait()
    manager.stop()
    return 0


@attrs.define
class Operator:
    """A started operator process and the file its connection counts go to."""

    process: Process
    stats: Path

    def resets(self) -> dict[str, int]:
        """Stop the process and read what it counted."""
        self.process.stop()
        return e2e_netcount.read(str(self.stats))


def _wait_probe(process: Process, timeout: float) -> None:
    line = process.line(timeout)
    while not line.startswith("probes: "):
        line = process.line(timeout)
    url = line.split(" ", 1)[1] + "/readyz"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as answer:
                if answer.status == 200:
                    return
        except OSError:
            pass
        if not process.alive():
            break
        time.sleep(0.1)
    process.stop()
    raise BenchError(f"lifecycle run did not become ready: {process.last_error()}")


def start_operator(which: str, kubeconfig: Path, workdir: Path, tag: str, namespace: str,
                   kinds: tuple[str, ...] = ("DatabaseInstance",),
                   connector: str | None = "benchmarks.e2e:bench_connector",
                   timeout: float = 120.0) -> Operator:
    """Start operator ``which`` against ``kubeconfig``, watching ``namespace`` only (a
    shared server may hold other objects of the kinds), and wait until it has synced."""
    stats, log = workdir / f"{tag}.stats.json", workdir / f"{tag}.log"
    if which == "lifecycle":
        args = ["run", "--kinds", *kinds, "--kubeconfig", str(kubeconfig),
                "--namespace", namespace, "--probe-address", "127.0.0.1:0"]
        process = Process("benchmarks.e2e_netcount", str(stats), "--", *args,
                          *(("--connector", connector) if connector else ()), log=log)
        _wait_probe(process, timeout)
        return Operator(process, stats)
    if which in VARIANTS:
        process = Process("benchmarks.e2e", which, str(kubeconfig), namespace, str(stats),
                          log=log)
    elif which == "kopf":
        process = Process("benchmarks.kopf_operator", str(kubeconfig), namespace,
                          str(poll_interval()), str(stats), log=log)
    else:
        raise ValueError(f"unknown operator {which!r}")
    if process.line(timeout=timeout) != "ready":
        process.stop()
        raise BenchError(f"the {which} operator did not start: {process.last_error()}")
    return Operator(process, stats)


# -------------------------------------------------------------- measurement
def settle(counts: Callable[[], dict[str, int]], timeout: float,
           quiet: float = 1.0) -> dict[str, int]:
    """The counts once no write has reached the server for ``quiet`` seconds.

    Work an operator finishes after the last object shows its state (Events
    posted from a queue, a last status write) belongs to bringing it there.
    """
    def writes(found: dict[str, int]) -> int:
        return sum(v for k, v in found.items() if k.split(" ", 1)[0] in WRITES)

    found = counts()
    last, since = writes(found), time.perf_counter()
    deadline = since + timeout
    while time.perf_counter() < deadline:
        time.sleep(0.1)
        found = counts()
        now = writes(found)
        if now != last:
            last, since = now, time.perf_counter()
        elif time.perf_counter() - since >= quiet:
            break
    return found


def by_verb(counts: dict[str, int]) -> dict[str, int]:
    """Counts summed per verb."""
    verbs: Counter[str] = Counter()
    for key, value in counts.items():
        verbs[key.split(" ", 1)[0]] += value
    return dict(sorted(verbs.items()))


def _manifest(namespace: str, name: str, config: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"forProvider": {"engine": "postgres", "storageGB": 20},
                            "writeConnectionSecretToRef": {"name": f"{name}-conn"}}
    if config is not None:
        spec["providerConfigRef"] = {"name": config}
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "DatabaseInstance",
            "metadata": {"name": name, "namespace": namespace}, "spec": spec}


#: The ProviderConfig kind DatabaseInstance names, and the credentials Secret of a round's.
CONFIGS = "/apis/lifecycle.dev/v1alpha1/providerconfigs"
CREDENTIALS = "bench-credentials"


def round_config(client: Client, namespace: str) -> str:
    """A ProviderConfig of the round's own (named as its namespace), whose credentials
    Secret is in the round's namespace; created unless it exists.

    The operator serves the round's namespace only, and an operator of one namespace
    follows (watches) only the credentials Secrets in it, as its RBAC there allows; the
    shared ``default`` config names a Secret in ``default``, which it would read afresh
    every few seconds instead. A team running the operator for its namespace keeps its
    credentials there, and so does each round.
    """
    from lifecycle.sim.embedded import EXAMPLE_CREDENTIALS

    secrets = f"/api/v1/namespaces/{namespace}/secrets"
    if client.call("GET", f"{secrets}/{CREDENTIALS}", missing=None) is None:
        client.call("POST", secrets, {
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": CREDENTIALS, "namespace": namespace},
            "data": {k: base64.b64encode(v.encode()).decode()
                     for k, v in EXAMPLE_CREDENTIALS.items()}})
    if client.call("GET", f"{CONFIGS}/{namespace}", missing=None) is None:
        client.call("POST", CONFIGS, {
            "apiVersion": "lifecycle.dev/v1alpha1", "kind": "ProviderConfig",
            "metadata": {"name": namespace},
            "spec": {"credentials": {"secretRef": {"name": CREDENTIALS,
                                                   "namespace": namespace}}}})
    return namespace


def drop_round_config(client: Client, name: str) -> None:
    """Delete a round's ProviderConfig once its operator has stopped (its in-use
    finalizer, which no operator will remove now, taken off first)."""
    client.call("PATCH", f"{CONFIGS}/{name}", {"metadata": {"finalizers": None}},
                content_type="application/merge-patch+json", missing=None)
    client.call("DELETE", f"{CONFIGS}/{name}", missing=None)


def one(which: str, server: Any, config: Config, workdir: Path, tag: str, *, n: int,
        steady: bool = True, delete: bool = True) -> dict[str, Any]:
    """One round of one operator: N objects to Ready, the steady state, deletion."""
    namespace = f"bench-{tag}"
    client = Client(server.endpoint)
    client.ensure_namespace(namespace)
    provider_config = round_config(client, namespace)
    base = f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/{PLURAL}"
    tracker = Tracker(server.endpoint, base, is_ready).start()
    operator = start_operator(which, server.operator_kubeconfig(which), workdir, tag,
                              namespace)
    row: dict[str, Any] = {"operator": which, "n": n}
    names = [f"db-{i:06d}" for i in range(n)]
    try:
        time.sleep(0.5)  # let startup settle before the baseline
        server.reset()
        cpu, api_cpu, rss = operator.process.cpu, server.cpu(), operator.process.rss
        started = time.perf_counter()
        created = {}
        for name in names:
            client.call("POST", base, _manifest(namespace, name, provider_config))
            created[name] = time.perf_counter()
        ready = tracker.wait(lambda t: len(t.ready_at) >= n, config.timeout)
        wall = time.perf_counter() - started
        at_ready = server.counts(which)
        to_ready = settle(lambda: server.counts(which), config.timeout)
        cpu, rss = operator.process.cpu - cpu, operator.process.rss - rss
        api = server.cpu()
        sizes = [len(json.dumps(o, separators=(",", ":"))) for o in tracker.objects.values()]
        latencies = [tracker.ready_at[k] - created[k] for k in names if k in tracker.ready_at]
        row.update({
            "ready": len(tracker.ready_at), "all_ready": ready, "wall_seconds": wall,
            "ready_latency_median_seconds": statistics.median(latencies) if latencies else None,
            "operator_cpu_seconds": cpu, "operator_cpu_ms_per_object": cpu / n * 1000,
            "apiserver_cpu_seconds": None if api is None else api - api_cpu,
            "api_calls_at_ready": sum(at_ready.values()),
            "api_calls_per_object_at_ready": sum(at_ready.values()) / n,
            "api_calls": sum(to_ready.values()),
            "api_calls_per_object": sum(to_ready.values()) / n,
            "api_calls_by_verb": by_verb(to_ready),
            "api_calls_by_request": dict(sorted(to_ready.items())),
            "rss_growth_bytes": rss, "rss_growth_bytes_per_object": rss / n,
            "object_json_bytes": statistics.mean(sizes) if sizes else 0.0,
        })
        row["memory_ratio_json"] = (row["rss_growth_bytes_per_object"] / row["object_json_bytes"]
                                    if sizes else None)
        if steady and config.steady_polls:
            server.reset()
            start_cpu = operator.process.cpu
            time.sleep(poll_interval() * config.steady_polls)
            quiet = server.counts(which)
            polls = n * config.steady_polls
            row.update({
                "poll_api_calls": sum(quiet.values()) / polls,
                "poll_api_calls_by_request": {k: v / polls for k, v in sorted(quiet.items())},
                "poll_operator_cpu_ms": (operator.process.cpu - start_cpu) / polls * 1000})
        if delete or not server.fresh_per_round:
            row.update(_delete(which, server, client, tracker, operator, base, names, config))
    finally:
        tracker.stop()
        seen = operator.resets()
        if not server.fresh_per_round:
            drop_round_config(client, provider_config)
            client.call("DELETE", f"/api/v1/namespaces/{namespace}", missing=None)
        client.close()
    row["operator_connection_resets"] = seen.get("total", 0)
    row["observer_connection_resets"] = client.resets + tracker.resets
    row["connection_resets"] = row["operator_connection_resets"] + row[
        "observer_connection_resets"]
    return row


def _delete(which: str, server: Any, client: Client, tracker: Tracker, operator: Operator,
            base: str, names: list[str], config: Config) -> dict[str, Any]:
    """Delete every object; calls per object until all are gone and the operator settled."""
    server.reset()
    cpu, started = operator.process.cpu, time.perf_counter()
    for name in names:
        client.call("DELETE", f"{base}/{name}", missing=None)
    gone = tracker.wait(lambda t: all(k in t.gone_at for k in names), config.timeout)
    wall = time.perf_counter() - started
    counts = settle(lambda: server.counts(which), config.timeout)
    n = len(names)
    return {"all_deleted": gone, "delete_wall_seconds": wall,
            "delete_api_calls_per_object": sum(counts.values()) / n,
            "delete_api_calls_by_request": {k: v / n for k, v in sorted(counts.items())},
            "delete_operator_cpu_ms_per_object": (operator.process.cpu - cpu) / n * 1000}


# ------------------------------------------------------------------- the run
@contextmanager
def servers(config: Config, workdir: Path) -> Iterator[Callable[[str], Any]]:
    """A function giving the server of a round for a kind set (``database``/``postgres``)."""
    if config.server == "embedded":
        @contextmanager
        def fresh(kindset: str) -> Iterator[Any]:
            server = EmbeddedServer(kindset, workdir)
            try:
                yield server
            finally:
                server.close()
        yield fresh
        return
    cluster = None
    if config.server == "envtest":
        from lifecycle.testing.envtest import EnvtestError, RealCluster

        cluster = RealCluster(workdir / "envtest")
        try:
            cluster.start()
        except EnvtestError as exc:
            raise BenchError(str(exc)) from None
        pids = tuple(p.pid for p in getattr(cluster, "_processes", [])
                     if Path(str(p.args[0])).name in ("kube-apiserver", "etcd"))
        real = RealServer(cluster.kubeconfig, cluster.audit_log, workdir, pids)
    else:
        if not config.kubeconfig or not config.audit_log:
            raise BenchError("counting API calls on the server --kubeconfig names needs its "
                             "audit log: pass --audit-log FILE (lifecycle envtest --dir D "
                             "writes D/audit.log)")
        real = RealServer(Path(config.kubeconfig), Path(config.audit_log), workdir)
    prepared: set[str] = set()

    @contextmanager
    def shared(kindset: str) -> Iterator[Any]:
        if kindset not in prepared:
            real.prepare(kindset)
            prepared.add(kindset)
        yield real
    try:
        yield shared
    finally:
        if cluster is not None:
            cluster.stop()


def _median(rows: list[dict[str, Any]], key: str) -> float | None:
    values = [row[key] for row in rows if row.get(key) is not None]
    return float(statistics.median(values)) if values else None


SUMMARY_KEYS = ("wall_seconds", "ready_latency_median_seconds", "operator_cpu_seconds",
                "operator_cpu_ms_per_object", "apiserver_cpu_seconds",
                "api_calls_per_object_at_ready", "api_calls_per_object", "poll_api_calls",
                "poll_operator_cpu_ms", "delete_api_calls_per_object", "delete_wall_seconds",
                "delete_operator_cpu_ms_per_object", "connection_resets")


def _summarise(rows: list[dict[str, Any]], memory: dict[str, Any] | None) -> dict[str, Any]:
    out: dict[str, Any] = {key: _median(rows, key) for key in SUMMARY_KEYS}
    out["connection_resets"] = sum(row["connection_resets"] for row in rows)
    out["all_ready"] = all(row["all_ready"] for row in rows)
    out["rounds"] = len(rows)
    # The breakdowns come from the round whose total is the median, so they add up to it.
    last = sorted(rows, key=lambda row: row["api_calls_per_object"])[(len(rows) - 1) // 2]
    out["api_calls_by_verb"] = {k: v / last["n"] for k, v in last["api_calls_by_verb"].items()}
    out["api_calls_by_request"] = {k: v / last["n"]
                                   for k, v in last["api_calls_by_request"].items()}
    out["poll_api_calls_by_request"] = last.get("poll_api_calls_by_request", {})
    out["delete_api_calls_by_request"] = last.get("delete_api_calls_by_request", {})
    out["memory"] = memory
    return out


def run(config: Config = Config(), progress: Callable[[str], None] | None = None
        ) -> dict[str, Any]:
    """Run interleaved rounds of every operator in ``config``; return medians and keys."""
    from benchmarks import e2e_pg

    say = progress or (lambda _message: None)
    if "provider-sql" in config.peers:
        e2e_pg.peer()  # fail before anything starts when the peer is missing
    loads = [load_average()]
    rows: dict[str, list[dict[str, Any]]] = {which: [] for which in config.operators}
    memory: dict[str, dict[str, Any]] = {}
    stamp = time.strftime("%H%M%S")
    with tempfile.TemporaryDirectory(prefix="lifecycle-e2e-") as scratch, \
            servers(config, Path(scratch)) as server_for:
        workdir = Path(scratch)
        for index in range(config.rounds):
            order = config.operators if index % 2 == 0 else tuple(reversed(config.operators))
            for which in order:
                say(f"round {index + 1}/{config.rounds}: {which}, N = {config.n}, "
                    f"{config.server} server")
                with server_for("database") as server:
                    rows[which].append(one(which, server, config, workdir,
                                           f"{which}-{stamp}-{index}", n=config.n))
                loads.append(load_average())
        if config.memory_n:
            for which in config.operators:
                say(f"memory: {which}, N = {config.memory_n}")
                with server_for("database") as server:
                    sized = attrs.evolve(config, timeout=max(config.timeout,
                                                             0.12 * config.memory_n))
                    memory[which] = one(which, server, sized, workdir, f"{which}-{stamp}-mem",
                                        n=config.memory_n, steady=False, delete=False)
                loads.append(load_average())
        pg = (e2e_pg.run(config, server_for, workdir, say)
              if "provider-sql" in config.peers else None)
    result: dict[str, Any] = {name: _summarise(found, memory.get(name))
                              for name, found in rows.items()}
    result.update(headline(result, pg))
    result["pg"] = pg
    result["rows"] = rows
    result["config"] = attrs.asdict(config)
    result["poll_seconds"] = poll_interval()
    result["load_average"] = {"samples": loads, "max_1min": max(s[0] for s in loads)}
    return result


def headline(result: dict[str, Any], pg: dict[str, Any] | None) -> dict[str, Any]:
    """The keys ``--json`` promises (None where the run did not measure one)."""
    out: dict[str, Any] = dict.fromkeys(("e2e_api_calls_per_object",
                                         "e2e_delete_api_calls_per_object",
                                         "e2e_cpu_ratio_vs_kopf", "e2e_memory_ratio_json"))
    ours, kopf = result.get("lifecycle"), result.get("kopf")
    if ours is not None:
        out["e2e_api_calls_per_object"] = ours["api_calls_per_object"]
        out["e2e_delete_api_calls_per_object"] = ours["delete_api_calls_per_object"]
        out["e2e_poll_api_calls"] = ours["poll_api_calls"]
        out["e2e_api_calls_by_verb"] = ours["api_calls_by_verb"]
        out["e2e_poll_api_calls_by_request"] = ours["poll_api_calls_by_request"]
        mem = ours["memory"] or {}
        out["e2e_memory_ratio_json"] = mem.get("memory_ratio_json")
        out["e2e_memory_bytes_per_object"] = mem.get("rss_growth_bytes_per_object")
    if ours is not None and kopf is not None:
        out["e2e_cpu_ratio_vs_kopf"] = (ours["operator_cpu_seconds"]
                                        / kopf["operator_cpu_seconds"]
                                        if kopf["operator_cpu_seconds"] else None)
        out["e2e_kopf_api_calls_per_object"] = kopf["api_calls_per_object"]
        out["e2e_kopf_delete_api_calls_per_object"] = kopf["delete_api_calls_per_object"]
        out["e2e_kopf_poll_api_calls"] = kopf["poll_api_calls"]
        kmem = kopf["memory"] or {}
        out["e2e_kopf_memory_bytes_per_object"] = kmem.get("rss_growth_bytes_per_object")
        out["e2e_kopf_memory_ratio_json"] = kmem.get("memory_ratio_json")
    resets = sum(side["connection_resets"] for side in result.values()
                 if isinstance(side, dict) and "connection_resets" in side)
    resets += sum((side.get("memory") or {}).get("connection_resets", 0)
                  for side in result.values() if isinstance(side, dict))
    out["e2e_connection_resets"] = resets + (pg or {}).get("connection_resets", 0)
    for key in ("pg_api_calls_ratio_vs_provider_sql", "pg_time_to_ready_ratio_vs_provider_sql",
                "pg_drift_repair_ratio_vs_provider_sql", "pg_cpu_ratio_vs_provider_sql"):
        out[key] = (pg or {}).get(key)
    return out


# ------------------------------------------------------------------ reports
def summary(result: dict[str, Any]) -> str:
    """A side-by-side table of the medians."""
    from benchmarks.e2e_report import summary as report

    return report(result)


def plot(result: dict[str, Any], path: Any) -> None:
    """The PNG of :func:`benchmarks.e2e_report.plot`."""
    from benchmarks.e2e_report import plot as draw

    draw(result, path)


def main(argv: list[str]) -> int:
    """Child process entry point: ``VARIANT KUBECONFIG NAMESPACE STATS`` (in process)."""
    import sys

    if len(argv) == 4 and argv[0] in VARIANTS[1:]:
        e2e_netcount.install()
        e2e_netcount.write_at_exit(argv[3])
        return _variant(argv[1], argv[2], argv[0])
    print(f"usage: python -m benchmarks.e2e {'|'.join(VARIANTS[1:])} KUBECONFIG NAMESPACE STATS",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    import sys

    sys.exit(main(sys.argv[1:]))
