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

import contextlib
from collections.abc import Iterable, Iterator
from typing import Any

import attrs
from psycopg import sql

from lifecycle.core.errors import TerminalError
from lifecycle.core.values import Creation, Observation
from lifecycle.providers.postgres import fields
from lifecycle.providers.postgres.config import Session, SqlClient, check_name
from lifecycle.providers.postgres.schema import in_database
from lifecycle.runtime.contract import ManagedResource

#: The privileges a database has, as ``aclexplode`` names them.
DATABASE_PRIVILEGES = ("CONNECT", "CREATE", "TEMPORARY")
#: The privileges a schema has.
SCHEMA_PRIVILEGES = ("CREATE", "USAGE")
_KNOWN = frozenset(DATABASE_PRIVILEGES + SCHEMA_PRIVILEGES)
_ALIASES = {"TEMP": "TEMPORARY", "ALL PRIVILEGES": "ALL"}


def _privileges(value: Any) -> tuple[str, ...]:
    """Normalise a privilege list: upper case, TEMP and ALL PRIVILEGES spelled out, sorted,
    no duplicates (``ALL`` is expanded once the target is known)."""
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise TypeError("'privileges' must be a list of privilege names")
    out: set[str] = set()
    for item in value:
        if not isinstance(item, str):
            raise TypeError("'privileges' must be a list of privilege names")
        key = " ".join(item.upper().split())
        key = _ALIASES.get(key, key)
        if key not in _KNOWN and key != "ALL":
            raise ValueError(f"unknown privilege {item!r}; use "
                             f"{', '.join(DATABASE_PRIVILEGES)} or ALL on a database, "
                             f"{', '.join(SCHEMA_PRIVILEGES)} or ALL on a schema")
        out.add(key)
    if not out:
        raise ValueError("'privileges' must name at least one privilege")
    return tuple(sorted(out))


def _with_option(_: Any, attribute: attrs.Attribute, value: Any) -> None:
    if value is not None and value != "GRANT":
        raise ValueError("'withOption' must be GRANT (ADMIN applies to role memberships, "
                         "which a Role's memberOf declares)")


@attrs.frozen
class GrantParameters:
    """``spec.forProvider`` of a Grant: which role gets which privileges on which database
    (or, with ``schema``, on which schema of that database).

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
    schema: str | None = fields.name()

    def __attrs_post_init__(self) -> None:
        """Expand ALL and check each privilege against the target (database or schema)."""
        allowed = self.allowed
        expanded = set(allowed) if "ALL" in self.privileges else set(self.privileges)
        wrong = sorted(expanded - set(allowed))
        if wrong:
            raise ValueError(f"privilege(s) {', '.join(wrong)} do not apply to a "
                             f"{self.keyword.lower()}; use {', '.join(allowed)} or ALL")
        object.__setattr__(self, "privileges", tuple(sorted(expanded)))

    @property
    def keyword(self) -> str:
        """What the privileges are on: ``DATABASE`` or ``SCHEMA``."""
        return "DATABASE" if self.schema is None else "SCHEMA"

    @property
    def allowed(self) -> tuple[str, ...]:
        """The privileges the target has."""
        return DATABASE_PRIVILEGES if self.schema is None else SCHEMA_PRIVILEGES

    @property
    def target(self) -> str:
        """The name of the database or schema, as shown in messages."""
        return self.database if self.schema is None else f"{self.database}.{self.schema}"


#: Per target: (FROM clause, owner column, ACL column, acldefault type, name column); fixed
#: SQL text, never user input.
_CATALOGS = {
    "DATABASE": ("pg_catalog.pg_database d", "d.datdba", "d.datacl", "'d'", "d.datname"),
    "SCHEMA": ("pg_catalog.pg_namespace n", "n.nspowner", "n.nspacl", "'n'", "n.nspname"),
}


class GrantClient(SqlClient):
    """Observes a database ACL through ``aclexplode``; grants and revokes privileges."""

    subject = "grant"

    def observe(self, resource: ManagedResource) -> Observation:
        """The role's explicit privileges on the database, compared with the spec."""
        want: GrantParameters | None = resource.parameters
        if want is None:  # an unreadable spec being deleted: nothing we could revoke
            return Observation.absent()
        with self._session(want, missing_ok=True) as session:
            acl, owner = ({}, False) if session is None else self._acl(session, want)
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
        with self._session(want) as session:
            assert session is not None
            if self._acl(session, want)[1]:
                raise TerminalError(
                    f"role {want.role!r} owns {want.keyword.lower()} {want.target!r} and holds "
                    "every privilege on it by ownership; a Grant to the owner is not managed",
                    reason="InvalidSpec")
            self._update(session, want)
        return Creation()

    def update(self, resource: ManagedResource) -> None:
        """GRANT the privileges the role lacks (and revoke others when ``exclusive``)."""
        want: GrantParameters = resource.parameters
        with self._session(want) as session:
            assert session is not None
            self._update(session, want)

    def _update(self, session: Session, want: GrantParameters) -> None:
        acl, owner = self._acl(session, want)
        if owner:
            raise TerminalError(f"role {want.role!r} owns {want.keyword.lower()} "
                                f"{want.target!r}; a Grant to the owner is not managed",
                                reason="InvalidSpec")
        missing = sorted(p for p in want.privileges
                         if p not in acl or (want.with_option and not acl[p]))
        if missing:
            template = "GRANT {} ON {} {} TO {}"
            if want.with_option:
                template += " WITH GRANT OPTION"
            self._change(session, template, missing, want)
        extra = sorted(set(acl) - set(want.privileges))
        if want.exclusive and extra:
            self._change(session, "REVOKE {} ON {} {} FROM {}", extra, want)

    def delete(self, resource: ManagedResource) -> None:
        """REVOKE the Grant's privileges; a missing role or database leaves nothing to revoke,
        and the database's owner keeps what it holds by ownership."""
        want: GrantParameters | None = resource.parameters
        if want is None:
            return
        with self._session(want, missing_ok=True) as session:
            if session is None:
                return
            acl, owner = self._acl(session, want)
            if not acl or owner:  # nothing to revoke, or rights the owner holds by ownership
                return
            self._change(session, "REVOKE {} ON {} {} FROM {}", list(want.privileges), want)

    @contextlib.contextmanager
    def _session(self, want: GrantParameters, *,
                 missing_ok: bool = False) -> Iterator[Session | None]:
        """The admin session for a database Grant; one on the database for a schema Grant."""
        if want.schema is None:
            yield self.session
            return
        with in_database(self.session, want.database, missing_ok=missing_ok) as session:
            yield session

    @staticmethod
    def _acl(session: Session, want: GrantParameters) -> tuple[dict[str, bool], bool]:
        """The role's privileges on the target (each: whether grantable) and whether the
        role owns it."""
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

    @staticmethod
    def _change(session: Session, template: str, privileges: list[str],
                want: GrantParameters) -> None:
        # Keywords come only from the fixed lists above, never from the spec's text.
        keywords = sql.SQL(", ").join(sql.SQL(p) for p in privileges if p in want.allowed)
        statement = sql.SQL(template).format(  # type: ignore[arg-type]
            keywords, sql.SQL(want.keyword), sql.Identifier(want.schema or want.database),
            sql.Identifier(want.role))
        verb = template.split()[0].lower()  # "grant" or "revoke"
        session.execute(statement, f"{verb} {', '.join(privileges)} on {want.target!r} "
                                   f"for {want.role!r}")
