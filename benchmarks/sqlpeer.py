"""The Go peer of the PostgreSQL benchmark: build it, install its CRDs, run it.

``benchmarks/sqlpeer/`` is a Go operator on crossplane-runtime's managed
reconciler (the engine Crossplane's provider-sql runs on) that manages
``postgresql.sql.crossplane.io/v1alpha1`` Role, Database and Grant objects
with the same fields, SQL and reconcile cycle as provider-sql; docs/peers.md
says why it is built here rather than taken from provider-sql's module, and
where it differs. The interface:

- :func:`build` -> the binary's path. Built with the machine's ``go``
  (niced) once per digest of the module's sources, into
  ``$XDG_CACHE_HOME/lifecycle/sqlpeer/<digest>/sqlpeer`` (else
  ``~/.cache/...``), under a file lock; :class:`SqlPeerError` with a one-line
  message when ``go`` is missing or the build fails.
- :func:`crds` -> the CRD documents (Role, Database, Grant, ProviderConfig,
  ProviderConfigUsage), to install before :func:`start`.
- :func:`start` ``(kubeconfig, *, poll, user_agent="sqlpeer", ...)`` -> a
  :class:`Peer` (``pid``, ``stop()``, ``log``): the binary as a plain process,
  no leader election, metrics off, returned once it printed ``ready`` (its
  informers synced).
- :func:`provider_config` ``(namespace, name, dsn_parts)`` -> the Secret
  (``endpoint``, ``port``, ``username``, ``password``) and the ProviderConfig
  ``name`` pointing at it. Managed objects name it in
  ``spec.providerConfigRef.name`` (the CRDs default it to ``default``).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from lifecycle.core.errors import LifecycleError

__all__ = ["MODULE", "Peer", "SqlPeerError", "build", "cache_root", "crds", "provider_config",
           "start"]

#: The Go module's folder.
MODULE = Path(__file__).resolve().parent / "sqlpeer"
#: The API group and version of the peer's kinds.
API_VERSION = "postgresql.sql.crossplane.io/v1alpha1"
#: How long a build may take, in seconds.
BUILD_TIMEOUT = 3600.0
GO_HINT = ("the sqlpeer benchmark peer is built from its Go module and needs go on PATH "
           "(apt-get install golang-go, or Go from your package manager)")


class SqlPeerError(LifecycleError):
    """The peer cannot be built or started; the message says why in one line."""


def cache_root() -> Path:
    """Where built binaries are kept: ``$XDG_CACHE_HOME/lifecycle/sqlpeer`` or ``~/.cache/...``."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "lifecycle" / "sqlpeer"


def _sources() -> list[Path]:
    """The files that decide what is built: go.mod, go.sum and every .go file."""
    files = [MODULE / "go.mod", MODULE / "go.sum", *MODULE.rglob("*.go")]
    return sorted(files, key=lambda p: p.relative_to(MODULE).as_posix())


def digest() -> str:
    """A digest of the module's sources (the cache key)."""
    h = hashlib.sha256()
    for path in _sources():
        h.update(path.relative_to(MODULE).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def build(log: Any = None) -> Path:
    """The peer's binary, built first when the cache has none for these sources.

    ``log(line)`` is told when a build starts and how long it took. Concurrent
    callers wait for one build through a file lock.
    """
    home = cache_root() / digest()
    binary = home / "sqlpeer"
    if binary.is_file():
        return binary
    go = shutil.which("go")
    if go is None:
        raise SqlPeerError(GO_HINT)
    home.parent.mkdir(parents=True, exist_ok=True)
    with open(home.parent / f"{home.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if binary.is_file():
            return binary
        if log:
            log(f"building the sqlpeer benchmark peer into {home} (once per source change)")
        started, cpu = time.monotonic(), _children_cpu()
        with tempfile.TemporaryDirectory(prefix="build-", dir=home.parent) as scratch:
            out = Path(scratch) / "sqlpeer"
            command = [go, "build", "-ldflags=-s -w", "-o", str(out), "."]
            if shutil.which("nice"):
                command = ["nice", "-n", "10", *command]
            env = {**os.environ, "CGO_ENABLED": "0", "GOFLAGS": "-mod=readonly"}
            try:
                done = subprocess.run(command, cwd=MODULE, env=env, capture_output=True, text=True,
                                      timeout=BUILD_TIMEOUT, check=False)
            except subprocess.TimeoutExpired:
                raise SqlPeerError(f"building the sqlpeer peer took over "
                                   f"{BUILD_TIMEOUT:.0f} s") from None
            if done.returncode != 0 or not out.is_file():
                tail = " | ".join(done.stderr.strip().splitlines()[-3:]) or "no output"
                raise SqlPeerError(f"go build of the sqlpeer peer failed: {tail}")
            home.mkdir(parents=True, exist_ok=True)
            os.replace(out, binary)
        if log:
            log(f"built the sqlpeer peer in {time.monotonic() - started:.0f} s wall, "
                f"{_children_cpu() - cpu:.0f} s CPU")
    return binary


def _children_cpu() -> float:
    """CPU seconds used so far by this process's finished children."""
    t = os.times()
    return t.children_user + t.children_system


def crds() -> list[dict[str, Any]]:
    """The peer's CustomResourceDefinition documents."""
    docs: list[dict[str, Any]] = []
    for path in sorted((MODULE / "crds").glob("*.yaml")):
        docs.extend(d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d)
    return docs


def provider_config(namespace: str, name: str,
                    dsn_parts: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The Secret ``namespace/name`` and the ProviderConfig ``name`` pointing the peer at a server.

    ``dsn_parts`` has ``host`` (or ``endpoint``), ``port``, ``user`` (or
    ``username``) and ``password``; optionally ``sslmode`` (``disable`` by
    default) and ``database`` (``postgres``).
    """
    try:
        host = dsn_parts.get("host", dsn_parts.get("endpoint"))
        user = dsn_parts.get("user", dsn_parts.get("username"))
        data = {"endpoint": str(host), "port": str(dsn_parts["port"]), "username": str(user),
                "password": str(dsn_parts["password"])}
    except KeyError as exc:
        raise SqlPeerError(f"provider_config needs {exc.args[0]} in dsn_parts") from None
    if host is None or user is None:
        raise SqlPeerError("provider_config needs host and user in dsn_parts")
    secret = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
              "metadata": {"name": name, "namespace": namespace}, "stringData": data}
    config = {"apiVersion": API_VERSION, "kind": "ProviderConfig", "metadata": {"name": name},
              "spec": {"defaultDatabase": str(dsn_parts.get("database", "postgres")),
                       "sslMode": str(dsn_parts.get("sslmode", "disable")),
                       "credentials": {"source": "PostgreSQLConnectionSecret",
                                       "connectionSecretRef": {"namespace": namespace,
                                                               "name": name}}}}
    return [secret, config]


class Peer:
    """A running peer process: ``pid``, ``log`` (its stderr), :meth:`stop`."""

    def __init__(self, process: subprocess.Popen[str], log: Path) -> None:
        self.process = process
        self.pid = process.pid
        self.log = log

    def alive(self) -> bool:
        """Whether the process is still running."""
        return self.process.poll() is None

    def stop(self, timeout: float = 15.0) -> None:
        """Stop it with SIGTERM (SIGKILL after ``timeout`` seconds) and wait."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def last_error(self) -> str:
        """The last line of its log (empty when none)."""
        with contextlib.suppress(OSError):
            lines = self.log.read_text(errors="replace").strip().splitlines()
            return lines[-1] if lines else ""
        return ""


def start(kubeconfig: Path, *, poll: float, user_agent: str = "sqlpeer", sync: float = 3600.0,
          max_reconcile_rate: int = 10, role_always_update: bool = False,
          creation_grace_period: float = 30.0, log: Path | None = None,
          timeout: float = 120.0) -> Peer:
    """Build (cached) and start the peer against the API server of ``kubeconfig``.

    ``poll`` is the drift-check interval in seconds; ``role_always_update``
    reproduces provider-sql's Role drift check that reports drift on every poll.
    ``creation_grace_period`` is how long after a create an object whose external
    resource is not found is requeued rather than trusted (the managed reconciler's
    default, 30 s: a drift repaired or a delete right after a create waits it out).
    Its stderr goes to ``log`` (a temporary file by default). Returns once the
    peer printed ``ready``; raises :class:`SqlPeerError` if it exits or stays
    silent for ``timeout`` seconds.
    """
    binary = build()
    if log is None:
        handle, name = tempfile.mkstemp(prefix="sqlpeer-", suffix=".log")
        os.close(handle)
        log = Path(name)
    command = [str(binary), f"--kubeconfig={kubeconfig}", f"--poll={poll:g}s",
               f"--sync={sync:g}s", f"--max-reconcile-rate={max_reconcile_rate}",
               f"--user-agent={user_agent}", "--metrics-bind-address=0",
               f"--creation-grace-period={creation_grace_period:g}s"]
    if role_always_update:
        command.append("--role-always-update")
    with open(log, "w") as err:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=err, text=True,
                                   stdin=subprocess.DEVNULL)
    peer = Peer(process, log)
    lines: list[str] = []

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.append(line.strip())

    threading.Thread(target=read, daemon=True).start()
    deadline = time.monotonic() + timeout
    while "ready" not in lines:
        if not peer.alive():
            raise SqlPeerError(f"the sqlpeer peer exited with {process.returncode}: "
                               f"{peer.last_error() or 'no output'}")
        if time.monotonic() > deadline:
            peer.stop()
            raise SqlPeerError(f"the sqlpeer peer was not ready within {timeout:.0f} s: "
                               f"{peer.last_error() or 'no output'}")
        time.sleep(0.05)
    return peer
