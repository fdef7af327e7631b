"""Parents owning child objects: pure helpers, then passes on the harness.

The example parent, ``DatabaseApp``, owns a ConfigMap of settings and a
DatabaseInstance that the managed reconciler drives on the simulated cloud.
Version v1alpha1 had ``spec.dbSize``; v1beta1 moved it to
``spec.database.storageGB``.
"""

from __future__ import annotations

from typing import Any

import pytest

from lifecycle.core.errors import TerminalError
from lifecycle.core.parents import OwnedChild, ParentKind, Version, apply_defaults, convert_up
from lifecycle.core.values import ResultKind
from lifecycle.kube.objects import owned_by
from lifecycle.providers.simcloud.scenarios.harness import simulated_environment
from lifecycle.runtime.children import (
    ParentReconciler,
    covers,
    initialize_conditions,
    overlay,
    resource_types,
)


def v1alpha1_up(obj: dict[str, Any]) -> dict[str, Any]:
    """v1alpha1 -> v1beta1: ``spec.dbSize`` became ``spec.database.storageGB``."""
    spec = dict(obj.get("spec") or {})
    size = spec.pop("dbSize", None)
    if size is not None:
        spec["database"] = {**(spec.get("database") or {}), "storageGB": size}
    return {**obj, "spec": spec}


def settings(app: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": f"{app['metadata']['name']}-settings"},
            "data": dict(app["spec"]["settings"])}


def database(app: dict[str, Any]) -> dict[str, Any]:
    name = f"{app['metadata']['name']}-db"
    db = app["spec"]["database"]
    return {"apiVersion": "db.lifecycle.dev/v1alpha1", "kind": "DatabaseInstance",
            "metadata": {"name": name},
            "spec": {"forProvider": {"engine": db["engine"], "storageGB": db["storageGB"]},
                     "writeConnectionSecretToRef": {"name": f"{name}-conn"}}}


def database_status(child: dict[str, Any]) -> dict[str, Any]:
    status = child.get("status") or {}
    return {"state": status.get("state"),
            "endpoint": (status.get("atProvider") or {}).get("endpoint")}


APP = ParentKind(
    group="apps.lifecycle.dev",
    kind="DatabaseApp",
    plural="databaseapps",
    versions=(Version("v1alpha1", up=v1alpha1_up), Version("v1beta1")),
    children=(
        OwnedChild("settings", settings, compare=("data",)),
        OwnedChild("database", database, status=database_status),
    ),
    defaults={"database": {"engine": "postgres", "storageGB": 20},
              "settings": {"logLevel": "info"}},
    conditions=("BackupsReady",),
)


# ---------------------------------------------------------------------------
# Pure helpers
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(("spec", "expected"), [
    (None, {"database": {"engine": "postgres", "storageGB": 20},
            "settings": {"logLevel": "info"}}),
    ({"database": {"storageGB": 5}}, {"database": {"engine": "postgres", "storageGB": 5},
                                      "settings": {"logLevel": "info"}}),
    ({"settings": {"logLevel": "debug", "x": "1"}, "database": None},
     {"database": {"engine": "postgres", "storageGB": 20},
      "settings": {"logLevel": "debug", "x": "1"}}),
], ids=["empty", "nested-merge", "none-is-unset"])
def test_apply_defaults(spec: Any, expected: dict) -> None:
    assert apply_defaults(spec, APP.defaults) == expected


def test_apply_defaults_does_not_share_default_objects() -> None:
    first = apply_defaults({}, APP.defaults)
    first["database"]["engine"] = "mysql"
    assert APP.defaults["database"]["engine"] == "postgres"


def test_initialize_conditions_sets_only_unset_types_to_unknown() -> None:
    existing = [{"type": "Ready", "status": "True", "reason": "Fine", "message": "",
                 "observedGeneration": 1, "lastTransitionTime": "t0"}]
    out = initialize_conditions(existing, APP.condition_types, 2, "t1")
    by_type = {c["type"]: c for c in out}
    assert by_type["Ready"]["status"] == "True"
    assert by_type["Ready"]["lastTransitionTime"] == "t0"
    for type_ in ("SettingsReady", "DatabaseReady", "BackupsReady"):
        assert (by_type[type_]["status"], by_type[type_]["reason"]) == ("Unknown",
                                                                          "Initializing")


@pytest.mark.parametrize(("obj", "spec"), [
    ({"apiVersion": "apps.lifecycle.dev/v1alpha1", "spec": {"dbSize": 50}},
     {"database": {"storageGB": 50}}),
    ({"apiVersion": "apps.lifecycle.dev/v1alpha1", "spec": {}}, {}),
    ({"apiVersion": "apps.lifecycle.dev/v1beta1", "spec": {"database": {"storageGB": 7}}},
     {"database": {"storageGB": 7}}),
])
def test_convert_up(obj: dict, spec: dict) -> None:
    converted = convert_up(obj, APP)
    assert converted["apiVersion"] == "apps.lifecycle.dev/v1beta1"
    assert converted["spec"] == spec


@pytest.mark.parametrize("api_version", ["apps.lifecycle.dev/v2", "other.dev/v1beta1", None])
def test_convert_up_refuses_an_unserved_version(api_version: str | None) -> None:
    with pytest.raises(TerminalError, match="not served"):
        convert_up({"apiVersion": api_version}, APP)


def test_a_parent_kind_needs_conversions_for_older_versions() -> None:
    with pytest.raises(ValueError, match="'up' conversion"):
        ParentKind("g", "K", "ks", (Version("v1"), Version("v2")), ())


@pytest.mark.parametrize(("actual", "wanted", "covered", "merged"), [
    ({"a": 1, "b": 2}, {"a": 1}, True, {"a": 1, "b": 2}),
    ({"a": 1}, {"a": 2}, False, {"a": 2}),
    ({"f": {"x": 1, "late": "v"}}, {"f": {"x": 1}}, True, {"f": {"x": 1, "late": "v"}}),
    ({"f": {"x": 1}}, {"f": {"x": 3}}, False, {"f": {"x": 3}}),
    (None, {"a": 1}, False, {"a": 1}),
])
def test_covers_and_overlay(actual: Any, wanted: Any, covered: bool, merged: Any) -> None:
    assert covers(actual, wanted) is covered
    assert overlay(actual, wanted) == merged
    assert covers(overlay(actual, wanted), wanted)


def test_owned_by_compares_uids() -> None:
    child = {"metadata": {"ownerReferences": [{"uid": "u1", "kind": "DatabaseApp"}]}}
    assert owned_by(child, "u1")
    assert not owned_by(child, "u2")
    assert not owned_by({"metadata": {}}, "u1")


# ---------------------------------------------------------------------------
# Passes on the harness
# ---------------------------------------------------------------------------


@pytest.fixture
def world() -> Any:
    env, _ = simulated_environment()
    for rtype in resource_types(APP):
        env.api.register(rtype)
    return env, ParentReconciler(env.api, APP, clock=env.clock.now)


def app(name: str = "shop", version: str = "v1beta1", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": f"apps.lifecycle.dev/{version}", "kind": "DatabaseApp",
            "metadata": {"name": name, "namespace": "default"}, "spec": spec}


def conditions(env: Any, version: str = "v1beta1", name: str = "shop") -> dict[str, tuple]:
    obj = env.api.get(f"apps.lifecycle.dev/{version}", "DatabaseApp", "default", name)
    return {c["type"]: (c["status"], c["reason"]) for c in obj["status"]["conditions"]}


def settle_database(env: Any, name: str = "shop-db") -> None:
    env.enqueue("DatabaseInstance", name, "default")
    env.run_until_idle()


def test_missing_children_are_created_owned_then_status_flows_up(world: Any) -> None:
    env, parent = world
    created = env.api.create(app(settings={"theme": "dark"}))
    result = parent.reconcile("default", "shop")
    assert result.kind is ResultKind.REQUEUE_AFTER and result.reason == "Waiting"
    assert conditions(env) == {
        "Ready": ("Unknown", "SubresourcesPending"),
        "SettingsReady": ("Unknown", "Created"),
        "DatabaseReady": ("Unknown", "Created"),
        "BackupsReady": ("Unknown", "Initializing"),
    }
    uid = created["metadata"]["uid"]
    config = env.api.get("v1", "ConfigMap", "default", "shop-settings")
    assert config["data"] == {"theme": "dark", "logLevel": "info"}
    db = env.get("DatabaseInstance", "shop-db")
    # The server fills in the schema default for size, as a real one does.
    assert db["spec"]["forProvider"] == {"engine": "postgres", "storageGB": 20, "size": "small"}
    for child in (config, db):
        ref = child["metadata"]["ownerReferences"][0]
        assert (ref["uid"], ref["kind"], ref["controller"]) == (uid, "DatabaseApp", True)
    settle_database(env)
    result = parent.reconcile("default", "shop")
    assert result.reason == "Poll"
    assert conditions(env)["Ready"] == ("True", "SubresourcesReady")
    assert conditions(env)["DatabaseReady"] == ("True", "Ready")
    assert conditions(env)["BackupsReady"] == ("Unknown", "Initializing")
    status = env.api.get("apps.lifecycle.dev/v1beta1", "DatabaseApp", "default",
                         "shop")["status"]
    assert status["subresources"]["database"]["state"] == "ready"
    assert status["subresources"]["database"]["endpoint"].endswith(".db.simcloud.internal")
    # The managed reconciler's late-initialised version is left alone.
    assert env.get("DatabaseInstance", "shop-db")["spec"]["forProvider"]["version"] == "15"


def test_status_is_written_only_when_it_changed(world: Any) -> None:
    env, parent = world
    env.api.create(app())
    parent.reconcile("default", "shop")
    settle_database(env)
    parent.reconcile("default", "shop")
    before = env.api.writes()
    parent.reconcile("default", "shop")
    parent.reconcile("default", "shop")
    assert env.api.writes() == before


def test_a_foreign_object_is_reported_not_owned_and_left_untouched(world: Any) -> None:
    env, parent = world
    foreign = env.api.create({"apiVersion": "v1", "kind": "ConfigMap",
                              "metadata": {"name": "shop-settings", "namespace": "default"},
                              "data": {"owner": "someone else"}})
    env.api.create(app())
    parent.reconcile("default", "shop")
    settle_database(env)
    parent.reconcile("default", "shop")
    got = conditions(env)
    assert got["SettingsReady"] == ("False", "NotOwned")
    assert got["DatabaseReady"] == ("True", "Ready")
    assert got["Ready"] == ("False", "SubresourcesNotReady")
    after = env.api.get("v1", "ConfigMap", "default", "shop-settings")
    assert after["metadata"]["resourceVersion"] == foreign["metadata"]["resourceVersion"]
    assert after["data"] == {"owner": "someone else"}
    assert any(e["reason"] == "NotOwned" and e["type"] == "Warning" for e in env.events("shop"))
    obj = env.api.get("apps.lifecycle.dev/v1beta1", "DatabaseApp", "default", "shop")
    message = next(c["message"] for c in obj["status"]["conditions"]
                   if c["type"] == "SettingsReady")
    assert "ConfigMap default/shop-settings" in message and "not owned" in message


def test_drift_of_an_owned_child_is_reverted(world: Any) -> None:
    env, parent = world
    env.api.create(app(settings={"theme": "dark"}))
    parent.reconcile("default", "shop")
    config = env.api.get("v1", "ConfigMap", "default", "shop-settings")
    config["data"] = {"theme": "light", "logLevel": "info", "added": "by hand"}
    env.api.replace(config)
    parent.reconcile("default", "shop")
    data = env.api.get("v1", "ConfigMap", "default", "shop-settings")["data"]
    assert data == {"theme": "dark", "logLevel": "info", "added": "by hand"}


def test_a_spec_change_reaches_the_child(world: Any) -> None:
    env, parent = world
    env.api.create(app())
    parent.reconcile("default", "shop")
    settle_database(env)
    obj = env.api.get("apps.lifecycle.dev/v1beta1", "DatabaseApp", "default", "shop")
    obj["spec"] = {"database": {"storageGB": 40}}
    env.api.replace(obj)
    parent.reconcile("default", "shop")
    assert env.get("DatabaseInstance", "shop-db")["spec"]["forProvider"]["storageGB"] == 40
    settle_database(env)
    external = env.get("DatabaseInstance", "shop-db")["metadata"]["annotations"][
        "lifecycle.dev/external-name"]
    assert env.cloud.instances()[external]["storage_gb"] == 40


def test_an_older_stored_version_is_converted_up_in_memory(world: Any) -> None:
    env, parent = world
    stored = env.api.create(app(version="v1alpha1", dbSize=50))
    parent.reconcile("default", "shop")
    db = env.get("DatabaseInstance", "shop-db")
    assert db["spec"]["forProvider"]["storageGB"] == 50
    assert db["metadata"]["ownerReferences"][0]["apiVersion"] == "apps.lifecycle.dev/v1alpha1"
    obj = env.api.get("apps.lifecycle.dev/v1alpha1", "DatabaseApp", "default", "shop")
    assert obj["spec"] == {"dbSize": 50}  # conversion and defaults are never written back
    assert obj["metadata"]["generation"] == stored["metadata"]["generation"]
    assert "DatabaseReady" in conditions(env, "v1alpha1")


def test_a_parent_being_deleted_is_ignored(world: Any) -> None:
    env, parent = world
    obj = app()
    obj["metadata"]["finalizers"] = ["example.dev/keep"]
    env.api.create(obj)
    env.api.delete("apps.lifecycle.dev/v1beta1", "DatabaseApp", "default", "shop")
    result = parent.reconcile("default", "shop")
    assert (result.kind, result.reason) == (ResultKind.DONE, "Deleting")
    assert env.api.list("v1", "ConfigMap", "default")[0] == []


def test_a_missing_parent_is_done(world: Any) -> None:
    _, parent = world
    result = parent.reconcile("default", "nothing")
    assert (result.kind, result.reason) == (ResultKind.DONE, "NotFound")
