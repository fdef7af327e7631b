"""The PostgreSQL kinds against a real server started by the session fixture.

Run just these with ``pytest -m postgres``. Each test builds its own harness
Environment (virtual clock) against the one server; PostgreSQL names are
unique per test, so tests do not see each other's objects.
"""

from __future__ import annotations

import base64
import io
import uuid
from typing import Any

import psycopg
import pytest
from postgres_fixtures import Admin, admin_environment
from postgres_helpers import POLL, act_as, can_login, execute, query, unique

from lifecycle.core.errors import Severity
from lifecycle.core.kind import EXTERNAL_NAME
from lifecycle.kube.errors import Invalid
from lifecycle.providers.postgres import scram
from lifecycle.providers.postgres.config import translate
from lifecycle.providers.postgres.scenarios import demo
from lifecycle.providers.postgres.scenarios.demo import DATABASE_NAME, ROLE_NAME, demo_environment
from lifecycle.providers.postgres.scenarios.testing import (
    PostgresServer,
    manifest,
    postgres_environment,
)
from lifecycle.testing import Environment

pytestmark = pytest.mark.postgres

def role_attributes(server: PostgresServer, role: str) -> tuple[Any, ...] | None:
    """(login, createdb, createrole, connection limit) of a role, or None."""
    rows = query(server, "SELECT rolcanlogin, rolcreatedb, rolcreaterole, rolconnlimit "
                         "FROM pg_roles WHERE rolname = %s", role)
    return rows[0] if rows else None


def database_exists(server: PostgresServer, name: str) -> bool:
    """Whether the server has a database of that name."""
    return bool(query(server, "SELECT 1 FROM pg_database WHERE datname = %s", name))


def external_name(env: Environment, kind: str, name: str) -> str:
    """The PostgreSQL name the engine claimed for an object."""
    return env.get(kind, name)["metadata"]["annotations"][EXTERNAL_NAME]


def texts(env: Environment) -> list[str]:
    """Every condition message and event message the engine wrote."""
    out = [e.get("message", "") for e in env.events()]
    for kind in env.kinds:
        for obj in env.api.list(env.kinds[kind].api_version, kind)[0]:
            out += [c.get("message", "") for c in (obj.get("status") or {}).get("conditions", [])]
    return out


def assert_no_secret(env: Environment, *secrets: str) -> None:
    """No condition or event mentions any of ``secrets``."""
    for text in texts(env):
        for secret in secrets:
            assert secret not in text


def role_database_grant(env: Environment, prefix: str, privileges: list[str]) -> tuple[str, str]:
    """Apply Role r, Database d and Grant g (role on database) and settle; their names."""
    role, db = unique(prefix), unique(prefix + "db")
    env.apply(manifest("Role", "r", external_name=role))
    env.apply(manifest("Database", "d", external_name=db))
    env.apply(manifest("Grant", "g", role=role, database=db, privileges=privileges))
    env.run_until_idle()
    return role, db


def set_secret_password(env: Environment, name: str, password: str) -> None:
    """Change the password in a connection Secret, as a user would."""
    secret = env.api.get("v1", "Secret", "default", name)
    secret["data"]["password"] = base64.b64encode(password.encode()).decode()
    env.api.replace(secret)


# ---------------------------------------------------------------- verifiers
@pytest.mark.parametrize("password", [
    "s3cret-ascii", "pässwörd", "ﬁx\u00a0me", "\u0661\u0662", "pass\u00adwörd", "שלום", "ﬁaשb",
])
def test_verifier_check_agrees_with_the_server(server: PostgresServer, password: str) -> None:
    role = unique("scram")
    execute(server, psycopg.sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
        psycopg.sql.Identifier(role), psycopg.sql.Literal(password)))
    try:
        stored = query(server, "SELECT rolpassword FROM pg_authid WHERE rolname = %s", role)[0][0]
        assert stored.startswith("SCRAM-SHA-256$")
        assert scram.matches(password, stored, role) is True
        assert scram.matches(password + "x", stored, role) is False
        # A verifier computed here lets the role log in with the password.
        execute(server, psycopg.sql.SQL("ALTER ROLE {} PASSWORD {}").format(
            psycopg.sql.Identifier(role), psycopg.sql.Literal(scram.scram_verifier(password))))
        assert can_login(server, role, password)
        with server.connect() as conn:
            conn.execute("SET password_encryption = 'md5'")
            conn.execute(psycopg.sql.SQL("ALTER ROLE {} PASSWORD {}").format(
                psycopg.sql.Identifier(role), psycopg.sql.Literal(password)))
        stored = query(server, "SELECT rolpassword FROM pg_authid WHERE rolname = %s", role)[0][0]
        assert stored.startswith("md5")
        assert scram.matches(password, stored, role) is True
        assert scram.matches("other", stored, role) is False
    finally:
        execute(server, psycopg.sql.SQL("DROP ROLE {}").format(psycopg.sql.Identifier(role)))


def test_unknown_verifier_formats_cannot_be_checked() -> None:
    assert scram.matches("pw", None, "r") is False
    assert scram.matches("pw", "SCRAM-SHA-256$bogus", "r") is None
    assert scram.matches("pw", "plaintext?", "r") is None


# ------------------------------------------------------------- error mapping
@pytest.mark.parametrize(("sqlstate", "reason", "terminal"), [
    ("08006", "ServerUnavailable", False),
    ("57P01", "ServerUnavailable", False),
    ("57014", "Timeout", False),
    ("53300", "ServerBusy", False),
    ("28P01", "InvalidCredentials", False),
    ("42704", "DependencyMissing", False),
    ("3D000", "DependencyMissing", False),
    ("42501", "InsufficientPrivilege", False),
    ("2BP01", "ObjectInUse", False),
    ("22023", "InvalidParameter", True),
    ("42622", "InvalidParameter", True),
    ("42601", "DatabaseError", False),
])
def test_server_errors_map_to_reasons_without_secrets(
    sqlstate: str, reason: str, terminal: bool
) -> None:
    error = psycopg.errors.lookup(sqlstate)("near 'hunter2-secret': bad")

    handled = translate(error, "altering role 'x'", ["hunter2-secret"])

    assert handled.reason == reason
    assert (handled.severity is Severity.TERMINAL) is terminal
    assert handled.message.startswith("altering role 'x'")
    assert "hunter2-secret" not in handled.message


# ------------------------------------------------------------ create, ready
def test_role_database_and_grant_become_ready_with_connection_secrets(
    env: Environment, server: PostgresServer, admin: Admin
) -> None:
    role, db = unique("app"), unique("appdb")
    env.apply(manifest("Grant", "g", role=role, database=db, privileges=["connect", "create"]))
    env.apply(manifest("Role", "app", external_name=role, createdb=True, connection_limit=5))
    env.apply(manifest("Database", "db", external_name=db))
    env.run_until_idle()

    for kind, name in (("Role", "app"), ("Database", "db"), ("Grant", "g")):
        assert env.state(kind, name) == "ready"
        assert env.condition(kind, name, "Ready").status == "True"
    assert role_attributes(server, role) == (True, True, False, 5)

    secret = env.secret("app-conn")
    assert {"host", "port", "user", "username", "password", "database", "uri"} <= set(secret)
    assert (secret["user"], secret["host"], secret["port"]) == (role, server.host,
                                                                 str(server.port))
    with psycopg.connect(secret["uri"]) as conn:
        assert conn.execute("SELECT current_user").fetchone() == (role,)

    # Server defaults were late-initialised into the spec.
    params = env.get("Database", "db")["spec"]["forProvider"]
    assert params == {"owner": admin.user, "encoding": "UTF8", "connectionLimit": -1,
                      "tablespace": "pg_default"}
    assert {"host", "port", "user", "database", "uri"} <= set(env.secret("db-conn"))
    assert env.secret("db-conn")["database"] == db

    # The Grant first waited for its role and database, then granted.
    assert ("unclaimed", "failed", "fail") in env.history("Grant", "g")
    assert query(server, "SELECT has_database_privilege(%s, %s, 'CREATE')", role, db) == [(True,)]
    assert env.get("Grant", "g")["status"]["atProvider"]["privileges"] == ["CONNECT", "CREATE"]
    assert_no_secret(env, secret["password"], server.password)


# --------------------------------------------------------------------- drift
DRIFT = [
    # (kind, parameters, statement made by hand, transition expected, check on the server)
    pytest.param("Role", {"connectionLimit": 3},
                 "ALTER ROLE {} NOLOGIN CREATEROLE CONNECTION LIMIT 1", ("updating", "update"),
                 lambda server, name: role_attributes(server, name) == (True, False, False, 3),
                 id="role-altered"),
    pytest.param("Database", {}, "DROP DATABASE {}", ("creating", "create"),
                 database_exists, id="database-dropped"),
    pytest.param("Database", {}, "ALTER DATABASE {} CONNECTION LIMIT 7", ("updating", "update"),
                 lambda server, name: query(server, "SELECT datconnlimit FROM pg_database "
                                            "WHERE datname = %s", name) == [(-1,)],
                 id="late-initialised-limit-changed"),
]


@pytest.mark.parametrize(("kind", "parameters", "statement", "repair", "check"), DRIFT)
def test_drift_made_by_hand_is_repaired_at_the_next_poll(
    env: Environment, server: PostgresServer, kind: str, parameters: dict[str, Any],
    statement: str, repair: tuple[str, str], check: Any,
) -> None:
    env.apply(manifest(kind, "x", **parameters))
    env.run_until_idle()
    name = external_name(env, kind, "x")
    execute(server, psycopg.sql.SQL(statement).format(psycopg.sql.Identifier(name)))

    env.advance(POLL)

    assert ("ready", *repair) in env.history(kind, "x")
    assert env.state(kind, "x") == "ready"
    assert check(server, name)


def test_revoked_privilege_is_granted_again(env: Environment, server: PostgresServer) -> None:
    role, db = role_database_grant(env, "gr", ["CREATE", "CONNECT"])
    execute(server, psycopg.sql.SQL("REVOKE CREATE ON DATABASE {} FROM {}").format(
        psycopg.sql.Identifier(db), psycopg.sql.Identifier(role)))

    env.advance(POLL)

    assert ("ready", "updating", "update") in env.history("Grant", "g")
    assert query(server, "SELECT has_database_privilege(%s, %s, 'CREATE')", role, db) == [(True,)]


def test_password_changed_in_the_secret_is_applied(
    env: Environment, server: PostgresServer
) -> None:
    env.apply(manifest("Role", "r"))
    env.run_until_idle()
    role = external_name(env, "Role", "r")
    old = env.secret("r-conn")["password"]
    assert can_login(server, role, old)
    new = "nëw pässwörd; ' \" \\ ☃"
    set_secret_password(env, "r-conn", new)

    env.advance(POLL)

    assert ("ready", "updating", "update") in env.history("Role", "r")
    assert can_login(server, role, new)
    assert not can_login(server, role, old)
    with psycopg.connect(env.secret("r-conn")["uri"]) as conn:
        assert conn.execute("SELECT current_user").fetchone() == (role,)
    assert_no_secret(env, old, new)


# ------------------------------------------------------------------ deletion
def test_delete_policy_drops_role_grant_and_database(
    env: Environment, server: PostgresServer
) -> None:
    role, db = role_database_grant(env, "del", ["ALL"])

    env.delete("Grant", "g")
    env.delete("Database", "d")
    env.delete("Role", "r")
    env.run_until_idle()

    for kind, name in (("Role", "r"), ("Database", "d"), ("Grant", "g")):
        assert not env.exists(kind, name)
    assert role_attributes(server, role) is None
    assert not database_exists(server, db)


def test_orphan_policy_leaves_the_database_behind(
    env: Environment, server: PostgresServer
) -> None:
    env.apply(manifest("Database", "d", deletion_policy="Orphan"))
    env.run_until_idle()
    db = external_name(env, "Database", "d")

    env.delete("Database", "d")
    env.run_until_idle()

    assert not env.exists("Database", "d")
    assert database_exists(server, db)
    execute(server, psycopg.sql.SQL("DROP DATABASE {}").format(psycopg.sql.Identifier(db)))


def test_role_still_holding_privileges_is_retried_until_they_go(
    env: Environment, server: PostgresServer
) -> None:
    role, _ = role_database_grant(env, "dep", ["CREATE"])

    env.delete("Role", "r")
    env.reconcile("Role", "r")
    failed = env.condition("Role", "r", "Failed")
    assert (env.state("Role", "r"), failed.reason) == ("failed", "ObjectInUse")
    assert "privileges for database" in failed.message

    env.delete("Grant", "g")
    env.delete("Database", "d")
    env.advance(120)
    assert not env.exists("Role", "r")
    assert role_attributes(server, role) is None


# ------------------------------------------------------------ server outages
def test_server_down_is_reported_in_synced_ready_held_and_recovers(
    env: Environment, server: PostgresServer
) -> None:
    env.apply(manifest("Role", "r"))
    env.run_until_idle()
    role = external_name(env, "Role", "r")

    server.stop()
    try:
        env.advance(POLL)
        # The role is still there as far as anyone knows: Synced says why it cannot be
        # checked, Ready keeps what was last observed (until the grace runs out).
        synced = env.condition("Role", "r", "Synced")
        assert env.state("Role", "r") == "ready"
        assert synced.status == "False" and "ServerUnavailable" in synced.message
        assert f"{server.host}:{server.port}" in synced.message
        assert "server unavailable" in synced.message
        assert env.condition("Role", "r", "Ready").status == "True"
        assert env.get("Role", "r")["status"]["failure"]["reason"] == "ServerUnavailable"
    finally:
        server.start()
    env.advance(120)

    assert env.state("Role", "r") == "ready"
    assert env.condition("Role", "r", "Ready").status == "True"
    assert role_attributes(server, role) is not None
    assert_no_secret(env, env.secret("r-conn")["password"], server.password)


def test_admin_without_superuser_manages_roles_and_checks_passwords_by_logging_in(
    server: PostgresServer,
) -> None:
    admin, password = unique("ops"), uuid.uuid4().hex
    execute(server, psycopg.sql.SQL("CREATE ROLE {} LOGIN CREATEROLE PASSWORD {}").format(
        psycopg.sql.Identifier(admin), psycopg.sql.Literal(password)))
    try:
        env = postgres_environment(server.host, server.port, admin, password, "disable")
        env.apply(manifest("Role", "r"))
        env.run_until_idle()
        role = external_name(env, "Role", "r")

        assert env.state("Role", "r") == "ready"
        at_provider = env.get("Role", "r")["status"]["atProvider"]
        assert (at_provider["passwordChecked"], at_provider["passwordCheck"]) == (True, "login")
        assert can_login(server, role, env.secret("r-conn")["password"])
        env.delete("Role", "r")
        env.run_until_idle()
        assert role_attributes(server, role) is None
    finally:
        execute(server, psycopg.sql.SQL("DROP ROLE {}").format(psycopg.sql.Identifier(admin)))


def test_createrole_admin_must_be_a_member_of_the_role_it_makes_an_owner(
    server: PostgresServer, postgres_admins: dict[str, Admin]
) -> None:
    admin = postgres_admins["createrole"]
    env = admin_environment(server, admin)
    owner, db = unique("own"), unique("owndb")
    env.apply(manifest("Role", "r", external_name=owner))
    env.apply(manifest("Database", "d", external_name=db, owner=owner))
    env.advance(10.0)

    # PostgreSQL 15 lets a CREATEROLE admin create the role but not hand it a database.
    failed = env.condition("Database", "d", "Failed")
    assert (env.state("Role", "r"), failed.reason) == ("ready", "InsufficientPrivilege")
    assert f"creating database {db!r}" in failed.message
    assert "must be member of role" in failed.message
    assert not database_exists(server, db)

    act_as(server, admin, owner)
    env.advance(120.0)
    assert env.state("Database", "d") == "ready"
    assert query(server, "SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = %s",
                 db) == [(owner,)]
    env.delete("Database", "d")
    env.delete("Role", "r")
    env.run_until_idle()
    assert role_attributes(server, owner) is None


def test_wrong_admin_password_is_a_credentials_failure(server: PostgresServer) -> None:
    wrong = "not-the-admin-password-" + uuid.uuid4().hex
    env = postgres_environment(server.host, server.port, server.user, wrong, "disable")
    env.apply(manifest("Role", "r"))
    env.reconcile("Role", "r")

    failed = env.condition("Role", "r", "Failed")
    assert (env.state("Role", "r"), failed.reason) == ("failed", "InvalidCredentials")
    assert_no_secret(env, wrong, server.password)


# ------------------------------------------------------------- invalid specs
def test_unknown_encoding_is_a_clear_terminal_condition(
    env: Environment, server: PostgresServer
) -> None:
    env.apply(manifest("Database", "d", encoding="KLINGON8"))
    steps = env.run_until_idle()

    failed = env.condition("Database", "d", "Failed")
    assert env.state("Database", "d") == "failed"
    assert failed.reason == "InvalidSpec"
    assert "unknown encoding 'KLINGON8'" in failed.message
    assert steps[-1].result.reason == "TerminalError"
    assert env.pending() == {}  # not retried until the spec changes

    env.apply(manifest("Database", "d", encoding="LATIN1", template="template0"))
    env.run_until_idle()
    db = external_name(env, "Database", "d")
    assert env.state("Database", "d") == "ready"
    assert query(server, "SELECT pg_encoding_to_char(encoding) FROM pg_database "
                         "WHERE datname = %s", db) == [("LATIN1",)]

    env.apply(manifest("Database", "d", encoding="UTF8", template="template0"))
    env.run_until_idle()
    failed = env.condition("Database", "d", "Failed")
    assert (failed.reason, env.state("Database", "d")) == ("ImmutableField", "failed")
    assert "cannot change" in failed.message
    # Dropped again: a LATIN1 database left on the shared server would stand in the way of
    # later tests whose role names are not ASCII (shared catalogs hold UTF-8 names).
    env.delete("Database", "d")
    env.run_until_idle()
    assert not database_exists(server, db)


@pytest.mark.parametrize(("kind", "parameters", "expected"), [
    ("Grant", {"role": "a", "database": "b", "privileges": ["DROP TABLE x; --"]},
     "unknown privilege 'DROP TABLE x; --'"),
    ("Grant", {"role": "a", "database": "b", "privileges": []}, "at least one privilege"),
    ("Role", {"connectionLimit": -5}, "'connectionLimit' must be -1"),
    ("Database", {"owner": ""}, "'owner' must be a non-empty string"),
])
def test_invalid_parameters_are_rejected_before_any_sql(
    env: Environment, kind: str, parameters: dict[str, Any], expected: str
) -> None:
    env.apply(manifest(kind, "bad", **parameters))
    env.run_until_idle()

    failed = env.condition(kind, "bad", "Failed")
    assert (env.state(kind, "bad"), failed.reason) == ("failed", "InvalidSpec")
    assert expected in failed.message


def test_a_wrongly_typed_parameter_is_refused_by_the_api_server(env: Environment) -> None:
    # The CRD declares login a boolean: like a real API server, the embedded
    # one refuses the object (422 naming the field) and nothing is stored.
    with pytest.raises(Invalid) as refused:
        env.apply(manifest("Role", "bad", login="yes"))
    assert [c["field"] for c in refused.value.causes] == ["spec.forProvider.login"]
    assert not env.exists("Role", "bad")


@pytest.mark.parametrize("kind", ["Role", "Database"])
def test_name_postgres_would_truncate_is_refused_before_the_finalizer(
    env: Environment, kind: str
) -> None:
    env.apply(manifest(kind, "long", external_name="r" * 64))
    env.run_until_idle()

    failed = env.condition(kind, "long", "Failed")
    assert failed.reason == "InvalidExternalName"
    assert "longer than 63 bytes" in failed.message
    assert not env.get(kind, "long")["metadata"].get("finalizers")
    env.delete(kind, "long")
    env.run_until_idle()
    assert not env.exists(kind, "long")


# ------------------------------------------------------------ hostile names
HOSTILE_ROLE = 'evil"; DROP ROLE lifecycle_admin; --'
HOSTILE_GRANTEE = "o'brien\\\" OR 1=1; ünï"
HOSTILE_DB = "db'); DROP DATABASE postgres; -- ünï 名前"


def test_hostile_names_are_quoted_everywhere(
    env: Environment, server: PostgresServer, admin: Admin
) -> None:
    assert len(HOSTILE_DB.encode()) <= 63
    env.apply(manifest("Role", "r", external_name=HOSTILE_ROLE, createdb=True))
    env.apply(manifest("Role", "grantee", external_name=HOSTILE_GRANTEE))
    env.run_until_idle()
    act_as(server, admin, HOSTILE_ROLE)
    env.apply(manifest("Database", "d", external_name=HOSTILE_DB, owner=HOSTILE_ROLE))
    env.apply(manifest("Grant", "g", role=HOSTILE_GRANTEE, database=HOSTILE_DB,
                       privileges=["CREATE", "TEMP"]))
    env.run_until_idle()

    for kind, name in (("Role", "r"), ("Role", "grantee"), ("Database", "d"), ("Grant", "g")):
        assert env.state(kind, name) == "ready"
    assert role_attributes(server, HOSTILE_ROLE) == (True, True, False, -1)
    assert query(server, "SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = %s",
                 HOSTILE_DB) == [(HOSTILE_ROLE,)]
    assert query(server, "SELECT has_database_privilege(%s, %s, 'CREATE')",
                 HOSTILE_GRANTEE, HOSTILE_DB) == [(True,)]
    assert role_attributes(server, server.user) is not None
    assert database_exists(server, "postgres")
    secret = env.secret("grantee-conn")
    with psycopg.connect(secret["uri"].replace("/postgres?", "/" + _quoted(HOSTILE_DB) + "?")) \
            as conn:
        assert conn.execute("SELECT current_user, current_database()").fetchone() == (
            HOSTILE_GRANTEE, HOSTILE_DB)

    # Drift on the hostile names is repaired too, then everything is deleted.
    execute(server, psycopg.sql.SQL("ALTER ROLE {} NOCREATEDB").format(
        psycopg.sql.Identifier(HOSTILE_ROLE)))
    execute(server, psycopg.sql.SQL("REVOKE CREATE ON DATABASE {} FROM {}").format(
        psycopg.sql.Identifier(HOSTILE_DB), psycopg.sql.Identifier(HOSTILE_GRANTEE)))
    env.advance(POLL)
    assert role_attributes(server, HOSTILE_ROLE) == (True, True, False, -1)
    assert query(server, "SELECT has_database_privilege(%s, %s, 'CREATE')",
                 HOSTILE_GRANTEE, HOSTILE_DB) == [(True,)]
    env.delete("Grant", "g")
    env.run_until_idle()
    assert query(server, "SELECT has_database_privilege(%s, %s, 'CREATE')",
                 HOSTILE_GRANTEE, HOSTILE_DB) == [(False,)]
    for kind, name in (("Database", "d"), ("Role", "r"), ("Role", "grantee")):
        env.delete(kind, name)
    env.run_until_idle()
    assert role_attributes(server, HOSTILE_ROLE) is None
    assert role_attributes(server, HOSTILE_GRANTEE) is None
    assert not database_exists(server, HOSTILE_DB)


def _quoted(text: str) -> str:
    from urllib.parse import quote

    return quote(text, safe="")


# ---------------------------------------------------------------------- demo
def test_demo_environment_reaches_ready_and_cleans_up(server: PostgresServer) -> None:
    env, manifests = demo_environment(server.host, server.port, server.user, server.password,
                                      "disable")
    for item in manifests:
        env.apply(item)
    env.run_until_idle()

    for item in manifests:
        assert env.state(item["kind"], item["metadata"]["name"]) == "ready"
    assert role_attributes(server, ROLE_NAME) == (True, False, False, 10)
    assert database_exists(server, DATABASE_NAME)

    for item in reversed(manifests):
        env.delete(item["kind"], item["metadata"]["name"])
    env.run_until_idle()
    assert role_attributes(server, ROLE_NAME) is None
    assert not database_exists(server, DATABASE_NAME)


def test_demo_run_reports_and_cleans_up(server: PostgresServer) -> None:
    out = io.StringIO()

    assert demo.run(out, server.host, server.port, server.user, server.password, "disable")

    text = out.getvalue()
    assert "secret demo-app-conn: database, host, password, port, uri, user, username" in text
    assert "deleted again: yes" in text
    assert server.password not in text
    assert role_attributes(server, ROLE_NAME) is None


def test_demo_run_against_a_stopped_server_says_why(server: PostgresServer) -> None:
    out = io.StringIO()
    server.stop()
    try:
        assert not demo.run(out, server.host, server.port, server.user, server.password,
                            "disable", keep=True)
    finally:
        server.start()
    assert "server unavailable" in out.getvalue()
    assert "postgres demo FAILED" in out.getvalue()
