"""The floor of the operator's HTTP exchange: one create and one status write per object.

An embedded API serves in a process of its own (DatabaseInstance installed);
this process creates ``n`` objects and writes each one's status, once with
``http.client`` and ``json`` alone and once through
:class:`~lifecycle.driver.cluster.KubeCluster`, and reports the CPU this
process spent per create + status write (``time.process_time``; the server's
CPU is not counted). The best of ``rounds`` rounds is kept for each.

Run: ``python -m benchmarks.request_floor [N [ROUNDS]]`` (default 400, 2).
"""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
STATUS = {"state": "creating",
          "conditions": [{"type": "Ready", "status": "False", "reason": "Creating",
                          "message": "creating", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}


def serve() -> int:
    """The server process: an embedded API with the bundled kinds; prints its URL."""
    from lifecycle.machines.database import DatabaseInstance
    from lifecycle.sim.apiserver import EmbeddedAPI
    from lifecycle.sim.embedded import register_kinds
    from lifecycle.sim.http import APIServerHTTP

    api = EmbeddedAPI()
    register_kinds(api, [DatabaseInstance])
    face = APIServerHTTP(api).start()
    print(face.url, flush=True)
    sys.stdin.read()
    face.stop()
    return 0


def _manifest(kind: Any, name: str) -> dict[str, Any]:
    return {"apiVersion": kind.api_version, "kind": kind.kind,
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"forProvider": {"engine": "postgres", "storageGB": 20},
                     "writeConnectionSecretToRef": {"name": f"{name}-conn"}}}


def _raw(url: str, kind: Any) -> Callable[[str], None]:
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port)
    path = f"/apis/{kind.group}/{kind.version}/namespaces/default/{kind.plural}"
    headers = {"Content-Type": "application/json", "Accept": "application/json"}

    def one(name: str) -> None:
        connection.request("POST", path, json.dumps(_manifest(kind, name)), headers)
        made = json.loads(connection.getresponse().read())
        connection.request("PUT", f"{path}/{name}/status",
                           json.dumps({**made, "status": STATUS}), headers)
        json.loads(connection.getresponse().read())

    return one


def _cluster(url: str, kind: Any) -> Callable[[str], None]:
    from lifecycle.driver.cluster import KubeCluster, api_client

    cluster = KubeCluster(api_client(host=url), [kind])

    def one(name: str) -> None:
        made = cluster.create(_manifest(kind, name))
        cluster.replace_status({**made, "status": STATUS})

    return one


def run(n: int = 400, rounds: int = 2) -> dict[str, float]:
    """Microseconds of client CPU per create + status write, for each client."""
    from lifecycle.machines.database import DatabaseInstance

    server = subprocess.Popen([sys.executable, "-m", "benchmarks.request_floor", "serve"],
                              cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    try:
        assert server.stdout is not None
        url = server.stdout.readline().strip()
        clients = {"http_client_us": _raw(url, DatabaseInstance),
                   "kube_cluster_us": _cluster(url, DatabaseInstance)}
        best: dict[str, float] = {}
        for index in range(rounds):
            for name, one in clients.items():
                started = time.process_time()
                for i in range(n):
                    one(f"r{index}-{name[:4]}-{i}")
                spent = (time.process_time() - started) / n * 1e6
                best[name] = min(best.get(name, spent), spent)
    finally:
        if server.stdin is not None:
            server.stdin.close()
        server.wait(timeout=60)
    return best


if __name__ == "__main__":
    if sys.argv[1:2] == ["serve"]:
        sys.exit(serve())
    args = [int(a) for a in sys.argv[1:3]]
    print(json.dumps(run(*args), indent=2))
