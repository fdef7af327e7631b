"""The client adapter's exact requests: discovery, deletes, Events and Retry-After.

Each test drives :class:`~lifecycle.driver.cluster.KubeCluster` through the
official client against the embedded API's HTTP face and checks what the
server ends up holding, so a request sent to the wrong path or with a wrong
field shows up as a wrong object, not only as an error.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client as k8s

from lifecycle.driver.cluster import KubeCluster, ResourceInfo, api_client, translate
from lifecycle.kube.errors import NotFound, TooManyRequests
from lifecycle.kube.resources import ResourceType
from lifecycle.sim.apiserver import EmbeddedAPI
from lifecycle.sim.http import APIServerHTTP

G, V = "example.test", "v1"
WIDGET = ResourceType(G, V, "Widget", "widgets", namespaced=True, status_subresource=True)
GADGET = ResourceType(G, V, "Gadget", "gadgets", namespaced=False)
#: A core kind the adapter has no typed API for: found by asking the core group.
ACCOUNT = ResourceType("", "v1", "ServiceAccount", "serviceaccounts", namespaced=True)


@pytest.fixture
def face() -> Iterator[APIServerHTTP]:
    api = EmbeddedAPI()
    api.register(WIDGET)
    api.register(GADGET)
    api.register(ACCOUNT)
    with APIServerHTTP(api) as srv:
        yield srv
    api.close()


@pytest.fixture
def cluster(face: APIServerHTTP) -> KubeCluster:
    return KubeCluster(api_client(host=face.url))


def secret(name: str, namespace: str = "default") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": name, "namespace": namespace}, "data": {"k": "dg=="}}


def test_discovery_finds_the_resource_of_a_kind_not_its_subresources(
        cluster: KubeCluster) -> None:
    assert cluster.info(f"{G}/{V}", "Widget") == ResourceInfo(G, V, "Widget", "widgets", True)
    assert cluster.info(f"{G}/{V}", "Gadget") == ResourceInfo(G, V, "Gadget", "gadgets", False)
    # The core group is asked through the core API (a kind the adapter does not type).
    found = cluster.info("v1", "ServiceAccount")
    assert found == ResourceInfo("", "v1", "ServiceAccount", "serviceaccounts", True)
    assert found.api_version == "v1"
    with pytest.raises(NotFound) as missing:
        cluster.info(f"{G}/{V}", "Gizmo")
    assert str(missing.value) == "the server does not serve Gizmo in example.test/v1"
    with pytest.raises(NotFound) as missing:
        cluster.info("v1", "Gizmo")
    assert str(missing.value) == "the server does not serve Gizmo in v1"


def test_a_discovered_kind_is_read_and_written_under_its_plural(
        face: APIServerHTTP, cluster: KubeCluster) -> None:
    made = cluster.create({"apiVersion": f"{G}/{V}", "kind": "Gadget",
                           "metadata": {"name": "g"}, "spec": {}})
    assert made["kind"] == "Gadget"
    assert face.api.get(f"{G}/{V}", "Gadget", None, "g")["metadata"]["uid"] == (
        made["metadata"]["uid"])


def test_delete_removes_only_the_named_object(face: APIServerHTTP,
                                              cluster: KubeCluster) -> None:
    for name in ("a", "b"):
        face.api.create(secret(name))
    face.api.create({"apiVersion": f"{G}/{V}", "kind": "Gadget", "metadata": {"name": "g1"}})
    face.api.create({"apiVersion": f"{G}/{V}", "kind": "Gadget", "metadata": {"name": "g2"}})
    cluster.delete("v1", "Secret", "default", "a")
    cluster.delete(f"{G}/{V}", "Gadget", None, "g1")
    assert [s["metadata"]["name"] for s in face.api.list("v1", "Secret", "default")[0]] == ["b"]
    assert [g["metadata"]["name"] for g in face.api.list(f"{G}/{V}", "Gadget")[0]] == ["g2"]
    with pytest.raises(NotFound):
        cluster.delete("v1", "Secret", "default", "a")


def test_events_are_recorded_in_the_objects_namespace_or_default(
        face: APIServerHTTP, cluster: KubeCluster) -> None:
    face.api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}})
    widget = cluster.create({"apiVersion": f"{G}/{V}", "kind": "Widget",
                             "metadata": {"name": "w", "namespace": "team"}})
    gadget = cluster.create({"apiVersion": f"{G}/{V}", "kind": "Gadget",
                             "metadata": {"name": "g"}})
    long = "x" * 2000
    cluster.record_event(widget, "Normal", "Made", long)
    cluster.record_event(gadget, "Warning", "Odd", "cluster-scoped")
    (in_team,), _ = face.api.list("v1", "Event", "team")
    assert in_team["message"] == "x" * 1024
    assert in_team["metadata"]["name"].startswith("w.")
    assert in_team["involvedObject"] == {
        "apiVersion": f"{G}/{V}", "kind": "Widget", "name": "w", "namespace": "team",
        "uid": widget["metadata"]["uid"],
        "resourceVersion": widget["metadata"]["resourceVersion"]}
    assert (in_team["type"], in_team["reason"], in_team["count"]) == ("Normal", "Made", 1)
    assert in_team["source"] == {"component": "lifecycle"}
    assert in_team["reportingComponent"] == "lifecycle"
    assert in_team["firstTimestamp"] == in_team["lastTimestamp"]
    (in_default,), _ = face.api.list("v1", "Event", "default")
    assert in_default["involvedObject"].get("namespace", "") == ""  # empty: omitted
    assert (in_default["type"], in_default["reason"], in_default["message"]) == (
        "Warning", "Odd", "cluster-scoped")
    # The repeat (same truncated message) bumps the count of the one recorded.
    again = cluster.record_event(widget, "Normal", "Made", long + "tail")
    assert again["metadata"]["name"] == in_team["metadata"]["name"] and again["count"] == 2
    # An Event deleted meanwhile is recorded anew.
    face.api.delete("v1", "Event", "team", in_team["metadata"]["name"])
    fresh = cluster.record_event(widget, "Normal", "Made", long)
    assert fresh["count"] == 1 and fresh["metadata"]["name"] != in_team["metadata"]["name"]


def test_repeats_count_up_and_move_last_timestamp_per_object(
        face: APIServerHTTP, cluster: KubeCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    from datetime import UTC, datetime

    import lifecycle.driver.cluster as adapter

    clock = [datetime(2026, 1, 1, 0, 0, 0, tzinfo=UTC)]
    monkeypatch.setattr(adapter, "now", lambda: clock[0])
    one = cluster.create({"apiVersion": f"{G}/{V}", "kind": "Widget",
                          "metadata": {"name": "one", "namespace": "default"}})
    two = cluster.create({"apiVersion": f"{G}/{V}", "kind": "Widget",
                          "metadata": {"name": "two", "namespace": "default"}})
    first = cluster.record_event(one, "Normal", "Same", "same words")
    assert (first["firstTimestamp"], first["lastTimestamp"]) == ("2026-01-01T00:00:00Z",) * 2
    # Another object saying the same thing gets its own Event.
    other = cluster.record_event(two, "Normal", "Same", "same words")
    assert other["metadata"]["name"] != first["metadata"]["name"]
    assert other["involvedObject"]["name"] == "two" and other["count"] == 1
    for count, minute in ((2, 1), (3, 2)):
        clock[0] = datetime(2026, 1, 1, 0, minute, 0, tzinfo=UTC)
        repeat = cluster.record_event(one, "Normal", "Same", "same words")
        assert repeat["metadata"]["name"] == first["metadata"]["name"]
        assert repeat["count"] == count
        assert repeat["lastTimestamp"] == f"2026-01-01T00:0{minute}:00Z"
        assert repeat["firstTimestamp"] == "2026-01-01T00:00:00Z"
    # An object known only by name and namespace (no apiVersion, kind or uid) still gets one.
    bare = cluster.record_event({"metadata": {"namespace": "default"}}, "Normal", "Bare", "b")
    assert bare["metadata"]["name"].startswith("object.")
    # (empty fields are omitted by the server, as a real one omits them)
    assert {k: bare["involvedObject"].get(k, "") for k in (
        "apiVersion", "kind", "name", "uid", "resourceVersion")} == {
        "apiVersion": "", "kind": "", "name": "object", "uid": "", "resourceVersion": ""}


def test_retry_after_is_read_from_the_headers_when_there_are_any() -> None:
    response = k8s.ApiException(status=429, reason="Too Many Requests")
    response.headers = {"Retry-After": "7"}
    assert translate(response).retry_after == 7.0
    without = k8s.ApiException(status=429, reason="Too Many Requests")
    without.headers = None
    throttled = translate(without)
    assert isinstance(throttled, TooManyRequests) and throttled.retry_after == 1.0
    odd = k8s.ApiException(status=429, reason="Too Many Requests")
    odd.headers = ["Retry-After", "9"]  # no mapping: no header to read
    assert translate(odd).retry_after == 1.0
