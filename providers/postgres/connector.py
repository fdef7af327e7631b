"""The connector of the PostgreSQL kinds: one admin session per reconcile, the kind's client
behind the provider config's tenancy policy.

:class:`PostgresConnector` reads the ProviderConfig
(:meth:`lifecycle.providers.postgres.config.ServerConfig.from_provider_config`, the one
place it is read), opens the admin session and hands the engine the kind's client wrapped
in a :class:`lifecycle.providers.postgres.tenancy.PolicyGate`, which refuses what the
policy refuses before any statement that changes the server; :meth:`PostgresConnector.admit`
asks the same policy before the engine takes ownership of an object. The connector keeps the
one-owner record of the Grant-like kinds (:class:`~lifecycle.providers.postgres.tenancy.Claims`)
across the reconciles of its kind, read from the kind's objects the engine lists
(:meth:`PostgresConnector.bind`). :meth:`PostgresConnector.sweep` reads the catalogue
state of many Ready objects at once for the driver's drift sweep
(:mod:`lifecycle.providers.postgres.sweep`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from lifecycle.core.contract import ManagedResource, ProviderConfig
from lifecycle.core.kind import Kind
from lifecycle.providers.postgres.config import ServerConfig, Session, SqlClient
from lifecycle.providers.postgres.sweep import sweep
from lifecycle.providers.postgres.tenancy import Claims, PolicyGate

__all__ = ["PostgresConnector"]


class PostgresConnector:
    """Builds one kind's client with a fresh admin session from the provider config."""

    def __init__(self, client: type[SqlClient]) -> None:
        self.client = client
        #: One owner per role and target for the Grant-like kinds (the oldest object
        #: holding it), across this connector's reconciles.
        self.claims = Claims()

    def __repr__(self) -> str:
        return f"PostgresConnector({self.client.__name__})"

    def connect(self, resource: ManagedResource, config: ProviderConfig) -> PolicyGate:
        """Open the admin session and return the client behind the provider config's policy;
        errors already translated."""
        server = ServerConfig.from_provider_config(config)
        return PolicyGate(self.client(Session.open(server)), self.claims)

    def bind(self, kind: Kind, objects: Callable[[], Iterable[Mapping[str, Any]]]) -> None:
        """Read the one-owner record of the Grant-like kinds from ``objects()``, the
        engine's list of ``kind``'s objects (:class:`lifecycle.core.contract.Binds`)."""
        self.claims.bind(kind, objects)

    def admit(self, resource: ManagedResource, config: ProviderConfig) -> None:
        """Raise the refusal of ``resource`` (terminal ``PolicyDenied`` or
        ``TargetConflict``) without changing anything on the server, or return when the
        policy lets it through.

        The engine asks once, before it takes ownership of an object (see
        :class:`lifecycle.core.contract.Connector`): a refused object never gets a
        finalizer, an external name or a connection Secret. It costs one admin session,
        on that first pass only; a failure to connect is the retryable error of
        ``connect`` and the object is asked again on its next pass."""
        gate = self.connect(resource, config)
        try:
            gate.admit(resource)
        finally:
            gate.close()

    def sweep(self, kind: Kind, config: ProviderConfig,
              objects: Sequence[Mapping[str, Any]]) -> dict[tuple[str | None, str], str]:
        """The keys of ``objects`` (Ready objects of ``kind`` on ``config``) whose external
        resource drifted from their ``status.atProvider``, each with a fingerprint of what
        the catalogue holds now (:func:`lifecycle.providers.postgres.sweep.sweep`). One
        admin session and one read-only query; empty for a kind the sweep does not read.
        Raises the connector's translated error when the server cannot be read."""
        return sweep(self.client, kind, config, objects)
