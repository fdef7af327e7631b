"""The API servers the end-to-end benchmark runs on, its own client, and its processes.

Two servers, one interface (:class:`EmbeddedServer`, :class:`RealServer`):

* ``embedded``: a fresh embedded API behind its HTTP face in a process of
  its own per round (``python -m benchmarks.e2e_servers serve KINDS``). It
  counts API calls around the HTTP handler's dispatch; requests carrying
  :data:`OBSERVER_HEADER` (the benchmark's own) are not counted.
* a real kube-apiserver (``--server envtest`` starts one, ``--kubeconfig``
  names a running one): API calls are counted from its audit log, grouped
  by user. Each operator runs as a ServiceAccount of its own (bound to
  ``cluster-admin``), so its requests separate from the benchmark's, which
  uses the admin kubeconfig, and from the controller manager's.

:class:`Client` and :class:`Tracker` (:mod:`benchmarks.e2e_client`) are the
benchmark's own client and watch; they count the connection resets they meet.
:class:`Process` runs an operator or server child and reads its CPU and RSS
from ``/proc``.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import yaml

from benchmarks.e2e_client import (
    RESETS,
    BenchError,
    Client,
    Endpoint,
    Tracker,
    endpoint,
    read_kubeconfig,
)

__all__ = ["RESETS", "AuditCounter", "BenchError", "Client", "EmbeddedServer", "Endpoint",
           "Process", "RealServer", "Tracker", "classify", "classify_audit", "cpu_seconds",
           "endpoint", "load_average", "read_kubeconfig", "rss_bytes"]

#: Requests carrying this header are not counted by the embedded server (the benchmark's own).
OBSERVER_HEADER = "X-Bench-Observer"
#: Where the operators' ServiceAccounts live on a real server.
ACCOUNTS_NAMESPACE = "lifecycle-bench"
ROOT = Path(__file__).resolve().parents[1]
WRITES = ("create", "update", "patch", "delete")


# ------------------------------------------------------------ /proc readings
def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (all its threads) from /proc."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_bytes(pid: int) -> int:
    """The resident set size of process ``pid`` in bytes (``VmRSS`` of /proc/PID/status)."""
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise BenchError(f"process {pid} reports no VmRSS")


def load_average() -> list[float]:
    """The 1, 5 and 15 minute load averages from /proc/loadavg."""
    with open("/proc/loadavg", encoding="ascii") as f:
        return [float(x) for x in f.read().split()[:3]]


class Process:
    """A child Python process running ``python -m MODULE ARGS`` (or any ``command``), its
    stderr kept in ``log``."""

    def __init__(self, module: str, *args: str, stdin: bool = False, log: Path | None = None,
                 env: dict[str, str] | None = None, command: list[str] | None = None) -> None:
        environ = dict(os.environ)
        environ["PYTHONPATH"] = os.pathsep.join(
            [str(ROOT)] + ([environ["PYTHONPATH"]] if environ.get("PYTHONPATH") else []))
        environ.update(env or {})
        argv = command or [sys.executable, "-m", module, *args]
        self.name = (Path(command[0]).name if command else
                     module.rsplit(".", 1)[-1] + (f" {args[0]}" if args else ""))
        self.log = log
        stderr = open(log, "ab") if log is not None else subprocess.DEVNULL  # noqa: SIM115
        try:
            self.proc = subprocess.Popen(
                argv, cwd=ROOT, env=environ, text=True,
                stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=stderr)
        finally:
            if log is not None:
                stderr.close()  # type: ignore[union-attr]

    @property
    def pid(self) -> int:
        """The child's process id."""
        return self.proc.pid

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
            raise BenchError(f"{self.name} did not answer (exit {self.proc.poll()}): "
                             f"{self.last_error()}")
        return box[0].strip()

    def last_error(self) -> str:
        """The last line of the child's log, or a note that there is none."""
        if self.log is None or not self.log.exists():
            return "no log"
        lines = self.log.read_text(errors="replace").strip().splitlines()
        return lines[-1][:300] if lines else "empty log"

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

    @property
    def rss(self) -> int:
        """Resident set size now, in bytes."""
        return rss_bytes(self.proc.pid)

    def alive(self) -> bool:
        """Whether the child still runs."""
        return self.proc.poll() is None

    def stop(self) -> None:
        """Terminate the child and wait for it (kill after 20 s)."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()


# ----------------------------------------------------------------- counting
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


def classify_audit(event: dict[str, Any]) -> str:
    """The same ``"<verb> <resource>[/<subresource>]"`` for one audit event of a real server."""
    ref = event.get("objectRef") or {}
    if not ref.get("resource"):
        return f"{event.get('verb', 'get')} discovery"
    sub = ref.get("subresource")
    return f"{event['verb']} {ref['resource']}{'/' + sub if sub else ''}"


class AuditCounter:
    """API calls per user read from a kube-apiserver's audit log (JSON lines).

    A request counts once: a watch at its ``ResponseStarted`` stage, any
    other at ``ResponseComplete``. :meth:`reset` starts a new count from
    the end of the log as it is now.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise BenchError(f"no audit log at {self.path}")
        self.offset = self.path.stat().st_size
        self.counts: dict[str, Counter[str]] = {}
        self._started: set[str] = set()

    def poll(self) -> None:
        """Read what the server appended since the last poll."""
        with open(self.path, "rb") as handle:
            handle.seek(self.offset)
            data = handle.read()
        end = data.rfind(b"\n") + 1
        self.offset += end
        for line in data[:end].splitlines():
            if not line.strip():
                continue
            event = json.loads(line)
            stage, audit_id = event.get("stage"), event.get("auditID", "")
            if stage == "ResponseStarted":
                self._started.add(audit_id)
            elif stage == "ResponseComplete":
                if audit_id in self._started:
                    self._started.discard(audit_id)
                    continue
            else:
                continue
            user = (event.get("user") or {}).get("username", "")
            self.counts.setdefault(user, Counter())[classify_audit(event)] += 1

    def reset(self) -> None:
        """Forget the counts so far."""
        self.poll()
        self.counts = {}

    def of(self, user: str) -> dict[str, int]:
        """``user``'s counts since the last reset, read up to now."""
        self.poll()
        return dict(self.counts.get(user, {}))


# ------------------------------------------------------------------ servers
def kinds_of(kindset: str) -> list[Any]:
    """The kinds a server serves for a workload: ``database`` or ``postgres``."""
    if kindset == "database":
        from lifecycle.machines.database import DatabaseInstance

        return [DatabaseInstance]
    if kindset == "postgres":
        from lifecycle.machines.postgres import kinds

        return [kind for kind, _ in kinds()]
    raise ValueError(f"unknown kind set {kindset!r}")


def _serve(kindset: str) -> int:
    """The embedded API server process: serve, count, answer ``counts``/``reset`` on stdin."""
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
    register_kinds(api, kinds_of(kindset), seed_config=kindset == "database")
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


def write_kubeconfig(path: Path, server: str, user: dict[str, Any],
                     cluster: dict[str, Any] | None = None) -> Path:
    """Write a one-context kubeconfig for ``server`` as ``user``."""
    doc = {"apiVersion": "v1", "kind": "Config", "current-context": "bench",
           "clusters": [{"name": "bench", "cluster": {**(cluster or {}), "server": server}}],
           "users": [{"name": "bench", "user": user}],
           "contexts": [{"name": "bench", "context": {"cluster": "bench", "user": "bench"}}]}
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    path.chmod(0o600)
    return path


@contextlib.contextmanager
def _one_line(doing: str) -> Iterator[None]:
    """Turn the official client's errors into a :class:`BenchError` of one line."""
    from kubernetes import client as k8s

    try:
        yield
    except k8s.ApiException as exc:
        try:
            message = json.loads(exc.body).get("message", "")
        except (TypeError, ValueError):
            message = str(exc.reason)
        raise BenchError(f"{doing} on the API server failed: HTTP {exc.status}: "
                         f"{message[:300]}") from None


class EmbeddedServer:
    """A fresh embedded API server in a process of its own, counting at its HTTP face."""

    fresh_per_round = True

    def __init__(self, kindset: str, workdir: Path) -> None:
        self.process = Process("benchmarks.e2e_servers", "serve", kindset, stdin=True,
                               log=workdir / "embedded-server.log")
        url = self.process.line()
        self.endpoint = Endpoint(url, None, {OBSERVER_HEADER: "1"})
        self.kubeconfig = write_kubeconfig(workdir / "embedded.kubeconfig", url,
                                           {"token": "embedded"})

    def operator_kubeconfig(self, name: str) -> Path:
        """The kubeconfig an operator process uses (the embedded server has no users)."""
        return self.kubeconfig

    def reset(self) -> None:
        """Start counting anew."""
        self.process.ask("reset")

    def counts(self, name: str) -> dict[str, int]:
        """The calls counted since :meth:`reset` (one operator runs per server)."""
        return {str(k): int(v) for k, v in self.process.ask("counts").items()}

    def cpu(self) -> float | None:
        """The server process's CPU seconds so far."""
        return self.process.cpu

    def close(self) -> None:
        """Stop the server process."""
        self.process.stop()


class RealServer:
    """A running kube-apiserver: counted from its audit log, each operator its own user."""

    fresh_per_round = False

    def __init__(self, kubeconfig: Path, audit_log: Path, workdir: Path,
                 pids: tuple[int, ...] = ()) -> None:
        self.admin_kubeconfig = Path(kubeconfig)
        self.endpoint = endpoint(self.admin_kubeconfig)
        self.audit = AuditCounter(audit_log)
        self.workdir = workdir
        self.pids = pids
        self._configs: dict[str, Path] = {}

    def api_client(self) -> Any:
        """An official client as the administrator."""
        from lifecycle.driver.cluster import api_client

        return api_client(kubeconfig=str(self.admin_kubeconfig))

    def prepare(self, kindset: str) -> None:
        """Install the workload's CRDs; for DatabaseInstance also the default ProviderConfig."""
        from lifecycle.cli.envtest import seed
        from lifecycle.schema.crds import crds
        from lifecycle.testing.envtest import install

        with _one_line("installing the CRDs"):
            if kindset == "database":
                seed(self.api_client(), kinds_of(kindset))
            else:
                install(self.api_client(), crds(kinds_of(kindset)))

    @staticmethod
    def user(name: str) -> str:
        """The audit log's username of operator ``name``."""
        return f"system:serviceaccount:{ACCOUNTS_NAMESPACE}:{name}"

    def operator_kubeconfig(self, name: str) -> Path:
        """A kubeconfig acting as ServiceAccount ``name`` (created, bound to cluster-admin)."""
        if name in self._configs:
            return self._configs[name]
        with _one_line(f"making the ServiceAccount {ACCOUNTS_NAMESPACE}/{name}"):
            return self._account(name)

    def _account(self, name: str) -> Path:
        from kubernetes import client as k8s

        api = self.api_client()
        core, rbac = k8s.CoreV1Api(api), k8s.RbacAuthorizationV1Api(api)
        for create in (
                lambda: core.create_namespace({"metadata": {"name": ACCOUNTS_NAMESPACE}}),
                lambda: core.create_namespaced_service_account(
                    ACCOUNTS_NAMESPACE, {"metadata": {"name": name}}),
                lambda: rbac.create_cluster_role_binding({
                    "metadata": {"name": f"{ACCOUNTS_NAMESPACE}-{name}"},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io",
                                "kind": "ClusterRole", "name": "cluster-admin"},
                    "subjects": [{"kind": "ServiceAccount", "name": name,
                                  "namespace": ACCOUNTS_NAMESPACE}]})):
            try:
                create()
            except k8s.ApiException as exc:
                if exc.status != 409:
                    raise
        token = core.create_namespaced_service_account_token(
            name, ACCOUNTS_NAMESPACE, {"spec": {"expirationSeconds": 6 * 3600}}).status.token
        cluster, _ = read_kubeconfig(self.admin_kubeconfig)
        path = write_kubeconfig(self.workdir / f"{name}.kubeconfig", cluster["server"],
                                {"token": token},
                                {k: v for k, v in cluster.items() if k != "server"})
        self._configs[name] = path
        return path

    def reset(self) -> None:
        """Start counting anew."""
        self.audit.reset()

    def counts(self, name: str) -> dict[str, int]:
        """Operator ``name``'s calls since :meth:`reset`."""
        return self.audit.of(self.user(name))

    def cpu(self) -> float | None:
        """CPU seconds of the server's processes (kube-apiserver and etcd) when known."""
        if not self.pids:
            return None
        return sum(cpu_seconds(pid) for pid in self.pids)

    def close(self) -> None:
        """Nothing to stop: the server belongs to whoever started it."""


def main(argv: list[str]) -> int:
    """``serve database|postgres``: the embedded API server process."""
    if len(argv) == 2 and argv[0] == "serve":
        return _serve(argv[1])
    print("usage: python -m benchmarks.e2e_servers serve database|postgres", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
