"""End to end: the operator through the official kubernetes client against the HTTP face.

The embedded API is served over HTTP on loopback; resources are created with
the official client, and the operator (informers, work queue, reconciler,
leader election) talks to the server only through that client too.
"""

from __future__ import annotations

import base64
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import attrs
import pytest
from kubernetes import client as k8s

from lifecycle.core.values import Result
from lifecycle.driver.cache import cached_manager
from lifecycle.driver.cluster import KubeCluster, api_client
from lifecycle.driver.informer import InformerOptions
from lifecycle.driver.manager import Manager, ManagerOptions, engine_reconciler
from lifecycle.kube.errors import Conflict
from lifecycle.machines.database import DatabaseInstance
from lifecycle.providers.simcloud import DatabaseConnector, SimCloud
from lifecycle.providers.simcloud.scenarios.harness import database_manifest
from lifecycle.sim.embedded import embedded_cluster
from lifecycle.sim.http import APIServerHTTP

#: A second kind on the same simulated cloud, with its own plural.
CacheInstance = attrs.evolve(DatabaseInstance, kind="CacheInstance", plural="cacheinstances",
                             short_names=())
GROUP, VERSION = DatabaseInstance.group, DatabaseInstance.version

FAST = InformerOptions(resync=5.0, watch_timeout=10.0, inactivity_timeout=3.0,
                       backoff_base=0.05, backoff_cap=0.5)


class ConcurrencyProbe:
    """Wraps reconcilers and records any key reconciled by two workers at once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.active: set[tuple[str, str | None, str]] = set()
        self.overlaps: list[tuple[str, str | None, str]] = []
        self.calls = 0

    def factory(self, cluster: Any, kind: Any, connector: Any, options: ManagerOptions) -> Any:
        inner = engine_reconciler(cluster, kind, connector, options)
        probe = self

        class Probed:
            def reconcile(self, namespace: str | None, name: str) -> Result:
                key = (kind.kind, namespace, name)
                with probe.lock:
                    if key in probe.active:
                        probe.overlaps.append(key)
                    probe.active.add(key)
                    probe.calls += 1
                try:
                    time.sleep(0.001)  # widen the window an overlap would need
                    return inner.reconcile(namespace, name)
                finally:
                    with probe.lock:
                        probe.active.discard(key)

        return Probed()


@pytest.fixture
def server() -> Iterator[APIServerHTTP]:
    srv = embedded_cluster([DatabaseInstance, CacheInstance], bookmark_interval=0.5)
    yield srv
    srv.api.faults.clear()
    srv.stop()
    srv.api.close()


def manifest(kind: Any, name: str, namespace: str = "default") -> dict[str, Any]:
    doc = database_manifest(name, namespace)
    doc["kind"] = kind.kind
    return doc


def create_all(server: APIServerHTTP, count: int) -> list[tuple[Any, str]]:
    """Create ``count`` resources split over both kinds through the official client."""
    api = k8s.CustomObjectsApi(api_client(host=server.url))
    made = []
    for i in range(count):
        kind = DatabaseInstance if i % 2 == 0 else CacheInstance
        name = f"{kind.kind.lower()}-{i:03d}"
        api.create_namespaced_custom_object(GROUP, VERSION, "default", kind.plural,
                                            manifest(kind, name))
        made.append((kind, name))
    return made


def states(server: APIServerHTTP) -> dict[str, int]:
    counts: dict[str, int] = {}
    for kind in (DatabaseInstance, CacheInstance):
        items, _ = server.api.list(kind.api_version, kind.kind)
        for obj in items:
            state = (obj.get("status") or {}).get("state") or "none"
            counts[state] = counts.get(state, 0) + 1
    return counts


def wait_ready(server: APIServerHTTP, count: int, timeout: float,
               during: Any = None) -> dict[str, int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if during is not None:
            during()
        seen = states(server)
        if seen.get("ready", 0) == count:
            return seen
        time.sleep(0.25)
    return states(server)


def operator(server: APIServerHTTP, cloud: SimCloud, probe: ConcurrencyProbe | None = None,
             **options: Any) -> Manager:
    cluster = KubeCluster(api_client(host=server.url), [DatabaseInstance, CacheInstance])
    connector = DatabaseConnector(cloud)
    opts = ManagerOptions(informer=FAST, backoff_base=0.05, backoff_cap=1.0, qps=200,
                          burst=200, **options)
    kwargs = {"reconciler_factory": probe.factory} if probe else {}
    return cached_manager(cluster, [(DatabaseInstance, connector), (CacheInstance, connector)],
                          opts, secrets=True, **kwargs)


def test_200_resources_of_two_kinds_converge_through_conflicts_and_dropped_watches(
        server: APIServerHTTP) -> None:
    cloud = SimCloud(seed=7, create_polls=1)
    probe = ConcurrencyProbe()
    manager = operator(server, cloud, probe, workers=4).start()
    faults = [server.api.faults.add(verb, error=Conflict, probability=0.1)
              for verb in ("replace", "replace_status")]
    try:
        create_all(server, 200)
        drops = {"last": time.monotonic(), "count": 0}

        def drop_now_and_then() -> None:
            if time.monotonic() - drops["last"] > 0.5:
                server.api.faults.drop_watches()
                drops["last"] = time.monotonic()
                drops["count"] += 1

        seen = wait_ready(server, 200, timeout=50, during=drop_now_and_then)
    finally:
        manager.stop()
    assert seen == {"ready": 200}
    assert sum(f.fired for f in faults) > 20, "the 409 faults must actually have fired"
    assert drops["count"] >= 3
    assert probe.overlaps == []
    assert probe.calls >= 400  # at least claim+create and observe-ready per resource
    watches = sum(c.informer.stats.watches for c in manager.controllers.values())
    assert watches > drops["count"]  # every dropped watch was resumed
    # Each external instance was materialised exactly once despite the conflicts.
    instances = cloud.instances()
    assert len(instances) == 200
    assert all(cloud.creations(name) == 1 for name in instances)


def test_killing_the_leader_hands_over_within_the_lease_duration(
        server: APIServerHTTP) -> None:
    cloud = SimCloud(seed=3, create_polls=1)
    probe = ConcurrencyProbe()
    lease = {"leader_election": True, "lease_duration": 2.0, "renew_deadline": 1.5,
             "retry_period": 0.25, "workers": 2}
    first = operator(server, cloud, probe, identity="replica-a", **lease).start()
    assert first.elector is not None and first.elector.wait_leading(5)
    second = operator(server, cloud, probe, identity="replica-b", **lease).start()
    try:
        create_all(server, 60)
        deadline = time.monotonic() + 20
        while states(server).get("ready", 0) < 10 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert second.elector is not None and not second.elector.is_leader
        killed = time.monotonic()
        first.crash()
        assert second.elector.wait_leading(10)
        took_over = time.monotonic() - killed
        seen = wait_ready(server, 60, timeout=40)
    finally:
        second.stop()
        first.stop()
    assert took_over <= 2.0 + 0.25 + 0.5, f"takeover took {took_over:.2f}s"
    assert seen == {"ready": 60}
    holder = server.api.get("coordination.k8s.io/v1", "Lease", "default", "lifecycle-operator")
    # The second replica released the lease when it stopped gracefully.
    assert not holder["spec"].get("holderIdentity")
    assert holder["spec"]["leaseTransitions"] >= 1
    assert probe.overlaps == []


def test_a_graceful_stop_releases_the_lease_for_an_immediate_takeover(
        server: APIServerHTTP) -> None:
    cloud = SimCloud(seed=4, create_polls=1)
    lease = {"leader_election": True, "lease_duration": 5.0, "renew_deadline": 4.0,
             "retry_period": 0.2}
    first = operator(server, cloud, identity="a", **lease).start()
    assert first.elector is not None and first.elector.wait_leading(5)
    second = operator(server, cloud, identity="b", **lease).start()
    try:
        # The second replica is a standby that has seen the lease held by the first.
        deadline = time.monotonic() + 10
        while (((second.elector._observed or {}).get("spec") or {}).get("holderIdentity")
               != "a" and time.monotonic() < deadline):
            time.sleep(0.01)
        assert ((second.elector._observed or {}).get("spec") or {}).get("holderIdentity") == "a"
        assert not second.elector.is_leader
        stopped = time.monotonic()
        first.stop()
        assert second.elector is not None and second.elector.wait_leading(5)
        # Far sooner than the 5 s lease duration: the lease was released.
        assert time.monotonic() - stopped < 2.0
    finally:
        second.stop()


def test_lifecycle_run_end_to_end_through_the_official_client() -> None:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "lifecycle.cli", "run", "--embedded", "--workers", "2",
         "--probe-address", "127.0.0.1:0", "--resync", "5", "--log-json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None
        api_line = proc.stdout.readline()
        probe_line = proc.stdout.readline()
        match = re.search(r"(http://127\.0\.0\.1:\d+)", api_line)
        probes = re.search(r"(http://127\.0\.0\.1:\d+)", probe_line)
        assert match and probes, (api_line, probe_line)
        custom = k8s.CustomObjectsApi(api_client(host=match.group(1)))
        for i in range(5):
            custom.create_namespaced_custom_object(
                GROUP, VERSION, "default", "databaseinstances", database_manifest(f"run-{i}"))
        deadline = time.monotonic() + 30
        ready: list[str] = []
        while time.monotonic() < deadline:
            items = custom.list_namespaced_custom_object(GROUP, VERSION, "default",
                                                         "databaseinstances")["items"]
            ready = [o["metadata"]["name"] for o in items
                     if (o.get("status") or {}).get("state") == "ready"]
            if len(ready) == 5:
                break
            time.sleep(0.2)
        assert len(ready) == 5
        core = k8s.CoreV1Api(api_client(host=match.group(1)))
        secret = core.read_namespaced_secret("run-0-conn", "default")
        assert set(secret.data) == {"endpoint", "password", "port", "username"}
        assert base64.b64decode(secret.data["username"]) == b"admin"
        assert len(base64.b64decode(secret.data["password"])) == 32  # token_urlsafe(24)
        events = core.list_namespaced_event("default").items
        assert any(e.involved_object.name == "run-0" and e.type == "Normal" for e in events)
        base = probes.group(1)
        with urllib.request.urlopen(f"{base}/healthz", timeout=5) as resp:
            assert resp.status == 200
        with urllib.request.urlopen(f"{base}/readyz", timeout=5) as resp:
            assert resp.status == 200
        with urllib.request.urlopen(f"{base}/metrics", timeout=5) as resp:
            text = resp.read().decode()
        assert 'lifecycle_resources{kind="databaseinstance",state="ready"} 5.0' in text
        assert re.search(r'controller_runtime_reconcile_total\{controller="databaseinstance",'
                         r'result="requeue_after"\} [1-9]', text)
        assert "workqueue_depth" in text and "controller_runtime_reconcile_time_seconds" in text
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
        logs = proc.stderr.read() if proc.stderr else ""
        assert "received SIGTERM" in logs and "operator stopped" in logs
        assert "s3cr3t" not in logs  # credentials never reach the logs
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
