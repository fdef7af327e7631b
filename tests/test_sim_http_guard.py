"""The HTTP face against a hostile web page and hostile connections (issue 28).

DNS rebinding (a foreign ``Host``), a cross-site form ``POST``, a body that
never arrives, idle kept-alive connections, a full accept queue, a client
that leaves in the middle of an error answer, and a YAML alias bomb: each is
answered (or closed) quickly, leaves nothing behind, and never puts a
traceback in the log.
"""

from __future__ import annotations

import json
import logging
import socket
import struct
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lifecycle.kube.errors import NotFound
from lifecycle.sim.apiserver import EmbeddedAPI
from lifecycle.sim.guard import HostCheck
from lifecycle.sim.http import APIServerHTTP

SECRETS = "/api/v1/namespaces/default/secrets"
SECRET = json.dumps({"apiVersion": "v1", "kind": "Secret",
                     "metadata": {"name": "planted"}, "data": {}}).encode()

#: 342 bytes of nested aliases: nine levels of nine, 387 million nodes expanded.
BOMB = ("apiVersion: v1\nkind: Secret\nmetadata: {name: bomb}\n"
        "a: &a [lol,lol,lol,lol,lol,lol,lol,lol,lol]\n"
        + "".join(f"{n}: &{n} [{','.join([f'*{p}'] * 9)}]\n"
                  for p, n in zip("abcdefgh", "bcdefghi", strict=True))).encode()


def wait_for(condition: Any, what: str, timeout: float = 10.0) -> None:
    """Poll ``condition()`` until it is true; fail naming ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def serving(face: APIServerHTTP) -> int:
    """How many connections the face holds a thread for now."""
    return face._server._open


@pytest.fixture
def face() -> Iterator[APIServerHTTP]:
    api = EmbeddedAPI()
    with APIServerHTTP(api, idle_timeout=1.0, read_timeout=1.0) as srv:
        yield srv
    api.close()


def send(face: APIServerHTTP, method: str, path: str, body: bytes = b"",
         **headers: str) -> tuple[int, dict[str, Any]]:
    lines = [f"{method} {path} HTTP/1.1"]
    headers.setdefault("Host", f"127.0.0.1:{face.port}")
    if body:
        headers.setdefault("Content-Length", str(len(body)))
    lines += [f"{k.replace('_', '-')}: {v}" for k, v in headers.items()]
    raw = ("\r\n".join(lines) + "\r\n\r\n").encode() + body
    with socket.create_connection(("127.0.0.1", face.port), timeout=10) as sock:
        sock.sendall(raw)
        data = b""
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
            head, _, rest = data.partition(b"\r\n\r\n")
            if b"\r\n\r\n" in data:
                length = [int(line.split(b":")[1]) for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length:")]
                if length and len(rest) >= length[0]:
                    break
    head, _, rest = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(rest) if rest.strip() else {}


def planted(face: APIServerHTTP) -> bool:
    try:
        face.api.get("v1", "Secret", "default", "planted")
    except NotFound:
        return False
    return True


# ------------------------------------------------------------------ who asks
@pytest.mark.parametrize("host", ["evil.example.com", "evil.example.com:6443",
                                  "127.0.0.1.nip.io", "localhost.evil.example.com"])
def test_a_foreign_host_is_refused_dns_rebinding(face: APIServerHTTP, host: str) -> None:
    face.api.create({"apiVersion": "v1", "kind": "Secret",
                     "metadata": {"name": "admin", "namespace": "default"},
                     "data": {"password": "c2VjcmV0"}})
    code, doc = send(face, "GET", SECRETS, Host=host)
    assert code == 403 and doc["reason"] == "Forbidden", doc
    assert "c2VjcmV0" not in json.dumps(doc)
    code, doc = send(face, "POST", SECRETS, SECRET, Host=host, Content_Type="application/json")
    assert code == 403 and not planted(face)


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "LOCALHOST.", "[::1]"])
def test_served_names_are_answered(face: APIServerHTTP, host: str) -> None:
    code, _ = send(face, "GET", SECRETS, Host=f"{host}:{face.port}")
    assert code == 200


def test_which_hosts_a_binding_serves() -> None:
    loopback = HostCheck("127.0.0.1")
    assert loopback.allows("localhost:6443") and not loopback.allows("10.0.0.5")
    wildcard = HostCheck("0.0.0.0")
    assert wildcard.allows("10.0.0.5:6443") and wildcard.allows("[fe80::1]:6443")
    assert not wildcard.allows("evil.example.com")
    remote = HostCheck("10.0.0.5", ["api.internal"])
    assert remote.allows("10.0.0.5") and remote.allows("api.internal:6443")
    assert not remote.allows("localhost") and not remote.allows("10.0.0.6")
    assert loopback.allows(None)  # no Host: not a browser


def test_a_cross_site_post_without_content_type_is_refused(face: APIServerHTTP) -> None:
    """What a page's ``fetch(url, {method: "POST", mode: "no-cors", body: blob})`` sends."""
    code, doc = send(face, "POST", SECRETS, SECRET, Origin="http://evil.example.com",
                     Sec_Fetch_Site="cross-site")
    assert code == 415 and doc["reason"] == "UnsupportedMediaType", doc
    for form in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data"):
        code, _ = send(face, "POST", SECRETS, SECRET, Content_Type=form)
        assert code == 415
    code, _ = send(face, "POST", SECRETS, SECRET, Content_Type="application/json",
                   Origin="http://evil.example.com")
    assert code == 403
    assert not planted(face)
    # Clients that are not browsers (the official Python client sends no type) still work.
    code, _ = send(face, "POST", SECRETS, SECRET)
    assert code == 201 and planted(face)


# --------------------------------------------------------------------- time
def test_a_body_shorter_than_its_length_is_answered_408_not_waited_for(
        face: APIServerHTTP) -> None:
    head = (f"POST {SECRETS} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: 500\r\n\r\n").encode()
    with socket.create_connection(("127.0.0.1", face.port), timeout=10) as sock:
        started = time.monotonic()
        sock.sendall(head + SECRET[:20])
        answer = sock.recv(65536)
        elapsed = time.monotonic() - started
    assert answer.startswith(b"HTTP/1.1 408"), answer[:100]
    assert elapsed < 5, elapsed
    assert not planted(face)


def test_a_trickled_body_is_cut_at_the_deadline(face: APIServerHTTP) -> None:
    head = (f"POST {SECRETS} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(SECRET)}\r\n\r\n").encode()
    with socket.create_connection(("127.0.0.1", face.port), timeout=10) as sock:
        sock.sendall(head)
        started = time.monotonic()
        answer = b""
        for byte in SECRET:
            try:
                sock.sendall(bytes([byte]))
            except OSError:
                break
            time.sleep(0.2)  # the trickle's pace (the attack), not a wait for anything
            sock.setblocking(False)
            try:
                answer += sock.recv(65536)
            except BlockingIOError:
                pass
            finally:
                sock.setblocking(True)
            if answer:
                break
        assert answer.startswith(b"HTTP/1.1 408"), answer[:100]
        assert time.monotonic() - started < 5


def test_an_idle_kept_alive_connection_is_closed(face: APIServerHTTP) -> None:
    with socket.create_connection(("127.0.0.1", face.port), timeout=10) as sock:
        sock.sendall(f"GET /api HTTP/1.1\r\nHost: 127.0.0.1:{face.port}\r\n\r\n".encode())
        assert sock.recv(65536).startswith(b"HTTP/1.1 200")
        started = time.monotonic()
        while sock.recv(65536):  # the rest of the answer, then the close
            pass
        assert time.monotonic() - started < 5
    # A slow client that never finishes its headers is closed too.
    with socket.create_connection(("127.0.0.1", face.port), timeout=10) as sock:
        sock.sendall(b"GET /api HTTP/1.1\r\n")
        started = time.monotonic()
        assert sock.recv(65536) == b""
        assert time.monotonic() - started < 5


def test_many_idle_connections_do_not_pile_up_threads(face: APIServerHTTP) -> None:
    before = threading.active_count()
    socks = [socket.create_connection(("127.0.0.1", face.port), timeout=10) for _ in range(60)]
    try:
        wait_for(lambda: serving(face) == 60, "the 60 connections to be accepted")
        assert threading.active_count() >= before + 30  # one thread each while they wait
        deadline = time.monotonic() + 10
        while threading.active_count() > before + 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert threading.active_count() <= before + 2
    finally:
        for sock in socks:
            sock.close()


def test_connections_over_the_bound_get_a_503_at_once() -> None:
    api = EmbeddedAPI()
    with APIServerHTTP(api, max_connections=5) as face:
        held = [socket.create_connection(("127.0.0.1", face.port), timeout=10)
                for _ in range(5)]
        try:
            wait_for(lambda: serving(face) == 5, "all five to be accepted, each with its thread")
            with socket.create_connection(("127.0.0.1", face.port), timeout=10) as extra:
                started = time.monotonic()
                answer = b""
                while chunk := extra.recv(65536):
                    answer += chunk
                assert time.monotonic() - started < 2
            assert answer.startswith(b"HTTP/1.1 503"), answer[:80]
            assert json.loads(answer.partition(b"\r\n\r\n")[2])["code"] == 503
            held.pop().close()
            wait_for(lambda: serving(face) == 4, "its thread to end: room for one more")
            assert send(face, "GET", "/api")[0] == 200
        finally:
            for sock in held:
                sock.close()
    api.close()


def test_the_listen_backlog_is_a_real_one(face: APIServerHTTP) -> None:
    assert face._server.request_queue_size >= 128
    done = subprocess.run(["ss", "-Hltn", f"sport = :{face.port}"], capture_output=True,
                          text=True, check=False)
    if done.returncode == 0 and done.stdout.split():
        # For a listening socket, ss's Send-Q column is the backlog it was given.
        assert int(done.stdout.split()[2]) >= 128, done.stdout


# --------------------------------------------------------------- clean exits
def test_a_client_leaving_during_an_error_answer_leaves_no_traceback(
        face: APIServerHTTP, caplog: pytest.LogCaptureFixture,
        capfd: pytest.CaptureFixture[str]) -> None:
    resolve = face.route
    left = threading.Event()
    requests: dict[int, socket.socket] = {}
    serve_thread = face._server.process_request_thread

    def tracked(request: socket.socket, client_address: Any) -> None:
        requests[threading.get_ident()] = request
        serve_thread(request, client_address)

    def reset(request: socket.socket) -> bool:
        """Whether the client's reset has reached the server's end of the connection."""
        try:
            return request.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
        except BlockingIOError:
            return False
        except OSError:
            return True

    def late(parts: list[str]) -> Any:
        left.wait(5)
        request = requests[threading.get_ident()]
        wait_for(lambda: reset(request), "the client's reset to reach the server")
        return resolve(parts)

    face._server.process_request_thread = tracked  # type: ignore[method-assign]
    face.route = late  # type: ignore[method-assign]
    caplog.set_level(logging.DEBUG)
    for _ in range(3):
        left.clear()
        sock = socket.create_connection(("127.0.0.1", face.port), timeout=10)
        sock.sendall(f"GET /api/v1/namespaces/default/secrets/none HTTP/1.1\r\n"
                     f"Host: 127.0.0.1:{face.port}\r\n\r\n".encode())
        # Reset, not a polite close: the server's first write fails at once.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()
        left.set()
        # The server answered into the reset connection and ended its thread: anything it
        # would log about the failed write has been logged.
        wait_for(lambda: serving(face) == 0, "the server to finish with the connection")
    face.route = resolve  # type: ignore[method-assign]
    assert send(face, "GET", "/api")[0] == 200
    captured = capfd.readouterr()
    text = captured.err + captured.out + "\n".join(
        r.getMessage() + (r.exc_text or "") for r in caplog.records)
    assert "Traceback" not in text and "BrokenPipeError" not in text, text
    assert not any(r.exc_info for r in caplog.records)


# --------------------------------------------------------------------- YAML
def test_a_yaml_alias_bomb_is_refused_quickly(face: APIServerHTTP) -> None:
    started = time.monotonic()
    code, doc = send(face, "POST", SECRETS, BOMB, Content_Type="application/yaml")
    assert code == 400 and "aliases" in doc["message"], doc
    assert time.monotonic() - started < 3
    code, doc = send(face, "POST", SECRETS, b"&a [*a]", Content_Type="application/yaml")
    assert code == 400
    # Ordinary YAML, anchors included, is still decoded.
    fine = (b"apiVersion: v1\nkind: Secret\nmetadata: {name: planted, labels: &l {a: b},"
            b" annotations: *l}\n")
    code, doc = send(face, "POST", SECRETS, fine, Content_Type="application/yaml")
    assert code == 201 and doc["metadata"]["annotations"] == {"a": "b"}, doc


def lifecycle(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    import sys

    return subprocess.run([sys.executable, "-m", "lifecycle", *args], capture_output=True,
                          text=True, timeout=timeout, check=False)


def test_plan_refuses_a_yaml_alias_bomb_quickly(tmp_path: Path) -> None:
    dump = tmp_path / "bomb.yaml"
    dump.write_bytes(BOMB.replace(b"kind: Secret", b"kind: DatabaseInstance").replace(
        b"apiVersion: v1", b"apiVersion: db.lifecycle.dev/v1alpha1"))
    started = time.monotonic()
    done = lifecycle("plan", "--object", str(dump), timeout=30)
    assert time.monotonic() - started < 20
    assert done.returncode == 2, done
    assert len(done.stderr.strip().splitlines()) == 1 and "alias" in done.stderr, done.stderr


def test_plan_reads_dev_zero_with_a_bound() -> None:
    started = time.monotonic()
    done = lifecycle("plan", "--object", "/dev/zero", timeout=30)
    assert time.monotonic() - started < 20
    assert done.returncode == 2, done
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
