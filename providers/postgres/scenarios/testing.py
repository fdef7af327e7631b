"""A throwaway PostgreSQL server for tests and demos, and harness helpers for the kinds.

:class:`PostgresServer` runs Debian's (or any) PostgreSQL binaries with its
own data directory, listening only on 127.0.0.1 on a free port, with no
Unix socket. Run as root, the server runs as an unprivileged system user
(``postgres`` unless ``LIFECYCLE_PG_USER`` names another), because
PostgreSQL refuses to run as root. ``LIFECYCLE_PG_BINDIR`` picks the
directory holding ``initdb`` and ``pg_ctl``; otherwise they are found on
``PATH`` or under ``/usr/lib/postgresql/*/bin`` (newest first)::

    with PostgresServer() as server:
        env = postgres_environment(server.host, server.port, server.user, server.password)
        env.apply(manifest("Role", "app"))
        env.run_until_idle()

The session-scoped ``postgres_server`` fixture yields one started server.
"""

from __future__ import annotations

import glob
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import Any

import psycopg
import pytest

from lifecycle.core.kind import EXTERNAL_NAME, PROVIDER_CONFIG_API, PROVIDER_CONFIG_KIND
from lifecycle.machines.postgres import GROUP, kinds
from lifecycle.sim.apiserver import EmbeddedAPI
from lifecycle.testing import Environment, VirtualClock

__all__ = [
    "ADMIN_USER", "PERMISSIVE", "PostgresServer", "PostgresUnavailable", "find_bindir", "free_port",
    "manifest", "postgres_environment", "postgres_server", "set_policy", "started_server",
]

#: The admin role the throwaway server is initialised with.
ADMIN_USER = "lifecycle_admin"
_SETTINGS = """
listen_addresses = '127.0.0.1'
unix_socket_directories = ''
fsync = off
synchronous_commit = off
full_page_writes = off
max_connections = 50
"""


class PostgresUnavailable(RuntimeError):
    """The PostgreSQL binaries, or a user to run them as, could not be found or started."""


def find_bindir() -> Path:
    """The directory holding ``initdb`` and ``pg_ctl``; raise :class:`PostgresUnavailable`."""
    chosen = os.environ.get("LIFECYCLE_PG_BINDIR")
    candidates = [Path(chosen)] if chosen else []
    on_path = shutil.which("initdb")
    if on_path:
        candidates.append(Path(os.path.realpath(on_path)).parent)
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin"),
                      key=lambda p: [int(x) for x in Path(p).parent.name.split(".")
                                     if x.isdigit()], reverse=True)
    candidates += [Path(p) for p in versions]
    for directory in candidates:
        if (directory / "initdb").is_file() and (directory / "pg_ctl").is_file():
            return directory
    raise PostgresUnavailable(
        "PostgreSQL server binaries (initdb, pg_ctl) not found; install Debian's "
        "'postgresql' package or set LIFECYCLE_PG_BINDIR, or deselect these tests "
        "with -m 'not postgres'")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PostgresServer:
    """A PostgreSQL server in a temporary data directory on 127.0.0.1.

    ``start`` initialises the directory on first use; ``stop`` and ``start``
    again keep the same port and data, so clients pointed at it recover.
    ``close`` stops the server and removes the directory.
    """

    host = "127.0.0.1"

    def __init__(self, bindir: Path | None = None, user: str = ADMIN_USER) -> None:
        self.bindir = bindir or find_bindir()
        self.user = user
        self.password = secrets.token_urlsafe(18)
        self.port = 0
        self.base: Path | None = None
        self._runas = _unprivileged_user()

    def __repr__(self) -> str:
        return f"PostgresServer({self.host}:{self.port}, running={self.running})"

    def __enter__(self) -> PostgresServer:
        self.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    @property
    def data(self) -> Path:
        """The data directory."""
        if self.base is None:
            raise PostgresUnavailable("the server was never initialised")
        return self.base / "data"

    @property
    def running(self) -> bool:
        """Whether the postmaster is up."""
        if self.base is None:
            return False
        return self._pg_ctl("status", check=False).returncode == 0

    def start(self) -> None:
        """Initialise (first time) and start the server; wait until it accepts connections."""
        base = self.base if self.base is not None else self._initialise()
        if self.running:
            return
        attempts = 1 if self.port else 3
        for _ in range(attempts):
            self.port = self.port or free_port()
            result = self._pg_ctl("-l", str(base / "server.log"), "-o", f"-p {self.port}",
                                  "-t", "30", "start", check=False)
            if result.returncode == 0:
                return
            if attempts > 1:
                self.port = 0  # the port was taken in the meantime; pick another
        raise PostgresUnavailable(f"PostgreSQL did not start: {self._log_tail()}")

    def stop(self) -> None:
        """Stop the server (fast shutdown: sessions are disconnected)."""
        if self.running:
            self._pg_ctl("-m", "fast", "-t", "30", "stop")

    def close(self) -> None:
        """Stop the server and delete its data directory. The stop is immediate: no shutdown
        checkpoint writes back what is deleted next (on a disk busy with other work that
        write-back can take many seconds)."""
        if self.base is None:
            return
        if self.running:
            self._pg_ctl("-m", "immediate", "-t", "30", "stop")
        shutil.rmtree(self.base, ignore_errors=True)
        self.base = None

    def connect(self, user: str | None = None, password: str | None = None,
                dbname: str = "postgres") -> psycopg.Connection[Any]:
        """An autocommit connection, as the admin unless ``user`` and ``password`` are given."""
        return psycopg.connect(host=self.host, port=self.port, user=user or self.user,
                               password=self.password if user is None else password,
                               dbname=dbname, sslmode="disable", connect_timeout=5,
                               autocommit=True)

    def tablespace_directory(self, name: str) -> Path:
        """A new empty directory, outside the data directory and owned by the user the
        server runs as, for ``CREATE TABLESPACE ... LOCATION``; removed with the server."""
        if self.base is None:
            raise PostgresUnavailable("the server was never initialised")
        path = self.base / "tablespaces" / name
        path.mkdir(parents=True)
        if self._runas is not None:
            for directory in (path.parent, path):
                os.chown(directory, self._runas.pw_uid, self._runas.pw_gid)
        return path

    def _initialise(self) -> Path:
        """Make the data directory in a new temporary base directory; the base."""
        base = Path(tempfile.mkdtemp(prefix="lifecycle-pg-"))
        self.base = base
        pwfile = base / "pwfile"
        pwfile.write_text(self.password + "\n")
        if self._runas is not None:
            for path in (base, pwfile):
                os.chown(path, self._runas.pw_uid, self._runas.pw_gid)
        result = self._run([str(self.bindir / "initdb"), "-D", str(base / "data"),
                            "-U", self.user, f"--pwfile={pwfile}", "-A", "scram-sha-256",
                            "-E", "UTF8", "--locale=C", "-N"])
        pwfile.unlink()
        if result.returncode != 0:
            raise PostgresUnavailable(f"initdb failed: {_tail(result.stderr)}")
        with open(base / "data" / "postgresql.conf", "a") as conf:
            conf.write(_SETTINGS)
        return base

    def _pg_ctl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        result = self._run([str(self.bindir / "pg_ctl"), "-D", str(self.data), "-w", *args])
        if check and result.returncode != 0:
            raise PostgresUnavailable(f"pg_ctl {args[-1]} failed: {_tail(result.stderr)}")
        return result

    def _run(self, command: list[str]) -> subprocess.CompletedProcess[str]:
        options: dict[str, Any] = {}
        if self._runas is not None:
            options = {"user": self._runas.pw_uid, "group": self._runas.pw_gid,
                       "extra_groups": [], "env": {**os.environ, "HOME": self._runas.pw_dir}}
        return subprocess.run(command, capture_output=True, text=True, cwd=self.base,
                              timeout=60, check=False, **options)

    def _log_tail(self) -> str:
        log = self.base / "server.log" if self.base else None
        return _tail(log.read_text()) if log and log.exists() else "no server log"


def _tail(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return " | ".join(lines[-3:]) or "no output"


def _unprivileged_user() -> pwd.struct_passwd | None:
    """The user the server runs as when we are root (None: run as ourselves)."""
    if os.geteuid() != 0:
        return None
    name = os.environ.get("LIFECYCLE_PG_USER", "postgres")
    try:
        return pwd.getpwnam(name)
    except KeyError:
        raise PostgresUnavailable(
            f"running as root and there is no user {name!r} to run PostgreSQL as; create one "
            "(Debian's postgresql package does) or set LIFECYCLE_PG_USER") from None


def started_server() -> Iterator[PostgresServer]:
    """Start a :class:`PostgresServer`, yield it and close it: the body of a session fixture.

    A server that cannot start fails the test (with the reason) instead of erroring.
    """
    try:
        server = PostgresServer()
        server.start()
    except PostgresUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        yield server
    finally:
        server.close()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """One started throwaway server for the whole test session."""
    yield from started_server()


def postgres_environment(host: str, port: int, user: str, password: str,
                         sslmode: str = "prefer", *, database: str = "postgres",
                         seed: int | None = None, **options: Any) -> Environment:
    """A harness Environment with Role, Database and Grant and a ProviderConfig ``default``.

    The ProviderConfig's spec points at ``host:port``; its Secret holds
    ``username`` and ``password``. The embedded API's uids (and so the
    default PostgreSQL names ``<name>-<uid8>``) come from ``seed``, random
    unless given, because unlike a simulated cloud the server outlives the
    Environment. ``options`` go to :class:`Environment`.
    """
    clock = VirtualClock()
    api = EmbeddedAPI(clock=clock.now, seed=secrets.randbits(64) if seed is None else seed)
    env = Environment(kinds(), api=api, clock=clock, **options)
    env.provider_config(credentials={"username": user, "password": password},
                        spec={"host": host, "port": port, "sslmode": sslmode,
                              "database": database})
    return env


def set_policy(env: Environment, policy: dict[str, Any] | None,
               config: str = "default") -> None:
    """Give the ProviderConfig ``config`` of ``env`` the tenancy policy ``policy``
    (``spec.policy``; None removes it, leaving the safe defaults)."""
    found = env.api.get(PROVIDER_CONFIG_API, PROVIDER_CONFIG_KIND, None, config)
    spec = {k: v for k, v in found["spec"].items() if k != "policy"}
    if policy is not None:
        spec["policy"] = policy
    env.api.replace({**found, "spec": spec})


#: A policy that lets the objects of every namespace name anything but the server's own
#: databases, the admin and superusers: for tests of what the kinds do rather than of
#: what a tenant may ask.
PERMISSIVE = {"crossNamespace": True, "allowedMemberships": [],
              "allowedRoleAttributes": ["createdb", "createrole", "replication", "bypassRls"],
              "allowedSettingContexts": ["user", "superuser"], "allowedExtensions": ["*"]}


def manifest(kind: str, name: str, *, namespace: str = "default",
             external_name: str | None = None, deletion_policy: str | None = None,
             **parameters: Any) -> dict[str, Any]:
    """A Role, Database or Grant manifest; ``parameters`` become ``spec.forProvider``.

    A parameter may be given by its Python name (``connection_limit``) or its
    spec key (``connectionLimit``); it is written under its spec key.

    Roles and databases write their connection Secret to ``<name>-conn``;
    ``external_name`` sets the PostgreSQL name (default ``<name>-<uid8>``).
    """
    known = {k.kind: k for k, _ in kinds()}
    spec: dict[str, Any] = {
        "forProvider": known[kind].to_spec(parameters) if kind in known else parameters}
    if kind != "Grant":
        spec["writeConnectionSecretToRef"] = {"name": f"{name}-conn"}
    if deletion_policy is not None:
        spec["deletionPolicy"] = deletion_policy
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if external_name is not None:
        metadata["annotations"] = {EXTERNAL_NAME: external_name}
    return {"apiVersion": f"{GROUP}/v1alpha1", "kind": kind, "metadata": metadata, "spec": spec}
