"""The rules of a ProviderConfig's credentials that the source-by-source tests leave open
(:mod:`lifecycle.runtime.credentials`).

- :func:`~lifecycle.runtime.credentials.credential_secrets` names every Secret a config
  names, as ``(namespace, name)`` in the order credentials, CA, client certificate; the
  namespace defaults to ``default``; ``credentials.secretRef`` counts only when the source
  is a Secret (the default source); a reference without a non-empty string name names
  nothing; a config without a mapping spec names nothing.
- The Filesystem source's root is :data:`~lifecycle.core.providerconfig.FILES_ROOT` unless
  the operator's :data:`~lifecycle.core.providerconfig.FILES_ROOT_ENV` names another (an
  empty value does not).
- A directory beside the root whose name starts with the root's name is not under it.
- A credentials file is read as UTF-8 whatever the operator's locale.
"""

from __future__ import annotations

import locale
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lifecycle.core.errors import CredentialsError
from lifecycle.core.providerconfig import FILES_ROOT, FILES_ROOT_ENV
from lifecycle.runtime.credentials import credential_secrets, resolve_credentials
from lifecycle.sim.apiserver import EmbeddedAPI

INVALID, MISSING = "ProviderConfigInvalid", "CredentialsMissing"


@pytest.fixture
def api() -> Iterator[EmbeddedAPI]:
    embedded = EmbeddedAPI()
    yield embedded
    embedded.close()


def refusal(call: Any) -> tuple[str, str]:
    """The reason and message ``call()`` is refused with."""
    with pytest.raises(CredentialsError) as refused:
        call()
    return refused.value.reason, str(refused.value)


def files(path: Any) -> dict[str, Any]:
    return {"credentials": {"source": "Filesystem", "fs": {"path": path}}}


# ------------------------------------------------------------ credential_secrets
def test_every_secret_a_config_names_is_listed_in_order_with_its_namespace() -> None:
    config = {"spec": {"credentials": {"secretRef": {"name": "admin"}},
                       "tls": {"caSecretRef": {"name": "ca", "namespace": "certs", "key": "x"},
                               "clientCertSecretRef": {"name": "client", "namespace": ""}}}}
    assert credential_secrets(config) == [("default", "admin"), ("certs", "ca"),
                                          ("default", "client")]
    config["spec"]["credentials"] = {"source": "Secret",
                                     "secretRef": {"name": "admin", "namespace": "ops"}}
    assert credential_secrets(config)[0] == ("ops", "admin")


@pytest.mark.parametrize("source", ["Environment", "Filesystem"])
def test_the_secret_ref_of_another_source_names_no_secret(source: str) -> None:
    config = {"spec": {"credentials": {"source": source, "secretRef": {"name": "admin"}},
                       "tls": {"caSecretRef": {"name": "ca"}}}}
    assert credential_secrets(config) == [("default", "ca")]


@pytest.mark.parametrize("ref", [None, {}, {"name": ""}, {"name": 5}, {"namespace": "ops"},
                                 "admin"])
def test_a_reference_without_a_name_names_no_secret(ref: Any) -> None:
    config = {"spec": {"credentials": {"secretRef": ref},
                       "tls": {"caSecretRef": ref, "clientCertSecretRef": ref}}}
    assert credential_secrets(config) == []


@pytest.mark.parametrize("config", [{}, {"spec": None}, {"spec": "x"},
                                    {"spec": {"credentials": "x", "tls": 5}}])
def test_a_config_without_a_spec_names_no_secret(config: Any) -> None:
    assert credential_secrets(config) == []


# ------------------------------------------------------------------ Filesystem
@pytest.mark.parametrize("environ", [{}, {FILES_ROOT_ENV: ""}])
def test_the_files_root_is_the_default_unless_the_operator_names_another(
        api: EmbeddedAPI, tmp_path: Path, environ: dict[str, str]) -> None:
    (tmp_path / "password").write_text("pw")
    assert refusal(lambda: resolve_credentials(api, "pg", files(str(tmp_path)),
                                               environ=environ)) == (
        INVALID, f"provider config 'pg': credentials.fs.path must lie under {FILES_ROOT} "
                 "(links resolved): only files put there for credentials can be read")
    assert resolve_credentials(api, "pg", files(str(tmp_path)),
                               environ={FILES_ROOT_ENV: str(tmp_path)}) == {"password": "pw"}


def test_a_directory_beside_the_root_sharing_its_prefix_is_not_under_it(
        api: EmbeddedAPI, tmp_path: Path) -> None:
    root, beside = tmp_path / "root", tmp_path / "rootless"
    root.mkdir()
    beside.mkdir()
    (beside / "password").write_text("pw")
    (root / "password").write_text("mine")
    (root / "link").symlink_to(beside / "password")  # a link out, to the sibling
    for given in (str(root), f"{root}/"):
        environ = {FILES_ROOT_ENV: given}
        assert refusal(lambda: resolve_credentials(
            api, "pg", files(str(beside)), environ=environ)) == (  # noqa: B023
            INVALID, f"provider config 'pg': credentials.fs.path must lie under {given} "
                     "(links resolved): only files put there for credentials can be read")
        assert resolve_credentials(api, "pg", files(str(root)), environ=environ) == {
            "password": "mine"}


def test_a_credentials_file_is_read_as_utf8_whatever_the_operators_locale(
        api: EmbeddedAPI, tmp_path: Path) -> None:
    (tmp_path / "password").write_text("pässwörd-€", encoding="utf-8")
    before = locale.setlocale(locale.LC_CTYPE)
    locale.setlocale(locale.LC_CTYPE, "C")  # an ASCII locale: its own decoding would refuse
    try:
        found = resolve_credentials(api, "pg", files(str(tmp_path)),
                                    environ={FILES_ROOT_ENV: str(tmp_path)})
    finally:
        locale.setlocale(locale.LC_CTYPE, before)
    assert found == {"password": "pässwörd-€"}
