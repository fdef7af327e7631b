"""What every Grant target shares: the objects a Grant covers and the record of what it
held, and the GRANT and REVOKE statements themselves.

:class:`SchemaObject` is one table, sequence, routine or column a Grant covers, with the
role's privileges on it; :class:`Earlier` is what the last observation recorded as the
Grant's (``status.atProvider``); :func:`change` writes one GRANT, REVOKE or REVOKE GRANT
OPTION FOR from fixed keywords and quoted identifiers only. The targets are read in
:mod:`~lifecycle.providers.postgres.grant_database` (a database or a schema),
:mod:`~lifecycle.providers.postgres.grant_objects` (tables, sequences, columns) and
:mod:`~lifecycle.providers.postgres.grant_routines` (functions, procedures, aggregates).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
from psycopg import sql

from lifecycle.core.contract import ManagedResource
from lifecycle.providers.postgres.config import Session, check_name
from lifecycle.providers.postgres.grant_spec import HELD_WITH_OPTION, GrantParameters, recorded

__all__ = ["OPTION", "PRIVILEGE_TARGETS", "VERBS", "Earlier", "SchemaObject", "change",
           "labels", "role_exists"]


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
        return cls.recorded_in(resource.observed, want)

    @classmethod
    def recorded_in(cls, observed: Mapping[str, Any], want: GrantParameters) -> Earlier:
        """The record of ``observed`` (a Grant's ``status.atProvider``), when it is about
        ``want``'s scope."""
        privileges = recorded(observed, want.scope)
        options = recorded(observed, want.scope, HELD_WITH_OPTION)
        names = observed.get("names")
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


#: The object type keyword of GRANT/REVOKE per target (columns are granted on their
#: table); fixed SQL text.
PRIVILEGE_TARGETS = {"DATABASE": "DATABASE", "SCHEMA": "SCHEMA", "TABLE": "TABLE",
                     "SEQUENCE": "SEQUENCE", "ROUTINE": "ROUTINE", "COLUMN": "TABLE"}
#: The verb of :func:`change` that takes back the grant option only.
OPTION = "REVOKE GRANT OPTION"
#: Per verb of :func:`change`, its SQL text before the privileges.
VERBS = {"GRANT": "GRANT", "REVOKE": "REVOKE", OPTION: "REVOKE GRANT OPTION FOR"}


def role_exists(session: Session, role: str) -> bool:
    check_name("role", role)
    return session.row("SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = %s", [role],
                       doing=f"observing role {role!r}") is not None


def change(session: Session, verb: str, privileges: list[str], want: GrantParameters,
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


def labels(items: list[SchemaObject], limit: int | None = None) -> Any:
    """The objects' labels: a list (at most ``limit``) or, without a limit, one string."""
    labels = [o.label for o in items]
    if limit is not None:
        return labels[:limit]
    return ", ".join(labels[:10]) + (f" and {len(labels) - 10} more" if len(labels) > 10
                                     else "")
