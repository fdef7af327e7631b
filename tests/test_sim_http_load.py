"""The HTTP face under many concurrent clients: no connection is reset or refused.

An operator with an unbounded connection pool (kopf's) opens a connection per
object in flight; the face must queue and serve them, keep each one alive
between requests, and when it truly is over its bound answer a 503 the client
can read rather than resetting the connection. Behaviour only, no timing.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from collections import Counter
from collections.abc import Iterator

import pytest

from lifecycle.sim import guard
from lifecycle.sim.apiserver import EmbeddedAPI
from lifecycle.sim.http import APIServerHTTP

CONFIGMAPS = "/api/v1/namespaces/default/configmaps"


@pytest.fixture
def face() -> Iterator[APIServerHTTP]:
    api = EmbeddedAPI()
    with APIServerHTTP(api) as srv:
        yield srv
    api.close()


def _configmap(name: str, size: int = 64) -> bytes:
    return json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
                       "data": {"v": "x" * size}}).encode()


def test_the_backlog_and_bound_fit_a_burst_of_a_thousand_clients(face: APIServerHTTP) -> None:
    assert face._server.request_queue_size >= 1024
    assert face._server.max_connections >= 1024
    assert guard.MAX_CONNECTIONS >= 1024


def test_two_hundred_concurrent_kept_alive_connections_are_all_served(
        face: APIServerHTTP) -> None:
    clients, rounds = 200, 3
    errors: Counter[str] = Counter()
    statuses: Counter[int] = Counter()
    reconnects: Counter[int] = Counter()
    lock = threading.Lock()
    ready = threading.Barrier(clients)

    def client(index: int) -> None:
        try:
            ready.wait(timeout=60)
            conn = http.client.HTTPConnection("127.0.0.1", face.port, timeout=60)
            conn.connect()
            sock = conn.sock
            for turn in range(rounds):
                name = f"c{index}-{turn}"
                conn.request("POST", CONFIGMAPS, _configmap(name),
                             {"Content-Type": "application/json"})
                first = conn.getresponse()
                first.read()
                conn.request("GET", f"{CONFIGMAPS}/{name}")
                second = conn.getresponse()
                second.read()
                with lock:
                    statuses[first.status] += 1
                    statuses[second.status] += 1
                    # http.client reconnects silently after a close: the socket tells.
                    reconnects[int(conn.sock is not sock)] += 1
            conn.close()
        except Exception as exc:
            with lock:
                errors[type(exc).__name__] += 1

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert not errors, dict(errors)
    assert statuses == {201: clients * rounds, 200: clients * rounds}, dict(statuses)
    assert reconnects == {0: clients * rounds}, "a kept-alive connection was closed"


def test_a_connection_over_the_bound_reads_its_503_instead_of_a_reset() -> None:
    api = EmbeddedAPI()
    answers: Counter[str] = Counter()
    lock = threading.Lock()
    with APIServerHTTP(api, max_connections=4) as face:
        held = [socket.create_connection(("127.0.0.1", face.port), timeout=10)
                for _ in range(4)]
        try:
            def client(index: int) -> None:
                body = _configmap(f"over{index}", 20_000)
                try:
                    with socket.create_connection(("127.0.0.1", face.port), timeout=10) as s:
                        # The head first and the body a moment later, as a client
                        # that writes them separately does.
                        s.sendall(b"POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                  b"Content-Type: application/json\r\n"
                                  b"Content-Length: %d\r\n\r\n"
                                  % (CONFIGMAPS.encode(), len(body)))
                        time.sleep(0.05)
                        s.sendall(body)
                        data = b""
                        while chunk := s.recv(65536):
                            data += chunk
                    head, _, rest = data.partition(b"\r\n\r\n")
                    outcome = head.split(b"\r\n")[0].decode()
                    if outcome.endswith("503 Service Unavailable"):
                        assert json.loads(rest)["code"] == 503
                except Exception as exc:
                    outcome = type(exc).__name__
                with lock:
                    answers[outcome] += 1

            threads = [threading.Thread(target=client, args=(i,)) for i in range(20)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(timeout=60)
        finally:
            for sock in held:
                sock.close()
    api.close()
    assert answers == {"HTTP/1.1 503 Service Unavailable": 20}, dict(answers)
