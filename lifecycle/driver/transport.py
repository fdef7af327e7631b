"""A lean HTTP/1.1 client for the few requests an operator sends to the API server.

The official client's REST layer (urllib3 under a generated ``ApiClient``)
spends more time on a request than the exchange itself: per call it builds a
``HTTPHeaderDict``, walks the pool manager and its retry object, parses every
response header through ``email.parser`` and copies the body between layers.
An operator sends a handful of request shapes (get, list, watch, create,
replace, patch, delete, on objects, their status, Secrets and Events), all
JSON, all to one server, so :class:`Transport` does only what they need:

* kept-alive connections, reused most-recent first and checked for a close by
  the server before reuse; a request that finds a reused connection closed
  under it is sent once more on a new one, as urllib3 does;
* the request written in one ``sendall`` from a head built mostly ahead of time;
* of the answer's headers only the framing ones (``Content-Length``,
  ``Transfer-Encoding``, ``Connection``) and ``Retry-After`` are kept; the body
  is returned as bytes for a single ``json.loads``;
* watch streams read line by line from their own connection
  (:meth:`Transport.watch`), the chunked framing undone in place.

Everything about where and how to connect comes from the official client's
``Configuration``, as loaded from a kubeconfig or the in-cluster service
account: the host (a path in it prefixes every request), TLS (CA, client
certificate and key, ``verify_ssl``, ``tls_server_name``/``assert_hostname``),
a proxy (``proxy``, ``proxy_headers``; ``https`` targets through ``CONNECT``)
and the bearer token, asked of ``Configuration.auth_settings()`` at most once
per :data:`AUTH_REFRESH` seconds (the official client's refresh hook rewrites
half the configuration on every call, a tenth of a request's CPU) and again
right after a ``401``, so a token refreshed by an exec plugin or a rotated
token file is used within a second of the configuration having it.

A failure to connect or a broken exchange raises ``OSError`` (``TimeoutError``
for a timeout); the caller turns it into an error of :mod:`lifecycle.kube.errors`.
"""

from __future__ import annotations

import base64
import contextlib
import select
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

__all__ = ["Answer", "Transport", "WatchStream"]

#: Idle connections kept for reuse, at most (more are closed once answered).
MAX_IDLE = 16
#: Attempts to open a connection before a request fails (connection refused, reset).
CONNECT_ATTEMPTS = 3
#: Seconds the ``Authorization`` header is reused before the configuration is asked again.
AUTH_REFRESH = 1.0
_MAX_LINE = 65536
_MAX_HEADERS = 200


class Answer:
    """One response: status, the headers the caller may need, and the whole body."""

    __slots__ = ("body", "retry_after", "status")

    def __init__(self, status: int, body: bytes, retry_after: str | None) -> None:
        self.status = status
        self.body = body
        self.retry_after = retry_after


class _Connection:
    """A socket and its buffered reader."""

    __slots__ = ("reader", "sock")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.reader = sock.makefile("rb", buffering=65536)

    def dropped(self) -> bool:
        """Whether the server closed (or wrote unasked to) this idle connection."""
        try:
            readable, _, _ = select.select([self.sock], [], [], 0)
        except (OSError, ValueError):
            return True
        return bool(readable)

    def close(self) -> None:
        """Close the reader and the socket."""
        for close in (self.reader.close, self.sock.close):
            with contextlib.suppress(OSError):
                close()


def tls_context(configuration: Any) -> ssl.SSLContext:
    """The TLS context a ``Configuration`` describes (CA, client certificate, checks)."""
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
    if getattr(configuration, "verify_ssl", True):
        if configuration.ssl_ca_cert:
            context.load_verify_locations(cafile=configuration.ssl_ca_cert)
        context.check_hostname = getattr(configuration, "assert_hostname", None) is not False
    else:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if configuration.cert_file:
        context.load_cert_chain(configuration.cert_file, configuration.key_file or None)
    return context


class Transport:
    """Kept-alive HTTP/1.1 to the API server a ``Configuration`` names."""

    def __init__(self, configuration: Any, *, user_agent: str | None = None,
                 headers: dict[str, str] | None = None) -> None:
        parts = urlsplit(configuration.host)
        self.scheme = (parts.scheme or "http").lower()
        if self.scheme not in ("http", "https"):
            raise ValueError(f"unsupported scheme in the API server's address: {self.scheme!r}")
        self.host = parts.hostname or "localhost"
        self.port = parts.port or (443 if self.scheme == "https" else 80)
        #: A path in the host's URL (a proxy's route to the cluster): prefixes every path.
        self.prefix = parts.path.rstrip("/")
        self.configuration = configuration
        self._tls = tls_context(configuration) if self.scheme == "https" else None
        name = getattr(configuration, "tls_server_name", None)
        asserted = getattr(configuration, "assert_hostname", None)
        self._server_name = name or (asserted if isinstance(asserted, str) else self.host)
        self._proxy = urlsplit(configuration.proxy) if getattr(
            configuration, "proxy", None) else None
        host = self.host if ":" not in self.host else f"[{self.host}]"
        authority = host if parts.port is None else f"{host}:{self.port}"
        self._origin = f"{self.scheme}://{authority}"
        fixed = {"Host": authority, "Accept": "application/json", **(headers or {})}
        if user_agent:
            fixed["User-Agent"] = user_agent
        self._fixed = "".join(f"{k}: {v}\r\n" for k, v in fixed.items() if k.lower() not in (
            "content-type", "content-length", "authorization", "connection"))
        self._idle: list[_Connection] = []
        self._lock = threading.Lock()
        self._auth: tuple[str, str] = ("", "")
        self._auth_until = 0.0  # when the configuration is asked for the token again

    # --------------------------------------------------------------- requests
    def request(self, method: str, path: str, body: bytes | None = None, *,
                content_type: str = "application/json", timeout: float = 30.0) -> Answer:
        """Send one request and read its whole answer (``path`` includes the query)."""
        head = self._head(method, path, body, content_type)
        data = head + body if body else head
        for attempt in range(2):
            connection, reused = self._take(timeout)
            try:
                connection.sock.sendall(data)
                answer, keep = _read_answer(connection.reader, method)
            except ValueError:
                connection.close()
                raise _Closed("a malformed answer from the server") from None
            except (ConnectionResetError, BrokenPipeError, _Closed):
                connection.close()
                if reused and attempt == 0:
                    continue  # the server closed a kept-alive connection: once more, on a new one
                raise
            except BaseException:
                connection.close()
                raise
            if keep:
                self._give(connection)
            else:
                connection.close()
            if answer.status == 401:
                self._auth_until = 0.0  # the next request asks for the token afresh
            return answer
        raise AssertionError("unreachable")  # pragma: no cover

    def watch(self, path: str, *, connect_timeout: float, inactivity: float) -> WatchStream:
        """Open a watch stream on its own connection (``path`` includes the query).

        The answer's head is read here: a non-2xx answer comes back whole as
        :attr:`WatchStream.error`, with no lines to read.
        """
        connection = self._open(connect_timeout)
        try:
            connection.sock.sendall(self._head("GET", path, None, ""))
            connection.sock.settimeout(inactivity)
            status, length, chunked, retry_after, _ = _read_head(connection.reader)
            if not 200 <= status < 300:
                body = _read_body(connection.reader, "GET", status, length, chunked)
                connection.close()
                return WatchStream(None, chunked, Answer(status, body, retry_after))
        except BaseException:
            connection.close()
            raise
        return WatchStream(connection, chunked, None)

    def close(self) -> None:
        """Close every idle connection."""
        with self._lock:
            idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()

    # ------------------------------------------------------------ internals
    def _head(self, method: str, path: str, body: bytes | None, content_type: str) -> bytes:
        target = self.prefix + path
        if self._proxy is not None and self.scheme == "http":
            target = self._origin + target  # a plain HTTP proxy is sent the absolute form
        head = f"{method} {target} HTTP/1.1\r\n{self._fixed}{self._authorization()}"
        if body is not None:
            head += f"Content-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
        elif method in ("POST", "PUT", "PATCH"):
            head += "Content-Length: 0\r\n"
        return (head + "\r\n").encode("latin-1")

    def _authorization(self) -> str:
        """The ``Authorization`` header line, from the configuration as of at most
        :data:`AUTH_REFRESH` seconds ago (or since the last ``401``)."""
        now = time.monotonic()
        if now < self._auth_until:
            return self._auth[1]
        line = ("", "")
        for setting in self.configuration.auth_settings().values():
            if setting.get("in") == "header" and setting.get("value"):
                value = str(setting["value"])
                line = self._auth if self._auth[0] == value else (
                    value, f"{setting['key']}: {value}\r\n")
                break
        self._auth = line
        self._auth_until = now + AUTH_REFRESH
        return line[1]

    def _take(self, timeout: float) -> tuple[_Connection, bool]:
        while True:
            with self._lock:
                connection = self._idle.pop() if self._idle else None
            if connection is None:
                return self._open(timeout), False
            if connection.dropped():
                connection.close()
                continue
            connection.sock.settimeout(timeout)
            return connection, True

    def _give(self, connection: _Connection) -> None:
        with self._lock:
            if len(self._idle) < MAX_IDLE:
                self._idle.append(connection)
                return
        connection.close()

    def _open(self, timeout: float) -> _Connection:
        failure: OSError | None = None
        for _ in range(CONNECT_ATTEMPTS):
            try:
                return _Connection(self._connect(timeout))
            except (ConnectionRefusedError, ConnectionResetError, ConnectionAbortedError) as exc:
                failure = exc
        assert failure is not None
        raise failure

    def _connect(self, timeout: float) -> socket.socket:
        proxy = self._proxy
        address = ((proxy.hostname or "localhost", proxy.port or 80) if proxy is not None
                   else (self.host, self.port))
        sock = socket.create_connection(address, timeout=timeout)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if proxy is not None and self.scheme == "https":
                self._tunnel(sock)
            if self._tls is not None:
                sock = self._tls.wrap_socket(sock, server_hostname=self._server_name)
        except BaseException:
            sock.close()
            raise
        return sock

    def _tunnel(self, sock: socket.socket) -> None:
        """Ask an HTTP proxy for a tunnel to the server (``CONNECT``)."""
        assert self._proxy is not None
        lines = [f"CONNECT {self.host}:{self.port} HTTP/1.1", f"Host: {self.host}:{self.port}"]
        lines += [f"{k}: {v}" for k, v in (self.configuration.proxy_headers or {}).items()]
        if self._proxy.username is not None:
            user = f"{self._proxy.username}:{self._proxy.password or ''}".encode()
            lines.append(f"Proxy-Authorization: Basic {base64.b64encode(user).decode()}")
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        reader = sock.makefile("rb", buffering=0)
        status = _status(reader.readline(_MAX_LINE))
        while reader.readline(_MAX_LINE) not in (b"\r\n", b"\n", b""):
            pass
        if status != 200:
            raise ConnectionRefusedError(f"the proxy refused the tunnel ({status})")


class WatchStream:
    """The lines of one watch answer; :meth:`close` from another thread ends it."""

    def __init__(self, connection: _Connection | None, chunked: bool,
                 error: Answer | None) -> None:
        self._connection = connection
        self._chunked = chunked
        #: The whole answer when the server refused the watch (non-2xx), else None.
        self.error = error
        self._closed = False

    def lines(self) -> Iterator[bytes]:
        """Each non-empty line of the stream, until the server ends it.

        Raises ``TimeoutError`` when nothing arrives for the inactivity timeout,
        ``OSError`` when the connection breaks; ends quietly after :meth:`close`.
        """
        connection = self._connection
        if connection is None:
            return
        reader = connection.reader
        try:
            if not self._chunked:
                while line := reader.readline(_MAX_LINE * 64):
                    if line.strip():
                        yield line
                return
            pending = b""
            while True:
                size_line = reader.readline(_MAX_LINE)
                if not size_line:
                    raise _Closed("the watch stream ended without its last chunk")
                size = int(size_line.split(b";", 1)[0], 16)
                if size == 0:
                    reader.readline(_MAX_LINE)
                    return
                data = reader.read(size)
                if len(data) < size:
                    raise _Closed("the watch stream ended in the middle of a chunk")
                reader.read(2)
                pending += data
                if b"\n" in data:
                    *complete, pending = pending.split(b"\n")
                    for line in complete:
                        if line.strip():
                            yield line
        except (OSError, ValueError):
            if self._closed:
                return
            raise
        finally:
            self.close()

    def close(self) -> None:
        """End the stream (a reader blocked in :meth:`lines` returns)."""
        self._closed = True
        connection = self._connection
        if connection is None:
            return
        with contextlib.suppress(OSError):
            connection.sock.shutdown(socket.SHUT_RDWR)
        connection.close()


class _Closed(ConnectionError):
    """The server closed the connection before a whole answer."""


def _status(line: bytes) -> int:
    parts = line.split(None, 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/"):
        raise _Closed("no answer from the server" if not line else "a malformed status line")
    return int(parts[1])


def _read_head(reader: Any) -> tuple[int, int | None, bool, str | None, bool]:
    """Status, Content-Length, whether chunked, Retry-After, and whether the server closes."""
    while True:
        line = reader.readline(_MAX_LINE)
        status = _status(line)
        keep = not line.startswith(b"HTTP/1.0")
        length: int | None = None
        chunked = False
        retry_after = None
        for _ in range(_MAX_HEADERS):
            header = reader.readline(_MAX_LINE)
            if header in (b"\r\n", b"\n"):
                break
            if not header:
                raise _Closed("the answer's head ended early")
            name, _, value = header.partition(b":")
            key = name.strip().lower()
            if key == b"content-length":
                length = int(value)
            elif key == b"transfer-encoding":
                chunked = b"chunked" in value.lower()
            elif key == b"connection":
                token = value.strip().lower()
                keep = token != b"close" and (keep or token == b"keep-alive")
            elif key == b"retry-after":
                retry_after = value.strip().decode("latin-1")
        else:
            raise _Closed("too many header lines in the answer")
        if status >= 200 or status == 101:
            return status, length, chunked, retry_after, keep


def _read_body(reader: Any, method: str, status: int, length: int | None,
               chunked: bool) -> bytes:
    if method == "HEAD" or status in (204, 304):
        return b""
    if chunked:
        parts: list[bytes] = []
        while True:
            size = int(reader.readline(_MAX_LINE).split(b";", 1)[0], 16)
            if size == 0:
                while reader.readline(_MAX_LINE) not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return b"".join(parts)
            data = reader.read(size)
            if len(data) < size:
                raise _Closed("the answer ended in the middle of a chunk")
            parts.append(data)
            reader.read(2)
    if length is not None:
        data = reader.read(length)
        if len(data) < length:
            raise _Closed("the answer ended before its Content-Length")
        return bytes(data)
    return bytes(reader.read())


def _read_answer(reader: Any, method: str) -> tuple[Answer, bool]:
    """The whole answer, and whether the connection can carry another request."""
    status, length, chunked, retry_after, keep = _read_head(reader)
    body = _read_body(reader, method, status, length, chunked)
    if length is None and not chunked and method != "HEAD" and status not in (204, 304):
        keep = False  # the body ran to the end of the connection
    return Answer(status, body, retry_after), keep
