"""``lifecycle serve`` answers only requests for the names it serves (DNS rebinding, issue 28)."""

from __future__ import annotations

import http.client
import json
from pathlib import Path

from serve_helpers import Serve


def status(server: Serve, host: str, method: str = "GET", body: bytes | None = None,
           **headers: str) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        conn.putrequest(method, "/api/v1/namespaces/default/secrets", skip_host=True)
        conn.putheader("Host", host)
        for key, value in headers.items():
            conn.putheader(key.replace("_", "-"), value)
        if body is not None:
            conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body)
        return conn.getresponse().status
    finally:
        conn.close()


def test_serve_refuses_foreign_hosts_and_answers_the_allowed_ones(tmp_path: Path) -> None:
    server = Serve(tmp_path, operator=False, extra_args=["--allow-host", "dev.example.test"])
    try:
        server.start()
        port = server.port
        assert status(server, f"127.0.0.1:{port}") == 200
        assert status(server, f"localhost:{port}") == 200
        assert status(server, f"dev.example.test:{port}") == 200
        assert status(server, f"evil.example.com:{port}") == 403
        secret = json.dumps({"apiVersion": "v1", "kind": "Secret",
                             "metadata": {"name": "planted"}}).encode()
        assert status(server, f"127.0.0.1:{port}", "POST", secret,
                      Origin="http://evil.example.com") == 415
        assert status(server, f"127.0.0.1:{port}", "GET") == 200
        assert "planted" not in server.kubectl("get", "secrets", "-o", "name").stdout
    finally:
        server.stop()


def test_a_bad_allow_host_is_one_line(tmp_path: Path) -> None:
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "lifecycle", "serve", "--no-operator",
                           "--state", str(tmp_path / "s.db"), "--kubeconfig",
                           str(tmp_path / "k"), "--port", "1", "--allow-host", "a b"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
