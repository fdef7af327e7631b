"""A Grant on objects of a schema: tables (and views, materialized views, foreign and
partitioned tables), sequences, or columns of one table, each with the role's privileges
read from ``pg_class`` and ``pg_attribute``; routines are read in
:mod:`~lifecycle.providers.postgres.grant_routines`."""

from __future__ import annotations

from psycopg import sql

from lifecycle.providers.postgres.config import Session, check_name
from lifecycle.providers.postgres.grant_acl import SchemaObject
from lifecycle.providers.postgres.grant_routines import routine_objects
from lifecycle.providers.postgres.grant_spec import EVERY, GrantParameters

__all__ = ["RELATIONS", "column_objects", "schema_objects"]

#: Per object keyword: (relkinds in pg_class, acldefault type); fixed SQL text.
RELATIONS = {"TABLE": ("{r,p,v,m,f}", "r"), "SEQUENCE": ("{S}", "s")}


def schema_objects(session: Session,
             want: GrantParameters) -> tuple[list[SchemaObject], list[str]]:
    """The objects of the schema the Grant covers, with the role's privileges on each, and
    the named ones the schema does not hold."""
    assert want.schema is not None
    check_name("role", want.role)
    check_name("schema", want.schema)
    if want.keyword == "ROUTINE":
        return routine_objects(session, want)
    if want.keyword == "COLUMN":
        return column_objects(session, want)
    relkinds, default = RELATIONS[want.keyword]
    names = list(want.tables or want.sequences or ())
    for name in names:
        if name != EVERY:
            check_name(want.keyword.lower(), name)
    rows = session.rows(
        "SELECT c.relname, c.relowner = r.oid, a.privilege_type, a.is_grantable "
        "FROM pg_catalog.pg_class c "
        "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
        "JOIN pg_catalog.pg_roles r ON r.rolname = %s "
        "LEFT JOIN LATERAL pg_catalog.aclexplode(COALESCE(c.relacl, "
        "pg_catalog.acldefault(%s::\"char\", c.relowner))) a ON a.grantee = r.oid "
        "WHERE n.nspname = %s AND c.relkind = ANY(%s::\"char\"[]) "
        "AND (%s OR c.relname = ANY(%s)) ORDER BY c.relname",
        [want.role, default, want.schema, relkinds, want.every, names],
        doing=f"observing the privileges of {want.role!r} on the "
              f"{want.keyword.lower()}s of {want.target!r}")
    objects: dict[str, SchemaObject] = {}
    for name, owned, privilege, grantable in rows:
        item = objects.setdefault(name, SchemaObject(
            label=name, ident=sql.Identifier(want.schema, name), owned=bool(owned), acl={}))
        if privilege is not None:
            item.acl[privilege] = item.acl.get(privilege, False) or bool(grantable)
    missing = [] if want.every else [n for n in names if n not in objects]
    return list(objects.values()), missing


def column_objects(session: Session,
                    want: GrantParameters) -> tuple[list[SchemaObject], list[str]]:
    """The named columns of the Grant's table, each with the role's privileges on it
    (the column's own ACL, ``pg_attribute.attacl``: what a table-wide grant gives is not
    in it) and owned when the role owns the table; the named columns not found (every
    one when the table is not)."""
    assert want.schema is not None and want.table is not None and want.columns
    check_name("table", want.table)
    for column in want.columns:
        check_name("column", column)
    rows = session.rows(
        "SELECT a.attname, c.relowner = r.oid, x.privilege_type, x.is_grantable "
        "FROM pg_catalog.pg_class c "
        "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
        "JOIN pg_catalog.pg_roles r ON r.rolname = %s "
        "LEFT JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 "
        "AND NOT a.attisdropped AND a.attname = ANY(%s) "
        "LEFT JOIN LATERAL pg_catalog.aclexplode(a.attacl) x ON x.grantee = r.oid "
        "WHERE n.nspname = %s AND c.relname = %s AND c.relkind = ANY(%s::\"char\"[]) "
        "ORDER BY a.attname",
        [want.role, list(want.columns), want.schema, want.table, RELATIONS["TABLE"][0]],
        doing=f"observing the privileges of {want.role!r} on the columns of table "
              f"{want.table!r} in {want.target!r}")
    objects: dict[str, SchemaObject] = {}
    for name, owned, privilege, grantable in rows:
        if name is None:  # the table, without any of the named columns
            continue
        item = objects.setdefault(name, SchemaObject(
            label=name, ident=sql.Identifier(name), owned=bool(owned), acl={}))
        if privilege is not None:
            item.acl[privilege] = item.acl.get(privilege, False) or bool(grantable)
    return list(objects.values()), [c for c in want.columns if c not in objects]
