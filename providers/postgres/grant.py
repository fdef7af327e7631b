"""The Grant kind's client: privileges of one role on one database.

A Grant makes sure ``role`` holds ``privileges`` on ``database``:
``observe`` reads the database's ACL (the owner's implicit privileges
included), ``create`` and ``update`` grant what is missing, ``delete``
revokes the Grant's privileges. Privileges the role holds beyond the
Grant's are left alone, so two Grants on one pair never fight, and a
Grant naming a database's owner never strips the owner's rights. A role or
database that does not exist yet is retried (``DependencyMissing``), so a
Grant can be applied together with the Role and Database it names.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import attrs
from psycopg import sql

from lifecycle.core.values import Creation, Observation
from lifecycle.providers.postgres import fields
from lifecycle.providers.postgres.config import SqlClient, check_name
from lifecycle.runtime.contract import ManagedResource

#: The privileges a database has, as ``aclexplode`` names them.
DATABASE_PRIVILEGES = ("CONNECT", "CREATE", "TEMPORARY")
_ALIASES = {"TEMP": ("TEMPORARY",), "ALL": DATABASE_PRIVILEGES,
            "ALL PRIVILEGES": DATABASE_PRIVILEGES}


def _privileges(value: Any) -> tuple[str, ...]:
    """Normalise a privilege list: upper case, aliases expanded, sorted, no duplicates."""
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise TypeError("'privileges' must be a list of privilege names")
    out: set[str] = set()
    for item in value:
        if not isinstance(item, str):
            raise TypeError("'privileges' must be a list of privilege names")
        key = " ".join(item.upper().split())
        if key not in DATABASE_PRIVILEGES and key not in _ALIASES:
            raise ValueError(f"unknown database privilege {item!r}; use "
                             f"{', '.join(DATABASE_PRIVILEGES)} or ALL")
        out.update(_ALIASES.get(key, (key,)))
    if not out:
        raise ValueError("'privileges' must name at least one privilege")
    return tuple(sorted(out))


@attrs.frozen
class GrantParameters:
    """``spec.forProvider`` of a Grant: which role gets which privileges on which database."""

    role: str = fields.name(required=True)
    database: str = fields.name(required=True)
    privileges: tuple[str, ...] = attrs.field(converter=_privileges)


class GrantClient(SqlClient):
    """Observes a database ACL through ``aclexplode``; grants and revokes privileges."""

    subject = "grant"

    def observe(self, resource: ManagedResource) -> Observation:
        """The role's explicit privileges on the database, compared with the spec."""
        want: GrantParameters | None = resource.parameters
        if want is None:  # an unreadable spec being deleted: nothing we could revoke
            return Observation.absent()
        held = self._held(want) & set(want.privileges)
        if not held:
            return Observation.absent()
        return Observation(exists=True, up_to_date=held == set(want.privileges),
                           observed={"privileges": sorted(held)})

    def create(self, resource: ManagedResource) -> Creation:
        """GRANT the privileges (granting held privileges again is harmless)."""
        self.update(resource)
        return Creation()

    def update(self, resource: ManagedResource) -> None:
        """GRANT the privileges the role lacks."""
        want: GrantParameters = resource.parameters
        missing = sorted(set(want.privileges) - self._held(want))
        if missing:
            self._change("GRANT {} ON DATABASE {} TO {}", missing, want)

    def delete(self, resource: ManagedResource) -> None:
        """REVOKE the Grant's privileges; a missing role or database leaves nothing to revoke."""
        want: GrantParameters | None = resource.parameters
        if want is None or not self._held(want):
            return
        self._change("REVOKE {} ON DATABASE {} FROM {}", list(want.privileges), want)

    def _held(self, want: GrantParameters) -> set[str]:
        check_name("role", want.role)
        check_name("database", want.database)
        rows = self.session.rows(
            "SELECT a.privilege_type FROM pg_catalog.pg_database d, "
            "LATERAL pg_catalog.aclexplode(COALESCE(d.datacl, "
            "pg_catalog.acldefault('d', d.datdba))) a "
            "JOIN pg_catalog.pg_roles r ON r.oid = a.grantee "
            "WHERE d.datname = %s AND r.rolname = %s",
            [want.database, want.role],
            doing=f"observing the privileges of {want.role!r} on {want.database!r}")
        return {row[0] for row in rows}

    def _change(self, template: str, privileges: list[str], want: GrantParameters) -> None:
        # Privilege keywords come only from DATABASE_PRIVILEGES, never from the spec's text.
        keywords = sql.SQL(", ").join(sql.SQL(p) for p in privileges if p in DATABASE_PRIVILEGES)
        statement = sql.SQL(template).format(  # type: ignore[arg-type]
            keywords, sql.Identifier(want.database), sql.Identifier(want.role))
        verb = template.split()[0].lower()
        self.session.execute(statement,
                             f"{verb} {', '.join(privileges)} on {want.database!r} "
                             f"for {want.role!r}")
