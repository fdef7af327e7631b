"""The Role kind's client: a PostgreSQL role, its attributes and its password.

The engine generates the password, persists it in the role's connection
Secret before the first create and hands it over as ``resource.password``
on every reconcile; a password the user writes into that Secret arrives the
same way. ``observe`` recomputes the role's stored SCRAM (or md5) verifier
from that password, so a changed password reads as "not up to date" and
``update`` applies it. Only a verifier ever reaches the server.

Reading verifiers needs SELECT on ``pg_authid`` (a superuser admin has it);
without it the client logs in as the role with the password in one short
connection (:mod:`lifecycle.providers.postgres.login`), so a password that
does not work is never reported Ready. ``status.atProvider.passwordCheck``
says which check ran (``verifier``, ``login`` or ``none``).
"""

from __future__ import annotations

import attrs
from psycopg import sql

from lifecycle.core.errors import TerminalError
from lifecycle.core.values import Creation, Observation
from lifecycle.providers.postgres import fields, marks, scram
from lifecycle.providers.postgres.config import Session, SqlClient, check_name
from lifecycle.providers.postgres.login import password_works
from lifecycle.runtime.contract import ManagedResource

#: Predefined roles whose membership lets a role act as the server's operating-system user.
SERVER_ACCESS_ROLES = frozenset({"pg_execute_server_program", "pg_read_server_files",
                                 "pg_write_server_files"})
#: The role columns ``observe`` compares with the spec, in :data:`_ATTRIBUTES` order.
_COLUMNS = ("rolcanlogin, rolcreatedb, rolcreaterole, rolinherit, rolreplication, "
            "rolbypassrls, rolsuper, rolconnlimit")
#: (spec key, keyword when true, keyword when false) for each boolean attribute.
_ATTRIBUTES = (("login", "LOGIN", "NOLOGIN"), ("createdb", "CREATEDB", "NOCREATEDB"),
               ("createrole", "CREATEROLE", "NOCREATEROLE"), ("inherit", "INHERIT", "NOINHERIT"),
               ("replication", "REPLICATION", "NOREPLICATION"),
               ("bypassRls", "BYPASSRLS", "NOBYPASSRLS"),
               ("superUser", "SUPERUSER", "NOSUPERUSER"))
#: Attributes only a superuser may change (PostgreSQL 15 and older refuse even a no-op).
_SUPERUSER_ONLY = frozenset({"replication", "bypassRls", "superUser"})


@attrs.frozen
class RoleParameters:
    """``spec.forProvider`` of a Role: what the role may do and which roles it belongs to.

    ``superUser`` is refused unless the provider config sets ``allowSuperuser:
    true``. ``validUntil`` unset means the password never expires.
    ``memberOf`` unset leaves memberships alone; a list is exact: missing
    memberships are granted, others revoked. ``reassignOwnedTo`` and
    ``dropOwned`` (both off by default) say what deleting the role does with
    the objects it owns and the privileges it holds in every database.
    """

    login: bool = fields.flag(True)
    createdb: bool = fields.flag(False)
    createrole: bool = fields.flag(False)
    connection_limit: int = fields.connection_limit(-1)
    inherit: bool = fields.flag(True)
    replication: bool = fields.flag(False)
    bypass_rls: bool = fields.flag(False, alias="bypassRls")
    superuser: bool = fields.flag(False, alias="superUser")
    valid_until: str | None = fields.text("validUntil")
    member_of: tuple[str, ...] | None = fields.names("memberOf")
    reassign_owned_to: str | None = fields.text("reassignOwnedTo")
    drop_owned: bool = fields.flag(False, alias="dropOwned")

    def flags(self) -> dict[str, bool]:
        """The boolean attributes keyed by spec key."""
        return {"login": self.login, "createdb": self.createdb, "createrole": self.createrole,
                "inherit": self.inherit, "replication": self.replication,
                "bypassRls": self.bypass_rls, "superUser": self.superuser}


class RoleClient(SqlClient):
    """Observes roles through ``pg_roles``; creates, alters and drops them."""

    subject = "role"

    def observe(self, resource: ManagedResource) -> Observation:
        """Compare the role's attributes, memberships and password with the spec."""
        name = self.name(resource)
        want: RoleParameters = resource.parameters or RoleParameters()
        row = self.session.row(
            f"SELECT {_COLUMNS}, pg_catalog.shobj_description(oid, 'pg_authid'), "
            "CASE WHEN %s::text IS NULL THEN rolvaliduntil IS NULL OR rolvaliduntil = 'infinity' "
            "ELSE rolvaliduntil IS NOT DISTINCT FROM %s::timestamptz END, "
            "rolvaliduntil::text FROM pg_catalog.pg_roles WHERE rolname = %s",
            [want.valid_until, want.valid_until, name], doing=f"observing role {name!r}")
        if row is None:
            return Observation.absent()
        login, (replication, bypassrls, superuser) = row[0], row[4:7]
        limit, note, expiry_ok, expiry = row[7:]
        owner = marks.mark_of(note)
        protected = marks.role_protection(name, superuser=superuser, bypassrls=bypassrls,
                                          replication=replication, admin=self.server.username)
        if resource.owner_mark and not marks.same_owner(owner, resource.owner_mark) and (
                protected or owner):
            # Not (yet) this object's: report what is needed to judge it, nothing more.
            return Observation(exists=True, owner=owner, protected=protected)
        held = dict(zip([key for key, _, _ in _ATTRIBUTES], row[:7], strict=True))
        member_of = self._memberships(name)
        check, password_ok = self._password_check(name, resource.password, login)
        up_to_date = (
            held == want.flags() and limit == want.connection_limit and bool(expiry_ok)
            and (want.member_of is None or set(want.member_of) == set(member_of))
            and password_ok is not False
        )
        return Observation(
            exists=True,
            up_to_date=up_to_date,
            connection=self.server.connection_details(name, resource.password,
                                                      self.server.database, "Role"),
            observed={**held, "connectionLimit": limit, "validUntil": expiry,
                      "memberOf": member_of, "passwordChecked": password_ok is not None,
                      "passwordCheck": check},
            owner=owner,
            protected=protected,
        )

    def create(self, resource: ManagedResource) -> Creation:
        """CREATE ROLE with the attributes and the password's verifier; existing is success."""
        name = self.name(resource)
        want: RoleParameters = resource.parameters or RoleParameters()
        self._check_allowed(want)
        found = self.session.row("SELECT pg_catalog.shobj_description(oid, 'pg_authid') "
                                 "FROM pg_catalog.pg_roles WHERE rolname = %s", [name],
                                 doing=f"observing role {name!r}")
        if found is not None:
            marks.check_ours("role", name, found[0], resource.owner_mark)
            return Creation()
        # CREATE ROLE accepts NOSUPERUSER and the like from a CREATEROLE admin.
        statement, verifier = self._statement("CREATE ROLE", name, resource, set(want.flags()),
                                              expiry=want.valid_until is not None)
        with self.session.connection.transaction():  # the role, its mark and memberships
            self.session.execute(statement, f"creating role {name!r}",
                                 [resource.password, verifier])
            if resource.owner_mark:
                self.session.execute(marks.comment("ROLE", name, resource.owner_mark),
                                     f"marking role {name!r}")
            self._set_memberships(name, want, [])
        return Creation(connection=self.server.connection_details(
            name, resource.password, self.server.database, "Role"))

    def update(self, resource: ManagedResource) -> None:
        """ALTER ROLE to the spec's attributes and the Secret's password; fix memberships."""
        name = self.name(resource)
        want: RoleParameters = resource.parameters or RoleParameters()
        self._check_allowed(want)
        row = self.session.row(
            f"SELECT {_COLUMNS}, rolvaliduntil IS NULL OR rolvaliduntil = 'infinity' "
            "FROM pg_catalog.pg_roles WHERE rolname = %s", [name],
            doing=f"observing role {name!r}")
        held = {} if row is None else dict(zip([k for k, _, _ in _ATTRIBUTES], row[:7],
                                               strict=True))
        wanted = want.flags()
        changed = {key for key in wanted if held.get(key) != wanted[key]}
        never_expires = row is not None and row[8]
        statement, verifier = self._statement(
            "ALTER ROLE", name, resource, changed | (set(wanted) - _SUPERUSER_ONLY),
            expiry=want.valid_until is not None or not never_expires)
        with self.session.connection.transaction():
            self.session.execute(statement, f"altering role {name!r}",
                                 [resource.password, verifier])
            if resource.owner_mark:
                self.session.execute(marks.comment("ROLE", name, resource.owner_mark),
                                     f"marking role {name!r}")
            self._set_memberships(name, want, self._memberships(name))

    def delete(self, resource: ManagedResource) -> None:
        """DROP ROLE IF EXISTS, after REASSIGN OWNED / DROP OWNED in every database when the
        spec asks; otherwise a role still owning objects or holding privileges is retried."""
        name = self.name(resource)
        want: RoleParameters = resource.parameters or RoleParameters()
        if want.reassign_owned_to is not None or want.drop_owned:
            exists = self.session.row("SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = %s",
                                      [name], doing=f"observing role {name!r}")
            if exists is not None:
                self._release_owned(name, want)
        self.session.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(name)),
                             f"dropping role {name!r}")

    def _release_owned(self, name: str, want: RoleParameters) -> None:
        """REASSIGN OWNED BY the role (to ``reassignOwnedTo``) and DROP OWNED BY it in each
        database that accepts connections: both act on the current database only."""
        if want.reassign_owned_to is not None:
            check_name("reassignOwnedTo role", want.reassign_owned_to)
        databases = [r[0] for r in self.session.rows(
            "SELECT datname FROM pg_catalog.pg_database WHERE datallowconn ORDER BY 1",
            doing="listing databases")]
        role = sql.Identifier(name)
        for database in databases:
            session = Session.open(attrs.evolve(self.server, database=database))
            try:
                with session.connection.transaction():
                    if want.reassign_owned_to is not None:
                        session.execute(sql.SQL("REASSIGN OWNED BY {} TO {}").format(
                            role, sql.Identifier(want.reassign_owned_to)),
                            f"reassigning what role {name!r} owns in {database!r} to "
                            f"{want.reassign_owned_to!r}")
                    session.execute(sql.SQL("DROP OWNED BY {}").format(role),
                                    f"dropping what role {name!r} owns in {database!r}")
            finally:
                session.close()

    def _check_allowed(self, want: RoleParameters) -> None:
        """Refuse what would hand a role the server: SUPERUSER, or membership in a superuser,
        the admin or a server-access role, unless the provider config allows superusers."""
        if self.server.allow_superuser:
            return
        reason = ("; a superuser bypasses every permission check, including the operator's "
                  "own; set allowSuperuser: true in the provider config to allow it")
        if want.superuser:
            raise TerminalError("superUser: true is refused" + reason, reason="InvalidSpec")
        if not want.member_of:
            return
        risky = set(want.member_of) & (SERVER_ACCESS_ROLES | {self.server.username})
        rows = self.session.rows("SELECT rolname FROM pg_catalog.pg_roles "
                                 "WHERE rolsuper AND rolname = ANY(%s)", [list(want.member_of)],
                                 doing="checking the roles of memberOf")
        risky |= {r[0] for r in rows}
        if risky:
            raise TerminalError(f"memberOf {sorted(risky)!r} is refused: membership in a "
                                "superuser, the provider's admin or a pg_*_server_* role "
                                "gives their powers" + reason, reason="InvalidSpec")

    def _memberships(self, name: str) -> list[str]:
        rows = self.session.rows(
            "SELECT g.rolname FROM pg_catalog.pg_auth_members m "
            "JOIN pg_catalog.pg_roles g ON g.oid = m.roleid "
            "JOIN pg_catalog.pg_roles u ON u.oid = m.member WHERE u.rolname = %s "
            "ORDER BY 1", [name], doing=f"observing the memberships of role {name!r}")
        return sorted({r[0] for r in rows})

    def _set_memberships(self, name: str, want: RoleParameters, held: list[str]) -> None:
        if want.member_of is None:
            return
        for group in sorted(set(want.member_of) - set(held)):
            check_name("memberOf role", group)
            self.session.execute(sql.SQL("GRANT {} TO {}").format(
                sql.Identifier(group), sql.Identifier(name)),
                f"making role {name!r} a member of {group!r}")
        for group in sorted(set(held) - set(want.member_of)):
            self.session.execute(sql.SQL("REVOKE {} FROM {}").format(
                sql.Identifier(group), sql.Identifier(name)),
                f"removing role {name!r} from {group!r}")

    def _statement(self, verb: str, name: str, resource: ManagedResource,
                   keys: set[str], *, expiry: bool) -> tuple[sql.Composed, str | None]:
        """The CREATE/ALTER ROLE statement naming the attributes in ``keys``, and the
        password's verifier; ``expiry`` adds VALID UNTIL (``infinity`` when unset, so a role
        that never had an expiry keeps none recorded)."""
        want: RoleParameters = resource.parameters or RoleParameters()
        wanted = want.flags()
        options: list[sql.Composable] = [
            sql.SQL(yes if wanted[key] else no) for key, yes, no in _ATTRIBUTES if key in keys]
        options.append(sql.SQL("CONNECTION LIMIT {}").format(sql.Literal(want.connection_limit)))
        if expiry:
            options.append(sql.SQL("VALID UNTIL {}").format(
                sql.Literal(want.valid_until or "infinity")))
        verifier = None
        if resource.password:
            verifier = scram.scram_verifier(resource.password)
            options.append(sql.SQL("PASSWORD {}").format(sql.Literal(verifier)))
        statement = sql.SQL("{} {} WITH {}").format(
            sql.SQL(verb), sql.Identifier(name), sql.SQL(" ").join(options))
        return statement, verifier

    def _password_check(self, name: str, password: str | None,
                        login: bool) -> tuple[str, bool | None]:
        """How the password was checked (``verifier``, ``login`` or ``none``) and the answer:
        True/False when it could be checked, None when it could not."""
        if not password:
            return "none", None
        doing = f"observing the password of role {name!r}"
        readable = self.session.row(
            "SELECT pg_catalog.has_table_privilege('pg_catalog.pg_authid', 'SELECT')", [], doing)
        if readable and readable[0]:
            row = self.session.row(
                "SELECT rolpassword FROM pg_catalog.pg_authid WHERE rolname = %s", [name], doing)
            return "verifier", None if row is None else scram.matches(password, row[0], name)
        if not login:  # a role that cannot log in cannot be tried
            return "none", None
        return "login", password_works(self.server, name, password)
