"""``lifecycle serve --allow-adoption``, ``lifecycle run --embedded --kubeconfig`` and a
``serve`` start that fails: each from the outside, as a subprocess.

- ``serve`` lets its operator adopt an existing external resource only in the namespaces
  ``--allow-adoption`` names (default: none), as ``run`` does;
- ``run --embedded --kubeconfig FILE`` writes a kubeconfig kubectl can use for the embedded
  API and removes it on exit; a file holding another cluster's kubeconfig is never
  overwritten (``serve`` refuses it too);
- a ``serve`` whose port is taken leaves no state file (nor kubeconfig) behind, and keeps
  a state file that existed before.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from serve_helpers import Serve, eventually

from lifecycle.core.kind import ADOPT, EXTERNAL_NAME
from lifecycle.providers.simcloud.scenarios.harness import database_manifest

TESTS = Path(__file__).resolve().parent

FOREIGN_KUBECONFIG = """apiVersion: v1
kind: Config
current-context: prod
clusters: [{name: prod, cluster: {server: "https://prod.example:6443"}}]
users: [{name: admin, user: {token: not-a-real-token}}]
contexts: [{name: prod, context: {cluster: prod, user: admin}}]
"""


def lifecycle(tmp_path: Path, *argv: str, timeout: float = 90.0) -> subprocess.CompletedProcess:
    """``lifecycle ARGV`` run to completion in ``tmp_path``."""
    return subprocess.run([sys.executable, "-m", "lifecycle", *argv], cwd=tmp_path,
                          capture_output=True, text=True, timeout=timeout, check=False)


def one_line(done: subprocess.CompletedProcess, command: str) -> str:
    """The single error line of a command that exited 2."""
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"lifecycle {command}: "), done.stderr
    return lines[0]


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A loopback port something else listens on."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        yield taken.getsockname()[1]


# ------------------------------------------------------------------ failed serve start
def test_a_taken_port_leaves_no_state_file(tmp_path: Path, taken_port: int) -> None:
    line = one_line(lifecycle(tmp_path, "serve", "--port", str(taken_port)), "serve")
    assert "in use" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no state, no kubeconfig


def test_a_taken_port_keeps_an_existing_state_file(tmp_path: Path, taken_port: int) -> None:
    with Serve(tmp_path, operator=False) as server:
        server.kubectl("create", "configmap", "kept")
    before = server.state.read_bytes()
    assert server.state.exists()
    done = lifecycle(tmp_path, "serve", "--no-operator", "--port", str(taken_port),
                     "--state", str(server.state), "--kubeconfig", str(server.kubeconfig))
    assert "in use" in one_line(done, "serve")
    assert server.state.exists()
    with sqlite3.connect(server.state) as db:
        names = [row[0] for row in db.execute("SELECT name FROM objects WHERE kind = "
                                              "'ConfigMap'")]
    assert "kept" in names and len(before) > 0


def test_serve_never_overwrites_another_kubeconfig(tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.write_text(FOREIGN_KUBECONFIG)
    done = lifecycle(tmp_path, "serve", "--no-operator", "--port", "1", "--kubeconfig",
                     str(config))
    # refused before anything else is tried (port 1 would fail too) or created
    line = one_line(done, "serve")
    assert "is not a kubeconfig lifecycle wrote" in line and "left untouched" in line
    assert config.read_text() == FOREIGN_KUBECONFIG
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config"]


def test_serve_refuses_a_bad_adoption_namespace(tmp_path: Path) -> None:
    line = one_line(lifecycle(tmp_path, "serve", "--allow-adoption", "Not_A_Namespace"),
                    "serve")
    assert "--allow-adoption 'Not_A_Namespace'" in line
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------ serve --allow-adoption
def _adopting(server: Serve) -> None:
    manifest = database_manifest("legacy", annotations={EXTERNAL_NAME: "precious",
                                                        ADOPT: "true"}, storageGB=20)
    server.kubectl("apply", "-f", "-", input=yaml.safe_dump(manifest))


def _conditions(server: Serve) -> dict[str, dict[str, Any]]:
    obj = server.get_json("databaseinstance", "legacy")
    return {c["type"]: c for c in obj.get("status", {}).get("conditions", [])}


@pytest.mark.parametrize("allowed", [False, True], ids=["default", "allowed"])
def test_serve_adopts_only_where_allowed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         allowed: bool) -> None:
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(TESTS), *filter(None, [os.environ.get("PYTHONPATH")])]))
    extra = ["--connector", "first_hour_helpers:precious_connector"]
    if allowed:
        extra += ["--allow-adoption", "default"]
    with Serve(tmp_path, extra_args=extra) as server:
        _adopting(server)
        if allowed:
            ready = eventually(lambda: _conditions(server).get("Ready", {}).get(
                "status") == "True", timeout=60, what="the adopted instance Ready")
            assert ready
            obj = server.get_json("databaseinstance", "legacy")
            assert obj["metadata"]["annotations"][EXTERNAL_NAME] == "precious"
        else:
            refused = eventually(
                lambda: next((c for c in _conditions(server).values()
                              if c.get("reason") == "ExternalResourceNotOwned"), None),
                timeout=60, what="the adoption refused as not owned")
            assert "adopt" in refused["message"]
            assert _conditions(server).get("Ready", {}).get("status") != "True"


# ------------------------------------------------------------------ run --embedded --kubeconfig
def test_run_embedded_writes_a_kubeconfig_and_removes_it(tmp_path: Path) -> None:
    config = tmp_path / "embedded.kubeconfig"
    process = subprocess.Popen(
        [sys.executable, "-m", "lifecycle", "run", "--embedded", "--kubeconfig", str(config)],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        eventually(lambda: config.exists() or process.poll() is not None, timeout=90,
                   what="the kubeconfig written")
        assert process.poll() is None, process.communicate()
        doc = yaml.safe_load(config.read_text())
        server = doc["clusters"][0]["cluster"]["server"]
        assert server.startswith("http://127.0.0.1:")
        env = {**os.environ, "KUBECONFIG": str(config), "KUBECACHEDIR": str(tmp_path / "c")}
        listed = subprocess.run(["kubectl", "get", "crd", "-o", "json"], env=env,
                                capture_output=True, text=True, timeout=60, check=True)
        names = {item["metadata"]["name"] for item in json.loads(listed.stdout)["items"]}
        assert "databaseinstances.db.lifecycle.dev" in names
    finally:
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    assert f"export KUBECONFIG={config}" in out
    assert not config.exists()  # it named an API that is gone


def test_run_embedded_never_overwrites_another_kubeconfig(tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.write_text(FOREIGN_KUBECONFIG)
    started = time.monotonic()
    line = one_line(lifecycle(tmp_path, "run", "--embedded", "--kubeconfig", str(config)),
                    "run")
    assert "is not a kubeconfig lifecycle wrote" in line and "left untouched" in line
    assert config.read_text() == FOREIGN_KUBECONFIG
    assert "embedded API server" not in line and time.monotonic() - started < 90


def test_run_embedded_refuses_a_context(tmp_path: Path) -> None:
    line = one_line(lifecycle(tmp_path, "run", "--embedded", "--context", "prod"), "run")
    assert "--context" in line and "--embedded" in line
