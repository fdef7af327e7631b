"""Which Secrets the operator reads from the API server for the PostgreSQL kinds.

The operator runs as ``lifecycle run`` wires it (:func:`~lifecycle.driver.cache.cached_manager`
with its Secret informer, which holds only the Secrets labelled
``lifecycle.dev/connection-secret=true``, and an informer on each Secret a
ProviderConfig names) against the embedded API and the real kube-apiserver, with
the benchmark's workload at small scale: Roles with generated passwords and a
connection Secret, Databases owned by them, Grants, all under one ProviderConfig
whose admin Secret is in the operator's namespace. Every ``get`` the operator
sends to the server is counted, by kind and name.

* to Ready, the only Secret reads that reach the server are the take-over checks of
  the Databases' and Grants' connection Secrets (``<name>-connection``; kinds without
  a password), at most one per object, each finding nothing: the label-selected store
  never holds a Secret the operator did not label, so its miss cannot tell "absent"
  from "someone else's", and a new object naming another's Secret must be refused
  before it commits anything. A Role (password kind) creates its Secret and takes the
  store's miss for absence, since the create itself tells otherwise; the admin Secret
  is answered by its own informer;
* deleting them reads no Secret from the server;
* that read is what refuses, before anything is committed, a Database whose
  connection Secret is someone else's (unlabelled, so never in the store): no
  finalizer, no database in PostgreSQL, the Secret untouched;
* the counter sees credential reads when the operator does not follow the
  ProviderConfig's Secret (the check is not blind).
"""

from __future__ import annotations

import collections
import contextlib
import functools
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from envtest_helpers import SERVERS
from postgres_helpers import query, unique

from lifecycle.core.kind import PROVIDER_CONFIG_API, PROVIDER_CONFIG_KIND
from lifecycle.core.references import is_ready
from lifecycle.driver.cache import cached_manager
from lifecycle.driver.cluster import KubeCluster, api_client
from lifecycle.driver.informer import InformerOptions
from lifecycle.driver.manager import Manager, ManagerOptions
from lifecycle.kube.errors import NotFound
from lifecycle.machines import postgres as pg
from lifecycle.providers.postgres.connector import PostgresConnector
from lifecycle.providers.postgres.database import DatabaseClient
from lifecycle.providers.postgres.fields import API_VERSION
from lifecycle.providers.postgres.grant import GrantClient
from lifecycle.providers.postgres.role import RoleClient
from lifecycle.providers.postgres.scenarios.testing import PostgresServer

pytestmark = pytest.mark.postgres

FAST = InformerOptions(resync=0, watch_timeout=10.0, inactivity_timeout=3.0,
                       backoff_base=0.05, backoff_cap=0.5)
KINDS = [pg.Role, pg.Database, pg.Grant]
N = 3


def pairs() -> list[Any]:
    """The PostgreSQL kinds as shipped, with their connectors."""
    return [(pg.Role, PostgresConnector(RoleClient)),
            (pg.Database, PostgresConnector(DatabaseClient)),
            (pg.Grant, PostgresConnector(GrantClient))]


class Counted:
    """The ``get`` calls one :class:`KubeCluster` sends, as ``(kind, name)``."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.watched: KubeCluster | None = None
        self.gets: collections.Counter[tuple[str, str]] = collections.Counter()
        original = KubeCluster.get
        counter = self

        def get(cluster: KubeCluster, api_version: str, kind: str, namespace: str | None,
                name: str) -> dict[str, Any]:
            if cluster is counter.watched:
                counter.gets[(kind, name)] += 1
            return original(cluster, api_version, kind, namespace, name)

        monkeypatch.setattr(KubeCluster, "get", get)

    def secrets(self) -> collections.Counter[str]:
        """The Secret names read, with how often."""
        return collections.Counter({name: n for (kind, name), n in self.gets.items()
                                    if kind == "Secret"})


def wait_for(done: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"{what} did not happen within {timeout:.0f} s"
        time.sleep(0.1)


@pytest.fixture(params=SERVERS)
def client(request: pytest.FixtureRequest) -> Iterator[Callable[[], Any]]:
    """A factory of API clients of the embedded API (``serve``) or the real server."""
    if request.param == "serve":
        from lifecycle.sim.embedded import embedded_cluster

        http = embedded_cluster(KINDS, seed_config=False)
        try:
            yield lambda: api_client(host=http.url)
        finally:
            http.stop()
            http.api.close()
    else:
        real = request.getfixturevalue("real_cluster")
        real.install_crds(KINDS)
        yield lambda: api_client(kubeconfig=str(Path(real.kubeconfig)))


class Workload:
    """A namespace with a ProviderConfig (its admin Secret beside the objects), N Roles,
    Databases and Grants shaped as the end-to-end benchmark shapes them, and an operator."""

    def __init__(self, client: Callable[[], Any], server: PostgresServer,
                 counted: Counted) -> None:
        self.admin = KubeCluster(client(), KINDS)
        self.client = client
        self.counted = counted
        self.namespace = f"t-{uuid.uuid4().hex[:8]}"
        self.config = f"pg-{uuid.uuid4().hex[:8]}"
        self.secret = f"{self.config}-admin"
        self.admin.create({"apiVersion": "v1", "kind": "Namespace",
                           "metadata": {"name": self.namespace}})
        self.admin.create({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                           "metadata": {"name": self.secret, "namespace": self.namespace},
                           "stringData": {"username": server.user,
                                          "password": server.password}})
        self.admin.create({
            "apiVersion": PROVIDER_CONFIG_API, "kind": PROVIDER_CONFIG_KIND,
            "metadata": {"name": self.config},
            "spec": {"host": server.host, "port": server.port, "sslmode": "disable",
                     "credentials": {"secretRef": {"name": self.secret,
                                                   "namespace": self.namespace}}}})
        self.docs = self._manifests()
        self.manager: Manager | None = None

    def _manifests(self) -> list[dict[str, Any]]:
        roles = [unique("sr_r") for _ in range(N)]
        out = []
        for i in range(N):
            database = unique("sr_d")
            for kind, params, external in (
                    ("Role", {"login": True, "connectionLimit": 10}, roles[i]),
                    ("Database", {"owner": roles[i], "connectionLimit": 10}, database),
                    ("Grant", {"role": roles[(i + 1) % N], "database": database,
                               "privileges": ["CONNECT", "CREATE"]}, None)):
                meta: dict[str, Any] = {"name": f"{kind.lower()}-{i}",
                                        "namespace": self.namespace}
                if external:
                    meta["annotations"] = {"lifecycle.dev/external-name": external}
                spec: dict[str, Any] = {"forProvider": params,
                                        "providerConfigRef": {"name": self.config}}
                if kind == "Role":
                    spec["writeConnectionSecretToRef"] = {"name": f"role-{i}-conn"}
                out.append({"apiVersion": API_VERSION, "kind": kind, "metadata": meta,
                            "spec": spec})
        return out

    def start(self, *, supporting: bool = True) -> Manager:
        """The operator as ``lifecycle run`` wires it (its reads counted)."""
        cluster = KubeCluster(self.client(), KINDS)
        self.counted.watched = cluster
        manager = self.manager = cached_manager(cluster, pairs(), ManagerOptions(
            namespace=self.namespace, informer=FAST, qps=200, burst=200),
            secrets=True, supporting=supporting).start()
        assert manager.wait_synced(30) and manager.cluster.wait_synced(30)
        if supporting:
            # The ProviderConfig informer starts the admin Secret's own informer when it
            # first shows the config, which may be just after it reports synced; a pass
            # in between reads the Secret from the API server, once. Wait for it.
            ident = ("v1", "Secret", self.namespace, self.secret)
            wait_for(lambda: ident in manager.cluster._named, 30.0,
                     "the admin Secret's informer")
            assert manager.cluster.wait_synced(30)
        return manager

    def names(self) -> list[tuple[str, str]]:
        return [(d["kind"], d["metadata"]["name"]) for d in self.docs]

    def to_ready(self) -> None:
        # The Grants come once their databases are Ready: a Grant checked in the moment
        # between CREATE DATABASE and the database's mark is refused and retried before it
        # takes ownership, and would read its Secret twice (tests/test_postgres_policy.py).
        for grants in (False, True):
            for doc in self.docs:
                if (doc["kind"] == "Grant") == grants:
                    self.admin.create(doc)
            wanted = [(k, n) for k, n in self.names() if grants or k != "Grant"]
            wait_for(functools.partial(self.all_ready, wanted), 120.0, "every object Ready")

    def all_ready(self, wanted: list[tuple[str, str]]) -> bool:
        """Whether every object of ``wanted`` (kind, name) is Ready."""
        return all(is_ready(self.admin.get(API_VERSION, k, self.namespace, n))
                   for k, n in wanted)

    def delete(self) -> None:
        for kind, name in reversed(self.names()):
            self.admin.delete(API_VERSION, kind, self.namespace, name)
        wait_for(lambda: not any(self.admin.list(API_VERSION, k, self.namespace)[0]
                                 for k in ("Grant", "Database", "Role")), 120.0,
                 "every object gone")

    def _config_exists(self) -> bool:
        try:
            self.admin.get(PROVIDER_CONFIG_API, PROVIDER_CONFIG_KIND, None, self.config)
        except NotFound:
            return False
        return True

    def stop(self) -> None:
        try:
            if self.manager is not None:
                for kind, name in reversed(self.names()):
                    with contextlib.suppress(NotFound):
                        self.admin.delete(API_VERSION, kind, self.namespace, name)
                wait_for(lambda: not any(self.admin.list(API_VERSION, k, self.namespace)[0]
                                         for k in ("Grant", "Database", "Role")), 120.0,
                         "every object gone")
                self.admin.delete(PROVIDER_CONFIG_API, PROVIDER_CONFIG_KIND, None, self.config)
                wait_for(lambda: not self._config_exists(), 30.0, "the ProviderConfig gone")
        finally:
            if self.manager is not None:
                self.manager.stop()
            self.admin.delete("v1", "Namespace", None, self.namespace)


@pytest.fixture
def workload(client: Callable[[], Any], server: PostgresServer,
             monkeypatch: pytest.MonkeyPatch) -> Iterator[Workload]:
    found = Workload(client, server, Counted(monkeypatch))
    try:
        yield found
    finally:
        found.stop()


def test_to_ready_only_the_take_over_checks_of_kinds_without_a_password_read_secrets(
        workload: Workload) -> None:
    workload.start()
    workload.to_ready()
    read = workload.counted.secrets()
    checks = {f"{kind.lower()}-{i}-connection" for kind in ("Database", "Grant")
              for i in range(N)}
    assert set(read) <= checks, f"Secrets read from the API server: {dict(read)}"
    assert all(n == 1 for n in read.values()), dict(read)
    # Nothing of the Roles' (their Secrets are created, then served by the store), and
    # never the ProviderConfig's admin Secret (its own informer).
    assert not {name for name in read if name.startswith("role-")}
    assert workload.secret not in read
    # None of the checked Secrets exists: only the Databases publish details (a create).
    for name in read:
        if name.startswith("grant-"):
            with pytest.raises(NotFound):
                workload.admin.get("v1", "Secret", workload.namespace, name)
    workload.counted.gets.clear()
    workload.delete()
    assert not workload.counted.secrets(), dict(workload.counted.secrets())


def test_the_counter_sees_the_credentials_read_when_they_are_not_followed(
        workload: Workload) -> None:
    workload.start(supporting=False)
    workload.to_ready()
    assert workload.counted.secrets()[workload.secret] >= 1


def test_the_take_over_read_refuses_another_secret_the_store_never_holds(
        workload: Workload, server: PostgresServer) -> None:
    theirs = workload.admin.create({
        "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": "database-0-connection", "namespace": workload.namespace},
        "stringData": {"password": "theirs"}})
    manager = workload.start()
    role, database = workload.docs[0], workload.docs[1]
    for doc in (role, database):
        workload.admin.create(doc)

    def refused() -> bool:
        obj = workload.admin.get(API_VERSION, "Database", workload.namespace, "database-0")
        return any(c.get("type") == "Failed" and c.get("reason") == "ConnectionSecretNotOwned"
                   for c in (obj.get("status") or {}).get("conditions") or [])

    wait_for(refused, 60.0, "the Database refused")
    obj = workload.admin.get(API_VERSION, "Database", workload.namespace, "database-0")
    assert not obj["metadata"].get("finalizers")
    external = database["metadata"]["annotations"]["lifecycle.dev/external-name"]
    assert query(server, "SELECT 1 FROM pg_database WHERE datname = %s", external) == []
    assert workload.admin.get("v1", "Secret", workload.namespace,
                              "database-0-connection")["data"] == theirs["data"]
    assert workload.counted.secrets()["database-0-connection"] >= 1
    assert manager.cluster.misses >= 1
