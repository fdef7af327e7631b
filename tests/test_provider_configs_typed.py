"""Typed ProviderConfigs: the CRD generated from a provider's declaration, refused bad
configs on the embedded API and the real server, TLS material and credentials read from
Secrets, the environment or files by the documented rules, and what ``lifecycle serve``
installs for the kinds it runs."""

from __future__ import annotations

import base64
import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
import yaml
from envtest_helpers import kubectl, kubectl_kubeconfig, wait_established
from serve_helpers import Serve

from lifecycle.core.errors import CredentialsError
from lifecycle.core.kind import PROVIDER_CONFIG_API, PROVIDER_CONFIG_KIND
from lifecycle.core.providerconfig import ENV_PREFIX, FILES_ROOT_ENV, TLS_KEYS
from lifecycle.kube.errors import Invalid
from lifecycle.machines.database import DatabaseInstance
from lifecycle.runtime.credentials import resolve_credentials
from lifecycle.runtime.reads import provider_config
from lifecycle.schema.crds import (
    SchemaError,
    check_crd,
    crd,
    crds,
    default_config_fits,
    provider_config_crd,
    provider_config_spec_schema,
)
from lifecycle.sim.apiserver import EmbeddedAPI
from lifecycle.sim.embedded import register_kinds

pytest.importorskip("psycopg")

from lifecycle.machines.postgres import Database, Role
from lifecycle.providers.postgres.config import ServerConfig
from lifecycle.providers.postgres.policy import read_policy
from lifecycle.providers.postgres.providerconfig import (
    PolicySpec,
    PostgresProviderConfigSpec,
)

PEM = "-----BEGIN CERTIFICATE-----\nMIIBexample\n-----END CERTIFICATE-----\n"


def openapi(doc: dict[str, Any]) -> dict[str, Any]:
    """The served version's schema of a CRD document."""
    return doc["spec"]["versions"][0]["schema"]["openAPIV3Schema"]  # type: ignore[no-any-return]


def pg_config_crd() -> dict[str, Any]:
    """The ProviderConfig CRD that the PostgreSQL kinds get."""
    docs = [d for d in crds([Role, Database]) if d["spec"]["names"]["kind"] == "ProviderConfig"]
    assert len(docs) == 1
    return docs[0]


def secret(name: str, data: dict[str, str], namespace: str = "default") -> dict[str, Any]:
    """A Secret manifest holding ``data``."""
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name,
                                                               "namespace": namespace},
            "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}}


def config(name: str = "pg", **spec: Any) -> dict[str, Any]:
    """A PostgreSQL ProviderConfig manifest: host ``db`` and a credentials Secret, and
    ``spec`` merged in."""
    return {"apiVersion": PROVIDER_CONFIG_API, "kind": PROVIDER_CONFIG_KIND,
            "metadata": {"name": name},
            "spec": {"host": "db", "credentials": {"secretRef": {"name": "pg-admin"}},
                     **spec}}


@pytest.fixture
def api() -> Iterator[EmbeddedAPI]:
    """An embedded API serving the PostgreSQL kinds and their ProviderConfig CRD."""
    embedded = EmbeddedAPI()
    register_kinds(embedded, [Role, Database])
    embedded.create(secret("pg-admin", {"username": "admin", "password": "s3cret-pw"}))
    yield embedded
    embedded.close()


# ------------------------------------------------------------- the generated CRD
def test_the_postgres_providerconfig_crd_comes_from_its_declaration() -> None:
    doc = pg_config_crd()
    assert check_crd(doc) == []
    assert doc["spec"]["scope"] == "Cluster"
    spec = openapi(doc)["properties"]["spec"]
    assert "x-kubernetes-preserve-unknown-fields" not in spec  # an unknown field is refused
    assert set(spec["required"]) == {"credentials", "host"}
    props = spec["properties"]
    assert set(props) == {f.alias or f.name for f in attrs.fields(PostgresProviderConfigSpec)}
    assert props["sslMode"]["enum"] == ["disable", "allow", "prefer", "require", "verify-ca",
                                        "verify-full"]
    assert (props["port"]["minimum"], props["port"]["maximum"]) == (1, 65535)
    assert props["credentials"]["properties"]["source"]["enum"] == [
        "Secret", "Environment", "Filesystem"]
    assert props["credentials"]["properties"]["source"]["default"] == "Secret"
    assert "caSecretRef" in props["tls"]["properties"]
    # the policy is part of the declaration, with the fields read_policy reads
    assert set(props["policy"]["properties"]) == {f.name for f in attrs.fields(PolicySpec)}
    assert props["policy"]["properties"]["allowedRoleAttributes"]["items"]["enum"]


def test_the_policy_declaration_and_its_reader_agree_on_the_fields() -> None:
    every = {f.name: [] for f in attrs.fields(PolicySpec)}
    every.update(crossNamespace=False, revokePublicOnDb="owned")
    read_policy(every, allow_superuser=False, invalid=ValueError)  # no unknown field
    with pytest.raises(ValueError, match="unknown field"):
        read_policy({**every, "extra": 1}, allow_superuser=False, invalid=ValueError)


def test_kinds_of_two_providers_sharing_one_providerconfig_kind_merge() -> None:
    spec = provider_config_spec_schema([PostgresProviderConfigSpec, None])
    assert spec["x-kubernetes-preserve-unknown-fields"] is True  # the undeclared one's fields
    assert spec["required"] == ["credentials"]  # host only where every spec needs it
    assert "host" in spec["properties"]
    assert default_config_fits([Role, DatabaseInstance], PROVIDER_CONFIG_API)
    assert not default_config_fits([Role], PROVIDER_CONFIG_API)
    assert default_config_fits([DatabaseInstance], PROVIDER_CONFIG_API)

    @attrs.frozen(kw_only=True)
    class Other(PostgresProviderConfigSpec):
        """A spec declaring port differently."""

        port: str = "5432"

    with pytest.raises(SchemaError, match=r"spec\.port is declared differently"):
        provider_config_spec_schema([PostgresProviderConfigSpec, Other])


def test_an_undeclared_providerconfig_keeps_its_fields_and_types_its_credentials() -> None:
    spec = openapi(provider_config_crd())["properties"]["spec"]
    assert spec["x-kubernetes-preserve-unknown-fields"] is True
    assert set(spec["properties"]) == {"credentials"}


def test_namespaced_objects_choose_a_providerconfig_by_name_only() -> None:
    """A tenant's object names which ProviderConfig; never a namespace, Secret or source."""
    for kind in (Role, Database, DatabaseInstance):
        spec = openapi(crd(kind))["properties"]["spec"]
        assert set(spec["properties"]["providerConfigRef"]["properties"]) == {"name"}
        assert "credentials" not in spec["properties"]["forProvider"].get("properties", {})


# --------------------------------------------------------- the embedded API refuses
@pytest.mark.parametrize(("spec", "field"), [
    ({"sslMode": "sometimes"}, "spec.sslMode"),
    ({"port": 70000}, "spec.port"),
    ({"host": ""}, "spec.host"),
    ({"connectTimeout": 0}, "spec.connectTimeout"),
    ({"sslMode": "require", "sslmode": "disable"}, "sslMode and sslmode disagree"),
    ({"credentials": {"source": "Vault"}}, "spec.credentials.source"),
    ({"credentials": {"source": "Secret"}}, "source Secret needs secretRef"),
    ({"credentials": {"source": "Environment"}}, "source Environment needs env"),
    ({"credentials": {"source": "Environment", "env": {"variables": [
        {"key": "password", "name": "LIFECYCLE_INTENT_KEY_X"}]}}},
     "spec.credentials.env.variables[0].name"),
    ({"credentials": {"source": "Filesystem", "fs": {"path": "/var/run/x/../../etc"}}},
     "the path has no .. component"),
    ({"policy": {"allowedRoleAttributes": ["superuser"]}},
     "spec.policy.allowedRoleAttributes[0]"),
    ({"policy": {"revokePublicOnDb": "always"}}, "spec.policy.revokePublicOnDb"),
    ({"tls": {"caSecretRef": {"name": "Bad_Name"}}}, "spec.tls.caSecretRef.name"),
])
def test_the_embedded_api_refuses_a_bad_providerconfig(api: EmbeddedAPI, spec: dict[str, Any],
                                                       field: str) -> None:
    with pytest.raises(Invalid) as refused:
        api.create(config(**spec))
    assert field in str(refused.value)


def test_the_embedded_api_accepts_a_good_one_and_defaults_it(api: EmbeddedAPI) -> None:
    made = api.create(config(sslMode="verify-full", tls={"caSecretRef": {"name": "pg-ca"}},
                             policy={"allowedRoleAttributes": ["createdb"]}))
    spec = made["spec"]
    assert (spec["port"], spec["database"], spec["connectTimeout"]) == (5432, "postgres", 5)
    assert spec["credentials"]["source"] == "Secret"
    assert spec["tls"]["caSecretRef"] == {"name": "pg-ca", "namespace": "default",
                                          "key": "ca.crt"}
    old = api.create(config("old", sslmode="require"))  # the older spelling stays valid
    assert old["spec"]["sslmode"] == "require"


# ------------------------------------------------------------- TLS from Secrets
def test_verify_full_with_a_ca_secret_reaches_the_connection_parameters(
        api: EmbeddedAPI) -> None:
    api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "db-certs"}})
    api.create(secret("pg-ca", {"ca.crt": PEM}, namespace="db-certs"))
    api.create(secret("pg-client", {"tls.crt": PEM, "tls.key": "KEY-PEM"}))
    api.create(config(sslMode="verify-full", tls={
        "caSecretRef": {"name": "pg-ca", "namespace": "db-certs"},
        "clientCertSecretRef": {"name": "pg-client"}}))
    resolved = provider_config(api, "pg")
    assert resolved.credentials[TLS_KEYS["ca"]] == PEM
    server = ServerConfig.from_provider_config(resolved)
    assert (server.sslmode, server.ca, server.cert, server.key) == (
        "verify-full", PEM, PEM, "KEY-PEM")
    assert "sslmode=verify-full" in server.uri("u", None, "postgres")
    with server.tls_files() as files:
        assert set(files) == {"sslrootcert", "sslcert", "sslkey"}
        assert Path(files["sslrootcert"]).read_text() == PEM
        assert oct(os.stat(files["sslkey"]).st_mode & 0o777) == "0o600"
    assert not Path(files["sslrootcert"]).exists()  # removed once connected


def test_verify_full_without_a_ca_is_a_clear_config_error(api: EmbeddedAPI) -> None:
    api.create(config(sslMode="verify-ca"))
    with pytest.raises(CredentialsError) as refused:
        ServerConfig.from_provider_config(provider_config(api, "pg"))
    assert refused.value.reason == "ProviderConfigInvalid"
    assert "tls.caSecretRef" in str(refused.value) and "s3cret-pw" not in str(refused.value)


def test_a_missing_ca_secret_or_key_names_the_field(api: EmbeddedAPI) -> None:
    api.create(config(tls={"caSecretRef": {"name": "absent"}}))
    with pytest.raises(CredentialsError, match=r"tls\.caSecretRef: Secret default/absent"):
        provider_config(api, "pg")
    api.create(secret("no-key", {"other": "x"}))
    api.create(config("pg2", tls={"caSecretRef": {"name": "no-key"}}))
    with pytest.raises(CredentialsError, match=r"has no key 'ca\.crt'"):
        provider_config(api, "pg2")


def test_sslmode_spellings(api: EmbeddedAPI) -> None:
    def read(**spec: Any) -> ServerConfig:
        return ServerConfig.from_provider_config(attrs.evolve(
            provider_config(api, "pg"), spec={"host": "db", **spec}))

    api.create(config())
    assert read().sslmode == "prefer"
    assert read(sslMode="require").sslmode == "require"
    assert read(sslmode="disable").sslmode == "disable"
    with pytest.raises(CredentialsError, match="disagree"):  # stored before the schema
        read(sslMode="require", sslmode="disable")


# ---------------------------------------------------- credentials from elsewhere
def spec_with(credentials: dict[str, Any]) -> dict[str, Any]:
    """A ProviderConfig spec whose credentials block is ``credentials``."""
    return {"host": "db", "credentials": credentials}


def env_source(*pairs: tuple[str, str]) -> dict[str, Any]:
    """``credentials`` reading ``key`` from variable ``name`` for each pair."""
    return {"source": "Environment",
            "env": {"variables": [{"key": k, "name": n} for k, n in pairs]}}


def test_environment_credentials_only_from_the_credentials_prefix(api: EmbeddedAPI) -> None:
    environ = {f"{ENV_PREFIX}PG_USER": "admin", f"{ENV_PREFIX}PG_PASSWORD": "env-pw",
               "LIFECYCLE_INTENT_KEY": "operator-key", "HOME": "/root"}
    found = resolve_credentials(api, "pg", spec_with(env_source(
        ("username", f"{ENV_PREFIX}PG_USER"), ("password", f"{ENV_PREFIX}PG_PASSWORD"))),
        environ=environ)
    assert found == {"username": "admin", "password": "env-pw"}
    for variable in ("LIFECYCLE_INTENT_KEY", "HOME", f"{ENV_PREFIX}x;rm"):
        with pytest.raises(CredentialsError) as refused:
            resolve_credentials(api, "pg", spec_with(env_source(("password", variable))),
                                environ=environ)
        assert refused.value.reason == "ProviderConfigInvalid"
        assert "operator-key" not in str(refused.value)
    with pytest.raises(CredentialsError) as unset:
        resolve_credentials(api, "pg", spec_with(env_source(
            ("password", f"{ENV_PREFIX}UNSET"))), environ=environ)
    assert unset.value.reason == "CredentialsMissing"
    assert f"{ENV_PREFIX}UNSET" in str(unset.value)


def test_file_credentials_only_under_the_root(api: EmbeddedAPI, tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "pg" / "..2026_data").mkdir(parents=True)
    outside.mkdir()
    (root / "pg" / "..2026_data" / "username").write_text("admin")
    (root / "pg" / "username").symlink_to(root / "pg" / "..2026_data" / "username")
    (root / "pg" / "password").write_text("file-pw")
    (outside / "password").write_text("not-yours")
    (root / "pg" / "stolen").symlink_to(outside / "password")  # a link out is not followed
    (root / "escape").symlink_to(outside, target_is_directory=True)
    environ = {FILES_ROOT_ENV: str(root)}

    def read(path: Path | str) -> dict[str, str]:
        return resolve_credentials(api, "pg", spec_with(
            {"source": "Filesystem", "fs": {"path": str(path)}}), environ=environ)

    assert read(root / "pg") == {"username": "admin", "password": "file-pw"}
    for path in (outside, root / "escape", f"{root}/pg/../../outside", "/etc"):
        with pytest.raises(CredentialsError) as refused:
            read(path)
        assert refused.value.reason == "ProviderConfigInvalid", path
        assert "not-yours" not in str(refused.value)
    with pytest.raises(CredentialsError) as missing:
        read(root / "absent")
    assert missing.value.reason == "CredentialsMissing"
    # without the operator's setting, the root is the documented default, not the tmp dir
    with pytest.raises(CredentialsError, match="/var/run/lifecycle/credentials"):
        resolve_credentials(api, "pg", spec_with(
            {"source": "Filesystem", "fs": {"path": str(root / "pg")}}), environ={})


def test_a_config_from_the_environment_reaches_the_provider(api: EmbeddedAPI) -> None:
    api.create(config(credentials=env_source(("username", f"{ENV_PREFIX}U"),
                                             ("password", f"{ENV_PREFIX}P"))))
    stored = api.get(PROVIDER_CONFIG_API, PROVIDER_CONFIG_KIND, None, "pg")
    found = resolve_credentials(api, "pg", stored["spec"],
                                environ={f"{ENV_PREFIX}U": "admin", f"{ENV_PREFIX}P": "pw"})
    assert found == {"username": "admin", "password": "pw"}


# ------------------------------------------------------- both servers, through kubectl
@pytest.fixture(params=["embedded", "envtest"])
def kubeconfig(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Path]:
    """A kubeconfig for each server in turn: the embedded API, then the real one."""
    yield from kubectl_kubeconfig(request, tmp_path)


def test_both_servers_refuse_a_bad_postgres_providerconfig(kubeconfig: Path) -> None:
    # A group of its own, so the shared real cluster's lifecycle.dev CRD is left alone.
    group = f"pc{uuid.uuid4().hex[:6]}.example.org"
    doc = provider_config_crd(f"{group}/v1alpha1", [PostgresProviderConfigSpec])
    installed = kubectl(kubeconfig, "apply", "-f", "-", stdin=yaml.safe_dump(doc))
    assert installed.returncode == 0, installed.stderr
    wait_established(kubeconfig, f"providerconfigs.{group}")

    def apply(**spec: Any) -> subprocess.CompletedProcess:
        body = {**config(f"c{uuid.uuid4().hex[:6]}", **spec), "apiVersion": f"{group}/v1alpha1"}
        return kubectl(kubeconfig, "apply", "-f", "-", stdin=yaml.safe_dump(body))

    good = apply(sslMode="verify-full", tls={"caSecretRef": {"name": "pg-ca"}})
    assert good.returncode == 0, good.stderr
    for spec, field in (
        ({"sslMode": "required"}, "spec.sslMode"),
        ({"port": 0}, "spec.port"),
        ({"sslMode": "require", "sslmode": "disable"}, "sslMode and sslmode disagree"),
        ({"credentials": {"source": "Environment", "env": {"variables": [
            {"key": "password", "name": "HOME"}]}}}, "spec.credentials.env.variables[0].name"),
        ({"credentials": {"source": "Filesystem"}}, "source Filesystem needs fs"),
        ({"hots": "db"}, "hots"),  # an unknown field: kubectl's strict validation
    ):
        refused = apply(**spec)
        assert refused.returncode != 0, spec
        assert field in refused.stderr, refused.stderr
    explained = kubectl(kubeconfig, "explain", f"providerconfigs.{group}.spec.sslMode")
    assert explained.returncode == 0, explained.stderr
    assert "verify-full" in explained.stdout
    kubectl(kubeconfig, "delete", "crd", f"providerconfigs.{group}", "--wait=false")


# ------------------------------------------------------------------ lifecycle serve
def test_serve_installs_the_providerconfig_of_the_kinds_it_runs(tmp_path: Path) -> None:
    with Serve(tmp_path / "pg", operator=False, extra_args=["--kinds", "Role"]) as server:
        spec = server.kubectl("get", "crd", "providerconfigs.lifecycle.dev",
                              "-o", "json").json()
        schema = spec["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
        assert "host" in schema["required"]  # typed by the PostgreSQL declaration alone
        assert server.kubectl("get", "providerconfigs", "-o", "name").stdout.strip() == ""
        crd_names = server.kubectl("get", "crd", "-o", "name").stdout.split()
        assert "customresourcedefinition.apiextensions.k8s.io/databaseinstances.db.lifecycle.dev" \
            not in crd_names
    with Serve(tmp_path / "sim", operator=False) as server:
        spec = server.kubectl("get", "crd", "providerconfigs.lifecycle.dev",
                              "-o", "json").json()
        schema = spec["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
        assert "host" not in schema["properties"]  # nothing of PostgreSQL's
        names = server.kubectl("get", "providerconfigs", "-o", "name").stdout.split()
        assert names == ["providerconfig.lifecycle.dev/default"]


def test_the_checker_refuses_a_described_root_metadata_as_the_api_server_does() -> None:
    doc = pg_config_crd()
    assert openapi(doc)["properties"]["metadata"] == {"type": "object"}
    openapi(doc)["properties"]["metadata"]["description"] = "Standard metadata."
    assert any("properties[metadata].description" in p for p in check_crd(doc))


@pytest.mark.postgres
def test_ssl_mode_require_against_a_server_without_tls_is_a_clear_condition(
        server: Any) -> None:
    """provider-sql's spelling is honoured, not ignored: the Role fails saying why."""
    from lifecycle.providers.postgres.scenarios.testing import manifest, postgres_environment

    env = postgres_environment(server.host, server.port, server.user, server.password,
                               "disable")
    stored = env.api.get(PROVIDER_CONFIG_API, PROVIDER_CONFIG_KIND, None, "default")
    spec = {k: v for k, v in stored["spec"].items() if k != "sslmode"}
    env.api.replace({**stored, "spec": {**spec, "sslMode": "require"}})
    env.apply(manifest("Role", "r"))
    env.reconcile("Role", "r")
    assert env.condition("Role", "r", "Synced").status == "False"
    failed = env.condition("Role", "r", "Failed")
    assert failed.reason == "ServerUnavailable"
    assert "server does not support SSL, but SSL was required" in failed.message
    assert server.password not in failed.message
