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

``configurationParameters`` are the role's own defaults for run-time
settings (``ALTER ROLE ... SET name = value``, in every database), read back
from ``pg_db_role_setting`` (database 0). A list is exact: a setting made by
hand is reset, a changed value is set again; unset leaves them alone.
"""

from __future__ import annotations

import re
from typing import Any

import attrs
from psycopg import sql

from lifecycle.core.contract import ManagedResource
from lifecycle.core.errors import TerminalError
from lifecycle.core.values import Creation, Observation
from lifecycle.providers.postgres import fields, marks, scram
from lifecycle.providers.postgres.config import Session, SqlClient, check_name
from lifecycle.providers.postgres.login import password_works

__all__ = ["LIST_SETTINGS", "SERVER_ACCESS_ROLES", "RoleClient", "RoleParameters", "RoleSetting",
           "held_settings", "split_list_setting"]

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
#: A configuration parameter's name: an identifier, or dotted identifiers (a custom one).
_SETTING_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*(\.[A-Za-z_][A-Za-z0-9_$]*)*")
#: Settings whose value is a list of names: the server stores each element quoted as an
#: identifier, so they are written element by element and compared in that form.
LIST_SETTINGS = frozenset({"search_path", "temp_tablespaces", "session_preload_libraries",
                           "local_preload_libraries"})


@attrs.frozen
class RoleSetting:
    """One entry of ``configurationParameters``: a run-time setting's name and value."""

    name: str
    """The run-time setting's name, such as search_path or statement_timeout."""
    value: str
    """The value the role's sessions start with, as SET would take it."""


def _settings(value: Any) -> tuple[RoleSetting, ...] | None:
    """``configurationParameters`` as given in the spec: a list of ``{name, value}`` with
    distinct, well-formed names; None stays None (not managed)."""
    if value is None:
        return None
    problem = "'configurationParameters' must be a list of {name, value} objects"
    if isinstance(value, str) or not isinstance(value, list | tuple):
        raise TypeError(problem)
    out: list[RoleSetting] = []
    for item in value:
        if isinstance(item, RoleSetting):
            out.append(item)
            continue
        if not isinstance(item, dict) or set(item) != {"name", "value"}:
            raise TypeError(problem)
        name, text = item["name"], item["value"]
        if not isinstance(name, str) or not isinstance(text, str):
            raise TypeError("'configurationParameters' names and values must be strings")
        if not _SETTING_NAME.fullmatch(name) or len(name) > 200:
            raise ValueError(f"'configurationParameters' name {name[:64]!r} is not a "
                             "configuration parameter name")
        if "\x00" in text:
            raise ValueError(f"'configurationParameters' value of {name!r} contains a NUL")
        out.append(RoleSetting(name, text))
    lowered = [s.name.lower() for s in out]
    if len(set(lowered)) != len(lowered):
        raise ValueError("'configurationParameters' names the same parameter twice")
    return tuple(sorted(out, key=lambda s: s.name.lower()))


def held_settings(setconfig: list[str] | None) -> dict[str, tuple[str, str]]:
    """A role's own settings as ``pg_db_role_setting.setconfig`` holds them (``name=value``
    entries, or None): lower-case name -> (name, value), sorted by name."""
    held: dict[str, tuple[str, str]] = {}
    for entry in setconfig or []:
        key, _, value = entry.partition("=")
        held[key.lower()] = (key, value)
    return dict(sorted(held.items()))


def split_list_setting(value: str) -> list[str]:
    """The elements of a list setting's value as the server reads it: comma-separated,
    blanks outside quotes dropped; a double-quoted element keeps its case (``""`` inside
    quotes is a quote), the rest is folded to lower case."""
    elements, current, quoted, i = [], "", False, 0
    while i < len(value):
        char = value[i]
        if char == '"':
            if quoted and value[i + 1:i + 2] == '"':
                current += '"'
                i += 1
            else:
                quoted = not quoted
        elif quoted:
            current += char
        elif char == ",":
            elements.append(current)
            current = ""
        elif not char.isspace():
            current += char.lower()
        i += 1
    elements.append(current)
    return elements


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
    """The role may log in (LOGIN) with the password of its connection Secret. Default true."""
    createdb: bool = fields.flag(False)
    """The role may create databases (CREATEDB). Default false."""
    createrole: bool = fields.flag(False)
    """The role may create, alter and drop other roles (CREATEROLE). Default false."""
    connection_limit: int = fields.connection_limit(-1)
    """How many concurrent connections the role may open: -1 for no limit (the default), else a
    count of 0 or more."""
    inherit: bool = fields.flag(True)
    """The role uses the privileges of the roles it is a member of without SET ROLE (INHERIT).
    Default true."""
    replication: bool = fields.flag(False)
    """The role may start streaming replication (REPLICATION). Default false."""
    bypass_rls: bool = fields.flag(False, alias="bypassRls")
    """The role bypasses every row-level security policy (BYPASSRLS). Default false."""
    superuser: bool = fields.flag(False, alias="superUser")
    """The role is a superuser; refused unless the ProviderConfig allows superusers. Default
    false."""
    valid_until: str | None = fields.timestamp("validUntil")
    """When the role's password stops being valid: a date and time (ISO 8601, e.g.
    2030-01-01T00:00:00Z) or infinity; unset, it never expires."""
    member_of: tuple[str, ...] | None = fields.names("memberOf")
    """Roles this role is a member of. Unset leaves memberships alone; a list is exact: missing
    memberships are granted, others revoked."""
    reassign_owned_to: str | None = fields.role_name("reassignOwnedTo")
    """On delete, the role that receives the objects this role owns in every database (REASSIGN
    OWNED); unset, they are not reassigned."""
    drop_owned: bool = fields.flag(False, alias="dropOwned")
    """On delete, drop the objects this role still owns and revoke its privileges in every
    database (DROP OWNED). Default false."""
    configuration_parameters: tuple[RoleSetting, ...] | None = attrs.field(
        default=None, converter=_settings, alias="configurationParameters")
    """Run-time settings the role's sessions start with (ALTER ROLE ... SET), each a name and a
    value; unset leaves them alone, a list is exact."""

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
        settings = self._held_settings(name)
        # The fields that differ, by spec key, for the drift Event (never their values).
        drifted = [key for key, value in want.flags().items() if held[key] != value]
        drifted += [key for key, differs in (
            ("connectionLimit", limit != want.connection_limit),
            ("validUntil", not expiry_ok),
            ("memberOf", want.member_of is not None and set(want.member_of) != set(member_of)),
            ("password", password_ok is False),
            ("configurationParameters", want.configuration_parameters is not None
             and self._settings_differ(want, settings) != ({}, set())),
            ("comment", not marks.recorded(note, resource.namespace,
                                                   self.server.config_name))) if differs]
        return Observation(
            exists=True,
            up_to_date=not drifted,
            drifted=drifted,
            connection=self.server.connection_details(name, resource.password,
                                                      self.server.database, "Role"),
            observed={**held, "connectionLimit": limit, "validUntil": expiry,
                      "memberOf": member_of, "passwordChecked": password_ok is not None,
                      "passwordCheck": check,
                      "configurationParameters": [{"name": n, "value": v}
                                                  for n, v in settings.values()]},
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
                self.session.execute(marks.comment("ROLE", name, resource.owner_mark,
                                                   resource.namespace, self.server.config_name),
                                     f"marking role {name!r}")
            self._set_memberships(name, want, [])
            self._set_settings(name, want, {})
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
                self.session.execute(marks.comment("ROLE", name, resource.owner_mark,
                                                   resource.namespace, self.server.config_name),
                                     f"marking role {name!r}")
            self._set_memberships(name, want, self._memberships(name))
            self._set_settings(name, want, self._held_settings(name))

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
        database where it owns or holds something (``pg_shdepend``), and in the admin's own
        database for what is shared (databases, tablespaces): both act on the current
        database only. Databases where the role has nothing are not visited, so one the
        admin may not connect to does not block the deletion."""
        if want.reassign_owned_to is not None:
            check_name("reassignOwnedTo role", want.reassign_owned_to)
        databases = [r[0] for r in self.session.rows(
            "SELECT d.datname FROM pg_catalog.pg_database d WHERE d.datallowconn AND ("
            "d.datname = pg_catalog.current_database() OR d.oid IN ("
            "SELECT s.dbid FROM pg_catalog.pg_shdepend s JOIN pg_catalog.pg_roles r "
            "ON s.refobjid = r.oid WHERE s.refclassid = 'pg_catalog.pg_authid'::regclass "
            "AND r.rolname = %s)) ORDER BY 1", [name],
            doing=f"listing the databases where role {name!r} owns or holds something")]
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
        if "superUser" in self.server.policy.role_attributes:  # allowSuperuser adds it
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

    def _held_settings(self, name: str) -> dict[str, tuple[str, str]]:
        """The role's own settings (for every database): lower-case name -> (name, value)."""
        row = self.session.row(
            "SELECT s.setconfig FROM pg_catalog.pg_db_role_setting s "
            "JOIN pg_catalog.pg_roles r ON r.oid = s.setrole "
            "WHERE s.setdatabase = 0 AND r.rolname = %s", [name],
            doing=f"observing the settings of role {name!r}")
        return held_settings(row[0] if row else None)

    def _wanted_settings(self, want: RoleParameters) -> dict[str, tuple[str, str, Any]]:
        """lower-case name -> (name, the value as the server will store it, the value as SQL)
        for each spec setting. A name the server does not know (and that is not a custom
        ``prefix.name``) is a terminal ``InvalidSpec``."""
        wanted: dict[str, tuple[str, str, Any]] = {}
        entries = want.configuration_parameters or ()
        known = dict(self.session.rows(
            "SELECT n, s.name FROM unnest(%s::text[]) AS n "
            "LEFT JOIN pg_catalog.pg_settings s ON s.name = lower(n)",
            [[e.name for e in entries]], doing="looking up configuration parameters"))
        for entry in entries:
            canonical = known.get(entry.name)
            if canonical is None and "." not in entry.name:
                raise TerminalError(
                    f"configurationParameters: {entry.name!r} is not a configuration "
                    "parameter of this server (custom ones are named prefix.name)",
                    reason="InvalidSpec")
            param = canonical or entry.name
            literal: Any = sql.Literal(entry.value)
            stored = entry.value
            if param in LIST_SETTINGS:
                elements = split_list_setting(entry.value)
                literal = sql.SQL(", ").join(sql.Literal(e) for e in elements)
                row = self.session.row(
                    "SELECT string_agg(pg_catalog.quote_ident(e), ', ' ORDER BY o) "
                    "FROM unnest(%s::text[]) WITH ORDINALITY AS t(e, o)", [elements],
                    doing=f"reading the value of {param!r}")
                stored = row[0] if row else entry.value
            wanted[param.lower()] = (param, stored, literal)
        return wanted

    def _settings_differ(self, want: RoleParameters, held: dict[str, tuple[str, str]]
                         ) -> tuple[dict[str, tuple[str, str, Any]], set[str]]:
        """The spec settings the role lacks or holds with another value, and the names of
        the settings it holds that the spec does not list."""
        wanted = self._wanted_settings(want)
        changed = {k: v for k, v in wanted.items() if held.get(k, ("", None))[1] != v[1]}
        return changed, {held[k][0] for k in set(held) - set(wanted)}

    def _set_settings(self, name: str, want: RoleParameters,
                      held: dict[str, tuple[str, str]]) -> None:
        """ALTER ROLE ... SET what differs from the spec, RESET what the spec does not list."""
        if want.configuration_parameters is None:
            return
        changed, extra = self._settings_differ(want, held)
        role = sql.Identifier(name)
        for param, _, literal in changed.values():
            self.session.execute(sql.SQL("ALTER ROLE {} SET {} = {}").format(
                role, sql.Identifier(*param.split(".")), literal),
                f"setting {param!r} for role {name!r}")
        for param in sorted(extra):
            self.session.execute(sql.SQL("ALTER ROLE {} RESET {}").format(
                role, sql.Identifier(*param.split("."))),
                f"resetting {param!r} for role {name!r}")

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
