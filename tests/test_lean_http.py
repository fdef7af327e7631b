"""The lean HTTP path of :class:`~lifecycle.driver.cluster.KubeCluster` on both servers.

Against the embedded API over HTTP (``lifecycle serve``'s face) and against a
real kube-apiserver over TLS (client certificate, and a ServiceAccount's
bearer token): every verb the operator sends, the errors the runtime tells
apart (404, 409, 410, 422 with its causes, 403), kept-alive connections
reused, and watch streams that deliver, end and stop.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

from lifecycle.driver import transport
from lifecycle.driver.cluster import KubeCluster, api_client
from lifecycle.kube.errors import (
    AlreadyExists,
    ApiError,
    Conflict,
    Forbidden,
    Gone,
    Invalid,
    NotFound,
    ServerError,
    error_from_status,
)
from lifecycle.sim.apiserver import EmbeddedAPI
from lifecycle.sim.http import APIServerHTTP


def _configmap(namespace: str, name: str, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace}, "data": data}


def _secret(namespace: str, name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": name, "namespace": namespace,
                         "labels": {"lifecycle.dev/connection-secret": "true"}},
            "stringData": {"password": "s3cret"}}


def exercise(cluster: KubeCluster, namespace: str) -> None:
    """Every verb and error the operator meets, on ConfigMaps, Secrets and Events."""
    made = cluster.create(_configmap(namespace, "one", a="1"))
    assert made["metadata"]["name"] == "one" and made["data"] == {"a": "1"}
    with pytest.raises(AlreadyExists):
        cluster.create(_configmap(namespace, "one"))
    read = cluster.get("v1", "ConfigMap", namespace, "one")
    assert read["metadata"]["resourceVersion"] == made["metadata"]["resourceVersion"]
    changed = cluster.replace({**read, "data": {"a": "2"}})
    assert changed["data"] == {"a": "2"}
    with pytest.raises(Conflict):
        cluster.replace({**read, "data": {"a": "3"}})  # the version read before: stale
    with pytest.raises(NotFound):
        cluster.get("v1", "ConfigMap", namespace, "absent")
    with pytest.raises(Invalid) as caught:
        cluster.create(_configmap(namespace, "Not_A_Valid_Name"))
    assert caught.value.status == 422
    assert any(c.get("field") == "metadata.name" for c in caught.value.causes)
    items, version = cluster.list("v1", "ConfigMap", namespace)
    assert [o["metadata"]["name"] for o in items] == ["one"] and version
    secret = cluster.create(_secret(namespace, "conn"))
    assert secret["data"]["password"]  # base64 of the string data
    labelled, _ = cluster.list("v1", "Secret", namespace,
                               "lifecycle.dev/connection-secret=true")
    assert [o["metadata"]["name"] for o in labelled] == ["conn"]
    first = cluster.record_event(changed, "Normal", "Made", "made it")
    again = cluster.record_event(changed, "Normal", "Made", "made it")
    assert again["metadata"]["name"] == first["metadata"]["name"] and again["count"] == 2
    cluster.delete("v1", "ConfigMap", namespace, "one")
    cluster.delete("v1", "Secret", namespace, "conn")
    with pytest.raises(NotFound):
        cluster.delete("v1", "ConfigMap", namespace, "one")


def watch_sees(cluster: KubeCluster, namespace: str) -> None:
    """A watch from a list's version delivers a later create, and ``stop`` ends it at once."""
    _, version = cluster.list("v1", "ConfigMap", namespace)
    watcher = cluster.list_watcher("v1", "ConfigMap", namespace)
    seen: list[tuple[str, str]] = []
    done = threading.Event()

    def run() -> None:
        for kind, obj in watcher.watch(version, timeout=60, inactivity=30):
            if kind != "BOOKMARK":
                seen.append((kind, obj["metadata"]["name"]))
        done.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    cluster.create(_configmap(namespace, "watched"))
    deadline = time.monotonic() + 20
    while not seen and time.monotonic() < deadline:
        time.sleep(0.05)
    assert seen == [("ADDED", "watched")]
    watcher.stop()
    assert done.wait(5), "stop did not end the watch"


# ------------------------------------------------------------ embedded API
@pytest.fixture
def face() -> Iterator[APIServerHTTP]:
    api = EmbeddedAPI()
    with APIServerHTTP(api) as srv:
        yield srv
    api.close()


def test_every_verb_and_error_on_the_embedded_api(face: APIServerHTTP) -> None:
    exercise(KubeCluster(api_client(host=face.url)), "default")


def test_a_watch_on_the_embedded_api(face: APIServerHTTP) -> None:
    watch_sees(KubeCluster(api_client(host=face.url)), "default")


def test_an_expired_version_is_gone() -> None:
    api = EmbeddedAPI(watch_window=2)
    with APIServerHTTP(api) as face:
        cluster = KubeCluster(api_client(host=face.url))
        first = cluster.create(_configmap("default", "c0"))["metadata"]["resourceVersion"]
        for i in range(1, 5):
            cluster.create(_configmap("default", f"c{i}"))
        events = list(cluster.list_watcher("v1", "ConfigMap", "default").watch(
            first, timeout=5, inactivity=5))
    api.close()
    # As a real server sends it: an ERROR event carrying a 410 Status, then the end.
    assert [(kind, obj.get("code")) for kind, obj in events] == [("ERROR", 410)]
    assert isinstance(error_from_status(events[0][1]), Gone)


def test_one_kept_alive_connection_carries_sequential_requests(face: APIServerHTTP) -> None:
    cluster = KubeCluster(api_client(host=face.url))
    cluster.create(_configmap("default", "a"))
    (connection,) = cluster.transport._idle
    for _ in range(20):
        cluster.get("v1", "ConfigMap", "default", "a")
    assert cluster.transport._idle == [connection]
    assert len(face._connections) == 1


def test_a_kept_alive_connection_the_server_closed_is_replaced(face: APIServerHTTP) -> None:
    cluster = KubeCluster(api_client(host=face.url))
    cluster.create(_configmap("default", "a"))
    (idle,) = cluster.transport._idle
    for connection in list(face._connections):  # the server drops its idle connection
        connection.shutdown(2)
    # The client's end has seen the close before the next request goes out on it.
    deadline = time.monotonic() + 10
    while not idle.dropped():
        assert time.monotonic() < deadline, "the client never saw the server's close"
        time.sleep(0.01)
    assert cluster.get("v1", "ConfigMap", "default", "a")["metadata"]["name"] == "a"
    assert idle not in cluster.transport._idle  # replaced, not reused


def test_a_stopped_server_is_unavailable() -> None:
    api = EmbeddedAPI()
    face = APIServerHTTP(api).start()
    cluster = KubeCluster(api_client(host=face.url))
    cluster.create(_configmap("default", "a"))
    face.stop()
    api.close()
    with pytest.raises(ServerError) as caught:
        cluster.get("v1", "ConfigMap", "default", "a")
    assert (caught.value.status, caught.value.reason) == (503, "ServiceUnavailable")


# ------------------------------------------------------------ bearer tokens
class _Recorder(ThreadingHTTPServer):
    """Answers ``{}`` to everything, remembering each Authorization header."""

    def __init__(self) -> None:
        self.seen: list[str | None] = []
        #: A token answered with 401 Unauthorized.
        self.refused: str | None = None
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                token = self.headers.get("Authorization")
                recorder.seen.append(token)
                self.send_response(401 if token == recorder.refused else 200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

        super().__init__(("127.0.0.1", 0), Handler)


def test_a_refreshed_bearer_token_is_sent_within_a_second_and_right_after_a_401(
        monkeypatch: pytest.MonkeyPatch) -> None:
    server = _Recorder()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    now = [1000.0]
    monkeypatch.setattr(transport.time, "monotonic", lambda: now[0])
    try:
        client = api_client(host=f"http://127.0.0.1:{server.server_address[1]}")
        tokens = iter(["first", "second", "third"])
        asked: list[str] = []

        def refresh(configuration: Any) -> None:  # as an exec plugin's hook does
            asked.append(token := next(tokens))
            configuration.api_key["authorization"] = f"Bearer {token}"

        client.configuration.refresh_api_key_hook = refresh
        client.configuration.api_key["authorization"] = "Bearer none"  # replaced when asked
        cluster = KubeCluster(client)
        cluster.get("v1", "ConfigMap", "default", "a")
        cluster.get("v1", "ConfigMap", "default", "a")  # within the second: not asked again
        now[0] += transport.AUTH_REFRESH
        cluster.get("v1", "ConfigMap", "default", "a")  # the second is over: asked again
        server.refused = "Bearer second"
        now[0] += 0.1
        with pytest.raises(ApiError) as refused:
            cluster.get("v1", "ConfigMap", "default", "a")
        assert refused.value.status == 401
        cluster.get("v1", "ConfigMap", "default", "a")  # right after the 401: asked again
        assert asked == ["first", "second", "third"]
        assert server.seen == ["Bearer first", "Bearer first", "Bearer second",
                               "Bearer second", "Bearer third"]
    finally:
        server.shutdown()
        server.server_close()


# ------------------------------------------------------------ real server
def _namespace(real: Any) -> str:
    name = f"lean-{uuid.uuid4().hex[:8]}"
    k8s.CoreV1Api(real.api_client()).create_namespace({"metadata": {"name": name}})
    return name


def test_every_verb_and_error_on_the_real_server_with_a_client_certificate(
        real_cluster: Any) -> None:
    cluster = KubeCluster(real_cluster.api_client())
    assert cluster.client.configuration.cert_file  # TLS with the admin's certificate
    namespace = _namespace(real_cluster)
    exercise(cluster, namespace)
    watch_sees(cluster, namespace)


def test_a_bearer_token_on_the_real_server(real_cluster: Any, tmp_path: Path) -> None:
    namespace = _namespace(real_cluster)
    path = real_cluster.service_account_kubeconfig(tmp_path / "sa.kubeconfig", namespace,
                                                   "lean")
    cluster = KubeCluster(api_client(kubeconfig=str(path)))
    assert not cluster.client.configuration.cert_file
    with pytest.raises(Forbidden) as caught:  # known (the token was sent), not allowed
        cluster.get("v1", "ConfigMap", namespace, "any")
    assert caught.value.status == 403
    assert f"system:serviceaccount:{namespace}:lean" in str(caught.value)
    json.dumps(caught.value.status)  # a plain error, nothing of the token in it
    assert "Bearer" not in str(caught.value)
