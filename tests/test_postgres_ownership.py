"""PostgreSQL roles and databases the operator did not create are never changed.

Against the real server of the session fixture: a superuser role named by a
tenant, a database created by hand, template databases and the provider's
own admin role are refused with a condition and left exactly as they were
(attributes, password verifier, comment, existence); an explicitly adopted
plain role is marked with a comment and managed from then on.
"""

from __future__ import annotations

from typing import Any

import pytest
from postgres_fixtures import Admin
from postgres_helpers import execute as run
from postgres_helpers import unique
from psycopg import sql

from lifecycle.core.kind import ADOPT, EXTERNAL_NAME
from lifecycle.core.ownership import mark_uid
from lifecycle.providers.postgres.marks import PREFIX, mark_of
from lifecycle.providers.postgres.scenarios.testing import PostgresServer, manifest
from lifecycle.testing import Environment

pytestmark = pytest.mark.postgres


def role_row(server: PostgresServer, role: str) -> tuple[Any, ...] | None:
    """Everything about a role a takeover could change: attributes, verifier (as JSON
    text, so that any timestamp reads back), comment."""
    with server.connect() as conn:
        return conn.execute(
            "SELECT pg_catalog.to_jsonb(a)::text, pg_catalog.shobj_description(a.oid, "
            "'pg_authid') FROM pg_catalog.pg_authid a WHERE rolname = %s", [role]).fetchone()


def database_row(server: PostgresServer, name: str) -> tuple[Any, ...] | None:
    with server.connect() as conn:
        return conn.execute(
            "SELECT pg_catalog.to_jsonb(d)::text, pg_catalog.shobj_description(d.oid, "
            "'pg_database') FROM pg_catalog.pg_database d WHERE datname = %s", [name]).fetchone()


def refused(env: Environment, kind: str, name: str) -> tuple[str, str]:
    failed = env.condition(kind, name, "Failed")
    synced = env.condition(kind, name, "Synced")
    assert synced is not None and synced.status.value == "False"
    assert failed is not None and failed.status.value == "True"
    return failed.reason, failed.message


def deleted(env: Environment, kind: str, name: str) -> None:
    env.delete(kind, name)
    env.advance(300)
    assert not env.exists(kind, name)


def test_a_superuser_is_never_taken_over(env: Environment, server: PostgresServer) -> None:
    victim = unique("dba_super")
    run(server, sql.SQL("CREATE ROLE {} SUPERUSER LOGIN PASSWORD 'their-own-pass-1'").format(
        sql.Identifier(victim)))
    before = role_row(server, victim)
    env.apply(manifest("Role", "r", external_name=victim))
    env.advance(300)
    reason, message = refused(env, "Role", "r")
    assert reason == "ExternalResourceNotOwned" and "superuser" in message
    assert role_row(server, victim) == before  # attributes, verifier, comment: byte for byte
    # Even asked to adopt, with adoption allowed everywhere.
    env.reconcilers["Role"].allow_adoption = frozenset({"*"})
    obj = env.get("Role", "r")
    obj["metadata"]["annotations"][ADOPT] = "true"
    env.api.replace(obj)
    env.advance(300)
    assert refused(env, "Role", "r")[0] == "ExternalResourceNotOwned"
    assert role_row(server, victim) == before
    deleted(env, "Role", "r")
    assert role_row(server, victim) == before


def test_the_admin_role_and_server_databases_are_never_adopted(
        env: Environment, server: PostgresServer, admin: Admin) -> None:
    env.reconcilers["Role"].allow_adoption = frozenset({"*"})
    env.reconcilers["Database"].allow_adoption = frozenset({"*"})
    admin_user = admin.user
    before = role_row(server, admin_user)
    env.apply(manifest("Role", "admin", external_name=admin_user))
    template = unique("tmpl")
    run(server, sql.SQL("CREATE DATABASE {} IS_TEMPLATE true").format(sql.Identifier(template)))
    templated = database_row(server, template)
    template1 = database_row(server, "template1")
    for name, external in (("t", template), ("t1", "template1"), ("pg", "postgres")):
        doc = manifest("Database", name, external_name=external)
        doc["metadata"]["annotations"][ADOPT] = "true"
        env.apply(doc)
    admin_doc = env.get("Role", "admin")
    admin_doc["metadata"]["annotations"][ADOPT] = "true"
    env.api.replace(admin_doc)
    env.advance(300)
    assert "admin role" in refused(env, "Role", "admin")[1]
    assert "template" in refused(env, "Database", "t")[1]
    assert "template" in refused(env, "Database", "t1")[1]
    assert "server itself" in refused(env, "Database", "pg")[1]
    assert role_row(server, admin_user) == before
    for name in ("admin",):
        deleted(env, "Role", name)
    for name in ("t", "t1", "pg"):
        deleted(env, "Database", name)
    assert database_row(server, template) == templated
    assert database_row(server, "template1") == template1
    assert database_row(server, "postgres") is not None
    assert role_row(server, admin_user) == before


def test_a_database_created_by_hand_is_not_dropped_with_the_tenants_object(
        env: Environment, server: PostgresServer) -> None:
    precious = unique("precious")
    run(server, sql.SQL("CREATE DATABASE {}").format(sql.Identifier(precious)))
    before = database_row(server, precious)
    env.apply(manifest("Database", "d", external_name=precious, connection_limit=3))
    env.advance(300)
    assert refused(env, "Database", "d")[0] == "ExternalResourceNotOwned"
    deleted(env, "Database", "d")
    assert database_row(server, precious) == before


def test_an_adopted_role_is_marked_and_managed_and_ours_are_marked_at_creation(
        env: Environment, server: PostgresServer) -> None:
    legacy = unique("legacy")
    run(server, sql.SQL("CREATE ROLE {} NOLOGIN CONNECTION LIMIT 2").format(
        sql.Identifier(legacy)))
    env.reconcilers["Role"].allow_adoption = frozenset({"default"})
    doc = manifest("Role", "adopted", external_name=legacy, connection_limit=5)
    doc["metadata"]["annotations"][ADOPT] = "true"
    env.apply(doc)
    env.apply(manifest("Role", "fresh"))
    env.apply(manifest("Database", "fresh-db"))
    env.run_until_idle()
    assert env.state("Role", "adopted") == "ready"
    row = role_row(server, legacy)
    assert row is not None and row[-1].startswith(PREFIX)
    assert mark_uid(mark_of(row[-1])) == env.get("Role", "adopted")["metadata"]["uid"]
    fresh = env.get("Role", "fresh")
    note = role_row(server, fresh["metadata"]["annotations"][EXTERNAL_NAME])[-1]
    assert mark_uid(mark_of(note)) == fresh["metadata"]["uid"]
    db = env.get("Database", "fresh-db")
    note = database_row(server, db["metadata"]["annotations"][EXTERNAL_NAME])[-1]
    assert mark_uid(mark_of(note)) == db["metadata"]["uid"]
    deleted(env, "Role", "adopted")
    assert role_row(server, legacy) is None  # adopted: dropped with its object
    deleted(env, "Role", "fresh")
    deleted(env, "Database", "fresh-db")


def test_a_second_object_naming_the_same_role_gets_a_conflict(
        env: Environment, server: PostgresServer) -> None:
    shared = unique("shared")
    env.namespace("team-b")
    env.apply(manifest("Role", "a", external_name=shared))
    env.run_until_idle()
    before = role_row(server, shared)
    env.apply(manifest("Role", "b", namespace="team-b", external_name=shared, createdb=True))
    env.advance(300)
    failed = env.condition("Role", "b", "Failed", "team-b")
    assert failed is not None and failed.reason == "ExternalNameConflict"
    assert role_row(server, shared) == before
    env.delete("Role", "b", "team-b")
    env.advance(120)
    assert not env.exists("Role", "b", "team-b") and role_row(server, shared) == before
    assert env.state("Role", "a") == "ready"
    deleted(env, "Role", "a")
