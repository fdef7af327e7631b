"""Claims on the harness: claim and class kinds, a claim reconciler and an informer.

:class:`ClaimEnvironment` adds claims to a :class:`lifecycle.testing.Environment`:
it serves the claim and class kinds from their generated CRDs in the
environment's embedded API, runs a :class:`~lifecycle.runtime.claims.ClaimReconciler`
on the same work queue as the managed reconciler, and follows every reconcile with a
:class:`ClaimInformer` sync, which stands in for the watches a real
controller has. The manifest builders make the bundled database claim and
class by default; pass another kind to build others.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from lifecycle.core import objects
from lifecycle.core.claims import (
    CLAIM_NAME,
    CLAIM_NAMESPACE,
    DEFAULT_CLASS,
    DEFAULT_RESOURCE_NAMESPACE,
    ClaimBinding,
    ClassKind,
)
from lifecycle.core.kind import Kind
from lifecycle.core.values import Result
from lifecycle.kube.errors import NotFound
from lifecycle.runtime.claims import ClaimReconciler
from lifecycle.schema.crds import crd
from lifecycle.sim.crds import apply_crd

if TYPE_CHECKING:
    from lifecycle.testing.harness import Environment, Step

__all__ = [
    "CLAIM_NAME",
    "CLAIM_NAMESPACE",
    "ClaimEnvironment",
    "ClaimInformer",
    "claim_manifest",
    "class_manifest",
]

#: ``apiVersion`` and ``kind`` of the bundled database class and claim, the builders' default.
DATABASE_CLASS = ("db.lifecycle.dev/v1alpha1", "DatabaseInstanceClass")
DATABASE_CLAIM = ("claims.lifecycle.dev/v1alpha1", "DatabaseClaim")


class ClaimInformer:
    """Maps changes of managed resources and their connection Secrets to work-queue keys.

    It stands in for the watches of a real controller (the managed kind's,
    and the connection Secrets'): each :meth:`sync` lists both kinds,
    compares resourceVersions with the last sync, and enqueues the managed
    resource (on creation, a generation change or a deletion request: the
    engine's event filters) and the claim its ``spec.claimRef`` names (on any
    change, including a rotated connection Secret). Listing keeps it
    deterministic on the virtual clock; it is for the harness, not for
    production scale.
    """

    def __init__(self, api: Any, binding: ClaimBinding,
                 enqueue: Callable[[str, str, str | None], None]) -> None:
        self.api = api
        self.binding = binding
        self.enqueue = enqueue
        self._resources: dict[tuple[str, str], tuple[str, int, bool, tuple[str, str] | None]] = {}
        self._secrets: dict[tuple[str, str], str] = {}

    def sync(self) -> None:
        """Enqueue the keys affected by changes since the last sync."""
        managed = self.binding.managed
        claim_kind = self.binding.claim.kind
        items, _ = self.api.list(managed.api_version, managed.kind)
        seen: dict[tuple[str, str], tuple[str, int, bool, tuple[str, str] | None]] = {}
        owners: dict[str, tuple[str, str] | None] = {}
        for obj in items:
            meta = obj["metadata"]
            key = (meta.get("namespace") or "", meta["name"])
            ref = objects.spec(obj).get("claimRef") or {}
            claim = (ref["namespace"], ref["name"]) if ref.get("name") else None
            now_ = (meta["resourceVersion"], meta.get("generation", 1),
                    bool(meta.get("deletionTimestamp")), claim)
            seen[key] = now_
            owners[meta["uid"]] = claim
            before = self._resources.get(key)
            if before == now_:
                continue
            if before is None or before[1] != now_[1] or before[2] != now_[2]:
                self.enqueue(managed.kind, key[1], key[0] or None)
            for c in {claim, before[3] if before else None}:
                if c is not None:
                    self.enqueue(claim_kind, c[1], c[0])
        for key, before in self._resources.items():
            if key not in seen and before[3] is not None:
                self.enqueue(claim_kind, before[3][1], before[3][0])
        self._resources = seen
        secrets, _ = self.api.list("v1", "Secret")
        versions: dict[tuple[str, str], str] = {}
        for secret in secrets:
            meta = secret["metadata"]
            owner = next((r["uid"] for r in meta.get("ownerReferences") or []
                          if r.get("controller") and r.get("kind") == managed.kind), None)
            if owner is None:
                continue
            key = (meta["namespace"], meta["name"])
            versions[key] = meta["resourceVersion"]
            claim = owners.get(owner)
            if self._secrets.get(key) != versions[key] and claim is not None:
                self.enqueue(claim_kind, claim[1], claim[0])
        self._secrets = versions


class _Informed:
    """A reconciler whose every pass is followed by an informer sync."""

    def __init__(self, inner: Any, informer: ClaimInformer) -> None:
        self.inner = inner
        self.informer = informer

    def reconcile(self, namespace: str | None, name: str) -> Result:
        try:
            return self.inner.reconcile(namespace, name)
        finally:
            self.informer.sync()


def class_manifest(
    name: str,
    *,
    labels: Mapping[str, str] | None = None,
    default: bool = False,
    reclaim_policy: str = "Delete",
    resource_namespace: str | None = None,
    provider_config: str = "default",
    class_kind: ClassKind | None = None,
    **for_provider: Any,
) -> dict[str, Any]:
    """A resource class manifest (``DatabaseInstanceClass`` unless ``class_kind`` is given).

    ``for_provider`` fields are laid over a PostgreSQL template of 20 GB.
    """
    api_version, kind = (DATABASE_CLASS if class_kind is None
                         else (class_kind.api_version, class_kind.kind))
    template: dict[str, Any] = {
        "forProvider": {"engine": "postgres", "storageGB": 20, **for_provider},
        "providerConfigRef": {"name": provider_config},
        "reclaimPolicy": reclaim_policy,
    }
    if resource_namespace is not None:
        template["resourceNamespace"] = resource_namespace
    return {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {"name": name, "labels": dict(labels or {}),
                     "annotations": {DEFAULT_CLASS: "true"} if default else {}},
        "specTemplate": template,
    }


def claim_manifest(
    name: str,
    namespace: str = "default",
    *,
    selector: Mapping[str, str] | None = None,
    class_name: str | None = None,
    resource: tuple[str, str] | None = None,
    secret_name: str | None = None,
    claim_kind: Kind | None = None,
    **portable: Any,
) -> dict[str, Any]:
    """A claim manifest (``DatabaseClaim`` unless ``claim_kind`` is given).

    ``portable`` holds the kind's own fields, like ``engineVersion``.
    """
    api_version, kind = (DATABASE_CLAIM if claim_kind is None
                         else (claim_kind.api_version, claim_kind.kind))
    spec: dict[str, Any] = dict(portable)
    if selector is not None:
        spec["classSelector"] = {"matchLabels": dict(selector)}
    if class_name is not None:
        spec["classRef"] = {"name": class_name}
    if resource is not None:
        spec["resourceRef"] = {"namespace": resource[0], "name": resource[1]}
    if secret_name is not None:
        spec["writeConnectionSecretToRef"] = {"name": secret_name}
    return {"apiVersion": api_version, "kind": kind,
            "metadata": {"name": name, "namespace": namespace}, "spec": spec}


class ClaimEnvironment:
    """A harness :class:`~lifecycle.testing.Environment` with claims, classes and an informer.

    Composition only: installs the CRDs of the claim and class kinds of
    ``binding`` in the environment's API (so pruning and validation apply),
    adds the claim reconciler to its work queue beside the managed
    reconciler, and follows every reconcile with an informer sync. The
    environment must already run the binding's managed kind.
    """

    def __init__(self, env: Environment, binding: ClaimBinding) -> None:
        self.env = env
        self.api = env.api
        self.binding = binding
        claim = binding.claim
        # Served from their generated CRDs, as on a cluster: unknown fields are
        # pruned, defaults applied and invalid objects refused (422).
        for kind in (claim, binding.resource_class):
            apply_crd(self.api, crd(kind))
        env.namespace(DEFAULT_RESOURCE_NAMESPACE)
        # The claim reconciler meets the environment's API faults, as the managed one does.
        self.reconciler = ClaimReconciler(env.operator_api, binding, clock=env.clock.now)
        self.informer = ClaimInformer(self.api, binding, self._enqueue)
        env.kinds[claim.kind] = claim
        env.reconcilers[claim.kind] = _Informed(self.reconciler, self.informer)
        managed = binding.managed.kind
        env.reconcilers[managed] = _Informed(env.reconcilers[managed], self.informer)

    def _enqueue(self, kind: str, name: str, namespace: str | None) -> None:
        self.env.enqueue(kind, name, namespace)

    def apply_class(self, manifest: Mapping[str, Any]) -> dict[str, Any]:
        """Create or replace a resource class (cluster-scoped; nothing to enqueue)."""
        kind = self.binding.resource_class
        name = manifest["metadata"]["name"]
        try:
            current = self.api.get(kind.api_version, kind.kind, None, name)
        except NotFound:
            return self.api.create(dict(manifest))
        return self.api.replace({**manifest, "metadata": {**current["metadata"],
                                                          **manifest["metadata"]}})

    def apply(self, manifest: Mapping[str, Any]) -> dict[str, Any]:
        """Apply a claim (or any object the environment knows) and enqueue it."""
        return self.env.apply(manifest)

    def run(self, max_steps: int = 10_000, **options: Any) -> list[Step]:
        """Sync the informer, then run the work queue until only Ready polls remain.

        ``options`` (``horizon``, ``max_attempts``) go to
        :meth:`Environment.run_until_idle`, which raises ``NotSettled`` the same way.
        """
        self.informer.sync()
        return self.env.run_until_idle(max_steps=max_steps, **options)

    def advance(self, seconds: float) -> list[Step]:
        """Sync the informer, then run whatever falls due in the next ``seconds``.

        For flows that never go idle (a claim retrying an error every few seconds).
        """
        self.informer.sync()
        return self.env.advance(seconds)

    def claim(self, name: str, namespace: str = "default") -> dict[str, Any]:
        """The claim as stored."""
        return self.env.get(self.binding.claim.kind, name, namespace)

    def resource_of(self, name: str, namespace: str = "default") -> dict[str, Any] | None:
        """The managed resource the claim names, if it exists."""
        ref = objects.spec(self.claim(name, namespace)).get("resourceRef")
        if not ref:
            return None
        return self.reconciler.get_resource(ref.get("namespace", namespace), ref["name"])

    def claim_secret(self, name: str, namespace: str = "default") -> dict[str, str] | None:
        """The claim's propagated connection Secret, decoded, or None."""
        claim = self.claim(name, namespace)
        try:
            return self.env.secret(self.reconciler.claim_secret_name(claim), namespace)
        except NotFound:
            return None
