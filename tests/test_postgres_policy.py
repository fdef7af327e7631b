"""The tenancy policy of a PostgreSQL ProviderConfig, attacked as a hostile tenant would.

Against the real server of the session fixture, once with a superuser admin and once
with a CREATEROLE CREATEDB admin (the ``env`` fixture). Team B (namespace ``team-b``)
owns a role and a database made through the operator; team A (``team-a``) then asks,
through the same ProviderConfig, for what the safe defaults refuse: privileged role
attributes, memberships in predefined roles, in B's role or in a group that is itself a
member of ``pg_read_server_files``, superuser-only settings, Grants, default privileges,
schemas and extensions in B's database, dangerous extensions, PUBLIC revoked on
``postgres``. Each refusal is a terminal ``PolicyDenied`` naming the rule; the victim is
byte-identical in the catalog afterwards, and after the refused object is deleted (which
calls nothing that changes the server).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from postgres_fixtures import Admin
from postgres_helpers import act_as, execute, query, unique
from psycopg import sql

from lifecycle.core.contract import ProviderConfig
from lifecycle.core.errors import CredentialsError, TerminalError
from lifecycle.providers.postgres import marks
from lifecycle.providers.postgres.config import ServerConfig
from lifecycle.providers.postgres.marks import tenant_of
from lifecycle.providers.postgres.policy import DEFAULT_EXTENSIONS, Policy
from lifecycle.providers.postgres.scenarios.testing import PostgresServer, manifest, set_policy
from lifecycle.testing import Environment

pytestmark = pytest.mark.postgres

A, B = "team-a", "team-b"


@pytest.fixture(autouse=True)
def _tenants(request: pytest.FixtureRequest) -> None:
    """The two tenants' namespaces, in every test that runs an Environment."""
    if "env" in request.fixturenames:
        env = request.getfixturevalue("env")
        env.namespace(A)
        env.namespace(B)


# ---------------------------------------------------------------- helpers
def made(env: Environment, kind: str, name: str, namespace: str, **params: Any) -> str:
    """Apply a manifest in ``namespace``, run to idle and return its external name."""
    env.apply(manifest(kind, name, namespace=namespace, **params))
    env.run_until_idle()
    return str(env.get(kind, name, namespace)["metadata"]["annotations"][
        "lifecycle.dev/external-name"])


def ready(env: Environment, kind: str, name: str, namespace: str) -> None:
    assert env.state(kind, name, namespace) == "ready", env.condition(
        kind, name, "Synced", namespace)


def denied(env: Environment, kind: str, name: str, namespace: str, rule: str) -> str:
    """Assert the object failed with a terminal PolicyDenied naming ``rule``; its message."""
    failed = env.condition(kind, name, "Failed", namespace)
    assert env.state(kind, name, namespace) == "failed"
    assert failed is not None and failed.reason == "PolicyDenied", failed
    assert f"(rule {rule})" in failed.message, failed.message
    assert (kind, namespace, name) not in env.pending()  # terminal: not retried
    return failed.message


def gone(env: Environment, kind: str, name: str, namespace: str) -> None:
    env.delete(kind, name, namespace)
    env.advance(300)
    assert not env.exists(kind, name, namespace)


def snapshot(server: PostgresServer, database: str, role: str) -> tuple[Any, ...]:
    """Everything about B's role and database an attack could change: the role's row of
    pg_authid and its memberships, the database's row (ACL included) and comment, and in
    the database its schemas, extensions and default ACLs."""
    rows = query(server, "SELECT to_jsonb(a)::text, shobj_description(a.oid, 'pg_authid'), "
                         "ARRAY(SELECT m.roleid::regrole::text FROM pg_auth_members m "
                         "WHERE m.member = a.oid ORDER BY 1) FROM pg_authid a "
                         "WHERE rolname = %s", role)
    rows += query(server, "SELECT to_jsonb(d)::text, shobj_description(d.oid, 'pg_database') "
                          "FROM pg_database d WHERE datname = %s", database)
    with server.connect(dbname=database) as conn:
        rows += conn.execute("SELECT to_jsonb(n)::text FROM pg_namespace n ORDER BY 1").fetchall()
        rows += conn.execute("SELECT to_jsonb(e)::text FROM pg_extension e ORDER BY 1").fetchall()
        rows += conn.execute("SELECT to_jsonb(d)::text FROM pg_default_acl d ORDER BY 1"
                             ).fetchall()
        rows += conn.execute("SELECT to_jsonb(c)::text FROM pg_class c "
                             "WHERE relnamespace = 'public'::regnamespace ORDER BY 1").fetchall()
    return tuple(rows)


def victim(env: Environment, server: PostgresServer) -> tuple[str, str, Callable[[], Any]]:
    """Team B's role and database (made through the operator, with a table in the
    database) and a function returning their snapshot."""
    role = made(env, "Role", "b-app", B)
    database = made(env, "Database", "b-db", B)
    ready(env, "Role", "b-app", B)
    ready(env, "Database", "b-db", B)
    with server.connect(dbname=database) as conn:
        conn.execute("CREATE TABLE secrets (v text)")
        conn.execute("INSERT INTO secrets VALUES ('b-only')")
    return role, database, lambda: snapshot(server, database, role)


def attacker(env: Environment) -> tuple[str, str]:
    """Team A's own role and database, made through the operator."""
    role = made(env, "Role", "a-app", A)
    database = made(env, "Database", "a-db", A)
    ready(env, "Role", "a-app", A)
    ready(env, "Database", "a-db", A)
    return role, database


def role_exists(server: PostgresServer, role: str) -> bool:
    return bool(query(server, "SELECT 1 FROM pg_roles WHERE rolname = %s", role))


# ---------------------------------------------------------------- Role attacks
@pytest.mark.parametrize("attribute", ["createrole", "replication", "bypassRls", "superUser"])
def test_privileged_role_attributes_are_refused_and_deletable(
        env: Environment, server: PostgresServer, attribute: str) -> None:
    role = unique("a_priv")
    env.apply(manifest("Role", "a-priv", namespace=A, external_name=role, **{attribute: True}))
    env.run_until_idle()

    message = denied(env, "Role", "a-priv", A, "allowedRoleAttributes")
    assert attribute in message
    assert not role_exists(server, role)
    gone(env, "Role", "a-priv", A)
    assert not role_exists(server, role)


def test_createrole_cannot_lead_to_copy_from_program(
        env: Environment, server: PostgresServer) -> None:
    """The chain of the report: CREATEROLE, then pg_execute_server_program, then COPY FROM
    PROGRAM. The role is never made with CREATEROLE, nor at all."""
    role = unique("a_chain")
    env.apply(manifest("Role", "a-chain", namespace=A, external_name=role, createrole=True,
                       login=True))
    env.run_until_idle()
    denied(env, "Role", "a-chain", A, "allowedRoleAttributes")
    assert not role_exists(server, role)
    # Asked in two steps (a plain role first, CREATEROLE later), the update is refused too.
    env.apply(manifest("Role", "a-chain", namespace=A, external_name=role, login=True))
    env.run_until_idle()
    ready(env, "Role", "a-chain", A)
    env.apply(manifest("Role", "a-chain", namespace=A, external_name=role, createrole=True,
                       login=True))
    env.run_until_idle()
    denied(env, "Role", "a-chain", A, "allowedRoleAttributes")
    assert query(server, "SELECT rolcreaterole FROM pg_roles WHERE rolname = %s", role) == [
        (False,)]
    password = env.secret("a-chain-conn", A)["password"]
    refused = r"permission denied|must be|must have"
    with server.connect(role, password) as conn, pytest.raises(psycopg.Error, match=refused):
        conn.execute(sql.SQL("GRANT pg_execute_server_program TO {}").format(
            sql.Identifier(role)))
    with server.connect(role, password) as conn:
        conn.execute("CREATE TEMP TABLE t (v text)")
        with pytest.raises(psycopg.Error, match=refused):
            conn.execute("COPY t FROM PROGRAM 'id'")
    gone(env, "Role", "a-chain", A)  # its own role: dropped
    assert not role_exists(server, role)


@pytest.mark.parametrize("group", ["pg_read_all_data", "pg_write_all_data", "pg_signal_backend",
                                   "pg_execute_server_program", "pg_read_server_files"])
def test_membership_in_a_predefined_role_is_refused(
        env: Environment, server: PostgresServer, group: str) -> None:
    role = unique("a_member")
    env.apply(manifest("Role", "a-member", namespace=A, external_name=role, memberOf=[group]))
    env.run_until_idle()

    assert group in denied(env, "Role", "a-member", A, "memberships")
    assert not role_exists(server, role)
    members = query(server, "SELECT count(*) FROM pg_auth_members WHERE roleid = %s::regrole",
                    group)
    gone(env, "Role", "a-member", A)
    assert query(server, "SELECT count(*) FROM pg_auth_members WHERE roleid = %s::regrole",
                 group) == members


def test_membership_in_another_namespaces_role_is_refused(
        env: Environment, server: PostgresServer) -> None:
    b_role, _, before = victim(env, server)
    state = before()
    role = unique("a_member")
    env.apply(manifest("Role", "a-member", namespace=A, external_name=role,
                       memberOf=[b_role]))
    env.run_until_idle()

    assert b_role in denied(env, "Role", "a-member", A, "memberships")
    assert not role_exists(server, role)
    gone(env, "Role", "a-member", A)
    assert before() == state


def test_membership_is_checked_through_the_whole_graph(
        env: Environment, server: PostgresServer) -> None:
    """A's own group, made a member of pg_read_server_files by hand: joining the group
    would give the predefined role, so it is refused (the old check saw direct ones only)."""
    group = made(env, "Role", "a-group", A, login=False)
    ready(env, "Role", "a-group", A)
    execute(server, sql.SQL("GRANT pg_read_server_files TO {}").format(sql.Identifier(group)))
    role = unique("a_member")
    env.apply(manifest("Role", "a-member", namespace=A, external_name=role, memberOf=[group]))
    env.run_until_idle()

    message = denied(env, "Role", "a-member", A, "memberships")
    assert "pg_read_server_files" in message and group in message
    assert not role_exists(server, role)
    gone(env, "Role", "a-member", A)
    execute(server, sql.SQL("REVOKE pg_read_server_files FROM {}").format(
        sql.Identifier(group)))


def test_membership_in_the_admin_is_refused(
        env: Environment, server: PostgresServer, admin: Admin) -> None:
    role = unique("a_member")
    env.apply(manifest("Role", "a-member", namespace=A, external_name=role,
                       memberOf=[admin.user]))
    env.run_until_idle()
    denied(env, "Role", "a-member", A, "memberships")
    assert not role_exists(server, role)
    # Neither the condition nor any Event carries the admin's password.
    seen = json.dumps([env.get("Role", "a-member", A), env.events()])
    assert admin.password not in seen
    gone(env, "Role", "a-member", A)


@pytest.mark.parametrize("setting", ["lo_compat_privileges", "session_replication_role"])
def test_superuser_only_settings_are_refused(
        env: Environment, server: PostgresServer, setting: str) -> None:
    value = "on" if setting == "lo_compat_privileges" else "replica"
    role = unique("a_setting")
    env.apply(manifest("Role", "a-setting", namespace=A, external_name=role,
                       configurationParameters=[{"name": setting, "value": value}]))
    env.run_until_idle()

    assert setting in denied(env, "Role", "a-setting", A, "configurationParameters")
    assert not role_exists(server, role)
    gone(env, "Role", "a-setting", A)


def test_a_setting_of_a_role_of_its_own_context_is_allowed(
        env: Environment, server: PostgresServer) -> None:
    role = made(env, "Role", "a-setting", A,
                configurationParameters=[{"name": "work_mem", "value": "8MB"}])
    ready(env, "Role", "a-setting", A)
    assert query(server, "SELECT setconfig FROM pg_db_role_setting WHERE setrole = "
                         "%s::regrole", role) == [(["work_mem=8MB"],)]
    gone(env, "Role", "a-setting", A)


def test_reassign_owned_to_the_admin_is_refused(
        env: Environment, server: PostgresServer, admin: Admin) -> None:
    """What the role owns (a SECURITY DEFINER function, say) would run as the admin."""
    role = unique("a_reassign")
    env.apply(manifest("Role", "a-reassign", namespace=A, external_name=role,
                       reassignOwnedTo=admin.user))
    env.run_until_idle()
    denied(env, "Role", "a-reassign", A, "adminRole")
    assert not role_exists(server, role)
    gone(env, "Role", "a-reassign", A)


# ---------------------------------------------------------------- Grant attacks
def test_a_grant_on_another_namespaces_database_is_refused(
        env: Environment, server: PostgresServer) -> None:
    _, b_db, before = victim(env, server)
    a_role, _ = attacker(env)
    state = before()
    env.apply(manifest("Grant", "steal-db", namespace=A, role=a_role, database=b_db,
                       privileges=["ALL"]))
    env.apply(manifest("Grant", "steal-tables", namespace=A, role=a_role, database=b_db,
                       schema="public", tables=["*"], privileges=["SELECT"]))
    env.run_until_idle()

    assert b_db in denied(env, "Grant", "steal-db", A, "crossNamespace")
    denied(env, "Grant", "steal-tables", A, "crossNamespace")
    assert before() == state
    gone(env, "Grant", "steal-db", A)
    gone(env, "Grant", "steal-tables", A)
    assert before() == state


def test_a_grant_on_a_database_not_marked_yet_is_retried_then_made(
        env: Environment, server: PostgresServer, admin: Admin) -> None:
    """A Database marks its database in a statement after CREATE DATABASE, so a Grant
    may find it unmarked for a moment: it is refused with ``PolicyDenied`` and retried,
    not refused for good, and made once the mark is there."""
    a_role, _ = attacker(env)
    late = unique("a_late")
    execute(server, sql.SQL("CREATE DATABASE {} OWNER {}").format(  # as a Database makes it
        sql.Identifier(late), sql.Identifier(admin.user)))
    env.apply(manifest("Grant", "late", namespace=A, role=a_role, database=late,
                       privileges=["CONNECT"]))
    env.reconcile("Grant", "late", A)
    synced = env.condition("Grant", "late", "Synced", A)
    assert synced is not None and synced.status == "False", synced
    assert "(rule crossNamespace)" in synced.message and "(yet)" in synced.message
    assert ("Grant", A, "late") in env.pending()  # retried with backoff
    assert not query(server, "SELECT 1 FROM pg_database d, aclexplode(d.datacl) a "
                             "JOIN pg_roles r ON r.oid = a.grantee "
                             "WHERE d.datname = %s AND r.rolname = %s", late, a_role)
    config = env.get("Grant", "late", A)["spec"]["providerConfigRef"]["name"]
    execute(server, marks.comment("DATABASE", late, "lifecycle/by-hand", A, config))
    env.advance(300)
    env.run_until_idle()
    ready(env, "Grant", "late", A)
    gone(env, "Grant", "late", A)


def test_a_grant_to_another_namespaces_role_is_refused(
        env: Environment, server: PostgresServer) -> None:
    b_role, _, before = victim(env, server)
    _, a_db = attacker(env)
    state = before()
    env.apply(manifest("Grant", "give", namespace=A, role=b_role, database=a_db,
                       privileges=["CONNECT"]))
    env.run_until_idle()
    denied(env, "Grant", "give", A, "crossNamespace")
    gone(env, "Grant", "give", A)
    assert before() == state


def test_revoke_public_on_postgres_is_refused(env: Environment, server: PostgresServer) -> None:
    a_role, _ = attacker(env)
    acl = query(server, "SELECT datacl::text FROM pg_database WHERE datname = 'postgres'")
    env.apply(manifest("Grant", "lockout", namespace=A, role=a_role, database="postgres",
                       privileges=["CONNECT"], revokePublicOnDb=True))
    env.run_until_idle()

    denied(env, "Grant", "lockout", A, "reservedDatabases")
    assert query(server, "SELECT datacl::text FROM pg_database WHERE datname = 'postgres'"
                 ) == acl
    gone(env, "Grant", "lockout", A)
    assert query(server, "SELECT datacl::text FROM pg_database WHERE datname = 'postgres'"
                 ) == acl


def test_revoke_public_on_a_shared_database_is_refused(
        env: Environment, server: PostgresServer) -> None:
    """A database every namespace may name is still not one whose PUBLIC it may change."""
    _, b_db, before = victim(env, server)
    a_role, _ = attacker(env)
    set_policy(env, {"sharedDatabases": [b_db]})
    state = before()
    env.apply(manifest("Grant", "lockout", namespace=A, role=a_role, database=b_db,
                       privileges=["CONNECT"], revokePublicOnDb=True))
    env.run_until_idle()
    denied(env, "Grant", "lockout", A, "revokePublicOnDb")
    gone(env, "Grant", "lockout", A)
    assert before() == state


def test_grants_on_the_namespaces_own_database_work(
        env: Environment, server: PostgresServer) -> None:
    a_role, a_db = attacker(env)
    made(env, "Grant", "mine", A, role=a_role, database=a_db, privileges=["CONNECT", "CREATE"],
         revokePublicOnDb=True)
    ready(env, "Grant", "mine", A)
    held = query(server, "SELECT a.grantee::regrole::text, a.privilege_type FROM pg_database d, "
                         "aclexplode(d.datacl) a WHERE d.datname = %s ORDER BY 1, 2", a_db)
    assert (f'"{a_role}"', "CONNECT") in held and (f'"{a_role}"', "CREATE") in held
    assert not [row for row in held if row[0] == "-"]  # PUBLIC (grantee 0) holds nothing
    gone(env, "Grant", "mine", A)


# ---------------------------------------------------------------- DefaultPrivileges
def test_default_privileges_for_another_namespaces_role_are_refused(
        env: Environment, server: PostgresServer) -> None:
    b_role, _, before = victim(env, server)
    a_role, a_db = attacker(env)
    state = before()
    env.apply(manifest("DefaultPrivileges", "spy", namespace=A, role=a_role, targetRole=b_role,
                       database=a_db, objectType="table", privileges=["SELECT"]))
    env.run_until_idle()
    assert b_role in denied(env, "DefaultPrivileges", "spy", A, "crossNamespace")
    with server.connect(dbname=a_db) as conn:
        assert conn.execute("SELECT count(*) FROM pg_default_acl").fetchone() == (0,)
    gone(env, "DefaultPrivileges", "spy", A)
    assert before() == state


def test_default_privileges_for_the_admin_are_refused(
        env: Environment, server: PostgresServer, admin: Admin) -> None:
    a_role, a_db = attacker(env)
    env.apply(manifest("DefaultPrivileges", "spy", namespace=A, role=a_role,
                       targetRole=admin.user, database=a_db, objectType="schema",
                       privileges=["CREATE"]))
    env.run_until_idle()
    denied(env, "DefaultPrivileges", "spy", A, "adminRole")
    with server.connect(dbname=a_db) as conn:
        assert conn.execute("SELECT count(*) FROM pg_default_acl").fetchone() == (0,)
    gone(env, "DefaultPrivileges", "spy", A)


def test_default_privileges_in_another_namespaces_database_are_refused(
        env: Environment, server: PostgresServer) -> None:
    _, b_db, before = victim(env, server)
    a_role, _ = attacker(env)
    a_owner = made(env, "Role", "a-owner", A, login=False)
    state = before()
    env.apply(manifest("DefaultPrivileges", "spy", namespace=A, role=a_role, targetRole=a_owner,
                       database=b_db, objectType="table", privileges=["SELECT"]))
    env.run_until_idle()
    denied(env, "DefaultPrivileges", "spy", A, "crossNamespace")
    gone(env, "DefaultPrivileges", "spy", A)
    assert before() == state


def test_default_privileges_of_the_namespace_work(
        env: Environment, server: PostgresServer, admin: Admin) -> None:
    a_role, a_db = attacker(env)
    a_owner = made(env, "Role", "a-owner", A, login=False)
    act_as(server, admin, a_owner)
    made(env, "DefaultPrivileges", "mine", A, role=a_role, targetRole=a_owner, database=a_db,
         objectType="table", privileges=["SELECT"])
    ready(env, "DefaultPrivileges", "mine", A)
    gone(env, "DefaultPrivileges", "mine", A)


# ---------------------------------------------------------------- Schema and Extension
def test_a_schema_in_another_namespaces_database_is_refused(
        env: Environment, server: PostgresServer) -> None:
    _, b_db, before = victim(env, server)
    state = before()
    env.apply(manifest("Schema", "squat", namespace=A, external_name="squat", database=b_db))
    env.run_until_idle()
    assert b_db in denied(env, "Schema", "squat", A, "crossNamespace")
    gone(env, "Schema", "squat", A)
    assert before() == state


@pytest.mark.parametrize("extension", ["citext", "file_fdw", "dblink"])
def test_an_extension_in_another_namespaces_database_is_refused(
        env: Environment, server: PostgresServer, extension: str) -> None:
    _, b_db, before = victim(env, server)
    state = before()
    env.apply(manifest("Extension", "ext", namespace=A, extension=extension, database=b_db))
    env.run_until_idle()
    rule = "crossNamespace" if extension in DEFAULT_EXTENSIONS else "allowedExtensions"
    denied(env, "Extension", "ext", A, rule)
    gone(env, "Extension", "ext", A)
    assert before() == state


@pytest.mark.parametrize("extension", ["file_fdw", "dblink", "postgres_fdw", "adminpack"])
def test_dangerous_extensions_are_refused_even_in_the_namespaces_own_database(
        env: Environment, server: PostgresServer, extension: str) -> None:
    _, a_db = attacker(env)
    env.apply(manifest("Extension", "ext", namespace=A, extension=extension, database=a_db))
    env.run_until_idle()
    assert extension in denied(env, "Extension", "ext", A, "allowedExtensions")
    with server.connect(dbname=a_db) as conn:
        assert conn.execute("SELECT count(*) FROM pg_extension WHERE extname = %s",
                            [extension]).fetchone() == (0,)
    gone(env, "Extension", "ext", A)


def test_schema_and_extension_in_the_namespaces_own_database_work(
        env: Environment, server: PostgresServer) -> None:
    _, a_db = attacker(env)
    schema = made(env, "Schema", "s", A, database=a_db)
    made(env, "Extension", "e", A, extension="citext", database=a_db, schema=schema)
    ready(env, "Schema", "s", A)
    ready(env, "Extension", "e", A)
    with server.connect(dbname=a_db) as conn:
        note = conn.execute("SELECT obj_description(%s::regnamespace, 'pg_namespace')",
                            [schema]).fetchone()
    assert tenant_of(note[0]) == (A, "default")
    gone(env, "Extension", "e", A)
    gone(env, "Schema", "s", A)


def test_a_database_owned_by_another_namespaces_role_is_refused(
        env: Environment, server: PostgresServer) -> None:
    b_role, b_db, before = victim(env, server)
    state = before()
    env.apply(manifest("Database", "gift", namespace=A, owner=b_role))
    env.apply(manifest("Database", "clone", namespace=A, template=b_db))
    env.run_until_idle()
    denied(env, "Database", "gift", A, "crossNamespace")
    denied(env, "Database", "clone", A, "crossNamespace")
    gone(env, "Database", "gift", A)
    gone(env, "Database", "clone", A)
    assert before() == state


# ---------------------------------------------------------------- the knobs
def test_a_permissive_policy_allows_what_it_names(
        env: Environment, server: PostgresServer) -> None:
    """crossNamespace lets A grant on B's database; allowedRoleAttributes lets a role be
    made with CREATEROLE; the server's own databases stay refused."""
    _, b_db, before = victim(env, server)
    a_role, _ = attacker(env)
    state = before()
    set_policy(env, {"crossNamespace": True, "allowedRoleAttributes": ["createrole"]})
    made(env, "Grant", "shared", A, role=a_role, database=b_db, privileges=["CONNECT"])
    ready(env, "Grant", "shared", A)
    assert before() != state  # the snapshot sees what the defaults refuse
    made(env, "Role", "creator", A, createrole=True)
    ready(env, "Role", "creator", A)
    env.apply(manifest("Grant", "lockout", namespace=A, role=a_role, database="postgres",
                       privileges=["CONNECT"], revokePublicOnDb=True))
    env.run_until_idle()
    denied(env, "Grant", "lockout", A, "reservedDatabases")
    for name, kind in (("shared", "Grant"), ("creator", "Role"), ("lockout", "Grant")):
        gone(env, kind, name, A)


def test_the_policy_is_read_with_the_provider_config() -> None:
    def read(policy: Any) -> ServerConfig:
        return ServerConfig.from_provider_config(ProviderConfig(
            "pc", {"host": "h", "policy": policy}, {"username": "u", "password": "p"}))

    assert read(None).policy == Policy()
    assert read({}).policy.role_attributes == {"createdb"}
    assert read({"allowedRoleAttributes": []}).policy.role_attributes == frozenset()
    assert "dblink" not in read({}).policy.extensions
    assert not read({"allowedExtensions": ["*"]}).policy.extension_allowed("file_fdw")
    assert read({"allowedExtensions": ["*", "dblink"]}).policy.extension_allowed("dblink")
    assert read(None).config_name == "pc"
    for wrong in ({"allowedRoleAttributes": ["root"]}, {"crossNamespace": "yes"},
                  {"revokePublicOnDb": "always"}, {"allowedSettingContexts": ["sighup"]},
                  {"whatever": 1}, ["crossNamespace"], {"sharedDatabases": "db"}):
        with pytest.raises(CredentialsError) as caught:
            read(wrong)
        assert caught.value.reason == "ProviderConfigInvalid"
        assert "spec.policy" in str(caught.value)


# ---------------------------------------------------------------- fields before the finalizer
@pytest.mark.parametrize(("kind", "params"), [
    ("Grant", {"role": "r" * 100, "database": "d", "privileges": ["CONNECT"]}),
    ("Grant", {"role": "r", "database": "d" * 64, "privileges": ["CONNECT"]}),
    ("Schema", {"database": "d" * 64}),
    ("Extension", {"extension": "citext", "database": "d" * 64}),
    ("DefaultPrivileges", {"role": "r" * 64, "targetRole": "o", "database": "d",
                           "objectType": "table", "privileges": ["SELECT"]}),
    ("Grant", {"role": "r", "database": "d", "schema": "s", "privileges": ["EXECUTE"],
               "routines": [{"name": "f", "arguments": ["int)"]}]}),
    ("Role", {"validUntil": "not a date"}),
    ("Role", {"memberOf": ["m" * 64]}),
    ("Database", {"owner": "o" * 64}),
])
def test_invalid_fields_are_refused_before_the_finalizer(
        env: Environment, kind: str, params: dict[str, Any]) -> None:
    env.apply(manifest(kind, "bad", namespace=A, **params))
    env.run_until_idle()
    failed = env.condition(kind, "bad", "Failed", A)
    assert failed is not None and failed.reason == "InvalidSpec", failed
    assert not env.get(kind, "bad", A)["metadata"].get("finalizers")
    env.delete(kind, "bad", A)
    env.run_until_idle()
    assert not env.exists(kind, "bad", A)


# ---------------------------------------------------------------- one owner per target
def test_a_second_grant_on_the_same_role_and_target_is_refused(
        env: Environment, server: PostgresServer) -> None:
    """Two Grants of one role on one database, one exclusive, would undo each other at
    every poll; the second is refused, terminal, and deleting it leaves the first's."""
    a_role, a_db = attacker(env)
    made(env, "Grant", "first", A, role=a_role, database=a_db, privileges=["CONNECT"],
         exclusive=True)
    ready(env, "Grant", "first", A)
    env.apply(manifest("Grant", "second", namespace=A, role=a_role, database=a_db,
                       privileges=["CONNECT", "CREATE"]))
    env.run_until_idle()
    failed = env.condition("Grant", "second", "Failed", A)
    assert failed is not None and failed.reason == "TargetConflict", failed
    assert "team-a/first" in failed.message
    env.advance(300)
    ready(env, "Grant", "first", A)
    held = query(server, "SELECT a.privilege_type FROM pg_database d, aclexplode(d.datacl) a "
                         "WHERE d.datname = %s AND a.grantee = %s::regrole", a_db, a_role)
    assert held == [("CONNECT",)]
    gone(env, "Grant", "second", A)
    assert query(server, "SELECT a.privilege_type FROM pg_database d, aclexplode(d.datacl) a "
                         "WHERE d.datname = %s AND a.grantee = %s::regrole", a_db, a_role
                 ) == held
    # Once the first is gone, the target is free: the second, applied again, takes it.
    gone(env, "Grant", "first", A)
    made(env, "Grant", "second", A, role=a_role, database=a_db, privileges=["CREATE"])
    ready(env, "Grant", "second", A)
    gone(env, "Grant", "second", A)


def test_grants_on_different_targets_of_one_role_do_not_conflict(
        env: Environment, server: PostgresServer) -> None:
    a_role, a_db = attacker(env)
    schema = made(env, "Schema", "s", A, database=a_db)
    made(env, "Grant", "db", A, role=a_role, database=a_db, privileges=["CONNECT"])
    made(env, "Grant", "schema", A, role=a_role, database=a_db, schema=schema,
         privileges=["USAGE"])
    ready(env, "Grant", "db", A)
    ready(env, "Grant", "schema", A)
    for name in ("db", "schema"):
        gone(env, "Grant", name, A)
    gone(env, "Schema", "s", A)


def test_the_connector_answers_the_policy_without_changing_anything(
        env: Environment, server: PostgresServer, admin: Admin) -> None:
    """``PostgresConnector.admit``: the refusal an engine could ask for before it takes
    ownership."""
    from lifecycle.core.contract import ManagedResource
    from lifecycle.machines.postgres import Grant
    from lifecycle.providers.postgres.connector import PostgresConnector
    from lifecycle.providers.postgres.grant import GrantClient

    _, b_db, before = victim(env, server)
    a_role, a_db = attacker(env)
    state = before()
    config = ProviderConfig("default", {"host": server.host, "port": server.port,
                                        "sslmode": "disable"},
                            {"username": admin.user, "password": admin.password})

    def resource(database: str) -> ManagedResource:
        spec = {"forProvider": {"role": a_role, "database": database,
                                "privileges": ["CONNECT"]}}
        return ManagedResource(kind="Grant", namespace=A, name="g", uid="u1", generation=1,
                               external_name="g", parameters=Grant.parse_parameters(spec))

    connector = PostgresConnector(GrantClient)
    with pytest.raises(TerminalError) as caught:
        connector.admit(resource(b_db), config)
    assert caught.value.reason == "PolicyDenied"
    connector.admit(resource(a_db), config)  # allowed: returns
    assert before() == state


def test_a_mark_without_the_tenancy_record_gets_it_at_the_next_update(
        env: Environment, server: PostgresServer) -> None:
    """Resources marked before the record existed: observe reports them out of date, the
    update writes the record, and a Grant of the namespace may then name them."""
    role = made(env, "Role", "old", A)
    ready(env, "Role", "old", A)
    note = query(server, "SELECT shobj_description(%s::regrole, 'pg_authid')", role)[0][0]
    assert tenant_of(note) == (A, "default")
    execute(server, sql.SQL("COMMENT ON ROLE {} IS {}").format(
        sql.Identifier(role), sql.Literal(note.split("\n")[0])))  # the mark alone, as before
    env.advance(75.0)
    ready(env, "Role", "old", A)
    assert query(server, "SELECT shobj_description(%s::regrole, 'pg_authid')", role) == [
        (note,)]
    gone(env, "Role", "old", A)
