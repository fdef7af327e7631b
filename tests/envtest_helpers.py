"""The real API server (the envtest tier) dressed as ``serve_helpers.Serve``.

Tests written against :class:`serve_helpers.Serve` (kubectl, ``get_json``,
the official client) run unchanged against a real kube-apiserver through
:class:`EnvtestServe`: the session's :class:`~lifecycle.testing.envtest.RealCluster`
serves the API and ``lifecycle run --kubeconfig`` runs the operator beside it
in a subprocess, as a user runs them. :func:`served` is the fixture body the
modules use to parametrise a fixture over ``serve`` (the embedded API) and
``envtest`` (the real one).
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from serve_helpers import Serve, eventually, free_port

#: The two servers every parametrised test runs on.
SERVERS = ("serve", "envtest")


class EnvtestServe(Serve):
    """``lifecycle run --kubeconfig`` beside the session's real API server.

    Quacks like :class:`Serve`: :meth:`kubectl`, :meth:`get_json` and
    :meth:`client` reach the real server with its admin kubeconfig; with
    ``operator`` the operator runs in a subprocess for ``kinds`` (default
    DatabaseInstance, as ``serve`` runs it), its log in ``serve.log``.
    """

    def __init__(self, directory: Path, real: Any, *, operator: bool = True,
                 kinds: Sequence[str] = ("DatabaseInstance",),
                 extra_args: Sequence[str] = ()) -> None:
        super().__init__(directory, operator=operator, extra_args=extra_args)
        self.real = real
        self.kinds = list(kinds)
        self.probe_port = free_port()
        self.port = real.port
        shutil.copy(real.kubeconfig, self.kubeconfig)

    @property
    def url(self) -> str:
        """The real API server's address."""
        return str(self.real.url)

    def command(self) -> list[str]:
        """``lifecycle run`` against the real server, with probes on a free port."""
        return [sys.executable, "-m", "lifecycle", "run", "--kubeconfig", str(self.kubeconfig),
                "--kinds", *self.kinds, "--probe-address", f"127.0.0.1:{self.probe_port}",
                "--backoff-base", "0.2", "--backoff-cap", "5", *self.extra_args]

    def start(self, timeout: float = 60.0) -> EnvtestServe:
        """Start the operator (when there is one) and wait until it reports ready."""
        if self.operator:
            super().start(timeout)
        return self

    def _answers(self) -> bool:
        try:
            url = f"http://127.0.0.1:{self.probe_port}/readyz"
            with urllib.request.urlopen(url, timeout=2) as response:
                return bool(response.status == 200)
        except (OSError, urllib.error.URLError):
            return False

    def log_tail(self, chars: int = 6000) -> str:
        """The end of the operator's log and of the API server's."""
        servers = "".join(f"--- {name} log (tail)\n{text}\n" for name, text in self.real.logs())
        return super().log_tail(chars).replace("lifecycle serve log", "lifecycle run log") + (
            "\n" + servers[-chars:])


@contextlib.contextmanager
def served(kind: str, real: Any, directory: Path, *, operator: bool = True,
           kinds: Sequence[str] = ("DatabaseInstance",)) -> Iterator[Serve]:
    """A started ``serve`` (``kind == "serve"``) or :class:`EnvtestServe`; stopped after.

    On the real server the CRDs of ``kinds`` and a ``default`` ProviderConfig are
    installed first, as ``serve`` installs them for itself.
    """
    from lifecycle import registry
    from lifecycle.cli.envtest import seed

    server: Serve
    if kind == "serve":
        server = Serve(directory, operator=operator)
    else:
        seed(real.api_client(), [registry.find(name).kind for name in kinds])
        server = EnvtestServe(directory, real, operator=operator, kinds=kinds)
    try:
        server.start()
        yield server
    finally:
        server.stop()


def cleanup(server: Serve) -> None:
    """Delete every claim, then every DatabaseInstance, while the operator still runs
    (a real server outlives the module; nothing must be left for the next operator with
    a finalizer and no external resource)."""
    for plural in ("databaseclaims", "databaseinstances"):
        _delete_every(server, plural)


def _delete_every(server: Serve, plural: str) -> None:
    found = server.kubectl("get", plural, "-A", "-o", "json", check=False)
    if not found.ok:
        return
    for item in found.json()["items"]:
        meta = item["metadata"]
        server.kubectl("delete", plural, "-n", meta["namespace"], meta["name"],
                       "--wait=false", check=False)

    def gone() -> bool:
        left = server.kubectl("get", plural, "-A", "-o", "name", check=False)
        return left.ok and not left.stdout.strip()

    try:
        eventually(gone, timeout=60, what=f"every {plural} deleted")
    except AssertionError:
        # Strip what the operator could not finish, so nothing blocks later modules.
        for item in server.kubectl("get", plural, "-A", "-o", "json").json()["items"]:
            meta = item["metadata"]
            server.kubectl("patch", plural, "-n", meta["namespace"], meta["name"],
                           "--type=merge", "-p", '{"metadata":{"finalizers":null}}',
                           check=False)
        raise


def unique(prefix: str = "t") -> str:
    """A fresh DNS-1123 name."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def kubectl_kubeconfig(request: Any, tmp_path: Path) -> Iterator[Path]:
    """A kubeconfig for the server ``request.param`` names: ``embedded`` (a fresh embedded
    API over HTTP, closed afterwards) or ``envtest`` (the session's real API server).

    For a module fixture parametrised over both servers: ``yield from`` it.
    """
    import yaml

    from lifecycle.sim.apiserver import EmbeddedAPI
    from lifecycle.sim.http import APIServerHTTP

    if shutil.which("kubectl") is None:  # a missing client is a failure to fix, not a skip
        pytest.fail("kubectl is not on PATH (install the kubectl package)")
    if request.param == "envtest":
        yield Path(request.getfixturevalue("real_cluster").kubeconfig)
        return
    api = EmbeddedAPI()
    with APIServerHTTP(api) as server:
        config = tmp_path / "kubeconfig"
        config.write_text(yaml.safe_dump(server.kubeconfig()))
        yield config
    api.close()


def kubectl(config: Path, *args: str,
            stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """``kubectl --kubeconfig CONFIG ARGS`` with its output captured (60 s at most)."""
    return subprocess.run(["kubectl", "--kubeconfig", str(config), *args], input=stdin,
                          capture_output=True, text=True, timeout=60)


def wait_established(config: Path, crd: str, timeout: float = 60.0) -> None:
    """Wait until CustomResourceDefinition ``crd`` reports ``Established`` True.

    ``kubectl wait --for condition=established`` fails at once, instead of waiting, when
    the real API server has not written the CRD's first status yet ("accessor error:
    <nil>"), so the condition is read until it holds.
    """
    path = '{.status.conditions[?(@.type=="Established")].status}'

    def established() -> bool:
        got = kubectl(config, "get", f"crd/{crd}", "-o", f"jsonpath={path}")
        return got.returncode == 0 and got.stdout.strip() == "True"

    eventually(established, timeout=timeout, what=f"CRD {crd} to be established")
