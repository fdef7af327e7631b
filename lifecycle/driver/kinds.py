"""What the operator runs for each kind: its reconciler and the extra watches it needs.

The manager runs one controller per *target*, and this module is the one
place that decides what a target gets (:func:`controller_spec`):

* a managed :class:`~lifecycle.core.kind.Kind` runs the engine's
  :class:`~lifecycle.runtime.reconciler.Reconciler` with its connector, and
  watches nothing else;
* a :class:`~lifecycle.core.claims.ClaimBinding` (a claim kind with its class
  and managed kinds) runs a :class:`~lifecycle.runtime.claims.ClaimReconciler`
  and also watches the managed kind (a change queues the claim its
  ``spec.claimRef`` or its provisioning labels name) and the class kind (a
  change queues the claims naming the class and those not yet scheduled);
* a :class:`~lifecycle.runtime.children.ParentKind` runs a
  :class:`~lifecycle.runtime.children.ParentReconciler` and watches every
  child type it names (``OwnedChild.api_version`` and ``kind``): a change
  queues the parent of the child's controlling owner reference, as
  controller-runtime's ``Owns()`` does. Children of the core group
  (ConfigMaps, Secrets) are not watched; the parent polls them.

A resource class kind is never a target: it has no reconciler, only a CRD and
readers. :func:`served_kinds` lists every kind a set of targets needs served
(so the claim's class and managed kinds get their CRDs), and
:func:`register_types` tells a cluster adapter where each lives.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import attrs

from lifecycle.core.claims import CLAIM_NAME, CLAIM_NAMESPACE, ClaimBinding, ClassKind
from lifecycle.core.contract import Connector
from lifecycle.core.kind import Kind
from lifecycle.core.objects import labels, metadata, spec
from lifecycle.core.parents import ParentKind
from lifecycle.core.requeue import Reconciles
from lifecycle.driver.cluster import KubeCluster, ResourceInfo
from lifecycle.runtime.children import ParentReconciler
from lifecycle.runtime.claims import ClaimReconciler
from lifecycle.runtime.reconciler import Reconciler

__all__ = ["ControllerSpec", "Reconciles", "Target", "Watch", "controller_spec",
           "engine_reconciler", "owner_keys", "register_types", "served_kinds"]

Key = tuple[str | None, str]
#: What a controller runs for: a managed kind, a claim binding or a parent kind.
Target = Kind | ClaimBinding | ParentKind


def engine_reconciler(cluster: Any, kind: Kind, connector: Connector,
                      options: Any) -> Reconciles:
    """The engine's :class:`~lifecycle.runtime.reconciler.Reconciler` for one managed kind."""
    return Reconciler(cluster, kind, connector, operator_id=options.operator_id,
                      default_policy=options.default_policy, reads_ttl=options.reads_ttl,
                      allow_cross_namespace_secrets=options.allow_cross_namespace_secrets,
                      allow_adoption=frozenset(getattr(options, "allow_adoption", ())),
                      journal_key=getattr(options, "journal_key", None))


@attrs.frozen
class Watch:
    """A secondary kind whose changes queue keys of the controller's own kind.

    ``keys(obj, cached)`` returns the keys to queue for a changed object;
    ``cached()`` gives the controller's cached objects of its own kind.
    ``all_namespaces`` watches every namespace even when the operator watches
    one (managed resources provisioned for claims live in their own namespace).
    """

    api_version: str
    kind: str
    keys: Callable[[dict[str, Any], Callable[[], Iterable[dict[str, Any]]]], Iterable[Key]]
    all_namespaces: bool = False


@attrs.frozen
class ControllerSpec:
    """One controller: the kind it lists and watches, its reconciler, its extra watches."""

    name: str
    api_version: str
    kind: str
    reconciler: Reconciles
    watches: tuple[Watch, ...] = ()


# ---------------------------------------------------------------- key maps
def _claim_of_resource(claim: Kind) -> Callable[..., Iterable[Key]]:
    """The claim a managed resource points at (``spec.claimRef``) or was provisioned for."""
    def keys(obj: dict[str, Any], cached: Callable[[], Iterable[dict[str, Any]]]) -> Iterable[Key]:
        ref = spec(obj).get("claimRef")
        if isinstance(ref, dict) and ref.get("name") and ref.get("kind", claim.kind) == claim.kind:
            yield (str(ref.get("namespace") or "") or None, str(ref["name"]))
        found = labels(obj)
        if found.get(CLAIM_NAME) and found.get(CLAIM_NAMESPACE):
            yield (str(found[CLAIM_NAMESPACE]), str(found[CLAIM_NAME]))
    return keys


def _claims_of_class(obj: dict[str, Any],
                     cached: Callable[[], Iterable[dict[str, Any]]]) -> Iterable[Key]:
    """Claims naming the class, and claims not yet scheduled to any class."""
    name = metadata(obj).get("name")
    for claim in cached():
        claim_spec = spec(claim)
        named = claim_spec.get("classRef")
        if (isinstance(named, dict) and named.get("name") == name) or (
                not named and not claim_spec.get("resourceRef")):
            meta = metadata(claim)
            yield (meta.get("namespace") or None, str(meta.get("name", "")))


def owner_keys(kind: ParentKind) -> Callable[..., Iterable[Key]]:
    """The parent named by a child's controlling owner reference of ``kind``."""
    def keys(obj: dict[str, Any], cached: Callable[[], Iterable[dict[str, Any]]]) -> Iterable[Key]:
        meta = metadata(obj)
        for ref in meta.get("ownerReferences") or []:
            group = str(ref.get("apiVersion", "")).rpartition("/")[0]
            if ref.get("controller") and ref.get("kind") == kind.kind and group == kind.group:
                yield (meta.get("namespace") if kind.namespaced else None, str(ref["name"]))
    return keys


# ---------------------------------------------------------------- choice
def controller_spec(cluster: Any, target: Target, connector: Connector | None, options: Any,
                    managed: Callable[[Any, Kind, Connector, Any], Reconciles] = engine_reconciler
                    ) -> ControllerSpec:
    """The reconciler and watches of one target (see the module's table).

    ``managed`` builds a managed kind's reconciler (the engine's by default);
    a managed kind needs a connector, claims and parents take none.
    """
    if isinstance(target, ClaimBinding):
        claim, managed_kind, class_kind = target.claim, target.managed, target.resource_class
        return ControllerSpec(
            claim.kind.lower(), claim.api_version, claim.kind,
            ClaimReconciler(cluster, target),
            (Watch(managed_kind.api_version, managed_kind.kind, _claim_of_resource(claim),
                   all_namespaces=True),
             Watch(class_kind.api_version, class_kind.kind, _claims_of_class,
                   all_namespaces=True)))
    if isinstance(target, ParentKind):
        watches = tuple(Watch(c.api_version, c.kind, owner_keys(target))
                        for c in target.children if c.api_version and c.kind
                        and "/" in c.api_version)
        return ControllerSpec(target.kind.lower(), target.latest, target.kind,
                              ParentReconciler(cluster, target), _unique(watches))
    if not isinstance(target, Kind) or getattr(target.machine, "is_claim", False):
        raise TypeError(f"{getattr(target, 'kind', target)!r}: a claim kind runs through its "
                        f"ClaimBinding; expected a managed Kind, a ClaimBinding or a ParentKind")
    if connector is None:
        raise ValueError(f"{target.kind} needs a connector")
    return ControllerSpec(target.kind.lower(), target.api_version, target.kind,
                          managed(cluster, target, connector, options))


def _unique(watches: Sequence[Watch]) -> tuple[Watch, ...]:
    seen: dict[tuple[str, str], Watch] = {}
    for watch in watches:
        seen.setdefault((watch.api_version, watch.kind), watch)
    return tuple(seen.values())


def served_kinds(targets: Iterable[Target]) -> list[Kind | ClassKind | ParentKind]:
    """Every kind the targets need served, each once: a claim brings its class and managed kind."""
    out: list[Kind | ClassKind | ParentKind] = []
    for target in targets:
        found: list[Kind | ClassKind | ParentKind] = (
            [target.claim, target.resource_class, target.managed]
            if isinstance(target, ClaimBinding) else [target])
        out += [k for k in found if not any(k is o or (k.kind, k.group) == (o.kind, o.group)
                                            for o in out)]
    return out


def register_types(cluster: Any, targets: Iterable[Target]) -> None:
    """Tell a :class:`~lifecycle.driver.cluster.KubeCluster` where every served kind lives.

    A wrapper holding one as ``cluster`` (the cached reader) is looked through;
    other clusters (the embedded API in process) know their kinds already.
    """
    inner = cluster if isinstance(cluster, KubeCluster) else getattr(cluster, "cluster", None)
    if not isinstance(inner, KubeCluster):
        return
    register = inner.register
    for kind in served_kinds(targets):
        if isinstance(kind, ParentKind):
            for version in kind.versions:
                register(ResourceInfo(kind.group, version.name, kind.kind, kind.plural,
                                      kind.namespaced))
        else:
            register(ResourceInfo(kind.group, kind.version, kind.kind, kind.plural,
                                  getattr(kind, "namespaced", False)))
