"""A ProviderConfig says on itself whether it can be used: the condition ``Valid``.

The usage reconciler reads the config's credentials and asks each provider's
``problem(config)`` (PostgreSQL: the checks every connection makes, without connecting);
the answer is ``Valid`` True, or False with the reason and a message naming what is
wrong and no credential. On the embedded API, which checks the status against the CRD's
schema, for the simulated cloud's config and PostgreSQL's.
"""

from __future__ import annotations

from typing import Any

from lifecycle.core.kind import PROVIDER_CONFIG_KIND
from lifecycle.machines.database import DatabaseInstance
from lifecycle.machines.postgres import kinds as postgres_kinds
from lifecycle.providers.postgres.providerconfig import PostgresProviderConfigSpec
from lifecycle.providers.postgres.scenarios.testing import postgres_environment
from lifecycle.providers.simcloud import SimCloud
from lifecycle.providers.simcloud.scenarios.harness import simulated_environment
from lifecycle.runtime.providerconfigs import VALID, ProviderConfigReconciler, redacted
from lifecycle.schema.crds import provider_config_crd
from lifecycle.testing import Environment

PASSWORD = "pg-admin-s3cret-value"


def valid(env: Environment, api_version: str, name: str = "default") -> dict[str, Any]:
    config = env.api.get(api_version, PROVIDER_CONFIG_KIND, None, name)
    found = [c for c in config["status"].get("conditions", []) if c["type"] == VALID]
    assert len(found) == 1, config["status"]
    return found[0]


def postgres(spec: dict[str, Any] | None = None,
             credentials: dict[str, str] | None = None) -> tuple[Environment, str, Any]:
    """A PostgreSQL harness whose ProviderConfig ``default`` has ``spec`` merged in (no
    server: nothing here connects), with its usage reconciler."""
    env = postgres_environment("db.example.internal", 5432, "admin", PASSWORD, "disable",
                               seed=7)
    found = [kind for kind, _ in postgres_kinds()]
    api_version = found[0].provider_config_api
    env.provider_config(credentials=credentials or {"username": "admin", "password": PASSWORD},
                        spec={"host": "db.example.internal", **(spec or {})},
                        api_version=api_version)
    return env, api_version, ProviderConfigReconciler(env.api, found, api_version=api_version,
                                                      clock=env.clock.now)


def test_a_usable_config_is_valid_and_is_not_rewritten() -> None:
    env, _ = simulated_environment(cloud=SimCloud(seed=1))
    reconciler = ProviderConfigReconciler(env.api, [DatabaseInstance], clock=env.clock.now)
    reconciler.reconcile(None, "default")
    api_version = DatabaseInstance.provider_config_api
    assert valid(env, api_version) | {"lastTransitionTime": ""} == {
        "type": "Valid", "status": "True", "reason": "ProviderConfigValid", "message": "",
        "observedGeneration": 1, "lastTransitionTime": ""}
    version = env.api.get(api_version, PROVIDER_CONFIG_KIND, None,
                          "default")["metadata"]["resourceVersion"]
    env.clock.advance(60)
    reconciler.reconcile(None, "default")
    assert env.api.get(api_version, PROVIDER_CONFIG_KIND, None,
                       "default")["metadata"]["resourceVersion"] == version


def test_a_missing_credentials_secret_is_shown_on_the_config() -> None:
    env, _ = simulated_environment(cloud=SimCloud(seed=1))
    api_version = DatabaseInstance.provider_config_api
    reconciler = ProviderConfigReconciler(env.api, [DatabaseInstance], clock=env.clock.now)
    reconciler.reconcile(None, "default")
    assert valid(env, api_version)["status"] == "True"
    env.api.delete("v1", "Secret", "default", "default-credentials")
    env.clock.advance(5)
    reconciler.reconcile(None, "default")
    found = valid(env, api_version)
    assert (found["status"], found["reason"]) == ("False", "CredentialsMissing"), found
    assert "default-credentials" in found["message"]
    assert found["lastTransitionTime"] == "2026-01-01T00:00:05Z"


def test_verify_full_without_a_ca_is_invalid_until_a_ca_is_given() -> None:
    env, api_version, reconciler = postgres({"sslMode": "verify-full"})
    reconciler.reconcile(None, "default")
    found = valid(env, api_version)
    assert (found["status"], found["reason"]) == ("False", "ProviderConfigInvalid"), found
    assert "sslMode verify-full" in found["message"] and "CA bundle" in found["message"]
    assert PASSWORD not in str(env.api.get(api_version, PROVIDER_CONFIG_KIND, None,
                                           "default"))

    env.provider_config(credentials={"username": "admin", "password": PASSWORD,
                                     "ca.crt": "-----BEGIN CERTIFICATE-----\n"},
                        spec={"host": "db.example.internal", "sslMode": "verify-full"},
                        api_version=api_version)
    reconciler.reconcile(None, "default")
    assert valid(env, api_version)["status"] == "True"


def test_a_missing_credentials_key_is_named_and_no_credential_is_shown() -> None:
    env, api_version, reconciler = postgres(credentials={"username": PASSWORD})
    reconciler.reconcile(None, "default")
    found = valid(env, api_version)
    assert (found["status"], found["reason"]) == ("False", "ProviderConfigInvalid"), found
    assert "'password'" in found["message"]
    assert PASSWORD not in found["message"]


def test_the_postgres_check_without_a_harness() -> None:
    from lifecycle.core.contract import ProviderConfig

    good = ProviderConfig("pg", {"host": "h", "sslMode": "require"},
                          {"username": "u", "password": "p"})
    assert PostgresProviderConfigSpec.problem(good) is None
    for spec, creds, expected in (
            ({"host": "h", "sslMode": "verify-ca"}, {"username": "u", "password": "p"},
             "sslMode verify-ca"),
            ({"host": "h"}, {"username": "u"}, "lack 'password'"),
            ({"host": "h", "sslMode": "require", "sslmode": "disable"},
             {"username": "u", "password": "p"}, "disagree"),
            ({"host": "h", "credentialKeys": {"username": "user"}},
             {"username": "u", "password": "p"}, "lack 'user'")):
        problem = PostgresProviderConfigSpec.problem(ProviderConfig("pg", spec, creds))
        assert problem is not None and expected in problem, (spec, problem)


def test_redaction_masks_every_credential_value() -> None:
    assert redacted("user admin with s3cr3t-pw", {"username": "admin",
                                                  "password": "s3cr3t-pw"}) == (
        "user *** with ***")
    assert redacted("a b", {"x": "a"}) == "a b"  # too short to mask without harm


def test_the_crd_declares_the_condition_and_a_column() -> None:
    crd = provider_config_crd()
    version = crd["spec"]["versions"][0]
    status = version["schema"]["openAPIV3Schema"]["properties"]["status"]
    assert status["properties"]["conditions"]["items"]["properties"]["type"]
    assert any(c["name"] == "Valid" for c in version["additionalPrinterColumns"])


def test_a_status_the_schema_refuses_is_refused() -> None:
    """The embedded API checks the condition against the CRD: the check above means it."""
    import pytest

    from lifecycle.kube.errors import ApiError

    env, _ = simulated_environment(cloud=SimCloud(seed=1))
    api_version = DatabaseInstance.provider_config_api
    config = env.api.get(api_version, PROVIDER_CONFIG_KIND, None, "default")
    with pytest.raises(ApiError):
        env.api.replace_status({**config, "status": {"conditions": [{"type": "Valid",
                                                                     "status": "Maybe"}]}})


def test_the_operator_writes_valid_on_each_config_through_the_official_client() -> None:
    """Through the driver: a config nobody uses is checked as well, as it is written."""
    import time

    from kubernetes import client as k8s

    from lifecycle.driver.cluster import KubeCluster, api_client
    from lifecycle.driver.informer import InformerOptions
    from lifecycle.driver.manager import Manager, ManagerOptions
    from lifecycle.providers.simcloud import DatabaseConnector
    from lifecycle.sim.embedded import embedded_cluster

    def condition(server: Any, name: str) -> dict[str, Any] | None:
        try:
            config = server.api.get(api_version, PROVIDER_CONFIG_KIND, None, name)
        except Exception:
            return None
        return next((c for c in (config.get("status") or {}).get("conditions", [])
                     if c["type"] == VALID), None)

    def eventually(server: Any, name: str) -> dict[str, Any]:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if (found := condition(server, name)) is not None:
                return found
            time.sleep(0.1)
        raise AssertionError(f"no Valid condition on {name}")

    api_version = DatabaseInstance.provider_config_api
    server = embedded_cluster([DatabaseInstance], bookmark_interval=0.5)
    try:
        cluster = KubeCluster(api_client(host=server.url), [DatabaseInstance])
        options = ManagerOptions(informer=InformerOptions(
            resync=600.0, watch_timeout=10.0, inactivity_timeout=3.0, backoff_base=0.05,
            backoff_cap=0.5), backoff_base=0.05, backoff_cap=1.0)
        manager = Manager(cluster, [(DatabaseInstance, DatabaseConnector(
            SimCloud(seed=2, create_polls=0)))], options).start()
        try:
            assert eventually(server, "default")["status"] == "True"
            custom = k8s.CustomObjectsApi(api_client(host=server.url))
            custom.create_cluster_custom_object("lifecycle.dev", "v1alpha1", "providerconfigs", {
                "apiVersion": api_version, "kind": PROVIDER_CONFIG_KIND,
                "metadata": {"name": "broken"},
                "spec": {"credentials": {"source": "Secret", "secretRef": {
                    "name": "nowhere", "namespace": "default"}}}})
            found = eventually(server, "broken")
            assert (found["status"], found["reason"]) == ("False", "CredentialsMissing"), found
            assert "nowhere" in found["message"]
        finally:
            manager.stop()
    finally:
        server.stop()
        server.api.close()


def test_credentials_the_operator_may_not_read_are_a_problem_and_a_failed_read_is_not() -> None:
    from lifecycle.kube.errors import Forbidden, ServerError

    env, _ = simulated_environment(cloud=SimCloud(seed=1))
    api_version = DatabaseInstance.provider_config_api
    reconciler = ProviderConfigReconciler(env.operator_api, [DatabaseInstance],
                                          clock=env.clock.now)
    env.faults.fail("get", "Secret", "default-credentials", error=ServerError, times=1)
    assert reconciler.reconcile(None, "default").reason == "Unused"  # the usage is written
    config = env.api.get(api_version, PROVIDER_CONFIG_KIND, None, "default")
    assert "conditions" not in config["status"] and config["status"]["users"] == 0
    reconciler.reconcile(None, "default")
    assert valid(env, api_version)["status"] == "True"
    env.faults.fail("get", "Secret", "default-credentials", error=Forbidden)
    reconciler.reconcile(None, "default")
    found = valid(env, api_version)
    assert (found["status"], found["reason"]) == ("False", "CredentialsUnavailable"), found


def test_an_operator_of_one_namespace_leaves_configs_with_credentials_elsewhere_alone() -> None:
    """Its RBAC lets it read Secrets in its own namespace only: a config whose credentials
    are elsewhere (another operator's) is neither read nor judged; one in its namespace is."""
    env, _ = simulated_environment(cloud=SimCloud(seed=1))
    api_version = DatabaseInstance.provider_config_api
    reads: list[tuple[Any, ...]] = []
    api = env.api

    class Counting:
        def __getattr__(self, name: str) -> Any:
            return getattr(api, name)

        def get(self, *args: Any, **kwargs: Any) -> Any:
            reads.append(args)
            return api.get(*args, **kwargs)

    elsewhere = ProviderConfigReconciler(Counting(), [DatabaseInstance],  # type: ignore[arg-type]
                                         clock=env.clock.now, namespace="team-a")
    elsewhere.reconcile(None, "default")  # its credentials: default/default-credentials
    assert not any(r[:2] == ("v1", "Secret") for r in reads), reads
    config = env.api.get(api_version, PROVIDER_CONFIG_KIND, None, "default")
    assert not [c for c in (config.get("status") or {}).get("conditions", [])
                if c["type"] == VALID]
    at_home = ProviderConfigReconciler(Counting(), [DatabaseInstance],  # type: ignore[arg-type]
                                       clock=env.clock.now, namespace="default")
    at_home.reconcile(None, "default")
    assert ("v1", "Secret", "default", "default-credentials") in reads
    assert valid(env, api_version)["status"] == "True"
