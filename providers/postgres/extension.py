"""The Extension kind's client: an extension installed in one database.

``extension`` names it (the object's external name is not used, so one
extension can be managed in several databases); ``version`` and ``schema``
left unset take what ``CREATE EXTENSION`` chose and are written back into
the spec. A different ``version`` runs ``ALTER EXTENSION ... UPDATE TO``, a
different ``schema`` ``ALTER EXTENSION ... SET SCHEMA``. The ownership mark
is the extension's comment, so an extension installed by someone else is
never taken over (nor dropped) without adoption, and ``plpgsql`` never is.
Deleting runs ``DROP EXTENSION`` without ``CASCADE``: objects depending on
it keep it (``ObjectInUse``) until they are gone.
"""

from __future__ import annotations

import attrs
from psycopg import sql

from lifecycle.core import references
from lifecycle.core.contract import ManagedResource
from lifecycle.core.values import Creation, Observation
from lifecycle.providers.postgres import fields, marks
from lifecycle.providers.postgres.config import Session, SqlClient, check_name
from lifecycle.providers.postgres.schema import in_database

__all__ = ["SYSTEM_EXTENSIONS", "ExtensionClient", "ExtensionParameters"]

#: Extensions the server installs itself; never adopted.
SYSTEM_EXTENSIONS = frozenset({"plpgsql"})


@attrs.frozen
class ExtensionParameters:
    """``spec.forProvider`` of an Extension: which one, in which database, version and schema."""

    __schema_validations__ = references.required_rules("database")

    extension: str = fields.name(required=True)
    """The extension's name as the server knows it, such as pgcrypto or hstore."""
    database: str = fields.referenced_name()
    """The database the extension is installed in (or databaseRef, databaseSelector)."""
    database_ref: references.Reference | None = fields.reference("database", "Database")  # noqa: RUF009
    database_selector: references.Selector | None = fields.selector("database", "Database")  # noqa: RUF009
    version: str | None = fields.name()
    """The extension version to install or update to; unset, the server's default version."""
    schema: str | None = fields.name()
    """The schema the extension's objects go into; unset, the first schema of the search path."""

    def __attrs_post_init__(self) -> None:
        """Check the database is given or referenced."""
        references.check_given(self, "database")


class ExtensionClient(SqlClient):
    """Observes ``pg_extension`` of the database; creates, updates, moves and drops."""

    subject = "extension"

    def observe(self, resource: ManagedResource) -> Observation:
        """Compare the installed version and schema with the spec; late-init the unset."""
        want: ExtensionParameters | None = resource.parameters
        if want is None:
            return Observation.absent()
        with in_database(self.session, want.database, missing_ok=True) as session:
            if session is None:
                return Observation.absent()
            row = self._current(session, want.extension)
        if row is None:
            return Observation.absent()
        version, schema, note = row
        mark = marks.mark_of(note)
        protected = ("it is installed by the server itself"
                     if want.extension in SYSTEM_EXTENSIONS else "")
        if resource.owner_mark and not marks.same_owner(mark, resource.owner_mark) and (
                protected or mark):
            return Observation(exists=True, owner=mark, protected=protected)
        drifted = [key for key, differs in (
            ("version", want.version not in (None, version)),
            ("schema", want.schema not in (None, schema)),
            ("comment", not marks.recorded(note, resource.namespace,
                                           self.server.config_name))) if differs]
        return Observation(
            exists=True, up_to_date=not drifted, drifted=drifted,
            late_init={"version": version, "schema": schema},
            observed={"version": version, "schema": schema, "database": want.database},
            owner=mark, protected=protected)

    def create(self, resource: ManagedResource) -> Creation:
        """CREATE EXTENSION with the spec's schema and version, and its mark, in one transaction."""
        want: ExtensionParameters = resource.parameters
        check_name("extension", want.extension)
        with in_database(self.session, want.database) as session:
            assert session is not None
            found = self._current(session, want.extension)
            if found is not None:
                marks.check_ours("extension", want.extension, found[2], resource.owner_mark)
                return Creation()
            options: list[sql.Composable] = []
            if want.schema is not None:
                check_name("schema", want.schema)
                options.append(sql.SQL("SCHEMA {}").format(sql.Identifier(want.schema)))
            if want.version is not None:
                options.append(sql.SQL("VERSION {}").format(sql.Literal(want.version)))
            statement = sql.SQL("CREATE EXTENSION {}").format(sql.Identifier(want.extension))
            if options:
                statement = sql.SQL("{} WITH {}").format(statement, sql.SQL(" ").join(options))
            with session.connection.transaction():
                session.execute(statement, f"creating extension {want.extension!r} in "
                                           f"{want.database!r}")
                self._mark(session, want.extension, resource.owner_mark,
                           (resource.namespace, self.server.config_name))
        return Creation()

    def update(self, resource: ManagedResource) -> None:
        """ALTER EXTENSION UPDATE TO the version and SET SCHEMA to the schema; mark it."""
        want: ExtensionParameters = resource.parameters
        check_name("extension", want.extension)
        target = sql.Identifier(want.extension)
        with in_database(self.session, want.database) as session:
            assert session is not None
            row = self._current(session, want.extension)
            with session.connection.transaction():
                if want.version is not None and (row is None or row[0] != want.version):
                    session.execute(sql.SQL("ALTER EXTENSION {} UPDATE TO {}").format(
                        target, sql.Literal(want.version)),
                        f"updating extension {want.extension!r} to {want.version!r}")
                if want.schema is not None and (row is None or row[1] != want.schema):
                    check_name("schema", want.schema)
                    session.execute(sql.SQL("ALTER EXTENSION {} SET SCHEMA {}").format(
                        target, sql.Identifier(want.schema)),
                        f"moving extension {want.extension!r} to schema {want.schema!r}")
                self._mark(session, want.extension, resource.owner_mark,
                           (resource.namespace, self.server.config_name))

    def delete(self, resource: ManagedResource) -> None:
        """DROP EXTENSION IF EXISTS (RESTRICT: objects using it keep it, and are retried)."""
        want: ExtensionParameters | None = resource.parameters
        if want is None:
            return
        check_name("extension", want.extension)
        with in_database(self.session, want.database, missing_ok=True) as session:
            if session is not None:
                session.execute(sql.SQL("DROP EXTENSION IF EXISTS {}").format(
                    sql.Identifier(want.extension)),
                    f"dropping extension {want.extension!r} from {want.database!r}")

    @staticmethod
    def _mark(session: Session, extension: str, mark: str, tenant: tuple[str, str]) -> None:
        if mark:
            session.execute(marks.comment("EXTENSION", extension, mark, *tenant),
                            f"marking extension {extension!r}")

    @staticmethod
    def _current(session: Session, extension: str) -> tuple[str, str, str | None] | None:
        """(version, schema, comment) of the installed extension, or None."""
        row = session.row(
            "SELECT e.extversion, n.nspname, pg_catalog.obj_description(e.oid, 'pg_extension') "
            "FROM pg_catalog.pg_extension e JOIN pg_catalog.pg_namespace n "
            "ON n.oid = e.extnamespace WHERE e.extname = %s", [extension],
            doing=f"observing extension {extension!r}")
        return None if row is None else (row[0], row[1], row[2])
