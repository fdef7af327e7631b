"""What each controller target gets: its reconciler, its extra watches and their key maps.

Everything here is decided without a cluster: :func:`controller_spec` is
called with a stand-in cluster object, and the key maps of the watches are
plain functions of a changed object and the controller's cached objects.
"""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from lifecycle.core.claims import CLAIM_NAME, CLAIM_NAMESPACE, ClassKind
from lifecycle.core.decide import ReconcilePolicy
from lifecycle.core.parents import OwnedChild, ParentKind, Version
from lifecycle.driver.cluster import KubeCluster, ResourceInfo, api_client
from lifecycle.driver.kinds import (
    ControllerSpec,
    Watch,
    controller_spec,
    engine_reconciler,
    owner_keys,
    register_types,
    served_kinds,
)
from lifecycle.driver.manager import ManagerOptions
from lifecycle.machines.claim import DATABASE_BINDING, DatabaseClaim, DatabaseInstanceClass
from lifecycle.machines.database import DatabaseInstance
from lifecycle.providers.simcloud import DatabaseConnector, SimCloud
from lifecycle.runtime.children import ParentReconciler
from lifecycle.runtime.claims import ClaimReconciler
from lifecycle.runtime.reconciler import Reconciler
from lifecycle.testing.claims import claim_manifest

CLUSTER = object()


def _build(parent: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}


APP = ParentKind(
    group="apps.example.org", kind="App", plural="apps",
    versions=(Version("v1alpha1", up=lambda obj: dict(obj)), Version("v1")),
    children=(
        OwnedChild("settings", _build, api_version="v1", kind="ConfigMap"),
        OwnedChild("db", _build, api_version="db.lifecycle.dev/v1alpha1",
                   kind="DatabaseInstance"),
        OwnedChild("replica", _build, api_version="db.lifecycle.dev/v1alpha1",
                   kind="DatabaseInstance"),
        OwnedChild("cache", _build, api_version="cache.example.org/v1", kind="Cache"),
        OwnedChild("untyped", _build),
        OwnedChild("no-kind", _build, api_version="x.example.org/v1"),
        OwnedChild("no-version", _build, kind="Thing"),
    ))
GLOBAL = ParentKind(group="apps.example.org", kind="Global", plural="globals",
                    versions=(Version("v1"),), children=(), namespaced=False)


def ref(kind: str = "App", api_version: str = "apps.example.org/v1", name: str = "shop",
        controller: Any = True) -> dict[str, Any]:
    """An owner reference."""
    return {"apiVersion": api_version, "kind": kind, "name": name, "uid": "u",
            "controller": controller}


# ---------------------------------------------------------------- engine reconciler


@attrs.frozen
class Options:
    """Just the options the engine's reconciler reads, without ``allow_adoption``."""

    operator_id: str | None = "op-1"
    default_policy: ReconcilePolicy = ReconcilePolicy.SKIP
    reads_ttl: float = 7.5
    allow_cross_namespace_secrets: bool = True


def test_the_engine_reconciler_takes_every_option_it_reads() -> None:
    connector = DatabaseConnector(SimCloud())
    opts = ManagerOptions(operator_id="op-2", default_policy=ReconcilePolicy.SKIP,
                          reads_ttl=3.25, allow_cross_namespace_secrets=True,
                          allow_adoption=frozenset({"team-a", "team-b"}))
    built = engine_reconciler(CLUSTER, DatabaseInstance, connector, opts)
    assert isinstance(built, Reconciler)
    assert built.api is CLUSTER and built.kind is DatabaseInstance
    assert built.connector is connector
    assert built.operator_id == "op-2"
    assert built.default_policy is ReconcilePolicy.SKIP
    assert built.reads.ttl == 3.25
    assert built.allow_cross_namespace_secrets is True
    assert built.allow_adoption == frozenset({"team-a", "team-b"})

    defaults = engine_reconciler(CLUSTER, DatabaseInstance, connector, ManagerOptions())
    assert defaults.operator_id is None
    assert defaults.default_policy is ReconcilePolicy.MANAGE
    assert defaults.reads.ttl == 5.0
    assert defaults.allow_cross_namespace_secrets is False
    assert defaults.allow_adoption == frozenset()


def test_options_without_allow_adoption_adopt_nowhere() -> None:
    built = engine_reconciler(CLUSTER, DatabaseInstance, DatabaseConnector(SimCloud()),
                              Options())
    assert built.allow_adoption == frozenset()
    assert built.operator_id == "op-1" and built.reads.ttl == 7.5
    assert built.default_policy is ReconcilePolicy.SKIP
    assert built.allow_cross_namespace_secrets is True
    listed = engine_reconciler(CLUSTER, DatabaseInstance, DatabaseConnector(SimCloud()),
                               ManagerOptions(allow_adoption=["*"]))  # type: ignore[arg-type]
    assert listed.allow_adoption == frozenset({"*"})
    assert isinstance(listed.allow_adoption, frozenset)


# ---------------------------------------------------------------- managed kinds


def test_a_managed_kind_runs_the_factory_s_reconciler_and_watches_nothing() -> None:
    calls: list[tuple[Any, ...]] = []
    marker = object()

    def factory(cluster: Any, kind: Any, connector: Any, options: Any) -> Any:
        calls.append((cluster, kind, connector, options))
        return marker

    connector = DatabaseConnector(SimCloud())
    opts = ManagerOptions()
    spec = controller_spec(CLUSTER, DatabaseInstance, connector, opts, factory)
    assert spec == ControllerSpec("databaseinstance", "db.lifecycle.dev/v1alpha1",
                                  "DatabaseInstance", marker)  # type: ignore[arg-type]
    assert spec.watches == ()
    assert len(calls) == 1
    assert calls[0][0] is CLUSTER and calls[0][1] is DatabaseInstance
    assert calls[0][2] is connector and calls[0][3] is opts


def test_a_managed_kind_defaults_to_the_engine_reconciler() -> None:
    connector = DatabaseConnector(SimCloud())
    spec = controller_spec(CLUSTER, DatabaseInstance, connector,
                           ManagerOptions(operator_id="x"))
    assert isinstance(spec.reconciler, Reconciler)
    assert spec.reconciler.connector is connector and spec.reconciler.operator_id == "x"


def test_a_managed_kind_without_a_connector_and_other_targets_are_refused() -> None:
    with pytest.raises(ValueError) as missing:
        controller_spec(CLUSTER, DatabaseInstance, None, ManagerOptions())
    assert str(missing.value) == "DatabaseInstance needs a connector"
    with pytest.raises(TypeError) as claim:
        controller_spec(CLUSTER, DatabaseClaim, DatabaseConnector(SimCloud()), ManagerOptions())
    assert str(claim.value) == (
        "'DatabaseClaim': a claim kind runs through its ClaimBinding; expected a managed "
        "Kind, a ClaimBinding or a ParentKind")
    with pytest.raises(TypeError) as klass:
        controller_spec(CLUSTER, DatabaseInstanceClass, None, ManagerOptions())  # type: ignore[arg-type]
    assert str(klass.value).startswith("'DatabaseInstanceClass': a claim kind runs through")
    with pytest.raises(TypeError) as plain:
        controller_spec(CLUSTER, "nothing", None, ManagerOptions())  # type: ignore[arg-type]
    assert str(plain.value).startswith("'nothing': a claim kind")


# ---------------------------------------------------------------- claims


def test_a_claim_binding_runs_the_claim_reconciler_and_watches_instances_and_classes() -> None:
    spec = controller_spec(CLUSTER, DATABASE_BINDING, None, ManagerOptions())
    assert (spec.name, spec.api_version, spec.kind) == (
        "databaseclaim", "claims.lifecycle.dev/v1alpha1", "DatabaseClaim")
    assert isinstance(spec.reconciler, ClaimReconciler)
    assert spec.reconciler.binding is DATABASE_BINDING
    assert spec.reconciler.store.api is CLUSTER
    assert [(w.api_version, w.kind, w.all_namespaces) for w in spec.watches] == [
        ("db.lifecycle.dev/v1alpha1", "DatabaseInstance", True),
        ("db.lifecycle.dev/v1alpha1", "DatabaseInstanceClass", True)]


def _instance_keys(obj: dict[str, Any]) -> list[tuple[str | None, str]]:
    on_instances = controller_spec(CLUSTER, DATABASE_BINDING, None, ManagerOptions()).watches[0]
    return list(on_instances.keys(obj, lambda: []))


@pytest.mark.parametrize(("claim_ref", "labels", "keys"), [
    ({"kind": "DatabaseClaim", "namespace": "team-a", "name": "orders"}, None,
     [("team-a", "orders")]),
    ({"namespace": "team-a", "name": "orders"}, None, [("team-a", "orders")]),
    ({"kind": "CacheClaim", "namespace": "team-a", "name": "orders"}, None, []),
    ({"kind": "DatabaseClaim", "namespace": "team-a"}, None, []),
    ({"kind": "DatabaseClaim", "namespace": "team-a", "name": ""}, None, []),
    ({"kind": "DatabaseClaim", "name": "orders"}, None, [(None, "orders")]),
    ({"kind": "DatabaseClaim", "namespace": "", "name": "orders"}, None, [(None, "orders")]),
    ({"kind": "DatabaseClaim", "namespace": None, "name": "orders"}, None,
     [(None, "orders")]),
    ({"namespace": 7, "name": 8}, None, [("7", "8")]),
    ("team-a/orders", None, []),
    (None, {CLAIM_NAME: "web", CLAIM_NAMESPACE: "team-b"}, [("team-b", "web")]),
    (None, {CLAIM_NAME: "web"}, []),
    (None, {CLAIM_NAMESPACE: "team-b"}, []),
    (None, {CLAIM_NAME: "", CLAIM_NAMESPACE: "team-b"}, []),
    (None, {CLAIM_NAME: "web", CLAIM_NAMESPACE: ""}, []),
    ({"namespace": "team-a", "name": "orders"}, {CLAIM_NAME: "web", CLAIM_NAMESPACE: "team-b"},
     [("team-a", "orders"), ("team-b", "web")]),
])
def test_a_managed_resource_queues_the_claim_it_points_at_or_was_made_for(
        claim_ref: Any, labels: dict[str, str] | None,
        keys: list[tuple[str | None, str]]) -> None:
    obj: dict[str, Any] = {"metadata": {"name": "i", "namespace": "elsewhere"}}
    if claim_ref is not None:
        obj["spec"] = {"claimRef": claim_ref}
    if labels is not None:
        obj["metadata"]["labels"] = labels
    assert _instance_keys(obj) == keys


def test_a_claim_key_s_parts_are_strings() -> None:
    [key] = _instance_keys({"metadata": {"labels": {CLAIM_NAME: 5, CLAIM_NAMESPACE: 6}}})
    assert key == ("6", "5")
    [key] = _instance_keys({"spec": {"claimRef": {"namespace": "n", "name": 9}}})
    assert key == ("n", "9")


def test_a_class_queues_the_claims_naming_it_and_those_not_yet_scheduled() -> None:
    on_classes = controller_spec(CLUSTER, DATABASE_BINDING, None, ManagerOptions()).watches[1]
    claims = [claim_manifest("named", "a", class_name="gold"),
              claim_manifest("other", "a", class_name="silver"),
              claim_manifest("unscheduled", "b", selector={"tier": "gold"}),
              claim_manifest("static", "b", resource=("ns", "db")),
              claim_manifest("bound", "c", class_name="gold", resource=("ns", "db2")),
              {"metadata": {"name": "cluster-wide", "namespace": ""},
               "spec": {"classRef": {"name": "gold"}}},
              {"metadata": {"namespace": "d"}, "spec": {"classRef": {"name": "gold"}}},
              {"metadata": {"name": "odd", "namespace": "e"}, "spec": {"classRef": "gold"}},
              {"metadata": {"name": "empty", "namespace": "e"}, "spec": {"classRef": {}}}]
    asked: list[int] = []

    def cached() -> list[dict[str, Any]]:
        asked.append(1)
        return claims

    assert list(on_classes.keys({"metadata": {"name": "gold"}}, cached)) == [
        ("a", "named"), ("b", "unscheduled"), ("c", "bound"), (None, "cluster-wide"),
        ("d", ""), ("e", "empty")]
    assert asked == [1]
    assert list(on_classes.keys({"metadata": {"name": "silver"}}, lambda: claims)) == [
        ("a", "other"), ("b", "unscheduled"), ("e", "empty")]
    assert list(on_classes.keys({"metadata": {"name": "gold"}}, list)) == []


# ---------------------------------------------------------------- parents


def test_a_parent_watches_each_typed_non_core_child_kind_once() -> None:
    spec = controller_spec(CLUSTER, APP, None, ManagerOptions())
    assert (spec.name, spec.api_version, spec.kind) == ("app", "apps.example.org/v1", "App")
    assert isinstance(spec.reconciler, ParentReconciler)
    assert spec.reconciler.kind is APP and spec.reconciler.api is CLUSTER
    assert [(w.api_version, w.kind, w.all_namespaces) for w in spec.watches] == [
        ("db.lifecycle.dev/v1alpha1", "DatabaseInstance", False),
        ("cache.example.org/v1", "Cache", False)]
    child = {"metadata": {"name": "c", "namespace": "ns", "ownerReferences": [ref()]}}
    assert [list(w.keys(child, list)) for w in spec.watches] == [[("ns", "shop")]] * 2
    bare = controller_spec(CLUSTER, GLOBAL, None, ManagerOptions())
    assert bare.watches == () and bare.api_version == "apps.example.org/v1"
    assert bare.name == "global"


@pytest.mark.parametrize(("refs", "keys"), [
    ([ref()], [("ns", "shop")]),
    ([ref(controller=False)], []),
    ([ref(controller=None)], []),
    ([{k: v for k, v in ref().items() if k != "controller"}], []),
    ([ref(kind="Other")], []),
    ([ref(api_version="other.example.org/v1")], []),
    ([ref(api_version="apps.example.org/v1alpha1")], [("ns", "shop")]),
    ([ref(api_version="v1")], []),
    ([{k: v for k, v in ref().items() if k != "apiVersion"}], []),
    ([ref(name="a"), ref(name="b", controller=False), ref(name="c")], [("ns", "a"), ("ns", "c")]),
    (None, []),
    ([], []),
])
def test_a_child_queues_the_parent_of_its_controlling_owner_reference(
        refs: list[dict[str, Any]] | None, keys: list[tuple[str | None, str]]) -> None:
    meta: dict[str, Any] = {"name": "c", "namespace": "ns"}
    if refs is not None:
        meta["ownerReferences"] = refs
    assert list(owner_keys(APP)({"metadata": meta}, list)) == keys


def test_a_cluster_scoped_parent_s_key_has_no_namespace_and_a_core_parent_no_group() -> None:
    child = {"metadata": {"name": "c", "namespace": "ns", "ownerReferences": [
        ref(kind="Global", name="g")]}}
    assert list(owner_keys(GLOBAL)(child, list)) == [(None, "g")]
    core = attrs.evolve(GLOBAL, group="", kind="Node")
    node_child = {"metadata": {"name": "c", "ownerReferences": [
        ref(kind="Node", api_version="v1", name="n1"),
        ref(kind="Node", api_version="x/v1", name="n2")]}}
    assert list(owner_keys(core)(node_child, list)) == [(None, "n1")]
    no_namespace = {"metadata": {"name": "c", "ownerReferences": [ref()]}}
    assert list(owner_keys(APP)(no_namespace, list)) == [(None, "shop")]
    numbered = {"metadata": {"namespace": "ns", "ownerReferences": [ref(name=12)]}}  # type: ignore[arg-type]
    assert list(owner_keys(APP)(numbered, list)) == [("ns", "12")]


def test_watch_and_spec_defaults() -> None:
    watch = Watch("v1", "X", lambda obj, cached: ())
    assert watch.all_namespaces is False
    assert ControllerSpec("x", "v1", "X", object()).watches == ()  # type: ignore[arg-type]


# ---------------------------------------------------------------- served kinds


def test_served_kinds_lists_each_kind_once_a_claim_bringing_its_class_and_managed_kind() -> None:
    assert served_kinds([DATABASE_BINDING]) == [DatabaseClaim, DatabaseInstanceClass,
                                                DatabaseInstance]
    assert served_kinds([DatabaseInstance, DATABASE_BINDING, APP, DatabaseInstance]) == [
        DatabaseInstance, DatabaseClaim, DatabaseInstanceClass, APP]
    renamed = attrs.evolve(DatabaseInstance, version="v1", plural="other")
    assert served_kinds([DatabaseInstance, renamed]) == [DatabaseInstance]
    other_group = attrs.evolve(DatabaseInstance, group="other.example.org")
    assert served_kinds([DatabaseInstance, other_group]) == [DatabaseInstance, other_group]
    other_kind = attrs.evolve(DatabaseInstance, kind="Other")
    assert served_kinds([DatabaseInstance, other_kind]) == [DatabaseInstance, other_kind]
    assert served_kinds([]) == []


# ---------------------------------------------------------------- register types


def _kube() -> KubeCluster:
    return KubeCluster(api_client(host="http://127.0.0.1:9"))


@attrs.define
class Wrapper:
    """A cached reader's shape: the real cluster as ``cluster``."""

    cluster: Any


def test_register_types_tells_a_kube_cluster_where_each_served_kind_lives() -> None:
    kube = _kube()
    before = dict(kube._infos)
    register_types(kube, [DATABASE_BINDING, APP, GLOBAL])
    added = {k: v for k, v in kube._infos.items() if k not in before}
    assert added == {
        ("claims.lifecycle.dev/v1alpha1", "DatabaseClaim"): ResourceInfo(
            "claims.lifecycle.dev", "v1alpha1", "DatabaseClaim", "databaseclaims", True),
        ("db.lifecycle.dev/v1alpha1", "DatabaseInstanceClass"): ResourceInfo(
            "db.lifecycle.dev", "v1alpha1", "DatabaseInstanceClass", "databaseinstanceclasses",
            False),
        ("db.lifecycle.dev/v1alpha1", "DatabaseInstance"): ResourceInfo(
            "db.lifecycle.dev", "v1alpha1", "DatabaseInstance", "databaseinstances", True),
        ("apps.example.org/v1alpha1", "App"): ResourceInfo(
            "apps.example.org", "v1alpha1", "App", "apps", True),
        ("apps.example.org/v1", "App"): ResourceInfo("apps.example.org", "v1", "App", "apps",
                                                     True),
        ("apps.example.org/v1", "Global"): ResourceInfo("apps.example.org", "v1", "Global",
                                                        "globals", False),
    }


def test_register_types_looks_through_a_wrapper_and_ignores_other_clusters() -> None:
    kube = _kube()
    before = dict(kube._infos)
    register_types(Wrapper(kube), [DatabaseInstance])
    assert set(kube._infos) - set(before) == {("db.lifecycle.dev/v1alpha1", "DatabaseInstance")}

    untouched = _kube()
    before = dict(untouched._infos)
    register_types(Wrapper(Wrapper(untouched)), [DatabaseInstance])
    register_types(Wrapper(object()), [DatabaseInstance])
    register_types(object(), [DatabaseInstance])
    assert untouched._infos == before


def test_register_types_accepts_a_class_kind_without_a_namespaced_field() -> None:
    kube = _kube()
    register_types(kube, [ClassKind("c.example.org", "v2", "Tier", "tiers")])  # type: ignore[list-item]
    assert kube._infos[("c.example.org/v2", "Tier")] == ResourceInfo(
        "c.example.org", "v2", "Tier", "tiers", False)
