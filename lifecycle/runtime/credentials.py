"""The credentials of a ProviderConfig, read from the source its ``credentials.source`` names.

:func:`resolve_credentials` reads them as :mod:`lifecycle.core.providerconfig` describes:
from a Secret (the default), from the operator's environment variables whose names
start with :data:`~lifecycle.core.providerconfig.ENV_PREFIX`, or from the files of one
directory under :data:`~lifecycle.core.providerconfig.FILES_ROOT`; then the TLS
material ``spec.tls`` names, under the keys of
:data:`~lifecycle.core.providerconfig.TLS_KEYS`. Every refusal is a
:class:`CredentialsError` naming the config and the field, never a value.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from lifecycle.core import objects
from lifecycle.core.errors import CredentialsError
from lifecycle.core.providerconfig import ENV_PREFIX, FILES_ROOT, FILES_ROOT_ENV, TLS_KEYS
from lifecycle.kube.cluster import Cluster
from lifecycle.kube.secrets import decode, read_secret

__all__ = ["MAX_FILE_BYTES", "credential_secrets", "resolve_credentials"]

#: The largest credentials file read (bytes).
MAX_FILE_BYTES = 1 << 20
_VARIABLE = re.compile(re.escape(ENV_PREFIX) + r"[A-Z0-9_]+")
_KEY = re.compile(r"[-._a-zA-Z0-9]{1,253}")


def resolve_credentials(api: Cluster, name: str, spec: Mapping[str, Any], *,
                        environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The credentials of the ProviderConfig ``name`` whose spec is ``spec``.

    ``environ`` is the operator's environment (default: ``os.environ``), where the
    Environment source reads and where :data:`FILES_ROOT_ENV` may move the Filesystem
    source's root.
    """
    env = os.environ if environ is None else environ
    block = objects.mapping(spec.get("credentials"))
    source = block.get("source") or "Secret"
    if source == "Secret":
        found = _from_secret(api, name, objects.mapping(block.get("secretRef")))
    elif source == "Environment":
        found = _from_environment(name, objects.mapping(block.get("env")), env)
    elif source == "Filesystem":
        root = env.get(FILES_ROOT_ENV) or FILES_ROOT
        found = _from_files(name, objects.mapping(block.get("fs")), root)
    else:
        raise _invalid(name, f"credentials.source {source!r} is not one of Secret, "
                             "Environment, Filesystem")
    found.update(_tls(api, name, objects.mapping(spec.get("tls"))))
    return found


def _invalid(name: str, problem: str) -> CredentialsError:
    return CredentialsError(f"provider config {name!r}: {problem}", reason="ProviderConfigInvalid")


def _missing(name: str, problem: str) -> CredentialsError:
    return CredentialsError(f"provider config {name!r}: {problem}", reason="CredentialsMissing")


def _secret(api: Cluster, name: str, ref: Mapping[str, Any], field: str) -> dict[str, str]:
    if not isinstance(ref.get("name"), str) or not ref["name"]:
        raise _missing(name, f"{field} names no Secret")
    namespace = str(ref.get("namespace") or "default")
    secret = read_secret(api, namespace, ref["name"])
    if secret is None:
        raise _missing(name, f"{field}: Secret {namespace}/{ref['name']} not found")
    return decode(secret)


def _from_secret(api: Cluster, name: str, ref: Mapping[str, Any]) -> dict[str, str]:
    if not isinstance(ref.get("name"), str) or not ref["name"]:
        raise CredentialsError(f"provider config {name!r} has no credentials.secretRef",
                               reason="CredentialsMissing")
    namespace = str(ref.get("namespace") or "default")
    secret = read_secret(api, namespace, ref["name"])
    if secret is None:
        raise CredentialsError(
            f"credentials Secret {namespace}/{ref['name']} of provider config {name!r} not "
            f"found", reason="CredentialsMissing")
    return decode(secret)


def _from_environment(name: str, block: Mapping[str, Any],
                      environ: Mapping[str, str]) -> dict[str, str]:
    variables = block.get("variables")
    if not isinstance(variables, list) or not variables:
        raise _invalid(name, "credentials.env.variables must list {key, name} pairs")
    found: dict[str, str] = {}
    for item in variables:
        item = objects.mapping(item)
        key, variable = item.get("key"), item.get("name")
        if not isinstance(key, str) or not _KEY.fullmatch(key):
            raise _invalid(name, "credentials.env.variables[].key must be a Secret key name")
        if not isinstance(variable, str) or not _VARIABLE.fullmatch(variable):
            raise _invalid(name, f"credentials.env.variables[].name must start with "
                                 f"{ENV_PREFIX} (A-Z, 0-9 and _ only): only variables put "
                                 f"there for credentials can be read")
        value = environ.get(variable)
        if not value:
            raise _missing(name, f"environment variable {variable} (key {key!r}) is not set "
                                 f"in the operator")
        found[key] = value
    return found


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _from_files(name: str, block: Mapping[str, Any], root: str) -> dict[str, str]:
    path = block.get("path")
    if not isinstance(path, str) or not path.startswith("/"):
        raise _invalid(name, "credentials.fs.path must be an absolute path")
    real_root = os.path.realpath(root)
    folder = os.path.realpath(path)
    if ".." in path.split("/") or not _inside(folder, real_root):
        raise _invalid(name, f"credentials.fs.path must lie under {root} (links resolved): "
                             f"only files put there for credentials can be read")
    if not os.path.isdir(folder):
        raise _missing(name, f"credentials.fs.path {path} is not a directory of the operator")
    found: dict[str, str] = {}
    for entry in sorted(os.listdir(folder)):
        if entry.startswith(".") or not _KEY.fullmatch(entry):
            continue  # a Secret volume's own ..data links, and names no key has
        target = os.path.realpath(os.path.join(folder, entry))
        if not _inside(target, real_root) or not os.path.isfile(target):
            continue
        if os.path.getsize(target) > MAX_FILE_BYTES:
            raise _invalid(name, f"credentials file {entry!r} is larger than "
                                 f"{MAX_FILE_BYTES} bytes")
        try:
            with open(target, encoding="utf-8") as handle:
                found[entry] = handle.read()
        except (OSError, UnicodeDecodeError) as exc:
            raise _missing(name, f"credentials file {entry!r} cannot be read "
                                 f"({type(exc).__name__})") from None
    if not found:
        raise _missing(name, f"credentials.fs.path {path} holds no credentials file")
    return found


def _tls(api: Cluster, name: str, tls: Mapping[str, Any]) -> dict[str, str]:
    found: dict[str, str] = {}
    ca = objects.mapping(tls.get("caSecretRef"))
    if ca:
        key = str(ca.get("key") or "ca.crt")
        value = _secret(api, name, ca, "tls.caSecretRef").get(key)
        if not value:
            raise _missing(name, f"tls.caSecretRef: the Secret has no key {key!r}")
        found[TLS_KEYS["ca"]] = value
    client = objects.mapping(tls.get("clientCertSecretRef"))
    if client:
        data = _secret(api, name, client, "tls.clientCertSecretRef")
        if not data.get("tls.crt") or not data.get("tls.key"):
            raise _missing(name, "tls.clientCertSecretRef: the Secret needs both tls.crt "
                                 "and tls.key")
        found[TLS_KEYS["cert"]], found[TLS_KEYS["key"]] = data["tls.crt"], data["tls.key"]
    return found


def credential_secrets(config: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``(namespace, name)`` of every Secret a ProviderConfig names: its credentials
    (``credentials.secretRef`` when the source is a Secret) and its TLS material."""
    spec = objects.spec(config)
    block = objects.mapping(spec.get("credentials"))
    tls = objects.mapping(spec.get("tls"))
    refs = [objects.mapping(block.get("secretRef")) if (block.get("source") or "Secret")
            == "Secret" else {}, objects.mapping(tls.get("caSecretRef")),
            objects.mapping(tls.get("clientCertSecretRef"))]
    return [(str(ref.get("namespace") or "default"), ref["name"]) for ref in refs
            if isinstance(ref.get("name"), str) and ref["name"]]
