"""A Grant on a database or on a schema: the role's privileges read from the catalog ACL
(``aclexplode`` over ``pg_database`` or ``pg_namespace``, the owner's implicit ones
included), and whether PUBLIC holds any on the database."""

from __future__ import annotations

from lifecycle.providers.postgres.config import Session, check_name
from lifecycle.providers.postgres.grant_spec import GrantParameters

__all__ = ["public_holds", "target_acl"]

#: Per target: (FROM clause, owner column, ACL column, acldefault type, name column); fixed
#: SQL text, never user input.
_CATALOGS = {
    "DATABASE": ("pg_catalog.pg_database d", "d.datdba", "d.datacl", "'d'", "d.datname"),
    "SCHEMA": ("pg_catalog.pg_namespace n", "n.nspowner", "n.nspacl", "'n'", "n.nspname"),
}


def public_holds(session: Session, want: GrantParameters) -> bool:
    """Whether PUBLIC holds any privilege on the database."""
    row = session.row(
        "SELECT EXISTS (SELECT 1 FROM pg_catalog.aclexplode(COALESCE(d.datacl, "
        "pg_catalog.acldefault('d', d.datdba))) a WHERE a.grantee = 0) "
        "FROM pg_catalog.pg_database d WHERE d.datname = %s", [want.database],
        doing=f"observing PUBLIC's privileges on database {want.database!r}")
    return bool(row and row[0])


def target_acl(session: Session, want: GrantParameters) -> tuple[dict[str, bool], bool]:
    """The role's privileges on the database or schema (each: whether grantable) and
    whether the role owns it."""
    check_name("role", want.role)
    check_name("database", want.database)
    if want.schema is not None:
        check_name("schema", want.schema)
    catalog = _CATALOGS[want.keyword]
    rows = session.rows(
        f"SELECT a.privilege_type, a.is_grantable, {catalog[1]} = r.oid "
        f"FROM {catalog[0]}, LATERAL pg_catalog.aclexplode(COALESCE({catalog[2]}, "
        f"pg_catalog.acldefault({catalog[3]}, {catalog[1]}))) a "
        f"JOIN pg_catalog.pg_roles r ON r.oid = a.grantee "
        f"WHERE {catalog[4]} = %s AND r.rolname = %s",
        [want.schema or want.database, want.role],
        doing=f"observing the privileges of {want.role!r} on {want.target!r}")
    acl: dict[str, bool] = {}
    for privilege, grantable, _ in rows:
        acl[privilege] = acl.get(privilege, False) or bool(grantable)
    owner = bool(rows and rows[0][2])
    if not rows:
        found = session.row(
            f"SELECT 1 FROM {catalog[0]} JOIN pg_catalog.pg_roles r "
            f"ON r.oid = {catalog[1]} WHERE {catalog[4]} = %s AND r.rolname = %s",
            [want.schema or want.database, want.role],
            doing=f"observing the owner of {want.target!r}")
        owner = found is not None
    return acl, owner
