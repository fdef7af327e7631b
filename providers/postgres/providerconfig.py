"""The spec of a PostgreSQL ProviderConfig, declared once: the CRD, the docs and the checks.

:class:`PostgresProviderConfigSpec` is what ``Kind.provider_config_spec`` names for every
PostgreSQL kind: ``lifecycle crds`` generates the ProviderConfig's schema from it, so the
API server refuses an unknown field, an ``sslMode`` libpq does not know or a port out of
range with a 422 naming the field, and ``kubectl explain providerconfig.spec`` describes
every field. :meth:`lifecycle.providers.postgres.config.ServerConfig.from_provider_config`
reads the same fields again, for an object stored before the schema was installed::

    apiVersion: lifecycle.dev/v1alpha1
    kind: ProviderConfig
    metadata: {name: default}
    spec:
      host: db.example.internal
      port: 5432
      database: postgres
      sslMode: verify-full
      tls:
        caSecretRef: {name: pg-ca, namespace: crossplane-system, key: ca.crt}
      connectTimeout: 5
      credentials:
        source: Secret
        secretRef: {name: pg-admin, namespace: crossplane-system}
      policy: {allowedRoleAttributes: [createdb]}
"""

from __future__ import annotations

# spec_field returns an attrs field (its metadata feeds the CRD), not a shared default.
# ruff: noqa: RUF009
import typing
from typing import ClassVar, Literal

import attrs

from lifecycle.core.contract import ProviderConfig
from lifecycle.core.errors import CredentialsError
from lifecycle.core.kind import spec_field
from lifecycle.core.providerconfig import TLS, ProviderConfigSpec
from lifecycle.providers.postgres.policy import DEFAULT_EXTENSIONS
from lifecycle.providers.postgres.sslmodes import SSLMODES, SslMode

__all__ = ["SSLMODES", "ConnectionSecretKeys", "CredentialKeys", "PolicySpec",
           "PostgresProviderConfigSpec", "SslMode"]

#: A role attribute a policy may allow.
RoleAttribute = Literal["superUser", "createrole", "replication", "bypassRls", "createdb"]
#: A ``pg_settings.context`` a role's own setting may have.
SettingContext = Literal["user", "superuser", "backend", "superuser-backend"]
#: A key of the connection Secret a Role or Database writes.
StandardKey = Literal["host", "port", "user", "username", "password", "database", "uri"]

_KEY = r"^[-._a-zA-Z0-9]+$"


def _names(description: str) -> typing.Any:
    return spec_field(default=None, description=description, max_items=256)


@attrs.frozen(kw_only=True)
class PolicySpec:
    """What the objects using this ProviderConfig may ask of the server (every field
    optional; the defaults are the safe ones)."""

    allowedRoleAttributes: list[RoleAttribute] | None = _names(
        "Role attributes a Role may ask for (default: createdb only).")
    allowedMemberships: list[str] | None = _names(
        "Roles any namespace's Role may join with memberOf (default: none).")
    allowedSettingContexts: list[SettingContext] | None = _names(
        "The pg_settings contexts of the parameters a Role may set for itself "
        "(default: user).")
    allowedSettings: list[str] | None = _names(
        "Parameters a Role may set whatever their context (default: none).")
    crossNamespace: bool = spec_field(
        default=False, description="Whether objects may name roles, databases and schemas "
                                   "made from other namespaces (default: false).")
    sharedDatabases: list[str] | None = _names(
        "Databases every namespace may name in a Grant (default: none).")
    allowedExtensions: list[str] | None = _names(
        "Extensions an Extension may install; * allows every one but those that reach files, "
        "programs or other servers (default: " + ", ".join(sorted(DEFAULT_EXTENSIONS)) + ").")
    revokePublicOnDb: Literal["owned", "never"] = spec_field(
        default="owned", description="Whether a Grant's revokePublicOnDb may act on the "
                                     "namespace's own databases (owned) or never.")


@attrs.frozen(kw_only=True)
class CredentialKeys:
    """The names of the credentials' keys, when not the defaults."""

    username: str | None = spec_field(default=None, pattern=_KEY,
                                      description="The key of the admin's name "
                                                  "(default: username).")
    password: str | None = spec_field(default=None, pattern=_KEY,
                                      description="The key of the admin's password "
                                                  "(default: password).")
    ca: str | None = spec_field(default=None, pattern=_KEY,
                                description="The key of the CA bundle (default: ca.crt).")
    cert: str | None = spec_field(default=None, pattern=_KEY,
                                  description="The key of the client certificate "
                                              "(default: tls.crt).")
    key: str | None = spec_field(default=None, pattern=_KEY,
                                 description="The key of the client certificate's key "
                                             "(default: tls.key).")


@attrs.frozen(kw_only=True)
class ConnectionSecretKeys:
    """Extra keys of the connection Secrets, each a copy of a standard key."""

    Role: dict[str, StandardKey] | None = spec_field(
        default=None, description="Extra keys of a Role's connection Secret, as "
                                  "{newKey: standardKey}.")
    Database: dict[str, StandardKey] | None = spec_field(
        default=None, description="Extra keys of a Database's connection Secret, as "
                                  "{newKey: standardKey}.")


@attrs.frozen(kw_only=True)
class PostgresProviderConfigSpec(ProviderConfigSpec):
    """A PostgreSQL server, how the operator reaches it as an administrator, and what the
    objects using it may ask of it."""

    #: sslMode and its older spelling sslmode may not disagree.
    __schema_validations__: ClassVar[tuple[dict[str, str], ...]] = (
        {"rule": "!has(self.sslMode) || !has(self.sslmode) || self.sslMode == self.sslmode",
         "message": "sslMode and sslmode disagree; set sslMode only"},
    )

    host: str = spec_field(description="The server's host name or IP address.",
                           min_length=1, max_length=253)
    port: int = spec_field(default=5432, minimum=1, maximum=65535,
                           description="The server's TCP port (default: 5432).")
    database: str = spec_field(
        default="postgres", min_length=1, max_length=63,
        description="The database the operator connects to as the admin (default: postgres).")
    sslMode: SslMode | None = spec_field(
        default=None,
        description="libpq's sslmode: disable, allow, prefer (the default), require, "
                    "verify-ca or verify-full. verify-ca and verify-full check the server's "
                    "certificate against a CA bundle: tls.caSecretRef, or ca.crt in the "
                    "credentials.")
    sslmode: SslMode | None = spec_field(
        default=None, description="The older spelling of sslMode; set sslMode instead.")
    tls: TLS | None = spec_field(
        default=None, description="The CA bundle and client certificate, from Secrets.")
    connectTimeout: int = spec_field(default=5, minimum=1, maximum=300,
                                     description="Seconds a connection attempt may take "
                                                 "(default: 5).")
    allowSuperuser: bool = spec_field(
        default=False, description="Whether Roles may ask for superUser (default: false); "
                                   "policy.allowedRoleAttributes says the same, finer.")
    credentialKeys: CredentialKeys | None = spec_field(
        default=None, description="The names of the credentials' keys, when not the "
                                  "defaults (username, password, ca.crt, tls.crt, tls.key).")
    connectionSecretKeys: ConnectionSecretKeys | None = spec_field(
        default=None, description="Extra keys of the connection Secrets Roles and "
                                  "Databases write.")
    policy: PolicySpec | None = spec_field(
        default=None, description="What the objects using this ProviderConfig may ask of "
                                   "the server; without it, the safe defaults.")

    @classmethod
    def problem(cls, config: ProviderConfig) -> str | None:
        """What makes ``config`` unusable for PostgreSQL (a ``verify-full`` without a CA, a
        credentials key that is missing, a policy that does not parse), or None: the
        checks every connection makes
        (:meth:`~lifecycle.providers.postgres.config.ServerConfig.from_provider_config`),
        without connecting. The ProviderConfig's ``Valid`` condition shows it."""
        # config.py needs psycopg, which generating the CRD does not: imported when checked.
        from lifecycle.providers.postgres.config import ServerConfig

        try:
            ServerConfig.from_provider_config(config)
        except CredentialsError as exc:
            return exc.message
        return None
