"""The HTTP face of the embedded API, used through the official client, and the adapter."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes import watch as k8s_watch

from lifecycle.driver.cluster import KubeCluster, api_client, translate
from lifecycle.kube.errors import (
    AlreadyExists,
    Conflict,
    Gone,
    Invalid,
    NotFound,
    ServerError,
    TooManyRequests,
)
from lifecycle.kube.resources import ResourceType
from lifecycle.machines.database import DatabaseInstance
from lifecycle.schema.crds import crd
from lifecycle.sim.apiserver import EmbeddedAPI
from lifecycle.sim.http import APIServerHTTP, json_patch

G, V, P = "example.test", "v1", "widgets"
WIDGET = ResourceType(G, V, "Widget", P, namespaced=True)


@pytest.fixture
def face() -> Iterator[APIServerHTTP]:
    api = EmbeddedAPI(bookmark_interval=0.1, watch_window=50)
    api.register(WIDGET)
    with APIServerHTTP(api) as srv:
        yield srv
    api.close()


@pytest.fixture
def custom(face: APIServerHTTP) -> k8s.CustomObjectsApi:
    return k8s.CustomObjectsApi(api_client(host=face.url))


def widget(name: str, **extra: Any) -> dict[str, Any]:
    return {"apiVersion": f"{G}/{V}", "kind": "Widget", "metadata": {"name": name, **extra},
            "spec": {"size": 1}}


def test_discovery_lists_groups_versions_and_resources(face: APIServerHTTP) -> None:
    client = api_client(host=face.url)
    groups = {g.name: g for g in k8s.ApisApi(client).get_api_versions().groups}
    assert {G, "coordination.k8s.io", "apiextensions.k8s.io"} <= set(groups)
    assert groups[G].preferred_version.group_version == f"{G}/{V}"
    resources = k8s.CustomObjectsApi(client).get_api_resources(G, V).resources
    assert {(r.name, r.namespaced) for r in resources} == {(P, True), (f"{P}/status", True)}
    core = {r.name for r in k8s.CoreV1Api(client).get_api_resources().resources}
    assert {"secrets", "namespaces", "events"} <= core
    assert k8s.CoreApi(client).get_api_versions().versions == ["v1"]
    assert k8s.VersionApi(client).get_code().major == "1"


def test_create_get_list_replace_status_patch_delete(custom: k8s.CustomObjectsApi) -> None:
    made = custom.create_namespaced_custom_object(G, V, "default", P,
                                                  widget("a", labels={"tier": "gold"}))
    assert made["metadata"]["generation"] == 1 and made["metadata"]["uid"]
    custom.create_namespaced_custom_object(G, V, "default", P, widget("b"))
    with pytest.raises(k8s.ApiException) as err:
        custom.create_namespaced_custom_object(G, V, "default", P, widget("a"))
    assert err.value.status == 409 and json.loads(err.value.body)["reason"] == "AlreadyExists"
    listed = custom.list_namespaced_custom_object(G, V, "default", P, label_selector="tier=gold")
    assert [o["metadata"]["name"] for o in listed["items"]] == ["a"]
    assert listed["metadata"]["resourceVersion"]
    # Status goes only through the subresource; generation stays.
    made["status"] = {"state": "ready"}
    written = custom.replace_namespaced_custom_object_status(G, V, "default", P, "a", made)
    assert written["status"] == {"state": "ready"} and written["metadata"]["generation"] == 1
    # A stale resourceVersion is a 409 Conflict.
    with pytest.raises(k8s.ApiException) as err:
        custom.replace_namespaced_custom_object(G, V, "default", P, "a", made)
    assert err.value.status == 409
    written["spec"] = {"size": 2}
    replaced = custom.replace_namespaced_custom_object(G, V, "default", P, "a", written)
    assert replaced["metadata"]["generation"] == 2 and replaced["status"] == {"state": "ready"}
    patched = custom.patch_namespaced_custom_object(
        G, V, "default", P, "a", {"metadata": {"finalizers": ["x/y"]}, "spec": {"size": None}})
    assert patched["spec"] == {} and patched["metadata"]["finalizers"] == ["x/y"]
    # Deletion with a finalizer only marks the object.
    marked = custom.delete_namespaced_custom_object(G, V, "default", P, "a")
    assert marked["metadata"]["deletionTimestamp"]
    patched = custom.patch_namespaced_custom_object(G, V, "default", P, "a",
                                                    {"metadata": {"finalizers": None}})
    with pytest.raises(k8s.ApiException) as err:
        custom.get_namespaced_custom_object(G, V, "default", P, "a")
    assert err.value.status == 404
    gone = custom.delete_namespaced_custom_object(G, V, "default", P, "b")
    assert gone["status"] == "Success"


def test_json_patch_and_unsupported_paths(face: APIServerHTTP,
                                          custom: k8s.CustomObjectsApi) -> None:
    custom.create_namespaced_custom_object(G, V, "default", P, widget("a"))
    patched = custom.patch_namespaced_custom_object(
        G, V, "default", P, "a", [{"op": "replace", "path": "/spec/size", "value": 5},
                                  {"op": "add", "path": "/metadata/labels", "value": {"a": "b"}}],
        _content_type="application/json-patch+json")
    assert patched["spec"]["size"] == 5 and patched["metadata"]["labels"] == {"a": "b"}
    with pytest.raises(k8s.ApiException) as err:
        custom.get_namespaced_custom_object(G, V, "default", "nothings", "a")
    assert err.value.status == 404
    ops = [{"op": "add", "path": "/a/-", "value": 3}, {"op": "move", "from": "/a", "path": "/b"}]
    assert json_patch({"a": [1, 2]}, ops) == {"b": [1, 2, 3]}
    with pytest.raises(Invalid):
        json_patch({"a": 1}, [{"op": "test", "path": "/a", "value": 2}])
    with pytest.raises(Invalid):
        json_patch({"a": 1}, [{"op": "remove", "path": "/missing"}])


def test_watch_streams_changes_bookmarks_and_410_as_an_error_event(
        face: APIServerHTTP, custom: k8s.CustomObjectsApi) -> None:
    start = face.api.resource_version
    custom.create_namespaced_custom_object(G, V, "default", P, widget("a"))
    events = []
    for event in k8s_watch.Watch().stream(
            custom.list_namespaced_custom_object, G, V, "default", P, resource_version=start,
            allow_watch_bookmarks=True, timeout_seconds=1):
        events.append(event["type"])
    assert events[0] == "ADDED" and "BOOKMARK" in events
    # Push the start version out of the retained history: the watch answers 410.
    for i in range(60):
        custom.create_namespaced_custom_object(G, V, "default", P, widget(f"n{i}"))
    with pytest.raises(k8s.ApiException) as err:
        for _ in k8s_watch.Watch().stream(custom.list_namespaced_custom_object, G, V,
                                          "default", P, resource_version=start,
                                          timeout_seconds=1):
            pass
    assert err.value.status == 410


def test_a_created_crd_registers_its_kind(face: APIServerHTTP) -> None:
    client = api_client(host=face.url)
    k8s.ApiextensionsV1Api(client).create_custom_resource_definition(crd(DatabaseInstance),
                                                                     _preload_content=False)
    custom = k8s.CustomObjectsApi(client)
    made = custom.create_namespaced_custom_object(
        DatabaseInstance.group, DatabaseInstance.version, "default", DatabaseInstance.plural,
        {"apiVersion": DatabaseInstance.api_version, "kind": "DatabaseInstance",
         "metadata": {"name": "x"}, "spec": {}})
    assert made["kind"] == "DatabaseInstance"


def test_adapter_reads_and_writes_every_kind_the_engine_uses(face: APIServerHTTP) -> None:
    cluster = KubeCluster(api_client(host=face.url))
    secret = cluster.create({"apiVersion": "v1", "kind": "Secret",
                             "metadata": {"name": "s", "namespace": "default"},
                             "data": {"k": "dg=="}})
    assert cluster.get("v1", "Secret", "default", "s")["data"] == {"k": "dg=="}
    secret["data"] = {"k": "dw=="}
    assert cluster.replace(secret)["data"] == {"k": "dw=="}
    assert cluster.get("v1", "Namespace", None, "default")["metadata"]["name"] == "default"
    # A custom kind found by discovery.
    made = cluster.create(widget("w", namespace="default"))
    made["status"] = {"ok": True}
    assert cluster.replace_status(made)["status"] == {"ok": True}
    items, rv = cluster.list(f"{G}/{V}", "Widget", "default")
    assert [o["metadata"]["name"] for o in items] == ["w"] and int(rv) > 0
    with pytest.raises(NotFound):
        cluster.get(f"{G}/{V}", "Widget", "default", "missing")
    with pytest.raises(AlreadyExists):
        cluster.create(widget("w", namespace="default"))
    with pytest.raises(Conflict):
        cluster.replace(made)  # stale resourceVersion
    with pytest.raises(NotFound):
        cluster.get("nothing.test/v1", "Thing", "default", "x")
    # Events: a repeat bumps the count of the first one.
    cluster.record_event(made, "Normal", "Created", "made it")
    event = cluster.record_event(made, "Normal", "Created", "made it")
    assert event["count"] == 2
    items, _ = face.api.list("v1", "Event", "default")
    assert len(items) == 1 and items[0]["involvedObject"]["name"] == "w"


@pytest.mark.parametrize(("error", "expected", "status"), [
    (NotFound("x"), NotFound, 404),
    (Conflict("x"), Conflict, 409),
    (Gone("x"), Gone, 410),
    (Invalid("x"), Invalid, 422),
    (TooManyRequests("slow down", retry_after=3), TooManyRequests, 429),
    (ServerError("boom"), ServerError, 500),
])
def test_client_errors_map_to_the_engine_error_classes(
        face: APIServerHTTP, error: Exception, expected: type, status: int) -> None:
    cluster = KubeCluster(api_client(host=face.url))
    face.api.faults.add("get", "Widget", error=error, times=1)
    with pytest.raises(expected) as caught:
        cluster.get(f"{G}/{V}", "Widget", "default", "w")
    assert caught.value.status == status
    if isinstance(caught.value, TooManyRequests):
        assert caught.value.retry_after == 3


def test_translate_without_a_status_body_uses_the_http_code() -> None:
    for status, cls in ((404, NotFound), (409, Conflict), (410, Gone), (422, Invalid),
                        (503, ServerError)):
        assert isinstance(translate(k8s.ApiException(status=status, reason="x")), cls)
    throttled = k8s.ApiException(status=429, reason="slow")
    throttled.headers = {"Retry-After": "7"}
    assert translate(throttled).retry_after == 7.0  # type: ignore[attr-defined]
    assert translate(ConnectionRefusedError()).status == 503


def test_an_unreachable_server_is_a_503() -> None:
    cluster = KubeCluster(api_client(host="http://127.0.0.1:9"), request_timeout=2)
    started = time.monotonic()
    with pytest.raises(ServerError) as caught:
        cluster.get("v1", "Secret", "default", "s")
    assert caught.value.status == 503
    assert time.monotonic() - started < 10
