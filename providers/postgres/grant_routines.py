"""A Grant on routines of a schema (functions, procedures, aggregates): each named routine
found by its name and argument types (``to_regtype``), or every routine of the schema, with
the role's privileges read from ``pg_proc``."""

from __future__ import annotations

from psycopg import sql

from lifecycle.core.errors import ExternalError
from lifecycle.providers.postgres.config import Session, check_name
from lifecycle.providers.postgres.grant_acl import SchemaObject
from lifecycle.providers.postgres.grant_spec import GrantParameters

__all__ = ["routine_objects"]


def routine_objects(session: Session,
                     want: GrantParameters) -> tuple[list[SchemaObject], list[str]]:
    """The routines the Grant covers, each with the role's privileges on it and owned when
    the role owns it, and the labels of the named ones the schema does not hold; a named
    argument type that does not exist yet is retried (``DependencyMissing``)."""
    assert want.schema is not None and want.routines is not None
    wanted: list[tuple[str, list[int]]] = []
    if not want.every:
        for routine in want.routines:
            check_name("routine", routine.name)
            oids: list[int] = []
            for argument in routine.arguments:
                row = session.row("SELECT pg_catalog.to_regtype(%s)::pg_catalog.oid",
                                  [argument], doing=f"reading the type {argument!r}")
                if row is None or row[0] is None:
                    raise ExternalError(f"routine {routine.label!r}: type {argument!r} "
                                        "does not exist (yet)", reason="DependencyMissing")
                oids.append(int(row[0]))
            wanted.append((routine.name, oids))
    rows = session.rows(
        "SELECT p.oid, p.proname, p.proowner = r.oid, "
        "pg_catalog.oidvectortypes(p.proargtypes), "
        "ARRAY(SELECT tn.nspname FROM unnest(p.proargtypes::pg_catalog.oid[]) "
        "WITH ORDINALITY u(o, i) JOIN pg_catalog.pg_type t ON t.oid = u.o "
        "JOIN pg_catalog.pg_namespace tn ON tn.oid = t.typnamespace ORDER BY u.i), "
        "ARRAY(SELECT t.typname FROM unnest(p.proargtypes::pg_catalog.oid[]) "
        "WITH ORDINALITY u(o, i) JOIN pg_catalog.pg_type t ON t.oid = u.o ORDER BY u.i), "
        "p.proargtypes::pg_catalog.oid[], a.privilege_type, a.is_grantable "
        "FROM pg_catalog.pg_proc p "
        "JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace "
        "JOIN pg_catalog.pg_roles r ON r.rolname = %s "
        "LEFT JOIN LATERAL pg_catalog.aclexplode(COALESCE(p.proacl, "
        "pg_catalog.acldefault('f', p.proowner))) a ON a.grantee = r.oid "
        "WHERE n.nspname = %s AND (%s OR p.proname = ANY(%s)) ORDER BY p.proname, p.oid",
        [want.role, want.schema, want.every,
         [w[0] for w in wanted]],
        doing=f"observing the privileges of {want.role!r} on the routines of "
              f"{want.target!r}")
    objects: dict[int, SchemaObject] = {}
    found: set[int] = set()
    for oid, name, owned, types, spaces, typnames, argoids, privilege, grantable in rows:
        key = (name, [int(o) for o in argoids])
        if not want.every:
            if key not in wanted:
                continue
            found.add(wanted.index(key))
        item = objects.get(oid)
        if item is None:
            arguments = sql.SQL(", ").join(
                sql.Identifier(space, typname) for space, typname in zip(spaces, typnames,
                                                                         strict=True))
            item = objects[oid] = SchemaObject(
                label=f"{name}({types})", owned=bool(owned), acl={},
                ident=sql.SQL("{}({})").format(sql.Identifier(want.schema, name),
                                               arguments))
        if privilege is not None:
            item.acl[privilege] = item.acl.get(privilege, False) or bool(grantable)
    missing = [r.label for i, r in enumerate(want.routines)
               if not want.every and i not in found]
    return list(objects.values()), missing
