"""Grants on tables, sequences and routines, ``revokePublicOnDb`` and the DefaultPrivileges
kind, against the real server of the session fixture (``pytest -m postgres``).

Each test sets privileges through the kinds, changes them by hand on the server,
sees them repaired at the next poll, removes a privilege from the spec, deletes,
and checks that an owner keeps what it holds by ownership. Names are hostile
(quotes, spaces, unicode) throughout. The objects granted on are created as the
Environment's admin (the owner of the Schema it made), since a role that is not a
superuser grants only on what it owns or holds with the grant option; that is how
the same tests run under a superuser and a CREATEROLE CREATEDB admin.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from psycopg import sql

from lifecycle.core.errors import TerminalError
from lifecycle.machines.postgres import DefaultPrivileges, Grant
from lifecycle.providers.postgres.grant import recorded
from lifecycle.providers.postgres.scenarios.testing import PostgresServer, manifest
from lifecycle.testing import Environment

pytestmark = pytest.mark.postgres

#: Enough virtual time for a Ready poll, the repair it triggers and the check after.
POLL = 75.0
#: Enough virtual time for a failed object's backoff to retry.
RETRY = 400.0


def unique(prefix: str) -> str:
    """A PostgreSQL name no other test uses."""
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def hostile(prefix: str) -> str:
    """A unique name with a quote, a space, a semicolon and non-ASCII letters."""
    return unique(prefix) + '"; x ünï \'名'


def run(server: PostgresServer, db: str, *statements: sql.Composable | str,
        as_role: str | None = None) -> None:
    """Run statements out of band in ``db`` as the server's superuser (or, with ``as_role``,
    after SET ROLE to it, so what they create is that role's)."""
    with server.connect(dbname=db) as conn:
        if as_role is not None:
            conn.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(as_role)))
        for statement in statements:
            conn.execute(statement)  # type: ignore[arg-type]


def rows(server: PostgresServer, db: str, text: str, *params: Any) -> list[tuple[Any, ...]]:
    """Rows of one query in ``db``."""
    with server.connect(dbname=db) as conn:
        return conn.execute(text, params).fetchall()  # type: ignore[arg-type]


def relation_acl(server: PostgresServer, db: str, schema: str, name: str,
                 role: str) -> dict[str, bool]:
    """The role's explicit privileges on a table or sequence, each with its grant option."""
    return dict(rows(server, db, "SELECT a.privilege_type, a.is_grantable FROM pg_class c "
                                 "JOIN pg_namespace n ON n.oid = c.relnamespace, "
                                 "LATERAL aclexplode(c.relacl) a "
                                 "JOIN pg_roles r ON r.oid = a.grantee "
                                 "WHERE n.nspname = %s AND c.relname = %s AND r.rolname = %s",
                     schema, name, role))


def table_privilege(server: PostgresServer, db: str, role: str, schema: str, table: str,
                    privileges: str) -> bool:
    """Whether ``role`` holds every one of ``privileges`` on ``schema.table`` (any way)."""
    return bool(rows(server, db, "SELECT has_table_privilege(%s, format('%%I.%%I', %s::text, "
                                 "%s::text), %s)", role, schema, table, privileges)[0][0])


def routine_acl(server: PostgresServer, db: str, schema: str, name: str, arguments: str,
                role: str) -> dict[str, bool]:
    """The role's explicit privileges on a routine (by ``oidvectortypes`` of its arguments)."""
    return dict(rows(server, db, "SELECT a.privilege_type, a.is_grantable FROM pg_proc p "
                                 "JOIN pg_namespace n ON n.oid = p.pronamespace, "
                                 "LATERAL aclexplode(p.proacl) a "
                                 "JOIN pg_roles r ON r.oid = a.grantee "
                                 "WHERE n.nspname = %s AND p.proname = %s "
                                 "AND oidvectortypes(p.proargtypes) = %s AND r.rolname = %s",
                     schema, name, arguments, role))


def default_acl(server: PostgresServer, db: str, owner: str, schema: str | None, objtype: str,
                role: str) -> dict[str, bool]:
    """The role's privileges in a ``pg_default_acl`` entry."""
    return dict(rows(server, db, "SELECT a.privilege_type, a.is_grantable FROM pg_default_acl d "
                                 "JOIN pg_roles o ON o.oid = d.defaclrole "
                                 "LEFT JOIN pg_namespace n ON n.oid = d.defaclnamespace, "
                                 "LATERAL aclexplode(d.defaclacl) a "
                                 "JOIN pg_roles r ON r.oid = a.grantee "
                                 "WHERE o.rolname = %s AND d.defaclobjtype = %s "
                                 "AND r.rolname = %s AND (n.nspname IS NOT DISTINCT FROM %s)",
                     owner, objtype, role, schema))


def public_on_database(server: PostgresServer, db: str) -> set[str]:
    """PUBLIC's privileges on a database (the defaults when its ACL is unset)."""
    return {r[0] for r in rows(server, "postgres",
                               "SELECT a.privilege_type FROM pg_database d, LATERAL aclexplode("
                               "COALESCE(d.datacl, acldefault('d', d.datdba))) a "
                               "WHERE d.datname = %s AND a.grantee = 0", db)}


def setup(env: Environment, prefix: str) -> tuple[str, str, str, str]:
    """Apply Role r, Database d and Schema s (hostile role and schema names), settle, and
    return (role, database, schema, the Environment's admin: the schema's owner)."""
    role, db, schema = hostile(prefix), unique(prefix + "db"), hostile(prefix + "s")
    env.apply(manifest("Role", "r", external_name=role))
    env.apply(manifest("Database", "d", external_name=db))
    env.apply(manifest("Schema", "s", external_name=schema, database=db))
    env.run_until_idle()
    assert env.state("Schema", "s") == "ready"
    return role, db, schema, env.get("Schema", "s")["spec"]["forProvider"]["role"]


def create_tables(server: PostgresServer, db: str, schema: str, *names: str,
                  owner: str) -> None:
    """Create tables by hand, owned by ``owner``."""
    run(server, db, *(sql.SQL("CREATE TABLE {} (id int)").format(sql.Identifier(schema, n))
                      for n in names), as_role=owner)


def member_of(server: PostgresServer, admin: str, owner: str) -> None:
    """Make ``admin`` a member of ``owner`` (needed to alter ``owner``'s default privileges
    unless ``admin`` is a superuser)."""
    run(server, "postgres", sql.SQL("GRANT {} TO {}").format(sql.Identifier(owner),
                                                            sql.Identifier(admin)))


def parse(kind: Any, **parameters: Any) -> Any:
    """The kind's parameters parsed from ``spec.forProvider``."""
    return kind.parse_parameters({"forProvider": parameters})


# ------------------------------------------------------------------ the spec
@pytest.mark.parametrize(("parameters", "message"), [
    ({"tables": ["t"], "privileges": ["SELECT"]}, "'tables' needs 'schema'"),
    ({"schema": "s", "tables": ["t"], "sequences": ["q"], "privileges": ["SELECT"]},
     "set one of 'tables', 'sequences' and 'routines'"),
    ({"schema": "s", "tables": ["t"], "privileges": ["EXECUTE"]},
     "EXECUTE do not apply to a table"),
    ({"schema": "s", "sequences": ["q"], "privileges": ["INSERT"]},
     "INSERT do not apply to a sequence"),
    ({"schema": "s", "routines": [{"name": "f"}], "privileges": ["SELECT"]},
     "SELECT do not apply to a routine"),
    ({"schema": "s", "privileges": ["SELECT"]}, "SELECT do not apply to a schema"),
    ({"schema": "s", "tables": ["*", "t"], "privileges": ["SELECT"]}, "stands alone"),
    ({"schema": "s", "tables": [], "privileges": ["SELECT"]}, "non-empty list"),
    ({"schema": "s", "tables": "t", "privileges": ["SELECT"]}, "'tables' must be a list"),
    ({"schema": "s", "routines": [{"name": "*", "arguments": ["int"]}],
      "privileges": ["EXECUTE"]}, "stands alone"),
    ({"schema": "s", "routines": [{"name": "f", "args": []}], "privileges": ["EXECUTE"]},
     "'routines' must be a list of {name, arguments}"),
    ({"schema": "s", "routines": [{"name": "f", "arguments": "int"}],
      "privileges": ["EXECUTE"]}, "'arguments' must be a list of type names"),
    ({"privileges": ["CONNECT"], "revokePublicOnDb": "yes"}, "'revokePublicOnDb' must be"),
    ({"schema": "s", "columns": ["a"], "privileges": ["SELECT"]},
     "'columns' needs 'tables' naming exactly one table"),
    ({"schema": "s", "tables": ["t", "u"], "columns": ["a"], "privileges": ["SELECT"]},
     "'columns' needs 'tables' naming exactly one table"),
    ({"schema": "s", "tables": ["*"], "columns": ["a"], "privileges": ["SELECT"]},
     "'columns' needs 'tables' naming exactly one table"),
    ({"schema": "s", "sequences": ["q"], "columns": ["a"], "privileges": ["SELECT"]},
     "'columns' needs 'tables' naming exactly one table"),
    ({"schema": "s", "tables": ["t"], "columns": ["a"], "privileges": ["DELETE"]},
     "DELETE do not apply to a column"),
    ({"schema": "s", "tables": ["t"], "columns": ["a"], "privileges": ["TRUNCATE", "SELECT"]},
     "TRUNCATE do not apply to a column"),
    ({"schema": "s", "tables": ["t"], "columns": ["*"], "privileges": ["SELECT"]},
     "'columns' names columns"),
    ({"schema": "s", "tables": ["t"], "columns": [], "privileges": ["SELECT"]},
     "'columns' must be a non-empty list"),
    ({"schema": "s", "tables": ["t"], "columns": "a", "privileges": ["SELECT"]},
     "'columns' must be a list"),
])
def test_grant_specs_that_cannot_work_are_refused(parameters: dict[str, Any],
                                                  message: str) -> None:
    with pytest.raises(TerminalError, match=message.replace("{", r"\{").replace("(", r"\(")):
        parse(Grant, role="r", database="d", **parameters)


def test_grant_specs_are_normalised() -> None:
    tables = parse(Grant, role="r", database="d", schema="s", tables=["b", "a", "b"],
                   privileges=["all privileges"])
    assert tables.tables == ("a", "b")
    assert tables.privileges == ("DELETE", "INSERT", "REFERENCES", "SELECT", "TRIGGER",
                                 "TRUNCATE", "UPDATE")
    assert (tables.keyword, tables.every) == ("TABLE", False)
    every = parse(Grant, role="r", database="d", schema="s", sequences=["*"],
                  privileges=["ALL"])
    assert (every.keyword, every.every, every.privileges) == (
        "SEQUENCE", True, ("SELECT", "UPDATE", "USAGE"))
    routine = parse(Grant, role="r", database="d", schema="s",
                    routines=[{"name": "f", "arguments": [" integer ", "text"]}],
                    privileges=["execute"])
    assert routine.routines[0].arguments == ("integer", "text")
    assert routine.routines[0].label == "f(integer, text)"
    columns = parse(Grant, role="r", database="d", schema="s", tables=["t"],
                    columns=["b", "a", "b"], privileges=["all"])
    assert (columns.keyword, columns.columns, columns.table) == ("COLUMN", ("a", "b"), "t")
    assert columns.privileges == ("INSERT", "REFERENCES", "SELECT", "UPDATE")
    # The record of a column Grant is about its table: another table is another scope.
    assert columns.scope == {"role": "r", "on": "COLUMN", "database": "d", "schema": "s",
                             "table": "t"}
    assert tables.table is None and "table" not in tables.scope


@pytest.mark.parametrize(("parameters", "message"), [
    ({"role": "a", "targetRole": "a", "objectType": "table", "privileges": ["SELECT"]},
     "the owner holds every privilege"),
    ({"role": "a", "targetRole": "o", "objectType": "view", "privileges": ["SELECT"]},
     "'objectType' must be one of"),
    ({"role": "a", "targetRole": "o", "objectType": "function", "privileges": ["SELECT"]},
     "SELECT do not apply to objectType function"),
    ({"role": "a", "targetRole": "o", "objectType": "schema", "schema": "s",
      "privileges": ["USAGE"]}, "'schema' cannot be set with objectType schema"),
    ({"role": "a", "targetRole": "", "objectType": "table", "privileges": ["SELECT"]},
     "'targetRole' must be a non-empty string"),
])
def test_default_privileges_specs_that_cannot_work_are_refused(parameters: dict[str, Any],
                                                               message: str) -> None:
    with pytest.raises(TerminalError, match=message):
        parse(DefaultPrivileges, database="d", **parameters)


# ---------------------------------------------------------------- named tables
def test_grant_on_named_tables_is_set_repaired_narrowed_and_revoked(
    env: Environment, server: PostgresServer
) -> None:
    role, db, schema, admin = setup(env, "tg")
    first, second = "t one ü'\"", "t2"
    create_tables(server, db, schema, first, second, owner=admin)
    env.apply(manifest("Grant", "g", role=role, database=db, schema=schema,
                       tables=[first, second], privileges=["SELECT", "INSERT"],
                       withOption="GRANT", exclusive=True))
    env.run_until_idle()

    assert env.state("Grant", "g") == "ready"
    both = {"INSERT": True, "SELECT": True}
    assert relation_acl(server, db, schema, first, role) == both
    assert relation_acl(server, db, schema, second, role) == both
    assert env.get("Grant", "g")["status"]["atProvider"]["objects"] == 2

    # Drift by hand: one privilege revoked, another granted, the grant option taken.
    run(server, db,
        sql.SQL("REVOKE INSERT ON {} FROM {}").format(sql.Identifier(schema, first),
                                                      sql.Identifier(role)),
        sql.SQL("REVOKE GRANT OPTION FOR SELECT ON {} FROM {}").format(
            sql.Identifier(schema, second), sql.Identifier(role)),
        sql.SQL("GRANT DELETE ON {} TO {}").format(sql.Identifier(schema, second),
                                                   sql.Identifier(role)))
    assert relation_acl(server, db, schema, first, role) == {"SELECT": True}
    env.advance(POLL)
    assert ("ready", "updating", "update") in env.history("Grant", "g")
    assert relation_acl(server, db, schema, first, role) == both
    assert relation_acl(server, db, schema, second, role) == both

    # A privilege removed from the spec is revoked.
    env.apply(manifest("Grant", "g", role=role, database=db, schema=schema,
                       tables=[first, second], privileges=["SELECT"], withOption="GRANT",
                       exclusive=True))
    env.run_until_idle()
    assert relation_acl(server, db, schema, first, role) == {"SELECT": True}
    assert relation_acl(server, db, schema, second, role) == {"SELECT": True}

    env.delete("Grant", "g")
    env.run_until_idle()
    assert not env.exists("Grant", "g")
    assert relation_acl(server, db, schema, first, role) == {}
    assert relation_acl(server, db, schema, second, role) == {}
    # The table's owner kept every privilege it holds by ownership.
    assert table_privilege(server, db, admin, schema, first, "SELECT, INSERT, DELETE")


def test_a_missing_named_table_is_waited_for(env: Environment, server: PostgresServer) -> None:
    role, db, schema, admin = setup(env, "tw")
    env.apply(manifest("Grant", "g", role=role, database=db, schema=schema,
                       tables=["later"], privileges=["SELECT"]))
    env.advance(10.0)
    failed = env.condition("Grant", "g", "Failed")
    assert (env.state("Grant", "g"), failed.reason) == ("failed", "DependencyMissing")
    assert "later" in failed.message

    create_tables(server, db, schema, "later", owner=admin)
    env.advance(RETRY)
    assert env.state("Grant", "g") == "ready"
    assert relation_acl(server, db, schema, "later", role) == {"SELECT": False}


def test_a_grant_naming_only_tables_the_role_owns_is_refused(
    env: Environment, server: PostgresServer
) -> None:
    role, db, schema, _ = setup(env, "to")
    run(server, db, sql.SQL("GRANT CREATE ON SCHEMA {} TO {}").format(
        sql.Identifier(schema), sql.Identifier(role)))
    create_tables(server, db, schema, "mine", owner=role)
    env.apply(manifest("Grant", "g", role=role, database=db, schema=schema, tables=["mine"],
                       privileges=["SELECT"], exclusive=True))
    env.advance(10.0)
    failed = env.condition("Grant", "g", "Failed")
    assert (env.state("Grant", "g"), failed.reason) == ("failed", "InvalidSpec")
    assert "by ownership" in failed.message

    env.delete("Grant", "g")
    env.run_until_idle()
    assert not env.exists("Grant", "g")
    assert table_privilege(server, db, role, schema, "mine", "SELECT, INSERT, DELETE")


# ----------------------------------------------------------------- every table
def test_every_table_covers_later_tables_and_skips_the_roles_own(
    env: Environment, server: PostgresServer
) -> None:
    role, db, schema, admin = setup(env, "te")
    env.apply(manifest("Grant", "g", role=role, database=db, schema=schema, tables=["*"],
                       privileges=["SELECT"]))
    env.advance(10.0)
    # An empty schema gives the Grant nothing to hold: it waits for a table.
    failed = env.condition("Grant", "g", "Failed")
    assert (env.state("Grant", "g"), failed.reason) == ("failed", "DependencyMissing")
    assert "nothing to grant" in failed.message

    create_tables(server, db, schema, "a", owner=admin)
    run(server, db, sql.SQL("CREATE VIEW {} AS SELECT 1 AS one").format(
        sql.Identifier(schema, "v ü")), as_role=admin)
    env.advance(RETRY)
    assert env.state("Grant", "g") == "ready"
    assert relation_acl(server, db, schema, "a", role) == {"SELECT": False}
    assert relation_acl(server, db, schema, "v ü", role) == {"SELECT": False}

    # A table created later is covered at the next poll; one the role owns is left alone.
    run(server, db, sql.SQL("GRANT CREATE ON SCHEMA {} TO {}").format(
        sql.Identifier(schema), sql.Identifier(role)))
    create_tables(server, db, schema, "b", owner=admin)
    create_tables(server, db, schema, "own", owner=role)
    env.advance(POLL)
    assert env.state("Grant", "g") == "ready"
    assert relation_acl(server, db, schema, "b", role) == {"SELECT": False}
    assert env.get("Grant", "g")["status"]["atProvider"]["owned"] == ["own"]

    env.delete("Grant", "g")
    env.run_until_idle()
    assert not env.exists("Grant", "g")
    for table in ("a", "b", "v ü"):
        assert relation_acl(server, db, schema, table, role) == {}
    assert relation_acl(server, db, schema, "own", role) == {}  # never granted nor revoked
    assert table_privilege(server, db, role, schema, "own", "SELECT, INSERT, TRUNCATE")


# ------------------------------------------------------------------- sequences
def test_grant_on_sequences_is_set_repaired_and_revoked(
    env: Environment, server: PostgresServer
) -> None:
    role, db, schema, admin = setup(env, "sq")
    sequence = "seq ü\"'"
    run(server, db, sql.SQL("CREATE SEQUENCE {}").format(sql.Identifier(schema, sequence)),
        as_role=admin)
    env.apply(manifest("Grant", "g", role=role, database=db, schema=schema,
                       sequences=[sequence], privileges=["USAGE", "SELECT"]))
    env.run_until_idle()
    assert env.state("Grant", "g") == "ready"
    assert relation_acl(server, db, schema, sequence, role) == {"SELECT": False,
                                                                "USAGE": False}

    run(server, db, sql.SQL("REVOKE USAGE ON SEQUENCE {} FROM {}").format(
        sql.Identifier(schema, sequence), sql.Identifier(role)))
    env.advance(POLL)
    assert relation_acl(server, db, schema, sequence, role) == {"SELECT": False,
                                                                "USAGE": False}

    env.apply(manifest("Grant", "g", role=role, database=db, schema=schema,
                       sequences=[sequence], privileges=["USAGE"], exclusive=True))
    env.run_until_idle()
    assert relation_acl(server, db, schema, sequence, role) == {"USAGE": False}

    env.delete("Grant", "g")
    env.run_until_idle()
    assert relation_acl(server, db, schema, sequence, role) == {}


# -------------------------------------------------------------------- routines
def test_grant_on_routines_picks_the_overload_and_is_repaired_and_revoked(
    env: Environment, server: PostgresServer
) -> None:
    role, db, schema, admin = setup(env, "fn")
    function = 'f"; ü'
    run(server, db,
        sql.SQL("CREATE FUNCTION {}(a integer, b text) RETURNS int LANGUAGE sql "
                "AS 'SELECT 1'").format(sql.Identifier(schema, function)),
        sql.SQL("CREATE FUNCTION {}(a bigint) RETURNS int LANGUAGE sql "
                "AS 'SELECT 2'").format(sql.Identifier(schema, function)),
        sql.SQL("CREATE PROCEDURE {}() LANGUAGE sql AS 'SELECT 3'").format(
            sql.Identifier(schema, "p")), as_role=admin)
    env.apply(manifest("Grant", "g", role=role, database=db, schema=schema,
                       routines=[{"name": function, "arguments": ["int4", "character varying"]},
                                 {"name": "p"}],
                       privileges=["EXECUTE"], withOption="GRANT"))
    env.advance(10.0)
    # No f(integer, varchar): that overload does not exist, so the Grant waits for it.
    assert env.condition("Grant", "g", "Failed").reason == "DependencyMissing"
    assert routine_acl(server, db, schema, "p", "", role) == {"EXECUTE": True}

    env.apply(manifest("Grant", "g", role=role, database=db, schema=schema,
                       routines=[{"name": function, "arguments": ["int4", "text"]},
                                 {"name": "p"}],
                       privileges=["EXECUTE"], withOption="GRANT"))
    env.advance(RETRY)
    assert env.state("Grant", "g") == "ready"
    assert routine_acl(server, db, schema, function, "integer, text", role) == {
        "EXECUTE": True}
    assert routine_acl(server, db, schema, function, "bigint", role) == {}

    run(server, db, sql.SQL("REVOKE EXECUTE ON FUNCTION {}(integer, text) FROM {}").format(
        sql.Identifier(schema, function), sql.Identifier(role)))
    env.advance(POLL)
    assert routine_acl(server, db, schema, function, "integer, text", role) == {
        "EXECUTE": True}

    env.delete("Grant", "g")
    env.run_until_idle()
    assert routine_acl(server, db, schema, function, "integer, text", role) == {}
    assert routine_acl(server, db, schema, "p", "", role) == {}


def test_every_routine_of_a_schema(env: Environment, server: PostgresServer) -> None:
    role, db, schema, admin = setup(env, "fa")
    run(server, db, *(sql.SQL("CREATE FUNCTION {}() RETURNS int LANGUAGE sql "
                              "AS 'SELECT 1'").format(sql.Identifier(schema, n))
                      for n in ("one", "two")), as_role=admin)
    env.apply(manifest("Grant", "g", role=role, database=db, schema=schema,
                       routines=[{"name": "*"}], privileges=["ALL"]))
    env.run_until_idle()
    assert env.state("Grant", "g") == "ready"
    for name in ("one", "two"):
        assert routine_acl(server, db, schema, name, "", role) == {"EXECUTE": False}
    env.delete("Grant", "g")
    env.run_until_idle()
    for name in ("one", "two"):
        assert routine_acl(server, db, schema, name, "", role) == {}


# --------------------------------------------------------------------- columns
def column_acl(server: PostgresServer, db: str, schema: str, table: str, column: str,
               role: str) -> dict[str, bool]:
    """The role's privileges in a column's own ACL, each with its grant option."""
    return dict(rows(server, db, "SELECT x.privilege_type, x.is_grantable FROM pg_attribute a "
                                 "JOIN pg_class c ON c.oid = a.attrelid "
                                 "JOIN pg_namespace n ON n.oid = c.relnamespace, "
                                 "LATERAL aclexplode(a.attacl) x "
                                 "JOIN pg_roles r ON r.oid = x.grantee "
                                 "WHERE n.nspname = %s AND c.relname = %s AND a.attname = %s "
                                 "AND r.rolname = %s", schema, table, column, role))


def column_privilege(server: PostgresServer, db: str, role: str, schema: str, table: str,
                     column: str, privilege: str) -> bool:
    """Whether ``role`` holds ``privilege`` on a column (any way: column or table ACL)."""
    return bool(rows(server, db, "SELECT has_column_privilege(%s, c.oid, a.attnum, %s) "
                                 "FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid "
                                 "JOIN pg_namespace n ON n.oid = c.relnamespace "
                                 "WHERE n.nspname = %s AND c.relname = %s AND a.attname = %s",
                     role, privilege, schema, table, column)[0][0])


#: Column names no identifier quoting mistake survives.
COLUMN_A, COLUMN_B = 'a"; DROP TABLE x; -- ü', "b '名' ,c"


def test_grant_on_columns_is_set_repaired_narrowed_and_revoked(
    env: Environment, server: PostgresServer
) -> None:
    role, db, schema, admin = setup(env, "col")
    table = "t \"ü\" ;'"
    run(server, db, sql.SQL("CREATE TABLE {} ({} int, {} text, c int)").format(
        sql.Identifier(schema, table), sql.Identifier(COLUMN_A), sql.Identifier(COLUMN_B)),
        as_role=admin)
    env.apply(manifest("Grant", "g", role=role, database=db, schema=schema, tables=[table],
                       columns=[COLUMN_A, COLUMN_B], privileges=["SELECT", "UPDATE"]))
    env.run_until_idle()
    assert env.state("Grant", "g") == "ready"
    both = {"SELECT": False, "UPDATE": False}
    assert column_acl(server, db, schema, table, COLUMN_A, role) == both
    assert column_acl(server, db, schema, table, COLUMN_B, role) == both
    # On those columns only: not on the table, not on the third column.
    assert relation_acl(server, db, schema, table, role) == {}
    assert column_acl(server, db, schema, table, "c", role) == {}
    assert not column_privilege(server, db, role, schema, table, "c", "SELECT")
    assert column_privilege(server, db, role, schema, table, COLUMN_A, "SELECT")
    at = env.get("Grant", "g")["status"]["atProvider"]
    assert at["scope"] == {"role": role, "on": "COLUMN", "database": db, "schema": schema,
                           "table": table}
    assert (at["privileges"], at["names"], at["objects"]) == (
        ["SELECT", "UPDATE"], sorted([COLUMN_A, COLUMN_B]), 2)

    # Drift by hand: UPDATE taken from one column, INSERT given on the third.
    run(server, db,
        sql.SQL("REVOKE UPDATE ({}) ON {} FROM {}").format(
            sql.Identifier(COLUMN_A), sql.Identifier(schema, table), sql.Identifier(role)),
        sql.SQL("GRANT INSERT (c) ON {} TO {}").format(sql.Identifier(schema, table),
                                                       sql.Identifier(role)))
    assert column_acl(server, db, schema, table, COLUMN_A, role) == {"SELECT": False}
    env.advance(POLL)
    assert ("ready", "updating", "update") in env.history("Grant", "g")
    assert column_acl(server, db, schema, table, COLUMN_A, role) == both

    # UPDATE removed from the spec (no exclusive): revoked on both columns, from the record.
    env.apply(manifest("Grant", "g", role=role, database=db, schema=schema, tables=[table],
                       columns=[COLUMN_A, COLUMN_B], privileges=["SELECT"]))
    env.run_until_idle()
    assert env.state("Grant", "g") == "ready"
    assert column_acl(server, db, schema, table, COLUMN_A, role) == {"SELECT": False}
    assert column_acl(server, db, schema, table, COLUMN_B, role) == {"SELECT": False}
    at = env.get("Grant", "g")["status"]["atProvider"]
    assert at["privileges"] == ["SELECT"] and "revoking" not in at

    env.delete("Grant", "g")
    env.run_until_idle()
    assert not env.exists("Grant", "g")
    assert column_acl(server, db, schema, table, COLUMN_A, role) == {}
    assert column_acl(server, db, schema, table, COLUMN_B, role) == {}
    # What the Grant never gave stays; the owner keeps every privilege by ownership.
    assert column_acl(server, db, schema, table, "c", role) == {"INSERT": False}
    assert column_privilege(server, db, admin, schema, table, COLUMN_A, "SELECT")
    assert table_privilege(server, db, admin, schema, table, "SELECT, UPDATE")


def test_grant_on_columns_waits_for_them_and_refuses_the_tables_owner(
    env: Environment, server: PostgresServer
) -> None:
    role, db, schema, admin = setup(env, "cw")
    create_tables(server, db, schema, "t", owner=admin)
    env.apply(manifest("Grant", "g", role=role, database=db, schema=schema, tables=["t"],
                       columns=["id", COLUMN_A], privileges=["REFERENCES"], exclusive=True))
    env.advance(10.0)
    failed = env.condition("Grant", "g", "Failed")
    assert (env.state("Grant", "g"), failed.reason) == ("failed", "DependencyMissing")
    assert COLUMN_A in failed.message and "table 't'" in failed.message
    # The column that exists was granted meanwhile.
    assert column_acl(server, db, schema, "t", "id", role) == {"REFERENCES": False}

    # exclusive: a privilege given by hand on a named column is revoked once it is there.
    run(server, db, sql.SQL("ALTER TABLE {} ADD COLUMN {} int").format(
        sql.Identifier(schema, "t"), sql.Identifier(COLUMN_A)),
        sql.SQL("GRANT SELECT ({}) ON {} TO {}").format(
            sql.Identifier(COLUMN_A), sql.Identifier(schema, "t"), sql.Identifier(role)),
        as_role=admin)
    env.advance(RETRY)
    assert env.state("Grant", "g") == "ready"
    assert column_acl(server, db, schema, "t", COLUMN_A, role) == {"REFERENCES": False}
    env.delete("Grant", "g")
    env.run_until_idle()
    assert column_acl(server, db, schema, "t", "id", role) == {}
    assert column_acl(server, db, schema, "t", COLUMN_A, role) == {}

    # A Grant on columns of a table the role owns is refused; deleting it strips nothing.
    run(server, db, sql.SQL("GRANT CREATE ON SCHEMA {} TO {}").format(
        sql.Identifier(schema), sql.Identifier(role)))
    create_tables(server, db, schema, "mine", owner=role)
    env.apply(manifest("Grant", "o", role=role, database=db, schema=schema, tables=["mine"],
                       columns=["id"], privileges=["SELECT"]))
    env.advance(10.0)
    failed = env.condition("Grant", "o", "Failed")
    assert (env.state("Grant", "o"), failed.reason) == ("failed", "InvalidSpec")
    assert "by ownership" in failed.message
    env.delete("Grant", "o")
    env.run_until_idle()
    assert not env.exists("Grant", "o")
    assert table_privilege(server, db, role, schema, "mine", "SELECT, INSERT")


# ------------------------------------------------------------ withOption dropped
def test_dropping_with_option_takes_back_the_grant_option_only(
    env: Environment, server: PostgresServer
) -> None:
    role, db = hostile("wo"), unique("wodb")
    env.apply(manifest("Role", "r", external_name=role))
    env.apply(manifest("Database", "d", external_name=db))
    env.apply(manifest("Grant", "g", role=role, database=db, privileges=["CONNECT", "CREATE"],
                       withOption="GRANT"))
    env.run_until_idle()
    assert env.state("Grant", "g") == "ready"
    assert database_grants(server, db, role) == {"CONNECT": True, "CREATE": True}
    assert env.get("Grant", "g")["status"]["atProvider"]["grantOption"] == ["CONNECT",
                                                                            "CREATE"]
    # TEMPORARY with the grant option, given by hand: never in the Grant's record.
    run(server, "postgres", sql.SQL("GRANT TEMPORARY ON DATABASE {} TO {} WITH GRANT OPTION"
                                    ).format(sql.Identifier(db), sql.Identifier(role)))

    env.apply(manifest("Grant", "g", role=role, database=db, privileges=["CONNECT", "CREATE"]))
    env.run_until_idle()
    assert env.state("Grant", "g") == "ready"
    assert ("ready", "updating", "update") in env.history("Grant", "g")
    assert database_grants(server, db, role) == {"CONNECT": False, "CREATE": False,
                                                 "TEMPORARY": True}
    at = env.get("Grant", "g")["status"]["atProvider"]
    assert at["privileges"] == ["CONNECT", "CREATE"]
    assert "grantOption" not in at and "revokingGrantOption" not in at

    # The option given back by hand is not the Grant's any more: it stays.
    run(server, "postgres", sql.SQL("GRANT CONNECT ON DATABASE {} TO {} WITH GRANT OPTION"
                                    ).format(sql.Identifier(db), sql.Identifier(role)))
    env.advance(POLL)
    assert database_grants(server, db, role)["CONNECT"] is True
    assert env.state("Grant", "g") == "ready"


def test_dropping_with_option_on_columns_and_tables(env: Environment,
                                                    server: PostgresServer) -> None:
    role, db, schema, admin = setup(env, "wc")
    create_tables(server, db, schema, "t", "u", owner=admin)
    env.apply(manifest("Grant", "c", role=role, database=db, schema=schema, tables=["t"],
                       columns=["id"], privileges=["SELECT", "INSERT"], withOption="GRANT"))
    env.apply(manifest("Grant", "g", role=role, database=db, schema=schema, tables=["u"],
                       privileges=["SELECT", "UPDATE"], withOption="GRANT"))
    env.run_until_idle()
    assert column_acl(server, db, schema, "t", "id", role) == {"INSERT": True, "SELECT": True}
    assert relation_acl(server, db, schema, "u", role) == {"SELECT": True, "UPDATE": True}

    # The columns' Grant drops the option and INSERT; the table's drops only the option.
    env.apply(manifest("Grant", "c", role=role, database=db, schema=schema, tables=["t"],
                       columns=["id"], privileges=["SELECT"]))
    env.apply(manifest("Grant", "g", role=role, database=db, schema=schema, tables=["u"],
                       privileges=["SELECT", "UPDATE"]))
    env.run_until_idle()
    assert (env.state("Grant", "c"), env.state("Grant", "g")) == ("ready", "ready")
    assert column_acl(server, db, schema, "t", "id", role) == {"SELECT": False}
    assert relation_acl(server, db, schema, "u", role) == {"SELECT": False, "UPDATE": False}
    for name in ("c", "g"):
        assert "revokingGrantOption" not in env.get("Grant", name)["status"]["atProvider"]


def test_a_grant_option_still_to_revoke_stays_in_the_record(server: PostgresServer) -> None:
    from lifecycle.core.contract import ManagedResource
    from lifecycle.providers.postgres.config import ServerConfig, Session
    from lifecycle.providers.postgres.grant import GrantClient

    role, db = hostile("ok"), unique("okdb")
    run(server, "postgres", sql.SQL("CREATE ROLE {}").format(sql.Identifier(role)),
        sql.SQL("CREATE DATABASE {}").format(sql.Identifier(db)),
        sql.SQL("GRANT CONNECT, CREATE ON DATABASE {} TO {} WITH GRANT OPTION").format(
            sql.Identifier(db), sql.Identifier(role)))
    want = parse(Grant, role=role, database=db, privileges=["CONNECT", "CREATE"])
    client = GrantClient(Session.open(ServerConfig(
        host=server.host, port=server.port, username=server.user, password=server.password,
        sslmode="disable")))

    def resource(observed: dict[str, Any]) -> ManagedResource:
        return ManagedResource(kind="Grant", namespace="default", name="g", uid="u",
                               generation=2, external_name="g", parameters=want,
                               observed=observed)

    try:
        # Without a record, or with one of another scope, the option is not the Grant's.
        assert client.observe(resource({})).up_to_date
        elsewhere = {"scope": {**want.scope, "role": "other"}, "grantOption": ["CONNECT"]}
        assert client.observe(resource(elsewhere)).up_to_date
        first = client.observe(resource({"scope": want.scope,
                                         "privileges": ["CONNECT", "CREATE"],
                                         "grantOption": ["CONNECT"]}))
        assert not first.up_to_date
        assert first.observed["revokingGrantOption"] == ["CONNECT"]
        assert "grantOption" not in first.observed
        # The update never ran: the next observation still knows the option is to go.
        second = client.observe(resource(dict(first.observed)))
        assert second.observed["revokingGrantOption"] == ["CONNECT"]
        client.update(resource(dict(second.observed)))
        assert database_grants(server, db, role) == {"CONNECT": False, "CREATE": True}
        third = client.observe(resource(dict(second.observed)))
        assert third.up_to_date and "revokingGrantOption" not in third.observed
    finally:
        client.close()
        run(server, "postgres", sql.SQL("DROP DATABASE {}").format(sql.Identifier(db)),
            sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


# ------------------------------------------------------------ revokePublicOnDb
def test_revoke_public_on_db_keeps_public_out_and_survives_deletion(
    env: Environment, server: PostgresServer
) -> None:
    role, db = hostile("pr"), unique("pdb") + " ü'"
    env.apply(manifest("Role", "r", external_name=role))
    env.apply(manifest("Database", "d", external_name=db))
    env.run_until_idle()
    owner = env.get("Database", "d")["spec"]["forProvider"]["owner"]
    assert public_on_database(server, db) == {"CONNECT", "TEMPORARY"}

    env.apply(manifest("Grant", "g", role=role, database=db, privileges=["CONNECT"],
                       revokePublicOnDb=True))
    env.run_until_idle()
    assert env.state("Grant", "g") == "ready"
    assert public_on_database(server, db) == set()
    assert env.get("Grant", "g")["status"]["atProvider"]["publicOnDb"] is False

    run(server, "postgres", sql.SQL("GRANT CONNECT ON DATABASE {} TO PUBLIC").format(
        sql.Identifier(db)))
    env.advance(POLL)
    assert ("ready", "updating", "update") in env.history("Grant", "g")
    assert public_on_database(server, db) == set()

    env.delete("Grant", "g")
    env.run_until_idle()
    assert not env.exists("Grant", "g")
    # Deleting the Grant revokes its own privileges and leaves PUBLIC revoked; the
    # database's owner keeps every privilege it holds by ownership.
    assert public_on_database(server, db) == set()
    assert rows(server, "postgres", "SELECT has_database_privilege(%s, %s, 'CONNECT'), "
                                    "has_database_privilege(%s, %s, 'CONNECT'), "
                                    "has_database_privilege(%s, %s, 'CREATE, TEMPORARY')",
                role, db, owner, db, owner, db) == [(False, True, True)]


def test_revoke_public_on_db_with_a_schema_grant(env: Environment,
                                                 server: PostgresServer) -> None:
    role, db, schema, _ = setup(env, "ps")
    env.apply(manifest("Grant", "g", role=role, database=db, schema=schema,
                       privileges=["USAGE"], revokePublicOnDb=True))
    env.run_until_idle()
    assert env.state("Grant", "g") == "ready"
    assert public_on_database(server, db) == set()


# ------------------------------------------------------------ DefaultPrivileges
def test_default_privileges_are_set_repaired_narrowed_and_revoked(
    env: Environment, server: PostgresServer
) -> None:
    role, db, schema, admin = setup(env, "dp")
    owner = hostile("downer")
    env.apply(manifest("Role", "o", external_name=owner))
    env.run_until_idle()
    member_of(server, admin, owner)
    run(server, db, sql.SQL("GRANT CREATE, USAGE ON SCHEMA {} TO {}").format(
        sql.Identifier(schema), sql.Identifier(owner)))
    env.apply(manifest("DefaultPrivileges", "dp", role=role, targetRole=owner, database=db,
                       schema=schema, objectType="table", privileges=["SELECT", "INSERT"],
                       withOption="GRANT", exclusive=True))
    env.run_until_idle()
    assert env.state("DefaultPrivileges", "dp") == "ready"
    both = {"INSERT": True, "SELECT": True}
    assert default_acl(server, db, owner, schema, "r", role) == both

    # A table the owner creates now gives the role the privileges; the owner keeps all.
    create_tables(server, db, schema, "new one", owner=owner)
    assert relation_acl(server, db, schema, "new one", role) == both

    # Drift by hand: repaired at the next poll.
    run(server, db, sql.SQL("ALTER DEFAULT PRIVILEGES FOR ROLE {} IN SCHEMA {} "
                            "REVOKE INSERT ON TABLES FROM {}").format(
        sql.Identifier(owner), sql.Identifier(schema), sql.Identifier(role)),
        sql.SQL("ALTER DEFAULT PRIVILEGES FOR ROLE {} IN SCHEMA {} "
                "GRANT DELETE ON TABLES TO {}").format(
        sql.Identifier(owner), sql.Identifier(schema), sql.Identifier(role)))
    assert default_acl(server, db, owner, schema, "r", role) == {"SELECT": True,
                                                                 "DELETE": False}
    env.advance(POLL)
    assert ("ready", "updating", "update") in env.history("DefaultPrivileges", "dp")
    assert default_acl(server, db, owner, schema, "r", role) == both

    # A privilege removed from the spec is revoked.
    env.apply(manifest("DefaultPrivileges", "dp", role=role, targetRole=owner, database=db,
                       schema=schema, objectType="table", privileges=["SELECT"],
                       withOption="GRANT", exclusive=True))
    env.run_until_idle()
    assert default_acl(server, db, owner, schema, "r", role) == {"SELECT": True}

    env.delete("DefaultPrivileges", "dp")
    env.run_until_idle()
    assert not env.exists("DefaultPrivileges", "dp")
    assert default_acl(server, db, owner, schema, "r", role) == {}
    create_tables(server, db, schema, "after", owner=owner)
    assert relation_acl(server, db, schema, "after", role) == {}
    # Objects created meanwhile keep what they were given; the owner holds every privilege.
    assert relation_acl(server, db, schema, "new one", role) == both
    assert table_privilege(server, db, owner, schema, "after", "SELECT, INSERT, DELETE, TRUNCATE")


def test_default_privileges_on_functions_of_the_whole_database(
    env: Environment, server: PostgresServer
) -> None:
    role, db, _, admin = setup(env, "df")
    owner = hostile("fowner")
    env.apply(manifest("Role", "o", external_name=owner))
    env.run_until_idle()
    member_of(server, admin, owner)
    env.apply(manifest("DefaultPrivileges", "dp", role=role, targetRole=owner, database=db,
                       objectType="FUNCTION", privileges=["ALL"]))
    env.run_until_idle()
    assert env.state("DefaultPrivileges", "dp") == "ready"
    assert default_acl(server, db, owner, None, "f", role) == {"EXECUTE": False}
    assert env.get("DefaultPrivileges", "dp")["status"]["atProvider"]["privileges"] == [
        "EXECUTE"]

    env.delete("DefaultPrivileges", "dp")
    env.run_until_idle()
    assert default_acl(server, db, owner, None, "f", role) == {}
    # The owner's own entry is back to the built-in default (no row left behind).
    assert rows(server, db, "SELECT count(*) FROM pg_default_acl d JOIN pg_roles o "
                            "ON o.oid = d.defaclrole WHERE o.rolname = %s", owner) == [(0,)]


def test_default_privileges_wait_for_their_roles_and_schema(
    env: Environment, server: PostgresServer
) -> None:
    role, db, _, admin = setup(env, "dw")
    owner, schema = unique("later"), unique("laters")
    env.apply(manifest("DefaultPrivileges", "dp", role=role, targetRole=owner, database=db,
                       schema=schema, objectType="sequence", privileges=["USAGE"]))
    env.advance(10.0)
    assert env.condition("DefaultPrivileges", "dp", "Failed").reason == "DependencyMissing"

    env.apply(manifest("Role", "o", external_name=owner))
    env.apply(manifest("Schema", "s2", external_name=schema, database=db))
    env.advance(10.0)
    member_of(server, admin, owner)
    env.advance(RETRY)
    env.run_until_idle()
    assert env.state("DefaultPrivileges", "dp") == "ready"
    assert default_acl(server, db, owner, schema, "S", role) == {"USAGE": False}
    env.delete("DefaultPrivileges", "dp")
    env.run_until_idle()
    assert default_acl(server, db, owner, schema, "S", role) == {}


# ------------------------------------------------- a privilege removed from the spec
def database_acl(server: PostgresServer, db: str, role: str) -> set[str]:
    """The role's explicit privileges on a database."""
    return {r[0] for r in rows(server, "postgres",
                               "SELECT a.privilege_type FROM pg_database d, "
                               "LATERAL aclexplode(d.datacl) a JOIN pg_roles r "
                               "ON r.oid = a.grantee WHERE d.datname = %s AND r.rolname = %s",
                               db, role)}


def database_grants(server: PostgresServer, db: str, role: str) -> dict[str, bool]:
    """The role's explicit privileges on a database, each with its grant option."""
    return dict(rows(server, "postgres",
                     "SELECT a.privilege_type, a.is_grantable FROM pg_database d, "
                     "LATERAL aclexplode(d.datacl) a JOIN pg_roles r "
                     "ON r.oid = a.grantee WHERE d.datname = %s AND r.rolname = %s", db, role))


def test_the_record_is_read_only_for_its_own_scope() -> None:
    want = parse(Grant, role="r", database="d", privileges=["CONNECT"])
    record = {"scope": want.scope, "privileges": ["CONNECT", "CREATE"],
              "revoking": ["TEMPORARY"]}
    assert recorded(record, want.scope) == {"CONNECT", "CREATE", "TEMPORARY"}
    # Another role, another database, a schema of it: the record is not about them.
    for other in (parse(Grant, role="r2", database="d", privileges=["CONNECT"]),
                  parse(Grant, role="r", database="d2", privileges=["CONNECT"]),
                  parse(Grant, role="r", database="d", schema="s", privileges=["CREATE"])):
        assert recorded(record, other.scope) == frozenset()
    # No record (first observation, status lost), none with a scope, or a malformed one.
    assert recorded({}, want.scope) == frozenset()
    assert recorded({"privileges": ["CREATE"]}, want.scope) == frozenset()
    assert recorded({"scope": want.scope, "privileges": "CREATE"}, want.scope) == frozenset()
    assert recorded({"scope": want.scope, "privileges": ["CREATE; DROP", 7]},
                    want.scope) == frozenset()
    defaults = parse(DefaultPrivileges, role="r", targetRole="o", database="d",
                     objectType="table", privileges=["SELECT"])
    assert defaults.scope == {"role": "r", "targetRole": "o", "database": "d",
                              "objectType": "table"}
    assert recorded(record, defaults.scope) == frozenset()


def test_removing_privileges_from_a_database_grant_revokes_them(
    env: Environment, server: PostgresServer
) -> None:
    role, db = hostile("rv"), unique("rvdb")
    env.apply(manifest("Role", "r", external_name=role))
    env.apply(manifest("Database", "d", external_name=db))
    env.apply(manifest("Grant", "g", role=role, database=db,
                       privileges=["CONNECT", "CREATE", "TEMPORARY"]))
    env.run_until_idle()
    assert env.state("Grant", "g") == "ready"
    assert database_acl(server, db, role) == {"CONNECT", "CREATE", "TEMPORARY"}
    at = env.get("Grant", "g")["status"]["atProvider"]
    assert at["privileges"] == ["CONNECT", "CREATE", "TEMPORARY"]
    assert at["scope"] == {"role": role, "on": "DATABASE", "database": db}

    # Without exclusive: the two privileges the spec no longer lists are revoked.
    env.apply(manifest("Grant", "g", role=role, database=db, privileges=["CONNECT"]))
    env.run_until_idle()
    assert env.state("Grant", "g") == "ready"
    assert ("ready", "updating", "update") in env.history("Grant", "g")
    assert database_acl(server, db, role) == {"CONNECT"}
    at = env.get("Grant", "g")["status"]["atProvider"]
    assert at["privileges"] == ["CONNECT"] and "revoking" not in at

    # Granted again by hand, CREATE is not the Grant's any more: it stays.
    run(server, "postgres", sql.SQL("GRANT CREATE ON DATABASE {} TO {}").format(
        sql.Identifier(db), sql.Identifier(role)))
    env.advance(POLL)
    assert database_acl(server, db, role) == {"CONNECT", "CREATE"}
    assert env.state("Grant", "g") == "ready"


def test_without_a_record_nothing_is_revoked(env: Environment, server: PostgresServer) -> None:
    role, db = hostile("rn"), unique("rndb")
    env.apply(manifest("Role", "r", external_name=role))
    env.apply(manifest("Database", "d", external_name=db))
    env.apply(manifest("Grant", "g", role=role, database=db, privileges=["CONNECT", "CREATE"]))
    env.run_until_idle()
    assert database_acl(server, db, role) == {"CONNECT", "CREATE"}

    # The status is lost (restored from a backup without it), then CREATE leaves the spec:
    # nothing says the Grant held it, so it stays.
    obj = env.get("Grant", "g")
    del obj["status"]["atProvider"]
    env.api.replace_status(obj)
    env.apply(manifest("Grant", "g", role=role, database=db, privileges=["CONNECT"]))
    env.run_until_idle()
    env.advance(POLL)
    assert env.state("Grant", "g") == "ready"
    assert database_acl(server, db, role) == {"CONNECT", "CREATE"}
    assert env.get("Grant", "g")["status"]["atProvider"]["privileges"] == ["CONNECT"]


def test_a_revoke_still_to_do_stays_in_the_record(server: PostgresServer) -> None:
    from lifecycle.core.contract import ManagedResource
    from lifecycle.providers.postgres.config import ServerConfig, Session
    from lifecycle.providers.postgres.grant import GrantClient

    role, db = hostile("rk"), unique("rkdb")
    run(server, "postgres", sql.SQL("CREATE ROLE {}").format(sql.Identifier(role)),
        sql.SQL("CREATE DATABASE {}").format(sql.Identifier(db)),
        sql.SQL("GRANT CONNECT, CREATE ON DATABASE {} TO {}").format(sql.Identifier(db),
                                                                      sql.Identifier(role)))
    want = parse(Grant, role=role, database=db, privileges=["CONNECT"])
    client = GrantClient(Session.open(ServerConfig(
        host=server.host, port=server.port, username=server.user, password=server.password,
        sslmode="disable")))

    def resource(observed: dict[str, Any]) -> ManagedResource:
        return ManagedResource(kind="Grant", namespace="default", name="g", uid="u",
                               generation=2, external_name="g", parameters=want,
                               observed=observed)

    try:
        # A record of another scope says nothing about this Grant: nothing to revoke.
        elsewhere = {"scope": {**want.scope, "database": "other"},
                     "privileges": ["CONNECT", "CREATE"]}
        assert client.observe(resource(elsewhere)).up_to_date
        first = client.observe(resource({"scope": want.scope,
                                         "privileges": ["CONNECT", "CREATE"]}))
        assert not first.up_to_date
        assert (first.observed["privileges"], first.observed["revoking"]) == (
            ["CONNECT"], ["CREATE"])
        # The update failed (or never ran): the next observation, handed that record, still
        # knows CREATE is the Grant's to revoke.
        second = client.observe(resource(dict(first.observed)))
        assert not second.up_to_date and second.observed["revoking"] == ["CREATE"]
        client.update(resource(dict(second.observed)))
        assert database_acl(server, db, role) == {"CONNECT"}
        third = client.observe(resource(dict(second.observed)))
        assert third.up_to_date and "revoking" not in third.observed
    finally:
        client.close()
        run(server, "postgres", sql.SQL("DROP DATABASE {}").format(sql.Identifier(db)),
            sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


def test_two_grants_on_one_role_and_database(env: Environment, server: PostgresServer) -> None:
    """One owner per role and target: a second Grant of the pair is refused (terminal
    TargetConflict) rather than sharing it, so that neither undoes the other; deleting it
    leaves the first's privileges, and once the first is gone the pair is free."""
    role, db = hostile("r2"), unique("r2db")
    env.apply(manifest("Role", "r", external_name=role))
    env.apply(manifest("Database", "d", external_name=db))
    env.apply(manifest("Grant", "g", role=role, database=db,
                       privileges=["CONNECT", "TEMPORARY"]))
    env.run_until_idle()
    env.apply(manifest("Grant", "h", role=role, database=db, privileges=["CREATE"]))
    env.run_until_idle()
    assert database_acl(server, db, role) == {"CONNECT", "TEMPORARY"}
    refused = env.condition("Grant", "h", "Failed")
    assert refused is not None and refused.reason == "TargetConflict"
    assert "default/g" in refused.message

    # g drops TEMPORARY: revoked, and nothing fights it.
    env.apply(manifest("Grant", "g", role=role, database=db, privileges=["CONNECT"]))
    env.run_until_idle()
    assert database_acl(server, db, role) == {"CONNECT"}
    updates = len(env.history("Grant", "g"))
    env.advance(3 * POLL)
    assert database_acl(server, db, role) == {"CONNECT"}
    assert len(env.history("Grant", "g")) == updates

    # Deleting h touches nothing; deleting g revokes what it holds; h then takes the pair.
    env.delete("Grant", "h")
    env.run_until_idle()
    assert database_acl(server, db, role) == {"CONNECT"}
    env.delete("Grant", "g")
    env.run_until_idle()
    assert database_acl(server, db, role) == set()
    env.apply(manifest("Grant", "h", role=role, database=db, privileges=["CREATE"]))
    env.run_until_idle()
    assert env.state("Grant", "h") == "ready"
    assert database_acl(server, db, role) == {"CREATE"}


def test_removing_a_privilege_from_a_table_grant_revokes_it_where_it_was_held(
    env: Environment, server: PostgresServer
) -> None:
    role, db, schema, admin = setup(env, "rt")
    create_tables(server, db, schema, "a", "b ü", owner=admin)
    env.apply(manifest("Grant", "g", role=role, database=db, schema=schema, tables=["a"],
                       privileges=["SELECT", "INSERT", "UPDATE"]))
    env.run_until_idle()
    assert relation_acl(server, db, schema, "a", role) == {
        "INSERT": False, "SELECT": False, "UPDATE": False}
    at = env.get("Grant", "g")["status"]["atProvider"]
    assert (at["privileges"], at["names"]) == (["INSERT", "SELECT", "UPDATE"], ["a"])

    # INSERT on "b ü" is given by someone else; the Grant then covers "b ü" too, without
    # INSERT and UPDATE: revoked on "a", where the Grant held them, not on "b ü".
    run(server, db, sql.SQL("GRANT INSERT ON {} TO {}").format(
        sql.Identifier(schema, "b ü"), sql.Identifier(role)))
    env.apply(manifest("Grant", "g", role=role, database=db, schema=schema,
                       tables=["a", "b ü"], privileges=["SELECT"]))
    env.run_until_idle()
    assert env.state("Grant", "g") == "ready"
    assert relation_acl(server, db, schema, "a", role) == {"SELECT": False}
    assert relation_acl(server, db, schema, "b ü", role) == {"INSERT": False, "SELECT": False}
    at = env.get("Grant", "g")["status"]["atProvider"]
    assert (at["privileges"], at["names"]) == (["SELECT"], ["a", "b ü"])

    # Every table: the record covers them all, so dropping SELECT now revokes it on both
    # and, with the record naming "b ü" now, nothing else is touched there.
    env.apply(manifest("Grant", "g", role=role, database=db, schema=schema, tables=["*"],
                       privileges=["SELECT", "UPDATE"]))
    env.run_until_idle()
    env.apply(manifest("Grant", "g", role=role, database=db, schema=schema, tables=["*"],
                       privileges=["UPDATE"]))
    env.run_until_idle()
    assert relation_acl(server, db, schema, "a", role) == {"UPDATE": False}
    assert relation_acl(server, db, schema, "b ü", role) == {"INSERT": False, "UPDATE": False}


def test_removing_a_privilege_from_default_privileges_revokes_it(
    env: Environment, server: PostgresServer
) -> None:
    role, db, _, admin = setup(env, "dr")
    owner = hostile("drowner")
    env.apply(manifest("Role", "o", external_name=owner))
    env.run_until_idle()
    member_of(server, admin, owner)
    env.apply(manifest("DefaultPrivileges", "dp", role=role, targetRole=owner, database=db,
                       objectType="table", privileges=["SELECT", "INSERT", "UPDATE"]))
    env.run_until_idle()
    assert default_acl(server, db, owner, None, "r", role) == {
        "INSERT": False, "SELECT": False, "UPDATE": False}
    # DELETE is given by hand, as another DefaultPrivileges would: not this one's.
    run(server, db, sql.SQL("ALTER DEFAULT PRIVILEGES FOR ROLE {} GRANT DELETE ON TABLES "
                            "TO {}").format(sql.Identifier(owner), sql.Identifier(role)))

    env.apply(manifest("DefaultPrivileges", "dp", role=role, targetRole=owner, database=db,
                       objectType="table", privileges=["SELECT"]))
    env.run_until_idle()
    assert env.state("DefaultPrivileges", "dp") == "ready"
    assert default_acl(server, db, owner, None, "r", role) == {"DELETE": False,
                                                               "SELECT": False}
    at = env.get("DefaultPrivileges", "dp")["status"]["atProvider"]
    assert at["privileges"] == ["SELECT"] and "revoking" not in at
    env.advance(POLL)
    assert default_acl(server, db, owner, None, "r", role) == {"DELETE": False,
                                                               "SELECT": False}

    env.delete("DefaultPrivileges", "dp")
    env.run_until_idle()
    assert default_acl(server, db, owner, None, "r", role) == {"DELETE": False}


# ------------------------------------------------------------ crash exploration
def test_default_privileges_crash_exploration_has_no_counterexample(
    server: PostgresServer, dsn: str
) -> None:
    from lifecycle import verify

    (target,), _ = verify.targets(["lifecycle.machines.postgres:DefaultPrivileges"])
    report = verify.explore(target)
    assert report.ok, "\n".join(c.render() for c in report.counterexamples)
    operations = " ".join(report.operations)
    for expected in ("external.create", "external.update", "external.delete",
                     "+finalizer", "intent create:pending", "-finalizer", "record_event"):
        assert expected in operations
    assert len(report.checked) == report.points * 4
    assert {c.phase for c in report.checked} == {"create", "update", "delete"}
    # Every run cleaned up after itself: no throwaway role of this target is left.
    assert rows(server, "postgres", "SELECT rolname FROM pg_roles WHERE starts_with(rolname, %s)",
                target.objects[0]) == []


def test_the_default_privileges_target_sees_leaks_and_counts_creations(
    server: PostgresServer
) -> None:
    from lifecycle.core.contract import ManagedResource, ProviderConfig
    from lifecycle.core.values import Creation
    from lifecycle.machines.postgres import DefaultPrivileges as Kind
    from lifecycle.providers.postgres.scenarios.verify import PostgresSettings, postgres_target

    settings = PostgresSettings(host=server.host, port=server.port, user=server.user,
                                password=server.password, sslmode="disable")
    target = postgres_target(Kind, settings)
    system = target.system()
    try:
        assert system.names() == set()
        data = target.manifest("x")
        name = data["metadata"]["annotations"]["lifecycle.dev/external-name"]
        config = ProviderConfig(name="default", spec=dict(system.provider_spec),
                                credentials=dict(system.credentials))
        resource = ManagedResource(kind="DefaultPrivileges", namespace="default", name="x",
                                   uid="u", generation=1, external_name=name,
                                   parameters=Kind.parse_parameters(data["spec"]))
        client = system.connector.connect(resource, config)
        assert client.create(resource) == Creation(finished=True)  # done within the call
        assert client.observe(resource).exists
        client.create(resource)  # granting again creates nothing new
        assert system.names() == {name}
        assert system.creations is not None and system.creations(name) == 1
        # names() follows the server: revoked, the grant is gone.
        client.delete(resource)
        assert system.names() == set()
    finally:
        assert system.close is not None
        system.close()
    assert rows(server, "postgres", "SELECT count(*) FROM pg_roles WHERE starts_with(rolname, "
                                    "%s)", target.objects[0]) == [(0,)]


# ------------------------------------------------------------ the Grant explorer target
def grant_target(server: PostgresServer) -> Any:
    """The crash explorer's Grant target on the session server."""
    from lifecycle.providers.postgres.scenarios.verify import PostgresSettings, postgres_target

    settings = PostgresSettings(host=server.host, port=server.port, user=server.user,
                                password=server.password, sslmode="disable")
    return postgres_target(Grant, settings)


def with_client(target: Any, client_class: type) -> Any:
    """``target`` whose runs use ``client_class`` for the Grant."""
    import attrs

    def system() -> Any:
        built = target.system()
        built.connector.client_class = client_class
        return built

    return attrs.evolve(target, system=system)


def test_the_grant_target_narrows_and_counts_its_creation_once(server: PostgresServer) -> None:
    import attrs

    from lifecycle.core.contract import ManagedResource, ProviderConfig

    target = grant_target(server)
    system = target.system()
    try:
        data = target.manifest("x")
        name = data["metadata"]["annotations"]["lifecycle.dev/external-name"]
        role, database = (data["spec"]["forProvider"]["role"],
                          data["spec"]["forProvider"]["database"])
        config = ProviderConfig(name="default", spec=dict(system.provider_spec),
                                credentials=dict(system.credentials))
        resource = ManagedResource(kind="Grant", namespace="default", name="x", uid="u",
                                   generation=1, external_name=name,
                                   parameters=Grant.parse_parameters(data["spec"]))
        client = system.connector.connect(resource, config)
        client.create(resource)
        held = client.observe(resource)
        assert held.up_to_date and database_acl(server, database, role) == {"CONNECT",
                                                                            "CREATE"}
        # The update both adds (TEMPORARY) and takes away (CREATE, the record's).
        narrowed = attrs.evolve(resource, generation=2, observed=dict(held.observed),
                                parameters=Grant.parse_parameters(target.update(data)["spec"]))
        before = client.observe(narrowed)
        assert not before.up_to_date and before.observed["revoking"] == ["CREATE"]
        client.update(attrs.evolve(narrowed, observed=dict(before.observed)))
        assert database_acl(server, database, role) == {"CONNECT", "TEMPORARY"}
        assert system.names() == {name}
        assert system.creations is not None and system.creations(name) == 1
        client.delete(narrowed)
        assert system.names() == set()
    finally:
        assert system.close is not None
        system.close()


def test_the_grant_scenario_catches_a_grant_that_forgets_what_it_held(
    server: PostgresServer
) -> None:
    import attrs

    from lifecycle import verify
    from lifecycle.providers.postgres.grant import GrantClient

    class Forgetful(GrantClient):
        """Deliberately broken: never reads its record, so narrowing revokes nothing."""

        def observe(self, resource: Any) -> Any:
            return super().observe(attrs.evolve(resource, observed={}))

        def update(self, resource: Any) -> None:
            super().update(attrs.evolve(resource, observed={}))

        def delete(self, resource: Any) -> None:
            super().delete(attrs.evolve(resource, observed={}))

    target = grant_target(server)
    assert verify.run_scenario(target).problems == []
    broken = verify.run_scenario(with_client(target, Forgetful)).problems
    assert any("leaked: no object tracks it" in p for p in broken), broken

    # An update that only widens the list never meets the revoke path: the same broken
    # client passes it.
    def widen(data: dict[str, Any]) -> dict[str, Any]:
        changed = target.update(data)
        changed["spec"]["forProvider"]["privileges"] = ["CONNECT", "CREATE", "TEMPORARY"]
        return changed

    assert verify.run_scenario(with_client(attrs.evolve(target, update=widen),
                                           Forgetful)).problems == []
    assert rows(server, "postgres", "SELECT count(*) FROM pg_roles WHERE starts_with(rolname, "
                                    "%s)", target.objects[0]) == [(0,)]


def test_the_grant_scenario_catches_a_grant_created_twice(server: PostgresServer) -> None:
    from lifecycle import verify
    from lifecycle.providers.postgres.grant import GrantClient

    class Recreating(GrantClient):
        """Deliberately broken: create revokes what it granted and grants it again."""

        def create(self, resource: Any) -> Any:
            super().create(resource)
            self.delete(resource)
            return super().create(resource)

    problems = verify.run_scenario(with_client(grant_target(server), Recreating)).problems
    assert any("was created 2 times" in p for p in problems), problems
