"""The cached reader's exact rules: versions, wiring, remembered writes and pass-through calls.

Most tests drive :class:`~lifecycle.driver.cache.CachedCluster` over a small
scripted cluster, so resourceVersions can be opaque or missing, scopes can be
chosen per kind, and every call that reaches the cluster is visible.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

import lifecycle.driver.cache as cache_module
from lifecycle.core.kind import CONNECTION_SECRET_LABEL
from lifecycle.driver.cache import CachedCluster, _caught_up, _version, cached_manager
from lifecycle.driver.cluster import KubeCluster, api_client
from lifecycle.driver.informer import InformerOptions
from lifecycle.driver.manager import ManagerOptions
from lifecycle.driver.metrics import OperatorMetrics
from lifecycle.kube.errors import NotFound
from lifecycle.machines.database import DatabaseInstance
from lifecycle.providers.simcloud import DatabaseConnector, SimCloud
from lifecycle.sim.embedded import embedded_cluster
from lifecycle.sim.http import APIServerHTTP

API, KIND = "v1", "ConfigMap"
CLUSTER_API, CLUSTER_KIND = "example.test/v1", "Gadget"


class Scripted:
    """A cluster holding plain objects; ``Gadget`` is cluster-scoped, every other kind not."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str, str | None, str], dict[str, Any]] = {}
        self.calls: list[tuple[Any, ...]] = []
        self.reply: dict[str, Any] | None = None

    def info(self, api_version: str, kind: str) -> SimpleNamespace:
        return SimpleNamespace(namespaced=kind != CLUSTER_KIND)

    def get(self, api_version: str, kind: str, namespace: str | None,
            name: str) -> dict[str, Any]:
        self.calls.append(("get", api_version, kind, namespace, name))
        found = self.objects.get((api_version, kind, namespace, name))
        if found is None:
            raise NotFound(f"{name} not found")
        return dict(found)

    def _answer(self, verb: str, obj: dict[str, Any]) -> dict[str, Any]:
        self.calls.append((verb, obj["metadata"].get("name")))
        return dict(self.reply if self.reply is not None else obj)

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        return self._answer("create", obj)

    def replace(self, obj: dict[str, Any]) -> dict[str, Any]:
        return self._answer("replace", obj)

    def delete(self, api_version: str, kind: str, namespace: str | None, name: str) -> None:
        self.calls.append(("delete", api_version, kind, namespace, name))

    def record_event(self, involved: dict[str, Any], type: str, reason: str,
                     message: str) -> dict[str, Any]:
        self.calls.append(("record_event", involved, type, reason, message))
        return {"kind": "Event"}

    def list_watcher(self, api_version: str, kind: str, namespace: str | None = None,
                     label_selector: str | None = None) -> Any:
        self.calls.append(("list_watcher", api_version, kind, namespace, label_selector))
        return ListedOnce([])


class Store:
    """A synced store whose content the test sets (an informer that lags when told)."""

    def __init__(self) -> None:
        self.synced = threading.Event()
        self.synced.set()
        self.objects: dict[tuple[str | None, str], dict[str, Any]] = {}

    def get(self, key: tuple[str | None, str]) -> dict[str, Any] | None:
        return self.objects.get(key)


class ListedOnce:
    """An informer source: one list, then a watch that ends only when stopped."""

    def __init__(self, items: list[dict[str, Any]]) -> None:
        self.items = items
        self._stop = threading.Event()

    def list(self) -> tuple[list[dict[str, Any]], str]:
        return list(self.items), "1"

    def watch(self, resource_version: str, *, timeout: float,
              inactivity: float) -> Iterator[tuple[str, dict[str, Any]]]:
        self._stop.wait(timeout)
        return iter(())

    def stop(self) -> None:
        self._stop.set()


def obj(name: str, version: str | None = None, *, kind: str = KIND,
        namespace: str | None = "default", **meta: Any) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, **meta}
    if namespace is not None:
        metadata["namespace"] = namespace
    if version is not None:
        metadata["resourceVersion"] = version
    api = CLUSTER_API if kind == CLUSTER_KIND else API
    return {"apiVersion": api, "kind": kind, "metadata": metadata}


@pytest.fixture
def scripted() -> tuple[Scripted, Store, CachedCluster]:
    inner, store = Scripted(), Store()
    cached = CachedCluster(inner, clock=lambda: 0.0)  # type: ignore[arg-type]
    cached.serve_from(API, KIND, store, complete=True)
    return inner, store, cached


# ------------------------------------------------------------ versions
def test_a_missing_resource_version_reads_as_empty() -> None:
    assert _version(None) == ""
    assert _version({"metadata": {}}) == ""
    assert _version({"metadata": {"resourceVersion": "12"}}) == "12"


def test_caught_up_compares_numbers_only_when_both_versions_are_numbers() -> None:
    def at(version: str | None) -> dict[str, Any]:
        return obj("a", version)

    # The same number, or a later one, is caught up; an earlier one is not.
    assert _caught_up(at("5"), at("5"), "4") is True
    assert _caught_up(at("6"), at("5"), "4") is True
    assert _caught_up(at("4"), at("5"), "4") is False
    # One number and one opaque version: compared with the base, not as numbers.
    assert _caught_up(at("7"), at("abc"), "7") is False
    assert _caught_up(at("7"), at("abc"), "6") is True
    assert _caught_up(at("abc"), at("7"), "abc") is False
    # A stored object without a version has not moved off an empty base.
    assert _caught_up(at(None), at("x"), "") is False
    assert _caught_up(None, at("x"), "") is False


# -------------------------------------------------------------- wiring
def test_a_store_served_without_saying_is_partial(scripted) -> None:
    inner, store, cached = scripted
    cached.serve_from(API, KIND, store)
    inner.objects[(API, KIND, "default", "a")] = obj("a", "3")
    assert cached.get(API, KIND, "default", "a")["metadata"]["resourceVersion"] == "3"
    assert inner.calls == [("get", API, KIND, "default", "a")]
    assert cached.misses == 1


def controller(informer: Any, **source: Any) -> SimpleNamespace:
    return SimpleNamespace(informer=SimpleNamespace(source=SimpleNamespace(**source), **{
        "synced": informer.synced, "get": informer.get}))


@pytest.mark.parametrize(("source", "complete"), [
    ({"namespace": None, "label_selector": None}, True),
    ({}, True),  # a source that says nothing about scope holds every object
    ({"namespace": "team", "label_selector": None}, False),
    ({"namespace": None, "label_selector": "a=b"}, False),
    ({"namespace": "team", "label_selector": "a=b"}, False),
])
def test_use_informers_serves_each_kind_complete_only_without_namespace_or_selector(
        source: dict[str, Any], complete: bool) -> None:
    inner, store = Scripted(), Store()
    cached = CachedCluster(inner)  # type: ignore[arg-type]
    no_info = controller(Store())  # a source that is not a KubeListWatcher: skipped
    served = controller(store, info=SimpleNamespace(api_version=API, kind=KIND), **source)
    manager = SimpleNamespace(controllers={"first": no_info, "second": served})
    cached.use_informers(manager)  # type: ignore[arg-type]
    if complete:
        with pytest.raises(NotFound):
            cached.get(API, KIND, "default", "absent")
        assert inner.calls == [] and cached.hits == 1
    else:
        with pytest.raises(NotFound):
            cached.get(API, KIND, "default", "absent")
        assert inner.calls == [("get", API, KIND, "default", "absent")]
        assert cached.misses == 1


def test_watch_secrets_runs_a_quiet_informer_on_the_asked_secrets() -> None:
    inner = Scripted()
    cached = CachedCluster(inner)  # type: ignore[arg-type]
    informer = cached.watch_secrets("team", label_selector="a=b")
    try:
        assert inner.calls == [("list_watcher", "v1", "Secret", "team", "a=b")]
        assert informer.name == "secrets"
        assert informer.options.resync == 0
        handler = informer.handler
        assert [handler.on_add({}), handler.on_update({}, {}), handler.on_delete({}),
                handler.on_resync({})] == [None] * 4
        assert informer.wait_synced(5)
    finally:
        cached.stop()
    given = InformerOptions(resync=0, watch_timeout=1.0)
    other = CachedCluster(Scripted())  # type: ignore[arg-type]
    try:
        assert other.watch_secrets(options=given).options is given
    finally:
        other.stop()


def test_a_secret_informer_over_all_secrets_is_complete_and_a_selected_one_partial() -> None:
    for kwargs, complete in (({}, True), ({"namespace": "team"}, False),
                             ({"label_selector": "a=b"}, False)):
        inner = Scripted()
        cached = CachedCluster(inner)  # type: ignore[arg-type]
        informer = cached.watch_secrets(**kwargs)
        try:
            assert informer.wait_synced(5)
            inner.calls.clear()
            with pytest.raises(NotFound):
                cached.get("v1", "Secret", "team", "absent")
            assert (inner.calls == []) is complete
        finally:
            cached.stop()


# ------------------------------------------------------ remembered writes
def test_a_live_read_is_remembered_against_an_empty_base(scripted) -> None:
    inner, store, cached = scripted
    # A conflict marks the name: the next read goes to the server, which says "x1".
    cached._forget((API, KIND, "default", "a"))
    inner.objects[(API, KIND, "default", "a")] = obj("a", "x1")
    assert cached.get(API, KIND, "default", "a")["metadata"]["resourceVersion"] == "x1"
    # The store holds the object without a version: it has not moved off the empty base.
    store.objects[("default", "a")] = obj("a")
    assert cached.get(API, KIND, "default", "a")["metadata"]["resourceVersion"] == "x1"
    # Once it shows any version, it has.
    store.objects[("default", "a")] = obj("a", "x0")
    assert cached.get(API, KIND, "default", "a")["metadata"]["resourceVersion"] == "x0"


def test_a_created_object_is_remembered_against_an_empty_base(scripted) -> None:
    _, store, cached = scripted
    cached.create(obj("a", "x1"))
    store.objects[("default", "a")] = obj("a")
    assert cached.get(API, KIND, "default", "a")["metadata"]["resourceVersion"] == "x1"
    store.objects[("default", "a")] = obj("a", "x0")
    assert cached.get(API, KIND, "default", "a")["metadata"]["resourceVersion"] == "x0"


def test_a_caught_up_write_is_forgotten_so_a_later_delete_shows(scripted) -> None:
    inner, store, cached = scripted
    inner.reply = obj("a", "5")
    cached.replace(obj("a", "4"))
    store.objects[("default", "a")] = obj("a", "5")
    assert cached.get(API, KIND, "default", "a")["metadata"]["resourceVersion"] == "5"
    del store.objects[("default", "a")]
    with pytest.raises(NotFound):
        cached.get(API, KIND, "default", "a")
    assert inner.calls == [("replace", "a")]


def test_a_deleting_object_that_keeps_a_finalizer_is_remembered(scripted) -> None:
    inner, store, cached = scripted
    store.objects[("default", "a")] = obj("a", "4")
    inner.reply = obj("a", "5", deletionTimestamp="2026-01-01T00:00:00Z", finalizers=["f"])
    cached.replace(obj("a", "4"))
    got = cached.get(API, KIND, "default", "a")
    assert got["metadata"]["resourceVersion"] == "5"
    assert got["metadata"]["finalizers"] == ["f"]


def test_releasing_the_last_finalizer_of_an_object_never_remembered_is_fine(scripted) -> None:
    inner, store, cached = scripted
    store.objects[("default", "a")] = obj("a", "4", deletionTimestamp="2026-01-01T00:00:00Z",
                                          finalizers=["f"])
    inner.reply = obj("a", "5", deletionTimestamp="2026-01-01T00:00:00Z")
    assert cached.replace(obj("a", "4"))["metadata"]["resourceVersion"] == "5"
    assert cached.get(API, KIND, "default", "a")["metadata"]["resourceVersion"] == "4"


def test_at_most_max_written_writes_are_remembered_the_oldest_forgotten_first(
        scripted, monkeypatch: pytest.MonkeyPatch) -> None:
    inner, store, cached = scripted
    monkeypatch.setattr(cache_module, "MAX_WRITTEN", 3)
    names = ["a", "b", "c", "d"]
    for name in names:
        store.objects[("default", name)] = obj(name, "1")
    for count, name in enumerate(names, start=1):
        inner.reply = obj(name, "2")
        cached.replace(obj(name, "1"))
        if count == 3:  # exactly the limit: all three still remembered
            assert [cached.get(API, KIND, "default", n)["metadata"]["resourceVersion"]
                    for n in names[:3]] == ["2", "2", "2"]
    assert [cached.get(API, KIND, "default", n)["metadata"]["resourceVersion"]
            for n in names] == ["1", "2", "2", "2"]


def test_a_cluster_scoped_write_is_remembered_whatever_namespace_it_carries() -> None:
    inner, store = Scripted(), Store()
    cached = CachedCluster(inner, clock=lambda: 0.0)  # type: ignore[arg-type]
    cached.serve_from(CLUSTER_API, CLUSTER_KIND, store, complete=True)
    store.objects[(None, "g")] = obj("g", "1", kind=CLUSTER_KIND, namespace=None)
    inner.reply = obj("g", "2", kind=CLUSTER_KIND, namespace="stray")
    cached.replace(obj("g", "1", kind=CLUSTER_KIND, namespace="stray"))
    assert cached.get(CLUSTER_API, CLUSTER_KIND, None, "g")["metadata"]["resourceVersion"] == "2"


def test_deleting_a_cluster_scoped_object_sends_its_next_read_to_the_server() -> None:
    inner, store = Scripted(), Store()
    cached = CachedCluster(inner)  # type: ignore[arg-type]
    cached.serve_from(CLUSTER_API, CLUSTER_KIND, store, complete=True)
    store.objects[(None, "g")] = obj("g", "1", kind=CLUSTER_KIND, namespace=None)
    cached.delete(CLUSTER_API, CLUSTER_KIND, "stray", "g")
    with pytest.raises(NotFound):
        cached.get(CLUSTER_API, CLUSTER_KIND, None, "g")
    assert inner.calls == [("delete", CLUSTER_API, CLUSTER_KIND, "stray", "g"),
                           ("get", CLUSTER_API, CLUSTER_KIND, None, "g")]


# ----------------------------------------------------------- pass-through
def test_events_and_list_watchers_are_passed_through_unchanged(scripted) -> None:
    inner, _, cached = scripted
    involved = obj("a", "1")
    assert cached.record_event(involved, "Warning", "Odd", "words") == {"kind": "Event"}
    cached.list_watcher(API, KIND, "team", "a=b")
    cached.list_watcher(API, KIND)
    assert inner.calls == [("record_event", involved, "Warning", "Odd", "words"),
                           ("list_watcher", API, KIND, "team", "a=b"),
                           ("list_watcher", API, KIND, None, None)]


# ---------------------------------------------------------- cached_manager
@pytest.fixture
def server() -> Iterator[APIServerHTTP]:
    srv = embedded_cluster([DatabaseInstance], bookmark_interval=0.5)
    yield srv
    srv.stop()


def _manager(server: APIServerHTTP, options: ManagerOptions | None, **kwargs: Any) -> Any:
    cluster = KubeCluster(api_client(host=server.url), [DatabaseInstance])
    cloud = SimCloud(seed=0, create_polls=0, modify_polls=0, delete_polls=0)
    return cached_manager(cluster, [(DatabaseInstance, DatabaseConnector(cloud))], options,
                          **kwargs)


def test_a_cached_manager_has_its_options_and_arguments_and_no_secret_informer_by_default(
        server: APIServerHTTP) -> None:
    options, metrics = ManagerOptions(workers=1), OperatorMetrics()
    manager = _manager(server, options, metrics=metrics)
    assert manager.options is options and manager.metrics is metrics
    assert manager.closers == [manager.cluster.stop]  # its final mutation check
    assert manager.cluster._informers == []


@pytest.mark.parametrize(("options", "namespace"), [
    (None, None), (ManagerOptions(namespace="team"), "team")])
def test_a_cached_manager_watches_connection_secrets_of_its_namespace(
        server: APIServerHTTP, options: ManagerOptions | None, namespace: str | None) -> None:
    manager = _manager(server, options, secrets=True)
    cached = manager.cluster
    try:
        informer, namespaces = cached._informers[:2]
        assert (informer.source.namespace, informer.source.label_selector) == (
            namespace, f"{CONNECTION_SECRET_LABEL}=true")
        # The supporting reads come with it: the served Namespace (or all of them).
        assert namespaces.source.info.kind == "Namespace"
        assert namespaces.source.field_selector == (namespace and f"metadata.name={namespace}")
        assert manager.closers == [cached.stop]
    finally:
        cached.stop()


def test_writes_past_the_ttl_are_forgotten_at_the_next_write() -> None:
    inner, store, now = Scripted(), Store(), [0.0]
    cached = CachedCluster(inner, clock=lambda: now[0])  # type: ignore[arg-type]
    cached.serve_from(API, KIND, store, complete=True)
    for name in ("a", "b", "c"):
        store.objects[("default", name)] = obj(name, "1")
    for name, at in (("a", 0.0), ("b", 5.0)):
        now[0] = at
        inner.reply = obj(name, "2")
        cached.replace(obj(name, "1"))
    assert len(cached._written) == 2
    now[0] = cache_module.WRITTEN_TTL + 1.0  # a's write is past the TTL, b's is not
    inner.reply = obj("c", "2")
    cached.replace(obj("c", "1"))
    assert [ident[3] for ident in cached._written] == ["b", "c"]
