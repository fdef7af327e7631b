"""The drift sweep of the PostgreSQL kinds, against the real server and an operator.

The operator runs as ``lifecycle run`` wires it (a cached manager over the embedded API
over HTTP) with Role, Database and Grant kinds whose poll is an hour and whose sweep is
a fraction of a second: a drift made by hand in PostgreSQL is repaired within seconds
only if the sweep finds it. Every wait is on a condition or on the sweeper's counters,
with a deadline; none is a fixed sleep.

* a role's connection limit, a database's connection limit and a database privilege
  changed by hand are put back, each through one key the sweep queued;
* with nothing drifted, sweep after sweep queues nothing, and a reconcile of an object
  with nothing to do makes no API call;
* the connector's sweep names exactly the drifted objects (a checker: it finds each
  kind's drift and nothing in sync);
* a sweep whose reads are taken away (the catalogue still read, nothing queued) leaves
  the drift in place: the sweep is what repaired it;
* a config whose credentials stop working fails its sweep, logged once and without the
  password, while the other config's objects are still swept and repaired.
"""

from __future__ import annotations

import base64
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import attrs
import pytest
from postgres_helpers import execute, query, unique
from psycopg import sql

from lifecycle.core.kind import PROVIDER_CONFIG_API, PROVIDER_CONFIG_KIND
from lifecycle.core.references import is_ready
from lifecycle.driver.cache import cached_manager
from lifecycle.driver.cluster import KubeCluster, api_client
from lifecycle.driver.informer import InformerOptions
from lifecycle.driver.manager import Manager, ManagerOptions
from lifecycle.machines import postgres as pg
from lifecycle.providers.postgres.connector import PostgresConnector
from lifecycle.providers.postgres.database import DatabaseClient
from lifecycle.providers.postgres.fields import API_VERSION
from lifecycle.providers.postgres.grant import GrantClient
from lifecycle.providers.postgres.role import RoleClient
from lifecycle.providers.postgres.scenarios.testing import PostgresServer, manifest
from lifecycle.sim import http as sim_http

pytestmark = pytest.mark.postgres

FAST = InformerOptions(resync=3600.0, watch_timeout=10.0, inactivity_timeout=3.0,
                       backoff_base=0.05, backoff_cap=0.5)
#: The test kinds' timing: a poll far beyond every deadline, a short sweep.
SWEPT = attrs.evolve(pg.SQL_TIMING, poll=3600.0, jitter=0.0, sweep=0.3)
#: How long a drift may take to be repaired (many sweeps; the poll is an hour away).
DEADLINE = 20.0


class SweptRole(pg.RoleMachine):
    """A Role polled hourly and swept often."""

    timing = SWEPT


class SweptDatabase(pg.DatabaseMachine):
    """A Database polled hourly and swept often."""

    timing = SWEPT


class SweptGrant(pg.GrantMachine):
    """A Grant polled hourly and swept often."""

    timing = SWEPT


class Muted(PostgresConnector):
    """Reads the catalogue as the real connector does, and reports no drift."""

    def sweep(self, *args: Any, **kwargs: Any) -> dict[Any, str]:
        super().sweep(*args, **kwargs)
        return {}


def swept_pairs(connector: type[PostgresConnector] = PostgresConnector) -> list[Any]:
    """Role, Database and Grant with the swept timing, and their connectors."""
    return [(attrs.evolve(pg.Role, machine=SweptRole), connector(RoleClient)),
            (attrs.evolve(pg.Database, machine=SweptDatabase), connector(DatabaseClient)),
            (attrs.evolve(pg.Grant, machine=SweptGrant), connector(GrantClient))]


class Operator:
    """The embedded API over HTTP (its requests counted), ProviderConfigs on the server,
    and the operator."""

    def __init__(self, server: PostgresServer, monkeypatch: pytest.MonkeyPatch) -> None:
        from lifecycle.sim.embedded import embedded_cluster

        self.server = server
        self.requests = 0
        self.lock = threading.Lock()
        original = sim_http._Handler._dispatch

        def counted(handler: Any, method: str) -> None:
            if "watch=" not in handler.path:
                with self.lock:
                    self.requests += 1
            original(handler, method)

        monkeypatch.setattr(sim_http._Handler, "_dispatch", counted)
        kinds = [k for k, _ in swept_pairs()]
        self.http = embedded_cluster(kinds, bookmark_interval=0.5, seed_config=False)
        self.cluster = KubeCluster(api_client(host=self.http.url), kinds)
        self.namespace = f"t-{uuid.uuid4().hex[:8]}"
        self.cluster.create({"apiVersion": "v1", "kind": "Namespace",
                             "metadata": {"name": self.namespace}})
        self.manager: Manager | None = None

    def config(self, name: str, user: str, password: str) -> None:
        """A ProviderConfig ``name`` on the server, its credentials in a Secret."""
        self.cluster.create({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                             "metadata": {"name": f"{name}-admin", "namespace": "default"},
                             "stringData": {"username": user, "password": password}})
        self.cluster.create({
            "apiVersion": PROVIDER_CONFIG_API, "kind": PROVIDER_CONFIG_KIND,
            "metadata": {"name": name},
            "spec": {"host": self.server.host, "port": self.server.port, "sslMode": "disable",
                     "credentials": {"source": "Secret", "secretRef": {
                         "name": f"{name}-admin", "namespace": "default"}}}})

    def start(self, pairs: list[Any]) -> Manager:
        """The operator for ``pairs``, as ``lifecycle run`` wires it."""
        options = ManagerOptions(informer=FAST, qps=200, burst=200)
        cluster = KubeCluster(api_client(host=self.http.url), [k for k, _ in pairs])
        self.manager = cached_manager(cluster, pairs, options, secrets=True).start()
        assert self.manager.wait_synced(30) and self.manager.cluster.wait_synced(30)
        return self.manager

    @property
    def sweeper(self) -> Any:
        assert self.manager is not None and self.manager.sweeper is not None
        return self.manager.sweeper

    def get(self, kind: str, name: str) -> dict[str, Any]:
        return self.cluster.get(API_VERSION, kind, self.namespace, name)

    def apply(self, doc: dict[str, Any]) -> None:
        doc["metadata"]["namespace"] = self.namespace
        self.cluster.create(doc)

    def stop(self) -> None:
        if self.manager is not None:
            for kind in ("Grant", "Database", "Role"):
                for obj in self.cluster.list(API_VERSION, kind, self.namespace)[0]:
                    self.cluster.delete(API_VERSION, kind, self.namespace,
                                        obj["metadata"]["name"])
            wait_for(lambda: not any(self.cluster.list(API_VERSION, k, self.namespace)[0]
                                     for k in ("Grant", "Database", "Role")), 60.0,
                     "every object gone")
            self.manager.stop()
        self.http.stop()
        self.http.api.close()


def wait_for(done: Callable[[], bool], timeout: float = DEADLINE,
             what: str = "the condition") -> None:
    """Wait until ``done()``, failing after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"{what} did not happen within {timeout:.0f} s"
        time.sleep(0.05)


@pytest.fixture
def operator(server: PostgresServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[Operator]:
    found = Operator(server, monkeypatch)
    try:
        yield found
    finally:
        found.stop()


@attrs.frozen
class Trio:
    """A Role, a Database it owns and a Grant of CONNECT and CREATE on it to a second
    Role, all Ready; their PostgreSQL names."""

    owner: str
    grantee: str
    database: str


def make_trio(operator: Operator, config: str = "default", tag: str = "") -> Trio:
    trio = Trio(unique("sw_o"), unique("sw_g"), unique("sw_d"))
    ref = {"providerConfigRef": {"name": config}}
    docs = [manifest("Role", f"owner{tag}", external_name=trio.owner, login=True,
                     connection_limit=10),
            manifest("Role", f"grantee{tag}", external_name=trio.grantee, login=True),
            manifest("Database", f"db{tag}", external_name=trio.database, owner=trio.owner,
                     connection_limit=10),
            manifest("Grant", f"grant{tag}", role=trio.grantee, database=trio.database,
                     privileges=["CONNECT", "CREATE"])]
    for doc in docs:
        doc["spec"].update(ref)
        operator.apply(doc)
    names = [(d["kind"], d["metadata"]["name"]) for d in docs]
    wait_for(lambda: all(is_ready(operator.get(k, n)) for k, n in names), 60.0,
             "every object Ready")
    return trio


def drift(server: PostgresServer, trio: Trio) -> None:
    """The three drifts the benchmark makes by hand."""
    execute(server, sql.SQL("ALTER ROLE {} CONNECTION LIMIT 5").format(
        sql.Identifier(trio.owner)))
    execute(server, sql.SQL("ALTER DATABASE {} CONNECTION LIMIT 5").format(
        sql.Identifier(trio.database)))
    execute(server, sql.SQL("REVOKE CREATE ON DATABASE {} FROM {}").format(
        sql.Identifier(trio.database), sql.Identifier(trio.grantee)))


def repaired(server: PostgresServer, trio: Trio) -> bool:
    role = query(server, "SELECT rolconnlimit FROM pg_roles WHERE rolname = %s", trio.owner)
    db = query(server, "SELECT datconnlimit FROM pg_database WHERE datname = %s",
               trio.database)
    create = query(server, "SELECT has_database_privilege(%s, %s, 'CREATE')",
                   trio.grantee, trio.database)
    return role == [(10,)] and db == [(10,)] and create == [(True,)]


def sweeps_pass(operator: Operator, count: int = 3) -> None:
    """Wait until every swept kind has been swept ``count`` more times."""
    start = operator.sweeper.sweeps
    wait_for(lambda: operator.sweeper.sweeps >= start + 3 * count, DEADLINE,
             f"{count} more sweeps")


def test_a_drift_made_by_hand_is_repaired_by_the_sweep_long_before_the_poll(
        operator: Operator, server: PostgresServer) -> None:
    operator.config("default", server.user, server.password)
    operator.start(swept_pairs())
    trio = make_trio(operator)
    sweeps_pass(operator)
    before = operator.sweeper.enqueued
    drift(server, trio)
    assert not repaired(server, trio)
    wait_for(lambda: repaired(server, trio), DEADLINE, "the repair")
    sweeps_pass(operator)
    # One key per drifted object: the owner Role, the Database and the Grant.
    assert operator.sweeper.enqueued - before == 3


def test_with_nothing_drifted_the_sweep_queues_nothing_and_a_reconcile_calls_no_api(
        operator: Operator, server: PostgresServer) -> None:
    operator.config("default", server.user, server.password)
    manager = operator.start(swept_pairs())
    make_trio(operator)
    sweeps_pass(operator, 5)
    # Creating them was the operator's own doing, recorded by the passes that did it.
    assert operator.sweeper.enqueued == 0
    # What a sweep's key costs when there is nothing to do: a reconcile, no API call.
    passes = {"count": 0}
    for controller in manager.controllers.values():
        reconciler = controller.reconciler

        class Counting:
            def __init__(self, inner: Any) -> None:
                self.inner = inner

            def reconcile(self, namespace: str | None, name: str) -> Any:
                try:
                    return self.inner.reconcile(namespace, name)
                finally:
                    passes["count"] += 1

            def __getattr__(self, attr: str) -> Any:
                return getattr(self.inner, attr)

        controller.reconciler = Counting(reconciler)
    with operator.lock:
        requests = operator.requests
    keys = [(kind, (operator.namespace, name)) for kind, name in (
        ("Role", "owner"), ("Role", "grantee"), ("Database", "db"), ("Grant", "grant"))]
    for kind, key in keys:
        manager.controllers[kind].enqueue(key)
    wait_for(lambda: passes["count"] >= len(keys), DEADLINE, "the reconciles")
    wait_for(lambda: all(not len(c.queue) and not c.queue.in_flight()
                         for c in manager.controllers.values()), DEADLINE, "an idle queue")
    with operator.lock:
        assert operator.requests == requests


def test_the_connector_names_exactly_the_drifted_objects(
        operator: Operator, server: PostgresServer) -> None:
    operator.config("default", server.user, server.password)
    manager = operator.start(swept_pairs())
    trio = make_trio(operator)
    from lifecycle.runtime.reads import provider_config

    config = provider_config(manager.cluster, "default")

    def named() -> set[tuple[str, str]]:
        out = set()
        for kind, connector in swept_pairs():
            objects = operator.cluster.list(API_VERSION, kind.kind, operator.namespace)[0]
            out |= {(kind.kind, key[1]) for key in connector.sweep(kind, config, objects)}
        return out

    manager.stop()  # nothing repairs the drift while it is looked at
    operator.manager = None
    assert named() == set()
    drift(server, trio)
    assert named() == {("Role", "owner"), ("Database", "db"), ("Grant", "grant")}
    execute(server, sql.SQL("DROP DATABASE {}").format(sql.Identifier(trio.database)))
    # A database gone is drifted too, and so is the Grant on it.
    assert named() == {("Role", "owner"), ("Database", "db"), ("Grant", "grant")}
    operator.start(swept_pairs())  # to clean up: the objects are deleted by the operator


def test_without_the_sweeps_keys_the_drift_stays_until_the_poll(
        operator: Operator, server: PostgresServer) -> None:
    operator.config("default", server.user, server.password)
    operator.start(swept_pairs(Muted))
    trio = make_trio(operator)
    drift(server, trio)
    sweeps_pass(operator, 5)
    assert not repaired(server, trio)
    assert operator.sweeper.enqueued == 0


def test_a_config_whose_credentials_fail_logs_once_without_secrets_and_others_still_work(
        operator: Operator, server: PostgresServer, caplog: pytest.LogCaptureFixture) -> None:
    operator.config("default", server.user, server.password)
    flaky_admin, lost = unique("sw_admin"), "pw-" + uuid.uuid4().hex
    execute(server, sql.SQL("CREATE ROLE {} LOGIN SUPERUSER PASSWORD {}").format(
        sql.Identifier(flaky_admin), sql.Literal(lost)))
    operator.config("flaky", flaky_admin, lost)
    operator.start(swept_pairs())
    good = make_trio(operator)
    make_trio(operator, "flaky", tag="-flaky")
    wrong = "wrong-" + uuid.uuid4().hex
    caplog.set_level(logging.DEBUG, logger="lifecycle")
    set_password(operator, "flaky-admin", flaky_admin, wrong)
    failures = operator.sweeper.failures
    wait_for(lambda: operator.sweeper.failures >= failures + 9, DEADLINE,
             "the flaky config's sweeps failing")
    drift(server, good)
    wait_for(lambda: repaired(server, good), DEADLINE, "the repair on the good config")
    warnings = [r for r in caplog.records if r.name == "lifecycle.driver.sweep"
                and r.levelno == logging.WARNING]
    # One warning per swept kind on the flaky config, however many sweeps failed.
    assert len(warnings) == 3, [r.getMessage() for r in warnings]
    assert all("'flaky'" in r.getMessage() and "InvalidCredentials" in r.getMessage()
               for r in warnings)
    for secret_value in (wrong, lost, server.password):
        assert secret_value not in caplog.text
    # The flaky config's objects are left as they were: Ready until their own poll.
    assert is_ready(operator.get("Role", "owner-flaky"))
    set_password(operator, "flaky-admin", flaky_admin, lost)  # so they can be deleted
    failures = operator.sweeper.failures
    sweeps_pass(operator, 2)
    assert operator.sweeper.failures == failures or any(
        "works again" in r.getMessage() for r in caplog.records)


def set_password(operator: Operator, secret: str, user: str, password: str) -> None:
    """Replace the credentials Secret ``secret`` with ``user`` and ``password``."""
    found = operator.cluster.get("v1", "Secret", "default", secret)
    operator.cluster.replace({
        "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": secret, "namespace": "default",
                     "resourceVersion": found["metadata"]["resourceVersion"]},
        "data": {"username": base64.b64encode(user.encode()).decode(),
                 "password": base64.b64encode(password.encode()).decode()}})
