"""A ProviderConfig in use cannot be deleted; its status lists who uses it."""

from __future__ import annotations

from typing import Any

from lifecycle.core.kind import PROVIDER_CONFIG_API, PROVIDER_CONFIG_KIND
from lifecycle.machines.database import DatabaseInstance
from lifecycle.providers.simcloud import SimCloud
from lifecycle.providers.simcloud.harness import database_manifest, simulated_environment
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
    assert config["status"] == {"users": 2, "usedBy": ["DatabaseInstance default/a",
                                                       "DatabaseInstance team-b/b"]}
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
