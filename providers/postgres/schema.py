"""The Schema kind's client: a schema in one database, its owner and PUBLIC's access.

Schemas live inside a database, so every call opens a second admin session
on ``database`` (the provider config's connects to its own). A database
that does not exist yet is retried (``DependencyMissing``) on create, and
means the schema is gone on observe and delete. ``role`` (the owner) left
unset takes the admin and is written back into the spec.
``revokePublicOnSchema: true`` keeps PUBLIC without any privilege on the
schema. Deleting drops the schema only when it is empty (``ObjectInUse``
until it is). The ownership mark is the schema's comment.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import attrs
from psycopg import sql

from lifecycle.core import references
from lifecycle.core.contract import ManagedResource
from lifecycle.core.errors import ExternalError
from lifecycle.core.values import Creation, Observation
from lifecycle.providers.postgres import fields, marks
from lifecycle.providers.postgres.config import Session, SqlClient, check_name

__all__ = ["SYSTEM_SCHEMAS", "SchemaClient", "SchemaParameters", "in_database", "schema_protection"]

#: Schemas the server makes itself; never adopted.
SYSTEM_SCHEMAS = frozenset({"public", "information_schema"})


@attrs.frozen
class SchemaParameters:
    """``spec.forProvider`` of a Schema: where it lives, who owns it, whether PUBLIC may use it."""

    __schema_validations__ = references.required_rules("database")

    database: str = fields.referenced_name()
    """The database the schema lives in (or databaseRef, databaseSelector)."""
    database_ref: references.Reference | None = fields.reference("database", "Database")  # noqa: RUF009
    database_selector: references.Selector | None = fields.selector("database", "Database")  # noqa: RUF009
    role: str | None = fields.name()
    """The role that owns the schema; unset, the provider's admin role (or roleRef,
    roleSelector)."""
    role_ref: references.Reference | None = fields.reference("role", "Role")  # noqa: RUF009
    role_selector: references.Selector | None = fields.selector("role", "Role")  # noqa: RUF009
    revoke_public_on_schema: bool = fields.flag(False, alias="revokePublicOnSchema")
    """Keep PUBLIC without privileges on the schema (REVOKE ALL ON SCHEMA ... FROM PUBLIC).
    Default false."""

    def __attrs_post_init__(self) -> None:
        """Check the database is given or referenced."""
        references.check_given(self, "database")


def schema_protection(name: str) -> str:
    """Why the schema ``name`` must never be adopted, or "" when it may be."""
    if name in SYSTEM_SCHEMAS or name.startswith("pg_"):
        return "it is created by the server itself"
    return ""


@contextlib.contextmanager
def in_database(admin: Session, database: str, *,
                missing_ok: bool = False) -> Iterator[Session | None]:
    """A second admin session on ``database``; None when it does not exist and
    ``missing_ok``, else a retryable ``DependencyMissing``."""
    check_name("database", database)
    found = admin.row("SELECT 1 FROM pg_catalog.pg_database WHERE datname = %s", [database],
                      doing=f"observing database {database!r}")
    if found is None:
        if missing_ok:
            yield None
            return
        raise ExternalError(f"database {database!r} does not exist (yet)",
                            reason="DependencyMissing")
    session = Session.open(attrs.evolve(admin.server, database=database))
    try:
        yield session
    finally:
        session.close()


class SchemaClient(SqlClient):
    """Observes schemas through ``pg_namespace`` of their database; creates, alters, drops."""

    subject = "schema"

    def observe(self, resource: ManagedResource) -> Observation:
        """Compare the schema's owner and PUBLIC's privileges with the spec."""
        name = self.name(resource)
        want: SchemaParameters | None = resource.parameters
        if want is None:
            return Observation.absent()
        with in_database(self.session, want.database, missing_ok=True) as session:
            if session is None:
                return Observation.absent()
            row = self._current(session, name)
        if row is None:
            return Observation.absent()
        owner, note, public = row
        mark = marks.mark_of(note)
        protected = schema_protection(name)
        if resource.owner_mark and not marks.same_owner(mark, resource.owner_mark) and (
                protected or mark):
            return Observation(exists=True, owner=mark, protected=protected)
        drifted = [key for key, differs in (
            ("role", want.role not in (None, owner)),
            ("revokePublicOnSchema", want.revoke_public_on_schema and bool(public)),
            ("comment", not marks.recorded(note, resource.namespace,
                                           self.server.config_name))) if differs]
        return Observation(exists=True, up_to_date=not drifted, drifted=drifted,
                           late_init={"role": owner},
                           observed={"owner": owner, "database": want.database,
                                     "publicPrivileges": bool(public)},
                           owner=mark, protected=protected)

    def create(self, resource: ManagedResource) -> Creation:
        """CREATE SCHEMA with its owner and mark (and PUBLIC revoked), in one transaction."""
        name = self.name(resource)
        want: SchemaParameters = resource.parameters
        with in_database(self.session, want.database) as session:
            assert session is not None
            found = self._current(session, name)
            if found is not None:
                marks.check_ours("schema", name, found[1], resource.owner_mark)
                return Creation()
            statement = sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name))
            if want.role is not None:
                check_name("owner role", want.role)
                statement = sql.SQL("{} AUTHORIZATION {}").format(statement,
                                                                  sql.Identifier(want.role))
            with session.connection.transaction():
                session.execute(statement, f"creating schema {name!r} in {want.database!r}")
                self._settle(session, name, want, resource.owner_mark,
                             (resource.namespace, self.server.config_name))
        return Creation()

    def update(self, resource: ManagedResource) -> None:
        """ALTER SCHEMA OWNER TO the spec's role; revoke PUBLIC when asked; mark it."""
        name = self.name(resource)
        want: SchemaParameters = resource.parameters
        with in_database(self.session, want.database) as session:
            assert session is not None
            with session.connection.transaction():
                if want.role is not None:
                    check_name("owner role", want.role)
                    session.execute(sql.SQL("ALTER SCHEMA {} OWNER TO {}").format(
                        sql.Identifier(name), sql.Identifier(want.role)),
                        f"changing the owner of schema {name!r}")
                self._settle(session, name, want, resource.owner_mark,
                             (resource.namespace, self.server.config_name))

    def delete(self, resource: ManagedResource) -> None:
        """DROP SCHEMA IF EXISTS (RESTRICT: a schema still holding objects is retried)."""
        name = self.name(resource)
        want: SchemaParameters | None = resource.parameters
        if want is None:
            return
        with in_database(self.session, want.database, missing_ok=True) as session:
            if session is not None:
                session.execute(sql.SQL("DROP SCHEMA IF EXISTS {}").format(sql.Identifier(name)),
                                f"dropping schema {name!r} from {want.database!r}")

    @staticmethod
    def _settle(session: Session, name: str, want: SchemaParameters, mark: str,
                tenant: tuple[str, str]) -> None:
        if mark:
            session.execute(marks.comment("SCHEMA", name, mark, *tenant),
                            f"marking schema {name!r}")
        if want.revoke_public_on_schema:
            session.execute(sql.SQL("REVOKE ALL ON SCHEMA {} FROM PUBLIC").format(
                sql.Identifier(name)), f"revoking PUBLIC's privileges on schema {name!r}")

    @staticmethod
    def _current(session: Session, name: str) -> tuple[str, str | None, bool] | None:
        """(owner, comment, whether PUBLIC holds any privilege) of the schema, or None."""
        row = session.row(
            "SELECT pg_catalog.pg_get_userbyid(n.nspowner), "
            "pg_catalog.obj_description(n.oid, 'pg_namespace'), EXISTS (SELECT 1 FROM "
            "pg_catalog.aclexplode(COALESCE(n.nspacl, pg_catalog.acldefault('n', n.nspowner)))"
            " a WHERE a.grantee = 0) FROM pg_catalog.pg_namespace n WHERE n.nspname = %s",
            [name], doing=f"observing schema {name!r}")
        return None if row is None else (row[0], row[1], row[2])
