"""The engine's :class:`~lifecycle.kube.cluster.Cluster` on the official ``kubernetes`` client.

:class:`KubeCluster` reads and writes objects as plain dicts through the
client's connection pool, configuration and credentials, on a lean path: the
URL is built here, a body is serialised once with ``json.dumps`` and a response
parsed with ``json.loads``, with no model objects in between, so objects keep
exactly the server's field names and a call costs little beyond the HTTP
exchange. Watches and discovery use the generated APIs (``CustomObjectsApi``,
``CoreV1Api``, ``CoordinationV1Api``).

Errors become the classes of :mod:`lifecycle.kube.errors` that the reconciler
understands: the ``Status`` body when there is one, else the HTTP code
(404 NotFound, 409 Conflict, 410 Gone, 422 Invalid, 429 TooManyRequests with
``Retry-After``, 5xx ServerError). Connection failures and timeouts are a 503
``ServerError``.

:meth:`KubeCluster.list_watcher` gives informers a list-and-watch source using
``kubernetes.watch.Watch`` with bookmarks, a server-side timeout and a
client-side read timeout.
"""

from __future__ import annotations

import json
import logging
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

import attrs
import urllib3
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes import watch as k8s_watch
from kubernetes.client import rest as k8s_rest

from lifecycle.core.kind import PROVIDER_CONFIG_API, PROVIDER_CONFIG_KIND, Kind
from lifecycle.core.objects import metadata
from lifecycle.core.values import now, rfc3339
from lifecycle.kube.errors import (
    ApiError,
    Conflict,
    Gone,
    Invalid,
    NotFound,
    ServerError,
    TooManyRequests,
    error_from_status,
)

__all__ = [
    "KubeCluster",
    "ResourceInfo",
    "api_client",
    "translate",
]

log = logging.getLogger("lifecycle.driver.cluster")

#: Core kinds served by typed APIs: (api class, method suffix, namespaced).
_TYPED: dict[tuple[str, str], tuple[str, str, bool]] = {
    ("v1", "Secret"): ("CoreV1Api", "namespaced_secret", True),
    ("v1", "ConfigMap"): ("CoreV1Api", "namespaced_config_map", True),
    ("v1", "Event"): ("CoreV1Api", "namespaced_event", True),
    ("v1", "Namespace"): ("CoreV1Api", "namespace", False),
    ("coordination.k8s.io/v1", "Lease"): ("CoordinationV1Api", "namespaced_lease", True),
}


@attrs.frozen
class ResourceInfo:
    """Where a kind lives: group, version, plural and scope."""

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        """``group/version`` (``v1`` for the core group)."""
        return f"{self.group}/{self.version}" if self.group else self.version


def api_client(*, kubeconfig: str | None = None, context: str | None = None,
               host: str | None = None) -> k8s.ApiClient:
    """An official-client ``ApiClient``: from ``host``, a kubeconfig, or in-cluster config.

    With neither ``host`` nor ``kubeconfig``, the in-cluster service account
    is tried first, then the default kubeconfig (``$KUBECONFIG`` or
    ``~/.kube/config``). Only connection failures are retried by the client.
    """
    configuration = k8s.Configuration(host=host) if host is not None else k8s.Configuration()
    if host is None and kubeconfig is not None:
        k8s_config.load_kube_config(config_file=kubeconfig, context=context,
                                    client_configuration=configuration)
    elif host is None:
        try:
            k8s_config.load_incluster_config(client_configuration=configuration)
        except k8s_config.ConfigException:
            k8s_config.load_kube_config(context=context, client_configuration=configuration)
    # Retry connection failures only. A 429 or 5xx answer goes back to the caller at
    # once, so a worker never sleeps out a Retry-After: the work queue backs off instead.
    configuration.retries = urllib3.util.Retry(total=3, connect=3, read=0, status=0,
                                               respect_retry_after_header=False,
                                               raise_on_status=False)
    return k8s.ApiClient(configuration)


def translate(exc: BaseException) -> ApiError:
    """The :mod:`lifecycle.kube.errors` error for an exception raised by the client."""
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, k8s.ApiException):
        status = int(exc.status or 0)
        body = exc.body
        if isinstance(body, bytes):
            body = body.decode("utf-8", "replace")
        doc: Any = None
        if isinstance(body, str) and body:
            try:
                doc = json.loads(body)
            except ValueError:
                doc = None
        retry_after = _retry_after(exc)
        if isinstance(doc, dict) and doc.get("kind") == "Status":
            if status and not doc.get("code"):
                doc["code"] = status
            if retry_after is not None:
                doc.setdefault("details", {})["retryAfterSeconds"] = retry_after
            return error_from_status(doc)
        message = str(exc.reason or f"HTTP {status}")
        by_code: dict[int, type[ApiError]] = {404: NotFound, 409: Conflict, 410: Gone,
                                              422: Invalid}
        if status in by_code:
            return by_code[status](message)
        if status == 429:
            return TooManyRequests(message, retry_after=retry_after or 1.0)
        if status >= 500:
            return ServerError(message, status=status)
        if status == 0:
            return ServerError(message, status=503, reason="ServiceUnavailable")
        return ApiError(message, status=status, reason="Unknown")
    if isinstance(exc, urllib3.exceptions.HTTPError | OSError):
        cause = getattr(exc, "reason", None)  # MaxRetryError says what the last try met
        why = type(exc).__name__ + (f" ({type(cause).__name__})"
                                    if isinstance(cause, BaseException) else "")
        return ServerError(f"API server unreachable: {why}", status=503,
                           reason="ServiceUnavailable")
    if isinstance(exc, ValueError):  # the client's own validation of arguments
        return Invalid(f"request rejected by the client: {type(exc).__name__}")
    raise exc


def _retry_after(exc: k8s.ApiException) -> float | None:
    headers = exc.headers or {}
    value = headers.get("Retry-After") if hasattr(headers, "get") else None
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


class KubeCluster:
    """Reads, writes, lists and watches objects through the official client.

    ``kinds`` (and the engine's ProviderConfig) are known up front; other
    kinds are resolved by API discovery the first time they are used.
    Implements :class:`lifecycle.kube.cluster.Cluster`.
    """

    def __init__(self, client: k8s.ApiClient, kinds: Sequence[Kind] = (), *,
                 component: str = "lifecycle", request_timeout: float = 30.0) -> None:
        self.client = client
        self.component = component
        self.request_timeout = request_timeout
        self.custom = k8s.CustomObjectsApi(client)
        self._apis: dict[str, Any] = {
            "CoreV1Api": k8s.CoreV1Api(client),
            "CoordinationV1Api": k8s.CoordinationV1Api(client),
        }
        self._infos: dict[tuple[str, str], ResourceInfo] = {}
        self._lock = threading.Lock()
        for api_version in dict.fromkeys([PROVIDER_CONFIG_API, *(
                k.provider_config_api for k in kinds if hasattr(k, "provider_config_api"))]):
            group, _, version = api_version.partition("/")
            self.register(ResourceInfo(group, version, PROVIDER_CONFIG_KIND, "providerconfigs",
                                       namespaced=False))
        for kind in kinds:
            self.register(ResourceInfo(kind.group, kind.version, kind.kind, kind.plural,
                                       kind.namespaced))
        self._events: OrderedDict[tuple[str, ...], tuple[str, int]] = OrderedDict()
        self._timeout = urllib3.Timeout(total=request_timeout)
        self._target_host: tuple[str, Any, tuple[str | None, int, str], str] | None = None

    def register(self, info: ResourceInfo) -> None:
        """Make a kind known without discovery."""
        with self._lock:
            self._infos[(info.api_version, info.kind)] = info

    def info(self, api_version: str, kind: str) -> ResourceInfo:
        """Where ``kind`` lives; discovered from the server on first use."""
        with self._lock:
            known = self._infos.get((api_version, kind))
        if known is not None:
            return known
        typed = _TYPED.get((api_version, kind))
        group, _, version = api_version.rpartition("/")
        if typed is not None:
            info = ResourceInfo(group, version, kind, kind.lower() + "s", typed[2])
        else:
            info = self._discover(group, version, kind)
        self.register(info)
        return info

    def _discover(self, group: str, version: str, kind: str) -> ResourceInfo:
        try:
            if group:
                found = self.custom.get_api_resources(group, version)
            else:
                found = self._apis["CoreV1Api"].get_api_resources()
        except Exception as exc:
            raise translate(exc) from None
        for resource in found.resources or []:
            if resource.kind == kind and "/" not in resource.name:
                return ResourceInfo(group, version, kind, resource.name, bool(resource.namespaced))
        raise NotFound(f"the server does not serve {kind} in "
                       f"{group + '/' if group else ''}{version}")

    # ---------------------------------------------------------------- calls
    def _typed(self, info: ResourceInfo) -> tuple[Any, str] | None:
        typed = _TYPED.get((info.api_version, info.kind))
        if typed is None:
            return None
        return self._apis[typed[0]], typed[1]

    def _scope(self, info: ResourceInfo, namespace: str | None) -> str | None:
        if not info.namespaced:
            return None
        if not namespace:
            raise Invalid(f"{info.kind}: metadata.namespace: Required value")
        return namespace

    def _path(self, info: ResourceInfo, namespace: str | None, name: str | None = None,
              subresource: str | None = None) -> str:
        """The REST path of a collection or an object (names percent-encoded)."""
        path = (f"/apis/{info.group}/{info.version}" if info.group
                else f"/api/{info.version}")
        if namespace:
            path += f"/namespaces/{quote(namespace, safe='')}"
        path += f"/{info.plural}"
        if name is not None:
            path += f"/{quote(name, safe='')}"
        if subresource:
            path += f"/{subresource}"
        return path

    def _request(self, method: str, path: str, body: Any = None, *,
                 query: dict[str, str] | None = None,
                 content_type: str = "application/json") -> Any:
        """One request through the client's connection pool; the response as parsed JSON.

        The lean path: the URL is built here and the body is ``json.dumps``'d
        once, with no model objects and no generated-method validation; the
        client's configuration still provides the host, TLS, retries and
        credentials (a bearer token is refreshed as the generated methods do).
        """
        client = self.client
        headers = {**client.default_headers, "Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type
        queries: list[tuple[str, str]] = list((query or {}).items())
        try:
            client.update_params_for_auth(headers, queries, ["BearerToken"], path, method, body)
            if queries:
                path += "?" + urlencode(queries)
            response = self._send(method, path, body, headers)
        except Exception as exc:
            raise translate(exc) from None
        if not 200 <= response.status < 300:
            answer = k8s_rest.RESTResponse(response)
            answer.read()
            raise translate(k8s.ApiException(http_resp=answer))
        raw = response.data
        return json.loads(raw) if raw else None

    def _send(self, method: str, path: str, body: Any,
              headers: dict[str, str]) -> urllib3.BaseHTTPResponse:
        """Send one request; the whole response read and its connection back in the pool.

        It goes straight to the client's connection pool for the API server
        (the pool its ``PoolManager`` built from the configuration: TLS, CA,
        client certificate, retries, socket options), skipping the per-call URL
        parsing and content-type dispatch of the client's generic REST layer.
        Through a proxy, or with the client's own read retries switched on,
        the request goes through that layer instead, which owns both.
        """
        rest = self.client.rest_client
        host = self.client.configuration.host
        if (type(rest.pool_manager) is not urllib3.PoolManager
                or getattr(self.client.configuration, "client_go_retries", False)):
            response = rest.request(method, host.rstrip("/") + path, headers=headers, body=body,
                                    _request_timeout=self.request_timeout)
            try:
                response.read()
            finally:
                response.response.release_conn()
            return response.response
        data = json.dumps(body) if body is not None else None
        timeout = self._timeout
        if timeout.total != self.request_timeout:
            timeout = self._timeout = urllib3.Timeout(total=self.request_timeout)
        pool, prefix = self._pool(rest.pool_manager, host)
        return pool.urlopen(method, prefix + path, body=data, headers=headers,
                            timeout=timeout, preload_content=True)

    def _pool(self, manager: urllib3.PoolManager,
              host: str) -> tuple[urllib3.HTTPConnectionPool, str]:
        """The manager's pool for ``host``, and the host's path prefix.

        The pool key is worked out once per host; each call then looks the
        pool up by key, so a pool the manager has dropped (cleared, evicted)
        is never used again: the manager makes a new one as it would.
        """
        target = self._target_host
        if target is None or target[0] != host:
            parts = urlsplit(host)
            scheme = (parts.scheme or "http").lower()
            port = parts.port or (443 if scheme == "https" else 80)
            key = manager.key_fn_by_scheme[scheme](
                {**manager.connection_pool_kw, "scheme": scheme, "host": parts.hostname,
                 "port": port})
            target = self._target_host = (host, key, (parts.hostname, port, scheme),
                                          parts.path.rstrip("/"))
        pool = manager.pools.get(target[1])
        if pool is None:
            pool = manager.connection_from_host(*target[2])
        return pool, target[3]

    def get(self, api_version: str, kind: str, namespace: str | None,
            name: str) -> dict[str, Any]:
        """Read one object; ``NotFound`` if absent."""
        info = self.info(api_version, kind)
        result: dict[str, Any] = self._request(
            "GET", self._path(info, self._scope(info, namespace), name))
        return result

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Create an object; ``AlreadyExists`` if the name is taken."""
        info, ns, _ = self._target(obj)
        result: dict[str, Any] = self._request("POST", self._path(info, ns), obj)
        return result

    def replace(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Write the object (PUT); ``Conflict`` on a stale resourceVersion."""
        return self._replace(obj, status=False)

    def replace_status(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Write the status subresource (PUT .../status); ``Conflict`` if stale."""
        return self._replace(obj, status=True)

    def _replace(self, obj: dict[str, Any], *, status: bool) -> dict[str, Any]:
        info, ns, name = self._target(obj)
        typed = self._typed(info)
        if status and typed is not None and not hasattr(typed[0], f"replace_{typed[1]}_status"):
            raise NotFound(f"{info.kind} has no status subresource")
        result: dict[str, Any] = self._request(
            "PUT", self._path(info, ns, name, "status" if status else None), obj)
        return result

    def delete(self, api_version: str, kind: str, namespace: str | None, name: str) -> None:
        """Request deletion of an object (custom kinds, Secrets, ConfigMaps, Leases)."""
        info = self.info(api_version, kind)
        self._request("DELETE", self._path(info, self._scope(info, namespace), name))

    def list(self, api_version: str, kind: str, namespace: str | None = None,
             label_selector: str | None = None) -> tuple[list[dict[str, Any]], str]:
        """List a kind (in one namespace or all) and return items and resourceVersion."""
        info = self.info(api_version, kind)
        ns = namespace if info.namespaced else None
        doc = self._request("GET", self._path(info, ns),
                            query={"labelSelector": label_selector} if label_selector else None)
        return list(doc.get("items") or []), str(doc["metadata"].get("resourceVersion", ""))

    def _list_call(self, info: ResourceInfo, namespace: str | None) -> tuple[Any, ...]:
        typed = self._typed(info)
        if typed is not None:
            api, sfx = typed
            if not info.namespaced:
                return (getattr(api, f"list_{sfx}"),)
            if namespace:
                return (getattr(api, f"list_{sfx}"), namespace)
            return (getattr(api, f"list_{sfx.removeprefix('namespaced_')}_for_all_namespaces"),)
        if info.namespaced and namespace:
            return (self.custom.list_namespaced_custom_object, info.group, info.version,
                    namespace, info.plural)
        return (self.custom.list_cluster_custom_object, info.group, info.version, info.plural)

    def _target(self, obj: dict[str, Any]) -> tuple[ResourceInfo, str | None, str]:
        if not isinstance(obj, dict):
            raise Invalid("the object must be a JSON object")
        info = self.info(str(obj.get("apiVersion", "")), str(obj.get("kind", "")))
        meta = metadata(obj)
        return info, self._scope(info, meta.get("namespace")), str(meta.get("name", ""))

    # --------------------------------------------------------------- events
    def record_event(self, involved: dict[str, Any], type: str, reason: str,
                     message: str) -> dict[str, Any]:
        """Record a v1 Event; a repeat of a recent one bumps its ``count`` instead."""
        meta = metadata(involved)
        namespace = meta.get("namespace") or "default"
        message = message[:1024]
        key = (namespace, str(meta.get("uid", "")), type, reason, message)
        stamp = rfc3339(now())
        events = self.info("v1", "Event")
        seen = self._events.get(key)
        if seen is not None:
            name, count = seen
            try:
                event = self._request("PATCH", self._path(events, namespace, name),
                                      {"count": count + 1, "lastTimestamp": stamp},
                                      content_type="application/merge-patch+json")
            except NotFound:
                self._events.pop(key, None)
            else:
                self._remember(key, name, count + 1)
                return event
        involved_name = str(meta.get("name", "object"))
        body = {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"generateName": f"{involved_name}.", "namespace": namespace},
            "involvedObject": {
                "apiVersion": involved.get("apiVersion", ""), "kind": involved.get("kind", ""),
                "name": involved_name, "namespace": meta.get("namespace", ""),
                "uid": meta.get("uid", ""), "resourceVersion": meta.get("resourceVersion", ""),
            },
            "type": type, "reason": reason, "message": message, "count": 1,
            "firstTimestamp": stamp, "lastTimestamp": stamp,
            "source": {"component": self.component}, "reportingComponent": self.component,
        }
        event = self._request("POST", self._path(events, namespace), body)
        self._remember(key, event["metadata"]["name"], 1)
        return event

    def _remember(self, key: tuple[str, ...], name: str, count: int) -> None:
        with self._lock:
            self._events[key] = (name, count)
            self._events.move_to_end(key)
            while len(self._events) > 4096:
                self._events.popitem(last=False)

    # ----------------------------------------------------------- list/watch
    def list_watcher(self, api_version: str, kind: str, namespace: str | None = None,
                     label_selector: str | None = None) -> KubeListWatcher:
        """A list-and-watch source for an informer of one custom kind."""
        return KubeListWatcher(self, self.info(api_version, kind), namespace, label_selector)


def _selector(label_selector: str | None) -> dict[str, Any]:
    return {"label_selector": label_selector} if label_selector else {}


class _RawWatch(k8s_watch.Watch):
    """``kubernetes.watch.Watch`` that leaves each event's object as the JSON it arrived as.

    The stock class builds the generated model of every event's object (a
    ``json.dumps`` and a model walk per event, for Secrets and other built-in
    kinds) that the informer never uses: it keeps ``raw_object``.
    """

    def get_return_type(self, func: Any) -> None:
        """No model type: events keep their parsed JSON only."""
        return None


class KubeListWatcher:
    """Lists and watches one kind with ``kubernetes.watch.Watch``."""

    def __init__(self, cluster: KubeCluster, info: ResourceInfo, namespace: str | None,
                 label_selector: str | None) -> None:
        self.cluster = cluster
        self.info = info
        self.namespace = namespace
        self.label_selector = label_selector
        self._watch: k8s_watch.Watch | None = None
        self._lock = threading.Lock()

    def list(self) -> tuple[list[dict[str, Any]], str]:
        """All objects and the list's resourceVersion."""
        return self.cluster.list(self.info.api_version, self.info.kind, self.namespace,
                                 self.label_selector)

    def watch(self, resource_version: str, *, timeout: float,
              inactivity: float) -> Iterator[tuple[str, dict[str, Any]]]:
        """Stream events after ``resource_version`` with bookmarks; ``Gone`` on 410."""
        call = self.cluster._list_call(self.info, self.namespace)
        watcher = _RawWatch()
        with self._lock:
            self._watch = watcher
        try:
            stream = watcher.stream(
                call[0], *call[1:], resource_version=resource_version,
                allow_watch_bookmarks=True, timeout_seconds=max(1, int(timeout)),
                _request_timeout=(10.0, inactivity),
                **_selector(self.label_selector),
            )
            for event in stream:
                yield str(event.get("type", "")), event.get("raw_object") or {}
        except Exception as exc:
            error = translate(exc)
            raise error from None
        finally:
            with self._lock:
                self._watch = None

    def stop(self) -> None:
        """Abort the running watch, if any."""
        with self._lock:
            watcher = self._watch
        if watcher is not None:
            watcher.stop()
