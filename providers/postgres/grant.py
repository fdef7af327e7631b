"""The Grant kind's client: privileges of one role on one database.

A Grant makes sure ``role`` holds ``privileges`` on ``database``:
``observe`` reads the database's ACL (the owner's implicit privileges
included), ``create`` and ``update`` grant what is missing, ``delete``
revokes the Grant's privileges. Privileges the role holds beyond the
Grant's are left alone, so two Grants on one pair never fight, unless
``exclusive`` asks for the list to be exact. A Grant naming the database's
owner is refused (terminal ``InvalidSpec``): the owner holds every privilege
by ownership, and deleting such a Grant must never strip it. ``withOption: GRANT`` adds the grant
option, observed through ``aclexplode``'s ``is_grantable``. A role or
database that does not exist yet is retried (``DependencyMissing``), so a
Grant can be applied together with the Role and Database it names.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import attrs
from psycopg import sql

from lifecycle.core.errors import TerminalError
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


def _with_option(_: Any, attribute: attrs.Attribute, value: Any) -> None:
    if value is not None and value != "GRANT":
        raise ValueError("'withOption' must be GRANT (ADMIN applies to role memberships, "
                         "which a Role's memberOf declares)")


@attrs.frozen
class GrantParameters:
    """``spec.forProvider`` of a Grant: which role gets which privileges on which database.

    ``withOption: GRANT`` also gives the right to grant them on. ``exclusive:
    true`` makes the list exact: privileges the role holds on the database
    beyond it are revoked (never from the database's owner).
    """

    role: str = fields.name(required=True)
    database: str = fields.name(required=True)
    privileges: tuple[str, ...] = attrs.field(converter=_privileges)
    with_option: str | None = attrs.field(default=None, validator=_with_option,
                                          alias="withOption")
    exclusive: bool = fields.flag(False)


class GrantClient(SqlClient):
    """Observes a database ACL through ``aclexplode``; grants and revokes privileges."""

    subject = "grant"

    def observe(self, resource: ManagedResource) -> Observation:
        """The role's explicit privileges on the database, compared with the spec."""
        want: GrantParameters | None = resource.parameters
        if want is None:  # an unreadable spec being deleted: nothing we could revoke
            return Observation.absent()
        acl, owner = self._acl(want)
        held = set(acl) & set(want.privileges)
        if not held or owner:  # the owner's rights are ownership's, never a Grant's
            return Observation.absent()
        up_to_date = held == set(want.privileges) and (
            want.with_option is None or all(acl[p] for p in want.privileges)) and (
            not want.exclusive or owner or set(acl) <= set(want.privileges))
        observed: dict[str, Any] = {"privileges": sorted(held)}
        if want.with_option or want.exclusive:
            observed["grantable"] = sorted(p for p in held if acl[p])
            observed["others"] = sorted(set(acl) - set(want.privileges))
        return Observation(exists=True, up_to_date=up_to_date, observed=observed)

    def create(self, resource: ManagedResource) -> Creation:
        """GRANT the privileges (granting held privileges again is harmless); a Grant to the
        database's owner is refused: it holds every privilege by ownership, and deleting
        the Grant must not strip them."""
        want: GrantParameters = resource.parameters
        if self._acl(want)[1]:
            raise TerminalError(
                f"role {want.role!r} owns database {want.database!r} and holds every "
                "privilege on it by ownership; a Grant to the owner is not managed",
                reason="InvalidSpec")
        self.update(resource)
        return Creation()

    def update(self, resource: ManagedResource) -> None:
        """GRANT the privileges the role lacks."""
        want: GrantParameters = resource.parameters
        acl, owner = self._acl(want)
        if owner:
            raise TerminalError(f"role {want.role!r} owns database {want.database!r}; a Grant "
                                "to the owner is not managed", reason="InvalidSpec")
        missing = sorted(p for p in want.privileges
                         if p not in acl or (want.with_option and not acl[p]))
        if missing:
            template = "GRANT {} ON DATABASE {} TO {}"
            if want.with_option:
                template += " WITH GRANT OPTION"
            self._change(template, missing, want)
        extra = sorted(set(acl) - set(want.privileges))
        if want.exclusive and extra:
            self._change("REVOKE {} ON DATABASE {} FROM {}", extra, want)

    def delete(self, resource: ManagedResource) -> None:
        """REVOKE the Grant's privileges; a missing role or database leaves nothing to revoke,
        and the database's owner keeps what it holds by ownership."""
        want: GrantParameters | None = resource.parameters
        if want is None:
            return
        acl, owner = self._acl(want)
        if not acl or owner:  # nothing to revoke, or rights the owner holds by ownership
            return
        self._change("REVOKE {} ON DATABASE {} FROM {}", list(want.privileges), want)

    def _acl(self, want: GrantParameters) -> tuple[dict[str, bool], bool]:
        """The role's privileges on the database (each: whether grantable) and whether the
        role owns the database."""
        check_name("role", want.role)
        check_name("database", want.database)
        rows = self.session.rows(
            "SELECT a.privilege_type, a.is_grantable, d.datdba = r.oid "
            "FROM pg_catalog.pg_database d, "
            "LATERAL pg_catalog.aclexplode(COALESCE(d.datacl, "
            "pg_catalog.acldefault('d', d.datdba))) a "
            "JOIN pg_catalog.pg_roles r ON r.oid = a.grantee "
            "WHERE d.datname = %s AND r.rolname = %s",
            [want.database, want.role],
            doing=f"observing the privileges of {want.role!r} on {want.database!r}")
        acl: dict[str, bool] = {}
        for privilege, grantable, _ in rows:
            acl[privilege] = acl.get(privilege, False) or bool(grantable)
        owner = bool(rows and rows[0][2])
        if not rows:
            found = self.session.row(
                "SELECT 1 FROM pg_catalog.pg_database d JOIN pg_catalog.pg_roles r "
                "ON r.oid = d.datdba WHERE d.datname = %s AND r.rolname = %s",
                [want.database, want.role], doing=f"observing the owner of {want.database!r}")
            owner = found is not None
        return acl, owner

    def _change(self, template: str, privileges: list[str], want: GrantParameters) -> None:
        # Privilege keywords come only from DATABASE_PRIVILEGES, never from the spec's text.
        keywords = sql.SQL(", ").join(sql.SQL(p) for p in privileges if p in DATABASE_PRIVILEGES)
        statement = sql.SQL(template).format(  # type: ignore[arg-type]
            keywords, sql.Identifier(want.database), sql.Identifier(want.role))
        verb = template.split()[0].lower()  # "grant" or "revoke"
        self.session.execute(statement,
                             f"{verb} {', '.join(privileges)} on {want.database!r} "
                             f"for {want.role!r}")
