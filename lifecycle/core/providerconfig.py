"""The engine's part of a ProviderConfig spec: where the credentials come from, and TLS.

A provider declares the spec of its ProviderConfig as an attrs class (``Kind.
provider_config_spec``), the way a kind declares its parameters: ``lifecycle crds``
generates the ProviderConfig CRD from it (descriptions, enums, bounds, patterns, CEL
rules), so the API server refuses a bad config with a 422 naming the field. The class
includes :class:`Credentials` as its ``credentials`` field (subclass
:class:`ProviderConfigSpec`) and, when the provider talks TLS, :class:`TLS` as ``tls``.

``credentials.source`` chooses where the engine reads the credentials from:

* ``Secret`` (the default): the Secret ``credentials.secretRef`` names;
* ``Environment``: variables of the operator's environment, one per credentials key
  (``credentials.env.variables``: ``[{key: username, name: LIFECYCLE_CREDENTIALS_PG}]``).
  Only variables whose names start with
  :data:`ENV_PREFIX` can be named (the schema's pattern, and the engine again when it
  reads them), so a config can never reach the operator's own settings or keys;
* ``Filesystem``: the files of one directory of the operator's file system (as a Secret
  volume mounts them: one file per key), ``credentials.fs.path``, which must lie under
  :data:`FILES_ROOT` once every symbolic link is resolved.

A ProviderConfig is cluster-scoped: only whoever may write cluster-scoped objects (the
platform administrator) chooses a source, a Secret of any namespace, a variable or a
directory. A namespaced object chooses only *which* ProviderConfig it uses
(``spec.providerConfigRef.name``), never credentials.
"""

from __future__ import annotations

# spec_field returns an attrs field (its metadata feeds the CRD), not a shared default.
# ruff: noqa: RUF009
from typing import Literal

import attrs

from lifecycle.core.kind import spec_field

__all__ = [
    "CREDENTIAL_SOURCES",
    "ENV_PREFIX",
    "FILES_ROOT",
    "FILES_ROOT_ENV",
    "TLS",
    "TLS_KEYS",
    "Credentials",
    "EnvironmentCredentials",
    "EnvironmentVariable",
    "FilesystemCredentials",
    "ProviderConfigSpec",
    "SecretKeySelector",
    "SecretReference",
]

#: The values of ``credentials.source``.
CREDENTIAL_SOURCES = ("Secret", "Environment", "Filesystem")
#: The prefix of every environment variable a ProviderConfig may read.
ENV_PREFIX = "LIFECYCLE_CREDENTIALS_"
#: The directory under which a ProviderConfig's credential files must lie (the operator's
#: environment variable :data:`FILES_ROOT_ENV` moves it).
FILES_ROOT = "/var/run/lifecycle/credentials"
#: The operator's environment variable naming another :data:`FILES_ROOT`.
FILES_ROOT_ENV = "LIFECYCLE_CREDENTIAL_FILES_ROOT"
#: The keys under which the engine hands the TLS material of ``spec.tls`` to the provider,
#: beside the credentials' own keys (a colon never appears in a Secret's key, so these
#: cannot collide with one).
TLS_KEYS = {"ca": "tls:ca", "cert": "tls:cert", "key": "tls:key"}

_NAME = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"
_KEY = r"^[-._a-zA-Z0-9]+$"


@attrs.frozen(kw_only=True)
class SecretReference:
    """A Secret, by namespace and name."""

    name: str = spec_field(description="The Secret's name.", min_length=1, max_length=253,
                           pattern=_NAME)
    namespace: str = spec_field(
        default="default", min_length=1, max_length=63, pattern=_NAME,
        description="The Secret's namespace (default: default).")


@attrs.frozen(kw_only=True)
class SecretKeySelector:
    """One key of a Secret."""

    name: str = spec_field(description="The Secret's name.", min_length=1, max_length=253,
                           pattern=_NAME)
    namespace: str = spec_field(
        default="default", min_length=1, max_length=63, pattern=_NAME,
        description="The Secret's namespace (default: default).")
    key: str = spec_field(default="ca.crt", min_length=1, max_length=253, pattern=_KEY,
                          description="The key of the Secret holding the value "
                                      "(default: ca.crt).")


@attrs.frozen(kw_only=True)
class EnvironmentVariable:
    """One credentials key and the environment variable holding its value."""

    key: str = spec_field(description="The credentials key (as a Secret would name it).",
                          min_length=1, max_length=253, pattern=_KEY)
    name: str = spec_field(
        description=f"The environment variable of the operator holding the value; its name "
                    f"starts with {ENV_PREFIX}.",
        min_length=len(ENV_PREFIX) + 1, max_length=128, pattern=f"^{ENV_PREFIX}[A-Z0-9_]+$")


@attrs.frozen(kw_only=True)
class EnvironmentCredentials:
    """Credentials from the operator's environment variables."""

    variables: list[EnvironmentVariable] = spec_field(
        description="The environment variable holding each credentials key.",
        min_items=1, max_items=16)


@attrs.frozen(kw_only=True)
class FilesystemCredentials:
    """Credentials from files of the operator's file system."""

    path: str = spec_field(
        description=f"A directory holding one file per credentials key (as a mounted "
                    f"Secret volume does), under {FILES_ROOT}.",
        min_length=2, max_length=1024, pattern=r"^/",
        validations=[{"rule": "!self.contains('/../') && !self.endsWith('/..')",
                      "message": "the path has no .. component"}])


@attrs.frozen(kw_only=True)
class Credentials:
    """Where the engine reads the provider's credentials from."""

    source: Literal["Secret", "Environment", "Filesystem"] = spec_field(
        default="Secret",
        description="Where the credentials come from: Secret (secretRef, the default), "
                    "Environment (env: variables of the operator) or Filesystem (fs: a "
                    "directory of the operator's file system).")
    secretRef: SecretReference | None = spec_field(
        default=None, description="The Secret holding the credentials (source Secret).")
    env: EnvironmentCredentials | None = spec_field(
        default=None, description="The environment variables holding the credentials "
                                  "(source Environment).")
    fs: FilesystemCredentials | None = spec_field(
        default=None, description="The directory holding the credentials (source "
                                  "Filesystem).")


#: The CEL rules of ``credentials``: the block of the chosen source is there.
CREDENTIALS_RULES = (
    {"rule": "(has(self.source) && self.source != 'Secret') || has(self.secretRef)",
     "message": "source Secret needs secretRef"},
    {"rule": "!has(self.source) || self.source != 'Environment' || has(self.env)",
     "message": "source Environment needs env"},
    {"rule": "!has(self.source) || self.source != 'Filesystem' || has(self.fs)",
     "message": "source Filesystem needs fs"},
)


@attrs.frozen(kw_only=True)
class TLS:
    """TLS material the provider presents or checks, from Secrets (never inline)."""

    caSecretRef: SecretKeySelector | None = spec_field(
        default=None, description="The Secret key holding the CA bundle the server's "
                                  "certificate is checked against (PEM).")
    clientCertSecretRef: SecretReference | None = spec_field(
        default=None, description="A kubernetes.io/tls Secret holding the client "
                                  "certificate (tls.crt) and its key (tls.key).")


@attrs.frozen(kw_only=True)
class ProviderConfigSpec:
    """The spec of a ProviderConfig: at least where its credentials come from."""

    credentials: Credentials = spec_field(
        description="Where the credentials come from (credentials.source).",
        validations=CREDENTIALS_RULES)
