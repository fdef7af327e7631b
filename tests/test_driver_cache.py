"""The cached reader: reads from informer stores, writes through with resourceVersion guards."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from lifecycle.core.errors import TerminalError
from lifecycle.core.kind import CONNECTION_SECRET_LABEL, EXTERNAL_NAME
from lifecycle.driver.cache import WRITTEN_TTL, CachedCluster, cached_manager
from lifecycle.driver.cluster import KubeCluster, api_client
from lifecycle.driver.informer import InformerOptions
from lifecycle.driver.manager import ManagerOptions
from lifecycle.kube.errors import AlreadyExists, Conflict, NotFound, TooManyRequests
from lifecycle.kube.resources import ResourceType
from lifecycle.kube.sharing import SharedObjectChanged
from lifecycle.machines.database import DatabaseInstance
from lifecycle.providers.simcloud import DatabaseConnector, SimCloud
from lifecycle.providers.simcloud.scenarios.harness import database_manifest
from lifecycle.runtime.secrets import ConnectionSecrets, decode
from lifecycle.sim.apiserver import EmbeddedAPI
from lifecycle.sim.embedded import embedded_cluster
from lifecycle.sim.http import APIServerHTTP
from lifecycle.testing import Environment

API, KIND = "v1", "ConfigMap"


class Counting:
    """The embedded API as the underlying cluster, counting the calls that reach it."""

    def __init__(self) -> None:
        self.api = EmbeddedAPI()
        self.calls: list[str] = []

    def info(self, api_version: str, kind: str) -> ResourceType:
        return self.api.resource_type(api_version, kind)

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.api, name)

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls.append(name)
            return method(*args, **kwargs)

        return counted


class Store:
    """A store in step with the embedded API only when told (an informer that lags)."""

    def __init__(self, synced: bool = True) -> None:
        self.synced = threading.Event()
        if synced:
            self.synced.set()
        self.objects: dict[tuple[str | None, str], dict[str, Any]] = {}

    def get(self, key: tuple[str | None, str]) -> dict[str, Any] | None:
        return self.objects.get(key)

    def put(self, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        self.objects[(meta.get("namespace"), meta["name"])] = obj


def configmap(name: str, value: str = "a") -> dict[str, Any]:
    return {"apiVersion": API, "kind": KIND,
            "metadata": {"name": name, "namespace": "default"}, "data": {"k": value}}


@pytest.fixture
def setup() -> tuple[Counting, Store, CachedCluster]:
    inner, store = Counting(), Store()
    cached = CachedCluster(inner)  # type: ignore[arg-type]
    cached.serve_from(API, KIND, store, complete=True)
    return inner, store, cached


def test_reads_come_from_a_synced_store_shared(setup):
    inner, store, cached = setup
    store.put(inner.api.create(configmap("a")))
    inner.calls.clear()
    got = cached.get(API, KIND, "default", "a")
    assert got is store.get(("default", "a"))  # the store's object itself, no copy
    assert got["data"] == {"k": "a"} and inner.calls == []
    assert cached.hits == 1 and cached.misses == 0


def test_a_caller_changing_a_shared_object_is_caught(setup):
    inner, store, cached = setup
    assert cached.detector.enabled  # the test suite turns the detector on
    store.put(inner.api.create(configmap("a")))
    cached.get(API, KIND, "default", "a")["data"]["k"] = "changed"
    with pytest.raises(SharedObjectChanged, match=r"ConfigMap default/a .* at \.data\.k"):
        cached.get(API, KIND, "default", "a")  # handed out again: checked first
    with pytest.raises(SharedObjectChanged):
        cached.stop()  # the last check, when the manager stops


def test_a_changed_write_result_is_caught_too(setup):
    inner, _, cached = setup
    made = cached.create(configmap("a"))
    made["metadata"]["labels"] = {"mine": "now"}
    with pytest.raises(SharedObjectChanged, match=r"at \.metadata\.labels"):
        cached.check_shared()
    assert inner.api.get(API, KIND, "default", "a")["metadata"].get("labels") is None


def test_without_the_detector_nothing_is_remembered() -> None:
    inner, store = Counting(), Store()
    cached = CachedCluster(inner, detect_mutations=False)  # type: ignore[arg-type]
    cached.serve_from(API, KIND, store, complete=True)
    store.put(inner.api.create(configmap("a")))
    cached.get(API, KIND, "default", "a")["data"]["k"] = "changed"
    cached.stop()
    assert cached.get(API, KIND, "default", "a")["data"] == {"k": "changed"}


def test_an_unsynced_store_is_not_used(setup):
    inner, _, cached = setup
    lagging = Store(synced=False)
    cached.serve_from(API, KIND, lagging, complete=True)
    inner.api.create(configmap("a"))
    inner.calls.clear()
    assert cached.get(API, KIND, "default", "a")["data"] == {"k": "a"}
    assert inner.calls == ["get"]


def test_a_miss_in_a_complete_store_is_not_found_without_a_call(setup):
    inner, _, cached = setup
    with pytest.raises(NotFound):
        cached.get(API, KIND, "default", "absent")
    assert inner.calls == []


def test_a_miss_in_a_partial_store_reads_the_server(setup):
    inner, store, cached = setup
    cached.serve_from(API, KIND, store, complete=False)
    inner.api.create(configmap("a"))
    inner.calls.clear()
    assert cached.get(API, KIND, "default", "a")["data"] == {"k": "a"}
    assert inner.calls == ["get"]


def test_an_own_write_is_read_back_until_the_store_catches_up(setup):
    inner, store, cached = setup
    first = inner.api.create(configmap("a"))
    store.put(first)
    body = cached.get(API, KIND, "default", "a")
    body["data"] = {"k": "b"}
    written = cached.replace(body)
    inner.calls.clear()
    # The store still holds the version before the write: the write is what is read.
    assert cached.get(API, KIND, "default", "a")["data"] == {"k": "b"}
    store.put(written)
    again = cached.get(API, KIND, "default", "a")
    assert again["metadata"]["resourceVersion"] == written["metadata"]["resourceVersion"]
    assert inner.calls == []


def test_a_stale_read_ends_in_a_conflict_and_the_retry_reads_the_server(setup):
    inner, store, cached = setup
    store.put(inner.api.create(configmap("a")))
    other = inner.api.get(API, KIND, "default", "a")
    other["data"] = {"k": "theirs"}
    inner.api.replace(other)  # someone else wrote; the store has not seen it yet
    stale = cached.get(API, KIND, "default", "a")
    stale["data"] = {"k": "ours"}
    with pytest.raises(Conflict):
        cached.replace(stale)
    inner.calls.clear()
    fresh = cached.get(API, KIND, "default", "a")
    assert fresh["data"] == {"k": "theirs"} and inner.calls == ["get"]
    fresh["data"] = {"k": "ours"}
    assert cached.replace(fresh)["data"] == {"k": "ours"}
    # The store still lags: the object just written is what the next read sees.
    assert cached.get(API, KIND, "default", "a")["data"] == {"k": "ours"}


def test_a_remembered_write_gives_way_to_the_store_after_a_while():
    inner, store, now = Counting(), Store(), [0.0]
    cached = CachedCluster(inner, clock=lambda: now[0])  # type: ignore[arg-type]
    cached.serve_from(API, KIND, store, complete=True)
    cached.create(configmap("a"))
    assert cached.get(API, KIND, "default", "a")["data"] == {"k": "a"}
    now[0] += 60  # the informer never delivered it (it was deleted meanwhile)
    with pytest.raises(NotFound):
        cached.get(API, KIND, "default", "a")


def test_releasing_the_last_finalizer_of_a_deleting_object_is_not_remembered(setup):
    inner, store, cached = setup
    body = configmap("a")
    body["metadata"]["finalizers"] = ["lifecycle.dev/finalizer"]
    store.put(cached.create(body))
    inner.api.delete(API, KIND, "default", "a")
    deleting = inner.api.get(API, KIND, "default", "a")
    store.put(deleting)
    deleting["metadata"]["finalizers"] = []
    cached.replace(deleting)
    store.objects.clear()  # the informer saw the deletion
    with pytest.raises(NotFound):
        cached.get(API, KIND, "default", "a")


def test_kinds_without_a_store_and_deletes_go_to_the_server(setup):
    inner, store, cached = setup
    inner.api.create({"apiVersion": "v1", "kind": "Secret",
                      "metadata": {"name": "s", "namespace": "default"}})
    inner.calls.clear()
    cached.get("v1", "Secret", "default", "s")
    assert inner.calls == ["get"]
    store.put(inner.api.create(configmap("a")))
    cached.delete(API, KIND, "default", "a")
    inner.calls.clear()
    with pytest.raises(NotFound):
        cached.get(API, KIND, "default", "a")  # the store still has it; the server does not
    assert inner.calls == ["get"]


def test_hits_count_every_read_the_store_answers_and_misses_say_what_is_missing(setup):
    inner, store, cached = setup
    store.put(inner.api.create(configmap("a")))
    for _ in range(3):
        cached.get(API, KIND, "default", "a")
    assert (cached.hits, cached.misses) == (3, 0)
    with pytest.raises(NotFound) as missing:
        cached.get(API, KIND, "default", "absent")
    assert str(missing.value) == 'configmaps "absent" not found'
    assert cached.hits == 4


def test_what_the_cache_does_not_define_is_the_clusters(setup):
    inner, _, cached = setup
    assert cached.info(API, KIND) == inner.api.resource_type(API, KIND)
    cached.reset_stats()  # forwarded, and counted by the cluster underneath
    assert inner.calls[-1] == "reset_stats"


def test_a_cluster_scoped_kind_is_found_whatever_namespace_the_caller_passes():
    inner, store = Counting(), Store()
    cached = CachedCluster(inner)  # type: ignore[arg-type]
    cached.serve_from("v1", "Namespace", store, complete=True)
    store.put(inner.api.create({"apiVersion": "v1", "kind": "Namespace",
                                "metadata": {"name": "team"}}))
    inner.calls.clear()
    assert cached.get("v1", "Namespace", "some-namespace", "team")["metadata"]["name"] == "team"
    assert inner.calls == []


def test_a_remembered_write_is_preferred_until_exactly_the_ttl():
    inner, store, now = Counting(), Store(), [0.0]
    cached = CachedCluster(inner, clock=lambda: now[0])  # type: ignore[arg-type]
    cached.serve_from(API, KIND, store, complete=True)
    store.put(inner.api.create(configmap("a")))
    read = cached.get(API, KIND, "default", "a")
    cached.replace({**read, "data": {"k": "b"}})  # the store still holds "a"
    now[0] = WRITTEN_TTL - 0.001
    hits = cached.hits
    assert cached.get(API, KIND, "default", "a")["data"] == {"k": "b"}
    assert cached.hits == hits + 1  # answered from memory: a hit
    now[0] = WRITTEN_TTL
    assert cached.get(API, KIND, "default", "a")["data"] == {"k": "a"}
    assert cached.hits == hits + 2


def test_opaque_versions_are_caught_up_only_once_the_store_moves_off_the_base():
    class Opaque:
        """A cluster whose resourceVersions are not numbers."""

        def __init__(self) -> None:
            self.version = 0

        def info(self, api_version: str, kind: str) -> ResourceType:
            return ResourceType("", "v1", kind, kind.lower() + "s", namespaced=True)

        def replace(self, obj: dict[str, Any]) -> dict[str, Any]:
            self.version += 1
            return {**obj, "metadata": {**obj["metadata"],
                                        "resourceVersion": f"opaque-{self.version}"}}

    store = Store()
    cached = CachedCluster(Opaque())  # type: ignore[arg-type]
    cached.serve_from(API, KIND, store, complete=True)
    base = {**configmap("a"), "metadata": {"name": "a", "namespace": "default",
                                           "resourceVersion": "opaque-base"}}
    store.put(base)
    cached.replace({**base, "data": {"k": "b"}})
    # The store still shows the version the write was based on: the write is read.
    assert cached.get(API, KIND, "default", "a")["data"] == {"k": "b"}
    store.put({**base, "data": {"k": "c"},
               "metadata": {**base["metadata"], "resourceVersion": "opaque-9"}})
    assert cached.get(API, KIND, "default", "a")["data"] == {"k": "c"}


def test_a_deleted_object_is_not_served_from_what_was_written_before(setup):
    _, _, cached = setup
    cached.create(configmap("a"))  # remembered; the store has not seen it
    cached.delete(API, KIND, "default", "a")
    for _ in range(2):
        with pytest.raises(NotFound):
            cached.get(API, KIND, "default", "a")


def test_lists_pass_namespace_and_selector_through(setup):
    inner, _, cached = setup
    inner.api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}})
    for name, labels, namespace in (("a", {"t": "x"}, "default"), ("b", {"t": "y"}, "default"),
                                    ("c", {"t": "x"}, "other")):
        body = configmap(name)
        body["metadata"].update(labels=labels, namespace=namespace)
        inner.api.create(body)
    items, _ = cached.list(API, KIND, "default", "t=x")
    assert [o["metadata"]["name"] for o in items] == ["a"]


# ------------------------------------- lookup: a create follows a miss
def secret_setup() -> tuple[Counting, Store, CachedCluster]:
    inner, store = Counting(), Store()
    cached = CachedCluster(inner)  # type: ignore[arg-type]
    cached.serve_from("v1", "Secret", store, complete=False)  # label-selected: partial
    return inner, store, cached


def owner(uid: str = "uid-1") -> dict[str, Any]:
    return {"apiVersion": DatabaseInstance.api_version, "kind": DatabaseInstance.kind,
            "metadata": {"name": "db", "namespace": "default", "uid": uid},
            "spec": {"writeConnectionSecretToRef": {"name": "db-conn"}}}


def test_lookup_answers_a_partial_store_miss_without_a_call(setup):
    inner, store, cached = setup
    cached.serve_from(API, KIND, store, complete=False)
    inner.api.create(configmap("a"))  # on the server, not in the store
    inner.calls.clear()
    assert cached.lookup(API, KIND, "default", "a") is None
    assert inner.calls == []
    store.put(inner.api.get(API, KIND, "default", "a"))
    assert cached.lookup(API, KIND, "default", "a")["data"] == {"k": "a"}
    assert inner.calls == []
    # get still reads what a partial store does not hold from the server
    with pytest.raises(NotFound):
        cached.get(API, KIND, "default", "b")
    assert inner.calls == ["get"]


def test_a_create_that_meets_an_object_sends_the_next_read_to_the_server(setup):
    inner, store, cached = setup
    cached.serve_from(API, KIND, store, complete=False)
    inner.api.create(configmap("a", "theirs"))
    assert cached.lookup(API, KIND, "default", "a") is None
    with pytest.raises(AlreadyExists):
        cached.create(configmap("a", "ours"))
    inner.calls.clear()
    assert cached.lookup(API, KIND, "default", "a")["data"] == {"k": "theirs"}
    assert inner.calls == ["get"]
    inner.calls.clear()
    # What the server said is remembered until the store catches up.
    assert cached.lookup(API, KIND, "default", "a")["data"] == {"k": "theirs"}
    assert inner.calls == []


def test_a_missing_connection_secret_is_created_without_a_read():
    inner, _, cached = secret_setup()
    secrets = ConnectionSecrets(cached, DatabaseInstance, lambda: "new-password")
    assert secrets.ensure_password(owner(), False) == "new-password"
    assert inner.calls == ["create"]
    stored = inner.api.get("v1", "Secret", "default", "db-conn")
    assert decode(stored) == {"password": "new-password"}


def test_a_password_the_store_has_not_seen_is_kept_not_overwritten():
    inner, _, cached = secret_setup()
    first = ConnectionSecrets(inner.api, DatabaseInstance, lambda: "first")
    assert first.ensure_password(owner(), False) == "first"
    inner.calls.clear()
    # A later pass (another process) whose Secret store has not caught up yet.
    secrets = ConnectionSecrets(cached, DatabaseInstance, lambda: "second")
    assert secrets.ensure_password(owner(), False) == "first"
    assert inner.calls == ["create", "get"]  # the create met it; nothing was written
    assert decode(inner.api.get("v1", "Secret", "default", "db-conn")) == {"password": "first"}
    # Details are still merged into it.
    inner.calls.clear()
    secrets.publish(owner(), {"endpoint": "db.example"})
    assert inner.calls == ["replace"]
    assert decode(inner.api.get("v1", "Secret", "default", "db-conn")) == {
        "password": "first", "endpoint": "db.example"}


def test_a_secret_of_someone_else_outside_the_store_is_refused_after_the_create():
    inner, _, cached = secret_setup()
    inner.api.create({"apiVersion": "v1", "kind": "Secret",
                      "metadata": {"name": "db-conn", "namespace": "default"},
                      "data": {"password": "dGhlaXJz"}})
    inner.calls.clear()
    secrets = ConnectionSecrets(cached, DatabaseInstance, lambda: "mine")
    with pytest.raises(TerminalError) as caught:
        secrets.ensure_password(owner(), False)
    assert caught.value.reason == "ConnectionSecretNotOwned"
    assert inner.calls == ["create", "get"]
    assert decode(inner.api.get("v1", "Secret", "default", "db-conn")) == {"password": "theirs"}


class _Served:
    """The harness's API face with the ``info`` a CachedCluster asks its cluster for."""

    def __init__(self, api: Any, types: EmbeddedAPI) -> None:
        self._api = api
        self.info = types.resource_type

    def __getattr__(self, name: str) -> Any:
        return getattr(self._api, name)


def cached_environment() -> tuple[Environment, SimCloud]:
    """A harness whose reconciler reads Secrets through a label-selected (partial) store
    that holds none: every Secret on the server is one the store has not seen."""
    cloud = SimCloud(seed=0, create_polls=0, modify_polls=0, delete_polls=0)
    env = Environment([(DatabaseInstance, DatabaseConnector(cloud))])
    env.provider_config()
    cached = CachedCluster(_Served(env.operator_api, env.api))  # type: ignore[arg-type]
    cached.serve_from("v1", "Secret", Store(), complete=False)
    env.reconcilers[DatabaseInstance.kind].api = cached
    return env, cloud


def test_another_secret_outside_the_store_refuses_the_object_before_anything_is_committed():
    env, cloud = cached_environment()
    env.api.create({"apiVersion": "v1", "kind": "Secret",
                    "metadata": {"name": "db-conn", "namespace": "default"},
                    "data": {"password": "dGhlaXJz"}})
    env.apply(database_manifest("db", annotations={EXTERNAL_NAME: "shared-x"}))
    env.run_until_idle()
    obj = env.get(DatabaseInstance.kind, "db")
    assert obj["metadata"].get("finalizers") in (None, [])
    assert EXTERNAL_NAME in obj["metadata"]["annotations"]  # the user's own annotation only
    assert env.condition(DatabaseInstance.kind, "db", "Failed").reason == "ConnectionSecretNotOwned"
    assert cloud.instances() == {}
    assert env.api.get("v1", "Secret", "default", "db-conn")["data"] == {"password": "dGhlaXJz"}
    # The refused object holds no claim on its external name: another object takes it.
    other = database_manifest("db2", annotations={EXTERNAL_NAME: "shared-x"})
    other["spec"]["writeConnectionSecretToRef"] = {"name": "db2-conn"}
    env.apply(other)
    env.run_until_idle()
    assert env.get(DatabaseInstance.kind, "db2")["status"]["state"] == "ready"
    assert set(cloud.instances()) == {"shared-x"}


def test_an_own_secret_outside_the_store_keeps_its_password_through_the_create():
    env, cloud = cached_environment()
    env.apply(database_manifest("db"))
    obj = env.get(DatabaseInstance.kind, "db")
    # An earlier pass (another process) persisted the password, then stopped.
    ConnectionSecrets(env.api, DatabaseInstance, lambda: "persisted-first-1").ensure_password(obj)
    env.run_until_idle()
    obj = env.get(DatabaseInstance.kind, "db")
    assert obj["status"]["state"] == "ready"
    external = obj["metadata"]["annotations"][EXTERNAL_NAME]
    assert cloud.password_of(external) == "persisted-first-1"
    assert env.secret("db-conn")["password"] == "persisted-first-1"


# ------------------------------------------------------ over the HTTP face
FAST = InformerOptions(resync=0, watch_timeout=10.0, inactivity_timeout=3.0,
                       backoff_base=0.05, backoff_cap=0.5)


@pytest.fixture
def server() -> Iterator[APIServerHTTP]:
    srv = embedded_cluster([DatabaseInstance], bookmark_interval=0.5)
    yield srv
    srv.stop()


def _wait(predicate: Any, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def test_a_cached_manager_brings_objects_to_ready_reading_its_informer(server):
    cluster = KubeCluster(api_client(host=server.url), [DatabaseInstance])
    cloud = SimCloud(seed=0, create_polls=0, modify_polls=0, delete_polls=0)
    manager = cached_manager(cluster, [(DatabaseInstance, DatabaseConnector(cloud))],
                             ManagerOptions(workers=2, informer=FAST))
    manager.start()
    try:
        assert manager.wait_synced(10)
        for i in range(3):
            server.api.create(database_manifest(f"db-{i}"))

        def ready() -> bool:
            items, _ = server.api.list(DatabaseInstance.api_version, DatabaseInstance.kind)
            return len(items) == 3 and all(
                (o.get("status") or {}).get("state") == "ready" for o in items)

        assert _wait(ready)
        items, _ = server.api.list(DatabaseInstance.api_version, DatabaseInstance.kind)
        external = sorted(o["metadata"]["annotations"][EXTERNAL_NAME] for o in items)
        assert len(set(external)) == 3
        for i in range(3):
            server.api.delete(DatabaseInstance.api_version, DatabaseInstance.kind,
                              "default", f"db-{i}")

        def gone() -> bool:
            items, _ = server.api.list(DatabaseInstance.api_version, DatabaseInstance.kind)
            return not items

        assert _wait(gone)
    finally:
        manager.stop()
    cached = manager.cluster
    assert isinstance(cached, CachedCluster)
    assert cached.hits > 0
    assert [cloud.creations(name) for name in external] == [1, 1, 1]  # once each
    assert cloud.snapshot()["instances"] == []  # every external instance deleted


def test_secrets_are_read_from_a_secret_informer_once_synced(server):
    cached = CachedCluster(KubeCluster(api_client(host=server.url)))
    server.api.create({"apiVersion": "v1", "kind": "Secret",
                       "metadata": {"name": "s", "namespace": "default"},
                       "data": {"k": "dg=="}})
    informer = cached.watch_secrets(options=FAST)
    try:
        assert informer.wait_synced(10)
        assert cached.get("v1", "Secret", "default", "s")["data"] == {"k": "dg=="}
        assert cached.misses == 0 and cached.hits == 1
        with pytest.raises(NotFound):
            cached.get("v1", "Secret", "default", "absent")
        # A store of every Secret answers a miss itself.
        assert cached.misses == 0 and cached.hits == 2
    finally:
        cached.stop()


def test_a_secret_informer_of_one_namespace_holds_only_that_namespace(server):
    server.api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}})
    for namespace in ("team", "default"):
        server.api.create({"apiVersion": "v1", "kind": "Secret",
                           "metadata": {"name": "s", "namespace": namespace},
                           "data": {"k": "dg=="}})
    cached = CachedCluster(KubeCluster(api_client(host=server.url)))
    informer = cached.watch_secrets("team", options=FAST)
    try:
        assert informer.wait_synced(10)
        assert [(o["metadata"]["namespace"], o["metadata"]["name"]) for o in informer.items()] == [
            ("team", "s")]
        cached.get("v1", "Secret", "team", "s")
        assert (cached.hits, cached.misses) == (1, 0)
        # Outside the watched namespace the store is not the whole truth: read the server.
        assert cached.get("v1", "Secret", "default", "s")["data"] == {"k": "dg=="}
        assert cached.misses == 1
    finally:
        cached.stop()


def test_a_cached_manager_caches_only_the_connection_secrets_it_writes(server):
    server.api.create({"apiVersion": "v1", "kind": "Secret",
                       "metadata": {"name": "someone-elses", "namespace": "default"},
                       "data": {"k": "dg=="}})
    cluster = KubeCluster(api_client(host=server.url), [DatabaseInstance])
    cloud = SimCloud(seed=0, create_polls=0, modify_polls=0, delete_polls=0)
    manager = cached_manager(cluster, [(DatabaseInstance, DatabaseConnector(cloud))],
                             ManagerOptions(workers=1, informer=FAST), secrets=True)
    cached = manager.cluster
    assert isinstance(cached, CachedCluster)
    manager.start()
    try:
        assert manager.wait_synced(10)
        server.api.create(database_manifest("db-0"))

        def ready() -> bool:
            obj = server.api.get(DatabaseInstance.api_version, DatabaseInstance.kind,
                                 "default", "db-0")
            return (obj.get("status") or {}).get("state") == "ready"

        assert _wait(ready)
        secret = server.api.get("v1", "Secret", "default", "db-0-conn")
        assert secret["metadata"]["labels"] == {CONNECTION_SECRET_LABEL: "true"}
        server.api.reset_stats()
        hits, misses = cached.hits, cached.misses
        assert cached.get("v1", "Secret", "default", "db-0-conn")["data"] == secret["data"]
        assert (cached.hits, cached.misses) == (hits + 1, misses)
        # A Secret without the label is not in the store: it is read from the server.
        assert cached.get("v1", "Secret", "default", "someone-elses")["data"] == {"k": "dg=="}
        assert cached.misses == misses + 1
        assert server.api.stats["get"] == 1
    finally:
        manager.stop()
    assert not any(t.is_alive() for i in cached._informers for t in i._threads)


# ------------------------------------------------ the lean request path
class _Recorder(BaseHTTPRequestHandler):
    seen: list[tuple[str, str, dict[str, str], bytes]] = []

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        headers = {k.lower(): v for k, v in self.headers.items()}
        _Recorder.seen.append((self.command, self.path, headers, body))
        if "missing" in self.path:
            status, doc = 404, {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                "reason": "NotFound", "code": 404, "message": "not found"}
        elif "busy" in self.path:
            status, doc = 429, {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                "reason": "TooManyRequests", "code": 429, "message": "slow"}
        else:
            status = 200
            doc = {"kind": "ConfigMapList", "items": [], "metadata": {"resourceVersion": "7"}}
        raw = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        if status == 429:
            self.send_header("Retry-After", "3")
        self.end_headers()
        self.wfile.write(raw)

    do_GET = do_PUT = do_POST = do_DELETE = do_PATCH = _answer


@pytest.fixture
def recorder() -> Iterator[str]:
    _Recorder.seen = []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_the_lean_path_sends_credentials_paths_and_one_json_body(recorder):
    client = api_client(host=recorder)
    client.configuration.api_key = {"authorization": "t0ken"}
    client.configuration.api_key_prefix = {"authorization": "Bearer"}
    cluster = KubeCluster(client)
    cluster.list("v1", "ConfigMap", "team a", label_selector="app=x,tier in (a,b)")
    body = {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a/b", "namespace": "default", "resourceVersion": "3"},
            "data": {"k": "v"}}
    cluster.replace(body)
    (m1, p1, h1, _), (m2, p2, h2, b2) = _Recorder.seen
    assert m1 == "GET" and p1.startswith("/api/v1/namespaces/team%20a/configmaps?")
    assert "labelSelector=app%3Dx%2Ctier+in+%28a%2Cb%29" in p1
    assert h1["authorization"] == "Bearer t0ken" and h1["accept"] == "application/json"
    assert m2 == "PUT" and p2 == "/api/v1/namespaces/default/configmaps/a%2Fb"
    assert json.loads(b2) == body and h2["content-type"] == "application/json"


def test_the_lean_path_turns_error_statuses_into_the_error_taxonomy(recorder):
    cluster = KubeCluster(api_client(host=recorder))
    with pytest.raises(NotFound):
        cluster.get("v1", "ConfigMap", "default", "missing")
    with pytest.raises(TooManyRequests) as caught:
        cluster.get("v1", "ConfigMap", "default", "busy")
    assert caught.value.retry_after == 3.0
    with pytest.raises(NotFound):
        cluster.replace_status({"apiVersion": "v1", "kind": "ConfigMap",
                                "metadata": {"name": "x", "namespace": "default"}})
    assert len(_Recorder.seen) == 2  # ConfigMaps have no status: refused without a call


def test_watch_events_are_not_turned_into_generated_models(monkeypatch):
    from kubernetes import client as k8s

    from lifecycle.driver.cluster import KubeCluster, api_client
    from lifecycle.sim.apiserver import EmbeddedAPI
    from lifecycle.sim.http import APIServerHTTP

    built: list[str] = []
    original = k8s.ApiClient.deserialize

    def counting(self, response, response_type, *args, **kwargs):
        built.append(str(response_type))
        return original(self, response, response_type, *args, **kwargs)

    monkeypatch.setattr(k8s.ApiClient, "deserialize", counting)
    api = EmbeddedAPI()
    with APIServerHTTP(api) as face:
        cluster = KubeCluster(api_client(host=face.url))
        cluster.create({"apiVersion": "v1", "kind": "Secret",
                        "metadata": {"name": "s", "namespace": "default"}})
        events = cluster.list_watcher("v1", "Secret", "default").watch(
            "0", timeout=1, inactivity=5)
        kind, obj = next(events)
        events.close()
    api.close()
    assert (kind, obj["metadata"]["name"]) == ("ADDED", "s")
    assert built == []
