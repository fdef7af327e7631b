"""How a ProviderConfig's credentials are read, rule by rule
(:func:`lifecycle.runtime.credentials.resolve_credentials`).

From a Secret (the default source), from the operator's ``LIFECYCLE_CREDENTIALS_*``
environment variables, or from the files of one directory under the credentials root;
then the TLS material ``spec.tls`` names. Every refusal is a ``CredentialsError`` whose
reason says whether the config is wrong (``ProviderConfigInvalid``) or what it names is
missing (``CredentialsMissing``), and whose message names the config and the field,
never a value.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lifecycle.core.errors import CredentialsError
from lifecycle.core.providerconfig import ENV_PREFIX, FILES_ROOT_ENV, TLS_KEYS
from lifecycle.runtime.credentials import MAX_FILE_BYTES, resolve_credentials
from lifecycle.sim.apiserver import EmbeddedAPI

INVALID, MISSING = "ProviderConfigInvalid", "CredentialsMissing"


@pytest.fixture
def api() -> Iterator[EmbeddedAPI]:
    embedded = EmbeddedAPI()
    yield embedded
    embedded.close()


def put(api: EmbeddedAPI, name: str, data: dict[str, str], namespace: str = "default") -> None:
    known = {n["metadata"]["name"] for n in api.list("v1", "Namespace")[0]}
    if namespace not in known:
        api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    api.create({"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": name, "namespace": namespace},
                "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}})


def refusal(call: Any) -> tuple[str, str]:
    """The reason and message ``call()`` is refused with."""
    with pytest.raises(CredentialsError) as refused:
        call()
    return refused.value.reason, str(refused.value)


# ------------------------------------------------------------------ Secret
def test_a_secret_source_is_the_default_and_its_namespace_defaults_to_default(
        api: EmbeddedAPI) -> None:
    put(api, "admin", {"username": "u", "password": "p"})
    put(api, "admin", {"username": "other"}, namespace="ops")
    spec = {"credentials": {"secretRef": {"name": "admin"}}}
    assert resolve_credentials(api, "pg", spec) == {"username": "u", "password": "p"}
    spec = {"credentials": {"source": "Secret",
                            "secretRef": {"name": "admin", "namespace": "ops"}}}
    assert resolve_credentials(api, "pg", spec) == {"username": "other"}


@pytest.mark.parametrize("ref", [None, {}, {"name": ""}, {"name": 5}])
def test_a_secret_source_without_a_secret_name_is_missing_credentials(
        api: EmbeddedAPI, ref: Any) -> None:
    spec = {"credentials": {} if ref is None else {"secretRef": ref}}
    assert refusal(lambda: resolve_credentials(api, "pg", spec)) == (
        MISSING, "provider config 'pg' has no credentials.secretRef")


def test_a_missing_credentials_secret_is_named_with_its_namespace(api: EmbeddedAPI) -> None:
    spec = {"credentials": {"secretRef": {"name": "absent"}}}
    assert refusal(lambda: resolve_credentials(api, "pg", spec)) == (
        MISSING, "credentials Secret default/absent of provider config 'pg' not found")


def test_an_unknown_source_is_an_invalid_config(api: EmbeddedAPI) -> None:
    spec = {"credentials": {"source": "Vault"}}
    assert refusal(lambda: resolve_credentials(api, "pg", spec)) == (
        INVALID, "provider config 'pg': credentials.source 'Vault' is not one of Secret, "
                 "Environment, Filesystem")


# ------------------------------------------------------------- Environment
def env(*pairs: tuple[Any, Any]) -> dict[str, Any]:
    return {"credentials": {"source": "Environment",
                            "env": {"variables": [{"key": k, "name": n} for k, n in pairs]}}}


@pytest.mark.parametrize("variables", [None, [], {"username": "x"}, "username"])
def test_environment_variables_must_be_a_list_of_pairs(api: EmbeddedAPI, variables: Any) -> None:
    spec = {"credentials": {"source": "Environment", "env": {"variables": variables}}}
    assert refusal(lambda: resolve_credentials(api, "pg", spec, environ={})) == (
        INVALID, "provider config 'pg': credentials.env.variables must list {key, name} pairs")


@pytest.mark.parametrize("key", ["a b", "", 5, None, "k" * 254])
def test_an_environment_key_must_be_a_secret_key_name(api: EmbeddedAPI, key: Any) -> None:
    variable = f"{ENV_PREFIX}PW"
    assert refusal(lambda: resolve_credentials(api, "pg", env((key, variable)),
                                               environ={variable: "pw"})) == (
        INVALID, "provider config 'pg': credentials.env.variables[].key must be a Secret "
                 "key name")


@pytest.mark.parametrize("variable", ["HOME", f"{ENV_PREFIX}lower", f"{ENV_PREFIX}", 7])
def test_only_variables_with_the_credentials_prefix_are_read(api: EmbeddedAPI,
                                                             variable: Any) -> None:
    assert refusal(lambda: resolve_credentials(api, "pg", env(("password", variable)),
                                               environ={"HOME": "/root"})) == (
        INVALID, f"provider config 'pg': credentials.env.variables[].name must start with "
                 f"{ENV_PREFIX} (A-Z, 0-9 and _ only): only variables put there for "
                 "credentials can be read")


@pytest.mark.parametrize("environ", [{}, {f"{ENV_PREFIX}PW": ""}])
def test_an_unset_or_empty_variable_is_missing_credentials(api: EmbeddedAPI,
                                                           environ: dict[str, str]) -> None:
    assert refusal(lambda: resolve_credentials(api, "pg", env(("password", f"{ENV_PREFIX}PW")),
                                               environ=environ)) == (
        MISSING, f"provider config 'pg': environment variable {ENV_PREFIX}PW (key 'password') "
                 "is not set in the operator")


def test_environment_credentials_come_from_the_operators_environment_by_default(
        api: EmbeddedAPI, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(f"{ENV_PREFIX}PW", "from-env")
    assert resolve_credentials(api, "pg", env(("password", f"{ENV_PREFIX}PW"))) == {
        "password": "from-env"}


# ---------------------------------------------------------------- Filesystem
def files(path: Any) -> dict[str, Any]:
    return {"credentials": {"source": "Filesystem", "fs": {"path": path}}}


@pytest.fixture
def root(tmp_path: Path) -> Path:
    made = tmp_path / "root"
    made.mkdir()
    return made


def read(api: EmbeddedAPI, root: Path | str, path: Any) -> dict[str, str]:
    return resolve_credentials(api, "pg", files(path), environ={FILES_ROOT_ENV: str(root)})


@pytest.mark.parametrize("path", [None, "relative/pg", "", 5])
def test_a_credentials_path_must_be_absolute(api: EmbeddedAPI, root: Path, path: Any) -> None:
    assert refusal(lambda: read(api, root, path)) == (
        INVALID, "provider config 'pg': credentials.fs.path must be an absolute path")


def test_a_path_with_a_parent_step_is_refused_even_when_it_ends_under_the_root(
        api: EmbeddedAPI, root: Path) -> None:
    (root / "pg").mkdir()
    (root / "pg" / "password").write_text("pw")
    assert read(api, root, str(root / "pg")) == {"password": "pw"}
    assert refusal(lambda: read(api, root, f"{root}/pg/../pg")) == (
        INVALID, f"provider config 'pg': credentials.fs.path must lie under {root} (links "
                 "resolved): only files put there for credentials can be read")


def test_a_root_of_slash_holds_every_absolute_directory(api: EmbeddedAPI, root: Path) -> None:
    (root / "password").write_text("pw")
    assert read(api, "/", str(root)) == {"password": "pw"}


def test_a_path_that_is_not_a_directory_is_missing_credentials(api: EmbeddedAPI,
                                                               root: Path) -> None:
    (root / "file").write_text("x")
    for path in (root / "absent", root / "file"):
        assert refusal(lambda: read(api, root, str(path))) == (  # noqa: B023
            MISSING, f"provider config 'pg': credentials.fs.path {path} is not a directory "
                     "of the operator")


def test_only_regular_files_with_key_names_inside_the_root_are_read(
        api: EmbeddedAPI, root: Path, tmp_path: Path) -> None:
    folder = root / "pg"
    folder.mkdir()
    (folder / "password").write_text("pw")
    (folder / "user.name-1").write_text("admin")
    (folder / ".hidden").write_text("no")  # a key name, but a dotfile (a volume's ..data)
    (folder / "a b").write_text("no")  # no key has this name
    (folder / "sub").mkdir()
    (tmp_path / "outside").write_text("not-yours")
    (folder / "stolen").symlink_to(tmp_path / "outside")
    (folder / "linked").symlink_to(folder / "password")  # a link inside the root is read
    assert read(api, root, str(folder)) == {"password": "pw", "user.name-1": "admin",
                                            "linked": "pw"}


def test_a_file_of_the_size_bound_is_read_and_a_larger_one_refused(api: EmbeddedAPI,
                                                                   root: Path) -> None:
    (root / "big").write_text("x" * MAX_FILE_BYTES)
    assert read(api, root, str(root)) == {"big": "x" * MAX_FILE_BYTES}
    (root / "big").write_text("x" * (MAX_FILE_BYTES + 1))
    assert refusal(lambda: read(api, root, str(root))) == (
        INVALID, f"provider config 'pg': credentials file 'big' is larger than "
                 f"{MAX_FILE_BYTES} bytes")


def test_an_unreadable_file_is_missing_credentials_named_by_its_error(api: EmbeddedAPI,
                                                                      root: Path) -> None:
    (root / "binary").write_bytes(b"\xff\xfe")
    assert refusal(lambda: read(api, root, str(root))) == (
        MISSING, "provider config 'pg': credentials file 'binary' cannot be read "
                 "(UnicodeDecodeError)")
    if os.geteuid() != 0:  # root reads a file whatever its mode
        (root / "binary").unlink()
        (root / "locked").write_text("x")
        (root / "locked").chmod(0)
        assert refusal(lambda: read(api, root, str(root)))[1].endswith("(PermissionError)")


def test_a_directory_without_a_credentials_file_is_missing_credentials(api: EmbeddedAPI,
                                                                       root: Path) -> None:
    (root / ".only-hidden").write_text("x")
    assert refusal(lambda: read(api, root, str(root))) == (
        MISSING, f"provider config 'pg': credentials.fs.path {root} holds no credentials file")


# ------------------------------------------------------------------------ TLS
def tls(**refs: Any) -> dict[str, Any]:
    return {"credentials": {"secretRef": {"name": "admin"}}, "tls": refs}


def test_tls_material_is_handed_over_under_its_own_keys(api: EmbeddedAPI) -> None:
    put(api, "admin", {"password": "p"})
    put(api, "ca", {"ca.crt": "CA-PEM"}, namespace="certs")
    put(api, "custom", {"root.pem": "ROOT-PEM"})
    put(api, "client", {"tls.crt": "CERT", "tls.key": "KEY"})
    found = resolve_credentials(api, "pg", tls(
        caSecretRef={"name": "ca", "namespace": "certs"}, clientCertSecretRef={"name": "client"}))
    assert found == {"password": "p", TLS_KEYS["ca"]: "CA-PEM", TLS_KEYS["cert"]: "CERT",
                     TLS_KEYS["key"]: "KEY"}
    found = resolve_credentials(api, "pg", tls(caSecretRef={"name": "custom", "key": "root.pem"}))
    assert found == {"password": "p", TLS_KEYS["ca"]: "ROOT-PEM"}


@pytest.mark.parametrize(("refs", "message"), [
    ({"caSecretRef": {"namespace": "certs"}}, "tls.caSecretRef names no Secret"),
    ({"caSecretRef": {"name": ""}}, "tls.caSecretRef names no Secret"),
    ({"caSecretRef": {"name": "absent"}}, "tls.caSecretRef: Secret default/absent not found"),
    ({"caSecretRef": {"name": "ca"}}, "tls.caSecretRef: the Secret has no key 'ca.crt'"),
    ({"caSecretRef": {"name": "ca", "key": "other"}},
     "tls.caSecretRef: the Secret has no key 'other'"),
    ({"clientCertSecretRef": {"name": "half"}},
     "tls.clientCertSecretRef: the Secret needs both tls.crt and tls.key"),
    ({"clientCertSecretRef": {"name": "absent", "namespace": "certs"}},
     "tls.clientCertSecretRef: Secret certs/absent not found"),
])
def test_missing_tls_material_names_the_field(api: EmbeddedAPI, refs: dict[str, Any],
                                              message: str) -> None:
    put(api, "admin", {"password": "p"})
    put(api, "ca", {"other.crt": "x"})
    put(api, "half", {"tls.crt": "CERT"})
    assert refusal(lambda: resolve_credentials(api, "pg", tls(**refs))) == (
        MISSING, f"provider config 'pg': {message}")
