"""Role fields beyond the basics, role membership and the password check by login, against
the real server of the session fixture (``pytest -m postgres``).

Each field is set, changed by hand on the server, and repaired at the next poll.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from postgres_fixtures import Admin
from postgres_helpers import POLL, act_as, can_login, execute, query, unique
from psycopg import sql

from lifecycle.core.kind import EXTERNAL_NAME
from lifecycle.kube.errors import Invalid
from lifecycle.providers.postgres import login
from lifecycle.providers.postgres.scenarios.testing import (
    PERMISSIVE,
    PROVIDER_CONFIG_API,
    PROVIDER_CONFIG_KIND,
    PostgresServer,
    manifest,
    postgres_environment,
    set_policy,
)
from lifecycle.testing import Environment

pytestmark = pytest.mark.postgres


@pytest.fixture(autouse=True)
def _permissive_policy(request: pytest.FixtureRequest) -> None:
    """These tests are about what the kinds do (parity with provider-sql), on roles and
    databases made by hand and with attributes the safe defaults refuse: their provider
    config allows it explicitly. tests/test_postgres_policy.py tests the defaults."""
    for name in ("env", "superuser_env"):
        if name in request.fixturenames:
            set_policy(request.getfixturevalue(name),
                       {**PERMISSIVE, "allowedSettings": ["lifecycle_test.note"]})

#: A role name no identifier quoting mistake survives.
HOSTILE_GROUP = 'grp"; DROP ROLE postgres; -- ünï'


def attributes(server: PostgresServer, role: str) -> tuple[Any, ...] | None:
    """(inherit, replication, bypassrls, superuser, valid until as text) of a role, or None."""
    rows = query(server, "SELECT rolinherit, rolreplication, rolbypassrls, rolsuper, "
                         "to_char(rolvaliduntil AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI') "
                         "FROM pg_roles WHERE rolname = %s", role)
    return rows[0] if rows else None


def groups(server: PostgresServer, role: str) -> set[str]:
    """The roles ``role`` is a direct member of."""
    return {r[0] for r in query(
        server, "SELECT g.rolname FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.roleid "
                "JOIN pg_roles u ON u.oid = m.member WHERE u.rolname = %s", role)}


def name_of(env: Environment, name: str) -> str:
    """The PostgreSQL name of Role ``name``."""
    return env.get("Role", name)["metadata"]["annotations"][EXTERNAL_NAME]


def set_provider_config(env: Environment, **spec: Any) -> None:
    """Merge ``spec`` into the ProviderConfig ``default``."""
    config = env.api.get(PROVIDER_CONFIG_API, PROVIDER_CONFIG_KIND, None, "default")
    config["spec"] = {**config["spec"], **spec}
    env.api.replace(config)


def create_roles(server: PostgresServer, *names: str) -> None:
    """Create plain NOLOGIN roles by hand."""
    for name in names:
        execute(server, sql.SQL("CREATE ROLE {}").format(sql.Identifier(name)))


def drop_roles(server: PostgresServer, *names: str) -> None:
    """Drop roles made by hand (missing ones are fine)."""
    for name in names:
        execute(server, sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(name)))


# ------------------------------------------------------------ role attributes
def test_superuser_admin_sets_role_attributes_and_repairs_drift(
    superuser_env: Environment, server: PostgresServer
) -> None:
    # REPLICATION and BYPASSRLS: only a superuser may set them (PostgreSQL 15).
    env = superuser_env
    env.apply(manifest("Role", "r", inherit=False, replication=True, bypassRls=True,
                       validUntil="2031-05-06T07:08:00Z"))
    env.run_until_idle()
    role = name_of(env, "r")

    assert env.state("Role", "r") == "ready"
    wanted = (False, True, True, False, "2031-05-06 07:08")
    assert attributes(server, role) == wanted
    at_provider = env.get("Role", "r")["status"]["atProvider"]
    assert (at_provider["inherit"], at_provider["replication"], at_provider["bypassRls"],
            at_provider["superUser"]) == (False, True, True, False)
    assert at_provider["validUntil"].startswith("2031-05-06")

    execute(server, sql.SQL("ALTER ROLE {} INHERIT NOREPLICATION NOBYPASSRLS "
                            "VALID UNTIL '2040-01-01'").format(sql.Identifier(role)))
    assert attributes(server, role) != wanted
    env.advance(POLL)

    assert ("ready", "updating", "update") in env.history("Role", "r")
    assert attributes(server, role) == wanted


def test_valid_until_removed_from_the_spec_means_no_expiry(
    env: Environment, server: PostgresServer
) -> None:
    env.apply(manifest("Role", "r", validUntil="2031-01-01 00:00+00"))
    env.run_until_idle()
    role = name_of(env, "r")
    assert attributes(server, role)[4] == "2031-01-01 00:00"  # type: ignore[index]

    env.apply(manifest("Role", "r", validUntil=None))
    env.run_until_idle()
    assert query(server, "SELECT rolvaliduntil = 'infinity' FROM pg_roles WHERE rolname = %s",
                 role) == [(True,)]
    # An expiry set by hand on a role whose spec has none is drift too.
    execute(server, sql.SQL("ALTER ROLE {} VALID UNTIL '2030-01-01'").format(
        sql.Identifier(role)))
    env.advance(POLL)
    assert query(server, "SELECT rolvaliduntil = 'infinity' FROM pg_roles WHERE rolname = %s",
                 role) == [(True,)]


def test_an_unreadable_valid_until_is_a_terminal_condition(env: Environment) -> None:
    env.apply(manifest("Role", "r", validUntil="next tuesday-ish"))
    env.run_until_idle()

    failed = env.condition("Role", "r", "Failed")
    assert env.state("Role", "r") == "failed"
    assert failed.reason == "InvalidSpec"  # read when the spec is parsed: no finalizer
    assert "next tuesday-ish" in failed.message
    assert not env.get("Role", "r")["metadata"].get("finalizers")


# ------------------------------------------------------- configuration parameters
def role_settings(server: PostgresServer, role: str) -> dict[str, str]:
    """The role's own settings for every database (``pg_db_role_setting``, database 0)."""
    rows = query(server, "SELECT unnest(s.setconfig) FROM pg_db_role_setting s JOIN pg_roles r "
                         "ON r.oid = s.setrole WHERE s.setdatabase = 0 AND r.rolname = %s", role)
    return dict(r[0].split("=", 1) for r in rows)


#: A setting's value that is hostile SQL, stored and compared verbatim.
HOSTILE_VALUE = "x'; ALTER ROLE lifecycle_admin NOSUPERUSER; -- \"ünï\""
#: The same in printable ASCII, as application_name keeps it.
HOSTILE_ASCII = "x'; ALTER ROLE lifecycle_admin NOSUPERUSER; -- \"\\"


def test_configuration_parameters_are_set_repaired_and_reset(
    env: Environment, server: PostgresServer, admin: Admin
) -> None:
    settings = [{"name": "statement_timeout", "value": "5s"},
                {"name": "search_path", "value": '"$user", public, "App Schema"'},
                {"name": "application_name", "value": HOSTILE_ASCII}]
    if admin.superuser:  # PostgreSQL 15 lets only a superuser set a custom setting
        settings.append({"name": "lifecycle_test.note", "value": HOSTILE_VALUE})
    env.apply(manifest("Role", "r", configurationParameters=settings))
    env.run_until_idle()
    role = name_of(env, "r")
    wanted = {s["name"]: s["value"] for s in settings}

    assert env.state("Role", "r") == "ready"
    assert role_settings(server, role) == wanted
    at_provider = env.get("Role", "r")["status"]["atProvider"]["configurationParameters"]
    assert {e["name"]: e["value"] for e in at_provider} == wanted
    with server.connect(role, env.secret("r-conn")["password"]) as conn:
        assert conn.execute("SHOW statement_timeout").fetchone() == ("5s",)
        assert conn.execute("SHOW application_name").fetchone() == (HOSTILE_ASCII,)
        if admin.superuser:
            assert conn.execute("SELECT current_setting('lifecycle_test.note')").fetchone() == (
                HOSTILE_VALUE,)

    # By hand: a value changed, one reset, one added. All repaired at the next poll.
    execute(server, sql.SQL("ALTER ROLE {} SET statement_timeout = '1min'").format(
        sql.Identifier(role)))
    execute(server, sql.SQL("ALTER ROLE {} RESET search_path").format(sql.Identifier(role)))
    execute(server, sql.SQL("ALTER ROLE {} SET work_mem = '8MB'").format(sql.Identifier(role)))
    env.advance(POLL)
    assert ("ready", "updating", "update") in env.history("Role", "r")
    assert role_settings(server, role) == wanted
    env.advance(POLL)
    assert env.state("Role", "r") == "ready"  # no update loop: what was written reads back

    # An entry removed from the spec is reset; an empty list resets everything.
    env.apply(manifest("Role", "r", configurationParameters=settings[:1]))
    env.run_until_idle()
    assert role_settings(server, role) == {"statement_timeout": "5s"}
    env.apply(manifest("Role", "r", configurationParameters=[]))
    env.run_until_idle()
    assert role_settings(server, role) == {}
    # Left out of the spec: settings made by hand are left alone.
    env.apply(manifest("Role", "r"))
    env.run_until_idle()
    execute(server, sql.SQL("ALTER ROLE {} SET work_mem = '8MB'").format(sql.Identifier(role)))
    env.advance(POLL)
    assert role_settings(server, role) == {"work_mem": "8MB"}
    env.delete("Role", "r")
    env.run_until_idle()


@pytest.mark.parametrize(("settings", "reason", "expected"), [
    ([{"name": "work_mem = '1GB'; DROP ROLE lifecycle_admin; --", "value": "1"}],
     "InvalidSpec", "is not a configuration parameter name"),
    ([{"name": 'search_path"', "value": "public"}], "InvalidSpec",
     "is not a configuration parameter name"),
    ([{"name": "no_such_parameter", "value": "1"}], "InvalidSpec",
     "'no_such_parameter' is not a configuration parameter of this server"),
    ([{"name": "work_mem", "value": "1MB"}, {"name": "WORK_MEM", "value": "2MB"}],
     "InvalidSpec", "names the same parameter twice"),
    ([{"name": "1work_mem", "value": "1MB"}], "InvalidSpec",
     "is not a configuration parameter name"),
    ([{"name": "work_mem", "value": "lots"}], "InvalidParameter", "invalid value for parameter"),
])
def test_invalid_configuration_parameters_are_a_clear_condition(
    env: Environment, server: PostgresServer, settings: list[dict[str, str]], reason: str,
    expected: str
) -> None:
    role = unique("bad")
    env.apply(manifest("Role", "bad", external_name=role, configurationParameters=settings))
    env.run_until_idle()

    failed = env.condition("Role", "bad", "Failed")
    assert env.state("Role", "bad") == "failed"
    assert failed.reason == reason
    assert expected in failed.message
    assert env.pending() == {}  # terminal: not retried until the spec changes
    assert attributes(server, role) is None  # nothing was created


# ---------------------------------------------------------------- superuser
def test_superuser_admin_refuses_superuser_roles_unless_the_provider_config_allows_them(
    superuser_env: Environment, server: PostgresServer
) -> None:
    env = superuser_env
    role = unique("su")
    env.apply(manifest("Role", "r", external_name=role, superUser=True))
    env.run_until_idle()

    failed = env.condition("Role", "r", "Failed")
    assert (env.state("Role", "r"), failed.reason) == ("failed", "PolicyDenied")
    assert "allowSuperuser" in failed.message
    assert attributes(server, role) is None

    set_provider_config(env, allowSuperuser=True)
    env.apply(manifest("Role", "r", external_name=role, superUser=True, login=False))
    env.run_until_idle()
    assert env.state("Role", "r") == "ready"
    assert attributes(server, role)[3] is True  # type: ignore[index]

    execute(server, sql.SQL("ALTER ROLE {} NOSUPERUSER").format(sql.Identifier(role)))
    env.advance(POLL)
    assert attributes(server, role)[3] is True  # type: ignore[index]

    env.delete("Role", "r")
    env.run_until_idle()
    assert attributes(server, role) is None


def _read_config(**spec: Any) -> Any:
    """The provider's reading of a config stored with ``spec`` (before a schema refused it)."""
    from lifecycle.core.contract import ProviderConfig
    from lifecycle.providers.postgres.config import ServerConfig

    return ServerConfig.from_provider_config(ProviderConfig(
        "default", {"host": "db", **spec}, {"username": "u", "password": "p"}))


def test_allow_superuser_must_be_a_boolean(env: Environment) -> None:
    from lifecycle.core.errors import CredentialsError

    with pytest.raises(Invalid, match=r"spec\.allowSuperuser"):  # the schema refuses it
        set_provider_config(env, allowSuperuser="yes")
    with pytest.raises(CredentialsError, match=r"spec\.allowSuperuser must be true or false"):
        _read_config(allowSuperuser="yes")  # and so does the provider


# --------------------------------------------------------------- membership
def test_member_of_is_granted_repaired_and_exact(env: Environment, server: PostgresServer) -> None:
    first, second, third = unique("g1"), HOSTILE_GROUP, unique("g3")
    create_roles(server, first, second, third)
    try:
        env.apply(manifest("Role", "r", memberOf=[first, second, first]))
        env.run_until_idle()
        role = name_of(env, "r")
        assert env.state("Role", "r") == "ready"
        assert groups(server, role) == {first, second}
        assert env.get("Role", "r")["status"]["atProvider"]["memberOf"] == sorted(
            [first, second])

        # Drift: one membership revoked, another granted by hand; both repaired.
        execute(server, sql.SQL("REVOKE {} FROM {}").format(sql.Identifier(second),
                                                           sql.Identifier(role)))
        execute(server, sql.SQL("GRANT {} TO {}").format(sql.Identifier(third),
                                                        sql.Identifier(role)))
        env.advance(POLL)
        assert ("ready", "updating", "update") in env.history("Role", "r")
        assert groups(server, role) == {first, second}

        # A group removed from the spec is revoked; memberOf unset leaves memberships alone.
        env.apply(manifest("Role", "r", memberOf=[second]))
        env.run_until_idle()
        assert groups(server, role) == {second}
        env.apply(manifest("Role", "r", memberOf=None))
        env.run_until_idle()
        execute(server, sql.SQL("GRANT {} TO {}").format(sql.Identifier(third),
                                                        sql.Identifier(role)))
        env.advance(POLL)
        assert groups(server, role) == {second, third}
        assert env.state("Role", "r") == "ready"

        env.delete("Role", "r")
        env.run_until_idle()
        assert attributes(server, role) is None
    finally:
        drop_roles(server, first, second, third)


def test_member_of_a_missing_role_waits_for_it(env: Environment, server: PostgresServer) -> None:
    group = unique("later")
    env.apply(manifest("Role", "r", memberOf=[group]))
    env.advance(30.0)
    role = name_of(env, "r")
    failed = env.condition("Role", "r", "Failed")
    assert (env.state("Role", "r"), failed.reason) == ("failed", "DependencyMissing")
    assert repr(group) in failed.message
    assert attributes(server, role) is None  # the create was rolled back whole

    create_roles(server, group)
    try:
        env.advance(120.0)
        assert env.state("Role", "r") == "ready"
        assert groups(server, role) == {group}
        env.delete("Role", "r")
        env.run_until_idle()
    finally:
        drop_roles(server, group)


@pytest.mark.parametrize("group", ["pg_execute_server_program", "admin", "superuser"])
def test_member_of_a_role_with_server_powers_is_refused(
    env: Environment, server: PostgresServer, group: str, admin: Any
) -> None:
    su = unique("su")
    execute(server, sql.SQL("CREATE ROLE {} SUPERUSER").format(sql.Identifier(su)))
    try:
        target = {"admin": server.user, "superuser": su}.get(group, group)
        env.apply(manifest("Role", "r", memberOf=[target]))
        env.run_until_idle()
        meta = env.get("Role", "r")["metadata"]
        assert EXTERNAL_NAME not in (meta.get("annotations") or {})  # refused before takeover
        role = f"r-{meta['uid'][:8]}"  # the name it would have taken

        failed = env.condition("Role", "r", "Failed")
        assert (env.state("Role", "r"), failed.reason) == ("failed", "PolicyDenied")
        if target == admin.user:  # the admin's name is a value of the credentials Secret
            assert target not in failed.message and "'***'" in failed.message
        else:
            assert repr(target) in failed.message
        assert attributes(server, role) is None
    finally:
        drop_roles(server, su)


def test_member_of_must_be_a_list_of_names(env: Environment) -> None:
    with pytest.raises(Invalid):
        env.apply(manifest("Role", "bad", memberOf="admins"))
    env.apply(manifest("Role", "empty", memberOf=[""]))
    env.run_until_idle()
    failed = env.condition("Role", "empty", "Failed")
    assert failed.reason == "InvalidSpec"
    assert "'memberOf' must be a list of non-empty names" in failed.message


# ---------------------------------------------- a non-superuser admin's checks
@pytest.fixture
def limited_admin(server: PostgresServer) -> Iterator[tuple[str, str]]:
    """A CREATEROLE CREATEDB admin (no superuser, no pg_authid), dropped afterwards."""
    admin, password = unique("ops"), uuid.uuid4().hex
    execute(server, sql.SQL("CREATE ROLE {} LOGIN CREATEROLE CREATEDB PASSWORD {}").format(
        sql.Identifier(admin), sql.Literal(password)))
    yield admin, password
    execute(server, sql.SQL("DROP OWNED BY {}").format(sql.Identifier(admin)))
    drop_roles(server, admin)


def test_password_changed_by_hand_is_caught_by_logging_in(
    server: PostgresServer, limited_admin: tuple[str, str]
) -> None:
    env = postgres_environment(server.host, server.port, *limited_admin, "disable")
    env.apply(manifest("Role", "r", connectionLimit=4))
    env.run_until_idle()
    role = name_of(env, "r")
    password = env.secret("r-conn")["password"]
    assert env.state("Role", "r") == "ready"
    assert env.get("Role", "r")["status"]["atProvider"]["passwordCheck"] == "login"

    execute(server, sql.SQL("ALTER ROLE {} PASSWORD 'changed-by-hand'").format(
        sql.Identifier(role)))
    assert not can_login(server, role, password)
    env.advance(POLL)

    assert ("ready", "updating", "update") in env.history("Role", "r")
    assert env.state("Role", "r") == "ready"
    assert can_login(server, role, password)
    for condition in env.get("Role", "r")["status"]["conditions"]:
        assert password not in condition.get("message", "")

    env.delete("Role", "r")
    env.run_until_idle()
    assert attributes(server, role) is None


def test_a_password_that_cannot_log_in_is_never_ready(
    server: PostgresServer, limited_admin: tuple[str, str]
) -> None:
    env = postgres_environment(server.host, server.port, *limited_admin, "disable")
    # An expired password: set on every update, refused at every login.
    env.apply(manifest("Role", "r", validUntil="2001-01-01"))
    env.advance(120.0)
    role = name_of(env, "r")

    assert attributes(server, role) is not None
    assert env.state("Role", "r") == "updating"
    assert env.condition("Role", "r", "Ready").status != "True"
    assert not can_login(server, role, env.secret("r-conn")["password"])

    # The same role with a future expiry logs in and becomes Ready.
    env.apply(manifest("Role", "r", validUntil="2999-01-01"))
    env.advance(30.0)
    assert env.state("Role", "r") == "ready"
    assert can_login(server, role, env.secret("r-conn")["password"])
    env.delete("Role", "r")
    env.run_until_idle()


def test_attributes_change_under_a_non_superuser_admin(
    server: PostgresServer, limited_admin: tuple[str, str]
) -> None:
    group = unique("grp")
    create_roles(server, group)
    try:
        env = postgres_environment(server.host, server.port, *limited_admin, "disable")
        set_policy(env, {"crossNamespace": True})  # the group is made by hand
        env.apply(manifest("Role", "r", inherit=False, memberOf=[group]))
        env.run_until_idle()
        role = name_of(env, "r")
        assert env.state("Role", "r") == "ready"

        execute(server, sql.SQL("ALTER ROLE {} INHERIT CONNECTION LIMIT 2").format(
            sql.Identifier(role)))
        env.advance(POLL)
        assert env.state("Role", "r") == "ready"
        assert attributes(server, role)[0] is False  # type: ignore[index]
        assert groups(server, role) == {group}
        env.delete("Role", "r")
        env.run_until_idle()
    finally:
        drop_roles(server, group)


@pytest.mark.parametrize(("text", "verdict"), [
    ('connection failed: FATAL:  password authentication failed for user "x"', False),
    ('FATAL:  permission denied for database "postgres"', True),
    ('FATAL:  too many connections for role "x"', True),
    ('FATAL:  no pg_hba.conf entry for host "10.0.0.1", user "x"', None),
    ("connection failed: Connection refused", None),
    ("FATAL:  sorry, too many clients already", None),
])
def test_login_failures_are_read_as_the_server_meant_them(text: str, verdict: bool | None) -> None:
    assert login.judge(text) is verdict


# ------------------------------------------------------------ database fields
def database_row(server: PostgresServer, name: str) -> tuple[Any, ...] | None:
    """(collate, ctype, allow connections, is template) of a database, or None."""
    rows = query(server, "SELECT datcollate, datctype, datallowconn, datistemplate "
                         "FROM pg_database WHERE datname = %s", name)
    return rows[0] if rows else None


def test_database_locale_and_connection_settings_are_set_and_repaired(
    env: Environment, server: PostgresServer
) -> None:
    db = unique("loc") + "'; ünï"
    env.apply(manifest("Database", "d", external_name=db, template="template0",
                       lcCollate="C", lcCType="POSIX", allowConnections=False, isTemplate=True))
    env.run_until_idle()

    assert env.state("Database", "d") == "ready"
    assert database_row(server, db) == ("C", "C", False, True)  # the server records POSIX as C
    at_provider = env.get("Database", "d")["status"]["atProvider"]
    assert (at_provider["lcCollate"], at_provider["allowConnections"]) == ("C", False)

    execute(server, sql.SQL("ALTER DATABASE {} WITH ALLOW_CONNECTIONS true IS_TEMPLATE false")
            .format(sql.Identifier(db)))
    env.advance(POLL)
    assert ("ready", "updating", "update") in env.history("Database", "d")
    assert database_row(server, db) == ("C", "C", False, True)  # the server records POSIX as C

    # The locale cannot change; the template flag does not stop deletion.
    env.apply(manifest("Database", "d", external_name=db, lcCollate="C.UTF-8"))
    env.run_until_idle()
    failed = env.condition("Database", "d", "Failed")
    assert (env.state("Database", "d"), failed.reason) == ("failed", "ImmutableField")
    assert "lcCollate" in failed.message
    env.delete("Database", "d")
    env.run_until_idle()
    assert database_row(server, db) is None


def test_database_settings_left_unset_are_not_managed(
    env: Environment, server: PostgresServer
) -> None:
    env.apply(manifest("Database", "d"))
    env.run_until_idle()
    db = env.get("Database", "d")["metadata"]["annotations"][EXTERNAL_NAME]
    execute(server, sql.SQL("ALTER DATABASE {} WITH ALLOW_CONNECTIONS false").format(
        sql.Identifier(db)))
    env.advance(POLL)
    assert env.state("Database", "d") == "ready"
    assert database_row(server, db)[2] is False  # type: ignore[index]
    env.delete("Database", "d")
    env.run_until_idle()
    assert database_row(server, db) is None


def test_an_unknown_locale_is_a_clear_condition(env: Environment) -> None:
    env.apply(manifest("Database", "d", template="template0", lcCollate="xx_NOWHERE.UTF-8"))
    env.advance(30.0)

    failed = env.condition("Database", "d", "Failed")
    assert env.state("Database", "d") == "failed"
    assert "xx_NOWHERE.UTF-8" in failed.message


# ---------------------------------------------------------------- tablespaces
def database_tablespace(server: PostgresServer, db: str) -> str | None:
    """The tablespace a database lives in (``pg_database.dattablespace``), or None."""
    rows = query(server, "SELECT t.spcname FROM pg_database d JOIN pg_tablespace t "
                         "ON t.oid = d.dattablespace WHERE d.datname = %s", db)
    return rows[0][0] if rows else None


@pytest.fixture
def tablespaces(server: PostgresServer) -> Iterator[tuple[str, str]]:
    """Two tablespaces in directories of their own (creating one needs a superuser),
    dropped afterwards."""
    names = (unique("ts") + " ü'", unique("ts"))
    for name in names:
        location = server.tablespace_directory(name.replace("'", "").replace(" ", "_"))
        execute(server, sql.SQL("CREATE TABLESPACE {} LOCATION {}").format(
            sql.Identifier(name), sql.Literal(str(location))))
    yield names
    for name in names:
        execute(server, sql.SQL("DROP TABLESPACE IF EXISTS {}").format(sql.Identifier(name)))


def test_superuser_admin_database_tablespace_is_set_moved_and_repaired(
    superuser_env: Environment, server: PostgresServer, tablespaces: tuple[str, str]
) -> None:
    env = superuser_env
    first, second = tablespaces
    db = unique("tsdb")
    env.apply(manifest("Database", "d", external_name=db, tablespace=first))
    env.run_until_idle()
    assert env.state("Database", "d") == "ready"
    assert database_tablespace(server, db) == first
    assert env.get("Database", "d")["status"]["atProvider"]["tablespace"] == first

    # Another tablespace in the spec: the database is moved.
    env.apply(manifest("Database", "d", external_name=db, tablespace=second))
    env.run_until_idle()
    assert (env.state("Database", "d"), database_tablespace(server, db)) == ("ready", second)

    # Moved by hand: moved back at the next poll.
    execute(server, sql.SQL("ALTER DATABASE {} SET TABLESPACE pg_default").format(
        sql.Identifier(db)))
    env.advance(POLL)
    assert ("ready", "updating", "update") in env.history("Database", "d")
    assert database_tablespace(server, db) == second

    # A session connected to the database stops the move: a clear condition, retried,
    # and the move happens once the session is gone.
    with server.connect(dbname=db):
        env.apply(manifest("Database", "d", external_name=db, tablespace=first))
        env.reconcile("Database", "d")  # each attempt waits 5 s for the session to leave
        failed = env.condition("Database", "d", "Failed")
        assert failed is not None and failed.reason == "ObjectInUse"
        assert f"moving database {db!r} to tablespace {first!r}" in failed.message
        assert "being accessed by other users" in failed.message
        assert database_tablespace(server, db) == second
        assert env.pending()  # retried
    env.advance(120.0)
    assert (env.state("Database", "d"), database_tablespace(server, db)) == ("ready", first)

    # Left out of the spec: late-initialised with where the database is.
    env.apply(manifest("Database", "d", external_name=db))
    env.run_until_idle()
    assert env.get("Database", "d")["spec"]["forProvider"]["tablespace"] == first
    env.delete("Database", "d")
    env.run_until_idle()
    assert database_tablespace(server, db) is None


def test_a_missing_tablespace_is_waited_for(env: Environment, server: PostgresServer) -> None:
    db, missing = unique("tsdb"), unique("nots")
    env.apply(manifest("Database", "d", external_name=db, tablespace=missing))
    env.advance(10.0)
    failed = env.condition("Database", "d", "Failed")
    assert failed is not None and failed.reason == "DependencyMissing"
    assert f'tablespace "{missing}" does not exist' in failed.message
    assert database_tablespace(server, db) is None


# ------------------------------------------------------------------- grants
def privileges(server: PostgresServer, role: str, db: str) -> dict[str, bool]:
    """The role's explicit privileges on the database, each with its grant option."""
    rows = query(server, "SELECT a.privilege_type, a.is_grantable FROM pg_database d, "
                         "LATERAL aclexplode(d.datacl) a JOIN pg_roles r ON r.oid = a.grantee "
                         "WHERE d.datname = %s AND r.rolname = %s", db, role)
    return dict(rows)


def role_and_database(env: Environment, prefix: str) -> tuple[str, str]:
    """Apply Role r and Database d, settle, return their PostgreSQL names."""
    role, db = unique(prefix) + '"; ünï', unique(prefix + "db")
    env.apply(manifest("Role", "r", external_name=role))
    env.apply(manifest("Database", "d", external_name=db))
    env.run_until_idle()
    return role, db


def test_grant_with_option_is_set_and_repaired(env: Environment, server: PostgresServer) -> None:
    role, db = role_and_database(env, "wo")
    env.apply(manifest("Grant", "g", role=role, database=db, privileges=["CONNECT"],
                       withOption="GRANT"))
    env.run_until_idle()
    assert env.state("Grant", "g") == "ready"
    assert privileges(server, role, db) == {"CONNECT": True}

    execute(server, sql.SQL("REVOKE GRANT OPTION FOR CONNECT ON DATABASE {} FROM {}").format(
        sql.Identifier(db), sql.Identifier(role)))
    assert privileges(server, role, db) == {"CONNECT": False}
    env.advance(POLL)
    assert ("ready", "updating", "update") in env.history("Grant", "g")
    assert privileges(server, role, db) == {"CONNECT": True}

    env.delete("Grant", "g")
    env.run_until_idle()
    assert privileges(server, role, db) == {}


def test_with_option_admin_is_refused_on_a_database_grant(env: Environment) -> None:
    env.apply(manifest("Grant", "g", role="r", database="d", privileges=["CONNECT"],
                       withOption="ADMIN"))
    env.run_until_idle()
    failed = env.condition("Grant", "g", "Failed")
    assert failed.reason == "InvalidSpec"
    assert "'withOption' must be GRANT" in failed.message


def test_an_exclusive_grant_revokes_privileges_removed_from_it(
    env: Environment, server: PostgresServer
) -> None:
    role, db = role_and_database(env, "ex")
    env.apply(manifest("Grant", "g", role=role, database=db, privileges=["CONNECT", "CREATE"],
                       exclusive=True))
    env.run_until_idle()
    assert privileges(server, role, db) == {"CONNECT": False, "CREATE": False}

    env.apply(manifest("Grant", "g", role=role, database=db, privileges=["CONNECT"],
                       exclusive=True))
    env.run_until_idle()
    assert privileges(server, role, db) == {"CONNECT": False}

    # Granted by hand: revoked at the next poll.
    execute(server, sql.SQL("GRANT TEMPORARY ON DATABASE {} TO {}").format(
        sql.Identifier(db), sql.Identifier(role)))
    env.advance(POLL)
    assert privileges(server, role, db) == {"CONNECT": False}
    assert env.state("Grant", "g") == "ready"


def test_a_grant_never_revokes_what_the_owner_holds(
    env: Environment, server: PostgresServer, admin: Admin
) -> None:
    owner, db = unique("own") + "'", unique("owndb")
    env.apply(manifest("Role", "r", external_name=owner))
    env.run_until_idle()
    act_as(server, admin, owner)
    env.apply(manifest("Database", "d", external_name=db, owner=owner))
    env.apply(manifest("Grant", "g", role=owner, database=db, privileges=["CONNECT"],
                       exclusive=True))
    env.run_until_idle()
    failed = env.condition("Grant", "g", "Failed")
    assert (env.state("Grant", "g"), failed.reason) == ("failed", "InvalidSpec")
    assert "by ownership" in failed.message

    env.delete("Grant", "g")
    env.run_until_idle()
    assert not env.exists("Grant", "g")
    assert query(server, "SELECT has_database_privilege(%s, %s, 'CREATE'), "
                         "has_database_privilege(%s, %s, 'CONNECT')",
                 owner, db, owner, db) == [(True, True)]


def test_a_plain_grant_leaves_other_privileges_alone(
    env: Environment, server: PostgresServer
) -> None:
    role, db = role_and_database(env, "pl")
    env.apply(manifest("Grant", "g", role=role, database=db, privileges=["CONNECT"]))
    env.run_until_idle()
    execute(server, sql.SQL("GRANT TEMPORARY ON DATABASE {} TO {}").format(
        sql.Identifier(db), sql.Identifier(role)))
    env.advance(POLL)
    assert privileges(server, role, db) == {"CONNECT": False, "TEMPORARY": False}


# ------------------------------------------------- roles that own objects
def table_owner(server: PostgresServer, db: str, table: str) -> str | None:
    """The owner of ``public.table`` in ``db``, or None when there is no such table."""
    with server.connect(dbname=db) as conn:
        row = conn.execute("SELECT tableowner FROM pg_tables WHERE schemaname = 'public' "
                           "AND tablename = %s", [table]).fetchone()
    return None if row is None else row[0]


def owned_table(server: PostgresServer, db: str, table: str, owner: str) -> None:
    """Create ``public.table`` in ``db`` owned by ``owner``, and grant ``owner`` a privilege on
    another table, so the role both owns and holds something there."""
    with server.connect(dbname=db) as conn:
        conn.execute(sql.SQL("CREATE TABLE {} (id int)").format(sql.Identifier(table)))
        conn.execute(sql.SQL("ALTER TABLE {} OWNER TO {}").format(sql.Identifier(table),
                                                                 sql.Identifier(owner)))
        conn.execute(sql.SQL("CREATE TABLE {} (id int)").format(sql.Identifier(table + "_x")))
        conn.execute(sql.SQL("GRANT SELECT ON {} TO {}").format(sql.Identifier(table + "_x"),
                                                               sql.Identifier(owner)))


@pytest.mark.parametrize("policy", ["reassign", "drop", "none"])
def test_deleting_a_role_that_owns_objects_follows_its_policy(
    env: Environment, server: PostgresServer, admin: Admin, policy: str
) -> None:
    role, heir, db = unique("owner") + '"; ünï', unique("heir"), unique("objs")
    create_roles(server, heir)
    parameters = {"reassign": {"reassignOwnedTo": heir}, "drop": {"dropOwned": True},
                  "none": {}}[policy]
    env.apply(manifest("Role", "r", external_name=role, **parameters))
    env.apply(manifest("Database", "d", external_name=db))
    env.run_until_idle()
    owned_table(server, db, "t", role)
    owned_table(server, "postgres", f"t_{heir}", role)
    try:
        env.delete("Role", "r")
        env.advance(60.0)
        if policy == "none":
            failed = env.condition("Role", "r", "Failed")
            assert failed is not None and failed.reason == "ObjectInUse"
            assert attributes(server, role) is not None
            assert table_owner(server, db, "t") == role
            return
        if not admin.superuser:
            # PostgreSQL 15: REASSIGN OWNED and DROP OWNED need membership in the roles.
            failed = env.condition("Role", "r", "Failed")
            assert failed is not None and failed.reason == "InsufficientPrivilege"
            assert f"permission denied to {policy} objects" in failed.message
            assert table_owner(server, db, "t") == role
            act_as(server, admin, role)
            act_as(server, admin, heir)
            env.advance(300.0)
            # What a superuser granted the role, only a superuser revokes: still in use.
            failed = env.condition("Role", "r", "Failed")
            assert failed is not None and failed.reason == "ObjectInUse"
            assert "privileges for table" in failed.message
            for database, table in ((db, "t_x"), ("postgres", f"t_{heir}_x")):
                with server.connect(dbname=database) as conn:
                    conn.execute(sql.SQL("REVOKE ALL ON {} FROM {}").format(
                        sql.Identifier(table), sql.Identifier(role)))
            env.advance(300.0)
        assert not env.exists("Role", "r")
        assert attributes(server, role) is None
        expected = heir if policy == "reassign" else None
        assert table_owner(server, db, "t") == expected
        assert table_owner(server, "postgres", f"t_{heir}") == expected
    finally:
        with server.connect() as conn:
            conn.execute(sql.SQL("DROP TABLE IF EXISTS {}, {}").format(
                sql.Identifier(f"t_{heir}"), sql.Identifier(f"t_{heir}_x")))
        env.delete("Database", "d")
        env.advance(60.0)
        if attributes(server, role) is not None:
            execute(server, sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
            drop_roles(server, role)
        drop_roles(server, heir)


# ------------------------------------------------- TLS from the credentials Secret
def _certificates(user: str) -> dict[str, str]:
    """PEM texts: a CA, a server certificate for 127.0.0.1 and a client certificate for
    ``user``, both signed by it, and a second, unrelated CA."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)

    def name(common: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])

    def issue(subject: str, key: Any, issuer: x509.Name, signer: Any, *, ca: bool,
              san: Any = None) -> x509.Certificate:
        builder = (x509.CertificateBuilder().subject_name(name(subject)).issuer_name(issuer)
                   .public_key(key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(days=1))
                   .not_valid_after(now + datetime.timedelta(days=2))
                   .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
        if san is not None:
            builder = builder.add_extension(x509.SubjectAlternativeName(san), critical=False)
        return builder.sign(signer, hashes.SHA256())

    def pem(item: Any) -> str:
        if isinstance(item, x509.Certificate):
            return item.public_bytes(serialization.Encoding.PEM).decode()
        return item.private_bytes(serialization.Encoding.PEM,
                                  serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption()).decode()

    ca_key, other_key, server_key, client_key = (ec.generate_private_key(ec.SECP256R1())
                                                 for _ in range(4))
    ca = issue("lifecycle test CA", ca_key, name("lifecycle test CA"), ca_key, ca=True)
    other = issue("another CA", other_key, name("another CA"), other_key, ca=True)
    server = issue("127.0.0.1", server_key, ca.subject, ca_key, ca=False,
                   san=[x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
    client = issue(user, client_key, ca.subject, ca_key, ca=False)
    return {"ca": pem(ca), "other_ca": pem(other), "server": pem(server),
            "server_key": pem(server_key), "client": pem(client), "client_key": pem(client_key)}


@pytest.fixture(scope="module")
def tls_server() -> Iterator[tuple[PostgresServer, dict[str, str]]]:
    """A second server that accepts TCP only over TLS with a client certificate (and the
    password), with the certificates it trusts."""
    tls = PostgresServer()
    tls.start()
    pems = _certificates(tls.user)
    tls.stop()
    runas = tls._runas
    for file, text in (("server.crt", pems["server"]), ("server.key", pems["server_key"]),
                       ("root.crt", pems["ca"])):
        path = tls.data / file
        path.write_text(text)
        path.chmod(0o600)
        if runas is not None:
            os.chown(path, runas.pw_uid, runas.pw_gid)
    with open(tls.data / "postgresql.conf", "a") as conf:
        conf.write("\nssl = on\nssl_ca_file = 'root.crt'\n")
    hba = tls.data / "pg_hba.conf"
    rules = [line for line in hba.read_text().splitlines() if not line.startswith("host")]
    hba.write_text("\n".join(
        ["hostssl all all 127.0.0.1/32 scram-sha-256 clientcert=verify-full", *rules]) + "\n")
    tls.start()
    yield tls, pems
    tls.close()


def tls_environment(tls: PostgresServer, sslmode: str, credentials: dict[str, str],
                    keys: dict[str, str] | None = None) -> Environment:
    """An Environment pointed at the TLS server with ``credentials`` as its Secret."""
    env = postgres_environment(tls.host, tls.port, tls.user, tls.password, sslmode)
    spec: dict[str, Any] = {"host": tls.host, "port": tls.port, "sslmode": sslmode}
    if keys is not None:
        spec["credentialKeys"] = keys
    env.provider_config(credentials=credentials, spec=spec)
    return env


def test_ca_bundle_and_client_certificate_come_from_the_credentials_secret(
    tls_server: tuple[PostgresServer, dict[str, str]],
) -> None:
    tls, pems = tls_server
    env = tls_environment(tls, "verify-full", {
        "user": tls.user, "pass": tls.password, "ca.crt": pems["ca"],
        "tls.crt": pems["client"], "tls.key": pems["client_key"]},
        keys={"username": "user", "password": "pass"})
    env.apply(manifest("Role", "r", login=False))
    env.run_until_idle()

    # The server takes TCP only over TLS with a client certificate its CA signed.
    assert env.state("Role", "r") == "ready"
    env.delete("Role", "r")
    env.run_until_idle()
    assert not env.exists("Role", "r")


@pytest.mark.parametrize(("case", "reason"), [
    ("no client certificate", "ConnectionRejected"),
    ("another CA", "ServerUnavailable"),
    ("certificate without key", "CredentialsMissing"),
])
def test_tls_material_is_really_used(
    tls_server: tuple[PostgresServer, dict[str, str]], case: str, reason: str
) -> None:
    tls, pems = tls_server
    credentials = {"username": tls.user, "password": tls.password, "ca.crt": pems["ca"],
                   "tls.crt": pems["client"], "tls.key": pems["client_key"]}
    if case == "no client certificate":
        del credentials["tls.crt"], credentials["tls.key"]
    elif case == "another CA":
        credentials["ca.crt"] = pems["other_ca"]
    else:
        del credentials["tls.key"]
    env = tls_environment(tls, "verify-full", credentials)
    env.apply(manifest("Role", "r"))
    env.reconcile("Role", "r")

    failed = env.condition("Role", "r", "Failed")
    assert (env.state("Role", "r"), failed.reason) == ("failed", reason)
    for secret in (tls.password, pems["client_key"]):
        assert secret not in failed.message


def test_credential_keys_must_name_known_values() -> None:
    from lifecycle.core.errors import CredentialsError

    with pytest.raises(CredentialsError, match=r"spec\.credentialKeys") as caught:
        _read_config(credentialKeys={"token": "t"})
    assert caught.value.reason == "ProviderConfigInvalid"


# ------------------------------------------------ connection Secret keys per kind
def test_connection_secrets_get_the_extra_keys_named_per_kind(
    env: Environment, server: PostgresServer
) -> None:
    set_provider_config(env, connectionSecretKeys={
        "Role": {"DATABASE_URL": "uri", "PGPASSWORD": "password"},
        "Database": {"PGDATABASE": "database"}})
    env.apply(manifest("Role", "r"))
    env.apply(manifest("Database", "d"))
    env.run_until_idle()

    role, db = env.secret("r-conn"), env.secret("d-conn")
    assert (role["DATABASE_URL"], role["PGPASSWORD"]) == (role["uri"], role["password"])
    assert "PGDATABASE" not in role
    assert db["PGDATABASE"] == db["database"]
    assert "DATABASE_URL" not in db
    with psycopg.connect(role["DATABASE_URL"]) as conn:
        assert conn.execute("SELECT current_user").fetchone() == (name_of(env, "r"),)
    env.delete("Database", "d")
    env.delete("Role", "r")
    env.run_until_idle()


@pytest.mark.parametrize("keys", [
    {"Grant": {"X": "uri"}},
    {"Role": {"X": "secret"}},
    {"Role": {"password": "uri"}},
    {"Role": {"bad key!": "uri"}},
    {"Role": ["uri"]},
])
def test_connection_secret_keys_are_checked(keys: dict[str, Any]) -> None:
    from lifecycle.core.errors import CredentialsError

    with pytest.raises(CredentialsError, match=r"spec\.connectionSecretKeys") as caught:
        _read_config(connectionSecretKeys=keys)
    assert caught.value.reason == "ProviderConfigInvalid"


# ------------------------------------------------------------------- schemas
def schema_row(server: PostgresServer, db: str, schema: str) -> tuple[Any, ...] | None:
    """(owner, whether PUBLIC holds a privilege) of a schema in ``db``, or None."""
    with server.connect(dbname=db) as conn:
        return conn.execute(
            "SELECT pg_get_userbyid(nspowner), EXISTS (SELECT 1 FROM aclexplode(COALESCE("
            "nspacl, acldefault('n', nspowner))) a WHERE a.grantee = 0) "
            "FROM pg_namespace WHERE nspname = %s", [schema]).fetchone()


def test_schema_is_created_owned_repaired_and_dropped(
    env: Environment, server: PostgresServer, admin: Admin
) -> None:
    owner, db, schema = unique("sowner"), unique("sdb"), unique("app") + '"; ünï'
    env.apply(manifest("Schema", "s", external_name=schema, database=db, role=owner,
                       revokePublicOnSchema=True))
    env.advance(10.0)
    assert env.condition("Schema", "s", "Failed").reason == "DependencyMissing"
    env.apply(manifest("Role", "r", external_name=owner))
    env.apply(manifest("Database", "d", external_name=db))
    env.advance(10.0)
    act_as(server, admin, owner)
    env.advance(120.0)
    env.run_until_idle()

    assert env.state("Schema", "s") == "ready"
    assert schema_row(server, db, schema) == (owner, False)
    assert schema_row(server, "postgres", schema) is None  # made in its own database
    with server.connect(dbname=db) as conn:  # to the admin: one it can take it back from
        conn.execute(sql.SQL("ALTER SCHEMA {} OWNER TO {}").format(
            sql.Identifier(schema), sql.Identifier(admin.user)))
        conn.execute(sql.SQL("GRANT USAGE ON SCHEMA {} TO PUBLIC").format(
            sql.Identifier(schema)))
    env.advance(POLL)
    assert ("ready", "updating", "update") in env.history("Schema", "s")
    assert schema_row(server, db, schema) == (owner, False)

    # A schema still holding a table waits; once empty it is dropped.
    with server.connect(dbname=db) as conn:
        conn.execute(sql.SQL("CREATE TABLE {}.t (id int)").format(sql.Identifier(schema)))
    env.delete("Schema", "s")
    env.advance(10.0)
    assert env.condition("Schema", "s", "Failed").reason == "ObjectInUse"
    with server.connect(dbname=db) as conn:
        conn.execute(sql.SQL("DROP TABLE {}.t").format(sql.Identifier(schema)))
    env.advance(120.0)
    assert not env.exists("Schema", "s")
    assert schema_row(server, db, schema) is None
    env.delete("Database", "d")
    env.delete("Role", "r")
    env.run_until_idle()


def test_schema_owner_is_late_initialised_and_public_kept_by_default(
    env: Environment, server: PostgresServer, admin: Admin
) -> None:
    db = unique("sdb")
    env.apply(manifest("Database", "d", external_name=db))
    env.apply(manifest("Schema", "s", database=db))
    env.run_until_idle()
    schema = env.get("Schema", "s")["metadata"]["annotations"][EXTERNAL_NAME]
    assert env.get("Schema", "s")["spec"]["forProvider"]["role"] == admin.user
    with server.connect(dbname=db) as conn:
        conn.execute(sql.SQL("GRANT USAGE ON SCHEMA {} TO PUBLIC").format(
            sql.Identifier(schema)))
    env.advance(POLL)
    assert schema_row(server, db, schema) == (admin.user, True)
    env.delete("Schema", "s")
    env.delete("Database", "d")
    env.run_until_idle()
    assert not env.exists("Schema", "s")


def test_the_public_schema_is_never_adopted(env: Environment, server: PostgresServer) -> None:
    # Not in postgres: the server's own databases are refused by the policy before that.
    db = unique("pubdb")
    execute(server, sql.SQL("CREATE DATABASE {}").format(sql.Identifier(db)))
    env.reconcilers["Schema"].allow_adoption = frozenset({"default"})
    doc = manifest("Schema", "s", external_name="public", database=db)
    doc["metadata"]["annotations"]["lifecycle.dev/adopt"] = "true"
    env.apply(doc)
    env.advance(10.0)
    failed = env.condition("Schema", "s", "Failed")
    assert failed is not None and "created by the server itself" in failed.message
    assert schema_row(server, db, "public") is not None
    env.delete("Schema", "s")
    env.run_until_idle()
    execute(server, sql.SQL("DROP DATABASE {}").format(sql.Identifier(db)))


# ---------------------------------------------------------------- extensions
def extension_row(server: PostgresServer, db: str, extension: str) -> tuple[Any, ...] | None:
    """(version, schema) of an installed extension in ``db``, or None."""
    with server.connect(dbname=db) as conn:
        return conn.execute(
            "SELECT e.extversion, n.nspname FROM pg_extension e JOIN pg_namespace n "
            "ON n.oid = e.extnamespace WHERE extname = %s", [extension]).fetchone()


def test_superuser_admin_installs_updates_moves_and_drops_an_extension(
    superuser_env: Environment, server: PostgresServer
) -> None:
    # The objects of a trusted extension a non-superuser installs belong to the bootstrap
    # superuser: only a superuser admin may move them to another schema.
    env = superuser_env
    db, schema = unique("edb"), unique("ext") + "'ü"
    env.apply(manifest("Database", "d", external_name=db))
    env.apply(manifest("Schema", "s", external_name=schema, database=db))
    env.apply(manifest("Extension", "e", extension="hstore", database=db, version="1.7"))
    env.run_until_idle()

    assert env.state("Extension", "e") == "ready"
    assert extension_row(server, db, "hstore") == ("1.7", "public")
    assert env.get("Extension", "e")["spec"]["forProvider"]["schema"] == "public"
    assert extension_row(server, "postgres", "hstore") is None

    # Moved by hand: moved back. Then a newer version and another schema from the spec.
    with server.connect(dbname=db) as conn:
        conn.execute(sql.SQL("ALTER EXTENSION hstore SET SCHEMA {}").format(
            sql.Identifier(schema)))
    env.advance(POLL)
    assert extension_row(server, db, "hstore") == ("1.7", "public")
    env.apply(manifest("Extension", "e", extension="hstore", database=db, version="1.8",
                       schema=schema))
    env.run_until_idle()
    assert extension_row(server, db, "hstore") == ("1.8", schema)

    env.delete("Extension", "e")
    env.run_until_idle()
    assert extension_row(server, db, "hstore") is None
    for kind, name in (("Schema", "s"), ("Database", "d")):
        env.delete(kind, name)
    env.run_until_idle()


def test_an_extension_installed_by_someone_else_is_not_taken(
    env: Environment, server: PostgresServer
) -> None:
    db = unique("edb")
    env.apply(manifest("Database", "d", external_name=db))
    env.run_until_idle()
    with server.connect(dbname=db) as conn:
        conn.execute("CREATE EXTENSION citext")
    env.apply(manifest("Extension", "e", extension="citext", database=db))
    env.apply(manifest("Extension", "p", extension="plpgsql", database=db))
    env.advance(10.0)

    foreign, system = (env.condition("Extension", n, "Failed") for n in ("e", "p"))
    assert (foreign.reason, system.reason) == ("ExternalResourceNotOwned",) * 2
    assert "was not created by this object" in foreign.message
    assert "installed by the server itself" in system.message
    env.delete("Extension", "e")
    env.delete("Extension", "p")
    env.advance(30.0)
    assert extension_row(server, db, "citext") is not None
    assert extension_row(server, db, "plpgsql") is not None
    env.delete("Database", "d")
    env.run_until_idle()


# ------------------------------------------------------------- schema grants
def schema_privileges(server: PostgresServer, db: str, schema: str,
                      role: str) -> dict[str, bool]:
    """The role's explicit privileges on a schema of ``db``, each with its grant option."""
    with server.connect(dbname=db) as conn:
        rows = conn.execute(
            "SELECT a.privilege_type, a.is_grantable FROM pg_namespace n, "
            "LATERAL aclexplode(n.nspacl) a JOIN pg_roles r ON r.oid = a.grantee "
            "WHERE n.nspname = %s AND r.rolname = %s", [schema, role]).fetchall()
    return dict(rows)


def test_grant_on_a_schema_is_set_repaired_and_revoked(
    env: Environment, server: PostgresServer
) -> None:
    role, db = role_and_database(env, "sg")
    schema = unique("s") + '"; ünï'
    env.apply(manifest("Grant", "g", role=role, database=db, schema=schema,
                       privileges=["ALL"], withOption="GRANT", exclusive=True))
    env.advance(10.0)
    assert env.condition("Grant", "g", "Failed").reason == "DependencyMissing"
    env.apply(manifest("Schema", "s", external_name=schema, database=db))
    env.advance(120.0)
    env.run_until_idle()

    assert env.state("Grant", "g") == "ready"
    assert schema_privileges(server, db, schema, role) == {"CREATE": True, "USAGE": True}
    assert env.get("Grant", "g")["spec"]["forProvider"]["privileges"] == ["ALL"]
    with server.connect(dbname=db) as conn:
        conn.execute(sql.SQL("REVOKE CREATE ON SCHEMA {} FROM {}").format(
            sql.Identifier(schema), sql.Identifier(role)))
    env.advance(POLL)
    assert schema_privileges(server, db, schema, role) == {"CREATE": True, "USAGE": True}

    env.apply(manifest("Grant", "g", role=role, database=db, schema=schema,
                       privileges=["USAGE"], withOption=None, exclusive=True))
    env.run_until_idle()
    # CREATE is revoked; USAGE stays, without the grant option the spec no longer asks for.
    assert schema_privileges(server, db, schema, role) == {"USAGE": False}

    env.delete("Grant", "g")
    env.run_until_idle()
    assert schema_privileges(server, db, schema, role) == {}
    env.delete("Schema", "s")
    env.run_until_idle()


def test_database_privileges_are_refused_on_a_schema(env: Environment) -> None:
    env.apply(manifest("Grant", "g", role="r", database="d", schema="s",
                       privileges=["CONNECT", "USAGE"]))
    env.run_until_idle()
    failed = env.condition("Grant", "g", "Failed")
    assert failed.reason == "InvalidSpec"
    assert "CONNECT do not apply to a schema" in failed.message
