"""A Grant naming its Role and Database by reference converges as soon as they are Ready.

The operator (a cached manager, as ``lifecycle run`` wires it) runs the six PostgreSQL
kinds against the embedded API over HTTP and the session's real PostgreSQL server, once
with a superuser admin and once with a CREATEROLE CREATEDB admin. A Grant with
``roleRef`` and ``databaseRef`` is applied together with its Role and Database: its
first pass finds them not Ready (``ReferenceUnresolved``, backed off for far longer
than the test waits), and the informer requeues it when the last of them turns Ready.
The same run without the requeue is shown to miss the deadline.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from postgres_helpers import query

from lifecycle.core.kind import PROVIDER_CONFIG_API, PROVIDER_CONFIG_KIND
from lifecycle.core.references import is_ready
from lifecycle.driver import manager as manager_module
from lifecycle.driver.cache import cached_manager
from lifecycle.driver.cluster import KubeCluster, api_client
from lifecycle.driver.informer import InformerOptions
from lifecycle.driver.manager import Manager, ManagerOptions
from lifecycle.kube.errors import NotFound
from lifecycle.machines.postgres import kinds
from lifecycle.providers.postgres.fields import API_VERSION
from lifecycle.providers.postgres.scenarios.testing import PostgresServer, manifest

pytestmark = pytest.mark.postgres

FAST = InformerOptions(resync=600.0, watch_timeout=10.0, inactivity_timeout=3.0,
                       backoff_base=0.05, backoff_cap=0.5)
#: The backoff of a failed pass: far beyond the deadline, so only the requeue can meet it.
BACKOFF = 40.0
#: How long after its dependencies are Ready the Grant must be.
DEADLINE = 10.0


class Operator:
    """The embedded API over HTTP, a PostgreSQL ProviderConfig and the operator on it."""

    def __init__(self, server: PostgresServer, user: str, password: str) -> None:
        from lifecycle.sim.embedded import embedded_cluster

        self.pairs = kinds()
        self.http = embedded_cluster([k for k, _ in self.pairs], bookmark_interval=0.5,
                                     seed_config=False)
        self.cluster = KubeCluster(api_client(host=self.http.url), [k for k, _ in self.pairs])
        self.namespace = f"t-{uuid.uuid4().hex[:8]}"
        self.cluster.create({"apiVersion": "v1", "kind": "Namespace",
                             "metadata": {"name": self.namespace}})
        self.cluster.create({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                             "metadata": {"name": "pg-admin", "namespace": "default"},
                             "stringData": {"username": user, "password": password}})
        self.cluster.create({
            "apiVersion": PROVIDER_CONFIG_API, "kind": PROVIDER_CONFIG_KIND,
            "metadata": {"name": "default"},
            "spec": {"host": server.host, "port": server.port, "sslMode": "disable",
                     "credentials": {"source": "Secret", "secretRef": {
                         "name": "pg-admin", "namespace": "default"}}}})
        self.managers: list[Manager] = []

    def start(self, *kinds: str) -> Manager:
        """An operator for ``kinds`` (default: all six)."""
        options = ManagerOptions(informer=FAST, backoff_base=BACKOFF, backoff_cap=BACKOFF,
                                 qps=200, burst=200)
        pairs = [(k, c) for k, c in self.pairs if not kinds or k.kind in kinds]
        # A client of its own, as the operator would have.
        cluster = KubeCluster(api_client(host=self.http.url), [k for k, _ in self.pairs])
        manager = cached_manager(cluster, pairs, options, secrets=True).start()
        assert manager.wait_synced(30)
        self.managers.append(manager)
        return manager

    def get(self, kind: str, name: str) -> dict[str, Any] | None:
        try:
            return self.cluster.get(API_VERSION, kind, self.namespace, name)
        except NotFound:
            return None

    def apply(self, doc: dict[str, Any]) -> None:
        self.cluster.create(doc)

    def delete_all(self) -> None:
        """Delete every object, dependents first, and wait for the operator to let each go.

        One kind at a time: a Role dropped while its Grant still holds a privilege fails
        once, and its retry then waits the whole :data:`BACKOFF` (40 s)."""
        for kind in ("Grant", "Database", "Role"):
            names = [n for n in ("grant", "db", "app") if self.get(kind, n) is not None]
            for name in names:
                self.cluster.delete(API_VERSION, kind, self.namespace, name)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and any(
                    self.get(kind, n) is not None for n in names):
                time.sleep(0.05)

    def stop(self) -> None:
        if self.managers:
            self.delete_all()
        for manager in self.managers:
            manager.stop()
        self.http.stop()
        self.http.api.close()


@pytest.fixture
def operator(server: PostgresServer, admin: Any) -> Iterator[Operator]:
    found = Operator(server, admin.user, admin.password)
    try:
        yield found
    finally:
        found.stop()


def converge(operator: Operator) -> tuple[float, float, dict[str, Any]]:
    """Apply a Grant by reference, then its Role and Database; return when the last
    dependency was seen Ready, when the Grant was (inf: not within the deadline), and the
    Grant."""
    grant = manifest("Grant", "grant", namespace=operator.namespace, privileges=["CONNECT"])
    grant["spec"]["forProvider"].update(roleRef={"name": "app"}, databaseRef={"name": "db"})
    operator.apply(grant)
    # The Grant's first pass finds nothing to resolve and backs off.
    until = time.monotonic() + 10
    while time.monotonic() < until:
        synced = [c for c in ((operator.get("Grant", "grant") or {}).get("status") or {})
                  .get("conditions", []) if c["type"] == "Synced"]
        if synced and synced[0]["status"] == "False":
            break
        time.sleep(0.02)
    assert synced and "roleRef: Role 'app' not found" in synced[0]["message"], synced
    operator.apply(manifest("Role", "app", namespace=operator.namespace))
    operator.apply(manifest("Database", "db", namespace=operator.namespace))
    deps = grant_ready = float("inf")
    until = time.monotonic() + 60
    while time.monotonic() < until and grant_ready == float("inf"):
        now = time.monotonic()
        if deps == float("inf") and all(is_ready(operator.get(k, n) or {})
                                        for k, n in (("Role", "app"), ("Database", "db"))):
            deps = now
        if is_ready(operator.get("Grant", "grant") or {}):
            grant_ready = now
        if deps != float("inf") and now - deps > DEADLINE + 2:
            break
        time.sleep(0.02)
    return deps, grant_ready, operator.get("Grant", "grant") or {}


def test_a_grant_by_reference_converges_within_seconds_of_its_dependencies(
        operator: Operator, server: PostgresServer) -> None:
    operator.start()
    deps, ready, grant = converge(operator)

    assert deps != float("inf"), "the Role and the Database never became Ready"
    assert ready - deps < DEADLINE, f"Grant Ready {ready - deps:.2f}s after its dependencies"
    role = operator.get("Role", "app")
    database = operator.get("Database", "db")
    assert role is not None and database is not None
    params = grant["spec"]["forProvider"]
    assert params["role"] == role["status"]["externalName"]
    assert params["database"] == database["status"]["externalName"]
    assert query(server, "SELECT has_database_privilege(%s, %s, 'CONNECT')",
                 params["role"], params["database"]) == [(True,)]
    print(f"Grant Ready {ready - deps:.2f}s after its dependencies")


def test_without_the_requeue_the_grant_waits_for_its_backoff(
        operator: Operator, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(manager_module, "follow_references", lambda manager, targets: None)
    operator.start()
    deps, ready, _ = converge(operator)

    assert deps != float("inf")
    assert ready - deps >= DEADLINE, "the Grant converged without the requeue"


def test_an_operator_running_only_grants_watches_the_kinds_they_reference(
        operator: Operator) -> None:
    operator.start("Role", "Database")
    grants = operator.start("Grant")  # Role and Database are watched for its Grants
    assert [i.name for i in grants.controllers["Grant"].watches] == [
        "grant/role", "grant/database"]
    deps, ready, _ = converge(operator)

    assert deps != float("inf")
    assert ready - deps < DEADLINE, f"Grant Ready {ready - deps:.2f}s after its dependencies"
