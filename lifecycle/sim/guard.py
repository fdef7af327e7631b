"""What the HTTP face checks before it serves a request: who it is for, and how long it may take.

* **Host** (DNS rebinding): a web page a developer opens can make the
  browser send requests to ``127.0.0.1`` under a name the page's author
  controls (``evil.example.com`` resolving to ``127.0.0.1``); the browser
  then lets that page read the answers. :class:`HostCheck` accepts only the
  names the face is actually served under: the address it is bound to,
  ``localhost``/``127.0.0.1``/``::1`` when that is a loopback or wildcard
  address, any IP literal when it is a wildcard, and names passed
  explicitly. A request without a ``Host`` header (HTTP/1.0, raw sockets)
  is not a browser's and is served.
* **Content-Type on writes**: a cross-site ``POST`` that needs no CORS
  preflight carries ``text/plain``, a form type, or (a ``Blob`` body) no
  ``Content-Type`` at all. The face decodes only JSON and YAML bodies, and
  a write from a browser (a request carrying ``Origin`` or a
  ``Sec-Fetch-*`` header, as every browser's ``POST`` does) must say which
  (415 otherwise). A write without ``Content-Type`` from anything else is
  read as JSON, as a real API server reads it: the official Python client
  sends its create bodies without one. A write whose ``Origin`` is not an
  address the face serves is refused (403) whatever its type.
* **Time**: :class:`Deadline` bounds the whole read of one request body
  (:data:`READ_TIMEOUT`): a body shorter than its ``Content-Length`` is
  answered 408 and the connection closed, instead of holding a thread for
  ever; an idle kept-alive connection is closed after :data:`IDLE_TIMEOUT`.
* **Connections**: the kernel queues :data:`BACKLOG` of them, and at most
  :data:`MAX_CONNECTIONS` are served at once (a thread each); one more is
  answered :func:`busy_answer` (503, ``Retry-After: 1``) and closed.
"""

from __future__ import annotations

import ipaddress
import json
import socket
import time
from collections.abc import Iterable
from typing import Protocol
from urllib.parse import urlsplit

from lifecycle.kube.errors import ApiError, Forbidden, UnsupportedMediaType

__all__ = [
    "BACKLOG",
    "IDLE_TIMEOUT",
    "MAX_CONNECTIONS",
    "READ_TIMEOUT",
    "Deadline",
    "Headers",
    "HostCheck",
    "Reader",
    "RequestTimeout",
    "busy_answer",
    "require_body_type",
]

#: Seconds a kept-alive connection may wait for its next request line (or a header line).
IDLE_TIMEOUT = 60.0
#: Seconds the body of one request may take to arrive, in total.
READ_TIMEOUT = 30.0
#: Connections the kernel queues before they are accepted (the kernel caps it at
#: ``net.core.somaxconn``). A burst of clients opening connections at once (an
#: operator with an unbounded connection pool and a thousand objects) must queue,
#: not be dropped.
BACKLOG = 4096
#: Connections served at once (a thread each); more are answered 503 and closed.
#: An idle thread costs little: the bound is against a flood, not against an
#: operator that keeps one connection per object in flight.
MAX_CONNECTIONS = 2048

#: Body media types the face decodes (PATCH has its own list).
BODY_TYPES = ("application/json", "application/yaml", "*/*")

_LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


def busy_answer(limit: int) -> bytes:
    """The whole HTTP answer to a connection over the limit: 503 with a Status, closed."""
    status = json.dumps({
        "apiVersion": "v1", "kind": "Status", "metadata": {}, "status": "Failure",
        "message": f"too many open connections (at most {limit}); retry later",
        "reason": "ServiceUnavailable", "code": 503}, separators=(",", ":")).encode()
    return (b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
            b"Retry-After: 1\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s"
            % (len(status), status))


class RequestTimeout(ApiError):
    """The request body did not arrive in time (408)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, status=408, reason="Timeout")


def host_name(header: str) -> str:
    """The host part of a ``Host`` header: no port, no brackets, lower case, no final dot."""
    text = header.strip().lower()
    if text.startswith("["):
        return text[1:].split("]", 1)[0]
    if text.count(":") == 1:
        text = text.split(":", 1)[0]
    return text.rstrip(".")


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


class HostCheck:
    """Whether a request's ``Host`` header names an address the face is served under."""

    def __init__(self, bound: str, extra: Iterable[str] = ()) -> None:
        address = _ip(bound)
        self.wildcard = address is not None and address.is_unspecified
        names = {host_name(bound), *(host_name(n) for n in extra)}
        if address is None or address.is_loopback or self.wildcard:
            names |= _LOOPBACK_NAMES
        self.names = frozenset(names)

    def allows(self, header: str | None) -> bool:
        """Whether ``header`` (the Host value, or None when absent) may be served."""
        if header is None:
            return True
        name = host_name(header)
        if name in self.names:
            return True
        return self.wildcard and _ip(name) is not None

    def check_origin(self, method: str, origin: str | None) -> None:
        """A write whose ``Origin`` is another site's: 403 (a browser's cross-site request)."""
        if origin is None or method in ("GET", "HEAD", "OPTIONS"):
            return
        host = urlsplit(origin.strip()).netloc
        if not host or not self.allows(host):
            raise Forbidden(f"a write from the origin {origin[:100]!r} is refused: this API "
                            f"answers only its own clients, never a web page's")

    def check(self, header: str | None) -> None:
        """Raise 403 ``Forbidden`` unless :meth:`allows`."""
        if not self.allows(header):
            shown = (header or "")[:100]
            raise Forbidden(f"the Host {shown!r} is not an address this API is served on "
                            f"(a DNS rebinding attempt?); use one of "
                            f"{', '.join(sorted(self.names))}")


class Headers(Protocol):
    """A request's headers, as a mapping or ``http.server``'s message object offers them."""

    def get(self, name: str, /) -> str | None:
        """The header's value, or None."""
        ...


class Reader(Protocol):
    """A byte stream a request body is read from."""

    def read(self, size: int, /) -> bytes:
        """Up to ``size`` bytes."""
        ...

    def readline(self, limit: int, /) -> bytes:
        """One line of at most ``limit`` bytes."""
        ...


def from_browser(headers: Headers) -> bool:
    """Whether a request carries what browsers add to theirs (``Origin``, ``Sec-Fetch-*``)."""
    return any(headers.get(name) is not None
               for name in ("Origin", "Sec-Fetch-Site", "Sec-Fetch-Mode"))


def require_body_type(method: str, raw: bytes, content_type: str,
                      headers: Headers) -> None:
    """A write's body must be JSON or YAML, and a browser's must say so: 415 otherwise."""
    if method not in ("POST", "PUT", "DELETE") or not raw.strip():
        return
    if content_type in BODY_TYPES or (not content_type and not from_browser(headers)):
        return
    shown = f"{content_type!r}" if content_type else "no Content-Type"
    raise UnsupportedMediaType(
        f"the body of the request was in an unknown format ({shown}) - accepted media "
        f"types include: application/json, application/yaml")


class Deadline:
    """A request body stream whose reads, together, end by a deadline.

    Wraps the connection's buffered reader for :func:`~lifecycle.sim.requests.read_body`
    (``read`` and ``readline``); each read sets the socket's timeout to the
    time left, so a client that stops sending (or trickles) gets
    :class:`RequestTimeout` once ``seconds`` have passed.
    """

    def __init__(self, stream: Reader, connection: socket.socket, seconds: float) -> None:
        self.stream = stream
        self.connection = connection
        self.deadline = time.monotonic() + seconds
        self.seconds = seconds

    def _arm(self) -> None:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise self._expired()
        self.connection.settimeout(left)

    def _expired(self) -> RequestTimeout:
        return RequestTimeout(f"the request body did not arrive within {self.seconds:g}s")

    def read(self, size: int) -> bytes:
        """Up to ``size`` bytes (fewer only at the end of the stream)."""
        data = bytearray()
        try:
            while len(data) < size:
                self._arm()
                chunk = self.stream.read1(min(size - len(data), 65536))  # type: ignore[attr-defined]
                if not chunk:
                    break
                data += chunk
        except TimeoutError:
            raise self._expired() from None
        return bytes(data)

    def readline(self, limit: int = -1) -> bytes:
        """One line of at most ``limit`` bytes."""
        try:
            self._arm()
            return self.stream.readline(limit)
        except TimeoutError:
            raise self._expired() from None
