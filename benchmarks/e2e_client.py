"""The end-to-end benchmark's own client of the API server: requests and a watch.

:class:`Client` sends the benchmark's creates, patches and deletes as JSON on
one keep-alive connection; :class:`Tracker` follows one collection through a
watch and notes when each object first showed Ready and when it went away.
Both reach the server a kubeconfig names (:func:`endpoint`) and count the
connection resets they meet.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import json
import socket
import ssl
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import attrs
import yaml

from lifecycle.core.errors import LifecycleError


class BenchError(LifecycleError):
    """A benchmark process failed or did not answer (the command prints it as one line)."""

@attrs.frozen
class Endpoint:
    """Where a kubeconfig points and how to authenticate: URL, TLS context, headers."""

    url: str
    context: ssl.SSLContext | None = None
    headers: dict[str, str] = attrs.field(factory=dict)


def read_kubeconfig(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """The cluster and user entries of a kubeconfig's current context."""
    try:
        doc = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
        name = doc["current-context"]
        context = next(c["context"] for c in doc["contexts"] if c["name"] == name)
        cluster = next(c["cluster"] for c in doc["clusters"] if c["name"] == context["cluster"])
        user = next((u["user"] for u in doc.get("users") or []
                     if u["name"] == context.get("user")), {})
    except (OSError, yaml.YAMLError, KeyError, TypeError, StopIteration) as exc:
        raise BenchError(f"cannot read kubeconfig {path}: {type(exc).__name__}: {exc}") \
            from None
    return cluster, user or {}


def endpoint(path: Path, headers: dict[str, str] | None = None) -> Endpoint:
    """The :class:`Endpoint` of a kubeconfig (CA and client certificate data, or a token)."""
    cluster, user = read_kubeconfig(path)
    url = str(cluster["server"]).rstrip("/")
    extra = dict(headers or {})
    if user.get("token"):
        extra["Authorization"] = f"Bearer {user['token']}"
    if not url.startswith("https://"):
        return Endpoint(url, None, extra)
    if cluster.get("insecure-skip-tls-verify"):
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    elif cluster.get("certificate-authority-data"):
        context = ssl.create_default_context(
            cadata=base64.b64decode(cluster["certificate-authority-data"]).decode())
    else:
        context = ssl.create_default_context(cafile=cluster.get("certificate-authority"))
    if user.get("client-certificate-data"):
        with tempfile.TemporaryDirectory() as scratch:
            cert, key = Path(scratch) / "cert.pem", Path(scratch) / "key.pem"
            cert.write_bytes(base64.b64decode(user["client-certificate-data"]))
            key.write_bytes(base64.b64decode(user["client-key-data"]))
            context.load_cert_chain(str(cert), str(key))
    elif user.get("client-certificate"):
        context.load_cert_chain(user["client-certificate"], user.get("client-key"))
    return Endpoint(url, context, extra)


def _connection(where: Endpoint, timeout: float) -> http.client.HTTPConnection:
    parts = urlsplit(where.url)
    if where.context is not None:
        return http.client.HTTPSConnection(parts.hostname or "127.0.0.1", parts.port or 443,
                                           timeout=timeout, context=where.context)
    return http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port or 80,
                                      timeout=timeout)


RESETS = (ConnectionError, ssl.SSLEOFError)
#: Seconds after which the benchmark's client opens a new connection instead of reusing one
#: (an idle keep-alive connection a server closed is not a reset).
IDLE = 5.0


class Client:
    """The benchmark's own client: JSON on one keep-alive connection.

    A request that meets a reset, a refusal or a connection the server closed
    without answering is counted in :attr:`resets` and sent again on a new
    connection (five tries); a connection idle for :data:`IDLE` seconds is
    not reused. One answered 429 (a real server's new CRD
    still starting its storage) is sent again for up to 30 s.
    """

    def __init__(self, where: Endpoint, timeout: float = 60.0) -> None:
        self.where = where
        self.timeout = timeout
        self.resets = 0
        self._conn: http.client.HTTPConnection | None = None
        self._used = 0.0

    def call(self, method: str, path: str, body: Any = None, *,
             content_type: str = "application/json", missing: Any = ...) -> Any:
        """Send one request; its decoded JSON answer (``missing`` on 404 when given)."""
        data = json.dumps(body).encode() if body is not None else None
        headers = {**self.where.headers, "Content-Type": content_type,
                   "Accept": "application/json"}
        attempt, busy = 0, 0
        if self._conn is not None and time.monotonic() - self._used > IDLE:
            self.close()  # the server may have closed it meanwhile, as servers do
        while attempt < 5:
            if self._conn is None:
                self._conn = _connection(self.where, self.timeout)
            try:
                self._conn.request(method, path, body=data, headers=headers)
                response = self._conn.getresponse()
                raw = response.read()
                self._used = time.monotonic()
            except RESETS:
                self.resets += 1
                attempt += 1
                self.close()
                time.sleep(0.05 * attempt)
                continue
            if response.status == 429 and busy < 300:  # a new CRD's storage starting up
                busy += 1
                time.sleep(0.1)
                continue
            if response.status == 404 and missing is not ...:
                return missing
            if response.status >= 300:
                try:
                    message = json.loads(raw).get("message", "")
                except ValueError:
                    message = raw[:200].decode(errors="replace")
                raise BenchError(f"{method} {path}: HTTP {response.status}: {message}")
            return json.loads(raw) if raw else None
        raise BenchError(f"{method} {path}: the connection was reset five times")

    def ensure_namespace(self, name: str) -> None:
        """Create namespace ``name`` unless it exists."""
        if self.call("GET", f"/api/v1/namespaces/{name}", missing=None) is None:
            with contextlib.suppress(BenchError):  # created meanwhile
                self.call("POST", "/api/v1/namespaces", {
                    "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})

    def close(self) -> None:
        """Close the connection (the next request opens a new one)."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None


class Tracker:
    """The objects of one collection as a watch from the benchmark shows them.

    :attr:`objects` maps a name to its latest object, :attr:`ready_at` to the
    moment (``time.perf_counter``) it first showed Ready, :attr:`gone_at` to
    the moment its DELETED event came. :meth:`wait` blocks until a condition
    on the tracker holds. A watch that breaks is resumed from the last
    resourceVersion seen (a reset it met is counted in :attr:`resets`).
    """

    def __init__(self, where: Endpoint, path: str, ready: Callable[[dict[str, Any]], bool]
                 ) -> None:
        self.where = where
        self.path = path
        self.ready = ready
        self.objects: dict[str, dict[str, Any]] = {}
        self.ready_at: dict[str, float] = {}
        self.gone_at: dict[str, float] = {}
        self.resets = 0
        self._changed = threading.Condition()
        self._stop = threading.Event()
        self._conn: http.client.HTTPConnection | None = None
        self._version = ""
        self._thread: threading.Thread | None = None

    def start(self) -> Tracker:
        """List once, then follow the watch in a thread."""
        listing = Client(self.where).call("GET", self.path)
        self._version = listing["metadata"]["resourceVersion"]
        now = time.perf_counter()
        for obj in listing.get("items") or []:
            self._apply("ADDED", obj, now)
        self._thread = threading.Thread(target=self._follow, name="bench-tracker", daemon=True)
        self._thread.start()
        return self

    def _apply(self, kind: str, obj: dict[str, Any], now: float) -> None:
        name = obj["metadata"]["name"]
        with self._changed:
            if kind == "DELETED":
                self.objects.pop(name, None)
                self.gone_at.setdefault(name, now)
            else:
                self.objects[name] = obj
                if name not in self.ready_at and self.ready(obj):
                    self.ready_at[name] = now
            self._changed.notify_all()

    def _follow(self) -> None:
        while not self._stop.is_set():
            try:
                self._conn = _connection(self.where, 3600)
                self._conn.request("GET", f"{self.path}?watch=1&allowWatchBookmarks=true"
                                          f"&timeoutSeconds=1800&resourceVersion={self._version}",
                                   headers=self.where.headers)
                response = self._conn.getresponse()
                if response.status != 200:
                    raise BenchError(f"watch {self.path}: HTTP {response.status}")
                while not self._stop.is_set():
                    line = response.readline()
                    if not line:
                        break
                    event = json.loads(line)
                    obj = event.get("object") or {}
                    version = (obj.get("metadata") or {}).get("resourceVersion")
                    if version:
                        self._version = version
                    if event.get("type") in ("ADDED", "MODIFIED", "DELETED"):
                        self._apply(event["type"], obj, time.perf_counter())
            except RESETS:
                if not self._stop.is_set():
                    self.resets += 1
            except (OSError, ValueError, http.client.HTTPException, BenchError):
                if self._stop.is_set():
                    return
                time.sleep(0.2)
            finally:
                if self._conn is not None:
                    self._conn.close()

    def wait(self, condition: Callable[[Tracker], bool], timeout: float) -> bool:
        """Block until ``condition(self)`` holds (True) or ``timeout`` seconds pass (False)."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while not condition(self):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._changed.wait(min(left, 0.5))
            return True

    def stop(self) -> None:
        """End the watch."""
        self._stop.set()
        conn = self._conn
        if conn is not None and conn.sock is not None:
            with contextlib.suppress(OSError):
                conn.sock.shutdown(socket.SHUT_RDWR)
        if self._thread is not None:
            self._thread.join(5)
