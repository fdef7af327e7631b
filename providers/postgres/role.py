"""The Role kind's client: a PostgreSQL role, its attributes and its password.

The engine generates the password, persists it in the role's connection
Secret before the first create and hands it over as ``resource.password``
on every reconcile; a password the user writes into that Secret arrives the
same way. ``observe`` recomputes the role's stored SCRAM (or md5) verifier
from that password, so a changed password reads as "not up to date" and
``update`` applies it. Only a verifier ever reaches the server.

Reading verifiers needs SELECT on ``pg_authid`` (a superuser admin has it);
without it the password cannot be checked and is applied only by the next
update, which ``status.atProvider.passwordChecked: false`` makes visible.
"""

from __future__ import annotations

import attrs
from psycopg import sql

from lifecycle.core.values import Creation, Observation
from lifecycle.providers.postgres import fields, marks, scram
from lifecycle.providers.postgres.config import SqlClient
from lifecycle.runtime.contract import ManagedResource


@attrs.frozen
class RoleParameters:
    """``spec.forProvider`` of a Role: what the role may do."""

    login: bool = fields.flag(True)
    createdb: bool = fields.flag(False)
    createrole: bool = fields.flag(False)
    connection_limit: int = fields.connection_limit(-1)


class RoleClient(SqlClient):
    """Observes roles through ``pg_roles``; creates, alters and drops them."""

    subject = "role"

    def observe(self, resource: ManagedResource) -> Observation:
        """Compare the role's attributes and password with the spec."""
        name = self.name(resource)
        row = self.session.row("SELECT rolcanlogin, rolcreatedb, rolcreaterole, rolconnlimit, "
                               "rolsuper, rolbypassrls, rolreplication, "
                               "pg_catalog.shobj_description(oid, 'pg_authid') "
                               "FROM pg_catalog.pg_roles WHERE rolname = %s", [name],
                               doing=f"observing role {name!r}")
        if row is None:
            return Observation.absent()
        login, createdb, createrole, limit, superuser, bypassrls, replication, note = row
        owner = marks.mark_of(note)
        protected = marks.role_protection(name, superuser=superuser, bypassrls=bypassrls,
                                          replication=replication, admin=self.server.username)
        if resource.owner_mark and not marks.same_owner(owner, resource.owner_mark) and (
                protected or owner):
            # Not (yet) this object's: report what is needed to judge it, nothing more.
            return Observation(exists=True, owner=owner, protected=protected)
        want: RoleParameters = resource.parameters or RoleParameters()
        password_ok = self._password_matches(name, resource.password)
        up_to_date = (
            (login, createdb, createrole, limit)
            == (want.login, want.createdb, want.createrole, want.connection_limit)
            and password_ok is not False
        )
        return Observation(
            exists=True,
            up_to_date=up_to_date,
            connection=self.server.connection_details(name, resource.password,
                                                      self.server.database),
            observed={"login": login, "createdb": createdb, "createrole": createrole,
                      "connectionLimit": limit, "passwordChecked": password_ok is not None},
            owner=owner,
            protected=protected,
        )

    def create(self, resource: ManagedResource) -> Creation:
        """CREATE ROLE with the attributes and the password's verifier; existing is success."""
        name = self.name(resource)
        found = self.session.row("SELECT pg_catalog.shobj_description(oid, 'pg_authid') "
                                 "FROM pg_catalog.pg_roles WHERE rolname = %s", [name],
                                 doing=f"observing role {name!r}")
        if found is not None:
            marks.check_ours("role", name, found[0], resource.owner_mark)
            return Creation()
        statement, verifier = self._statement("CREATE ROLE", name, resource)
        with self.session.connection.transaction():  # the role and its mark, or neither
            self.session.execute(statement, f"creating role {name!r}",
                                 [resource.password, verifier])
            if resource.owner_mark:
                self.session.execute(marks.comment("ROLE", name, resource.owner_mark),
                                     f"marking role {name!r}")
        return Creation(connection=self.server.connection_details(
            name, resource.password, self.server.database))

    def update(self, resource: ManagedResource) -> None:
        """ALTER ROLE to the spec's attributes and the Secret's password."""
        name = self.name(resource)
        statement, verifier = self._statement("ALTER ROLE", name, resource)
        with self.session.connection.transaction():
            self.session.execute(statement, f"altering role {name!r}",
                                 [resource.password, verifier])
            if resource.owner_mark:
                self.session.execute(marks.comment("ROLE", name, resource.owner_mark),
                                     f"marking role {name!r}")

    def delete(self, resource: ManagedResource) -> None:
        """DROP ROLE IF EXISTS (a role still holding privileges is retried later)."""
        name = self.name(resource)
        self.session.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(name)),
                             f"dropping role {name!r}")

    def _statement(self, verb: str, name: str,
                   resource: ManagedResource) -> tuple[sql.Composed, str | None]:
        want: RoleParameters = resource.parameters or RoleParameters()
        options: list[sql.Composable] = [
            sql.SQL("LOGIN" if want.login else "NOLOGIN"),
            sql.SQL("CREATEDB" if want.createdb else "NOCREATEDB"),
            sql.SQL("CREATEROLE" if want.createrole else "NOCREATEROLE"),
            sql.SQL("CONNECTION LIMIT {}").format(sql.Literal(want.connection_limit)),
        ]
        verifier = None
        if resource.password:
            verifier = scram.scram_verifier(resource.password)
            options.append(sql.SQL("PASSWORD {}").format(sql.Literal(verifier)))
        statement = sql.SQL("{} {} WITH {}").format(
            sql.SQL(verb), sql.Identifier(name), sql.SQL(" ").join(options))
        return statement, verifier

    def _password_matches(self, name: str, password: str | None) -> bool | None:
        """True/False when the stored verifier could be checked, None when it could not."""
        if not password:
            return None
        doing = f"observing the password of role {name!r}"
        readable = self.session.row(
            "SELECT pg_catalog.has_table_privilege('pg_catalog.pg_authid', 'SELECT')", [], doing)
        if not readable or not readable[0]:
            return None
        row = self.session.row("SELECT rolpassword FROM pg_catalog.pg_authid WHERE rolname = %s",
                               [name], doing)
        return None if row is None else scram.matches(password, row[0], name)
