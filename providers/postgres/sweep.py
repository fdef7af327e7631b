"""The catalogue sweep of the PostgreSQL kinds: drift of many objects read in a few queries.

A Ready object's ``status.atProvider`` is what its last observation read from the
server. :func:`sweep` reads the same catalogue columns for every swept object of one
kind and one ProviderConfig at once, on one admin session, and names the objects
whose catalogue state no longer matches that record: those are the ones whose
external resource changed behind the operator's back (the operator's own changes are
recorded by the pass that makes them, which observes the result). It only reads;
the driver requeues what it names (:mod:`lifecycle.driver.sweep`) and the normal
reconcile repairs it.

What each kind's sweep reads, one query per kind whatever the number of objects:

* Role: ``pg_roles`` (the attributes, connection limit and expiry), the memberships
  (``pg_auth_members``) and the role's own settings (``pg_db_role_setting``);
* Database: ``pg_database`` (owner, encoding, connection limit, locale, flags,
  tablespace);
* Grant on a database: the database ACLs through ``aclexplode``, judged by the
  function :meth:`~lifecycle.providers.postgres.grant.GrantClient.observe` uses
  (:func:`~lifecycle.providers.postgres.grant.target_observation`).

What it does not read is left to the object's poll: a role's password and ownership
mark (the password is checked with the connection Secret's value, which the sweep
never reads), Grants on a schema or on objects in a schema, and Schemas, Extensions
and DefaultPrivileges (each lives in its own database, so reading them would take a
session per database).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from lifecycle.core import objects as objs
from lifecycle.core.contract import ProviderConfig
from lifecycle.core.errors import TerminalError
from lifecycle.core.kind import Kind
from lifecycle.providers.postgres.config import ServerConfig, Session, SqlClient
from lifecycle.providers.postgres.database import DatabaseClient
from lifecycle.providers.postgres.grant import GrantClient, target_observation
from lifecycle.providers.postgres.grant_acl import Earlier
from lifecycle.providers.postgres.grant_spec import GrantParameters
from lifecycle.providers.postgres.role import RoleClient, held_settings

__all__ = ["READERS", "Swept", "drifted", "sweep", "swept_kinds"]

Key = tuple[str | None, str]
#: One swept object: its key, its external name (``status.externalName``, written by the
#: operator only), its spec and what its last observation recorded (``status.atProvider``).
Swept = tuple[Key, str, Mapping[str, Any], Mapping[str, Any]]
#: What a reader answers: per key, the catalogue values it compares with the record
#: (None: the external resource is gone), for the drifted objects only.
Drifts = dict[Key, str]

_ROLES = (
    "SELECT r.rolname, r.rolcanlogin, r.rolcreatedb, r.rolcreaterole, r.rolinherit, "
    "r.rolreplication, r.rolbypassrls, r.rolsuper, r.rolconnlimit, r.rolvaliduntil::text, "
    "ARRAY(SELECT g.rolname FROM pg_catalog.pg_auth_members m "
    "JOIN pg_catalog.pg_roles g ON g.oid = m.roleid WHERE m.member = r.oid), "
    "(SELECT s.setconfig FROM pg_catalog.pg_db_role_setting s "
    "WHERE s.setdatabase = 0 AND s.setrole = r.oid) "
    "FROM pg_catalog.pg_roles r WHERE r.rolname = ANY(%s)")
#: The role attributes ``status.atProvider`` records, in :data:`_ROLES` column order.
_ROLE_FLAGS = ("login", "createdb", "createrole", "inherit", "replication", "bypassRls",
               "superUser")
_DATABASES = (
    "SELECT d.datname, pg_catalog.pg_get_userbyid(d.datdba), "
    "pg_catalog.pg_encoding_to_char(d.encoding), d.datconnlimit, d.datcollate, d.datctype, "
    "d.datallowconn, d.datistemplate, "
    "(SELECT spcname FROM pg_catalog.pg_tablespace WHERE oid = d.dattablespace) "
    "FROM pg_catalog.pg_database d WHERE d.datname = ANY(%s)")
_DATABASE_FIELDS = ("owner", "encoding", "connectionLimit", "lcCollate", "lcCType",
                    "allowConnections", "isTemplate", "tablespace")
_ACL = "pg_catalog.aclexplode(COALESCE(d.datacl, pg_catalog.acldefault('d', d.datdba)))"
_DATABASE_ACLS = (
    "SELECT d.datname, pg_catalog.pg_get_userbyid(d.datdba), "
    f"EXISTS (SELECT 1 FROM {_ACL} p WHERE p.grantee = 0), "
    f"ARRAY(SELECT r.rolname || ' ' || a.privilege_type || ' ' || a.is_grantable::text "
    f"FROM {_ACL} a JOIN pg_catalog.pg_roles r ON r.oid = a.grantee) "
    "FROM pg_catalog.pg_database d WHERE d.datname = ANY(%s)")


def drifted(seen: Mapping[str, Any] | None, recorded: Mapping[str, Any],
            keys: Sequence[str] | None = None) -> bool:
    """Whether the catalogue values ``seen`` (None: the resource is gone) differ from the
    ``recorded`` observation, on ``keys`` (None: on every key of either; a key missing on
    one side reads as None)."""
    if seen is None:
        return True
    names = set(seen) | set(recorded) if keys is None else keys
    return any(seen.get(k) != recorded.get(k) for k in names)


def _fingerprint(seen: Mapping[str, Any] | None) -> str:
    return json.dumps(seen, sort_keys=True, default=str)


def _roles(session: Session, kind: Kind, swept: Sequence[Swept]) -> Drifts:
    rows = session.rows(_ROLES, [sorted({name for _, name, _, _ in swept})],
                        doing="sweeping the roles")
    found: dict[str, dict[str, Any]] = {}
    for row in rows:
        settings = held_settings(row[11])
        found[row[0]] = {**dict(zip(_ROLE_FLAGS, row[1:8], strict=True)),
                         "connectionLimit": row[8], "validUntil": row[9],
                         "memberOf": sorted(set(row[10] or ())),
                         "configurationParameters": [{"name": n, "value": v}
                                                     for n, v in settings.values()]}
    keys = (*_ROLE_FLAGS, "connectionLimit", "validUntil", "memberOf", "configurationParameters")
    return {key: _fingerprint(found.get(name)) for key, name, _, recorded in swept
            if drifted(found.get(name), recorded, keys)}


def _databases(session: Session, kind: Kind, swept: Sequence[Swept]) -> Drifts:
    rows = session.rows(_DATABASES, [sorted({name for _, name, _, _ in swept})],
                        doing="sweeping the databases")
    found = {row[0]: dict(zip(_DATABASE_FIELDS, row[1:], strict=True)) for row in rows}
    return {key: _fingerprint(found.get(name)) for key, name, _, recorded in swept
            if drifted(found.get(name), recorded, _DATABASE_FIELDS)}


def _grants(session: Session, kind: Kind, swept: Sequence[Swept]) -> Drifts:
    wanted: list[tuple[Key, GrantParameters, Mapping[str, Any]]] = []
    for key, _, spec, recorded in swept:
        try:
            want = kind.parse_parameters(spec)
        except TerminalError:
            continue  # its own pass reports the spec; nothing to compare it with
        if isinstance(want, GrantParameters) and not want.on_objects and want.schema is None:
            wanted.append((key, want, recorded))
    if not wanted:
        return {}
    rows = session.rows(_DATABASE_ACLS, [sorted({w.database for _, w, _ in wanted})],
                        doing="sweeping the database privileges")
    databases: dict[str, tuple[str, bool, dict[str, dict[str, bool]]]] = {}
    for name, owner, public, entries in rows:
        acls: dict[str, dict[str, bool]] = {}
        for entry in entries or ():
            role, privilege, grantable = entry.rsplit(" ", 2)
            held = acls.setdefault(role, {})
            held[privilege] = held.get(privilege, False) or grantable == "true"
        databases[name] = (owner, bool(public), acls)
    out: Drifts = {}
    for key, want, recorded in wanted:
        found = databases.get(want.database)
        seen: dict[str, Any] | None = None
        if found is not None:
            owner, public, acls = found
            observation = target_observation(
                want, Earlier.recorded_in(recorded, want), acls.get(want.role, {}),
                owner == want.role, want.revoke_public_on_db and public)
            seen = dict(observation.observed) if observation.exists else None
        if drifted(seen, recorded):
            out[key] = _fingerprint(seen)
    return out


#: The catalogue reader of each client that has one.
READERS: dict[type[SqlClient], Callable[[Session, Kind, Sequence[Swept]], Drifts]] = {
    RoleClient: _roles, DatabaseClient: _databases, GrantClient: _grants}


def swept_kinds() -> tuple[str, ...]:
    """The subjects of the clients whose objects the sweep reads."""
    return tuple(client.subject for client in READERS)


def _swept(obj: Mapping[str, Any]) -> Swept | None:
    meta = objs.mapping(obj.get("metadata"))
    status = objs.mapping(obj.get("status"))
    name, recorded = status.get("externalName"), status.get("atProvider")
    if not isinstance(meta.get("name"), str) or not isinstance(recorded, Mapping):
        return None
    key: Key = (meta.get("namespace") or None, meta["name"])
    return key, name if isinstance(name, str) else "", objs.mapping(obj.get("spec")), recorded


def sweep(client: type[SqlClient], kind: Kind, config: ProviderConfig,
          objects: Sequence[Mapping[str, Any]]) -> Drifts:
    """The keys of ``objects`` (of ``kind``, all on ``config``'s server, Ready) whose
    external resource no longer matches their ``status.atProvider``, each with a
    fingerprint of what the catalogue holds now; empty for a client without a reader.

    One admin session and one query; raises the connector's :class:`HandledError` when
    the config is invalid or the server refuses or cannot be reached."""
    reader = READERS.get(client)
    swept = [s for s in map(_swept, objects)
             if s is not None and (s[1] or client is GrantClient)]
    if reader is None or not swept:
        return {}
    session = Session.open(ServerConfig.from_provider_config(config))
    try:
        return reader(session, kind, swept)
    finally:
        session.close()
