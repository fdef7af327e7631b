"""An HTTP face for the embedded API: the Kubernetes REST and watch protocol.

:class:`APIServerHTTP` serves an embedded API on ``127.0.0.1`` (a free port by
default) well enough that the official ``kubernetes`` Python client works
against it unchanged: discovery (``/api``, ``/apis``, ``/apis/GROUP/VERSION``),
create (POST), get and list (GET, with ``labelSelector``), replace (PUT),
JSON merge patch and JSON patch (PATCH), delete (DELETE, with preconditions),
the ``status`` subresource, and ``watch=true`` streams resumed from a
``resourceVersion``, with bookmarks and ``410 Gone`` as an ``ERROR`` event
carrying a ``Status``. Errors answer with a ``metav1.Status`` body and the
matching HTTP code.

Creating a ``CustomResourceDefinition`` registers the kind it defines, so
``lifecycle crds`` output can be applied to it like to a real cluster.

``docs/driver.md`` lists where this face differs from a real API server.
"""

from __future__ import annotations

import json
import logging
import select
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from lifecycle.core import objects
from lifecycle.kube.errors import ApiError, Conflict, Gone, Invalid, NotFound, TooManyRequests
from lifecycle.kube.objects import clone
from lifecycle.kube.resources import ResourceType
from lifecycle.sim.apiserver import EmbeddedAPI

__all__ = ["CRD", "APIServerHTTP", "json_patch"]

log = logging.getLogger("lifecycle.sim.http")

#: The CustomResourceDefinition type; creating one through the face registers its kind.
CRD = ResourceType(
    "apiextensions.k8s.io", "v1", "CustomResourceDefinition", "customresourcedefinitions",
    namespaced=False, status_subresource=True,
)

_VERBS = ["create", "delete", "get", "list", "patch", "update", "watch"]
_MAX_BODY = 8 * 1024 * 1024


def json_patch(target: Any, operations: Any) -> Any:
    """Apply a JSON patch (RFC 6902: add, remove, replace, test, copy, move) to a copy.

    Raises :class:`~lifecycle.kube.errors.Invalid` for a malformed patch or a
    failed ``test``.
    """
    if not isinstance(operations, list):
        raise Invalid("a JSON patch must be a list of operations")
    doc = clone(target)
    for op in operations:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise Invalid(f"invalid JSON patch operation {op!r}")
        kind, path = op["op"], op["path"]
        if kind in ("add", "replace", "test"):
            if "value" not in op:
                raise Invalid(f"JSON patch {kind} at {path!r} needs a value")
            value = clone(op["value"])
        if kind in ("copy", "move"):
            value = clone(_pointer_get(doc, op.get("from", "")))
            if kind == "move":
                doc = _pointer_remove(doc, op["from"])
            kind = "add"
        if kind == "add":
            doc = _pointer_set(doc, path, value, insert=True)
        elif kind == "replace":
            _pointer_get(doc, path)
            doc = _pointer_set(doc, path, value, insert=False)
        elif kind == "remove":
            doc = _pointer_remove(doc, path)
        elif kind == "test":
            if _pointer_get(doc, path) != value:
                raise Invalid(f"JSON patch test failed at {path!r}")
        else:
            raise Invalid(f"unknown JSON patch operation {kind!r}")
    return doc


def _tokens(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise Invalid(f"invalid JSON pointer {path!r}")
    return [t.replace("~1", "/").replace("~0", "~") for t in path[1:].split("/")]


def _step(node: Any, token: str, path: str) -> Any:
    if isinstance(node, dict) and token in node:
        return node[token]
    if isinstance(node, list) and token.isdigit() and int(token) < len(node):
        return node[int(token)]
    raise Invalid(f"JSON patch path {path!r} does not exist")


def _pointer_get(doc: Any, path: str) -> Any:
    node = doc
    for token in _tokens(path):
        node = _step(node, token, path)
    return node


def _parent(doc: Any, path: str) -> tuple[Any, str]:
    tokens = _tokens(path)
    if not tokens:
        raise Invalid("JSON patch cannot address the whole document here")
    node = doc
    for token in tokens[:-1]:
        node = _step(node, token, path)
    return node, tokens[-1]


def _pointer_set(doc: Any, path: str, value: Any, *, insert: bool) -> Any:
    if path == "":
        return value
    parent, last = _parent(doc, path)
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        if last == "-" and insert:
            parent.append(value)
        elif last.isdigit() and int(last) <= len(parent) - (0 if insert else 1):
            if insert:
                parent.insert(int(last), value)
            else:
                parent[int(last)] = value
        else:
            raise Invalid(f"JSON patch index {last!r} out of range at {path!r}")
    else:
        raise Invalid(f"JSON patch path {path!r} does not exist")
    return doc


def _pointer_remove(doc: Any, path: str) -> Any:
    parent, last = _parent(doc, path)
    _step(parent, last, path)
    if isinstance(parent, dict):
        del parent[last]
    else:
        del parent[int(last)]
    return doc


class _Route:
    """A parsed resource URL: type, namespace, name and subresource."""

    def __init__(self, rtype: ResourceType, namespace: str | None, name: str | None,
                 subresource: str | None) -> None:
        self.rtype = rtype
        self.namespace = namespace
        self.name = name
        self.subresource = subresource


class APIServerHTTP:
    """Serve ``api`` over HTTP on ``host:port`` (port 0 picks a free one).

    Use as a context manager or call :meth:`start` and :meth:`stop`.
    :attr:`url` is the base URL to configure a client with.
    """

    def __init__(self, api: EmbeddedAPI, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self.api = api
        api.register(CRD)
        self._server = ThreadingHTTPServer((host, port), _Handler)
        self._server.daemon_threads = True
        self._server.face = self  # type: ignore[attr-defined]
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()

    @property
    def port(self) -> int:
        """The TCP port the server listens on."""
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return f"http://{self._server.server_address[0]}:{self.port}"

    def start(self) -> APIServerHTTP:
        """Start serving in a daemon thread; returns ``self``."""
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.1},
                                        name="embedded-api-http", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and end every open watch stream."""
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> APIServerHTTP:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def kubeconfig(self, namespace: str = "default") -> dict[str, Any]:
        """A kubeconfig document pointing at this server (no credentials needed)."""
        return {
            "apiVersion": "v1", "kind": "Config", "current-context": "embedded",
            "clusters": [{"name": "embedded", "cluster": {"server": self.url}}],
            "users": [{"name": "embedded", "user": {}}],
            "contexts": [{"name": "embedded", "context": {
                "cluster": "embedded", "user": "embedded", "namespace": namespace}}],
        }

    # ------------------------------------------------------------ discovery
    def discovery(self, parts: list[str]) -> dict[str, Any] | None:
        """The discovery document for a path split into parts, or ``None`` if it is not one."""
        types = self.api.types()
        if parts == ["api"]:
            return {"kind": "APIVersions", "apiVersion": "v1", "versions": ["v1"],
                    "serverAddressByClientCIDRs": [
                        {"clientCIDR": "0.0.0.0/0", "serverAddress": f"127.0.0.1:{self.port}"}]}
        if parts == ["apis"]:
            return {"kind": "APIGroupList", "apiVersion": "v1",
                    "groups": [self._group(g, types) for g in _groups(types)]}
        if len(parts) == 2 and parts[0] == "apis":
            if parts[1] not in _groups(types):
                raise NotFound(f"the server could not find the requested resource ({parts[1]})")
            return {"kind": "APIGroup", "apiVersion": "v1", **self._group(parts[1], types)}
        if parts == ["api", "v1"] or (len(parts) == 3 and parts[0] == "apis"):
            group_version = "v1" if parts[0] == "api" else f"{parts[1]}/{parts[2]}"
            served = [t for t in types if t.api_version == group_version]
            if not served:
                raise NotFound(f"the server could not find the requested resource "
                               f"({group_version})")
            resources: list[dict[str, Any]] = []
            for t in served:
                resources.append({"name": t.plural, "singularName": t.kind.lower(),
                                  "namespaced": t.namespaced, "kind": t.kind, "verbs": _VERBS})
                if t.status_subresource:
                    resources.append({"name": f"{t.plural}/status", "singularName": "",
                                      "namespaced": t.namespaced, "kind": t.kind,
                                      "verbs": ["get", "patch", "update"]})
            return {"kind": "APIResourceList", "apiVersion": "v1",
                    "groupVersion": group_version, "resources": resources}
        if parts == ["version"]:
            return {"major": "1", "minor": "30", "gitVersion": "v1.30.0-lifecycle-embedded",
                    "gitCommit": "", "gitTreeState": "clean",
                    "buildDate": "1970-01-01T00:00:00Z", "goVersion": "none",
                    "compiler": "none", "platform": "linux/amd64"}
        return None

    @staticmethod
    def _group(name: str, types: list[ResourceType]) -> dict[str, Any]:
        versions = sorted({t.version for t in types if t.group == name})
        entries = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
        return {"name": name, "versions": entries, "preferredVersion": entries[0]}

    # --------------------------------------------------------------- routes
    def route(self, parts: list[str]) -> _Route:
        """Resolve a resource path (already split) to a type, namespace, name, subresource."""
        if parts[:2] == ["api", "v1"]:
            api_version, rest = "v1", parts[2:]
        elif parts[:1] == ["apis"] and len(parts) >= 3:
            api_version, rest = f"{parts[1]}/{parts[2]}", parts[3:]
        else:
            raise NotFound("the server could not find the requested resource")
        namespace: str | None = None
        # namespaces/NS/PLURAL... is a namespaced path, unless it is a namespace's subresource.
        if len(rest) >= 3 and rest[0] == "namespaces" and not (
            len(rest) == 3 and api_version == "v1" and rest[2] in ("status", "finalize")
        ):
            namespace, rest = rest[1], rest[2:]
        if not rest or len(rest) > 3:
            raise NotFound("the server could not find the requested resource")
        rtype = self.api.resource_type_by_plural(api_version, rest[0])
        if namespace is not None and not rtype.namespaced:
            raise NotFound(f"the server could not find the requested resource ({rest[0]})")
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        if sub is not None and (sub != "status" or not rtype.status_subresource):
            raise NotFound(f"the server could not find the requested resource "
                           f"({rtype.resource}/{sub})")
        if rtype.namespaced and name is not None and namespace is None:
            raise NotFound(f"the server could not find the requested resource ({rest[0]})")
        return _Route(rtype, namespace, name, sub)

    def on_created(self, obj: dict[str, Any]) -> None:
        """Register the kind a created CustomResourceDefinition defines."""
        if obj.get("kind") != CRD.kind:
            return
        spec = objects.spec(obj)
        names = spec.get("names") or {}
        for version in spec.get("versions") or []:
            if version.get("served", True):
                self.api.register(ResourceType(
                    spec.get("group", ""), version.get("name", ""), names.get("kind", ""),
                    names.get("plural", ""), namespaced=spec.get("scope") == "Namespaced",
                    status_subresource="status" in (version.get("subresources") or {}),
                ))


def _groups(types: list[ResourceType]) -> list[str]:
    seen: dict[str, None] = {}
    for t in types:
        if t.group:
            seen.setdefault(t.group, None)
    return list(seen)


class _Handler(BaseHTTPRequestHandler):
    """One connection: dispatch each request to the embedded API."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out as separate writes
    server_version = "lifecycle-embedded-api"

    @property
    def face(self) -> APIServerHTTP:
        return self.server.face  # type: ignore[attr-defined]

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s " + format, self.address_string(), *args)

    # ------------------------------------------------------------- dispatch
    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_PATCH(self) -> None:
        self._dispatch("PATCH")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    def _dispatch(self, method: str) -> None:
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        parts = [p for p in url.path.split("/") if p]
        try:
            body = self._body()
            if parts in (["healthz"], ["readyz"], ["livez"]):
                self._send_text(200, "ok")
                return
            if method == "GET":
                doc = self.face.discovery(parts)
                if doc is not None:
                    self._send_json(200, doc)
                    return
            route = self.face.route(parts)
            if method == "GET" and route.name is None:
                if query.get("watch") in ("true", "1"):
                    self._watch(route, query)
                else:
                    self._list(route, query)
                return
            status, answer = self._handle(method, route, body, query)
            self._send_json(status, answer)
        except ApiError as exc:
            self._send_error(exc)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        if length > _MAX_BODY:
            raise ApiError("request entity too large", status=413, reason="RequestEntityTooLarge")
        if length <= 0:
            return None
        raw = self.rfile.read(length)
        try:
            return json.loads(raw)
        except ValueError:
            raise ApiError("the request body is not valid JSON", status=400,
                           reason="BadRequest") from None

    def _handle(self, method: str, route: _Route, body: Any,
                query: dict[str, str]) -> tuple[int, Any]:
        api, rtype = self.face.api, route.rtype
        if method == "POST":
            if route.name is not None:
                raise ApiError("POST is not allowed on a named resource", status=405,
                               reason="MethodNotAllowed")
            obj = self._object(body, rtype, route)
            created = api.create(obj)
            self.face.on_created(created)
            return 201, created
        if route.name is None:
            raise ApiError(f"{method} needs a resource name", status=405,
                           reason="MethodNotAllowed")
        if method == "GET":
            return 200, api.get(rtype.api_version, rtype.kind, route.namespace, route.name)
        if method == "PUT":
            obj = self._object(body, rtype, route)
            if objects.metadata(obj).get("name") not in (None, route.name):
                raise Invalid("the name of the object does not match the name on the URL")
            obj.setdefault("metadata", {})["name"] = route.name
            if route.subresource == "status":
                return 200, api.replace_status(obj)
            return 200, api.replace(obj)
        if method == "PATCH":
            return 200, self._patch(route, body)
        if method == "DELETE":
            options = body if isinstance(body, dict) else {}
            pre = options.get("preconditions") or {}
            if pre.get("uid"):
                current = api.get(rtype.api_version, rtype.kind, route.namespace, route.name)
                if current["metadata"]["uid"] != pre["uid"]:
                    raise Conflict(f"Precondition failed: UID in precondition: {pre['uid']}, "
                                   f"UID in object meta: {current['metadata']['uid']}")
            result = api.delete(rtype.api_version, rtype.kind, route.namespace, route.name,
                                resource_version=pre.get("resourceVersion"))
            if result is not None:
                return 200, result
            return 200, {"kind": "Status", "apiVersion": "v1", "metadata": {},
                         "status": "Success",
                         "details": {"name": route.name, "group": rtype.group,
                                     "kind": rtype.plural}}
        raise ApiError(f"method {method} is not allowed", status=405, reason="MethodNotAllowed")

    def _object(self, body: Any, rtype: ResourceType, route: _Route) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise Invalid("the request body must be a JSON object")
        obj = dict(body)
        obj.setdefault("apiVersion", rtype.api_version)
        obj.setdefault("kind", rtype.kind)
        if (obj["apiVersion"], obj["kind"]) != (rtype.api_version, rtype.kind):
            raise ApiError(f"the API version in the data ({obj['apiVersion']}) does not match "
                           f"the expected API version ({rtype.api_version})", status=400,
                           reason="BadRequest")
        meta = dict(objects.metadata(obj))
        if route.namespace is not None:
            if meta.get("namespace") not in (None, "", route.namespace):
                raise ApiError("the namespace of the provided object does not match the "
                               "namespace sent on the request", status=400, reason="BadRequest")
            meta["namespace"] = route.namespace
        obj["metadata"] = meta
        return obj

    def _patch(self, route: _Route, body: Any) -> dict[str, Any]:
        api, rtype = self.face.api, route.rtype
        content_type = (self.headers.get("Content-Type") or "").split(";")[0].strip()
        if content_type == "application/json-patch+json":
            current = api.get(rtype.api_version, rtype.kind, route.namespace, route.name)
            patched = json_patch(current, body)
            # Rewritten as a full merge patch guarded by the version it was computed from.
            patch = _diff_as_merge_patch(current, patched)
            patch.setdefault("metadata", {})["resourceVersion"] = (
                current["metadata"]["resourceVersion"])
        elif content_type in ("application/merge-patch+json",
                              "application/strategic-merge-patch+json", "application/json"):
            if not isinstance(body, dict):
                raise Invalid("a merge patch must be a JSON object")
            patch = body
        else:
            raise ApiError(f"the media type {content_type!r} is not supported for PATCH",
                           status=415, reason="UnsupportedMediaType")
        return api.patch(rtype.api_version, rtype.kind, route.namespace, route.name, patch,
                         subresource=route.subresource)

    def _list(self, route: _Route, query: dict[str, str]) -> None:
        rtype = route.rtype
        items, rv = self.face.api.list(rtype.api_version, rtype.kind, route.namespace,
                                       query.get("labelSelector") or None)
        self._send_json(200, {"apiVersion": rtype.api_version, "kind": f"{rtype.kind}List",
                              "metadata": {"resourceVersion": rv}, "items": items})

    # ---------------------------------------------------------------- watch
    def _watch(self, route: _Route, query: dict[str, str]) -> None:
        rtype = route.rtype
        want_bookmarks = query.get("allowWatchBookmarks") in ("true", "1")
        timeout = float(query["timeoutSeconds"]) if query.get("timeoutSeconds") else None
        events: Iterator[tuple[str, dict[str, Any]]]
        try:
            # Bookmarks are always requested: they double as a heartbeat that lets the
            # stream notice a client that went away.
            stream = self.face.api.watch(
                rtype.api_version, rtype.kind, route.namespace,
                query.get("resourceVersion") or None,
                label_selector=query.get("labelSelector") or None,
                timeout=timeout, bookmarks=True,
            )
        except Gone as exc:
            stream = None
            events = iter([("ERROR", exc.to_status())])
        else:
            events = ((e.type, e.object) for e in stream)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.close_connection = True
        try:
            for kind, obj in events:
                if kind == "BOOKMARK" and not want_bookmarks:
                    if self._client_gone():
                        break
                    continue
                line = json.dumps({"type": kind, "object": obj}, separators=(",", ":")) + "\n"
                data = line.encode()
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, OSError):
            pass
        finally:
            if stream is not None:
                stream.stop()

    def _client_gone(self) -> bool:
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            if readable:
                return self.connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True
        return False

    # ------------------------------------------------------------- answers
    def _send_json(self, status: int, doc: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(doc, separators=(",", ":")).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def _send_text(self, status: int, text: str) -> None:
        data = text.encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _send_error(self, exc: ApiError) -> None:
        headers = {}
        if isinstance(exc, TooManyRequests):
            headers["Retry-After"] = str(max(1, round(exc.retry_after)))
        self._send_json(exc.status, exc.to_status(), headers)


def _diff_as_merge_patch(before: Any, after: Any) -> Any:
    """The JSON merge patch that turns ``before`` into ``after``."""
    if not isinstance(before, dict) or not isinstance(after, dict):
        return clone(after)
    patch: dict[str, Any] = {}
    for key in before.keys() - after.keys():
        patch[key] = None
    for key, value in after.items():
        if key not in before:
            patch[key] = clone(value)
        elif before[key] != value:
            patch[key] = _diff_as_merge_patch(before[key], value)
    return patch

