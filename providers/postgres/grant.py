"""The Grant kind's client: privileges of one role on a database, a schema, objects in a
schema, or columns of a table.

A Grant makes sure ``role`` holds ``privileges`` on its target: ``database``
alone, a ``schema`` of it, or, with ``tables``, ``sequences`` or
``routines``, objects of that schema (named, or ``"*"`` for every one the
schema holds at each observation), or, with ``columns`` and ``tables``
naming one table, those columns of it. ``observe`` reads the catalog ACLs
(``aclexplode`` over ``pg_database``, ``pg_namespace``, ``pg_class``,
``pg_proc`` and ``pg_attribute``, the owner's implicit privileges
included), ``create`` and ``update`` grant what is missing, ``delete`` revokes the Grant's
privileges. Each observation records in ``status.atProvider`` the spec's
privileges the role holds there (``privileges``, with the ``scope`` they are
for); a privilege that record holds, that the spec no longer lists and that
the role still holds is revoked by the next update (``revoking`` until it
is), so removing a privilege from the spec revokes it. Privileges the role
holds beyond the spec and the record are left alone, so two Grants on one
pair do not fight, unless ``exclusive`` asks for the list to be exact. A
role's privileges on what it owns are ownership's, never a
Grant's: a Grant naming the owner of its database or schema, or of every
object it names, is refused (terminal ``InvalidSpec``), and objects the role
owns are skipped by a ``"*"`` Grant. ``withOption: GRANT`` adds the grant
option, observed through ``aclexplode``'s ``is_grantable`` and recorded
(``grantOption``); once the spec drops ``withOption``, the next update takes
back the option on what that record holds (``REVOKE GRANT OPTION FOR``,
``revokingGrantOption`` until it is done), the privileges kept.
``revokePublicOnDb: true`` keeps PUBLIC without CONNECT and TEMPORARY on the
database. A role, database, schema or named object that does not exist yet
is retried (``DependencyMissing``), so a Grant can be applied together with
what it names.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

import attrs
from psycopg import sql

from lifecycle.core.errors import ExternalError, TerminalError
from lifecycle.core.values import Creation, Observation
from lifecycle.providers.postgres.config import Session, SqlClient, check_name
from lifecycle.providers.postgres.grant_spec import (
    DATABASE_PRIVILEGES,
    EVERY,
    HELD_WITH_OPTION,
    PRIVILEGES_OF,
    GrantParameters,
    Routine,
    recorded,
)
from lifecycle.providers.postgres.schema import in_database
from lifecycle.runtime.contract import ManagedResource

#: The spec's names are re-exported from here, where they lived first.
__all__ = [
    "DATABASE_PRIVILEGES",
    "EVERY",
    "PRIVILEGES_OF",
    "GrantClient",
    "GrantParameters",
    "Routine",
    "recorded",
]

#: Per target: (FROM clause, owner column, ACL column, acldefault type, name column); fixed
#: SQL text, never user input.
_CATALOGS = {
    "DATABASE": ("pg_catalog.pg_database d", "d.datdba", "d.datacl", "'d'", "d.datname"),
    "SCHEMA": ("pg_catalog.pg_namespace n", "n.nspowner", "n.nspacl", "'n'", "n.nspname"),
}
#: Per object keyword: (relkinds in pg_class, acldefault type); fixed SQL text.
_RELATIONS = {"TABLE": ("{r,p,v,m,f}", "r"), "SEQUENCE": ("{S}", "s")}


@attrs.frozen
class SchemaObject:
    """One table, sequence or routine a Grant covers, and what the role holds on it."""

    #: The name (for a routine: ``name(argument types)``) as shown in messages.
    label: str
    #: The object as SQL: schema-qualified name, for a routine with its argument types.
    ident: sql.Composable
    #: Whether the role owns it (then it is never granted nor revoked).
    owned: bool
    #: The role's privileges on it, each with whether it is grantable.
    acl: dict[str, bool]


@attrs.frozen
class Earlier:
    """What the last observation recorded as a Grant's (its ``status.atProvider``): the
    privileges it held or was revoking, those it held with the grant option, and, for
    named objects, which objects it covered."""

    #: The privileges recorded for the Grant's current scope; empty without a record.
    privileges: frozenset[str] = frozenset()
    #: The labels of the objects the record covered; None when it covered every one (or
    #: was not about objects).
    names: frozenset[str] | None = None
    #: The privileges recorded as held with the grant option the Grant asked for, or whose
    #: grant option was still to revoke.
    options: frozenset[str] = frozenset()

    @classmethod
    def of(cls, resource: ManagedResource, want: GrantParameters) -> Earlier:
        """The record of ``resource.observed``, when it is about ``want``'s scope."""
        privileges = recorded(resource.observed, want.scope)
        options = recorded(resource.observed, want.scope, HELD_WITH_OPTION)
        names = resource.observed.get("names")
        if not (privileges or options) or not isinstance(names, list):
            return cls(privileges, options=options)
        return cls(privileges, frozenset(n for n in names if isinstance(n, str)), options)

    def stale(self, acl: Mapping[str, bool], want: GrantParameters,
              item: SchemaObject | None = None) -> set[str]:
        """The recorded privileges the spec no longer lists that ``acl`` still holds (none on
        an object the record did not cover): what removing them from the spec revokes."""
        if item is not None and self.names is not None and item.label not in self.names:
            return set()
        return (set(self.privileges) - set(want.privileges)) & set(acl) & set(want.allowed)

    def stale_option(self, acl: Mapping[str, bool], want: GrantParameters,
                     item: SchemaObject | None = None) -> set[str]:
        """The privileges the record held with the grant option that ``acl`` still holds
        with it, now that the spec no longer asks for the option (none on an object the
        record did not cover, nor for a privilege revoked whole): what ``REVOKE GRANT OPTION
        FOR`` takes back, the privilege itself kept."""
        if want.with_option is not None:
            return set()
        if item is not None and self.names is not None and item.label not in self.names:
            return set()
        held = {p for p in self.options & set(want.allowed) if acl.get(p)}
        return held - self.stale(acl, want, item)


class GrantClient(SqlClient):
    """Observes catalog ACLs through ``aclexplode``; grants and revokes privileges."""

    subject = "grant"

    def observe(self, resource: ManagedResource) -> Observation:
        """The role's explicit privileges on the target, compared with the spec and with what
        the last observation recorded as the Grant's."""
        want: GrantParameters | None = resource.parameters
        if want is None:  # an unreadable spec being deleted: nothing we could revoke
            return Observation.absent()
        earlier = Earlier.of(resource, want)
        if want.on_objects:
            return self._observe_objects(want, earlier)
        with self._session(want, missing_ok=True) as session:
            if session is None:
                return Observation.absent()
            acl, owner = self._acl(session, want)
            public = want.revoke_public_on_db and self._public_holds(session, want)
        held = set(acl) & set(want.privileges)
        stale = earlier.stale(acl, want)
        option = earlier.stale_option(acl, want)
        if owner or not (held or stale or option):  # an owner's rights are never a Grant's
            return Observation.absent()
        up_to_date = held == set(want.privileges) and (
            want.with_option is None or all(acl[p] for p in want.privileges)) and (
            not want.exclusive or set(acl) <= set(want.privileges)) and not public and (
            not stale) and not option
        observed: dict[str, Any] = {"scope": want.scope, "privileges": sorted(held)}
        if stale:
            observed["revoking"] = sorted(stale)
        if want.with_option:
            observed["grantOption"] = sorted(p for p in held if acl[p])
        if option:
            observed["revokingGrantOption"] = sorted(option)
        if want.with_option or want.exclusive:
            observed["grantable"] = sorted(p for p in held if acl[p])
            observed["others"] = sorted(set(acl) - set(want.privileges))
        if want.revoke_public_on_db:
            observed["publicOnDb"] = public
        return Observation(exists=True, up_to_date=up_to_date, observed=observed)

    def create(self, resource: ManagedResource) -> Creation:
        """GRANT the privileges (granting held privileges again is harmless); a Grant to the
        owner is refused: it holds every privilege by ownership, and deleting the Grant must
        not strip them."""
        want: GrantParameters = resource.parameters
        with self._session(want) as session:
            assert session is not None
            if not want.on_objects and self._acl(session, want)[1]:
                raise TerminalError(
                    f"role {want.role!r} owns {want.keyword.lower()} {want.target!r} and holds "
                    "every privilege on it by ownership; a Grant to the owner is not managed",
                    reason="InvalidSpec")
            self._update(session, want, Earlier.of(resource, want))
        return Creation()

    def update(self, resource: ManagedResource) -> None:
        """GRANT the privileges the role lacks; REVOKE those the last observation recorded as
        the Grant's that the spec no longer lists (and, when ``exclusive``, every other), and
        the grant option it recorded as the Grant's once the spec no longer asks for it."""
        want: GrantParameters = resource.parameters
        with self._session(want) as session:
            assert session is not None
            self._update(session, want, Earlier.of(resource, want))

    def _update(self, session: Session, want: GrantParameters, earlier: Earlier) -> None:
        if want.revoke_public_on_db and self._public_holds(session, want):
            check_name("database", want.database)
            session.execute(sql.SQL("REVOKE ALL ON DATABASE {} FROM PUBLIC").format(
                sql.Identifier(want.database)),
                f"revoking PUBLIC's privileges on database {want.database!r}")
        if want.on_objects:
            self._update_objects(session, want, earlier)
            return
        acl, owner = self._acl(session, want)
        if owner:
            raise TerminalError(f"role {want.role!r} owns {want.keyword.lower()} "
                                f"{want.target!r}; a Grant to the owner is not managed",
                                reason="InvalidSpec")
        missing = sorted(p for p in want.privileges
                         if p not in acl or (want.with_option and not acl[p]))
        target = sql.Identifier(want.schema or want.database)
        if missing:
            self._change(session, "GRANT", missing, want, [target], want.target)
        extra = set(acl) - set(want.privileges) if want.exclusive else set()
        revoke = sorted(extra | earlier.stale(acl, want))
        if revoke:
            self._change(session, "REVOKE", revoke, want, [target], want.target)
        option = sorted(earlier.stale_option(acl, want) - set(revoke))
        if option:
            self._change(session, OPTION, option, want, [target], want.target)

    def delete(self, resource: ManagedResource) -> None:
        """REVOKE the Grant's privileges (those of the spec, and those the last observation
        recorded as the Grant's); a missing role, database, schema or object leaves nothing
        to revoke, and an owner keeps what it holds by ownership. PUBLIC's privileges revoked
        by ``revokePublicOnDb`` stay revoked."""
        want: GrantParameters | None = resource.parameters
        if want is None:
            return
        earlier = Earlier.of(resource, want)
        with self._session(want, missing_ok=True) as session:
            if session is None:
                return
            if want.on_objects:
                if not self._role_exists(session, want.role):
                    return
                revokes: dict[tuple[str, ...], list[SchemaObject]] = {}
                for item in self._objects(session, want)[0]:
                    held = set(item.acl) & set(want.privileges) | earlier.stale(
                        item.acl, want, item)
                    if held and not item.owned:
                        revokes.setdefault(tuple(sorted(held)), []).append(item)
                for privileges, items in sorted(revokes.items()):
                    self._change(session, "REVOKE", list(privileges), want,
                                 [o.ident for o in items], _labels(items))
                return
            acl, owner = self._acl(session, want)
            if not acl or owner:  # nothing to revoke, or rights the owner holds by ownership
                return
            self._change(session, "REVOKE", sorted(set(want.privileges) | earlier.privileges),
                         want, [sql.Identifier(want.schema or want.database)], want.target)

    # ------------------------------------------------------------ objects in a schema
    def _observe_objects(self, want: GrantParameters, earlier: Earlier) -> Observation:
        """Exists when the role holds a wanted privilege on one of the objects, or one the
        last observation recorded that is to be revoked (it never does on none: a Grant
        covering nothing is absent); up to date when it holds all of them on every object it
        does not own, every named object exists and nothing recorded is left to revoke."""
        with self._session(want, missing_ok=True) as session:
            if session is None or not self._role_exists(session, want.role):
                return Observation.absent()
            objects, missing = self._objects(session, want)
            public = want.revoke_public_on_db and self._public_holds(session, want)
        covered = [o for o in objects if not o.owned]
        held = {p for o in covered for p in set(o.acl) & set(want.privileges)}
        stale = {p for o in covered for p in earlier.stale(o.acl, want, o)}
        option = {p for o in covered for p in earlier.stale_option(o.acl, want, o)}
        if not held and not stale and not option:
            return Observation.absent()
        lacking = [o for o in covered if not self._complete(o, want)]
        observed: dict[str, Any] = {
            "scope": want.scope, "privileges": sorted(held),
            "objects": len(covered), "lacking": _labels(lacking, limit=10),
            "owned": _labels([o for o in objects if o.owned], limit=10),
            "missing": missing[:10]}
        if not want.every:
            observed["names"] = sorted(o.label for o in covered)
        if want.with_option:
            observed["grantOption"] = sorted(
                {p for o in covered for p in want.privileges if o.acl.get(p)})
        if stale:
            observed["revoking"] = sorted(stale)
        if option:
            observed["revokingGrantOption"] = sorted(option)
        if stale or option:
            # Until they are revoked, the record stays about the objects it was about, so an
            # object the spec names only now never loses what another grant gave it.
            observed.pop("names", None)
            if earlier.names is not None:
                observed["names"] = sorted(earlier.names)
        if want.revoke_public_on_db:
            observed["publicOnDb"] = public
        return Observation(exists=True, up_to_date=not lacking and not missing and not public
                           and not stale and not option, observed=observed)

    def _update_objects(self, session: Session, want: GrantParameters,
                        earlier: Earlier) -> None:
        """Grant what each object lacks (grouped into one statement per set of privileges),
        revoke what the last observation recorded that the spec no longer lists (and extras
        when ``exclusive``) and the grant option it recorded once the spec drops
        ``withOption``; a missing named object or a Grant covering nothing is retried, one
        naming only objects the role owns refused."""
        if not self._role_exists(session, want.role):
            raise ExternalError(f"role {want.role!r} does not exist (yet)",
                                reason="DependencyMissing")
        objects, missing = self._objects(session, want)
        covered = [o for o in objects if not o.owned]
        if not covered and objects and not want.every:
            what = (f"table {want.table!r}, whose columns the Grant names," if want.table
                    else f"every {want.keyword.lower()} the Grant names")
            raise TerminalError(
                f"role {want.role!r} owns {what} and holds every privilege on them by "
                "ownership; a Grant to the owner is not managed", reason="InvalidSpec")
        grants: dict[tuple[str, ...], list[SchemaObject]] = {}
        revokes: dict[tuple[str, ...], list[SchemaObject]] = {}
        options: dict[tuple[str, ...], list[SchemaObject]] = {}
        for item in covered:
            lack = tuple(sorted(p for p in want.privileges
                                if p not in item.acl or (want.with_option and not item.acl[p])))
            if lack:
                grants.setdefault(lack, []).append(item)
            extra = (set(item.acl) & set(want.allowed) - set(want.privileges)
                     if want.exclusive else set())
            extra |= earlier.stale(item.acl, want, item)
            if extra:
                revokes.setdefault(tuple(sorted(extra)), []).append(item)
            option = earlier.stale_option(item.acl, want, item) - extra
            if option:
                options.setdefault(tuple(sorted(option)), []).append(item)
        for verb, changes in (("GRANT", grants), ("REVOKE", revokes), (OPTION, options)):
            for privileges, items in sorted(changes.items()):
                self._change(session, verb, list(privileges), want, [o.ident for o in items],
                             _labels(items))
        if missing:
            where = (f"table {want.table!r} of schema {want.target!r}" if want.table
                     else f"schema {want.target!r}")
            raise ExternalError(f"{want.keyword.lower()}(s) {', '.join(missing[:10])} not found "
                                f"in {where} (yet)", reason="DependencyMissing")
        if not covered:
            raise ExternalError(f"schema {want.target!r} holds no {want.keyword.lower()} the "
                                f"role does not own (yet); nothing to grant",
                                reason="DependencyMissing")

    @staticmethod
    def _complete(item: SchemaObject, want: GrantParameters) -> bool:
        return all(p in item.acl and (not want.with_option or item.acl[p])
                   for p in want.privileges) and (
            not want.exclusive or set(item.acl) & set(want.allowed) <= set(want.privileges))

    def _objects(self, session: Session,
                 want: GrantParameters) -> tuple[list[SchemaObject], list[str]]:
        """The objects of the schema the Grant covers, with the role's privileges on each, and
        the named ones the schema does not hold."""
        assert want.schema is not None
        check_name("role", want.role)
        check_name("schema", want.schema)
        if want.keyword == "ROUTINE":
            return self._routine_objects(session, want)
        if want.keyword == "COLUMN":
            return self._column_objects(session, want)
        relkinds, default = _RELATIONS[want.keyword]
        names = list(want.tables or want.sequences or ())
        for name in names:
            if name != EVERY:
                check_name(want.keyword.lower(), name)
        rows = session.rows(
            "SELECT c.relname, c.relowner = r.oid, a.privilege_type, a.is_grantable "
            "FROM pg_catalog.pg_class c "
            "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
            "JOIN pg_catalog.pg_roles r ON r.rolname = %s "
            "LEFT JOIN LATERAL pg_catalog.aclexplode(COALESCE(c.relacl, "
            "pg_catalog.acldefault(%s::\"char\", c.relowner))) a ON a.grantee = r.oid "
            "WHERE n.nspname = %s AND c.relkind = ANY(%s::\"char\"[]) "
            "AND (%s OR c.relname = ANY(%s)) ORDER BY c.relname",
            [want.role, default, want.schema, relkinds, want.every, names],
            doing=f"observing the privileges of {want.role!r} on the "
                  f"{want.keyword.lower()}s of {want.target!r}")
        objects: dict[str, SchemaObject] = {}
        for name, owned, privilege, grantable in rows:
            item = objects.setdefault(name, SchemaObject(
                label=name, ident=sql.Identifier(want.schema, name), owned=bool(owned), acl={}))
            if privilege is not None:
                item.acl[privilege] = item.acl.get(privilege, False) or bool(grantable)
        missing = [] if want.every else [n for n in names if n not in objects]
        return list(objects.values()), missing

    @staticmethod
    def _column_objects(session: Session,
                        want: GrantParameters) -> tuple[list[SchemaObject], list[str]]:
        """The named columns of the Grant's table, each with the role's privileges on it
        (the column's own ACL, ``pg_attribute.attacl``: what a table-wide grant gives is not
        in it) and owned when the role owns the table; the named columns not found (every
        one when the table is not)."""
        assert want.schema is not None and want.table is not None and want.columns
        check_name("table", want.table)
        for column in want.columns:
            check_name("column", column)
        rows = session.rows(
            "SELECT a.attname, c.relowner = r.oid, x.privilege_type, x.is_grantable "
            "FROM pg_catalog.pg_class c "
            "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
            "JOIN pg_catalog.pg_roles r ON r.rolname = %s "
            "LEFT JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 "
            "AND NOT a.attisdropped AND a.attname = ANY(%s) "
            "LEFT JOIN LATERAL pg_catalog.aclexplode(a.attacl) x ON x.grantee = r.oid "
            "WHERE n.nspname = %s AND c.relname = %s AND c.relkind = ANY(%s::\"char\"[]) "
            "ORDER BY a.attname",
            [want.role, list(want.columns), want.schema, want.table, _RELATIONS["TABLE"][0]],
            doing=f"observing the privileges of {want.role!r} on the columns of table "
                  f"{want.table!r} in {want.target!r}")
        objects: dict[str, SchemaObject] = {}
        for name, owned, privilege, grantable in rows:
            if name is None:  # the table, without any of the named columns
                continue
            item = objects.setdefault(name, SchemaObject(
                label=name, ident=sql.Identifier(name), owned=bool(owned), acl={}))
            if privilege is not None:
                item.acl[privilege] = item.acl.get(privilege, False) or bool(grantable)
        return list(objects.values()), [c for c in want.columns if c not in objects]

    def _routine_objects(self, session: Session,
                         want: GrantParameters) -> tuple[list[SchemaObject], list[str]]:
        assert want.schema is not None and want.routines is not None
        wanted: list[tuple[str, list[int]]] = []
        if not want.every:
            for routine in want.routines:
                check_name("routine", routine.name)
                oids: list[int] = []
                for argument in routine.arguments:
                    row = session.row("SELECT pg_catalog.to_regtype(%s)::pg_catalog.oid",
                                      [argument], doing=f"reading the type {argument!r}")
                    if row is None or row[0] is None:
                        raise ExternalError(f"routine {routine.label!r}: type {argument!r} "
                                            "does not exist (yet)", reason="DependencyMissing")
                    oids.append(int(row[0]))
                wanted.append((routine.name, oids))
        rows = session.rows(
            "SELECT p.oid, p.proname, p.proowner = r.oid, "
            "pg_catalog.oidvectortypes(p.proargtypes), "
            "ARRAY(SELECT tn.nspname FROM unnest(p.proargtypes::pg_catalog.oid[]) "
            "WITH ORDINALITY u(o, i) JOIN pg_catalog.pg_type t ON t.oid = u.o "
            "JOIN pg_catalog.pg_namespace tn ON tn.oid = t.typnamespace ORDER BY u.i), "
            "ARRAY(SELECT t.typname FROM unnest(p.proargtypes::pg_catalog.oid[]) "
            "WITH ORDINALITY u(o, i) JOIN pg_catalog.pg_type t ON t.oid = u.o ORDER BY u.i), "
            "p.proargtypes::pg_catalog.oid[], a.privilege_type, a.is_grantable "
            "FROM pg_catalog.pg_proc p "
            "JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace "
            "JOIN pg_catalog.pg_roles r ON r.rolname = %s "
            "LEFT JOIN LATERAL pg_catalog.aclexplode(COALESCE(p.proacl, "
            "pg_catalog.acldefault('f', p.proowner))) a ON a.grantee = r.oid "
            "WHERE n.nspname = %s AND (%s OR p.proname = ANY(%s)) ORDER BY p.proname, p.oid",
            [want.role, want.schema, want.every,
             [w[0] for w in wanted]],
            doing=f"observing the privileges of {want.role!r} on the routines of "
                  f"{want.target!r}")
        objects: dict[int, SchemaObject] = {}
        found: set[int] = set()
        for oid, name, owned, types, spaces, typnames, argoids, privilege, grantable in rows:
            key = (name, [int(o) for o in argoids])
            if not want.every:
                if key not in wanted:
                    continue
                found.add(wanted.index(key))
            item = objects.get(oid)
            if item is None:
                arguments = sql.SQL(", ").join(
                    sql.Identifier(space, typname) for space, typname in zip(spaces, typnames,
                                                                             strict=True))
                item = objects[oid] = SchemaObject(
                    label=f"{name}({types})", owned=bool(owned), acl={},
                    ident=sql.SQL("{}({})").format(sql.Identifier(want.schema, name),
                                                   arguments))
            if privilege is not None:
                item.acl[privilege] = item.acl.get(privilege, False) or bool(grantable)
        missing = [r.label for i, r in enumerate(want.routines)
                   if not want.every and i not in found]
        return list(objects.values()), missing

    # ------------------------------------------------------------ shared
    @contextlib.contextmanager
    def _session(self, want: GrantParameters, *,
                 missing_ok: bool = False) -> Iterator[Session | None]:
        """The admin session for a database Grant; one on the database for the others."""
        if want.schema is None:
            yield self.session
            return
        with in_database(self.session, want.database, missing_ok=missing_ok) as session:
            yield session

    @staticmethod
    def _role_exists(session: Session, role: str) -> bool:
        check_name("role", role)
        return session.row("SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = %s", [role],
                           doing=f"observing role {role!r}") is not None

    @staticmethod
    def _public_holds(session: Session, want: GrantParameters) -> bool:
        """Whether PUBLIC holds any privilege on the database."""
        row = session.row(
            "SELECT EXISTS (SELECT 1 FROM pg_catalog.aclexplode(COALESCE(d.datacl, "
            "pg_catalog.acldefault('d', d.datdba))) a WHERE a.grantee = 0) "
            "FROM pg_catalog.pg_database d WHERE d.datname = %s", [want.database],
            doing=f"observing PUBLIC's privileges on database {want.database!r}")
        return bool(row and row[0])

    @staticmethod
    def _acl(session: Session, want: GrantParameters) -> tuple[dict[str, bool], bool]:
        """The role's privileges on the database or schema (each: whether grantable) and
        whether the role owns it."""
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
    def _change(session: Session, verb: str, privileges: list[str], want: GrantParameters,
                targets: list[sql.Composable], label: str) -> None:
        """GRANT (with the grant option when asked), REVOKE, or REVOKE the grant option
        (:data:`OPTION`) for ``privileges`` on ``targets`` (columns: of the Grant's
        table)."""
        # Keywords come only from the fixed lists above, never from the spec's text.
        known = [p for p in privileges if p in want.allowed]
        if not known:
            return
        if want.table is not None:
            assert want.schema is not None
            columns = sql.SQL(", ").join(targets)
            keywords = sql.SQL(", ").join(sql.SQL("{} ({})").format(sql.SQL(p), columns)
                                          for p in known)
            objects: sql.Composable = sql.Identifier(want.schema, want.table)
        else:
            keywords = sql.SQL(", ").join(sql.SQL(p) for p in known)
            objects = sql.SQL(", ").join(targets)
        statement = sql.SQL("{} {} ON {} {} {} {}").format(
            sql.SQL(VERBS[verb]), keywords, sql.SQL(PRIVILEGE_TARGETS[want.keyword]), objects,
            sql.SQL("TO" if verb == "GRANT" else "FROM"), sql.Identifier(want.role))
        if verb == "GRANT" and want.with_option:
            statement = sql.SQL("{} WITH GRANT OPTION").format(statement)
        session.execute(statement, f"{verb.lower()} {', '.join(privileges)} on {label!r} "
                                   f"for {want.role!r}")


#: The object type keyword of GRANT/REVOKE per target (columns are granted on their
#: table); fixed SQL text.
PRIVILEGE_TARGETS = {"DATABASE": "DATABASE", "SCHEMA": "SCHEMA", "TABLE": "TABLE",
                     "SEQUENCE": "SEQUENCE", "ROUTINE": "ROUTINE", "COLUMN": "TABLE"}
#: The verb of :meth:`GrantClient._change` that takes back the grant option only.
OPTION = "REVOKE GRANT OPTION"
#: Per verb of :meth:`GrantClient._change`, its SQL text before the privileges.
VERBS = {"GRANT": "GRANT", "REVOKE": "REVOKE", OPTION: "REVOKE GRANT OPTION FOR"}


def _labels(items: list[SchemaObject], limit: int | None = None) -> Any:
    """The objects' labels: a list (at most ``limit``) or, without a limit, one string."""
    labels = [o.label for o in items]
    if limit is not None:
        return labels[:limit]
    return ", ".join(labels[:10]) + (f" and {len(labels) - 10} more" if len(labels) > 10
                                     else "")
