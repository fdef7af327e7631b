"""Crash-explorer targets for the PostgreSQL kinds (Role, Database, Grant, DefaultPrivileges,
Schema and Extension) on a real server.

The server is named by ``LIFECYCLE_POSTGRES_DSN`` (a libpq URI or
``key=value`` string naming an admin that may create roles and databases).
Without it :func:`verify_target` raises :class:`~lifecycle.verify.Unavailable`,
so exploring every kind lists these as skipped. Creations are counted at the
client-server boundary: by a session that wraps the provider's own, and, for
the statements a client runs in a second session on another database (Schema,
Extension), by the cursors of that session's connection.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import attrs
import psycopg
from psycopg import conninfo, sql

from lifecycle.core.contract import ManagedResource, ProviderConfig
from lifecycle.core.kind import EXTERNAL_NAME, FINALIZER, Kind
from lifecycle.kube.errors import NotFound
from lifecycle.providers.postgres.config import SESSION_OPTIONS, ServerConfig, Session
from lifecycle.providers.postgres.database import DatabaseClient
from lifecycle.providers.postgres.default_privileges import DefaultPrivilegesClient
from lifecycle.providers.postgres.extension import ExtensionClient
from lifecycle.providers.postgres.grant import GrantClient
from lifecycle.providers.postgres.policy import POLICY_DENIED
from lifecycle.providers.postgres.role import RoleClient
from lifecycle.providers.postgres.schema import SchemaClient
from lifecycle.providers.postgres.tenancy import Claims, PolicyGate
from lifecycle.verify import ExternalSystem, Target, Unavailable, VerifyError

__all__ = [
    "DEFAULTS", "EXTENSION", "MOVED", "POLICY_DENIED_SCENARIO", "POSTGRES_DSN_ENV",
    "PostgresSettings", "postgres_settings", "postgres_target", "refused_target", "verify_target",
    "verify_targets",
]

#: Environment variable naming a PostgreSQL server for the PostgreSQL kinds.
POSTGRES_DSN_ENV = "LIFECYCLE_POSTGRES_DSN"


@attrs.frozen
class PostgresSettings:
    """Where the PostgreSQL server for the PostgreSQL kinds is, and the admin login."""

    host: str
    port: int
    user: str
    password: str = attrs.field(repr=False)
    database: str = "postgres"
    sslmode: str = "prefer"

    @classmethod
    def from_dsn(cls, dsn: str) -> PostgresSettings:
        """Read a libpq DSN (URI or ``key=value``); a :class:`VerifyError` if it is bad."""
        try:
            info = conninfo.conninfo_to_dict(dsn)
        except Exception:  # the library's message may echo the password
            raise VerifyError(f"{POSTGRES_DSN_ENV} is not a valid PostgreSQL connection "
                              "string") from None
        host = str(info.get("host") or "127.0.0.1")
        try:
            port = int(info.get("port") or 5432)
        except ValueError:
            raise VerifyError(f"{POSTGRES_DSN_ENV}: the port must be a number") from None
        if not info.get("user") or not info.get("password"):
            raise VerifyError(f"{POSTGRES_DSN_ENV} must name a user and a password (the admin "
                              "role that creates roles and databases)")
        return cls(host=host, port=port, user=str(info["user"]),
                   password=str(info["password"]), database=str(info.get("dbname") or "postgres"),
                   sslmode=str(info.get("sslmode") or "prefer"))

    def connect(self) -> Any:
        """An autocommit admin connection (psycopg)."""
        return psycopg.connect(host=self.host, port=self.port, user=self.user,
                               password=self.password, dbname=self.database,
                               sslmode=self.sslmode, connect_timeout=5, autocommit=True,
                               application_name="lifecycle-verify", options=SESSION_OPTIONS)

    def check(self) -> None:
        """Connect once; a :class:`VerifyError` (without the password) when that fails."""
        try:
            self.connect().close()
        except psycopg.Error as exc:
            text = str(exc).replace(self.password, "***").strip().splitlines()
            raise VerifyError(f"cannot connect to PostgreSQL at {self.host}:{self.port} as "
                              f"{self.user!r}: {text[0] if text else type(exc).__name__}"
                              ) from None


_IDENT = r'("(?:[^"]|"")*"|[^\s,]+)'
_CREATE = re.compile(r"^CREATE (?:ROLE|DATABASE) " + _IDENT)
_GRANT = re.compile(r"^GRANT .* ON DATABASE " + _IDENT + r" TO " + _IDENT)
_DEFAULT = re.compile(r"^ALTER DEFAULT PRIVILEGES FOR ROLE " + _IDENT + r" GRANT .* ON TABLES TO "
                      + _IDENT)
#: The external name suffix of the DefaultPrivileges target's object.
DEFAULTS = "defaults"
_CREATE_IN = re.compile(r"^CREATE (SCHEMA|EXTENSION) " + _IDENT)
#: The extension the Extension target installs: shipped with PostgreSQL (contrib), trusted
#: (a database owner may install it without being a superuser) and relocatable.
EXTENSION = "pg_trgm"
#: The schema of the run's database the Extension target's update moves it to.
MOVED = "verify_moved"


def _unquote(identifier: str) -> str:
    if identifier.startswith('"'):
        return identifier[1:-1].replace('""', '"')
    return identifier


class _CountingSession:
    """An admin session that counts what the server acknowledged creating, per name.

    ``CREATE ROLE``/``CREATE DATABASE`` count for the name they create;
    a ``GRANT`` counts for ``<role>.<database>`` when the role held no
    explicit privilege on the database before it (it made the grant exist),
    an ``ALTER DEFAULT PRIVILEGES ... GRANT`` on tables for
    ``<role>.defaults`` when the role held no default privilege of that owner.
    Only statements that returned without an error are counted; the
    statement text (which may carry a password verifier) is never kept.
    """

    def __init__(self, session: Any, counts: dict[str, int]) -> None:
        self._session = session
        self._counts = counts

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)

    def execute(self, statement: Any, doing: str, secrets: Sequence[str | None] = ()) -> None:
        """Run the statement through the real session, counting a successful creation."""
        text = statement.as_string(self._session.connection)
        created: str | None = None
        grant = _GRANT.match(text)
        default = _DEFAULT.match(text)
        if grant:
            database, role = _unquote(grant.group(1)), _unquote(grant.group(2))
            if not _held(self._session.connection, role, database):
                created = f"{role}.{database}"
        elif default:
            owner, role = _unquote(default.group(1)), _unquote(default.group(2))
            if not _default_held(self._session.connection, owner, role):
                created = f"{role}.{DEFAULTS}"
        else:
            create = _CREATE.match(text)
            created = _unquote(create.group(1)) if create else None
        self._session.execute(statement, doing, secrets)
        if created is not None:
            self._counts[created] = self._counts.get(created, 0) + 1

    def close(self) -> None:
        """Keep the shared connection open (the run closes it)."""


def _held(connection: Any, role: str, database: str) -> bool:
    """Whether ``role`` holds an explicit privilege on ``database``."""
    row = connection.execute(
        "SELECT count(*) FROM pg_catalog.pg_database d, "
        "LATERAL pg_catalog.aclexplode(d.datacl) a "
        "JOIN pg_catalog.pg_roles r ON r.oid = a.grantee "
        "WHERE d.datname = %s AND r.rolname = %s", [database, role]).fetchone()
    return bool(row and row[0])


def _default_held(connection: Any, owner: str, role: str) -> bool:
    """Whether ``role`` holds a default privilege on tables ``owner`` creates (this database)."""
    row = connection.execute(
        "SELECT count(*) FROM pg_catalog.pg_default_acl d "
        "JOIN pg_catalog.pg_roles o ON o.oid = d.defaclrole, "
        "LATERAL pg_catalog.aclexplode(d.defaclacl) a "
        "JOIN pg_catalog.pg_roles r ON r.oid = a.grantee "
        "WHERE o.rolname = %s AND r.rolname = %s AND d.defaclobjtype = 'r'",
        [owner, role]).fetchone()
    return bool(row and row[0])


class _CountingCursor(psycopg.Cursor[Any]):
    """A cursor counting each ``CREATE SCHEMA``/``CREATE EXTENSION`` that returned without an
    error: for a schema under its name, for an extension as ``<extension>.<database>``; and
    each ``ALTER DEFAULT PRIVILEGES ... GRANT`` on tables that gave the role its first
    default privilege of that owner, as ``<role>.defaults``. Each run makes a subclass
    whose ``counts`` is the run's."""

    counts: dict[str, int] = {}

    def execute(self, query: Any, params: Any = None, **options: Any) -> Any:
        """Run the statement, then count it if it created a schema or an extension."""
        text = query.as_string(self.connection) if isinstance(query, sql.Composable) else ""
        found = _CREATE_IN.match(text)
        default = _DEFAULT.match(text)
        name: str | None = None
        if found:
            name = _unquote(found.group(2))
            if found.group(1) == "EXTENSION":
                name = f"{name}.{self.connection.info.dbname}"
        elif default:
            owner, role = _unquote(default.group(1)), _unquote(default.group(2))
            if not _default_held(self.connection, owner, role):
                name = f"{role}.{DEFAULTS}"
        result = super().execute(query, params, **options)
        if name is not None:
            self.counts[name] = self.counts.get(name, 0) + 1
        return result


@attrs.frozen
class _CountingServer(ServerConfig):
    """A server config whose connections count creations with ``cursor``.

    A client reaching objects of another database (Schema, Extension) opens a
    second session from its admin session's config (``attrs.evolve`` keeps
    this class); the cursor class rides along with the connection options.
    """

    cursor: type[_CountingCursor] | None = attrs.field(default=None, eq=False, repr=False)

    @contextlib.contextmanager
    def tls_files(self) -> Iterator[dict[str, Any]]:
        """The TLS options, plus the counting cursor class for the connection."""
        with ServerConfig.tls_files(self) as options:
            yield {**options, "cursor_factory": self.cursor} if self.cursor else options


class _CountingConnector:
    """Builds a kind's client on the run's admin connection, its session counting creations.

    The provider config the engine resolved is still read and checked as
    the real connector does; only the login is shared: every statement is
    autocommit and carries no session state, and a crash falls between two
    statements, never inside one, so a fresh engine re-using the connection
    sees exactly what a new login would. It saves a login per reconcile.
    """

    def __init__(self, client_class: Any, counts: dict[str, int], connection: Any) -> None:
        self.claims = Claims()
        self.client_class = client_class
        self.counts = counts
        self.connection = connection
        self.cursor = type("RunCursor", (_CountingCursor,), {"counts": counts})

    def connect(self, resource: ManagedResource, config: ProviderConfig) -> Any:
        """A client whose session counts creations and whose close keeps the connection."""
        server = ServerConfig.from_provider_config(config)
        counting = _CountingServer(**attrs.asdict(server, recurse=False), cursor=self.cursor)
        session = Session(counting, self.connection)
        return PolicyGate(self.client_class(_CountingSession(session, self.counts)), self.claims)

    def admit(self, resource: ManagedResource, config: ProviderConfig) -> None:
        """The policy's refusal of ``resource`` before it is taken over, as the real
        connector's ``admit`` (changing nothing on the server)."""
        gate = self.connect(resource, config)
        try:
            gate.admit(resource)
        finally:
            gate.close()

    def bind(self, kind: Kind, objects: Callable[[], Iterable[Mapping[str, Any]]]) -> None:
        """Read the one-owner record of the Grant-like kinds from the engine's list."""
        self.claims.bind(kind, objects)


def postgres_target(kind: Kind, settings: PostgresSettings, label: str = "") -> Target:
    """Exercise one PostgreSQL kind (Role, Database, Grant, DefaultPrivileges, Schema or
    Extension) on a real server.

    The server outlives every run, so each run gets its own names: the
    target's object is ``verify-<token>`` (random per target) and each run
    seeds the embedded API's uids at random, so the default external name
    ``verify-<token>-<uid8>`` is new in every run. A Schema, Extension, Grant
    or DefaultPrivileges run works in a database of its own,
    ``verify-<token>-d<run>``, made for the run (with a throwaway grantee and,
    for a DefaultPrivileges, a throwaway owner of the tables; the provider
    config's policy allows naming what the run made by hand). The Extension,
    ``pg_trgm``, has one name everywhere; its external name is
    ``pg_trgm.<database>``. *Leaked* means a role, database or
    schema of this target's prefix that appeared during the run and that no
    stored object's external-name annotation names; for a Grant, the
    throwaway role of the run still holding a privilege on the database; for
    a DefaultPrivileges, that role still holding a default privilege on the
    tables the run's owner creates; for an Extension, the extension still installed
    in the run's database.
    *Created twice* is counted at the client-server boundary: every
    ``CREATE ROLE``/``CREATE DATABASE``/``CREATE SCHEMA``/``CREATE
    EXTENSION`` the server acknowledged for a name (and every ``GRANT`` that
    gave the role its first privilege, plainly or by default), and, for
    roles, databases, schemas and extensions, every distinct OID the name was
    seen with. What a run leaves behind is dropped once it has been checked.
    """
    clients = {"Role": RoleClient, "Database": DatabaseClient, "Grant": GrantClient,
               "DefaultPrivileges": DefaultPrivilegesClient, "Schema": SchemaClient,
               "Extension": ExtensionClient}
    grantees = ("Grant", "DefaultPrivileges")
    in_database = ("Schema", "Extension", *grantees)
    if kind.kind not in clients:
        raise ValueError(f"{kind.kind} is not a PostgreSQL kind")
    client_class = clients[kind.kind]
    token = secrets.token_hex(3)
    prefix = f"verify-{token}"
    state: dict[str, str] = {}

    def system() -> ExternalSystem:
        counts: dict[str, int] = {}
        oids: dict[str, set[int]] = {}
        admin = settings.connect()
        run_token = secrets.token_hex(3)
        grantee, owner = f"{prefix}-r{run_token}", f"{prefix}-o{run_token}"
        database = f"{prefix}-d{run_token}"
        state["grantee"], state["database"], state["owner"] = grantee, database, owner
        inside: Any = None  # the admin's connection to the run's database

        def seen(rows: list[tuple[Any, ...]]) -> set[str]:
            for name, oid in rows:
                oids.setdefault(name, set()).add(int(oid))
            return {name for name, _ in rows}

        def names() -> set[str]:
            if kind.kind == "Grant":
                held = _held(admin, grantee, database)
                return {f"{grantee}.{database}"} if held else set()
            if kind.kind == "DefaultPrivileges":
                held = _default_held(inside, owner, grantee)
                return {f"{grantee}.{DEFAULTS}"} if held else set()
            if kind.kind == "Schema":
                return seen(inside.execute(
                    "SELECT nspname, oid FROM pg_catalog.pg_namespace "
                    "WHERE starts_with(nspname, %s)", [prefix + "-"]).fetchall())
            if kind.kind == "Extension":
                return seen(inside.execute(
                    "SELECT extname || '.' || current_database(), oid "
                    "FROM pg_catalog.pg_extension WHERE extname = %s",
                    [EXTENSION]).fetchall())
            table, column = (("pg_roles", "rolname") if kind.kind == "Role"
                             else ("pg_database", "datname"))
            rows = admin.execute(f"SELECT {column}, oid FROM pg_catalog.{table} "
                                 f"WHERE starts_with({column}, %s)", [prefix + "-"]).fetchall()
            return seen(rows) - before

        def creations(name: str) -> int:
            return max(counts.get(name, 0), len(oids.get(name, ())))

        def close() -> None:
            try:
                if kind.kind in in_database:
                    if inside is not None:
                        inside.close()
                    admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                        sql.Identifier(database)))
                if kind.kind in grantees or kind.kind == "Schema":
                    # The run's database, gone, held every privilege given to the roles.
                    for role in (grantee, owner):
                        admin.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(
                            sql.Identifier(role)))
                elif kind.kind not in in_database:
                    for name in names():
                        verb = "ROLE" if kind.kind == "Role" else "DATABASE"
                        admin.execute(sql.SQL("DROP {} IF EXISTS {}").format(
                            sql.SQL(verb), sql.Identifier(name)))
            finally:
                admin.close()

        before: set[str] = set()
        if kind.kind in grantees or kind.kind == "Schema":
            admin.execute(sql.SQL("CREATE ROLE {} NOLOGIN").format(sql.Identifier(grantee)))
        if kind.kind == "DefaultPrivileges":
            # The tables' future owner; the admin acts as it to alter its defaults.
            admin.execute(sql.SQL("CREATE ROLE {} NOLOGIN").format(sql.Identifier(owner)))
            admin.execute(sql.SQL("GRANT {} TO {}").format(sql.Identifier(owner),
                                                           sql.Identifier(settings.user)))
        if kind.kind in in_database:
            admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))
            inside = attrs.evolve(settings, database=database).connect()
        if kind.kind == "Schema":
            # The update hands the schema to the run's role: the admin must be able to act
            # as it, and the role to create in the database.
            admin.execute(sql.SQL("GRANT {} TO {}").format(sql.Identifier(grantee),
                                                           sql.Identifier(settings.user)))
            admin.execute(sql.SQL("GRANT CREATE ON DATABASE {} TO {}").format(
                sql.Identifier(database), sql.Identifier(grantee)))
        elif kind.kind == "Extension":
            inside.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(MOVED)))
        elif kind.kind not in grantees:
            before = names()
        return ExternalSystem(
            _CountingConnector(client_class, counts, admin), names, creations,
            credentials={"username": settings.user, "password": settings.password},
            provider_spec={"host": settings.host, "port": settings.port,
                           "sslmode": settings.sslmode, "database": settings.database,
                           # The run's roles and database are made by hand, not by objects.
                           "policy": {"crossNamespace": True}},
            api_seed=secrets.randbits(64), close=close)

    def manifest(name: str) -> dict[str, Any]:
        spec: dict[str, Any]
        metadata: dict[str, Any] = {"name": name, "namespace": "default"}
        if kind.kind == "Role":
            spec = {"forProvider": {"login": True, "createdb": False}}
        elif kind.kind == "Database":
            spec = {"forProvider": {}}
        elif kind.kind == "Schema":
            spec = {"forProvider": {"database": state["database"]}}
        elif kind.kind == "Extension":
            spec = {"forProvider": {"extension": EXTENSION, "database": state["database"]}}
            metadata["annotations"] = {EXTERNAL_NAME: f"{EXTENSION}.{state['database']}"}
        elif kind.kind == "DefaultPrivileges":
            grantee = state["grantee"]
            spec = {"forProvider": {"role": grantee, "targetRole": state["owner"],
                                    "database": state["database"], "objectType": "table",
                                    "privileges": ["SELECT"]}}
            metadata["annotations"] = {EXTERNAL_NAME: f"{grantee}.{DEFAULTS}"}
        else:
            grantee = state["grantee"]
            spec = {"forProvider": {"role": grantee, "database": state["database"],
                                    "privileges": ["CONNECT", "CREATE"]}}
            metadata["annotations"] = {EXTERNAL_NAME: f"{grantee}.{state['database']}"}
        if kind.kind in ("Role", "Database"):
            spec["writeConnectionSecretToRef"] = {"name": f"{name}-conn"}
        return {"apiVersion": kind.api_version, "kind": kind.kind, "metadata": metadata,
                "spec": spec}

    def update(data: dict[str, Any]) -> dict[str, Any]:
        changed = json.loads(json.dumps(data))
        params = changed["spec"]["forProvider"]
        if kind.kind == "Role":
            params["createdb"] = True
        elif kind.kind == "Database":
            params["connectionLimit"] = 5
        elif kind.kind == "Schema":
            params["role"] = state["grantee"]
        elif kind.kind == "Extension":
            params["schema"] = MOVED
        elif kind.kind == "DefaultPrivileges":
            params["privileges"] = ["INSERT", "SELECT"]
        else:
            # Narrows as it widens: CREATE is revoked (the Grant's record held it) while
            # TEMPORARY is granted, so every crash point of the update meets both paths.
            params["privileges"] = ["CONNECT", "TEMPORARY"]
        return changed

    return Target(kind, system, manifest, update, label=label, objects=(prefix,))


#: The label of the PostgreSQL Role's scenario of an object the policy refuses.
POLICY_DENIED_SCENARIO = "policy-denied"


def refused_target(kind: Kind, settings: PostgresSettings) -> Target:
    """A Role the provider config's policy refuses, explored like any other scenario.

    The Role asks for ``createrole`` (not in the default ``allowedRoleAttributes``); its
    update asks for ``replication`` instead (refused too, so the new generation is asked
    again); then it is deleted. The connector's ``admit`` refuses it before the takeover,
    so after each of the first two phases the object must hold nothing of the engine's:
    no finalizer, no external-name annotation, no connection Secret, and a ``Failed``
    condition ``PolicyDenied`` for its current generation; and no role of the target's
    prefix may appear on the server (any would be a leak: no object tracks it). Deleting
    it must remove it, at every crash point and in every variant. An engine that commits
    the finalizer before it asks is reported at once.
    """
    if kind.kind != "Role":
        raise ValueError(f"the {POLICY_DENIED_SCENARIO} scenario is a Role's, not a "
                         f"{kind.kind}'s")
    base = postgres_target(kind, settings)

    def manifest(name: str) -> dict[str, Any]:
        body = base.manifest(name)
        body["spec"]["forProvider"] = {"login": True, "createrole": True}
        return body

    def update(data: dict[str, Any]) -> dict[str, Any]:
        changed = json.loads(json.dumps(data))
        changed["spec"]["forProvider"] = {"login": True, "replication": True}
        return changed

    def converged(env: Any, manifests: Mapping[str, dict[str, Any]], expect: str) -> list[str]:
        problems: list[str] = []
        for name, body in manifests.items():
            try:
                obj = env.api.get(kind.api_version, kind.kind, "default", name)
            except NotFound:
                obj = None
            if expect == "gone":
                if obj is not None:
                    problems.append(f"{name} was not deleted (finalizers="
                                    f"{obj['metadata'].get('finalizers')})")
                continue
            if obj is None:
                problems.append(f"{name} vanished")
                continue
            problems += _unclaimed(env, name, obj, body)
        return problems

    return attrs.evolve(base, manifest=manifest, update=update, converged=converged,
                        label=f"{kind.kind}/{POLICY_DENIED_SCENARIO}")


def _unclaimed(env: Any, name: str, obj: Mapping[str, Any], body: Mapping[str, Any]) -> list[str]:
    """What a refused object holds that it must not, and a missing or stale refusal."""
    problems: list[str] = []
    meta = obj["metadata"]
    if FINALIZER in (meta.get("finalizers") or []):
        problems.append(f"{name} was refused but holds the finalizer {FINALIZER}")
    if EXTERNAL_NAME in (meta.get("annotations") or {}):
        problems.append(f"{name} was refused but holds the external name "
                        f"{meta['annotations'][EXTERNAL_NAME]!r}")
    secret = (body.get("spec") or {}).get("writeConnectionSecretToRef") or {}
    if secret.get("name"):
        with contextlib.suppress(NotFound):
            env.api.get("v1", "Secret", meta.get("namespace"), secret["name"])
            problems.append(f"{name} was refused but its connection Secret was written")
    status = obj.get("status") or {}
    failed = [c for c in status.get("conditions") or [] if c.get("type") == "Failed"]
    if not failed or failed[0].get("reason") != POLICY_DENIED:
        found = [(c.get("type"), c.get("reason")) for c in status.get("conditions") or []]
        problems.append(f"{name} carries no Failed condition {POLICY_DENIED} "
                        f"(conditions: {found})")
    elif status.get("observedGeneration") != meta.get("generation"):
        problems.append(f"{name}'s refusal is of generation {status.get('observedGeneration')}"
                        f", not {meta.get('generation')}")
    return problems


def postgres_settings() -> PostgresSettings | None:
    """The server named by ``LIFECYCLE_POSTGRES_DSN``, or None when it is not set."""
    dsn = os.environ.get(POSTGRES_DSN_ENV)
    return PostgresSettings.from_dsn(dsn) if dsn else None


def verify_target(kind: Kind) -> Target:
    """The target of a PostgreSQL kind on the server of ``LIFECYCLE_POSTGRES_DSN``.

    :class:`~lifecycle.verify.Unavailable` when the variable is not set; a
    :class:`~lifecycle.verify.VerifyError` naming the server when it is
    malformed or the server cannot be reached.
    """
    settings = postgres_settings()
    if settings is None:
        raise Unavailable(f"needs a PostgreSQL server: set {POSTGRES_DSN_ENV}")
    settings.check()
    return postgres_target(kind, settings)


def verify_targets(kind: Kind) -> list[Target]:
    """:func:`verify_target`, and for a Role also its :func:`refused_target` scenario
    (``Role/policy-denied``)."""
    first = verify_target(kind)
    settings = postgres_settings()
    if kind.kind != "Role" or settings is None:
        return [first]
    return [first, refused_target(kind, settings)]
