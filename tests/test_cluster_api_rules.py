"""The client adapter's exact rules: error translation, requests on the wire, list calls, watches.

Error translation is checked on the client's exceptions directly. Requests go
to a small local HTTP server that records each one and answers from a script,
so the method, path, headers and body the adapter sends are all visible.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace
from typing import Any

import pytest
import urllib3
from kubernetes import client as k8s
from kubernetes.config import kube_config

import lifecycle.driver.cluster as adapter
from lifecycle.driver.cluster import KubeCluster, ResourceInfo, api_client, translate
from lifecycle.kube.errors import (
    ApiError,
    Conflict,
    Gone,
    Invalid,
    NotFound,
    ServerError,
    TooManyRequests,
)


# ------------------------------------------------------------ translation
def failure(status: int | None, reason: str | None = None, body: Any = None,
            headers: dict[str, str] | None = None) -> k8s.ApiException:
    exc = k8s.ApiException(status=status, reason=reason)
    exc.body = body
    exc.headers = headers
    return exc


def status_doc(**fields: Any) -> str:
    return json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure", **fields})


def summary(error: ApiError) -> tuple[type, str, int, str]:
    return type(error), str(error), error.status, error.reason


def test_a_bytes_status_body_is_decoded_replacing_what_is_not_utf8() -> None:
    raw = (b'{"kind": "Status", "reason": "NotFound", "code": 404, '
           b'"message": "caf\xc3\xa9 \xff gone"}')
    assert summary(translate(failure(404, "Not Found", raw))) == (
        NotFound, "caf\u00e9 \ufffd gone", 404, "NotFound")


def test_the_status_code_fills_a_status_document_only_when_it_has_none() -> None:
    # No code in the document: the HTTP status is its code.
    no_code = translate(failure(409, "Conflict", status_doc(reason="Conflict", message="m")))
    assert summary(no_code) == (Conflict, "m", 409, "Conflict")
    # The document's own code wins over the HTTP status.
    own = translate(failure(500, "Oops", status_doc(reason="NotFound", code=404, message="n")))
    assert summary(own) == (NotFound, "n", 404, "NotFound")
    # Without an HTTP status the document's code stands.
    bare = translate(failure(None, None, status_doc(reason="Expired", code=410, message="e")))
    assert summary(bare) == (Gone, "e", 410, "Expired")


def test_a_retry_after_header_goes_into_a_status_document() -> None:
    throttled = translate(failure(429, "Too Many Requests", status_doc(
        reason="TooManyRequests", code=429, message="slow"), {"Retry-After": "4"}))
    assert isinstance(throttled, TooManyRequests) and throttled.retry_after == 4.0
    assert str(throttled) == "slow"


@pytest.mark.parametrize(("status", "reason", "expected"), [
    (404, "Not Found", (NotFound, "Not Found", 404, "NotFound")),
    (404, None, (NotFound, "HTTP 404", 404, "NotFound")),
    (409, "Conflict", (Conflict, "Conflict", 409, "Conflict")),
    (410, "Gone", (Gone, "Gone", 410, "Expired")),
    (422, "Unprocessable", (Invalid, "Unprocessable", 422, "Invalid")),
    (500, "Internal", (ServerError, "Internal", 500, "InternalError")),
    (502, "Bad Gateway", (ServerError, "Bad Gateway", 502, "InternalError")),
    (None, None, (ServerError, "HTTP 0", 503, "ServiceUnavailable")),
    (0, "No answer", (ServerError, "No answer", 503, "ServiceUnavailable")),
    (1, "Odd", (ApiError, "Odd", 1, "Unknown")),
    (418, "Teapot", (ApiError, "Teapot", 418, "Unknown")),
    (499, None, (ApiError, "HTTP 499", 499, "Unknown")),
])
def test_without_a_status_document_the_http_code_decides(
        status: int | None, reason: str | None, expected: tuple[Any, ...]) -> None:
    for body in (None, "", "not json", b"[1, 2]", json.dumps({"kind": "Pod"})):
        assert summary(translate(failure(status, reason, body))) == expected


def test_a_throttle_without_a_document_keeps_its_message() -> None:
    throttled = translate(failure(429, "Too Many Requests", None, {"Retry-After": "2"}))
    assert summary(throttled) == (TooManyRequests, "Too Many Requests", 429,
                                  throttled.reason)
    assert throttled.retry_after == 2.0


def test_connection_failures_are_unavailable_and_name_what_failed() -> None:
    pool = urllib3.HTTPConnectionPool("127.0.0.1", 9)
    refused = urllib3.exceptions.MaxRetryError(pool, "/api", reason=ConnectionRefusedError())
    assert summary(translate(refused)) == (
        ServerError, "API server unreachable: MaxRetryError (ConnectionRefusedError)", 503,
        "ServiceUnavailable")
    assert summary(translate(ConnectionResetError())) == (
        ServerError, "API server unreachable: ConnectionResetError", 503, "ServiceUnavailable")
    plain = urllib3.exceptions.ReadTimeoutError(pool, "/api", "read timed out")
    assert str(translate(plain)) == "API server unreachable: ReadTimeoutError"


def test_the_clients_own_argument_checks_are_invalid() -> None:
    error = translate(ValueError("Missing the required parameter `name`"))
    assert summary(error) == (Invalid, "request rejected by the client: ValueError", 422,
                              "Invalid")
    with pytest.raises(KeyError):
        translate(KeyError("k"))


# ------------------------------------------------------- requests on the wire
class _QuietServer(ThreadingHTTPServer):
    """The test server; a client that left before its (delayed) answer is expected, and
    its broken pipe is not printed into whichever test runs next."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            return
        super().handle_error(request, client_address)


@dataclass
class Answer:
    status: int = 200
    body: Any = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


class Wire:
    """A local server that records requests and answers from ``answers`` (then 200 ``{}``)."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, dict[str, list[str]], Any]] = []
        self.answers: list[Answer] = []
        wire = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                headers: dict[str, list[str]] = {}
                for key, value in self.headers.items():
                    headers.setdefault(key.lower(), []).append(value)
                wire.seen.append((self.command, self.path, headers,
                                  json.loads(raw) if raw else None))
                answer = wire.answers.pop(0) if wire.answers else Answer()
                if answer.delay:
                    time.sleep(answer.delay)
                data = (answer.body if isinstance(answer.body, bytes)
                        else json.dumps(answer.body).encode())
                self.send_response(answer.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for key, value in answer.headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_PUT = do_POST = do_DELETE = do_PATCH = _answer

        self.httpd = _QuietServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def requests(self) -> list[tuple[str, str]]:
        return [(method, path) for method, path, _, _ in self.seen]


@pytest.fixture
def wire() -> Iterator[Wire]:
    server = Wire()
    thread = threading.Thread(target=server.httpd.serve_forever, daemon=True)
    thread.start()
    yield server
    server.httpd.shutdown()
    server.httpd.server_close()


@pytest.fixture
def cluster(wire: Wire) -> KubeCluster:
    return KubeCluster(api_client(host=wire.url))


def test_defaults_of_a_cluster() -> None:
    cluster = KubeCluster(api_client(host="http://127.0.0.1:9"))
    assert (cluster.component, cluster.request_timeout) == ("lifecycle", 30.0)


def test_a_request_that_takes_longer_than_the_timeout_is_unavailable(wire: Wire) -> None:
    cluster = KubeCluster(api_client(host=wire.url), request_timeout=0.3)
    wire.answers.append(Answer(delay=2.0))
    with pytest.raises(ServerError) as caught:
        cluster.get("v1", "ConfigMap", "default", "slow")
    assert (caught.value.status, caught.value.reason) == (503, "ServiceUnavailable")


def test_only_2xx_answers_are_results_and_an_empty_body_is_none(
        wire: Wire, cluster: KubeCluster) -> None:
    wire.answers += [Answer(300, {"kind": "ConfigMap"}), Answer(200, b""),
                     Answer(299, {"kind": "ConfigMap"})]
    with pytest.raises(ApiError) as caught:
        cluster.get("v1", "ConfigMap", "default", "a")
    assert caught.value.status == 300
    assert cluster.get("v1", "ConfigMap", "default", "a") is None
    assert cluster.get("v1", "ConfigMap", "default", "a") == {"kind": "ConfigMap"}


def test_namespaces_and_names_are_percent_encoded_slashes_included(
        wire: Wire, cluster: KubeCluster) -> None:
    cluster.get("v1", "ConfigMap", "a/b", "c/d")
    cluster.delete("v1", "ConfigMap", "a b", "c?d")
    assert wire.requests() == [("GET", "/api/v1/namespaces/a%2Fb/configmaps/c%2Fd"),
                               ("DELETE", "/api/v1/namespaces/a%20b/configmaps/c%3Fd")]


def test_lists_of_a_cluster_scoped_kind_ignore_the_namespace(
        wire: Wire, cluster: KubeCluster) -> None:
    cluster.register(ResourceInfo("example.test", "v1", "Gadget", "gadgets", False))
    wire.answers += [Answer(body={"items": [{"a": 1}], "metadata": {"resourceVersion": "9"}}),
                     Answer(body={"metadata": {}})]
    assert cluster.list("example.test/v1", "Gadget", "team") == ([{"a": 1}], "9")
    assert cluster.list("v1", "ConfigMap", "team") == ([], "")
    assert wire.requests() == [("GET", "/apis/example.test/v1/gadgets"),
                               ("GET", "/api/v1/namespaces/team/configmaps")]


def test_status_is_written_to_the_subresource_of_kinds_that_have_one(
        wire: Wire, cluster: KubeCluster) -> None:
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}}
    cluster.replace_status(namespace)
    cluster.replace(namespace)
    assert wire.requests() == [("PUT", "/api/v1/namespaces/team/status"),
                               ("PUT", "/api/v1/namespaces/team")]
    with pytest.raises(NotFound) as caught:
        cluster.replace_status({"apiVersion": "v1", "kind": "Secret",
                                "metadata": {"name": "s", "namespace": "default"}})
    assert str(caught.value) == "Secret has no status subresource"
    assert len(wire.seen) == 2


def test_a_write_without_a_name_or_namespace_or_object(wire: Wire, cluster: KubeCluster) -> None:
    cluster.replace({"apiVersion": "v1", "kind": "ConfigMap",
                     "metadata": {"namespace": "default"}})
    assert wire.requests() == [("PUT", "/api/v1/namespaces/default/configmaps/")]
    with pytest.raises(Invalid) as caught:
        cluster.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}})
    assert str(caught.value) == "Secret: metadata.namespace: Required value"
    with pytest.raises(Invalid) as caught:
        cluster.create(["not", "an", "object"])  # type: ignore[arg-type]
    assert str(caught.value) == "the object must be a JSON object"
    assert len(wire.seen) == 1


def test_events_are_posted_whole_and_repeats_merge_patched(
        wire: Wire, cluster: KubeCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    from datetime import UTC, datetime

    monkeypatch.setattr(adapter, "now", lambda: datetime(2026, 1, 1, tzinfo=UTC))
    involved = {"apiVersion": "example.test/v1", "kind": "Widget",
                "metadata": {"name": "w", "namespace": "team", "uid": "u1",
                             "resourceVersion": "5"}}
    wire.answers += [Answer(201, {"metadata": {"name": "w.1"}, "count": 1}),
                     Answer(200, {"metadata": {"name": "w.1"}, "count": 2})]
    cluster.record_event(involved, "Normal", "Made", "made it")
    cluster.record_event(involved, "Normal", "Made", "made it")
    (post, path, headers, body), (patch, patch_path, patch_headers, patch_body) = wire.seen
    assert (post, path) == ("POST", "/api/v1/namespaces/team/events")
    assert headers["content-type"] == ["application/json"]
    assert body == {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"generateName": "w.", "namespace": "team"},
        "involvedObject": {"apiVersion": "example.test/v1", "kind": "Widget", "name": "w",
                           "namespace": "team", "uid": "u1", "resourceVersion": "5"},
        "type": "Normal", "reason": "Made", "message": "made it", "count": 1,
        "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:00:00Z",
        "source": {"component": "lifecycle"}, "reportingComponent": "lifecycle"}
    assert (patch, patch_path) == ("PATCH", "/api/v1/namespaces/team/events/w.1")
    assert patch_headers["content-type"] == ["application/merge-patch+json"]
    assert patch_body == {"count": 2, "lastTimestamp": "2026-01-01T00:00:00Z"}


def test_an_event_gone_and_not_recorded_anew_is_forgotten(
        wire: Wire, cluster: KubeCluster) -> None:
    involved = {"metadata": {"name": "w", "namespace": "team", "uid": "u1"}}
    wire.answers += [Answer(201, {"metadata": {"name": "w.1"}}),
                     Answer(404, status_doc(reason="NotFound", code=404, message="gone")),
                     Answer(500, status_doc(reason="InternalError", code=500, message="x")),
                     Answer(201, {"metadata": {"name": "w.2"}})]
    cluster.record_event(involved, "Normal", "Made", "m")
    with pytest.raises(ServerError):
        cluster.record_event(involved, "Normal", "Made", "m")
    # The Event was gone: the next one is posted at once, not patched again.
    cluster.record_event(involved, "Normal", "Made", "m")
    assert wire.requests() == [("POST", "/api/v1/namespaces/team/events"),
                               ("PATCH", "/api/v1/namespaces/team/events/w.1"),
                               ("POST", "/api/v1/namespaces/team/events"),
                               ("POST", "/api/v1/namespaces/team/events")]


# ------------------------------------------------------------- discovery
def test_discovery_skips_subresources_listed_before_the_resource(
        monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = KubeCluster(api_client(host="http://127.0.0.1:9"))
    found = SimpleNamespace(resources=[
        SimpleNamespace(kind="Widget", name="widgets/status", namespaced=True),
        SimpleNamespace(kind="Widget", name="widgets", namespaced=True)])
    monkeypatch.setattr(cluster.custom, "get_api_resources", lambda group, version: found)
    assert cluster.info("example.test/v1", "Widget") == ResourceInfo(
        "example.test", "v1", "Widget", "widgets", True)


# ----------------------------------------------------------------- watches
def events(*docs: dict[str, Any]) -> bytes:
    return b"".join(json.dumps(doc).encode() + b"\n" for doc in docs)


def test_a_watch_asks_for_bookmarks_timeouts_namespace_and_selector(wire: Wire) -> None:
    cluster = KubeCluster(api_client(host=wire.url))
    wire.answers += [Answer(body=events({"type": "ADDED", "object": {"metadata": {"name": "a"}}},
                                        {"object": None})),
                     Answer(body=events({"type": "BOOKMARK", "object": {}}))]
    selected = cluster.list_watcher("v1", "Secret", "team", "a=b")
    assert list(selected.watch("41", timeout=0.5, inactivity=7.0)) == [
        ("ADDED", {"metadata": {"name": "a"}}), ("", {})]
    everything = cluster.list_watcher("v1", "Secret")
    assert list(everything.watch("42", timeout=30.9, inactivity=3.0)) == [("BOOKMARK", {})]
    paths = [path.split("?") for _, path in wire.requests()]
    assert [(path, sorted(query.split("&"))) for path, query in paths] == [
        ("/api/v1/namespaces/team/secrets",
         ["allowWatchBookmarks=true", "labelSelector=a%3Db", "resourceVersion=41",
          "timeoutSeconds=1", "watch=true"]),
        ("/api/v1/secrets",
         ["allowWatchBookmarks=true", "resourceVersion=42", "timeoutSeconds=30", "watch=true"]),
    ]


def test_a_watch_of_a_cluster_scoped_kind_ignores_the_namespace(wire: Wire) -> None:
    cluster = KubeCluster(api_client(host=wire.url))
    cluster.register(ResourceInfo("example.test", "v1", "Gadget", "gadgets", False))
    wire.answers.append(Answer(body=b""))
    assert list(cluster.list_watcher("example.test/v1", "Gadget", "team").watch(
        "1", timeout=5, inactivity=5)) == []
    assert wire.requests()[0][1].startswith("/apis/example.test/v1/gadgets?")


def test_a_watch_failure_is_translated(wire: Wire) -> None:
    wire.answers.append(Answer(410, {"kind": "Status", "reason": "Expired", "code": 410,
                                     "message": "too old"}))
    cluster = KubeCluster(api_client(host=wire.url))
    with pytest.raises(Gone) as caught:
        list(cluster.list_watcher("v1", "Secret").watch("1", timeout=5, inactivity=5))
    assert str(caught.value) == "too old"


def test_a_silent_watch_is_unavailable_after_the_inactivity_timeout(wire: Wire) -> None:
    wire.answers.append(Answer(delay=2.0))
    cluster = KubeCluster(api_client(host=wire.url))
    with pytest.raises(ServerError) as caught:
        list(cluster.list_watcher("v1", "Secret").watch("1", timeout=5, inactivity=0.3))
    assert caught.value.status == 503


# ----------------------------------------------------------- event memory
def test_at_most_4096_recent_events_are_remembered_the_oldest_forgotten_first(
        wire: Wire, cluster: KubeCluster) -> None:
    for i in range(4096):
        cluster._remember(("default", str(i)), f"e{i}", 1)
    assert len(cluster._events) == 4096
    cluster._remember(("default", "new"), "enew", 1)
    assert len(cluster._events) == 4096
    assert ("default", "0") not in cluster._events
    assert cluster._events[("default", "new")] == ("enew", 1)
    assert cluster._events[("default", "1")] == ("e1", 1)


# ------------------------------------------------------------- known kinds
def test_kinds_and_their_provider_configs_are_known_without_discovery(wire: Wire) -> None:
    from lifecycle.core.kind import PROVIDER_CONFIG_API, PROVIDER_CONFIG_KIND

    own = SimpleNamespace(group="example.test", version="v2", kind="Widget", plural="widgets",
                          namespaced=True, provider_config_api="configs.example.test/v1beta1")
    bare = SimpleNamespace(group="", version="v1", kind="Thing", plural="things",
                           namespaced=False)
    cluster = KubeCluster(api_client(host=wire.url), [own, bare])  # type: ignore[list-item]
    group, _, version = PROVIDER_CONFIG_API.partition("/")
    assert cluster.info(PROVIDER_CONFIG_API, PROVIDER_CONFIG_KIND) == ResourceInfo(
        group, version, PROVIDER_CONFIG_KIND, "providerconfigs", False)
    assert cluster.info("configs.example.test/v1beta1", PROVIDER_CONFIG_KIND) == ResourceInfo(
        "configs.example.test", "v1beta1", PROVIDER_CONFIG_KIND, "providerconfigs", False)
    assert cluster.info("example.test/v2", "Widget") == ResourceInfo(
        "example.test", "v2", "Widget", "widgets", True)
    assert cluster.info("v1", "Thing") == ResourceInfo("", "v1", "Thing", "things", False)
    # Core kinds with typed APIs are known by name: plural from the kind, scope from the table.
    assert cluster.info("coordination.k8s.io/v1", "Lease") == ResourceInfo(
        "coordination.k8s.io", "v1", "Lease", "leases", True)
    assert cluster.info("v1", "Namespace") == ResourceInfo("", "v1", "Namespace",
                                                           "namespaces", False)
    assert wire.seen == []
    # A kind registered later is known too.
    cluster.register(ResourceInfo("later.test", "v1", "Late", "lates", True))
    assert cluster.info("later.test/v1", "Late").plural == "lates"
    assert wire.seen == []


def test_a_lease_watch_goes_through_the_clusters_own_client(wire: Wire,
                                                           cluster: KubeCluster) -> None:
    wire.answers.append(Answer(200, b""))
    watcher = cluster.list_watcher("coordination.k8s.io/v1", "Lease", "team", "a=b")
    assert list(watcher.watch("5", timeout=7, inactivity=3)) == []
    ((method, path),) = wire.requests()
    assert method == "GET"
    assert path.startswith("/apis/coordination.k8s.io/v1/namespaces/team/leases?")
    assert sorted(path.split("?", 1)[1].split("&")) == [
        "allowWatchBookmarks=true", "labelSelector=a%3Db", "resourceVersion=5",
        "timeoutSeconds=7", "watch=true"]


# ------------------------------------------------------------ api_client
KUBECONFIG = """
apiVersion: v1
kind: Config
current-context: first
clusters:
- name: one
  cluster: {server: "https://one.example:6443"}
- name: two
  cluster: {server: "https://two.example:6443"}
users:
- name: me
  user: {token: t}
contexts:
- name: first
  context: {cluster: one, user: me}
- name: second
  context: {cluster: two, user: me}
"""


@pytest.fixture
def kubeconfigs(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A kubeconfig file to name, and another one as the default ($KUBECONFIG)."""
    named = tmp_path / "named"
    named.write_text(KUBECONFIG)
    default = tmp_path / "default"
    default.write_text(KUBECONFIG.replace("one.example", "default-one.example")
                       .replace("two.example", "default-two.example"))
    monkeypatch.setenv("KUBECONFIG", str(default))
    monkeypatch.setattr(kube_config, "KUBE_CONFIG_DEFAULT_LOCATION", str(default))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_PORT", raising=False)
    return named


def test_a_named_kubeconfig_and_context_decide_the_server(kubeconfigs: Any) -> None:
    assert api_client(kubeconfig=str(kubeconfigs)).configuration.host == (
        "https://one.example:6443")
    assert api_client(kubeconfig=str(kubeconfigs), context="second").configuration.host == (
        "https://two.example:6443")
    # A host wins over any kubeconfig.
    assert api_client(host="http://127.0.0.1:9", kubeconfig=str(kubeconfigs),
                      context="second").configuration.host == "http://127.0.0.1:9"


def test_without_host_or_kubeconfig_in_cluster_config_comes_first_then_the_default(
        kubeconfigs: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # Outside a cluster: the default kubeconfig, in the context asked for.
    assert api_client().configuration.host == "https://default-one.example:6443"
    assert api_client(context="second").configuration.host == (
        "https://default-two.example:6443")

    def in_cluster(client_configuration: Any) -> None:
        client_configuration.host = "https://in-cluster.example"

    monkeypatch.setattr(adapter.k8s_config, "load_incluster_config", in_cluster)
    assert api_client(context="second").configuration.host == "https://in-cluster.example"


def test_the_client_retries_connection_failures_only() -> None:
    retries = api_client(host="http://127.0.0.1:9").configuration.retries
    assert (retries.total, retries.connect, retries.read, retries.status) == (3, 3, 0, 0)
    assert not retries.respect_retry_after_header and not retries.raise_on_status


# ------------------------------------------------------------- the transport
def exchange(cluster: KubeCluster) -> None:
    """A read, a write with a JSON body and a merge patch, each answered 200."""
    cluster.get("v1", "ConfigMap", "default", "a")
    cluster.replace({"apiVersion": "v1", "kind": "ConfigMap",
                     "metadata": {"name": "a", "namespace": "default"}, "data": {"k": "v"}})
    cluster._request("PATCH", "/api/v1/namespaces/default/configmaps/a", {"data": {"k": "w"}},
                     content_type="application/merge-patch+json")


def test_every_route_sends_the_same_requests(wire: Wire) -> None:
    # Whatever the client's own retry settings, the lean transport sends the same
    # methods, paths, bodies and headers, the bearer token from the configuration.
    seen = []
    for go_retries in (False, True):
        client = api_client(host=wire.url)
        client.configuration.client_go_retries = go_retries
        client.configuration.api_key = {"BearerToken": "t0k3n"}
        client.configuration.api_key_prefix = {"BearerToken": "Bearer"}
        wire.seen.clear()
        exchange(KubeCluster(client))
        seen.append([(method, path, body, headers["content-type"] if body else None,
                      headers["authorization"], headers["accept"])
                     for method, path, headers, body in wire.seen])
    assert seen[0] == seen[1]
    assert seen[0] == [
        ("GET", "/api/v1/namespaces/default/configmaps/a", None, None,
         ["Bearer t0k3n"], ["application/json"]),
        ("PUT", "/api/v1/namespaces/default/configmaps/a",
         {"apiVersion": "v1", "kind": "ConfigMap",
          "metadata": {"name": "a", "namespace": "default"}, "data": {"k": "v"}},
         ["application/json"], ["Bearer t0k3n"], ["application/json"]),
        ("PATCH", "/api/v1/namespaces/default/configmaps/a", {"data": {"k": "w"}},
         ["application/merge-patch+json"], ["Bearer t0k3n"], ["application/json"])]


def test_errors_are_translated_alike_whatever_the_retry_settings(wire: Wire) -> None:
    for go_retries in (False, True):
        client = api_client(host=wire.url)
        client.configuration.client_go_retries = go_retries
        wire.answers.append(Answer(409, {"kind": "Status", "reason": "Conflict", "code": 409,
                                         "message": "the object has been modified"}))
        with pytest.raises(Conflict) as caught:
            KubeCluster(client).get("v1", "ConfigMap", "default", "a")
        assert str(caught.value) == "the object has been modified"


def test_a_configured_proxy_carries_every_request(wire: Wire) -> None:
    # The server's address does not resolve: only the proxy (the wire) can answer,
    # and it sees each request in the absolute form a proxy is sent.
    configuration = k8s.Configuration(host="http://apiserver.invalid:6443")
    configuration.proxy = wire.url
    cluster = KubeCluster(k8s.ApiClient(configuration))
    cluster.get("v1", "ConfigMap", "default", "a")
    assert wire.requests() == [
        ("GET", "http://apiserver.invalid:6443/api/v1/namespaces/default/configmaps/a")]


def test_a_path_in_the_host_prefixes_every_request(wire: Wire) -> None:
    cluster = KubeCluster(api_client(host=wire.url + "/k8s/clusters/c-1/"))
    wire.answers += [Answer(), Answer(body={"items": [], "metadata": {}})]
    cluster.get("v1", "ConfigMap", "default", "a")
    cluster.list("v1", "ConfigMap", "default")
    assert wire.requests() == [("GET", "/k8s/clusters/c-1/api/v1/namespaces/default/configmaps/a"),
                               ("GET", "/k8s/clusters/c-1/api/v1/namespaces/default/configmaps")]


def test_a_timeout_changed_after_the_first_request_applies_to_the_next(wire: Wire) -> None:
    cluster = KubeCluster(api_client(host=wire.url), request_timeout=30.0)
    cluster.get("v1", "ConfigMap", "default", "a")
    cluster.request_timeout = 0.3
    wire.answers += [Answer(), Answer(delay=2.0)]
    cluster.get("v1", "ConfigMap", "default", "b")
    with pytest.raises(ServerError) as caught:
        cluster.get("v1", "ConfigMap", "default", "slow")
    assert caught.value.status == 503


# ------------------------------------------------------- an informer's list
def test_an_informers_list_is_read_in_pages_of_one_snapshot(wire: Wire) -> None:
    cluster = KubeCluster(api_client(host=wire.url))
    wire.answers += [
        Answer(body={"items": [{"metadata": {"name": "a"}}],
                     "metadata": {"resourceVersion": "7", "continue": "tok1"}}),
        Answer(body={"items": [{"metadata": {"name": "b"}}],
                     "metadata": {"resourceVersion": "7"}})]
    items, version = cluster.list_watcher("v1", "Secret", "team", "x=y").list()
    assert ([o["metadata"]["name"] for o in items], version) == (["a", "b"], "7")
    queries = [sorted(path.split("?", 1)[1].split("&")) for _, path in wire.requests()]
    assert queries == [["labelSelector=x%3Dy", "limit=500"],
                       ["continue=tok1", "labelSelector=x%3Dy", "limit=500"]]


def test_an_expired_continue_token_reads_the_list_again_whole(wire: Wire) -> None:
    cluster = KubeCluster(api_client(host=wire.url))
    wire.answers += [
        Answer(body={"items": [{"metadata": {"name": "a"}}],
                     "metadata": {"resourceVersion": "7", "continue": "tok1"}}),
        Answer(410, {"kind": "Status", "reason": "Expired", "code": 410,
                     "message": "the continue token has expired"}),
        Answer(body={"items": [{"metadata": {"name": "a"}}, {"metadata": {"name": "b"}}],
                     "metadata": {"resourceVersion": "9"}})]
    items, version = cluster.list_watcher("v1", "Secret", "team").list()
    assert ([o["metadata"]["name"] for o in items], version) == (["a", "b"], "9")
    assert [path for _, path in wire.requests()] == [
        "/api/v1/namespaces/team/secrets?limit=500",
        "/api/v1/namespaces/team/secrets?limit=500&continue=tok1",
        "/api/v1/namespaces/team/secrets"]
    # A first page already gone is an error for the informer to handle (it re-lists).
    wire.answers.append(Answer(410, {"kind": "Status", "reason": "Expired", "code": 410,
                                     "message": "too old"}))
    with pytest.raises(Gone):
        cluster.list_watcher("v1", "Secret", "team").list()
