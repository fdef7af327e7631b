"""Connection resets and refusals a benchmark process sees, counted inside it.

:func:`install` wraps the socket methods every client in the process ends
up calling (``connect``, ``send``/``sendall``, ``recv``/``recv_into`` of plain
and TLS sockets, asyncio's ``sock_connect``) and ``http.client``'s
``getresponse``, and counts each :class:`ConnectionError` they raise
(reset, refused, aborted, broken pipe, and a server that closed the
connection without answering, ``RemoteDisconnected``) plus TLS streams cut
without a close notification. The exception still propagates: the client
retries or fails exactly as it would, and the count only watches.
:func:`write_at_exit` writes the counts as JSON to a file when the process
ends, which is how the benchmark reads an operator's figure.

``python -m benchmarks.e2e_netcount STATS -- ARGS...`` runs the
``lifecycle`` command line (``lifecycle ARGS...``) with the counters
installed and writes them to ``STATS`` when it returns.
"""

from __future__ import annotations

import asyncio.selector_events
import atexit
import functools
import http.client
import json
import socket
import ssl
import sys
import threading
from collections import Counter
from typing import Any

COUNTS: Counter[str] = Counter()
_LOCK = threading.Lock()
_INSTALLED: list[bool] = []


def _note(exc: BaseException) -> None:
    if isinstance(exc, ConnectionRefusedError):
        key = "refused"
    elif isinstance(exc, http.client.RemoteDisconnected):
        key = "closed_without_answer"
    elif isinstance(exc, ConnectionError | ssl.SSLEOFError):
        key = "reset"
    else:
        return
    with _LOCK:
        COUNTS[key] += 1


def _wrap(owner: Any, name: str) -> None:
    original = getattr(owner, name)

    @functools.wraps(original)
    def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return original(self, *args, **kwargs)
        except BaseException as exc:
            _note(exc)
            raise

    setattr(owner, name, counted)


def _wrap_async(owner: Any, name: str) -> None:
    original = getattr(owner, name)

    @functools.wraps(original)
    async def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return await original(self, *args, **kwargs)
        except BaseException as exc:
            _note(exc)
            raise

    setattr(owner, name, counted)


def install() -> None:
    """Wrap the socket and HTTP methods once (later calls do nothing)."""
    with _LOCK:
        if _INSTALLED:
            return
        _INSTALLED.append(True)
    for name in ("connect", "send", "sendall", "recv", "recv_into"):
        _wrap(socket.socket, name)
    for name in ("send", "sendall", "recv", "recv_into", "read", "write", "do_handshake"):
        _wrap(ssl.SSLSocket, name)
    _wrap(http.client.HTTPConnection, "getresponse")
    _wrap_async(asyncio.selector_events.BaseSelectorEventLoop, "sock_connect")


def snapshot() -> dict[str, int]:
    """The counts so far, with their ``total``."""
    with _LOCK:
        counts = dict(COUNTS)
    counts["total"] = sum(counts.values())
    return counts


def note_disconnect() -> None:
    """Count one connection the server closed before answering, seen by a client that does
    not raise it through the wrapped methods (aiohttp's ``ServerDisconnectedError``)."""
    with _LOCK:
        COUNTS["closed_without_answer"] += 1


def write_at_exit(path: str) -> None:
    """Write :func:`snapshot` as JSON to ``path`` when the interpreter exits."""
    def write() -> None:
        with open(path, "w", encoding="utf-8") as out:
            json.dump(snapshot(), out)

    atexit.register(write)


def read(path: str) -> dict[str, int]:
    """The counts a process wrote to ``path`` (empty when it wrote none: it was killed)."""
    try:
        with open(path, encoding="utf-8") as f:
            found = json.load(f)
    except (OSError, ValueError):
        return {}
    return {str(k): int(v) for k, v in found.items()} if isinstance(found, dict) else {}


def main(argv: list[str]) -> int:
    """``STATS -- ARGS...``: the ``lifecycle`` command line, counted."""
    if len(argv) < 2 or argv[1] != "--":
        print("usage: python -m benchmarks.e2e_netcount STATS -- LIFECYCLE-ARGS...",
              file=sys.stderr)
        return 2
    install()
    write_at_exit(argv[0])
    from lifecycle.cli import main as lifecycle_main

    return int(lifecycle_main(argv[2:]) or 0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
