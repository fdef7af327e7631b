"""An HTTP face for the embedded API: the Kubernetes REST and watch protocol.

:class:`APIServerHTTP` serves an embedded API on ``127.0.0.1`` (a free port by
default) so that the official ``kubernetes`` Python client, ``kubectl`` and
kopf work against it unchanged:

* discovery (:mod:`lifecycle.sim.discovery`), ``/version``, ``/healthz``, and
  OpenAPI v2/v3 (:mod:`lifecycle.sim.openapi`) so kubectl validates and explains;
* create, get, list (label and field selectors, ``limit``/``continue``,
  ``resourceVersion``/``resourceVersionMatch``), replace, delete (preconditions,
  ``propagationPolicy``, ``DeleteOptions`` bodies), delete-collection, the
  ``status`` subresource, ``dryRun=All`` on every write, ``fieldValidation``;
* JSON patch, merge patch and, for built-in kinds, strategic merge patch
  (:mod:`lifecycle.sim.patches`); server-side apply answers 415;
* ``watch`` streams resumed from a ``resourceVersion``, with bookmarks and
  ``410 Gone`` as an ``ERROR`` event carrying a ``Status``;
* Table and ``PartialObjectMetadata`` answers (:mod:`lifecycle.sim.tables`).

Every error, malformed requests included, answers a ``metav1.Status`` body with
the matching HTTP code, and the connection stays usable when the body was read.
Request parsing is in :mod:`lifecycle.sim.requests`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import select
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import yaml

from lifecycle.core import objects
from lifecycle.kube.errors import (
    ApiError,
    BadRequest,
    Conflict,
    Gone,
    Invalid,
    MethodNotAllowed,
    NotFound,
    TooManyRequests,
    UnsupportedMediaType,
)
from lifecycle.kube.resources import ResourceType
from lifecycle.kube.selectors import parse_label_selector
from lifecycle.sim import openapi, tables
from lifecycle.sim.apiserver import EmbeddedAPI
from lifecycle.sim.crds import CRD
from lifecycle.sim.discovery import discovery
from lifecycle.sim.patches import diff_as_merge_patch, json_patch, strategic_merge
from lifecycle.sim.requests import Options, accepts, decode_body, parse_options, read_body

__all__ = ["CRD", "APIServerHTTP", "json_patch"]

log = logging.getLogger("lifecycle.sim.http")

_JSON_PATCH = "application/json-patch+json"
_MERGE_PATCH = "application/merge-patch+json"
_STRATEGIC_PATCH = "application/strategic-merge-patch+json"
_APPLY_PATCH = "application/apply-patch+yaml"
_BODY_TYPES = ("", "application/json", "application/yaml", "*/*")
_NOT_ALLOWED = "the server does not allow this method on the requested resource"
_NOT_FOUND = "the server could not find the requested resource"


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
        try:
            api.resource_type(CRD.api_version, CRD.kind)
        except NotFound:
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

    # ------------------------------------------------------------ documents
    def discovery(self, parts: list[str]) -> dict[str, Any] | None:
        """The discovery document for a path split into parts, or ``None`` if it is not one."""
        return discovery(parts, self.api.types(), f"127.0.0.1:{self.port}")

    def openapi(self, parts: list[str]) -> dict[str, Any] | None:
        """The OpenAPI document for a path split into parts, or ``None`` if it is not one."""
        types = self.api.types()
        if parts == ["openapi", "v2"]:
            return openapi.v2_document(types)
        if parts == ["openapi", "v3"]:
            return openapi.v3_index(types)
        if parts[:2] == ["openapi", "v3"]:
            rest = parts[2:]
            if rest[:1] == ["api"] and len(rest) == 2:
                doc = openapi.v3_document(types, rest[1])
            elif rest[:1] == ["apis"] and len(rest) == 3:
                doc = openapi.v3_document(types, f"{rest[1]}/{rest[2]}")
            else:
                doc = None
            if doc is None:
                raise NotFound(_NOT_FOUND)
            return doc
        return None

    # --------------------------------------------------------------- routes
    def route(self, parts: list[str]) -> _Route:
        """Resolve a resource path (already split) to a type, namespace, name, subresource."""
        if parts[:2] == ["api", "v1"]:
            api_version, rest = "v1", parts[2:]
        elif parts[:1] == ["apis"] and len(parts) >= 3:
            api_version, rest = f"{parts[1]}/{parts[2]}", parts[3:]
        else:
            raise NotFound(_NOT_FOUND)
        namespace: str | None = None
        # namespaces/NS/PLURAL... is a namespaced path, unless it is a namespace's subresource.
        if len(rest) >= 3 and rest[0] == "namespaces" and not (
            len(rest) == 3 and api_version == "v1" and rest[2] in ("status", "finalize")
        ):
            namespace, rest = rest[1], rest[2:]
        if not rest or len(rest) > 3:
            raise NotFound(_NOT_FOUND)
        rtype = self.api.resource_type_by_plural(api_version, rest[0])
        if namespace is not None and not rtype.namespaced:
            raise NotFound(_NOT_FOUND)
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        if sub is not None and (sub != "status" or not rtype.status_subresource):
            raise NotFound(_NOT_FOUND)
        if rtype.namespaced and name is not None and namespace is None:
            raise NotFound(_NOT_FOUND)
        return _Route(rtype, namespace, name, sub)


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

    def send_error(self, code: int, message: str | None = None,
                   explain: str | None = None) -> None:
        """Answer protocol-level errors (bad request line, unknown method) with a Status."""
        self.close_connection = True
        if not getattr(self, "request_version", "").startswith("HTTP/1."):
            self.request_version = "HTTP/1.1"  # answer with a status line and headers
        if code == 501:
            error: ApiError = MethodNotAllowed(_NOT_ALLOWED)
        else:
            error = ApiError(message or "bad request", status=code,
                             reason="BadRequest" if code == 400 else "Unknown")
        with contextlib.suppress(OSError):
            self._send_json(error.status, error.to_status())

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

    def do_HEAD(self) -> None:
        self._dispatch("HEAD")

    def do_OPTIONS(self) -> None:
        self._dispatch("OPTIONS")

    def _dispatch(self, method: str) -> None:
        self._pretty = False
        self._warnings: list[str] = []
        try:
            url = urlsplit(self.path)
            query = parse_qs(url.query, keep_blank_values=True)
            parts = [unquote(p) for p in url.path.split("/") if p]
            self._pretty = (query.get("pretty") or [""])[-1] in ("true", "1")
            raw = self._read()
            if method not in ("GET", "POST", "PUT", "PATCH", "DELETE"):
                raise MethodNotAllowed(_NOT_ALLOWED)
            self._route(method, parts, query, raw)
        except ApiError as exc:
            self._send_error(exc)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except Exception:  # a bug must still answer a Status, not drop the connection
            log.exception("internal error serving %s %s", method, self.path)
            self._send_error(ApiError("an internal error occurred"))

    def _read(self) -> bytes:
        try:
            raw, _ = read_body(self.headers, self.rfile)
        except ApiError:
            self.close_connection = True  # the unread rest of the body cannot be skipped
            raise
        return raw

    def _content_type(self) -> str:
        return (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()

    def _route(self, method: str, parts: list[str], query: dict[str, list[str]],
               raw: bytes) -> None:
        if parts in (["healthz"], ["readyz"], ["livez"]) and method == "GET":
            self._send_text(200, "ok")
            return
        if parts[:1] == ["openapi"] and method == "GET":
            self._openapi(parts)
            return
        if method == "GET":
            doc = self.face.discovery(parts)
            if doc is not None:
                self._send_json(200, doc)
                return
        route = self.face.route(parts)
        content_type = self._content_type()
        if method == "PATCH":
            body = self._patch_body(route, raw, content_type)
        else:
            if raw.strip() and content_type not in _BODY_TYPES:
                raise UnsupportedMediaType(
                    "the body of the request was in an unknown format - accepted media types "
                    "include: application/json, application/yaml")
            body = decode_body(raw, content_type)
        options = parse_options(method, query, body, collection=route.name is None)
        if method == "GET":
            shape, meta_version = accepts(self.headers.get("Accept"))
            if route.name is None or options.watch:
                if options.watch:
                    self._watch(route, options, shape, meta_version)
                else:
                    self._list(route, options, shape, meta_version)
                return
            obj = self.face.api.get(route.rtype.api_version, route.rtype.kind,
                                    route.namespace, route.name)
            self._send_object(200, route.rtype, obj, shape, meta_version, options)
            return
        accepts(self.headers.get("Accept"))
        status, answer = self._write(method, route, body, options, content_type)
        self._send_json(status, answer)

    def _openapi(self, parts: list[str]) -> None:
        accept = (self.headers.get("Accept") or "").lower()
        if parts == ["openapi", "v2"] and "json" not in accept and "*/*" not in accept \
                and accept.strip():
            raise ApiError("only application/json is served for /openapi/v2", status=406,
                           reason="NotAcceptable")
        doc = self.face.openapi(parts)
        if doc is None:
            raise NotFound(_NOT_FOUND)
        self._send_json(200, doc)

    # ---------------------------------------------------------------- writes
    def _write(self, method: str, route: _Route, body: Any, options: Options,
               content_type: str) -> tuple[int, Any]:
        api, rtype = self.face.api, route.rtype
        dry = {"dry_run": True} if options.dry_run else {}
        if method == "POST":
            if route.name is not None:
                raise MethodNotAllowed(_NOT_ALLOWED)
            obj = self._object(body, rtype, route)
            self._check_fields(obj, rtype, options, skip_status=rtype.status_subresource)
            return 201, api.create(obj, **dry)
        if method == "DELETE":
            return 200, self._delete(route, options)
        if route.name is None:
            raise MethodNotAllowed(_NOT_ALLOWED)
        if method == "PUT":
            obj = self._object(body, rtype, route)
            name = objects.metadata(obj).get("name")
            if name not in (None, "", route.name):
                raise BadRequest(f"the name of the object ({name}) does not match the name "
                                 f"on the URL ({route.name})")
            obj["metadata"]["name"] = route.name
            if route.subresource == "status":
                return 200, api.replace_status(obj, **dry)
            self._check_fields(obj, rtype, options, skip_status=rtype.status_subresource)
            return 200, api.replace(obj, **dry)
        return 200, self._patch(route, body, options, content_type)

    def _object(self, body: Any, rtype: ResourceType, route: _Route) -> dict[str, Any]:
        if body is None:
            raise BadRequest("the body of the request was empty")
        if not isinstance(body, dict):
            raise BadRequest(f"the body of the request must be a JSON object, not "
                             f"{type(body).__name__}")
        for field in ("apiVersion", "kind"):
            if not isinstance(body.get(field), str) or not body[field]:
                raise BadRequest(f"Object '{'Kind' if field == 'kind' else 'apiVersion'}' "
                                 f"is missing in the request body")
        if body["apiVersion"] != rtype.api_version:
            raise BadRequest(f"the API version in the data ({body['apiVersion']}) does not "
                             f"match the expected API version ({rtype.api_version})")
        if body["kind"] != rtype.kind:
            raise BadRequest(f"the kind in the data ({body['kind']}) does not match the "
                             f"expected kind ({rtype.kind})")
        meta = body.get("metadata", {})
        if meta is None:
            meta = {}
        if not isinstance(meta, dict):
            raise BadRequest(f'{rtype.kind} in version "{rtype.version}" cannot be handled as '
                             f"a {rtype.kind}: metadata: expected an object, got "
                             f"{type(meta).__name__}")
        obj = dict(body)
        meta = dict(meta)
        if route.namespace is not None:
            if meta.get("namespace") not in (None, "", route.namespace):
                raise BadRequest("the namespace of the provided object does not match the "
                                 "namespace sent on the request")
            meta["namespace"] = route.namespace
        elif rtype.namespaced:
            raise MethodNotAllowed(_NOT_ALLOWED)  # only list and watch span namespaces
        obj["metadata"] = meta
        return obj

    def _check_fields(self, obj: Any, rtype: ResourceType, options: Options, *,
                      skip_status: bool) -> None:
        """``fieldValidation``: Strict refuses unknown fields, Warn (the default) warns."""
        if options.field_validation == "Ignore":
            return
        unknown = openapi.unknown_fields(obj, rtype, skip_status=skip_status)
        if not unknown:
            return
        if options.field_validation == "Strict":
            listed = ", ".join(f'unknown field "{path}"' for path in unknown)
            raise BadRequest(f'{rtype.kind} in version "{rtype.version}" cannot be handled as '
                             f"a {rtype.kind}: strict decoding error: {listed}")
        self._warnings += [f'unknown field "{path}"' for path in unknown]

    # --------------------------------------------------------------- patch
    def _patch_body(self, route: _Route, raw: bytes, content_type: str) -> Any:
        builtin = openapi.is_builtin(route.rtype)
        accepted = [_JSON_PATCH, _MERGE_PATCH] + ([_STRATEGIC_PATCH] if builtin else [])
        if content_type == _APPLY_PATCH:
            raise UnsupportedMediaType(
                f"server-side apply ({_APPLY_PATCH}) is not supported by this server; use "
                f"client-side apply - accepted media types include: {', '.join(accepted)}")
        if content_type not in accepted:
            raise UnsupportedMediaType(
                f"the body of the request was in an unknown format - accepted media types "
                f"include: {', '.join([*accepted, _APPLY_PATCH])}")
        body = decode_body(raw, "application/json")
        if body is None:
            raise BadRequest("the body of the request was empty")
        return body

    def _patch(self, route: _Route, body: Any, options: Options,
               content_type: str) -> dict[str, Any]:
        api, rtype = self.face.api, route.rtype
        dry = {"dry_run": True} if options.dry_run else {}
        skip_status = rtype.status_subresource and route.subresource is None
        sub = {"subresource": route.subresource} if route.subresource else {}
        if content_type == _MERGE_PATCH:
            if not isinstance(body, dict):
                raise BadRequest("a merge patch must be a JSON object")
            self._check_fields(body, rtype, options, skip_status=skip_status)
            return api.patch(rtype.api_version, rtype.kind, route.namespace, route.name, body,
                             **sub, **dry)
        if content_type == _STRATEGIC_PATCH and not isinstance(body, dict):
            raise BadRequest("a strategic merge patch must be a JSON object")
        if content_type == _JSON_PATCH and not isinstance(body, list):
            raise BadRequest("a JSON patch must be a list of operations")
        for attempt in range(5):
            current = api.get(rtype.api_version, rtype.kind, route.namespace, route.name)
            if content_type == _JSON_PATCH:
                try:
                    result = json_patch(current, body)
                except Invalid as exc:
                    raise Invalid("the server rejected our request due to an error in our "
                                  "request", causes=[{"reason": "UnexpectedServerResponse",
                                                      "message": str(exc)}]) from None
            else:
                result = strategic_merge(current, body)
            if not isinstance(result, dict) or not isinstance(result.get("metadata"), dict):
                raise Invalid(f'{rtype.kind} "{route.name}" is invalid: metadata: Invalid '
                              f"value: the patched object's metadata must be an object",
                              causes=[{"reason": "FieldValueInvalid", "field": "metadata",
                                       "message": "Invalid value: must be an object"}],
                              name=route.name or "", group=rtype.group, kind=rtype.kind)
            self._check_fields(result, rtype, options, skip_status=skip_status)
            version = current["metadata"].get("resourceVersion")
            asked = result["metadata"].get("resourceVersion")
            patch = diff_as_merge_patch(current, result)
            patch.setdefault("metadata", {})["resourceVersion"] = asked or version
            try:
                return api.patch(rtype.api_version, rtype.kind, route.namespace, route.name,
                                 patch, **sub, **dry)
            except Conflict:
                # the object changed between the read and the write: patch it again
                if asked != version or attempt == 4:
                    raise
        raise AssertionError("unreachable")

    # -------------------------------------------------------------- delete
    def _delete(self, route: _Route, options: Options) -> Any:
        api, rtype = self.face.api, route.rtype
        extra: dict[str, Any] = {}
        if options.dry_run:
            extra["dry_run"] = True
        if options.propagation_policy is not None:
            extra["propagation_policy"] = options.propagation_policy
        if route.subresource is not None:
            raise MethodNotAllowed(_NOT_ALLOWED)
        if route.name is None:
            if rtype.kind == "Namespace" and rtype.api_version == "v1":
                raise MethodNotAllowed(_NOT_ALLOWED)
            items, version = self._select(route, options)
            for item in items:
                meta = item["metadata"]
                try:
                    api.delete(rtype.api_version, rtype.kind, meta.get("namespace"),
                               meta["name"], **extra)
                except NotFound:
                    continue
            return {"apiVersion": rtype.api_version, "kind": f"{rtype.kind}List",
                    "metadata": {"resourceVersion": version}, "items": items}
        pre = options.preconditions
        result = api.delete(rtype.api_version, rtype.kind, route.namespace, route.name,
                            resource_version=pre.get("resourceVersion"), uid=pre.get("uid"),
                            **extra)
        if result is not None:
            return result
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                "details": {"name": route.name, "group": rtype.group, "kind": rtype.plural}}

    # ---------------------------------------------------------------- reads
    def _selectors(self, options: Options) -> dict[str, Any]:
        if options.label_selector:
            try:
                parse_label_selector(options.label_selector)
            except Invalid as exc:
                raise BadRequest(f"unable to parse requirement: {exc}") from None
        found: dict[str, Any] = {}
        if options.label_selector:
            found["label_selector"] = options.label_selector
        if options.field_selector:
            found["field_selector"] = options.field_selector
        return found

    def _select(self, route: _Route, options: Options,
                ) -> tuple[list[dict[str, Any]], str]:
        rtype = route.rtype
        items, version = self.face.api.list(rtype.api_version, rtype.kind, route.namespace,
                                            **self._selectors(options))
        return items, version

    def _list(self, route: _Route, options: Options, shape: str, meta_version: str) -> None:
        rtype = route.rtype
        items, version, token, remaining = self.face.api.list_page(
            rtype.api_version, rtype.kind, route.namespace, limit=options.limit,
            continue_token=options.continue_token, resource_version=options.resource_version,
            resource_version_match=options.resource_version_match, **self._selectors(options))
        list_meta: dict[str, Any] = {"resourceVersion": version}
        if token:
            list_meta["continue"] = token
        if remaining is not None:
            list_meta["remainingItemCount"] = remaining
        if shape == "table":
            doc = tables.table(rtype, items, list_meta=list_meta,
                               include_object=options.include_object, api_version=meta_version)
        elif shape == "meta":
            doc = {"kind": "PartialObjectMetadataList", "apiVersion": meta_version,
                   "metadata": list_meta,
                   "items": [tables.partial_metadata(o, meta_version) for o in items]}
        else:
            doc = {"apiVersion": rtype.api_version, "kind": f"{rtype.kind}List",
                   "metadata": list_meta, "items": items}
        self._send_json(200, doc, yaml_out=shape == "yaml")

    def _send_object(self, status: int, rtype: ResourceType, obj: dict[str, Any], shape: str,
                     meta_version: str, options: Options) -> None:
        if shape == "table":
            doc = tables.table(rtype, [obj], list_meta={
                "resourceVersion": obj["metadata"].get("resourceVersion", "")},
                include_object=options.include_object, api_version=meta_version)
        elif shape == "meta":
            doc = tables.partial_metadata(obj, meta_version)
        else:
            doc = obj
        self._send_json(status, doc, yaml_out=shape == "yaml")

    # ---------------------------------------------------------------- watch
    def _watch(self, route: _Route, options: Options, shape: str, meta_version: str) -> None:
        rtype = route.rtype
        selectors = self._selectors(options)
        if route.name is not None:
            by_name = f"metadata.name={route.name}"
            selectors["field_selector"] = ",".join(
                s for s in (selectors.get("field_selector"), by_name) if s)
        events: Iterator[tuple[str, dict[str, Any]]]
        try:
            # Bookmarks are always requested: they double as a heartbeat that lets the
            # stream notice a client that went away.
            stream = self.face.api.watch(
                rtype.api_version, rtype.kind, route.namespace, options.resource_version,
                timeout=options.timeout, bookmarks=True, **selectors)
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
        headers = True
        try:
            for kind, obj in events:
                if kind == "BOOKMARK" and not options.allow_bookmarks:
                    if self._client_gone():
                        break
                    continue
                if kind not in ("ERROR", "BOOKMARK") and shape in ("table", "meta"):
                    if shape == "table":
                        obj = tables.table(rtype, [obj], list_meta={}, headers=headers,
                                           include_object=options.include_object,
                                           api_version=meta_version)
                        headers = False
                    else:
                        obj = tables.partial_metadata(obj, meta_version)
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
    def _send_json(self, status: int, doc: Any, headers: dict[str, str] | None = None, *,
                   yaml_out: bool = False) -> None:
        if yaml_out:
            data = yaml.safe_dump(doc, sort_keys=False).encode()
            content_type = "application/yaml"
        elif self._pretty_output():
            data = (json.dumps(doc, indent=2) + "\n").encode()
            content_type = "application/json"
        else:
            data = json.dumps(doc, separators=(",", ":")).encode()
            content_type = "application/json"
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for warning in getattr(self, "_warnings", []):
            self.send_header("Warning", f"299 - {json.dumps(warning)}")
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)

    def _pretty_output(self) -> bool:
        return bool(getattr(self, "_pretty", False))

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
