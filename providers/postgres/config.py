"""The provider config, the admin session and the connector shared by the three kinds.

A ``lifecycle.dev/v1alpha1`` ProviderConfig points at a server; its spec is declared by
:class:`lifecycle.providers.postgres.providerconfig.PostgresProviderConfigSpec` (the
CRD is generated from it)::

    spec:
      host: db.example.internal
      port: 5432
      sslMode: require          # libpq sslmode; default prefer (sslmode: the older spelling)
      database: postgres        # the database the admin connects to; default postgres
      connectTimeout: 5         # seconds; default 5
      allowSuperuser: false     # whether Roles may ask for superUser; default false
      policy: {...}             # what tenants may ask for (see providers/postgres/policy.py)
      credentialKeys: {username: user}   # Secret key names, when not the defaults
      tls: {caSecretRef: {name: pg-ca, namespace: crossplane-system, key: ca.crt}}
      credentials:
        source: Secret          # or Environment, Filesystem (lifecycle.core.providerconfig)
        secretRef: {name: pg-admin, namespace: crossplane-system}

and its credentials hold ``username`` and ``password`` of a role allowed to
create roles and databases, and optionally ``ca.crt`` (the CA bundle that
``verify-ca``/``verify-full`` check the server against), ``tls.crt`` and
``tls.key`` (a client certificate and its key); ``spec.tls`` names Secrets holding
the CA bundle and client certificate instead, and wins over those keys. The engine
resolves both into a :class:`lifecycle.core.contract.ProviderConfig`;
:class:`lifecycle.providers.postgres.connector.PostgresConnector` turns that into one admin
connection per reconcile.

Every psycopg error is translated into the engine's taxonomy by
:func:`translate`, with a message written here (never a library's text
verbatim) and every known secret redacted.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, ClassVar
from urllib.parse import quote

import attrs
import psycopg
from psycopg import sql

from lifecycle.core.contract import ManagedResource, ProviderConfig
from lifecycle.core.errors import CredentialsError, ExternalError, HandledError, TerminalError
from lifecycle.core.providerconfig import TLS_KEYS
from lifecycle.core.values import Creation, Observation
from lifecycle.providers.postgres.policy import Policy, read_policy
from lifecycle.providers.postgres.sslmodes import SSLMODES

__all__ = [
    "CREDENTIAL_KEYS", "MAX_IDENTIFIER_BYTES", "SECRET_KINDS", "SESSION_OPTIONS",
    "STANDARD_SECRET_KEYS", "ServerConfig", "Session", "SqlClient", "check_name", "connect_failure",
    "conninfo", "translate",
]

#: PostgreSQL truncates identifiers longer than this many bytes (NAMEDATALEN - 1).
MAX_IDENTIFIER_BYTES = 63
#: The credentials Secret's default key for each value (``spec.credentialKeys`` renames them).
CREDENTIAL_KEYS = {"username": "username", "password": "password", "ca": "ca.crt",
                   "cert": "tls.crt", "key": "tls.key"}
#: Server-side limits for every statement of a reconcile, so none can hang it.
SESSION_OPTIONS = "-c statement_timeout=30s -c lock_timeout=10s"


@attrs.frozen
class ServerConfig:
    """Where the server is and how the admin logs in (from a ProviderConfig)."""

    host: str
    username: str
    password: str = attrs.field(repr=False)
    port: int = 5432
    sslmode: str = "prefer"
    database: str = "postgres"
    connect_timeout: int = 5
    #: Whether Roles may be made superusers (``allowSuperuser``; default false).
    allow_superuser: bool = False
    #: PEM texts from the credentials Secret: CA bundle, client certificate and key.
    ca: str | None = attrs.field(default=None, repr=False)
    cert: str | None = attrs.field(default=None, repr=False)
    key: str | None = attrs.field(default=None, repr=False)
    #: Extra connection Secret keys: (kind, extra key, the standard key it copies).
    secret_keys: tuple[tuple[str, str, str], ...] = ()
    #: The ProviderConfig's name (recorded on what the provider creates) and its policy.
    config_name: str = "default"
    policy: Policy = attrs.field(factory=Policy)

    @classmethod
    def from_provider_config(cls, config: ProviderConfig) -> ServerConfig:
        """Read and check a ProviderConfig; raise :class:`CredentialsError` naming the problem."""
        spec, creds = config.spec, config.credentials

        def invalid(problem: str) -> CredentialsError:
            return CredentialsError(f"provider config {config.name!r}: {problem}",
                                    reason="ProviderConfigInvalid")

        host = spec.get("host")
        if not isinstance(host, str) or not host:
            raise invalid("spec.host must be a non-empty string")
        port = spec.get("port", 5432)
        if isinstance(port, str) and port.isdigit():
            port = int(port)
        if not isinstance(port, int) or isinstance(port, bool) or not 0 < port < 65536:
            raise invalid("spec.port must be an integer between 1 and 65535")
        modes = {key: spec[key] for key in ("sslMode", "sslmode") if spec.get(key) is not None}
        if len(set(map(str, modes.values()))) > 1:
            raise invalid("spec.sslMode and spec.sslmode (its older spelling) disagree; "
                          "set sslMode only")
        sslmode = next(iter(modes.values()), "prefer")
        if sslmode not in SSLMODES:
            raise invalid(f"spec.sslMode must be one of {', '.join(sorted(SSLMODES))}")
        database = spec.get("database", "postgres")
        if not isinstance(database, str) or not database:
            raise invalid("spec.database must be a non-empty string")
        timeout = spec.get("connectTimeout", 5)
        if not isinstance(timeout, int) or isinstance(timeout, bool) or timeout < 1:
            raise invalid("spec.connectTimeout must be a positive integer (seconds)")
        allow_superuser = spec.get("allowSuperuser", False)
        if not isinstance(allow_superuser, bool):
            raise invalid("spec.allowSuperuser must be true or false")
        names = spec.get("credentialKeys", {})
        if not isinstance(names, dict) or set(names) - set(CREDENTIAL_KEYS) or not all(
                isinstance(v, str) and v for v in names.values()):
            raise invalid("spec.credentialKeys must map some of "
                          f"{', '.join(CREDENTIAL_KEYS)} to Secret key names")
        keys = {**CREDENTIAL_KEYS, **names}
        missing = [keys[key] for key in ("username", "password") if not creds.get(keys[key])]
        if missing:
            raise CredentialsError(
                f"provider config {config.name!r} credentials lack "
                + " and ".join(repr(key) for key in missing),
                reason="CredentialsMissing")
        secret_keys = _secret_keys(spec.get("connectionSecretKeys", {}), invalid)
        policy = read_policy(spec.get("policy"), allow_superuser=allow_superuser,
                             invalid=invalid)
        ca = creds.get(TLS_KEYS["ca"]) or creds.get(keys["ca"]) or None
        cert = creds.get(TLS_KEYS["cert"]) or creds.get(keys["cert"]) or None
        key = creds.get(TLS_KEYS["key"]) or creds.get(keys["key"]) or None
        if sslmode in ("verify-ca", "verify-full") and ca is None:
            raise CredentialsError(
                f"provider config {config.name!r}: sslMode {sslmode} checks the server's "
                f"certificate against a CA bundle, and there is none: name it in "
                f"spec.tls.caSecretRef (or put it under {keys['ca']!r} in the credentials)",
                reason="ProviderConfigInvalid")
        if (cert is None) != (key is None):
            raise CredentialsError(
                f"provider config {config.name!r} credentials hold a client certificate "
                f"({keys['cert']!r}) without its key ({keys['key']!r}) or the other way round",
                reason="CredentialsMissing")
        return cls(host=host, port=port, sslmode=sslmode, database=database,
                   connect_timeout=timeout, allow_superuser=allow_superuser,
                   username=creds[keys["username"]], password=creds[keys["password"]],
                   ca=ca, cert=cert, key=key,
                   secret_keys=secret_keys, config_name=config.name, policy=policy)

    @contextlib.contextmanager
    def tls_files(self) -> Iterator[dict[str, str]]:
        """libpq's ``sslrootcert``/``sslcert``/``sslkey`` for the PEM texts this config holds,
        as files readable by this process only, removed when the block ends (libpq reads
        them while connecting)."""
        texts = {"sslrootcert": self.ca, "sslcert": self.cert, "sslkey": self.key}
        if not any(texts.values()):
            yield {}
            return
        with tempfile.TemporaryDirectory(prefix="lifecycle-tls-") as folder:
            paths: dict[str, str] = {}
            for option, text in texts.items():
                if text:
                    path = os.path.join(folder, option)
                    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                    with os.fdopen(descriptor, "w") as handle:
                        handle.write(text)
                    paths[option] = path
            yield paths

    @property
    def address(self) -> str:
        """``host:port`` as shown in messages."""
        return f"{self.host}:{self.port}"

    def uri(self, user: str, password: str | None, database: str) -> str:
        """A libpq connection URI for ``user`` on ``database`` of this server."""
        host = f"[{self.host}]" if ":" in self.host else quote(self.host, safe="")
        auth = quote(user, safe="")
        if password:
            auth += ":" + quote(password, safe="")
        return (f"postgresql://{auth}@{host}:{self.port}/{quote(database, safe='')}"
                f"?sslmode={self.sslmode}")

    def connection_details(self, user: str, password: str | None, database: str,
                           kind: str = "") -> dict[str, str]:
        """The keys of a connection Secret: host, port, user, username, database, uri (and
        password when given), plus the extra keys the config names for ``kind``."""
        details = {"host": self.host, "port": str(self.port), "user": user, "username": user,
                   "database": database, "uri": self.uri(user, password, database)}
        if password:
            details["password"] = password
        for owner, extra, standard in self.secret_keys:
            if owner == kind and standard in details:
                details[extra] = details[standard]
        return details


#: The kinds that write connection Secrets, and the keys they write.
SECRET_KINDS = ("Role", "Database")
STANDARD_SECRET_KEYS = ("host", "port", "user", "username", "password", "database", "uri")
_SECRET_KEY = re.compile(r"[-._a-zA-Z0-9]{1,253}")


def _secret_keys(value: Any, invalid: Any) -> tuple[tuple[str, str, str], ...]:
    """Read ``spec.connectionSecretKeys``: ``{Kind: {extraKey: standardKey}}``."""
    problem = ("spec.connectionSecretKeys must map Role or Database to {newKey: standardKey}, "
               f"standardKey one of {', '.join(STANDARD_SECRET_KEYS)}, newKey a Secret key "
               "name that is not a standard one")
    if not isinstance(value, dict):
        raise invalid(problem)
    out: list[tuple[str, str, str]] = []
    for kind, mapping in value.items():
        if kind not in SECRET_KINDS or not isinstance(mapping, dict):
            raise invalid(problem)
        for extra, standard in mapping.items():
            if (standard not in STANDARD_SECRET_KEYS or not isinstance(extra, str)
                    or not _SECRET_KEY.fullmatch(extra) or extra in STANDARD_SECRET_KEYS):
                raise invalid(problem)
            out.append((kind, extra, standard))
    return tuple(sorted(out))


def translate(exc: psycopg.Error, doing: str, secrets: Iterable[str] = ()) -> HandledError:
    """Map a psycopg error onto the engine's taxonomy with a clear, secret-free message.

    Server unreachable or shutting down: retryable ``ServerUnavailable``.
    Bad admin credentials: ``InvalidCredentials``. A role, database or
    template that does not exist (yet): retryable ``DependencyMissing``. An
    invalid value or name: terminal ``InvalidParameter``. Anything else:
    retryable ``DatabaseError`` naming the SQLSTATE.
    """
    state = exc.sqlstate or ""
    detail = _redact(_first_line(exc), secrets)
    lost = not state and isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError))
    if lost or state[:2] == "08" or state in ("57P01", "57P02", "57P03"):
        return ExternalError(f"{doing}: PostgreSQL server unavailable ({detail})",
                             reason="ServerUnavailable")
    if state == "57014":
        return ExternalError(f"{doing}: statement timed out", reason="Timeout")
    if state[:2] == "53":
        return ExternalError(f"{doing}: server out of resources ({state}: {detail})",
                             reason="ServerBusy")
    if state[:2] == "28":
        return CredentialsError(f"{doing}: the server rejected the admin credentials "
                                f"({state})", reason="InvalidCredentials")
    if state in ("42704", "3D000", "3F000"):
        return ExternalError(f"{doing}: {detail}", reason="DependencyMissing")
    if state == "42501":
        return ExternalError(f"{doing}: insufficient privilege: {detail}",
                             reason="InsufficientPrivilege")
    if state in ("2BP01", "55006"):
        hint = _redact(_detail(exc), secrets)
        return ExternalError(f"{doing}: {detail}" + (f" ({hint})" if hint else ""),
                             reason="ObjectInUse")
    if state[:2] == "22" or state in ("42602", "42622", "42939"):
        return TerminalError(f"{doing}: {detail}", reason="InvalidParameter")
    return ExternalError(f"{doing}: {state or type(exc).__name__}: {detail}",
                         reason="DatabaseError")


def connect_failure(exc: psycopg.Error, server: ServerConfig) -> HandledError:
    """Classify a failed connection attempt (libpq reports no SQLSTATE for these).

    No ``FATAL`` from the server means it was not reached: ``ServerUnavailable``.
    A refused login is ``InvalidCredentials``; a server starting or stopping
    is unavailable; any other refusal is ``ConnectionRejected``.
    """
    text = _redact(str(exc), [server.password])
    doing = f"connecting to {server.address} as {server.username!r}"
    if "FATAL:" not in text:
        line = text.strip().splitlines()[0][:240] if text.strip() else type(exc).__name__
        return ExternalError(f"{doing}: PostgreSQL server unavailable ({line})",
                             reason="ServerUnavailable")
    reply = " ".join(text.split("FATAL:", 1)[1].split())[:240]
    if "authentication failed" in reply or "pg_hba.conf" in reply:
        return CredentialsError(f"{doing}: the server rejected the credentials ({reply})",
                                reason="InvalidCredentials")
    if any(word in reply for word in ("starting up", "shutting down", "recovery mode")):
        return ExternalError(f"{doing}: PostgreSQL server unavailable ({reply})",
                             reason="ServerUnavailable")
    if "too many" in reply:
        return ExternalError(f"{doing}: {reply}", reason="ServerBusy")
    return ExternalError(f"{doing}: the server refused the connection ({reply})",
                         reason="ConnectionRejected")


def _first_line(exc: psycopg.Error) -> str:
    diag = getattr(exc, "diag", None)
    text = (diag.message_primary if diag is not None else None) or str(exc) or ""
    return text.strip().splitlines()[0][:240] if text.strip() else type(exc).__name__


def _detail(exc: psycopg.Error) -> str:
    diag = getattr(exc, "diag", None)
    text = (diag.message_detail if diag is not None else None) or ""
    return text.strip().splitlines()[0][:240] if text.strip() else ""


def _redact(text: str, secrets: Iterable[str]) -> str:
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text


def check_name(what: str, name: str) -> None:
    """Reject a name PostgreSQL would refuse or silently truncate (terminal ``InvalidSpec``)."""
    if not name:
        raise TerminalError(f"{what} name is empty")
    if "\x00" in name:
        raise TerminalError(f"{what} name {name!r} contains a NUL character")
    if len(name.encode("utf-8")) > MAX_IDENTIFIER_BYTES:
        raise TerminalError(f"{what} name {name!r} is longer than {MAX_IDENTIFIER_BYTES} bytes; "
                            "PostgreSQL would truncate it")


def conninfo(options: dict[str, str]) -> dict[str, Any]:
    """Connection parameters for ``psycopg.connect``'s keywords (libpq's, as strings)."""
    return dict(options)


class Session:
    """One autocommit admin connection; every statement's errors are translated."""

    def __init__(self, server: ServerConfig, connection: psycopg.Connection[Any]) -> None:
        self.server = server
        self.connection = connection

    @classmethod
    def open(cls, server: ServerConfig) -> Session:
        """Connect as the admin; raise a :class:`HandledError` when that fails."""
        try:
            with server.tls_files() as tls:
                connection = psycopg.connect(
                    host=server.host, port=server.port, user=server.username,
                    password=server.password, dbname=server.database, sslmode=server.sslmode,
                    connect_timeout=server.connect_timeout, application_name="lifecycle",
                    options=SESSION_OPTIONS, autocommit=True, **conninfo(tls))
        except psycopg.Error as exc:
            raise connect_failure(exc, server) from None
        return cls(server, connection)

    @contextlib.contextmanager
    def translated(self, doing: str, secrets: Sequence[str | None] = ()) -> Iterator[None]:
        """Translate psycopg errors raised inside the block, redacting ``secrets``."""
        try:
            yield
        except psycopg.Error as exc:
            known = [self.server.password, *(s for s in secrets if s)]
            raise translate(exc, doing, known) from None

    def rows(self, query: sql.Composable | str, params: Sequence[Any] = (),
             doing: str = "reading the catalog") -> list[tuple[Any, ...]]:
        """Run a read-only query and return its rows."""
        with self.translated(doing), self.connection.cursor() as cur:
            cur.execute(query, params)  # type: ignore[arg-type]
            return cur.fetchall()

    def row(self, query: str, params: Sequence[Any], doing: str) -> tuple[Any, ...] | None:
        """The first row of a read-only query, or None when it returns none."""
        rows = self.rows(query, params, doing)
        return rows[0] if rows else None

    def execute(self, statement: sql.Composable, doing: str,
                secrets: Sequence[str | None] = ()) -> None:
        """Run one statement (identifiers and values already composed safely)."""
        with self.translated(doing, secrets):
            self.connection.execute(sql.Composed([statement]))  # any Composable

    def close(self) -> None:
        """Close the connection; idempotent."""
        self.connection.close()


class SqlClient:
    """Base of the three clients: holds the admin session and closes it."""

    #: What the client manages, as shown in messages ("role", "database", "grant").
    subject: ClassVar[str] = "object"

    def __init__(self, session: Session) -> None:
        self.session = session
        self.server = session.server

    def __repr__(self) -> str:
        return f"{type(self).__name__}(server={self.server.address!r})"

    def close(self) -> None:
        """Release the admin connection."""
        self.session.close()

    # Each kind's client implements the external client contract's four calls; every
    # statement has finished when it returns.

    def observe(self, resource: ManagedResource) -> Observation:
        """What the server holds of ``resource``."""
        raise NotImplementedError(f"{type(self).__name__} does not observe")

    def create(self, resource: ManagedResource) -> Creation:
        """Create ``resource`` on the server."""
        raise NotImplementedError(f"{type(self).__name__} does not create")

    def update(self, resource: ManagedResource) -> None:
        """Bring what the server holds to ``resource``'s spec."""
        raise NotImplementedError(f"{type(self).__name__} does not update")

    def delete(self, resource: ManagedResource) -> None:
        """Remove ``resource`` from the server."""
        raise NotImplementedError(f"{type(self).__name__} does not delete")

    def name(self, resource: ManagedResource) -> str:
        """The external name, checked to be a valid PostgreSQL identifier."""
        check_name(self.subject, resource.external_name)
        return resource.external_name
