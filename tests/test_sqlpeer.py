"""The Go peer of the PostgreSQL benchmark (benchmarks/sqlpeer.py) against the real API
server and the suite's PostgreSQL server.

The peer is built with the machine's ``go`` on first use (cached by a digest of its
sources), its CRDs are installed into the session's real API server, and it runs as a
plain process polling every two seconds. A Role with a password from a Secret, a
Database it owns and a Grant on that database must become Ready and Synced and exist
in PostgreSQL as asked; drifts made by hand are repaired; a broken Grant and a Role
whose password Secret is missing say why in their Synced condition without leaking
the password; deleting the objects drops them from PostgreSQL.
"""

from __future__ import annotations

import base64
import contextlib
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from postgres_helpers import can_login, execute, query

from benchmarks import sqlpeer

GROUP, VERSION = "postgresql.sql.crossplane.io", "v1alpha1"
#: The peer's drift-check interval in seconds.
POLL = 2.0
#: How long any one wait may take, in seconds.
TIMEOUT = 90.0
#: The peer's creation grace period in seconds. The managed reconciler's 30 s default would
#: make the grant's repair and its deletion, each just after a create, wait it out (and the
#: exponential requeue backoff past it: 40 s each); the test shows they happen, not how soon.
GRACE = 1.0


def eventually(check: Callable[[], Any], what: str, timeout: float = TIMEOUT) -> Any:
    """``check()``'s first truthy answer, polled until ``timeout``; fails with ``what``."""
    deadline = time.monotonic() + timeout
    while True:
        answer = check()
        if answer:
            return answer
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.2)


class Peer:
    """The started peer with clients for the test: objects, Secrets, the server."""

    def __init__(self, cluster: Any, server: Any, process: sqlpeer.Peer, namespace: str) -> None:
        from kubernetes import client as k8s

        api = cluster.api_client()
        self.custom = k8s.CustomObjectsApi(api)
        self.core = k8s.CoreV1Api(api)
        self.server = server
        self.process = process
        self.namespace = namespace

    def create(self, plural: str, name: str, spec: dict[str, Any]) -> None:
        """Create a cluster-scoped object of the peer's group."""
        kind = {"roles": "Role", "databases": "Database", "grants": "Grant"}[plural]
        self.custom.create_cluster_custom_object(GROUP, VERSION, plural, {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": kind, "metadata": {"name": name},
            "spec": spec})

    def get(self, plural: str, name: str) -> dict[str, Any] | None:
        """The object, or None once it is gone."""
        from kubernetes.client import ApiException

        try:
            return self.custom.get_cluster_custom_object(GROUP, VERSION, plural, name)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def condition(self, plural: str, name: str, kind: str) -> dict[str, Any]:
        """The object's condition of type ``kind`` (empty when absent)."""
        obj = self.get(plural, name) or {}
        for c in obj.get("status", {}).get("conditions", []):
            if c["type"] == kind:
                return dict(c)
        return {}

    def ready(self, plural: str, name: str) -> bool:
        """Whether the object is Ready=True and Synced=True."""
        return (self.condition(plural, name, "Ready").get("status") == "True"
                and self.condition(plural, name, "Synced").get("status") == "True")

    def delete(self, plural: str, name: str) -> None:
        """Delete the object (nothing if it is gone)."""
        from kubernetes.client import ApiException

        with contextlib.suppress(ApiException):
            self.custom.delete_cluster_custom_object(GROUP, VERSION, plural, name)

    def secret(self, name: str) -> dict[str, str] | None:
        """The decoded data of Secret ``name`` in the test namespace, or None."""
        from kubernetes.client import ApiException

        try:
            found = self.core.read_namespaced_secret(name, self.namespace)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return {k: base64.b64decode(v).decode() for k, v in (found.data or {}).items()}

    def put_secret(self, name: str, data: dict[str, str]) -> None:
        """Create Secret ``name`` in the test namespace."""
        self.core.create_namespaced_secret(self.namespace, {
            "apiVersion": "v1", "kind": "Secret", "metadata": {"name": name},
            "stringData": data})


@pytest.fixture(scope="module")
def peer(real_cluster: Any, postgres_server: Any,
         tmp_path_factory: pytest.TempPathFactory) -> Iterator[Peer]:
    """The peer built, its CRDs installed, pointed at the session server and started."""
    from kubernetes import client as k8s

    from lifecycle.testing.envtest import install

    sqlpeer.build()
    api = real_cluster.api_client()
    install(api, sqlpeer.crds())
    namespace = f"sqlpeer-{uuid.uuid4().hex[:6]}"
    k8s.CoreV1Api(api).create_namespace({"metadata": {"name": namespace}})
    secret, config = sqlpeer.provider_config(namespace, "default", {
        "host": postgres_server.host, "port": postgres_server.port,
        "user": postgres_server.user, "password": postgres_server.password})
    k8s.CoreV1Api(api).create_namespaced_secret(namespace, secret)
    custom = k8s.CustomObjectsApi(api)
    try:
        custom.create_cluster_custom_object(GROUP, VERSION, "providerconfigs", config)
    except k8s.ApiException as exc:  # left by an earlier module of the session: repoint it
        if exc.status != 409:
            raise
        custom.patch_cluster_custom_object(GROUP, VERSION, "providerconfigs", "default",
                                           {"spec": config["spec"]})
    log = tmp_path_factory.mktemp("sqlpeer") / "sqlpeer.log"
    process = sqlpeer.start(real_cluster.kubeconfig, poll=POLL, user_agent="sqlpeer-test",
                            creation_grace_period=GRACE, log=log)
    try:
        yield Peer(real_cluster, postgres_server, process, namespace)
    finally:
        process.stop()


def _names() -> tuple[str, str, str]:
    tag = uuid.uuid4().hex[:6]
    return f"peer-role-{tag}", f"peer-db-{tag}", f"peer-grant-{tag}"


def _role_row(server: Any, role: str) -> tuple[Any, ...] | None:
    rows = query(server, "SELECT rolconnlimit, rolcanlogin, rolcreatedb FROM pg_roles "
                         "WHERE rolname = %s", role)
    return rows[0] if rows else None


def _db_row(server: Any, database: str) -> tuple[Any, ...] | None:
    rows = query(server, "SELECT pg_get_userbyid(datdba), datconnlimit FROM pg_database "
                         "WHERE datname = %s", database)
    return rows[0] if rows else None


def _granted(server: Any, database: str, role: str) -> list[str]:
    rows = query(server, "SELECT a.privilege_type FROM pg_database d, aclexplode(d.datacl) a "
                         "JOIN pg_roles r ON a.grantee = r.oid WHERE d.datname = %s "
                         "AND r.rolname = %s ORDER BY 1", database, role)
    return [r[0] for r in rows]


def test_role_database_grant_become_ready_repair_drift_and_go(peer: Peer) -> None:
    from psycopg import sql

    role, database, grant = _names()
    grantee = f"{role}-grantee"
    password = uuid.uuid4().hex
    peer.put_secret(f"{role}-password", {"password": password})
    peer.create("roles", role, {
        "forProvider": {"connectionLimit": 5, "privileges": {"login": True, "createDb": False},
                        "passwordSecretRef": {"namespace": peer.namespace,
                                              "name": f"{role}-password", "key": "password"}},
        "writeConnectionSecretToRef": {"namespace": peer.namespace, "name": f"{role}-conn"}})
    # A role without a password Secret gets a generated one.
    peer.create("roles", grantee, {"forProvider": {"privileges": {"login": True}}})
    peer.create("databases", database, {"forProvider": {"owner": role, "connectionLimit": 7}})
    peer.create("grants", grant, {"forProvider": {"role": grantee, "database": database,
                                                  "privileges": ["CONNECT", "TEMP"]}})
    for plural, name in (("roles", role), ("roles", grantee), ("databases", database),
                         ("grants", grant)):
        eventually(lambda p=plural, n=name: peer.ready(p, n), f"{plural}/{name} Ready and Synced")

    server = peer.server
    assert _role_row(server, role) == (5, True, False)
    assert can_login(server, role, password)
    assert _db_row(server, database) == (role, 7)
    assert _granted(server, database, grantee) == ["CONNECT", "TEMPORARY"]
    assert _role_row(server, grantee) == (-1, True, False)
    published = peer.secret(f"{role}-conn")
    assert published is not None
    assert published["username"] == role and published["password"] == password
    assert published["endpoint"] == server.host and published["port"] == str(server.port)
    # Late initialization filled the unset attributes from the server.
    spec = (peer.get("roles", role) or {})["spec"]["forProvider"]["privileges"]
    assert spec["login"] is True and spec["superUser"] is False

    # Drift made by hand is repaired at the next poll.
    execute(server, sql.SQL("ALTER ROLE {} CONNECTION LIMIT 1 CREATEDB").format(
        sql.Identifier(role)))
    execute(server, sql.SQL("ALTER DATABASE {} CONNECTION LIMIT 2").format(
        sql.Identifier(database)))
    execute(server, sql.SQL("REVOKE TEMPORARY ON DATABASE {} FROM {}").format(
        sql.Identifier(database), sql.Identifier(grantee)))
    eventually(lambda: _role_row(server, role) == (5, True, False), "the role's repair")
    eventually(lambda: _db_row(server, database) == (role, 7), "the database's repair")
    eventually(lambda: _granted(server, database, grantee) == ["CONNECT", "TEMPORARY"],
               "the grant's repair")

    # A changed field is applied.
    peer.custom.patch_cluster_custom_object(GROUP, VERSION, "roles", role,
                                            {"spec": {"forProvider": {"connectionLimit": 9}}})
    eventually(lambda: _role_row(server, role) == (9, True, False), "the changed limit")

    for plural, name in (("grants", grant), ("databases", database), ("roles", role),
                         ("roles", grantee)):
        peer.delete(plural, name)
        eventually(lambda p=plural, n=name: peer.get(p, n) is None, f"{plural}/{name} to go")
        if plural == "grants":
            assert _granted(server, database, grantee) == []
    assert _db_row(server, database) is None
    assert _role_row(server, role) is None and _role_row(server, grantee) is None
    assert password not in peer.process.log.read_text(errors="replace")


def test_broken_inputs_say_why_without_the_password(peer: Peer) -> None:
    role, _, grant = _names()
    password = uuid.uuid4().hex
    peer.put_secret(f"{role}-other", {"password": password})
    peer.create("roles", role, {"forProvider": {"privileges": {"login": True},
                                                "passwordSecretRef": {
        "namespace": peer.namespace, "name": f"{role}-missing", "key": "password"}}})
    peer.create("grants", grant, {"forProvider": {"role": role,
                                                  "privileges": ["CONNECT"]}})
    try:
        synced = eventually(lambda: peer.condition("roles", role, "Synced").get("reason")
                            == "ReconcileError" and peer.condition("roles", role, "Synced"),
                            "the Role's error")
        assert synced["status"] == "False"
        assert "cannot get password secret" in synced["message"]
        broken = eventually(lambda: peer.condition("grants", grant, "Synced").get("reason")
                            == "ReconcileError" and peer.condition("grants", grant, "Synced"),
                            "the Grant's error")
        assert "database not passed" in broken["message"]
        assert _role_row(peer.server, role) is None
        assert peer.condition("roles", role, "Ready").get("status") != "True"

        # The fix is picked up: the Role is created with the Secret's password.
        peer.custom.patch_cluster_custom_object(GROUP, VERSION, "roles", role, {"spec": {
            "forProvider": {"passwordSecretRef": {"name": f"{role}-other"}}}})
        eventually(lambda: peer.ready("roles", role), "the fixed Role")
        assert can_login(peer.server, role, password)
        assert password not in peer.process.log.read_text(errors="replace")
        events = peer.core.list_event_for_all_namespaces().items
        assert not [e for e in events if password in (e.message or "")]
    finally:
        for plural, name in (("grants", grant), ("roles", role)):
            peer.delete(plural, name)
    eventually(lambda: _role_row(peer.server, role) is None, "the Role's drop")


def test_crds_are_the_five_kinds_of_the_group() -> None:
    kinds = {d["spec"]["names"]["kind"]: d for d in sqlpeer.crds()}
    assert set(kinds) == {"Role", "Database", "Grant", "ProviderConfig", "ProviderConfigUsage"}
    assert {d["spec"]["group"] for d in kinds.values()} == {GROUP}
    role = kinds["Role"]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    params = role["properties"]["spec"]["properties"]["forProvider"]["properties"]
    assert {"privileges", "connectionLimit", "passwordSecretRef",
            "configurationParameters"} <= set(params)


def test_build_without_go_says_so(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(sqlpeer.SqlPeerError, match="needs go on PATH"):
        sqlpeer.build()


def test_provider_config_needs_every_part() -> None:
    secret, config = sqlpeer.provider_config("ns", "pg", {"host": "127.0.0.1", "port": 5432,
                                                          "user": "admin", "password": "pw"})
    assert secret["stringData"] == {"endpoint": "127.0.0.1", "port": "5432",
                                    "username": "admin", "password": "pw"}
    assert config["spec"]["credentials"]["connectionSecretRef"] == {"namespace": "ns",
                                                                    "name": "pg"}
    with pytest.raises(sqlpeer.SqlPeerError, match="password"):
        sqlpeer.provider_config("ns", "pg", {"host": "h", "port": 1, "user": "u"})
