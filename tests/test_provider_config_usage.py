"""A ProviderConfig in use cannot be deleted; its status lists who uses it."""

from __future__ import annotations

from typing import Any

from lifecycle.core.kind import PROVIDER_CONFIG_API, PROVIDER_CONFIG_KIND
from lifecycle.machines.database import DatabaseInstance
from lifecycle.providers.simcloud import SimCloud
from lifecycle.providers.simcloud.scenarios.harness import database_manifest, simulated_environment
from lifecycle.runtime.providerconfigs import IN_USE, ProviderConfigReconciler, usage

KIND = "DatabaseInstance"


def _config(env: Any, name: str = "default") -> dict[str, Any] | None:
    items, _ = env.api.list(PROVIDER_CONFIG_API, PROVIDER_CONFIG_KIND)
    return next((c for c in items if c["metadata"]["name"] == name), None)


def test_usage_is_decided_from_the_users_alone() -> None:
    live = {"metadata": {"name": "default"}, "status": {}}
    assert usage(live, []).finalizer and usage(live, []).status["users"] == 0
    deleting = {"metadata": {"name": "default", "deletionTimestamp": "2026-01-01T00:00:00Z"}}
    held = usage(deleting, [f"DatabaseInstance ns/db{i}" for i in range(12)])
    assert held.finalizer and held.status["users"] == 12 and len(held.status["usedBy"]) == 10
    assert held.blocked is not None and "and 9 more" in held.blocked
    assert not usage(deleting, []).finalizer


def test_a_config_in_use_waits_for_its_users_then_goes() -> None:
    env, _ = simulated_environment(cloud=SimCloud(seed=1, create_polls=0))
    env.namespace("team-b")
    env.apply(database_manifest("a"))
    env.apply(database_manifest("b", "team-b"))
    env.run_until_idle()
    usage_reconciler = ProviderConfigReconciler(env.api, [DatabaseInstance])
    assert usage_reconciler.reconcile(None, "default").reason == "InUse"
    config = _config(env)
    assert config is not None and IN_USE in config["metadata"]["finalizers"]
    assert {k: v for k, v in config["status"].items() if k != "conditions"} == {
        "users": 2, "usedBy": ["DatabaseInstance default/a", "DatabaseInstance team-b/b"]}
    assert [(c["type"], c["status"]) for c in config["status"]["conditions"]] == [
        ("Valid", "True")]
    version = config["metadata"]["resourceVersion"]
    usage_reconciler.reconcile(None, "default")  # nothing changed: nothing written
    assert _config(env)["metadata"]["resourceVersion"] == version

    env.api.delete(PROVIDER_CONFIG_API, PROVIDER_CONFIG_KIND, None, "default")
    result = usage_reconciler.reconcile(None, "default")
    assert result.reason == "DeletionBlocked" and result.after > 0
    assert _config(env) is not None  # held by the finalizer
    assert any(e["reason"] == "DeletionBlocked" and "default/a" in e["message"]
               for e in env.events())
    # The users keep working with the config while it waits.
    env.delete(KIND, "a")
    env.run_until_idle()
    assert not env.exists(KIND, "a")
    usage_reconciler.reconcile(None, "default")
    assert _config(env)["status"]["usedBy"] == ["DatabaseInstance team-b/b"]
    env.delete(KIND, "b", "team-b")
    env.run_until_idle()
    assert usage_reconciler.reconcile(None, "default").reason == "Unused"
    assert _config(env) is None  # the last user gone: the finalizer released it


def test_an_unused_config_is_deleted_at_once_and_a_missing_one_is_done() -> None:
    env, _ = simulated_environment(cloud=SimCloud(seed=1))
    reconciler = ProviderConfigReconciler(env.api, [DatabaseInstance])
    reconciler.reconcile(None, "default")
    assert IN_USE in _config(env)["metadata"]["finalizers"]
    env.api.delete(PROVIDER_CONFIG_API, PROVIDER_CONFIG_KIND, None, "default")
    reconciler.reconcile(None, "default")
    assert _config(env) is None
    assert reconciler.reconcile(None, "default").reason == "NotFound"


def test_the_operator_holds_a_config_in_use_through_the_official_client() -> None:
    """Through the driver: the usage controller follows the managed kind's informer."""
    import time

    from kubernetes import client as k8s

    from lifecycle.driver.cluster import KubeCluster, api_client
    from lifecycle.driver.informer import InformerOptions
    from lifecycle.driver.manager import Manager, ManagerOptions
    from lifecycle.providers.simcloud import DatabaseConnector
    from lifecycle.sim.embedded import embedded_cluster

    def eventually(check: Any, what: str, timeout: float = 30.0) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if (found := check()):
                return found
            time.sleep(0.1)
        raise AssertionError(f"timed out waiting for {what}")

    server = embedded_cluster([DatabaseInstance], bookmark_interval=0.5)
    try:
        assert _config(server) is not None  # the embedded cluster's default config
        cluster = KubeCluster(api_client(host=server.url), [DatabaseInstance])
        options = ManagerOptions(informer=InformerOptions(
            resync=600.0, watch_timeout=10.0, inactivity_timeout=3.0, backoff_base=0.05,
            backoff_cap=0.5), backoff_base=0.05, backoff_cap=1.0)
        manager = Manager(cluster, [(DatabaseInstance, DatabaseConnector(
            SimCloud(seed=2, create_polls=0)))], options).start()
        try:
            custom = k8s.CustomObjectsApi(api_client(host=server.url))
            group, version = DatabaseInstance.api_version.split("/")
            for name in ("a", "b"):
                custom.create_namespaced_custom_object(group, version, "default",
                                                       DatabaseInstance.plural,
                                                       database_manifest(name))
            eventually(lambda: (_config(server) or {}).get("status", {}).get("users") == 2,
                       "two users counted")
            config = _config(server)
            assert IN_USE in config["metadata"]["finalizers"]
            custom.delete_cluster_custom_object("lifecycle.dev", "v1alpha1", "providerconfigs",
                                                "default")

            def blocked() -> bool:
                events, _ = server.api.list("v1", "Event")
                return any(e.get("reason") == "DeletionBlocked"
                           and e["involvedObject"]["name"] == "default" for e in events)

            # The usage controller saw the deletion and refused it: only then is the
            # config's presence proof that it is held.
            eventually(blocked, "the deletion to be blocked")
            config = _config(server)
            assert config is not None and config["metadata"].get("deletionTimestamp")
            assert IN_USE in config["metadata"]["finalizers"]
            assert config["status"]["users"] == 2
            for name in ("a", "b"):
                custom.delete_namespaced_custom_object(group, version, "default",
                                                       DatabaseInstance.plural, name)
            eventually(lambda: _config(server) is None, "the config released", 40.0)
        finally:
            manager.stop()
    finally:
        server.stop()
        server.api.close()


def test_a_kind_may_name_its_own_provider_config_group() -> None:
    """Operators of different providers never share a ProviderConfig kind."""
    import attrs

    from lifecycle.driver.manifests import cluster_rules
    from lifecycle.providers.simcloud import DatabaseConnector
    from lifecycle.schema.crds import crds
    from lifecycle.testing.plugin import build_environment

    own = attrs.evolve(DatabaseInstance, provider_config_api="aws.example.org/v1beta1")
    docs = crds([own])
    assert [d["metadata"]["name"] for d in docs][:1] == ["providerconfigs.aws.example.org"]
    assert not any(d["metadata"]["name"] == "providerconfigs.lifecycle.dev" for d in docs)
    groups = {g for rule in cluster_rules([own]) if "providerconfigs" in rule["resources"]
              for g in rule["apiGroups"]}
    assert groups == {"aws.example.org"}

    cloud = SimCloud(seed=4, create_polls=0)
    env = build_environment(kinds=[(own, DatabaseConnector(cloud))])
    env.apply(database_manifest("db"))
    env.run_until_idle()
    assert env.state(KIND, "db") == "ready"
    reconciler = ProviderConfigReconciler(env.api, [own], api_version=own.provider_config_api)
    assert reconciler.reconcile(None, "default").reason == "InUse"
    # The engine's own ProviderConfig kind is not served, and nothing needed it.
    assert ProviderConfigReconciler(env.api, [own]).kinds == ()
