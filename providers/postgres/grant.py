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

The catalog reads live beside it, one module per target:
:mod:`~lifecycle.providers.postgres.grant_database` (a database or a schema),
:mod:`~lifecycle.providers.postgres.grant_objects` (tables, sequences, columns of a
table), :mod:`~lifecycle.providers.postgres.grant_routines` (routines), and what they
share in :mod:`~lifecycle.providers.postgres.grant_acl`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from psycopg import sql

from lifecycle.core.contract import ManagedResource
from lifecycle.core.errors import ExternalError, TerminalError
from lifecycle.core.values import Creation, Observation
from lifecycle.providers.postgres.config import Session, SqlClient, check_name
from lifecycle.providers.postgres.grant_acl import (
    OPTION,
    Earlier,
    SchemaObject,
    change,
    labels,
    role_exists,
)
from lifecycle.providers.postgres.grant_database import public_holds, target_acl
from lifecycle.providers.postgres.grant_objects import schema_objects
from lifecycle.providers.postgres.grant_spec import (
    DATABASE_PRIVILEGES,
    EVERY,
    PRIVILEGES_OF,
    GrantParameters,
    Routine,
    recorded,
)
from lifecycle.providers.postgres.schema import in_database

#: The spec's names are re-exported from here, where they lived first.
__all__ = [
    "DATABASE_PRIVILEGES",
    "EVERY",
    "PRIVILEGES_OF",
    "GrantClient",
    "GrantParameters",
    "Routine",
    "recorded",
    "target_observation",
]


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
            acl, owner = target_acl(session, want)
            public = want.revoke_public_on_db and public_holds(session, want)
        return target_observation(want, earlier, acl, owner, public)

    def create(self, resource: ManagedResource) -> Creation:
        """GRANT the privileges (granting held privileges again is harmless); a Grant to the
        owner is refused: it holds every privilege by ownership, and deleting the Grant must
        not strip them."""
        want: GrantParameters = resource.parameters
        with self._session(want) as session:
            assert session is not None
            if not want.on_objects and target_acl(session, want)[1]:
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
        if want.revoke_public_on_db and public_holds(session, want):
            check_name("database", want.database)
            session.execute(sql.SQL("REVOKE ALL ON DATABASE {} FROM PUBLIC").format(
                sql.Identifier(want.database)),
                f"revoking PUBLIC's privileges on database {want.database!r}")
        if want.on_objects:
            self._update_objects(session, want, earlier)
            return
        acl, owner = target_acl(session, want)
        if owner:
            raise TerminalError(f"role {want.role!r} owns {want.keyword.lower()} "
                                f"{want.target!r}; a Grant to the owner is not managed",
                                reason="InvalidSpec")
        missing = sorted(p for p in want.privileges
                         if p not in acl or (want.with_option and not acl[p]))
        target = sql.Identifier(want.schema or want.database)
        if missing:
            change(session, "GRANT", missing, want, [target], want.target)
        extra = set(acl) - set(want.privileges) if want.exclusive else set()
        revoke = sorted(extra | earlier.stale(acl, want))
        if revoke:
            change(session, "REVOKE", revoke, want, [target], want.target)
        option = sorted(earlier.stale_option(acl, want) - set(revoke))
        if option:
            change(session, OPTION, option, want, [target], want.target)

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
                if not role_exists(session, want.role):
                    return
                revokes: dict[tuple[str, ...], list[SchemaObject]] = {}
                for item in schema_objects(session, want)[0]:
                    held = set(item.acl) & set(want.privileges) | earlier.stale(
                        item.acl, want, item)
                    if held and not item.owned:
                        revokes.setdefault(tuple(sorted(held)), []).append(item)
                for privileges, items in sorted(revokes.items()):
                    change(session, "REVOKE", list(privileges), want,
                                 [o.ident for o in items], labels(items))
                return
            acl, owner = target_acl(session, want)
            if not acl or owner:  # nothing to revoke, or rights the owner holds by ownership
                return
            change(session, "REVOKE", sorted(set(want.privileges) | earlier.privileges),
                         want, [sql.Identifier(want.schema or want.database)], want.target)

    # ------------------------------------------------------------ objects in a schema
    def _observe_objects(self, want: GrantParameters, earlier: Earlier) -> Observation:
        """Exists when the role holds a wanted privilege on one of the objects, or one the
        last observation recorded that is to be revoked (it never does on none: a Grant
        covering nothing is absent); up to date when it holds all of them on every object it
        does not own, every named object exists and nothing recorded is left to revoke."""
        with self._session(want, missing_ok=True) as session:
            if session is None or not role_exists(session, want.role):
                return Observation.absent()
            objects, missing = schema_objects(session, want)
            public = want.revoke_public_on_db and public_holds(session, want)
        covered = [o for o in objects if not o.owned]
        held = {p for o in covered for p in set(o.acl) & set(want.privileges)}
        stale = {p for o in covered for p in earlier.stale(o.acl, want, o)}
        option = {p for o in covered for p in earlier.stale_option(o.acl, want, o)}
        if not held and not stale and not option:
            return Observation.absent()
        lacking = [o for o in covered if not self._complete(o, want)]
        observed: dict[str, Any] = {
            "scope": want.scope, "privileges": sorted(held),
            "objects": len(covered), "lacking": labels(lacking, limit=10),
            "owned": labels([o for o in objects if o.owned], limit=10),
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
        drifted = [key for key, differs in (
            ("privileges", bool(lacking or missing or stale)),
            ("withOption", bool(option)), ("revokePublicOnDb", public)) if differs]
        return Observation(exists=True, up_to_date=not drifted, drifted=drifted,
                           observed=observed)

    def _update_objects(self, session: Session, want: GrantParameters,
                        earlier: Earlier) -> None:
        """Grant what each object lacks (grouped into one statement per set of privileges),
        revoke what the last observation recorded that the spec no longer lists (and extras
        when ``exclusive``) and the grant option it recorded once the spec drops
        ``withOption``; a missing named object or a Grant covering nothing is retried, one
        naming only objects the role owns refused."""
        if not role_exists(session, want.role):
            raise ExternalError(f"role {want.role!r} does not exist (yet)",
                                reason="DependencyMissing")
        objects, missing = schema_objects(session, want)
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
                change(session, verb, list(privileges), want, [o.ident for o in items],
                             labels(items))
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


def target_observation(want: GrantParameters, earlier: Earlier, acl: dict[str, bool],
                       owner: bool, public: bool) -> Observation:
    """What :meth:`GrantClient.observe` reports of a Grant on a database or a schema, from
    the role's privileges there (``acl``: each with whether it is grantable), whether the
    role owns the target and whether PUBLIC holds a privilege on the database; the
    catalogue sweep (:mod:`lifecycle.providers.postgres.sweep`) asks the same."""
    held = set(acl) & set(want.privileges)
    stale = earlier.stale(acl, want)
    option = earlier.stale_option(acl, want)
    if owner or not (held or stale or option):  # an owner's rights are never a Grant's
        return Observation.absent()
    drifted = [key for key, differs in (
        ("privileges", held != set(want.privileges) or bool(stale)),
        ("withOption", (want.with_option is not None
                        and not all(acl.get(p) for p in want.privileges)) or bool(option)),
        ("exclusive", want.exclusive and not set(acl) <= set(want.privileges)),
        ("revokePublicOnDb", public)) if differs]
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
    return Observation(exists=True, up_to_date=not drifted, drifted=drifted,
                       observed=observed)
