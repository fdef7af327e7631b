"""End to end, beside kopf: N DatabaseInstances from absent to Ready over HTTP, three processes.

Each round starts a fresh embedded API server behind its HTTP face in a
process of its own (``python -m benchmarks.e2e server``), then an operator in
another process: lifecycle's manager on the official client
(``python -m benchmarks.e2e lifecycle URL``), or the kopf operator of
:mod:`benchmarks.kopf_operator` doing the same work. Both drive the same
simulated cloud (instances available at once) and poll each Ready object
every ``poll`` seconds. Rounds alternate which operator goes first, so a
change in machine load hits both alike.

Per round and operator it measures:

* API calls by verb and resource, counted at the server around the HTTP
  handler's dispatch (requests from this process, which creates the objects
  and watches for Ready, carry a header that keeps them out of the count);
* operator CPU (user + system, from ``/proc/<pid>/stat``) from the moment it
  has started and synced to the moment it has settled, and the API server's
  CPU over the same span;
* wall time from the first create to all Ready;
* API calls per object counted twice: when every object shows Ready, and
  once the operator has settled (no write for a second: trailing Events and
  status writes included), the headline figure;
* the steady state: API calls per Ready object per poll interval while the
  objects sit unchanged for ``steady_polls`` intervals.

:func:`run` returns the medians over rounds and the per-verb breakdowns;
``lifecycle bench --e2e [--json] [-n N]`` prints them.
"""

from __future__ import annotations

import http.client
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import attrs

from lifecycle.core.errors import LifecycleError

#: Requests carrying this header are not counted (the benchmark's own).
OBSERVER_HEADER = "X-Bench-Observer"
NAMESPACE = "default"
GROUP, VERSION, PLURAL = "db.lifecycle.dev", "v1alpha1", "databaseinstances"
ROOT = Path(__file__).resolve().parents[1]
OPERATORS = ("lifecycle", "kopf")


class BenchError(LifecycleError):
    """A benchmark process failed or did not answer (the command prints it as one line)."""


@attrs.frozen
class Config:
    """How big a run is: objects, rounds, poll interval and steady-state window."""

    n: int = 200
    rounds: int = 5
    poll: float = 2.0
    steady_polls: int = 3
    timeout: float = 300.0
    operators: tuple[str, ...] = OPERATORS


# ------------------------------------------------------------------- server
def classify(method: str, path: str, route: Callable[[list[str]], Any]) -> str:
    """``"<verb> <resource>[/<subresource>]"`` for one request, as the server counts it."""
    url = urlsplit(path)
    parts = [unquote(p) for p in url.path.split("/") if p]
    query = parse_qs(url.query)
    try:
        found = route(parts)
    except Exception:  # discovery, OpenAPI, health: not a resource
        return f"{method.lower()} discovery"
    resource = found.rtype.plural + (f"/{found.subresource}" if found.subresource else "")
    if method == "GET":
        if (query.get("watch") or [""])[-1] in ("true", "1"):
            verb = "watch"
        else:
            verb = "list" if found.name is None else "get"
    else:
        verb = {"POST": "create", "PUT": "update", "PATCH": "patch",
                "DELETE": "delete"}.get(method, method.lower())
    return f"{verb} {resource}"


def _serve() -> int:
    """The API server process: serve, count, answer ``counts``/``reset`` lines on stdin."""
    from lifecycle.machines.database import DatabaseInstance
    from lifecycle.sim import http as sim_http
    from lifecycle.sim.apiserver import EmbeddedAPI
    from lifecycle.sim.embedded import register_kinds

    counts: Counter[str] = Counter()
    lock = threading.Lock()
    original = sim_http._Handler._dispatch

    def counted(handler: Any, method: str) -> None:
        if handler.headers.get(OBSERVER_HEADER) is None:
            key = classify(method, handler.path, handler.face.route)
            with lock:
                counts[key] += 1
        original(handler, method)

    sim_http._Handler._dispatch = counted  # type: ignore[method-assign]
    api = EmbeddedAPI()
    register_kinds(api, [DatabaseInstance])
    face = sim_http.APIServerHTTP(api).start()
    print(face.url, flush=True)
    for line in sys.stdin:
        command = line.strip()
        with lock:
            if command == "counts":
                print(json.dumps(dict(counts)), flush=True)
            elif command == "reset":
                counts.clear()
                print("{}", flush=True)
    face.stop()
    return 0


# ----------------------------------------------------------------- operator
def bench_kind(poll: float) -> Any:
    """DatabaseInstance with its Ready poll shortened to ``poll`` seconds (no jitter).

    The benchmark's cloud completes a create within the request, so the kind
    declares ``observe_after_create``, as a kind on such a provider would.
    """
    from lifecycle.core.machine import Timing
    from lifecycle.machines.database import DatabaseInstance, DatabaseInstanceMachine

    timing = attrs.evolve(DatabaseInstanceMachine.timing, poll=poll, jitter=0.0)
    machine = type("BenchDatabaseInstanceMachine", (DatabaseInstanceMachine,),
                   {"timing": timing, "__module__": __name__})
    assert isinstance(timing, Timing)
    return attrs.evolve(DatabaseInstance, machine=machine, observe_after_create=True)


def bench_cloud() -> Any:
    """The simulated cloud both operators use: operations complete within the request."""
    from lifecycle.providers.simcloud import SimCloud

    return SimCloud(seed=0, create_polls=0, modify_polls=0, delete_polls=0)


#: How each lifecycle variant wires its manager: ``lifecycle`` as ``lifecycle run`` does
#: (objects and connection Secrets read from informers); ``lifecycle-direct`` without the
#: cached reader; ``lifecycle-uncached-secrets`` with it but reading Secrets from the server.
VARIANTS = ("lifecycle", "lifecycle-direct", "lifecycle-uncached-secrets")


def _lifecycle(url: str, poll: float, variant: str = "lifecycle") -> int:
    """The lifecycle operator process, as ``lifecycle run`` wires it (two workers)."""
    import signal

    from prometheus_client import disable_created_metrics

    from lifecycle.driver.cluster import KubeCluster, api_client
    from lifecycle.driver.manager import Manager, ManagerOptions
    from lifecycle.providers.simcloud import DatabaseConnector

    disable_created_metrics()
    kind = bench_kind(poll)
    cluster = KubeCluster(api_client(host=url), [kind])
    pairs = [(kind, DatabaseConnector(bench_cloud()))]
    options = ManagerOptions(workers=2)
    if variant == "lifecycle-direct":
        manager = Manager(cluster, pairs, options)
    else:
        from lifecycle.driver.cache import cached_manager

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


# ------------------------------------------------------------ measurement
def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (all its threads) from /proc."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def load_average() -> list[float]:
    """The 1, 5 and 15 minute load averages from /proc/loadavg."""
    with open("/proc/loadavg", encoding="ascii") as f:
        return [float(x) for x in f.read().split()[:3]]


class _Observer:
    """The benchmark's own uncounted client of the server: create, list, Ready count."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
        self.base = f"/apis/{GROUP}/{VERSION}/namespaces/{NAMESPACE}/{PLURAL}"

    def call(self, method: str, path: str, body: Any = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        self.conn.request(method, path, body=data, headers={
            OBSERVER_HEADER: "1", "Content-Type": "application/json"})
        response = self.conn.getresponse()
        raw = response.read()
        if response.status >= 300:
            raise BenchError(f"{method} {path}: HTTP {response.status}")
        return json.loads(raw)

    def create(self, name: str) -> None:
        self.call("POST", self.base, {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "DatabaseInstance",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"forProvider": {"engine": "postgres", "storageGB": 20},
                     "writeConnectionSecretToRef": {"name": f"{name}-conn"}}})

    def ready(self) -> int:
        items = self.call("GET", self.base).get("items") or []
        return sum(1 for obj in items if is_ready(obj))

    def close(self) -> None:
        self.conn.close()


def is_ready(obj: dict[str, Any]) -> bool:
    """Whether an object's status carries the condition Ready=True."""
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(isinstance(c, dict) and c.get("type") == "Ready" and c.get("status") == "True"
               for c in conditions)


class _Process:
    """A child Python process running ``python -m benchmarks.<module> ARGS``."""

    def __init__(self, module: str, *args: str, stdin: bool = False) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            [str(ROOT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", module, *args], cwd=ROOT, env=env, text=True,
            stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)

    def line(self, timeout: float = 60.0) -> str:
        """The next line the child prints (its readiness signal or an answer)."""
        assert self.proc.stdout is not None
        box: list[str] = []
        reader = threading.Thread(target=lambda: box.append(self.proc.stdout.readline()),
                                  daemon=True)
        reader.start()
        reader.join(timeout)
        if not box or not box[0]:
            self.stop()
            raise BenchError(f"{self.proc.args[2]} did not answer (exit {self.proc.poll()})")
        return box[0].strip()

    def ask(self, command: str) -> Any:
        """Send one command line and read its JSON answer."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        return json.loads(self.line())

    @property
    def cpu(self) -> float:
        """CPU seconds used so far."""
        return cpu_seconds(self.proc.pid)

    def stop(self) -> None:
        """Terminate the child and wait for it (kill after 10 s)."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()


def _operator_process(which: str, url: str, poll: float) -> _Process:
    if which in VARIANTS:
        return _Process("benchmarks.e2e", which, url, str(poll))
    if which == "kopf":
        return _Process("benchmarks.kopf_operator", url, str(poll))
    raise ValueError(f"unknown operator {which!r}")


def one(which: str, config: Config) -> dict[str, Any]:
    """One round of one operator: a fresh server, N objects to Ready, the steady state."""
    server = _Process("benchmarks.e2e", "server", stdin=True)
    operator = None
    observer = None
    try:
        url = server.line()
        observer = _Observer(url)
        operator = _operator_process(which, url, config.poll)
        if operator.line(timeout=120) != "ready":
            raise BenchError(f"the {which} operator did not start")
        time.sleep(0.5)  # let startup settle before the baseline
        server.ask("reset")
        op_cpu, api_cpu = operator.cpu, server.cpu
        started = time.perf_counter()
        for i in range(config.n):
            observer.create(f"db-{i:06d}")
        ready = 0
        deadline = started + config.timeout
        while time.perf_counter() < deadline:
            ready = observer.ready()
            if ready >= config.n:
                break
            time.sleep(0.05)
        wall = time.perf_counter() - started
        at_ready = server.ask("counts")
        to_ready = _settle(server, config.timeout)
        op_cpu, api_cpu = operator.cpu - op_cpu, server.cpu - api_cpu
        server.ask("reset")
        window = config.poll * config.steady_polls
        steady_start = operator.cpu
        time.sleep(window)
        steady = server.ask("counts")
        steady_cpu = operator.cpu - steady_start
        polls = config.n * config.steady_polls
        return {
            "operator": which, "n": config.n, "ready": ready, "all_ready": ready >= config.n,
            "wall_seconds": wall,
            "operator_cpu_seconds": op_cpu,
            "operator_cpu_ms_per_object": op_cpu / config.n * 1000,
            "apiserver_cpu_seconds": api_cpu,
            "api_calls_at_ready": sum(at_ready.values()),
            "api_calls_per_object_at_ready": sum(at_ready.values()) / config.n,
            "api_calls": sum(to_ready.values()),
            "api_calls_per_object": sum(to_ready.values()) / config.n,
            "api_calls_by_verb": _by_verb(to_ready),
            "api_calls_by_request": dict(sorted(to_ready.items())),
            "poll_api_calls": sum(steady.values()) / polls,
            "poll_api_calls_by_request": {k: v / polls for k, v in sorted(steady.items())},
            "poll_operator_cpu_ms": steady_cpu / polls * 1000,
        }
    finally:
        if observer is not None:
            observer.close()
        if operator is not None:
            operator.stop()
        server.stop()


WRITES = ("create", "update", "patch", "delete")


def _settle(server: _Process, timeout: float, quiet: float = 1.0) -> dict[str, int]:
    """The counts once no write has reached the server for ``quiet`` seconds.

    Work an operator finishes after the last object shows Ready (Events
    posted from a queue, a last status write) belongs to bringing it there.
    """
    def writes(counts: dict[str, int]) -> int:
        return sum(v for k, v in counts.items() if k.split(" ", 1)[0] in WRITES)

    counts = server.ask("counts")
    last, since = writes(counts), time.perf_counter()
    deadline = since + timeout
    while time.perf_counter() < deadline:
        time.sleep(0.1)
        counts = server.ask("counts")
        now = writes(counts)
        if now != last:
            last, since = now, time.perf_counter()
        elif time.perf_counter() - since >= quiet:
            break
    return counts


def _by_verb(counts: dict[str, int]) -> dict[str, int]:
    verbs: Counter[str] = Counter()
    for key, value in counts.items():
        verbs[key.split(" ", 1)[0]] += value
    return dict(sorted(verbs.items()))


def _median(rows: list[dict[str, Any]], key: str) -> float:
    return float(statistics.median(row[key] for row in rows))


def _summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    keys = ("wall_seconds", "operator_cpu_seconds", "operator_cpu_ms_per_object",
            "apiserver_cpu_seconds", "api_calls_per_object_at_ready", "api_calls_per_object",
            "poll_api_calls",
            "poll_operator_cpu_ms")
    out: dict[str, Any] = {key: _median(rows, key) for key in keys}
    out["all_ready"] = all(row["all_ready"] for row in rows)
    out["rounds"] = len(rows)
    last = rows[-1]
    out["api_calls_by_verb"] = {k: v / last["n"] for k, v in last["api_calls_by_verb"].items()}
    out["api_calls_by_request"] = {k: v / last["n"]
                                   for k, v in last["api_calls_by_request"].items()}
    out["poll_api_calls_by_request"] = last["poll_api_calls_by_request"]
    return out


def run(config: Config = Config(), progress: Callable[[str], None] | None = None
        ) -> dict[str, Any]:
    """Run interleaved rounds of every operator in ``config``; return medians and breakdowns."""
    say = progress or (lambda _message: None)
    loads = [load_average()]
    rows: dict[str, list[dict[str, Any]]] = {which: [] for which in config.operators}
    for index in range(config.rounds):
        order = config.operators if index % 2 == 0 else tuple(reversed(config.operators))
        for which in order:
            say(f"round {index + 1}/{config.rounds}: {which}, N = {config.n}")
            rows[which].append(one(which, config))
            loads.append(load_average())
    result: dict[str, Any] = {name: _summarise(found) for name, found in rows.items()}
    ours = result.get("lifecycle")
    if ours is not None:
        result["e2e_api_calls_per_object"] = ours["api_calls_per_object"]
        result["e2e_poll_api_calls"] = ours["poll_api_calls"]
        result["e2e_api_calls_by_verb"] = ours["api_calls_by_verb"]
        result["e2e_poll_api_calls_by_request"] = ours["poll_api_calls_by_request"]
    kopf = result.get("kopf")
    if ours is not None and kopf is not None:
        result["e2e_cpu_ratio_vs_kopf"] = (ours["operator_cpu_seconds"]
                                           / kopf["operator_cpu_seconds"]
                                           if kopf["operator_cpu_seconds"] > 0 else None)
        result["e2e_kopf_api_calls_per_object"] = kopf["api_calls_per_object"]
        result["e2e_kopf_poll_api_calls"] = kopf["poll_api_calls"]
    result["rows"] = rows
    result["config"] = attrs.asdict(config)
    result["load_average"] = {"samples": loads,
                              "max_1min": max(sample[0] for sample in loads)}
    return result


def summary(result: dict[str, Any]) -> str:
    """A side-by-side table of the medians."""
    names = list(dict.fromkeys(n for n in (*OPERATORS, *VARIANTS) if n in result))
    rows = [("wall to all Ready, s", "wall_seconds", "{:.2f}"),
            ("operator CPU, s", "operator_cpu_seconds", "{:.2f}"),
            ("operator CPU per object, ms", "operator_cpu_ms_per_object", "{:.2f}"),
            ("API server CPU, s", "apiserver_cpu_seconds", "{:.2f}"),
            ("API calls per object when all Ready", "api_calls_per_object_at_ready", "{:.2f}"),
            ("API calls per object, settled", "api_calls_per_object", "{:.2f}"),
            ("API calls per Ready object per poll", "poll_api_calls", "{:.2f}"),
            ("operator CPU per poll, ms", "poll_operator_cpu_ms", "{:.2f}")]
    width = max(12, *(len(n) + 2 for n in names))
    lines = [f"{'':<38}" + "".join(f"{n:>{width}}" for n in names)]
    for label, key, form in rows:
        lines.append(f"{label:<38}" + "".join(f"{form.format(result[n][key]):>{width}}"
                                              for n in names))
    if result.get("e2e_cpu_ratio_vs_kopf") is not None:
        lines.append(f"operator CPU ratio lifecycle / kopf: {result['e2e_cpu_ratio_vs_kopf']:.2f}")
    for name in names:
        calls = ", ".join(f"{k} {v:.2f}" for k, v in result[name]["api_calls_by_request"].items())
        lines.append(f"{name} calls per object: {calls}")
    cfg = result["config"]
    lines.append(f"N = {cfg['n']}, {cfg['rounds']} round(s), poll {cfg['poll']:g} s; "
                 f"1-min load up to {result['load_average']['max_1min']:.2f}")
    return "\n".join(lines)


def plot(result: dict[str, Any], path: Any) -> None:
    """Two panels side by side: API calls per object by request type, operator CPU per object.

    Each operator's bar stacks the request types it sent (creates, updates,
    patches, reads) from absent to Ready and settled; the second panel is the
    median operator CPU per object. Written as a PNG to ``path``.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [n for n in (*OPERATORS, *VARIANTS) if n in result]
    verbs = sorted({v for n in names for v in result[n]["api_calls_by_verb"]})
    fig, (calls, cpu) = plt.subplots(1, 2, figsize=(9, 3.6))
    bottoms = [0.0] * len(names)
    for verb in verbs:
        heights = [result[n]["api_calls_by_verb"].get(verb, 0.0) for n in names]
        calls.bar(names, heights, bottom=bottoms, label=verb)
        bottoms = [b + h for b, h in zip(bottoms, heights, strict=True)]
    calls.set_ylabel("API calls per object (absent to Ready)")
    calls.legend(fontsize=8)
    cpu.bar(names, [result[n]["operator_cpu_ms_per_object"] for n in names], color="#777")
    cpu.set_ylabel("operator CPU per object, ms")
    cfg = result["config"]
    fig.suptitle(f"N = {cfg['n']}, median of {cfg['rounds']} interleaved rounds; "
                 f"1-min load up to {result['load_average']['max_1min']:.1f}", fontsize=9)
    for axis in (calls, cpu):
        axis.tick_params(axis="x", labelsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv: list[str]) -> int:
    """Child process entry points: ``server`` or ``lifecycle URL POLL``."""
    if argv[:1] == ["server"]:
        return _serve()
    if argv[:1] and argv[0] in VARIANTS and len(argv) == 3:
        return _lifecycle(argv[1], float(argv[2]), argv[0])
    print(f"usage: python -m benchmarks.e2e server | {'|'.join(VARIANTS)} URL POLL",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
