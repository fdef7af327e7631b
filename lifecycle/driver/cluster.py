"""The engine's :class:`~lifecycle.kube.cluster.Cluster` on the official ``kubernetes`` client.

The official client loads the configuration (kubeconfig, in-cluster service
account, exec plugins, token files), discovers kinds and installs CRDs.
The requests an operator sends all the time (get, list, watch, create,
replace, patch, delete of objects, their status, Secrets and Events) go
through :class:`~lifecycle.driver.transport.Transport` instead, a lean
HTTP/1.1 client built from the same ``Configuration`` (host, TLS, proxy,
bearer token): the URL is built here, a body is serialised once with
``json.dumps`` and an answer parsed once with ``json.loads``, with no model
objects in between, so objects keep exactly the server's field names and a
call costs little beyond the exchange itself (docs/operator-costs.md).

Errors become the classes of :mod:`lifecycle.kube.errors` that the reconciler
understands: the ``Status`` body when there is one, else the HTTP code
(404 NotFound, 409 Conflict, 410 Gone, 422 Invalid, 429 TooManyRequests with
``Retry-After``, 5xx ServerError). Connection failures and timeouts are a 503
``ServerError``.

:meth:`KubeCluster.list_watcher` gives informers a list-and-watch source:
watch streams with bookmarks, a server-side timeout and a client-side read
timeout, each event decoded once.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from typing import Any
from urllib.parse import quote, urlencode

import attrs
import urllib3
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from lifecycle.core.kind import PROVIDER_CONFIG_API, PROVIDER_CONFIG_KIND, Kind
from lifecycle.core.objects import metadata
from lifecycle.core.values import now, rfc3339
from lifecycle.driver import store
from lifecycle.driver.transport import Transport, WatchStream
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
    "KubeListWatcher",
    "ResourceInfo",
    "api_client",
    "error_for",
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


def error_for(status: int, body: bytes | str | None, reason: str | None = None,
              retry_after: float | None = None) -> ApiError:
    """The :mod:`lifecycle.kube.errors` error for a non-2xx answer.

    A ``Status`` body decides (its code filled from the answer when it has
    none, ``Retry-After`` added to its details); without one, the HTTP code.
    """
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    doc: Any = None
    if isinstance(body, str) and body:
        try:
            doc = json.loads(body)
        except ValueError:
            doc = None
    if isinstance(doc, dict) and doc.get("kind") == "Status":
        if status and not doc.get("code"):
            doc["code"] = status
        if retry_after is not None:
            doc.setdefault("details", {})["retryAfterSeconds"] = retry_after
        return error_from_status(doc)
    message = str(reason or f"HTTP {status}")
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


def translate(exc: BaseException) -> ApiError:
    """The :mod:`lifecycle.kube.errors` error for an exception raised by a client."""
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, k8s.ApiException):
        headers = exc.headers or {}
        value = headers.get("Retry-After") if hasattr(headers, "get") else None
        return error_for(int(exc.status or 0), exc.body, exc.reason, _seconds(value))
    if isinstance(exc, urllib3.exceptions.HTTPError | OSError):
        cause = getattr(exc, "reason", None)  # MaxRetryError says what the last try met
        why = type(exc).__name__ + (f" ({type(cause).__name__})"
                                    if isinstance(cause, BaseException) else "")
        return ServerError(f"API server unreachable: {why}", status=503,
                           reason="ServiceUnavailable")
    if isinstance(exc, ValueError):  # the client's own validation of arguments
        return Invalid(f"request rejected by the client: {type(exc).__name__}")
    raise exc


def _seconds(value: Any) -> float | None:
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
        #: Recent Events: a digest of (namespace, uid, type, reason, message) to the
        #: Event's name and count (a digest: the message and uid are not kept alive).
        self._events: OrderedDict[Any, tuple[str, int]] = OrderedDict()
        self._transport: Transport | None = None

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

    @property
    def transport(self) -> Transport:
        """The lean HTTP client, made from the client's configuration on first use."""
        transport = self._transport
        if transport is None:
            with self._lock:
                if self._transport is None:
                    self._transport = Transport(self.client.configuration,
                                                headers=dict(self.client.default_headers))
                transport = self._transport
        return transport

    def _request(self, method: str, path: str, body: Any = None, *,
                 query: dict[str, str] | None = None,
                 content_type: str = "application/json",
                 decode: Callable[[bytes], Any] = store.loads) -> Any:
        """One request through the lean transport; the answer as parsed JSON.

        The body is ``json.dumps``'d once and the answer decoded once (by
        ``decode``; by default without ``metadata.managedFields``, which the
        engine never reads: an object written back without it leaves the
        server's record as it is, and the next request's body is half the
        size); a non-2xx answer raises the error its ``Status`` (or code) names.
        """
        if query:
            path += "?" + urlencode(query)
        data = _encode(body).encode() if body is not None else None
        try:
            answer = self.transport.request(method, path, data, content_type=content_type,
                                            timeout=self.request_timeout)
        except Exception as exc:
            raise translate(exc) from None
        if not 200 <= answer.status < 300:
            raise error_for(answer.status, answer.body, None, _seconds(answer.retry_after))
        return decode(answer.body) if answer.body else None

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
             label_selector: str | None = None, *,
             decode: Callable[[bytes], Any] = store.loads,
             field_selector: str | None = None) -> tuple[list[dict[str, Any]], str]:
        """List a kind (in one namespace or all) and return items and resourceVersion.

        ``decode`` turns the answer's bytes into objects (by default
        :func:`lifecycle.driver.store.loads`, which drops ``managedFields``).
        """
        info = self.info(api_version, kind)
        ns = namespace if info.namespaced else None
        query = _selectors(label_selector, field_selector)
        doc = self._request("GET", self._path(info, ns), query=query or None, decode=decode)
        return list(doc.get("items") or []), str(doc["metadata"].get("resourceVersion", ""))

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
        key = hashlib.blake2b("\0".join((namespace, str(meta.get("uid", "")), type, reason,
                                          message)).encode(), digest_size=16).digest()
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

    def _remember(self, key: Any, name: str, count: int) -> None:
        with self._lock:
            self._events[key] = (name, count)
            self._events.move_to_end(key)
            while len(self._events) > 4096:
                self._events.popitem(last=False)

    # ----------------------------------------------------------- list/watch
    def list_watcher(self, api_version: str, kind: str, namespace: str | None = None,
                     label_selector: str | None = None, *,
                     field_selector: str | None = None) -> KubeListWatcher:
        """A list-and-watch source for an informer of one kind (``field_selector``:
        ``metadata.name=NAME`` watches one object)."""
        return KubeListWatcher(self, self.info(api_version, kind), namespace, label_selector,
                               field_selector)


def _selectors(label_selector: str | None, field_selector: str | None) -> dict[str, str]:
    """The query parameters of a label and a field selector (those given)."""
    query = {}
    if label_selector:
        query["labelSelector"] = label_selector
    if field_selector:
        query["fieldSelector"] = field_selector
    return query


class KubeListWatcher:
    """Lists and watches one kind through the cluster's lean transport."""

    def __init__(self, cluster: KubeCluster, info: ResourceInfo, namespace: str | None,
                 label_selector: str | None, field_selector: str | None = None) -> None:
        self.cluster = cluster
        self.info = info
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        self._stream: WatchStream | None = None
        self._lock = threading.Lock()

    def list(self) -> tuple[list[dict[str, Any]], str]:
        """All objects (in the compact form of :func:`lifecycle.driver.store.decode`,
        the smallest while a whole list is held at once before it is packed) and the
        list's resourceVersion.

        Read in pages of :data:`LIST_PAGE` objects, one consistent snapshot, so
        a large list never sits in memory whole as bytes and text (memory a
        process keeps once it has grown to hold it); when the server lets the
        continue token expire meanwhile (410), the list is read again in one
        answer.
        """
        info = self.info
        path = self.cluster._path(info, self.namespace if info.namespaced else None)
        query = {"limit": str(LIST_PAGE), **_selectors(self.label_selector, self.field_selector)}
        items: list[dict[str, Any]] = []
        while True:
            try:
                doc = self.cluster._request("GET", path, query=query, decode=store.decode)
            except Gone:
                if "continue" not in query:
                    raise
                return self.cluster.list(info.api_version, info.kind, self.namespace,
                                         self.label_selector, decode=store.decode,
                                         field_selector=self.field_selector)
            items.extend(doc.get("items") or [])
            meta = doc.get("metadata") or {}
            token = meta.get("continue")
            if not token:
                return items, str(meta.get("resourceVersion", ""))
            query["continue"] = str(token)

    def watch(self, resource_version: str, *, timeout: float,
              inactivity: float) -> Iterator[tuple[str, dict[str, Any]]]:
        """Stream events after ``resource_version`` with bookmarks; ``Gone`` on 410.

        Each object is decoded by :func:`lifecycle.driver.store.loads` (an informer
        packs what it keeps, so a compact decode would be spent on a passing dict).
        """
        for kind, line in self.watch_lines(resource_version, timeout=timeout,
                                           inactivity=inactivity):
            event = store.loads(line)
            yield kind or str(event.get("type", "")), event.get("object") or {}

    def watch_lines(self, resource_version: str, *, timeout: float,
                    inactivity: float) -> Iterator[tuple[str, bytes]]:
        """Each event of the stream as its type (when read cheaply, else "") and raw line.

        An informer that can tell from the raw line that it already holds an
        object decodes only the lines it needs.
        """
        info = self.info
        query = {"watch": "true", "resourceVersion": resource_version,
                 "allowWatchBookmarks": "true", "timeoutSeconds": str(max(1, int(timeout))),
                 **_selectors(self.label_selector, self.field_selector)}
        ns = self.namespace if info.namespaced else None
        path = self.cluster._path(info, ns) + "?" + urlencode(query)
        try:
            stream = self.cluster.transport.watch(path, connect_timeout=10.0,
                                                  inactivity=inactivity)
        except Exception as exc:
            raise translate(exc) from None
        if stream.error is not None:
            error = stream.error
            raise error_for(error.status, error.body, None, _seconds(error.retry_after))
        with self._lock:
            self._stream = stream
        try:
            for line in stream.lines():
                yield _event_type(line), line
        except Exception as exc:
            raise translate(exc) from None
        finally:
            with self._lock:
                self._stream = None
            stream.close()

    def stop(self) -> None:
        """Abort the running watch, if any."""
        with self._lock:
            stream = self._stream
        if stream is not None:
            stream.close()


#: A request body's JSON, compact (one encoder for every request).
_encode = json.JSONEncoder(separators=(",", ":"), check_circular=False).encode

#: Objects per page when an informer lists (as client-go's reflector pages its lists).
LIST_PAGE = 500

_TYPES = {b'{"type":"' + t.encode() + b'"': t for t in
          ("ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR")}


def _event_type(line: bytes) -> str:
    """The event's type when the line starts with it, as servers write it; else ""."""
    end = line.find(b'",', 0, 24)
    return _TYPES.get(line[:end + 1], "") if end > 0 else ""
