"""Tenant safety: a resource touches only the connection Secret it owns, and is refused
before the finalizer when what it names is invalid.

A tenant may create objects only in their own namespace. These tests play
that tenant on the harness and the simulated cloud: pointing the connection
Secret at another namespace or at a Secret the operator did not create,
sharing one Secret between two objects, choosing external names no provider
can hold and writing malformed references. Each is refused with a condition,
the victim's objects stay byte for byte as they were, nothing is called in
the cloud with what the victim held, and every object stays deletable.
"""

from __future__ import annotations

import base64
from typing import Any

import attrs
import pytest

from lifecycle.core.errors import TerminalError
from lifecycle.core.kind import EXTERNAL_NAME, FINALIZER, OWNER_UID
from lifecycle.kube.errors import Invalid
from lifecycle.machines.database import DatabaseInstance
from lifecycle.providers.simcloud import OPERATIONS, DatabaseConnector, SimCloud
from lifecycle.providers.simcloud.scenarios.harness import database_manifest, simulated_environment
from lifecycle.runtime.secrets import ConnectionSecrets
from lifecycle.testing import Environment

KIND = "DatabaseInstance"
VICTIM_PASSWORD = "victim-password-5f1c2a9e"


def _env(**options: Any) -> tuple[Environment, SimCloud]:
    env, cloud = simulated_environment(cloud=SimCloud(seed=7), **options)
    env.namespace("tenant-a")
    env.namespace("victim")
    return env, cloud


def _secret(env: Environment, namespace: str, name: str, data: dict[str, str]) -> dict[str, Any]:
    return env.api.create({
        "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": name, "namespace": namespace},
        "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}})


def _pointing(name: str, namespace: str, ref: dict[str, str]) -> dict[str, Any]:
    manifest = database_manifest(name, namespace)
    manifest["spec"]["writeConnectionSecretToRef"] = ref
    return manifest


def _calls(cloud: SimCloud) -> int:
    return sum(cloud.count(op) for op in OPERATIONS)


def _failed_reason(env: Environment, name: str, namespace: str = "default") -> str:
    synced = env.condition(KIND, name, "Synced", namespace)
    failed = env.condition(KIND, name, "Failed", namespace)
    assert synced is not None and synced.status.value == "False"
    assert failed is not None and failed.status.value == "True"
    return failed.reason


def _warned(env: Environment, name: str, fragment: str) -> bool:
    return any(e["type"] == "Warning" and fragment in e["message"] for e in env.events(name))


def _deletable(env: Environment, name: str, namespace: str = "default") -> None:
    env.delete(KIND, name, namespace)
    env.run_until_idle()
    assert not env.exists(KIND, name, namespace)


# --------------------------------------------------------------------- H1
def test_a_secret_in_another_namespace_is_refused_and_left_byte_for_byte() -> None:
    env, cloud = _env()
    victim = _secret(env, "victim", "app-creds",
                     {"username": "app", "password": VICTIM_PASSWORD})
    env.apply(_pointing("db", "tenant-a", {"namespace": "victim", "name": "app-creds"}))
    env.run_until_idle()
    assert env.api.get("v1", "Secret", "victim", "app-creds") == victim
    assert _failed_reason(env, "db", "tenant-a") == "SecretNamespaceNotAllowed"
    assert _warned(env, "db", "victim/app-creds")
    assert FINALIZER not in env.get(KIND, "db", "tenant-a")["metadata"].get("finalizers", [])
    assert _calls(cloud) == 0 and cloud.instances() == {}
    items, _ = env.api.list("v1", "Secret", "tenant-a")
    assert items == []  # nothing written anywhere instead
    _deletable(env, "db", "tenant-a")
    assert env.api.get("v1", "Secret", "victim", "app-creds") == victim


def test_the_provider_credentials_secret_is_never_taken_over() -> None:
    env, cloud = _env()
    credentials = env.api.get("v1", "Secret", "default", "default-credentials")
    env.apply(_pointing("db", "default", {"name": "default-credentials"}))
    env.run_until_idle()
    assert env.api.get("v1", "Secret", "default", "default-credentials") == credentials
    assert _failed_reason(env, "db") == "ConnectionSecretNotOwned"
    assert _calls(cloud) == 0
    _deletable(env, "db")
    assert env.api.get("v1", "Secret", "default", "default-credentials") == credentials
    # The provider still works for everyone else with its untouched credentials.
    env.apply(database_manifest("other"))
    env.run_until_idle()
    assert env.state(KIND, "other") == "ready"


def test_an_unowned_secret_with_a_password_is_never_the_password_source() -> None:
    env, cloud = _env()
    planted = _secret(env, "tenant-a", "planted", {"password": VICTIM_PASSWORD})
    env.apply(_pointing("db", "tenant-a", {"name": "planted"}))
    env.run_until_idle()
    assert env.api.get("v1", "Secret", "tenant-a", "planted") == planted
    assert _failed_reason(env, "db", "tenant-a") == "ConnectionSecretNotOwned"
    assert cloud.count("create") == 0 and not cloud.instances()
    # Pointed at a Secret of its own, it is created with a password the operator made.
    env.apply(_pointing("db", "tenant-a", {"name": "db-conn"}))
    env.run_until_idle()
    assert env.state(KIND, "db", "tenant-a") == "ready"
    (created,) = cloud.instances()
    own = env.api.get("v1", "Secret", "tenant-a", "db-conn")
    password = base64.b64decode(own["data"]["password"]).decode()
    assert cloud.password_of(created) == password
    assert password != VICTIM_PASSWORD
    assert env.api.get("v1", "Secret", "tenant-a", "planted") == planted
    _deletable(env, "db", "tenant-a")


def test_the_operator_option_allows_other_namespaces_but_never_unowned_secrets() -> None:
    env, cloud = _env()
    env.reconcilers[KIND].allow_cross_namespace_secrets = True
    victim = _secret(env, "victim", "app-creds", {"password": VICTIM_PASSWORD})
    env.apply(_pointing("taker", "tenant-a", {"namespace": "victim", "name": "app-creds"}))
    env.apply(_pointing("db", "tenant-a", {"namespace": "victim", "name": "db-conn"}))
    env.run_until_idle()
    assert env.api.get("v1", "Secret", "victim", "app-creds") == victim
    assert _failed_reason(env, "taker", "tenant-a") == "ConnectionSecretNotOwned"
    assert env.state(KIND, "db", "tenant-a") == "ready"
    written = env.api.get("v1", "Secret", "victim", "db-conn")
    uid = env.get(KIND, "db", "tenant-a")["metadata"]["uid"]
    assert written["metadata"]["annotations"][OWNER_UID] == uid
    assert cloud.count("create") == 1


def test_a_cluster_scoped_kind_may_name_any_namespace() -> None:
    env, _ = _env()
    cluster_scoped = attrs.evolve(DatabaseInstance, namespaced=False)
    owner = {"metadata": {"name": "db", "uid": "u-1"},
             "spec": {"writeConnectionSecretToRef": {"namespace": "victim", "name": "x"}}}
    ConnectionSecrets(env.api, cluster_scoped).check_namespace(owner)
    namespaced = {**owner, "metadata": {**owner["metadata"], "namespace": "tenant-a"}}
    with pytest.raises(TerminalError) as caught:
        ConnectionSecrets(env.api, DatabaseInstance).check_namespace(namespaced)
    assert caught.value.reason == "SecretNamespaceNotAllowed"
    ConnectionSecrets(env.api, DatabaseInstance,
                      allow_cross_namespace=True).check_namespace(namespaced)


# --------------------------------------------------------------------- M2
def test_two_objects_sharing_one_secret_are_both_deletable() -> None:
    env, cloud = _env()
    env.apply(database_manifest("first"))
    env.run_until_idle()
    theirs = env.api.get("v1", "Secret", "default", "first-conn")
    env.apply(_pointing("second", "default", {"name": "first-conn"}))
    env.run_until_idle()
    assert _failed_reason(env, "second") == "ConnectionSecretNotOwned"
    assert env.api.get("v1", "Secret", "default", "first-conn") == theirs
    assert cloud.count("create") == 1
    _deletable(env, "second")
    assert env.api.get("v1", "Secret", "default", "first-conn") == theirs
    assert env.state(KIND, "first") == "ready"
    _deletable(env, "first")
    assert cloud.instances() == {}


def test_an_object_turned_to_another_objects_secret_still_deletes_its_resource() -> None:
    env, cloud = _env()
    for name in ("first", "second"):
        env.apply(database_manifest(name))
    env.run_until_idle()
    assert len(cloud.instances()) == 2
    theirs = env.api.get("v1", "Secret", "default", "first-conn")
    env.apply(_pointing("second", "default", {"name": "first-conn"}))
    env.run_until_idle()
    assert _failed_reason(env, "second") == "ConnectionSecretNotOwned"
    assert env.api.get("v1", "Secret", "default", "first-conn") == theirs
    _deletable(env, "second")
    assert env.api.get("v1", "Secret", "default", "first-conn") == theirs
    assert list(cloud.instances()) == [env.get(KIND, "first")["metadata"]["annotations"][
        EXTERNAL_NAME]]
    assert env.state(KIND, "first") == "ready"


# --------------------------------------------------------------------- M1
def _limited() -> tuple[Environment, SimCloud]:
    """DatabaseInstance declaring a 63-byte external-name limit, on a fresh cloud."""
    cloud = SimCloud(seed=7)
    env = Environment([(attrs.evolve(DatabaseInstance, external_name_max=63),
                        DatabaseConnector(cloud))])
    env.provider_config()
    return env, cloud


@pytest.mark.parametrize("name", ["n" * 64, "bad\x00name", ""],
                         ids=["64-bytes", "nul", "empty"])
def test_an_invalid_external_name_is_refused_before_the_finalizer(name: str) -> None:
    env, cloud = _limited()
    env.apply(database_manifest("db", annotations={EXTERNAL_NAME: name}))
    env.run_until_idle()
    obj = env.get(KIND, "db")
    assert FINALIZER not in obj["metadata"].get("finalizers", [])
    assert _failed_reason(env, "db") == "InvalidExternalName"
    assert "externalName" not in obj["status"]
    assert _calls(cloud) == 0
    _deletable(env, "db")
    assert _calls(cloud) == 0


def test_a_name_within_the_limit_is_taken() -> None:
    env, cloud = _limited()
    env.apply(database_manifest("db", annotations={EXTERNAL_NAME: "n" * 63}))
    env.run_until_idle()
    assert env.state(KIND, "db") == "ready"
    assert list(cloud.instances()) == ["n" * 63]


def test_a_corrected_name_is_taken_after_a_refusal() -> None:
    env, cloud = _limited()
    env.apply(database_manifest("db", annotations={EXTERNAL_NAME: "n" * 64}))
    env.run_until_idle()
    env.apply(database_manifest("db", annotations={EXTERNAL_NAME: "orders",
                                                    "lifecycle.dev/operation": "reconcile"}))
    env.run_until_idle()
    assert env.state(KIND, "db") == "ready"
    assert list(cloud.instances()) == ["orders"]


def test_an_invalid_spec_gets_no_finalizer_and_is_deletable() -> None:
    env, cloud = _env()
    manifest = database_manifest("db")
    manifest["spec"]["forProvider"]["storageGB"] = "lots"
    with pytest.raises(Invalid):
        env.apply(manifest)  # the kind's CRD refuses it ...
    env.serve_lenient(KIND)  # ... but one stored under an older CRD must be handled
    env.apply(manifest)
    env.run_until_idle()
    assert _failed_reason(env, "db") == "InvalidSpec"
    assert FINALIZER not in env.get(KIND, "db")["metadata"].get("finalizers", [])
    assert env.state(KIND, "db") == "failed"
    assert _calls(cloud) == 0
    _deletable(env, "db")


def test_a_preset_finalizer_with_an_invalid_name_never_reaches_the_provider() -> None:
    env, cloud = _limited()
    manifest = database_manifest("db", annotations={EXTERNAL_NAME: "n" * 64})
    manifest["metadata"]["finalizers"] = [FINALIZER]
    env.apply(manifest)
    env.run_until_idle()
    assert _failed_reason(env, "db") == "InvalidExternalName"
    assert _calls(cloud) == 0
    _deletable(env, "db")
    assert _calls(cloud) == 0


# ------------------------------------------------------------ malformed refs
@pytest.mark.parametrize("field,value", [("providerConfigRef", "default"),
                                         ("writeConnectionSecretToRef", ["db-conn"])])
def test_a_malformed_reference_gets_a_condition(field: str, value: Any) -> None:
    env, cloud = _env()
    manifest = database_manifest("db")
    manifest["spec"][field] = value
    with pytest.raises(Invalid):
        env.apply(manifest)  # the kind's CRD refuses it ...
    env.serve_lenient(KIND)  # ... but one stored under an older CRD must be handled
    env.apply(manifest)
    env.run_until_idle()
    assert _failed_reason(env, "db") == "InvalidReference"
    assert field in env.condition(KIND, "db", "Synced").message
    assert FINALIZER not in env.get(KIND, "db")["metadata"].get("finalizers", [])
    assert _calls(cloud) == 0
    _deletable(env, "db")


# ------------------------------------------------------------ operator option
def test_the_run_option_reaches_the_reconciler() -> None:
    from lifecycle.cli import build_parser
    from lifecycle.driver.manager import ManagerOptions, engine_reconciler

    parser = build_parser()
    assert parser.parse_args(["run", "--allow-cross-namespace-secrets"]) \
        .allow_cross_namespace_secrets is True
    assert parser.parse_args(["run"]).allow_cross_namespace_secrets is False
    env, cloud = _env()
    for allowed in (False, True):
        reconciler = engine_reconciler(env.api, DatabaseInstance, DatabaseConnector(cloud),
                                       ManagerOptions(allow_cross_namespace_secrets=allowed))
        assert reconciler.allow_cross_namespace_secrets is allowed
