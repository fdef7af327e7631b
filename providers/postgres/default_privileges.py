"""The DefaultPrivileges kind's client: privileges a role gets on objects another role
creates later.

A DefaultPrivileges makes sure that objects of ``objectType`` that
``targetRole`` creates in ``database`` (in ``schema`` only, when set) give
``role`` the ``privileges``: ``ALTER DEFAULT PRIVILEGES FOR ROLE targetRole
[IN SCHEMA schema] GRANT ... ON TABLES|SEQUENCES|FUNCTIONS|TYPES|SCHEMAS TO
role``. ``observe`` reads the entry of ``pg_default_acl`` (through a second
admin session on ``database``, where the entry lives) with ``aclexplode``;
``create`` and ``update`` grant what is missing, ``delete`` revokes the
privileges again. Objects that already exist are not touched (a Grant with
``tables: ["*"]`` covers those). As with a Grant, each observation records
the spec's privileges the role holds there (``status.atProvider``), and a
privilege that record holds, that the spec no longer lists and that the
role still holds is revoked by the next update; privileges beyond the spec
and the record are left alone unless ``exclusive`` makes the list exact,
``withOption: GRANT``
adds the grant option, and a ``role`` equal to ``targetRole`` is refused:
an owner holds every privilege on what it creates. A role, database or
schema that does not exist yet is retried (``DependencyMissing``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import attrs
from psycopg import sql

from lifecycle.core import references
from lifecycle.core.contract import ManagedResource
from lifecycle.core.values import Creation, Observation
from lifecycle.providers.postgres import fields
from lifecycle.providers.postgres.config import Session, SqlClient, check_name
from lifecycle.providers.postgres.grant_spec import (
    ROUTINE_PRIVILEGES,
    SCHEMA_PRIVILEGES,
    SEQUENCE_PRIVILEGES,
    TABLE_PRIVILEGES,
    privilege_list,
    recorded,
    with_grant_option,
)
from lifecycle.providers.postgres.schema import in_database

__all__ = ["OBJECT_TYPES", "DefaultPrivilegesClient", "DefaultPrivilegesParameters"]

#: Per ``objectType``: (``pg_default_acl.defaclobjtype``, the keyword of ALTER DEFAULT
#: PRIVILEGES, the privileges that type has). Fixed SQL text, never user input.
OBJECT_TYPES: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "table": ("r", "TABLES", TABLE_PRIVILEGES),
    "sequence": ("S", "SEQUENCES", SEQUENCE_PRIVILEGES),
    "function": ("f", "FUNCTIONS", ROUTINE_PRIVILEGES),
    "type": ("T", "TYPES", ("USAGE",)),
    "schema": ("n", "SCHEMAS", SCHEMA_PRIVILEGES),
}


def _object_type(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError("'objectType' must be one of " + ", ".join(OBJECT_TYPES))
    key = value.strip().lower()
    if key not in OBJECT_TYPES:
        raise ValueError(f"'objectType' must be one of {', '.join(OBJECT_TYPES)}, "
                         f"not {value!r}")
    return key


def _privileges(value: Any) -> tuple[str, ...]:
    return privilege_list(value)


def _name(_: Any, attribute: attrs.Attribute, value: Any) -> None:
    fields.check_name_value(f"'{attribute.alias or attribute.name}'", value)


@attrs.frozen
class DefaultPrivilegesParameters:
    """``spec.forProvider`` of a DefaultPrivileges: which role gets which privileges on the
    objects of one type that ``targetRole`` creates in a database (or one of its schemas).

    ``withOption: GRANT`` also gives the right to grant them on; ``exclusive:
    true`` makes the list exact (other default privileges of the role there are
    revoked).
    """

    __schema_validations__ = references.required_rules("role", "database")

    target_role: str = attrs.field(validator=_name, alias="targetRole")
    """The role whose future objects get these privileges: the defaults apply to objects it
    creates."""
    object_type: str = attrs.field(converter=_object_type, alias="objectType")
    """The type of the future objects: table, sequence, function, type or schema."""
    privileges: tuple[str, ...] = attrs.field(converter=_privileges)
    """The privileges to grant on each future object, such as SELECT or USAGE, or ALL for every
    privilege of the type."""
    role: str = fields.referenced_name()
    """The PostgreSQL role that receives the privileges on future objects (or roleRef,
    roleSelector)."""
    role_ref: references.Reference | None = fields.reference("role", "Role")  # noqa: RUF009
    role_selector: references.Selector | None = fields.selector("role", "Role")  # noqa: RUF009
    database: str = fields.referenced_name()
    """The database the default privileges apply in (or databaseRef, databaseSelector)."""
    database_ref: references.Reference | None = fields.reference("database", "Database")  # noqa: RUF009
    database_selector: references.Selector | None = fields.selector("database", "Database")  # noqa: RUF009
    schema: str | None = fields.name()
    """A schema of the database the defaults are limited to; unset, they apply in the whole
    database (or schemaRef, schemaSelector)."""
    schema_ref: references.Reference | None = fields.reference("schema", "Schema")  # noqa: RUF009
    schema_selector: references.Selector | None = fields.selector("schema", "Schema")  # noqa: RUF009
    with_option: str | None = attrs.field(default=None, validator=with_grant_option,
                                          alias="withOption")
    """GRANT also gives the role the right to grant these privileges on to others (WITH GRANT
    OPTION); unset, it does not."""
    exclusive: bool = fields.flag(False)
    """Make the list exact: other default privileges of the role there are revoked. Default false.
    """

    def __attrs_post_init__(self) -> None:
        """Check the role and database are given (or referenced), expand ALL, check each
        privilege against the object type, refuse the owner."""
        references.check_given(self, "role", "database")
        if self.object_type == "schema" and (self.schema, self.schema_ref,
                                             self.schema_selector) != (None, None, None):
            raise ValueError("'schema' cannot be set with objectType schema: default "
                             "privileges on schemas apply to the whole database")
        if self.role == self.target_role:
            raise ValueError("'role' is 'targetRole': the owner holds every privilege on what "
                             "it creates, so it needs no default privileges")
        object.__setattr__(self, "privileges", fields.expand_privileges(
            self.privileges, self.allowed, f"objectType {self.object_type}"))

    @property
    def allowed(self) -> tuple[str, ...]:
        """The privileges objects of this type have."""
        return OBJECT_TYPES[self.object_type][2]

    @property
    def target(self) -> str:
        """Where the default applies, as shown in messages."""
        where = self.database if self.schema is None else f"{self.database}.{self.schema}"
        return f"{OBJECT_TYPES[self.object_type][1].lower()} of {self.target_role!r} in {where}"

    @property
    def scope(self) -> dict[str, str]:
        """Whose default privileges where the record in ``status.atProvider`` is about: role,
        target role, database, schema (when set) and object type."""
        scope = {"role": self.role, "targetRole": self.target_role, "database": self.database,
                 "objectType": self.object_type}
        if self.schema is not None:
            scope["schema"] = self.schema
        return scope


def _stale(resource: ManagedResource, want: DefaultPrivilegesParameters,
           acl: dict[str, bool]) -> set[str]:
    """The privileges the last observation recorded (for the same scope) that the spec no
    longer lists and the role still holds in the entry: what the next update revokes."""
    earlier = recorded(resource.observed, want.scope)
    return (set(earlier) - set(want.privileges)) & set(acl) & set(want.allowed)


class DefaultPrivilegesClient(SqlClient):
    """Observes ``pg_default_acl`` of the database; alters default privileges."""

    subject = "default privileges"

    @contextlib.contextmanager
    def _database(self, database: str, *, missing_ok: bool = False) -> Iterator[Session | None]:
        """The admin session when it is on ``database`` already, else a second one there."""
        if database == self.session.server.database:
            yield self.session
            return
        with in_database(self.session, database, missing_ok=missing_ok) as session:
            yield session

    def observe(self, resource: ManagedResource) -> Observation:
        """The role's entry in the default ACL, compared with the spec and with what the last
        observation recorded."""
        want: DefaultPrivilegesParameters | None = resource.parameters
        if want is None:
            return Observation.absent()
        with self._database(want.database, missing_ok=True) as session:
            if session is None:
                return Observation.absent()
            acl = self._acl(session, want)
        held = set(acl) & set(want.privileges)
        stale = _stale(resource, want, acl)
        if not held and not stale:
            return Observation.absent()
        drifted = [key for key, differs in (
            ("privileges", held != set(want.privileges) or bool(stale)),
            ("withOption", want.with_option is not None
             and not all(acl.get(p) for p in want.privileges)),
            ("exclusive", want.exclusive and not set(acl) <= set(want.privileges))) if differs]
        observed: dict[str, Any] = {"scope": want.scope, "privileges": sorted(held),
                                    "grantable": sorted(p for p in held if acl[p]),
                                    "others": sorted(set(acl) - set(want.privileges))}
        if stale:
            observed["revoking"] = sorted(stale)
        return Observation(exists=True, up_to_date=not drifted, drifted=drifted,
                           observed=observed)

    def create(self, resource: ManagedResource) -> Creation:
        """ALTER DEFAULT PRIVILEGES ... GRANT (granting held privileges again is harmless)."""
        self.update(resource)
        return Creation()

    def update(self, resource: ManagedResource) -> None:
        """GRANT the default privileges the role lacks; REVOKE those the last observation
        recorded that the spec no longer lists (and, when ``exclusive``, every other)."""
        want: DefaultPrivilegesParameters = resource.parameters
        with self._database(want.database) as session:
            assert session is not None
            acl = self._acl(session, want)
            missing = sorted(p for p in want.privileges
                             if p not in acl or (want.with_option and not acl[p]))
            if missing:
                self._alter(session, want, "GRANT", missing)
            extra = set(acl) - set(want.privileges) if want.exclusive else set()
            revoke = sorted(extra | _stale(resource, want, acl))
            if revoke:
                self._alter(session, want, "REVOKE", revoke)

    def delete(self, resource: ManagedResource) -> None:
        """ALTER DEFAULT PRIVILEGES ... REVOKE the privileges (the spec's, and those the last
        observation recorded); objects created meanwhile keep what they were given, and a
        missing database, role or schema leaves nothing to do."""
        want: DefaultPrivilegesParameters | None = resource.parameters
        if want is None:
            return
        ours = set(want.privileges) | recorded(resource.observed, want.scope)
        with self._database(want.database, missing_ok=True) as session:
            if session is not None and set(self._acl(session, want)) & ours:
                self._alter(session, want, "REVOKE", sorted(ours))

    @staticmethod
    def _acl(session: Session, want: DefaultPrivilegesParameters) -> dict[str, bool]:
        """The role's privileges in the default ACL entry (each: whether grantable)."""
        check_name("role", want.role)
        check_name("target role", want.target_role)
        if want.schema is not None:
            check_name("schema", want.schema)
        rows = session.rows(
            "SELECT a.privilege_type, a.is_grantable FROM pg_catalog.pg_default_acl d "
            "JOIN pg_catalog.pg_roles o ON o.oid = d.defaclrole "
            "LEFT JOIN pg_catalog.pg_namespace n ON n.oid = d.defaclnamespace "
            "CROSS JOIN LATERAL pg_catalog.aclexplode(d.defaclacl) a "
            "JOIN pg_catalog.pg_roles r ON r.oid = a.grantee "
            "WHERE o.rolname = %s AND r.rolname = %s AND d.defaclobjtype = %s::\"char\" "
            "AND (CASE WHEN %s::text IS NULL THEN d.defaclnamespace = 0 "
            "ELSE n.nspname = %s END)",
            [want.target_role, want.role, OBJECT_TYPES[want.object_type][0], want.schema,
             want.schema],
            doing=f"observing the default privileges of {want.role!r} on {want.target}")
        acl: dict[str, bool] = {}
        for privilege, grantable in rows:
            acl[privilege] = acl.get(privilege, False) or bool(grantable)
        return acl

    @staticmethod
    def _alter(session: Session, want: DefaultPrivilegesParameters, verb: str,
               privileges: list[str]) -> None:
        # Keywords come only from the fixed lists above, never from the spec's text.
        known = [p for p in privileges if p in want.allowed]
        if not known:
            return
        statement = sql.SQL("ALTER DEFAULT PRIVILEGES FOR ROLE {}").format(
            sql.Identifier(want.target_role))
        if want.schema is not None:
            statement = sql.SQL("{} IN SCHEMA {}").format(statement,
                                                          sql.Identifier(want.schema))
        statement = sql.SQL("{} {} {} ON {} {} {}").format(
            statement, sql.SQL("GRANT" if verb == "GRANT" else "REVOKE"),
            sql.SQL(", ").join(sql.SQL(p) for p in known),
            sql.SQL(OBJECT_TYPES[want.object_type][1]),
            sql.SQL("TO" if verb == "GRANT" else "FROM"), sql.Identifier(want.role))
        if verb == "GRANT" and want.with_option:
            statement = sql.SQL("{} WITH GRANT OPTION").format(statement)
        session.execute(statement, f"{verb.lower()} default {', '.join(known)} on "
                                   f"{want.target} for {want.role!r}")
