"""The Database kind's client: a database's owner, encoding, locale and connection settings.

``owner``, ``encoding`` and ``connectionLimit`` left unset take the
server's defaults, which ``observe`` reports through ``late_init`` so the
engine writes them back into the spec. ``template`` is used only when the
database is created (PostgreSQL does not remember it). The encoding of an
existing database cannot change: asking for another one is a terminal
``ImmutableField`` error, never a silent drop and re-create; so is a
different ``lcCollate`` or ``lcCType``. ``allowConnections`` and
``isTemplate`` left unset are not managed; set, they are kept.

``tablespace`` (late-initialised like the owner) is where the database
lives: ``CREATE DATABASE ... TABLESPACE`` at creation and ``ALTER DATABASE
... SET TABLESPACE`` when the spec or the server changes it. Moving copies
every file of the database and needs it to have no other sessions (nor the
admin connected to it): while some remain, the move fails with
``ObjectInUse`` and is retried.
"""

from __future__ import annotations

from typing import Any

import attrs
from psycopg import sql

from lifecycle.core.contract import ManagedResource
from lifecycle.core.errors import TerminalError
from lifecycle.core.values import Creation, Observation, ProviderStatus
from lifecycle.providers.postgres import fields, marks
from lifecycle.providers.postgres.config import SqlClient, check_name

__all__ = ["DatabaseClient", "DatabaseParameters", "same_locale"]


@attrs.frozen
class DatabaseParameters:
    """``spec.forProvider`` of a Database; unset fields are late-initialised."""

    owner: str | None = fields.name()
    """The role that owns the database; unset, the provider's admin role, read back from the
    server."""
    encoding: str | None = fields.name()
    """The character set encoding, such as UTF8; set at creation only. Unset, the template's, read
    back from the server."""
    template: str | None = fields.name()
    """The database copied to create this one (default: the server's, template1); used at creation
    only."""
    connection_limit: int | None = fields.connection_limit(None)
    """How many concurrent connections the database accepts: -1 for no limit; unset, the
    server's value, read back into the spec."""
    lc_collate: str | None = fields.text("lcCollate")
    """The collation order (LC_COLLATE), such as C or en_US.UTF-8; set at creation only. Unset,
    the template's."""
    lc_ctype: str | None = fields.text("lcCType")
    """The character classification (LC_CTYPE), such as C or en_US.UTF-8; set at creation only.
    Unset, the template's."""
    allow_connections: bool | None = fields.optional_flag("allowConnections")
    """Whether anyone may connect to the database; unset, not managed."""
    is_template: bool | None = fields.optional_flag("isTemplate")
    """Whether the database is a template that others may be copied from; unset, not managed. A
    template is unmarked before it is dropped."""
    tablespace: str | None = fields.name()
    """The tablespace the database lives in (a change moves it); unset, the server's, read back
    into the spec."""


def same_locale(wanted: str | None, held: str) -> bool:
    """Whether the server's recorded locale ``held`` is the spec's ``wanted`` (unset matches
    anything; ``POSIX`` is recorded as ``C``)."""
    if wanted is None:
        return True
    return ("C" if wanted == "POSIX" else wanted) == held


class DatabaseClient(SqlClient):
    """Observes databases through ``pg_database``; creates, alters and drops them."""

    subject = "database"

    def observe(self, resource: ManagedResource) -> Observation:
        """Compare owner, encoding and connection limit with the spec; late-init the unset."""
        name = self.name(resource)
        row = self._current(name, "pg_catalog.pg_get_userbyid(datdba), encoding, "
                                  "pg_catalog.pg_encoding_to_char(encoding), datconnlimit, "
                                  "datistemplate, pg_catalog.shobj_description(oid, 'pg_database'),"
                                  " datcollate, datctype, datallowconn, "
                                  "(SELECT spcname FROM pg_catalog.pg_tablespace "
                                  "WHERE oid = dattablespace)")
        if row is None:
            return Observation.absent()
        (owner, encoding_id, encoding, limit, template, note, collate, ctype, allow,
         tablespace) = row
        mark = marks.mark_of(note)
        protected = marks.database_protection(name, template=template,
                                              admin_database=self.server.database)
        if resource.owner_mark and not marks.same_owner(mark, resource.owner_mark) and (
                protected or mark):
            # Not (yet) this object's: report what is needed to judge it, nothing more.
            return Observation(exists=True, owner=mark, protected=protected)
        want: DatabaseParameters = resource.parameters or DatabaseParameters()
        observed = {"owner": owner, "encoding": encoding, "connectionLimit": limit,
                    "lcCollate": collate, "lcCType": ctype, "allowConnections": allow,
                    "isTemplate": template, "tablespace": tablespace}
        if limit == -2:  # PostgreSQL 16+: left invalid by an interrupted DROP DATABASE
            return Observation(exists=True, up_to_date=False, status=ProviderStatus.FAILED,
                               message=f"database {name!r} is invalid (an interrupted DROP "
                                       "DATABASE); drop it by hand to recover",
                               observed=observed)
        # The fields that differ, by spec key, for the drift Event (never their values).
        drifted = [key for key, differs in (
            ("owner", want.owner not in (None, owner)),
            ("connectionLimit", want.connection_limit not in (None, limit)),
            ("encoding", want.encoding is not None
             and self._encoding_id(want.encoding) != encoding_id),
            ("lcCollate", not same_locale(want.lc_collate, collate)),
            ("lcCType", not same_locale(want.lc_ctype, ctype)),
            ("allowConnections", want.allow_connections not in (None, allow)),
            ("isTemplate", want.is_template not in (None, template)),
            ("tablespace", want.tablespace not in (None, tablespace)),
            ("comment", not marks.recorded(note, resource.namespace,
                                           self.server.config_name))) if differs]
        return Observation(
            exists=True,
            up_to_date=not drifted,
            drifted=drifted,
            late_init={"owner": owner, "encoding": encoding, "connectionLimit": limit,
                       "tablespace": tablespace},
            connection=self.server.connection_details(want.owner or owner, None, name,
                                                      "Database"),
            observed=observed,
            owner=mark,
            protected=protected,
        )

    def create(self, resource: ManagedResource) -> Creation:
        """CREATE DATABASE with the spec's options; an existing database is success."""
        name = self.name(resource)
        want: DatabaseParameters = resource.parameters or DatabaseParameters()
        if want.encoding is not None and self._encoding_id(want.encoding) < 0:
            raise TerminalError(f"unknown encoding {want.encoding!r} for database {name!r}; "
                                "use a PostgreSQL encoding name such as UTF8 or LATIN1")
        found = self._current(name, "pg_catalog.shobj_description(oid, 'pg_database')")
        if found is not None:
            marks.check_ours("database", name, found[0], resource.owner_mark)
            return Creation()
        options: list[sql.Composable] = []
        if want.owner is not None:
            check_name("owner role", want.owner)
            options.append(sql.SQL("OWNER {}").format(sql.Identifier(want.owner)))
        if want.template is not None:
            check_name("template database", want.template)
            options.append(sql.SQL("TEMPLATE {}").format(sql.Identifier(want.template)))
        if want.encoding is not None:
            options.append(sql.SQL("ENCODING {}").format(sql.Literal(want.encoding)))
        if want.tablespace is not None and want.tablespace != self._template_tablespace(want):
            # Naming the template's own tablespace would change nothing but ask for CREATE
            # on it, which a non-superuser admin lacks on pg_default.
            check_name("tablespace", want.tablespace)
            options.append(sql.SQL("TABLESPACE {}").format(sql.Identifier(want.tablespace)))
        if want.connection_limit is not None:
            options.append(sql.SQL("CONNECTION LIMIT {}").format(
                sql.Literal(want.connection_limit)))
        for keyword, value in (("LC_COLLATE", want.lc_collate), ("LC_CTYPE", want.lc_ctype),
                               ("ALLOW_CONNECTIONS", want.allow_connections),
                               ("IS_TEMPLATE", want.is_template)):
            if value is not None:
                options.append(sql.SQL(keyword + " {}").format(sql.Literal(value)))
        statement = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
        if options:
            statement = sql.SQL("{} WITH {}").format(statement, sql.SQL(" ").join(options))
        self.session.execute(statement, f"creating database {name!r}")
        # CREATE DATABASE cannot share a transaction: a crash before the mark leaves the
        # database unmarked, and the engine, whose journal shows the create, marks it.
        if resource.owner_mark:
            self.session.execute(marks.comment("DATABASE", name, resource.owner_mark,
                                                 resource.namespace, self.server.config_name),
                                 f"marking database {name!r}")
        return Creation()

    def update(self, resource: ManagedResource) -> None:
        """ALTER DATABASE owner and connection limit; a different encoding is terminal."""
        name = self.name(resource)
        want: DatabaseParameters = resource.parameters or DatabaseParameters()
        row = self._current(name, "encoding, datcollate, datctype, (SELECT spcname FROM "
                                  "pg_catalog.pg_tablespace WHERE oid = dattablespace)")
        if row is not None:
            for key, value, held in (("lcCollate", want.lc_collate, row[1]),
                                     ("lcCType", want.lc_ctype, row[2])):
                if not same_locale(value, held):
                    raise TerminalError(
                        f"database {name!r} exists with {key} {held!r}; the locale of a "
                        "database cannot change (create a new database instead)",
                        reason="ImmutableField")
        if want.encoding is not None and row is not None:
            wanted = self._encoding_id(want.encoding)
            if wanted < 0:
                raise TerminalError(f"unknown encoding {want.encoding!r} for database {name!r}")
            if wanted != row[0]:
                raise TerminalError(
                    f"database {name!r} exists with another encoding; the encoding of a "
                    "database cannot change (create a new database instead)",
                    reason="ImmutableField")
        target = sql.Identifier(name)
        if resource.owner_mark:
            self.session.execute(marks.comment("DATABASE", name, resource.owner_mark,
                                                 resource.namespace, self.server.config_name),
                                 f"marking database {name!r}")
        if want.owner is not None:
            check_name("owner role", want.owner)
            self.session.execute(
                sql.SQL("ALTER DATABASE {} OWNER TO {}").format(target,
                                                               sql.Identifier(want.owner)),
                f"changing the owner of database {name!r}")
        if want.connection_limit is not None:
            self.session.execute(
                sql.SQL("ALTER DATABASE {} WITH CONNECTION LIMIT {}").format(
                    target, sql.Literal(want.connection_limit)),
                f"changing the connection limit of database {name!r}")
        for keyword, flag in (("ALLOW_CONNECTIONS", want.allow_connections),
                              ("IS_TEMPLATE", want.is_template)):
            if flag is not None:
                self.session.execute(
                    sql.SQL("ALTER DATABASE {} WITH " + keyword + " {}").format(
                        target, sql.Literal(flag)),
                    f"setting {keyword} of database {name!r}")
        if want.tablespace is not None and row is not None and row[3] != want.tablespace:
            check_name("tablespace", want.tablespace)
            # Not in a transaction (the session is autocommit); refused while anyone,
            # the admin included, is connected to the database.
            self.session.execute(
                sql.SQL("ALTER DATABASE {} SET TABLESPACE {}").format(
                    target, sql.Identifier(want.tablespace)),
                f"moving database {name!r} to tablespace {want.tablespace!r} (only possible "
                "while no other session is connected to it; retried)")

    def delete(self, resource: ManagedResource) -> None:
        """DROP DATABASE IF EXISTS, ending other sessions on it (PostgreSQL 13+)."""
        name = self.name(resource)
        found = self._current(name, "datistemplate")
        if found is not None and found[0]:  # PostgreSQL refuses to drop a template
            self.session.execute(sql.SQL("ALTER DATABASE {} WITH IS_TEMPLATE false").format(
                sql.Identifier(name)), f"unmarking template database {name!r}")
        statement = sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name))
        if self.session.connection.info.server_version >= 130000:
            statement = sql.SQL("{} WITH (FORCE)").format(statement)
        self.session.execute(statement, f"dropping database {name!r}")

    def _current(self, name: str, columns: str) -> tuple[Any, ...] | None:
        """``columns`` (fixed SQL text, never user input) of the database, or None."""
        return self.session.row(f"SELECT {columns} FROM pg_catalog.pg_database "
                                "WHERE datname = %s", [name], doing=f"observing database {name!r}")

    def _template_tablespace(self, want: DatabaseParameters) -> str | None:
        """The tablespace of the template a new database is copied from (its default)."""
        row = self.session.row(
            "SELECT t.spcname FROM pg_catalog.pg_database d JOIN pg_catalog.pg_tablespace t "
            "ON t.oid = d.dattablespace WHERE d.datname = %s", [want.template or "template1"],
            doing="looking up the template's tablespace")
        return row[0] if row else None

    def _encoding_id(self, encoding: str) -> int:
        """The server's number for an encoding name, -1 when it knows no such encoding."""
        row = self.session.row("SELECT pg_catalog.pg_char_to_encoding(%s)", [encoding],
                               doing="looking up an encoding")
        return int(row[0]) if row else -1
