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
Requests are parsed by :mod:`lifecycle.sim.requests`; :mod:`lifecycle.sim.guard`
checks the ``Host`` (DNS rebinding: 403), that a write's body is JSON or YAML (415),
bounds the time a body may take (408) and closes idle kept-alive connections; YAML
alias expansion is bounded (:mod:`lifecycle.sim.yamlsafe`). A client that leaves in
the middle of an answer only closes its connection (no traceback in the log).

``after_write`` (a callable, or None) runs after every successful write and before
its answer: ``lifecycle serve --state`` saves there, so an acknowledged write survives
``kill -9``; no read shows it sooner (:meth:`APIServerHTTP.committed`), as a real API
server shows only what etcd holds.
"""

from __future__ import annotations

import contextlib
import json
import logging
import select
import socket
import threading
from collections.abc import Callable, Iterable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import yaml

from lifecycle.core.objects import nesting_depth
from lifecycle.kube.errors import (
    ApiError,
    BadRequest,
    Gone,
    MethodNotAllowed,
    NotAcceptable,
    NotFound,
    TooManyRequests,
)
from lifecycle.kube.resources import ResourceType
from lifecycle.sim import builtins, guard, openapi, statuses, swagger_pb, tables, yamlsafe
from lifecycle.sim.apiserver import EmbeddedAPI
from lifecycle.sim.crds import CRD
from lifecycle.sim.discovery import discovery
from lifecycle.sim.patches import json_patch
from lifecycle.sim.requests import (
    MAX_DEPTH,
    Options,
    accepts,
    decode_body,
    parse_options,
    read_body,
)
from lifecycle.sim.verbs import NOT_ALLOWED, NOT_FOUND, Route, Verbs, resolve, selectors

__all__ = ["CRD", "APIServerHTTP", "json_patch"]

log = logging.getLogger("lifecycle.sim.http")



class _Server(ThreadingHTTPServer):
    """The threading server with a real listen backlog, a bound on open connections (one
    thread each: over it, a connection gets a 503 Status and is closed at once) and quiet
    client disconnects."""

    request_queue_size = guard.BACKLOG
    daemon_threads = True
    max_connections = guard.MAX_CONNECTIONS
    _open = 0
    _open_lock = threading.Lock()

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._open_lock:
            full = self._open >= self.max_connections
            if not full:
                self._open += 1
        if full:
            _refuse(request, guard.busy_answer(self.max_connections))
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self._open_lock:
                self._open -= 1

    def handle_error(self, request: Any, client_address: Any) -> None:
        import sys

        exc = sys.exc_info()[1]
        if isinstance(exc, OSError):  # the client left or timed out: nothing to report
            log.debug("connection from %s ended: %s", client_address, exc)
            return
        log.exception("unexpected error serving %s", client_address)


#: Seconds a refused connection is given to finish sending, and to close after the answer.
REFUSE_LINGER = 0.2


def _refuse(request: socket.socket, answer: bytes) -> None:
    """Answer a connection over the bound and close it without resetting it.

    Closing a socket with unread bytes makes the kernel send a reset, which
    can reach the client before the answer does (it then sees
    ``ConnectionResetError`` instead of a 503 it can retry). So what the
    client already sent is read first, and after the answer the connection is
    half-closed and drained until the client closes it (or briefly, at most).
    """
    with contextlib.suppress(OSError):
        request.settimeout(REFUSE_LINGER)
        with contextlib.suppress(TimeoutError):
            request.recv(65536)
        request.sendall(answer)
        request.shutdown(socket.SHUT_WR)
        with contextlib.suppress(TimeoutError):
            while request.recv(65536):
                pass


class APIServerHTTP:
    """Serve ``api`` over HTTP on ``host:port`` (port 0 picks a free one).

    Use as a context manager or call :meth:`start` and :meth:`stop`.
    :attr:`url` is the base URL to configure a client with.
    """

    def committed(self) -> contextlib.AbstractContextManager[object]:
        """Held by a write until ``after_write`` saved it and by each read: none shows it sooner."""
        return self._commit if self.after_write is not None else contextlib.nullcontext()

    def __init__(self, api: EmbeddedAPI, *, host: str = "127.0.0.1", port: int = 0,
                 allowed_hosts: Iterable[str] = (), idle_timeout: float = guard.IDLE_TIMEOUT,
                 read_timeout: float = guard.READ_TIMEOUT,
                 max_connections: int = guard.MAX_CONNECTIONS) -> None:
        self.api = api
        self.hosts = guard.HostCheck(host, allowed_hosts)
        self.idle_timeout = idle_timeout
        self.read_timeout = read_timeout
        self.after_write: Callable[[], object] | None = None
        self._commit = threading.Lock()
        # Answers are serialized, never changed: the API's shared view copies nothing.
        self.shared = api.shared()
        try:
            api.resource_type(CRD.api_version, CRD.kind)
        except NotFound:
            api.register(CRD)
        self._server = _Server((host, port), _Handler)
        self._server.max_connections = max_connections
        self._server._open_lock = threading.Lock()
        self._server.face = self  # type: ignore[attr-defined]
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()

    @property
    def port(self) -> int:
        """The TCP port the server listens on."""
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        host = self._server.server_address[0]
        return f"http://{host.decode() if isinstance(host, bytes) else host}:{self.port}"

    def start(self) -> APIServerHTTP:
        """Start serving in a daemon thread; returns ``self``."""
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.1},
                                        name="embedded-api-http", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, end every open watch stream and close every kept-alive
        connection, as a server process that exits would."""
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()
        with self._connections_lock:
            open_connections = list(self._connections)
        for connection in open_connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _opened(self, connection: socket.socket) -> None:
        with self._connections_lock:
            self._connections.add(connection)

    def _closed(self, connection: socket.socket) -> None:
        with self._connections_lock:
            self._connections.discard(connection)

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
                raise NotFound(NOT_FOUND)
            return doc
        return None

    # --------------------------------------------------------------- routes
    def route(self, parts: list[str]) -> Route:
        """Resolve a resource path (already split) to a type, namespace, name, subresource."""
        return resolve(self.api, parts)


class _Handler(BaseHTTPRequestHandler):
    """One connection: dispatch each request to the embedded API."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out as separate writes
    server_version = "lifecycle-embedded-api"

    @property
    def face(self) -> APIServerHTTP:
        return self.server.face  # type: ignore[attr-defined]

    def setup(self) -> None:
        # The wait for each request (and header) line: the handler class declares the
        # attribute for all connections; this one sets its own.
        self.timeout = self.face.idle_timeout  # type: ignore[misc]
        super().setup()
        self.face._opened(self.connection)

    def finish(self) -> None:
        self.face._closed(self.connection)
        super().finish()

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s " + format, self.address_string(), *args)

    def send_error(self, code: int, message: str | None = None,
                   explain: str | None = None) -> None:
        """Answer protocol-level errors (bad request line, unknown method) with a Status."""
        self.close_connection = True
        if not getattr(self, "request_version", "").startswith("HTTP/1."):
            self.request_version = "HTTP/1.1"  # answer with a status line and headers
        if code == 501:
            error: ApiError = MethodNotAllowed(NOT_ALLOWED)
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
            if not self.face.hosts.allows(self.headers.get("Host")):
                self.close_connection = True  # its body is never read
                self.face.hosts.check(self.headers.get("Host"))
            raw = self._read()
            if method == "HEAD":
                self.close_connection = True  # the answer carries a body HEAD does not expect
            if method not in ("GET", "POST", "PUT", "PATCH", "DELETE"):
                raise MethodNotAllowed(NOT_ALLOWED)
            self._route(method, parts, query, raw)
        except ApiError as exc:
            self._answer_error(exc)
        except OSError:  # the client left (or stopped reading) in the middle of the answer
            self.close_connection = True
        except Exception:  # a bug must still answer a Status, not drop the connection
            log.exception("internal error serving %s %s", method, self.path)
            self._answer_error(ApiError("an internal error occurred"))
        finally:
            with contextlib.suppress(OSError):
                self.connection.settimeout(self.face.idle_timeout)

    def _answer_error(self, exc: ApiError) -> None:
        """Send an error Status; a client that already left only closes the connection."""
        try:
            self._send_error(exc)
        except OSError:
            self.close_connection = True

    def _read(self) -> bytes:
        stream = guard.Deadline(self.rfile, self.connection, self.face.read_timeout)
        try:
            raw = read_body(self.headers, stream)
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
        if method != "PATCH":
            guard.require_body_type(method, raw, content_type, self.headers)
        self.face.hosts.check_origin(method, self.headers.get("Origin"))
        verbs = Verbs(self.face.shared)
        self._warnings = verbs.warnings
        if method == "PATCH":
            body = verbs.patch_body(route, raw, content_type)
        else:
            if content_type == "application/yaml" and raw.strip():
                body = _decode_yaml(raw)
            else:
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
            with self.face.committed():
                obj = self.face.shared.get(route.rtype.api_version, route.rtype.kind,
                                           route.namespace, route.name)
            self._send_object(200, route.rtype, obj, shape, meta_version, options)
            return
        accepts(self.headers.get("Accept"))
        with self.face.committed():
            status, answer = verbs.write(method, route, body, options, content_type)
            if self.face.after_write is not None and not options.dry_run:
                self.face.after_write()  # durable before it is acknowledged or shown
        self._send_json(status, answer)

    def _openapi(self, parts: list[str]) -> None:
        accept = (self.headers.get("Accept") or "").lower()
        doc = self.face.openapi(parts)
        if doc is None:
            raise NotFound(NOT_FOUND)
        if parts == ["openapi", "v2"] and accept.strip() and not any(
                media in accept for media in ("json", "*/*")):
            if swagger_pb.MEDIA_TYPE.lower() not in accept:
                raise NotAcceptable("only application/json and protobuf are served for "
                                    "/openapi/v2")
            data = swagger_pb.encode_v2(doc)
            self.send_response(200)
            self.send_header("Content-Type", swagger_pb.ANSWER_TYPE)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        self._send_json(200, doc)

    def _list(self, route: Route, options: Options, shape: str, meta_version: str) -> None:
        rtype = route.rtype
        with self.face.committed():
            items, version, token, remaining = self.face.shared.list_page(
                rtype.api_version, rtype.kind, route.namespace, limit=options.limit,
                continue_token=options.continue_token, resource_version=options.resource_version,
                resource_version_match=options.resource_version_match, **selectors(options))
        list_meta: dict[str, Any] = {"resourceVersion": version}
        if token:
            list_meta["continue"] = token
        if remaining is not None:
            list_meta["remainingItemCount"] = remaining
        if shape != "table":
            builtins.list_meta(rtype, list_meta)
        if shape == "table":
            doc = tables.table(rtype, items, list_meta=list_meta,
                               include_object=options.include_object, api_version=meta_version)
        elif shape == "meta":
            doc = {"kind": "PartialObjectMetadataList", "apiVersion": meta_version,
                   "metadata": list_meta,
                   "items": [tables.partial_metadata(o, meta_version) for o in items]}
        else:
            doc = {"apiVersion": rtype.api_version, "kind": f"{rtype.kind}List",
                   "metadata": list_meta, "items": builtins.list_items(rtype, items)}
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
    def _watch(self, route: Route, options: Options, shape: str, meta_version: str) -> None:
        rtype = route.rtype
        chosen = selectors(options)
        if route.name is not None:
            by_name = f"metadata.name={route.name}"
            chosen["field_selector"] = ",".join(
                s for s in (chosen.get("field_selector"), by_name) if s)
        events: Iterator[tuple[str, dict[str, Any]]]
        try:
            # Bookmarks are always requested: they double as a heartbeat that lets the
            # stream notice a client that went away.
            stream = self.face.shared.watch(
                rtype.api_version, rtype.kind, route.namespace, options.resource_version,
                timeout=options.timeout, bookmarks=True, **chosen)
        except Gone as exc:
            stream = None
            events = iter([("ERROR", exc.to_status())])
        else:
            events = ((e.type, e.object) for e in stream)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        # The stream ends with the last chunk, so the connection stays usable for the
        # next request, as on a real API server; it is closed only when the client left.
        headers = True
        try:
            for kind, obj in events:
                if kind == "BOOKMARK" and not options.allow_bookmarks:
                    if self._client_gone():
                        self.close_connection = True
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
                with self.face.committed():  # the write behind this event is saved
                    pass
                line = json.dumps({"type": kind, "object": obj}, separators=(",", ":")) + "\n"
                data = line.encode()
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, OSError):
            self.close_connection = True
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
        self._send_json(exc.status, statuses.status_of(exc), headers)


def _decode_yaml(raw: bytes) -> Any:
    """A YAML body's document, its aliases' expansion bounded before it is built (else 400)."""
    try:
        doc = yamlsafe.load(raw)
    except yamlsafe.AliasBombError as exc:
        raise BadRequest(f"the request body is refused: {exc}") from None
    except RecursionError:
        raise BadRequest(f"the request body nests deeper than {MAX_DEPTH} levels") from None
    except (ValueError, yaml.YAMLError) as exc:
        first = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        raise BadRequest(f"the request body is not valid YAML: {first}") from None
    if nesting_depth(doc, MAX_DEPTH) > MAX_DEPTH:
        raise BadRequest(f"the request body nests deeper than {MAX_DEPTH} levels")
    return doc
