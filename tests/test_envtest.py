"""The envtest tier: a real kube-apiserver and etcd, built from their Go modules.

``lifecycle envtest`` and the ``real_cluster`` fixture start the real API
server; these tests check that it is the real one (its version, RBAC
authorization, TokenRequest, the audit log), that ``lifecycle envtest`` with
``lifecycle run`` beside it takes the DatabaseInstance example to Ready and
deletes it cleanly, and that a missing Go toolchain is one clear line.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s
from serve_helpers import EXAMPLES, eventually, free_port, kubectl_binary

from lifecycle.testing import envtest


def kubectl(config: Path, *args: str, check: bool = True,
            timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """``kubectl --kubeconfig CONFIG ARGS``."""
    done = subprocess.run([kubectl_binary(), "--kubeconfig", str(config), *args],
                          capture_output=True, text=True, timeout=timeout, check=False)
    if check:
        assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}"
    return done


def test_the_real_server_answers_kubectl_version_with_the_pinned_release(real_cluster: Any,
                                                                          ) -> None:
    """``kubectl version`` reports a real kube-apiserver of the version go.mod pins."""
    done = kubectl(real_cluster.kubeconfig, "version", "-o", "json")
    server = json.loads(done.stdout)["serverVersion"]
    assert server["gitVersion"].startswith("v1.3"), server
    pinned = envtest.kubernetes_version()
    assert f"{server['major']}.{server['minor']}" == ".".join(pinned.lstrip("v").split(".")[:2])


def test_rbac_is_enforced_for_a_service_account_and_not_for_the_admin(real_cluster: Any,
                                                                       tmp_path: Path) -> None:
    """A fresh ServiceAccount's token is refused with 403; the admin kubeconfig is not."""
    config = real_cluster.service_account_kubeconfig(tmp_path / "sa.kc", "rbac-probe", "nobody")
    refused = kubectl(config, "get", "secrets", "-n", "default", check=False)
    assert refused.returncode != 0
    assert "Forbidden" in refused.stderr or "forbidden" in refused.stderr, refused.stderr
    assert "system:serviceaccount:rbac-probe:nobody" in refused.stderr, refused.stderr
    assert kubectl(real_cluster.kubeconfig, "get", "secrets", "-n", "default").returncode == 0
    can = kubectl(config, "auth", "can-i", "list", "secrets", "-n", "default", check=False)
    assert can.stdout.strip() == "no", can


def test_the_audit_log_records_each_request_with_its_user_agent(real_cluster: Any) -> None:
    """A request through the official client shows up in the audit log, once, with its agent."""
    _, start = real_cluster.audit_events()
    client = real_cluster.api_client()
    client.user_agent = "audit-probe/1"
    k8s.CoreV1Api(client).read_namespace("default")
    events = eventually(lambda: [e for e in real_cluster.audit_events(since=start)[0]
                                 if e.get("userAgent") == "audit-probe/1"] or None,
                        timeout=10, what="the audit event")
    assert len(events) == 1, events
    assert events[0]["verb"] == "get"
    assert events[0]["objectRef"]["resource"] == "namespaces"
    assert events[0]["responseStatus"]["code"] == 200


def test_a_missing_go_is_one_line_with_the_install_hint(tmp_path: Path) -> None:
    """Without ``go`` on PATH and nothing cached, ``lifecycle envtest`` says so in one line."""
    env = {**os.environ, "PATH": str(Path(sys.executable).parent),
           "LIFECYCLE_ENVTEST_CACHE": str(tmp_path / "empty-cache")}
    done = subprocess.run([sys.executable, "-m", "lifecycle", "envtest", "--port", "0",
                           "--dir", str(tmp_path / "d"), "--kubeconfig",
                           str(tmp_path / "kc")], capture_output=True, text=True, env=env,
                          timeout=60, check=False)
    assert done.returncode == 2, done
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "needs go on PATH" in lines[0] and "apt-get install golang-go" in lines[0], lines
    assert "Traceback" not in done.stderr


def test_a_failed_build_is_one_line_naming_go_build(tmp_path: Path, monkeypatch: Any) -> None:
    """A ``go`` that fails is reported as a failed build, with its last lines."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "go").write_text("#!/bin/sh\necho 'cannot find module providing package' >&2\n"
                             "exit 1\n")
    (fake / "go").chmod(0o755)
    monkeypatch.setenv("PATH", str(fake))
    monkeypatch.setenv("LIFECYCLE_ENVTEST_CACHE", str(tmp_path / "cache"))
    with pytest.raises(envtest.EnvtestError, match="go build of the real API server failed: "
                                                   "cannot find module"):
        envtest.binaries()
    assert not list((tmp_path / "cache").glob("v*/kube-apiserver"))


def test_lifecycle_envtest_with_lifecycle_run_beside_it_provisions_and_deletes_the_example(
        tmp_path: Path) -> None:
    """The README's path: ``lifecycle envtest --kubeconfig kc`` and ``lifecycle run
    --kubeconfig kc``; the DatabaseInstance example goes Ready and is deleted cleanly."""
    config = tmp_path / "kc"
    server = subprocess.Popen(
        [sys.executable, "-m", "lifecycle", "envtest", "--port", str(free_port()),
         "--dir", str(tmp_path / "envtest"), "--kubeconfig", str(config),
         "--kinds", "DatabaseInstance"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    operator = None
    try:
        first = server.stdout.readline() if server.stdout else ""
        # Build messages come first on a cold cache; the ready line names the version.
        deadline = time.monotonic() + envtest.BUILD_TIMEOUT
        while "kube-apiserver v" not in first and time.monotonic() < deadline:
            assert server.poll() is None, f"lifecycle envtest exited: {first}"
            first = server.stdout.readline() if server.stdout else ""
        assert re.search(r"kube-apiserver v1\.3\d+\.\d+ on https://127\.0\.0\.1:\d+", first), first
        assert config.exists()
        operator = subprocess.Popen(
            [sys.executable, "-m", "lifecycle", "run", "--kubeconfig", str(config),
             "--backoff-base", "0.2", "--backoff-cap", "5"],
            stdout=subprocess.DEVNULL, stderr=(tmp_path / "run.log").open("w"))
        kubectl(config, "apply", "-f", str(EXAMPLES / "databaseinstance.yaml"))
        kubectl(config, "wait", "--for=condition=Ready", "--timeout=90s", "dbi/example-db",
                timeout=120)
        secret = json.loads(kubectl(config, "get", "secret", "example-db-connection",
                                    "-o", "json").stdout)
        assert {"endpoint", "port", "username", "password"} <= set(secret["data"])
        kubectl(config, "delete", "dbi/example-db", "--timeout=90s", timeout=120)
        gone = kubectl(config, "get", "dbi/example-db", check=False)
        assert "NotFound" in gone.stderr, gone
        log = (tmp_path / "run.log").read_text()
        assert "Traceback" not in log, log[-3000:]
    finally:
        if operator is not None:
            operator.send_signal(signal.SIGTERM)
            operator.wait(timeout=30)
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=30) == 0
    kubeconfig = yaml.safe_load(config.read_text())
    assert kubeconfig["clusters"][0]["cluster"]["certificate-authority-data"]
