"""Resource claims and classes (seed 002): scheduling, defaulting, binding, propagation.

Three kinds of object meet here:

* a **resource claim** (namespaced): an application team's portable request,
  e.g. ``DatabaseClaim``; it names a class (``spec.classRef``), asks for one
  by labels (``spec.classSelector.matchLabels``), or names an existing managed
  resource (``spec.resourceRef``);
* a **resource class** (cluster-scoped): an administrator's template of a
  managed resource's spec (``specTemplate``: ``forProvider``,
  ``providerConfigRef``, ``reclaimPolicy``, ``resourceNamespace``);
* the **managed resource** (:mod:`lifecycle.runtime.reconciler` reconciles it and
  knows nothing of claims); a bound one carries ``spec.claimRef`` pointing
  back at its claim, the single source of truth for who may use it.

One :class:`ClaimReconciler` runs the claim machine
(:class:`lifecycle.machines.claim.ClaimMachine`) through its compiled table, one event
per pass, chosen by the pure :func:`choose_claim_event` from
:class:`ClaimFacts`. Scheduling and defaulting are the machine's ``schedule``
and ``default`` events (pure choice: :func:`select_class`); dynamic
provisioning builds the managed resource with *configurators*
(:data:`Configurator`), records ``spec.resourceRef`` on the claim *before*
creating it under a name derived from the claim's uid (so a retry after a
crash adopts it instead of creating a second one), and binds when it is
Ready. Binding copies the resource's connection Secret into the claim's
namespace; every later pass of a bound claim re-syncs it, so a rotated
password reaches the claim. Propagation happens only on the ``bind`` event,
which requires the resource's ``spec.claimRef`` to carry this claim's uid.

:class:`ClaimEnvironment` adds all of this to a :class:`lifecycle.testing.Environment`
with a small informer standing in for the watches a real controller has.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

import attrs

from lifecycle.core import conditions as cond
from lifecycle.core.decide import Choice, requeue
from lifecycle.core.errors import HandledError, Severity, TerminalError, UnhandledError
from lifecycle.core.kind import FINALIZER, Kind, connection_secret_ref
from lifecycle.core.machine import LifecycleMachine, TransitionSpec, camel
from lifecycle.core.status import stuck
from lifecycle.core.values import Condition, ConditionStatus, HistoryEntry, Result, now, rfc3339
from lifecycle.kube.cluster import Cluster
from lifecycle.kube.errors import AlreadyExists, ApiError, Conflict, NotFound
from lifecycle.kube.resources import ResourceType

if TYPE_CHECKING:
    from lifecycle.testing import Environment, Step

#: Class annotation: ``"true"`` makes the class the default for claims without a selector.
DEFAULT_CLASS = "lifecycle.dev/default-class"
#: Managed-resource annotation set when a Retain reclaim releases it: ``namespace/name`` of
#: the claim it served. A released resource is never bound again until an administrator
#: removes the annotation.
RELEASED = "lifecycle.dev/released"
#: Claim-Secret annotation naming the Secret it was copied from (for people; never trusted).
PROPAGATED_FROM = "lifecycle.dev/propagated-from"
#: Labels on a dynamically provisioned managed resource naming its claim.
CLAIM_NAME = "lifecycle.dev/claim-name"
CLAIM_NAMESPACE = "lifecycle.dev/claim-namespace"
#: Annotation on a dynamically provisioned managed resource naming its class.
CLASS_NAME = "lifecycle.dev/class"
#: Where dynamically provisioned managed resources live unless the class says otherwise.
DEFAULT_RESOURCE_NAMESPACE = "lifecycle-system"

T, F = ConditionStatus.TRUE, ConditionStatus.FALSE
CONFLICT_RETRIES = 5


def _class_problem(message: str, reason: str) -> HandledError:
    """An error in the classes, which an administrator fixes: reported, then polled.

    Informational severity: the claim shows ``Synced=False`` with the
    message and looks again at its poll interval; retrying sooner cannot help.
    """
    return HandledError(message, reason=reason, severity=Severity.INFORMATIONAL)


class ReclaimPolicy(enum.StrEnum):
    """What happens to a bound managed resource when its claim is deleted."""

    DELETE = "Delete"
    RETAIN = "Retain"


# ---------------------------------------------------------------------------
# Kinds of object
# ---------------------------------------------------------------------------


@attrs.frozen
class ClassKind:
    """The API identity of a resource class kind (cluster-scoped, no status)."""

    group: str
    version: str
    kind: str
    plural: str

    @property
    def api_version(self) -> str:
        """``group/version``."""
        return f"{self.group}/{self.version}"

    def resource_type(self) -> ResourceType:
        """The type to register with an API server."""
        return ResourceType(self.group, self.version, self.kind, self.plural,
                            namespaced=False, status_subresource=False)


@attrs.frozen
class ResourceClass:
    """A parsed resource class: the template a dynamically provisioned resource is made from.

    ``reclaim_policy`` defaults to Delete (a dynamically provisioned resource
    exists only for its claim); ``resource_namespace`` is where the managed
    resource and its connection Secret are created.
    """

    name: str
    uid: str
    for_provider: Mapping[str, Any]
    provider_config: str
    reclaim_policy: ReclaimPolicy
    resource_namespace: str
    deletion_policy: str | None = None

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> ResourceClass:
        """Parse a class object; a malformed one raises :class:`HandledError` ``InvalidClass``.

        The error is retryable: an administrator fixes classes, not the claim's author.
        """
        meta = obj.get("metadata") or {}
        name = str(meta.get("name", ""))

        def bad(text: str) -> HandledError:
            return _class_problem(f"class {name!r}: {text}", "InvalidClass")

        template = obj.get("specTemplate")
        if template is None:
            template = {}
        if not isinstance(template, Mapping):
            raise bad("specTemplate must be an object")
        for_provider = template.get("forProvider")
        for_provider = {} if for_provider is None else for_provider
        if not isinstance(for_provider, Mapping):
            raise bad("specTemplate.forProvider must be an object")
        ref = template.get("providerConfigRef") or {}
        if not isinstance(ref, Mapping) or not isinstance(ref.get("name", "default"), str):
            raise bad("specTemplate.providerConfigRef must be {name: <string>}")
        try:
            policy = ReclaimPolicy(template.get("reclaimPolicy", ReclaimPolicy.DELETE.value))
        except ValueError:
            raise bad("specTemplate.reclaimPolicy must be Delete or Retain") from None
        namespace = template.get("resourceNamespace", DEFAULT_RESOURCE_NAMESPACE)
        if not isinstance(namespace, str) or not namespace:
            raise bad("specTemplate.resourceNamespace must be a namespace name")
        deletion = template.get("deletionPolicy")
        if deletion is not None and deletion not in ("Delete", "Orphan"):
            raise bad("specTemplate.deletionPolicy must be Delete or Orphan")
        return cls(name=name, uid=str(meta.get("uid", "")), for_provider=dict(for_provider),
                   provider_config=ref.get("name", "default"), reclaim_policy=policy,
                   resource_namespace=namespace, deletion_policy=deletion)


#: A configurator fills in a dynamically provisioned managed resource from its claim and
#: class (seed 002's ``ManagedConfigurator``). It mutates ``managed`` in place and raises
#: :class:`TerminalError` for a claim whose spec it cannot honour.
Configurator = Callable[[Mapping[str, Any], ResourceClass, dict[str, Any]], None]


def dynamic_name(claim: Mapping[str, Any]) -> str:
    """The managed resource name dynamic provisioning uses for ``claim``.

    ``<claim namespace>-<claim name>-<first 8 of uid>``: deterministic, so a
    retry finds what an interrupted pass created, and unique per claim.
    """
    meta = claim["metadata"]
    stem = f"{meta.get('namespace', '')}-{meta['name']}"[:240].rstrip("-.")
    return f"{stem}-{meta['uid'][:8]}"


def claim_reference(claim: Mapping[str, Any]) -> dict[str, str]:
    """The ``spec.claimRef`` a managed resource bound to ``claim`` carries."""
    meta = claim["metadata"]
    return {"apiVersion": claim["apiVersion"], "kind": claim["kind"],
            "namespace": meta["namespace"], "name": meta["name"], "uid": meta["uid"]}


def configure_object_meta(
    claim: Mapping[str, Any], resource_class: ResourceClass, managed: dict[str, Any]
) -> None:
    """Configurator: name, namespace, labels and claim reference of the new resource."""
    meta = claim["metadata"]
    managed["metadata"] = {
        "name": dynamic_name(claim),
        "namespace": resource_class.resource_namespace,
        "labels": {CLAIM_NAME: meta["name"], CLAIM_NAMESPACE: meta["namespace"]},
        "annotations": {CLASS_NAME: resource_class.name},
    }
    managed.setdefault("spec", {})["claimRef"] = claim_reference(claim)


def configure_from_class(
    claim: Mapping[str, Any], resource_class: ResourceClass, managed: dict[str, Any]
) -> None:
    """Configurator: copy the class template (parameters, provider, policies, Secret ref).

    The managed resource's connection Secret lives beside it, named after it;
    it is for the engine, and is copied to the claim's namespace on binding.
    """
    spec = managed.setdefault("spec", {})
    spec["forProvider"] = {**resource_class.for_provider, **(spec.get("forProvider") or {})}
    spec["providerConfigRef"] = {"name": resource_class.provider_config}
    spec["reclaimPolicy"] = resource_class.reclaim_policy.value
    if resource_class.deletion_policy is not None:
        spec["deletionPolicy"] = resource_class.deletion_policy
    spec["writeConnectionSecretToRef"] = {
        "namespace": resource_class.resource_namespace,
        "name": f"{managed['metadata']['name']}-connection",
    }


@attrs.frozen
class ClaimBinding:
    """How claims of one kind are satisfied: the claim, class and managed kinds and configurators.

    The equivalent of seed 002's claim scheduling, defaulting and binding
    controllers plus the secret propagation controller for one trio of kinds.
    """

    claim: Kind
    resource_class: ClassKind
    managed: Kind
    configurators: tuple[Configurator, ...]

    def build_resource(
        self, claim: Mapping[str, Any], resource_class: ResourceClass
    ) -> dict[str, Any]:
        """The managed resource dynamic provisioning creates, validated against its kind."""
        managed: dict[str, Any] = {"apiVersion": self.managed.api_version,
                                   "kind": self.managed.kind, "metadata": {}, "spec": {}}
        for configure in self.configurators:
            configure(claim, resource_class, managed)
        try:
            self.managed.parse_parameters(managed["spec"])
        except TerminalError as exc:
            raise _class_problem(f"class {resource_class.name!r} with this claim makes an "
                                 f"invalid {self.managed.kind}: {exc.message}",
                                 "InvalidClass") from None
        return managed


# ---------------------------------------------------------------------------
# The pure core: choosing a class, choosing an event
# ---------------------------------------------------------------------------


@attrs.frozen
class ClassSelection:
    """The outcome of scheduling or defaulting: the event to fire and the class, if any."""

    event: str | None
    class_name: str | None
    reason: str
    message: str


def _labels_of(obj: Mapping[str, Any]) -> Mapping[str, str]:
    labels = (obj.get("metadata") or {}).get("labels")
    return labels if isinstance(labels, Mapping) else {}


def _is_default(obj: Mapping[str, Any]) -> bool:
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    return str(annotations.get(DEFAULT_CLASS, "")).lower() == "true"


def select_class(selector: Any, classes: Sequence[Mapping[str, Any]]) -> ClassSelection:
    """Schedule (selector given) or default (no selector) a claim to a class.

    Scheduling: among classes whose labels contain every ``matchLabels``
    pair, the first by name (deterministic; an empty ``matchLabels`` matches
    every class). Defaulting: the one class annotated
    ``lifecycle.dev/default-class: "true"``. Raises :class:`TerminalError` for
    a malformed selector and :class:`HandledError` ``MultipleDefaultClasses``
    when several classes claim to be the default: that is an administrator's
    mistake to fix, never a random pick.
    """
    names = sorted(((str(c["metadata"]["name"]), c) for c in classes), key=lambda p: p[0])
    if selector is not None:
        if not isinstance(selector, Mapping) or set(selector) - {"matchLabels"}:
            raise TerminalError("spec.classSelector must be {matchLabels: {key: value}}")
        wanted = selector.get("matchLabels")
        wanted = {} if wanted is None else wanted
        if not isinstance(wanted, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in wanted.items()
        ):
            raise TerminalError("spec.classSelector.matchLabels must map strings to strings")
        matching = [name for name, c in names
                    if all(_labels_of(c).get(k) == v for k, v in wanted.items())]
        shown = ",".join(f"{k}={v}" for k, v in sorted(wanted.items())) or "<everything>"
        if not matching:
            return ClassSelection(None, None, "NoMatchingClass",
                                  f"no class matches the class selector {shown}")
        more = f" (first by name of {len(matching)} matching)" if len(matching) > 1 else ""
        return ClassSelection("schedule", matching[0], "ClassScheduled",
                              f"scheduled to class {matching[0]}{more}")
    defaults = [name for name, c in names if _is_default(c)]
    if not defaults:
        return ClassSelection(None, None, "NoDefaultClass",
                              f"no class is annotated {DEFAULT_CLASS}=true and the claim "
                              "names no class, selector or resource")
    if len(defaults) > 1:
        raise _class_problem(
            f"{len(defaults)} classes are annotated {DEFAULT_CLASS}=true "
            f"({', '.join(defaults)}); annotate exactly one", "MultipleDefaultClasses")
    return ClassSelection("default", defaults[0], "ClassDefaulted",
                          f"defaulted to class {defaults[0]}")


@attrs.frozen
class ResourceView:
    """What the claim reconciler sees of a managed resource."""

    namespace: str
    name: str
    uid: str
    claim_uid: str | None
    claim: str
    ready: bool
    deleting: bool
    released: bool
    reclaim_policy: ReclaimPolicy
    secret: tuple[str, str]

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> ResourceView:
        """Read a managed resource; unknown reclaim policies read as Retain (the safe one)."""
        meta = obj["metadata"]
        spec = obj.get("spec") if isinstance(obj.get("spec"), Mapping) else {}
        ref = spec.get("claimRef") if isinstance(spec.get("claimRef"), Mapping) else {}
        try:
            policy = ReclaimPolicy(spec.get("reclaimPolicy", ReclaimPolicy.RETAIN.value))
        except ValueError:
            policy = ReclaimPolicy.RETAIN
        status = obj.get("status") if isinstance(obj.get("status"), Mapping) else {}
        ready = cond.get(status.get("conditions") or [], cond.READY)
        return cls(
            namespace=str(meta.get("namespace") or ""),
            name=str(meta["name"]),
            uid=str(meta["uid"]),
            claim_uid=str(ref["uid"]) if ref.get("uid") else None,
            claim=f"{ref.get('namespace', '')}/{ref.get('name', '')}",
            ready=ready is not None and ready.status is T,
            deleting=bool(meta.get("deletionTimestamp")),
            released=bool((meta.get("annotations") or {}).get(RELEASED)),
            reclaim_policy=policy,
            secret=connection_secret_ref(obj),
        )


@attrs.frozen
class ClaimFacts:
    """Everything the claim's event choice depends on, gathered by the reconciler.

    ``resource_ref`` is the (namespace, name) the claim names; ``dynamic``
    says it is the name dynamic provisioning gives this claim; ``resource``
    is the managed resource as read (None if not named or absent);
    ``secret_ready`` says its connection Secret exists and is controlled by
    it; ``problem`` is an error found while gathering (bad spec, broken
    class, two defaults).
    """

    state: str
    uid: str
    deleting: bool = False
    resource_ref: tuple[str, str] | None = None
    dynamic: bool = False
    class_ref: str | None = None
    class_ready: bool = False
    selection: ClassSelection | None = None
    resource: ResourceView | None = None
    secret_ready: bool = False
    problem: HandledError | None = None

    @property
    def reclaim_delete(self) -> bool:
        """The named resource's reclaim policy is Delete."""
        return self.resource is not None and self.resource.reclaim_policy is ReclaimPolicy.DELETE


#: Reasons of ``pending`` choices that refuse something the claim asked for.
REFUSALS = frozenset({"ResourceBoundElsewhere", "ResourceReleased", "ResourceDeleting"})


def choose_claim_event(facts: ClaimFacts) -> Choice:
    """Choose exactly one event of the claim machine from the facts of this pass.

    Order: deletion (pre-empts everything), a problem found while gathering,
    class selection, provisioning, then what the named resource says.
    """
    r = facts.resource
    ours = r is not None and r.claim_uid == facts.uid
    if facts.deleting:
        if r is not None and ours:
            where = f"{r.namespace}/{r.name}"
            if facts.state == "released":
                return Choice("wait", "ReclaimPending", f"waiting for {where} to be deleted")
            return Choice("release", "ClaimDeleted",
                          f"claim deleted; reclaim policy {r.reclaim_policy.value} for {where}")
        return Choice("gone", "NothingToReclaim", "no managed resource is bound to this claim")
    if facts.problem is not None:
        if facts.state == "unbound":
            return Choice("pending", facts.problem.reason, facts.problem.message)
        return Choice(None, facts.problem.reason, facts.problem.message)
    ref = facts.resource_ref
    if ref is None:
        if facts.state != "unbound":
            return Choice("lose", "ResourceRefRemoved", "spec.resourceRef was removed")
        if facts.class_ref is None:
            selection = facts.selection
            if selection is None:
                return Choice("pending", "NotScheduled", "no class selected yet")
            return Choice(selection.event or "pending", selection.reason, selection.message)
        return Choice("provision", "ProvisionRequested",
                      f"provisioning a managed resource from class {facts.class_ref}")
    where = f"{ref[0]}/{ref[1]}"
    if r is None:
        if facts.dynamic and facts.state in ("unbound", "binding") and facts.class_ready:
            return Choice("provision", "ProvisionRequested",
                          f"creating {where} from class {facts.class_ref}")
        if facts.state == "unbound":
            return Choice("pending", "ResourceNotFound", f"managed resource {where} not found")
        return Choice("lose", "ResourceVanished", f"managed resource {where} no longer exists")
    if r.claim_uid is None:
        if facts.state != "unbound":
            return Choice("lose", "ResourceUnbound", f"{where} no longer points at this claim")
        if r.released:
            return Choice("pending", "ResourceReleased",
                          f"{where} was released by another claim; an administrator must "
                          f"remove its {RELEASED} annotation before it can be bound again")
        if r.deleting:
            return Choice("pending", "ResourceDeleting", f"{where} is being deleted")
        return Choice("claim", "ClaimRequested", f"binding to existing resource {where}")
    if not ours:
        if facts.state == "unbound":
            return Choice("pending", "ResourceBoundElsewhere",
                          f"{where} is bound to claim {r.claim}")
        return Choice("lose", "ResourceBoundElsewhere", f"{where} is now bound to claim {r.claim}")
    if r.deleting:
        if facts.state == "unbound":
            return Choice("pending", "ResourceDeleting", f"{where} is being deleted")
        return Choice("lose", "ResourceDeleting", f"{where} is being deleted")
    if facts.state == "unbound":
        return Choice("claim", "ClaimRequested", f"{where} already points at this claim")
    if r.ready and facts.secret_ready:
        return Choice("bind", "ResourceReady", f"bound to {where}")
    if facts.state == "lost":
        return Choice("lose", "ResourceNotReady", f"{where} is not Ready")
    return Choice("wait", "ResourceNotReady", f"waiting for {where} to be Ready")


# ---------------------------------------------------------------------------
# The reconciler
# ---------------------------------------------------------------------------


@attrs.define
class ClaimPass:
    """What one claim reconcile has learned so far (internal working state)."""

    obj: dict[str, Any]
    state: str
    dirty: bool = False
    selection: ClassSelection | None = None
    desired: dict[str, Any] | None = None
    resource: dict[str, Any] | None = None


class ClaimEffects:
    """The side effects the claim machine's actions perform, each idempotent."""

    def __init__(self, reconciler: ClaimReconciler, run: ClaimPass, facts: ClaimFacts) -> None:
        self.reconciler = reconciler
        self.run = run
        self.facts = facts

    def select_class(self) -> None:
        """Write the scheduled or defaulted class into ``spec.classRef``."""
        selection = self.run.selection
        if selection is None or selection.class_name is None:
            raise HandledError("no class was selected", reason="NotScheduled")
        name = selection.class_name
        self.reconciler.update_claim(self.run, lambda spec: spec.__setitem__("classRef",
                                                                             {"name": name}))
        self.run.dirty = True
        self.reconciler.event(self.run.obj, "Normal", selection.reason, selection.message)

    def provision(self) -> None:
        """Record ``spec.resourceRef``, then create the managed resource (adopting our own)."""
        r = self.reconciler
        desired = self.run.desired
        if desired is None:
            raise HandledError("no class to provision from", reason="ClassNotFound")
        meta = desired["metadata"]
        ref = {"namespace": meta["namespace"], "name": meta["name"]}
        r.update_claim(self.run, lambda spec: spec.__setitem__("resourceRef", ref))
        try:
            r.api.create(desired)
        except AlreadyExists:
            existing = r.get_resource(meta["namespace"], meta["name"])
            if existing is None or ResourceView.from_object(existing).claim_uid != self.facts.uid:
                raise HandledError(f"{meta['namespace']}/{meta['name']} exists and is not this "
                                   "claim's", reason="ResourceNameTaken") from None
        except NotFound:
            raise HandledError(f"namespace {meta['namespace']} for provisioned resources does "
                               "not exist", reason="ResourceNamespaceMissing") from None
        r.event(self.run.obj, "Normal", "Provisioned",
                f"created {r.binding.managed.kind} {meta['namespace']}/{meta['name']}")

    def claim(self) -> None:
        """Point the named resource back at this claim, re-checking it is free under 409s."""
        claim_ref = claim_reference(self.run.obj)

        def change(obj: dict[str, Any]) -> bool:
            view = ResourceView.from_object(obj)
            if view.claim_uid == claim_ref["uid"]:
                return False
            if view.claim_uid is not None:
                raise HandledError(f"bound to claim {view.claim}", reason="ResourceBoundElsewhere")
            if view.released or view.deleting:
                raise HandledError("released or being deleted", reason="ResourceUnavailable")
            obj.setdefault("spec", {})["claimRef"] = claim_ref
            return True

        ref = self.facts.resource_ref
        assert ref is not None  # the claim event is chosen only with a resource named
        self.reconciler.update_resource(ref, change)

    def propagate(self) -> None:
        """Copy the bound resource's connection Secret into the claim's namespace."""
        self.reconciler.propagate(self.run, self.facts)

    def withdraw(self) -> None:
        """Delete the claim's connection Secret, if this claim controls it."""
        self.reconciler.withdraw(self.run)

    def delete_resource(self) -> None:
        """Delete the bound managed resource; its own reconciler deletes the external one."""
        r = self.reconciler
        view = self.facts.resource
        assert view is not None  # release is chosen only with a resource pointing at us
        try:
            r.api.delete(r.binding.managed.api_version, r.binding.managed.kind,
                         view.namespace or None, view.name)
        except NotFound:
            return

    def retain_resource(self) -> None:
        """Clear the resource's ``spec.claimRef`` and mark it Released (never rebound)."""
        meta = self.run.obj["metadata"]
        uid = self.facts.uid

        def change(obj: dict[str, Any]) -> bool:
            if ResourceView.from_object(obj).claim_uid != uid:
                return False
            obj["spec"].pop("claimRef", None)
            obj["metadata"].setdefault("annotations", {})[RELEASED] = (
                f"{meta['namespace']}/{meta['name']}")
            return True

        view = self.facts.resource
        assert view is not None
        self.reconciler.update_resource((view.namespace, view.name), change)


class ClaimReconciler:
    """Reconciles claims of one :class:`ClaimBinding` through the claim machine's table.

    ``reconcile(namespace, name)`` returns a :class:`Result` following the
    requeue matrix; API errors other than NotFound raise
    :class:`UnhandledError` for the work queue's backoff.
    """

    def __init__(
        self, api: Cluster, binding: ClaimBinding, *, clock: Callable[[], datetime] = now
    ) -> None:
        self.api: Any = api
        self.binding = binding
        self.clock = clock
        machine = binding.claim.machine
        self.machine = machine
        self.table = machine.table()
        self.host = machine.guard_host()

    def reconcile(self, namespace: str | None, name: str) -> Result:
        """Run one reconcile of the claim ``namespace/name``."""
        try:
            return self._reconcile(namespace, name)
        except NotFound:
            return Result.done("NotFound")
        except ApiError as exc:
            raise UnhandledError(f"API error during claim reconcile: {exc}") from exc

    def _reconcile(self, namespace: str | None, name: str) -> Result:
        kind = self.binding.claim
        obj = self.api.get(kind.api_version, kind.kind, namespace, name)
        meta = obj["metadata"]
        deleting = bool(meta.get("deletionTimestamp"))
        claimed = FINALIZER in (meta.get("finalizers") or [])
        if deleting and not claimed:
            return Result.done("NotClaimed")
        run = ClaimPass(obj=obj, state=self._stored_state(obj))
        if not claimed:
            self._update_claim_meta(run, lambda m: m.setdefault("finalizers", []).append(FINALIZER))
        facts = self._facts(run, deleting)
        return self._fire(run, facts, choose_claim_event(facts))

    # ----------------------------------------------------------- gathering
    def _facts(self, run: ClaimPass, deleting: bool) -> ClaimFacts:
        obj = run.obj
        meta = obj["metadata"]
        spec = obj.get("spec") if isinstance(obj.get("spec"), Mapping) else {}
        facts = ClaimFacts(state=run.state, uid=meta["uid"], deleting=deleting)
        try:
            ref = _resource_ref(spec, meta["namespace"])
            class_ref = _class_ref(spec)
        except TerminalError as exc:
            return attrs.evolve(facts, problem=exc)
        dynamic = ref is not None and ref[1] == dynamic_name(obj)
        view = None
        secret_ready = False
        if ref is not None:
            run.resource = self.get_resource(*ref)
            if run.resource is not None:
                view = ResourceView.from_object(run.resource)
                secret_ready = (view.claim_uid == meta["uid"]
                                and self._source_secret(view) is not None)
        facts = attrs.evolve(facts, resource_ref=ref, dynamic=dynamic, class_ref=class_ref,
                             resource=view, secret_ready=secret_ready)
        if deleting:
            return facts
        try:
            if ref is None and class_ref is None:
                classes, _ = self.api.list(self.binding.resource_class.api_version,
                                           self.binding.resource_class.kind)
                run.selection = select_class(spec.get("classSelector"), classes)
                return attrs.evolve(facts, selection=run.selection)
            if class_ref is not None and (ref is None or (dynamic and view is None)):
                run.desired = self.binding.build_resource(obj, self._class(class_ref))
                return attrs.evolve(facts, class_ready=True)
        except HandledError as exc:
            return attrs.evolve(facts, problem=exc)
        return facts

    def _class(self, name: str) -> ResourceClass:
        kind = self.binding.resource_class
        try:
            obj = self.api.get(kind.api_version, kind.kind, None, name)
        except NotFound:
            raise _class_problem(f"{kind.kind} {name!r} not found", "ClassNotFound") from None
        return ResourceClass.from_object(obj)

    def get_resource(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The managed resource ``namespace/name``, or None."""
        managed = self.binding.managed
        try:
            return self.api.get(managed.api_version, managed.kind,
                                namespace if managed.namespaced else None, name)
        except NotFound:
            return None

    def _source_secret(self, view: ResourceView) -> dict[str, Any] | None:
        secret = self._read_secret(*view.secret)
        if secret is None or not _controlled_by(secret, view.uid):
            return None
        return secret

    def _read_secret(self, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            return self.api.get("v1", "Secret", namespace, name)
        except NotFound:
            return None

    # -------------------------------------------------------------- firing
    def _fire(self, run: ClaimPass, facts: ClaimFacts, choice: Choice) -> Result:
        error = facts.problem
        transition: TransitionSpec | None = None
        if choice.event is not None:
            transition = self.table.fire(run.state, choice.event,
                                         lambda g: bool(getattr(self.host, g)(facts)))
            if transition is None:
                error = HandledError(f"event {choice.event!r} is not allowed in state "
                                     f"{run.state!r} of {self.table.name}",
                                     reason="EventNotAllowed")
            else:
                effects = ClaimEffects(self, run, facts)
                try:
                    for action in transition.actions:
                        getattr(self.host, action)(effects)
                except HandledError as exc:
                    error, transition = exc, None  # stay; the idempotent actions are retried
        target = transition.target if transition is not None else run.state
        final = self.table.states[target].final
        self._write_status(run, facts, choice, transition, target, error)
        if final:
            self._update_claim_meta(run, _drop_finalizer)
        return requeue(state=target, final=final, timing=self.machine.timing,
                       key=run.obj["metadata"]["uid"], error=error, dirty=run.dirty)

    def _write_status(self, run: ClaimPass, facts: ClaimFacts, choice: Choice,
                      transition: TransitionSpec | None, target: str,
                      error: HandledError | None) -> None:
        when = rfc3339(self.clock())
        gen = _generation(run.obj)
        spec = self.table.states[target]
        ready_status, ready_reason = spec.ready
        if ready_status != "True":
            ready_reason = error.reason if error else (choice.reason or ready_reason)
        message = error.message if error else choice.message
        updates = [
            Condition(cond.READY, ConditionStatus(ready_status), ready_reason,
                      "" if ready_status == "True" else message, gen),
            Condition(cond.SYNCED, F, "ReconcileError", error.message, gen) if error
            else Condition(cond.SYNCED, T, "ReconcileSuccess", "", gen),
        ]
        if transition is not None and transition.source != transition.target:
            self.event(run.obj, "Normal", camel(transition.event),
                       f"{transition.source} -> {transition.target}: {choice.message}")
        elif error is not None:
            self.event(run.obj, "Warning", error.reason, error.message)
        elif choice.reason in REFUSALS:
            self.event(run.obj, "Warning", choice.reason, choice.message)

        def build(old: Mapping[str, Any]) -> dict[str, Any]:
            stored = old.get("history")
            history = [h for h in stored if isinstance(h, Mapping)] if isinstance(
                stored, list) else []
            if transition is not None and transition.source != transition.target:
                history.append(HistoryEntry(transition.source, transition.target,
                                            transition.event, choice.reason, when).to_dict())
            since = old.get("stateSince") if target == run.state else when
            since = since if isinstance(since, str) else when
            held = _stuck(self.machine, target, since, old, gen, self.clock())
            conditions = cond.merge(_conditions(old), [*updates, *held], when)
            status = {
                **old,
                "state": target,
                "bindingPhase": spec.name,
                "observedGeneration": gen,
                "conditions": conditions,
                "phase": cond.phase(conditions, facts.deleting),
                "stateSince": since,
                "history": history[-self.machine.history_limit:],
            }
            ref = facts.resource_ref
            if ref is not None and target in ("binding", "bound"):
                status["resourceRef"] = {"namespace": ref[0], "name": ref[1]}
            return status

        for _ in range(CONFLICT_RETRIES):
            old = run.obj.get("status") if isinstance(run.obj.get("status"), Mapping) else {}
            status = build(old)
            if status == old:
                return
            try:
                run.obj = self.api.replace_status({**run.obj, "status": status})
                return
            except Conflict:
                run.obj = self._refetch(run)
        raise UnhandledError("claim status write kept conflicting")

    # -------------------------------------------------------------- writes
    def update_claim(self, run: ClaimPass, change: Callable[[dict[str, Any]], Any]) -> None:
        """Apply ``change`` to the claim's spec and commit it, retrying 409s from a fresh read."""
        def on_body(body: dict[str, Any]) -> None:
            spec = dict(body.get("spec") or {})
            change(spec)
            body["spec"] = spec

        self._commit_claim(run, on_body)

    def _update_claim_meta(self, run: ClaimPass, change: Callable[[dict[str, Any]], Any]) -> None:
        def on_body(body: dict[str, Any]) -> None:
            meta = json.loads(json.dumps(body["metadata"]))
            change(meta)
            body["metadata"] = meta

        self._commit_claim(run, on_body)

    def _commit_claim(self, run: ClaimPass, on_body: Callable[[dict[str, Any]], None]) -> None:
        for _ in range(CONFLICT_RETRIES):
            body = dict(run.obj)
            on_body(body)
            if body == run.obj:
                return
            try:
                run.obj = self.api.replace(body)
                return
            except Conflict:
                run.obj = self._refetch(run)
        raise UnhandledError("claim write kept conflicting")

    def update_resource(
        self, ref: tuple[str, str], change: Callable[[dict[str, Any]], bool]
    ) -> None:
        """Apply ``change`` to a fresh read of the managed resource; commit if it returns True."""
        for _ in range(CONFLICT_RETRIES):
            obj = self.get_resource(*ref)
            if obj is None:
                raise HandledError(f"managed resource {ref[0]}/{ref[1]} not found",
                                   reason="ResourceNotFound")
            if not change(obj):
                return
            try:
                self.api.replace(obj)
                return
            except Conflict:
                continue
        raise UnhandledError("managed resource write kept conflicting")

    def _refetch(self, run: ClaimPass) -> dict[str, Any]:
        meta = run.obj["metadata"]
        kind = self.binding.claim
        return self.api.get(kind.api_version, kind.kind, meta["namespace"], meta["name"])

    # ----------------------------------------------------------- secrets
    def claim_secret_name(self, claim: Mapping[str, Any]) -> str:
        """The name of the claim's connection Secret (in the claim's namespace)."""
        spec = claim.get("spec") if isinstance(claim.get("spec"), Mapping) else {}
        ref = spec.get("writeConnectionSecretToRef")
        name = ref.get("name") if isinstance(ref, Mapping) else None
        if isinstance(name, str) and name:
            return name
        return f"{claim['metadata']['name']}-connection"

    def propagate(self, run: ClaimPass, facts: ClaimFacts) -> None:
        """Copy the bound resource's connection Secret to the claim; write only on change.

        Refuses (``HandledError``) when the resource does not point at this
        claim, when the source Secret is not controlled by the resource, and
        when a Secret of the target name exists that this claim does not control.
        """
        view = facts.resource
        meta = run.obj["metadata"]
        if view is None or view.claim_uid != meta["uid"]:
            raise HandledError("the resource is not bound to this claim", reason="NotBound")
        source = self._source_secret(view)
        if source is None:
            raise HandledError(f"connection Secret {view.secret[0]}/{view.secret[1]} is missing "
                               "or not controlled by the resource", reason="SourceSecretNotOwned")
        namespace, name = meta["namespace"], self.claim_secret_name(run.obj)
        data = dict(source.get("data") or {})
        target = self._read_secret(namespace, name)
        origin = f"{view.secret[0]}/{view.secret[1]}"
        if target is None:
            self.api.create({
                "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                "metadata": {"name": name, "namespace": namespace,
                             "annotations": {PROPAGATED_FROM: origin},
                             "ownerReferences": [_owner(run.obj)]},
                "data": data,
            })
            return
        if not _controlled_by(target, meta["uid"]):
            raise HandledError(f"Secret {namespace}/{name} exists and is not owned by this "
                               "claim; not overwritten", reason="SecretNotOwned")
        if target.get("data") == data:
            return
        target["data"] = data
        target["metadata"].setdefault("annotations", {})[PROPAGATED_FROM] = origin
        self.api.replace(target)

    def withdraw(self, run: ClaimPass) -> None:
        """Delete the claim's connection Secret when this claim controls it."""
        meta = run.obj["metadata"]
        name = self.claim_secret_name(run.obj)
        secret = self._read_secret(meta["namespace"], name)
        if secret is not None and _controlled_by(secret, meta["uid"]):
            try:
                self.api.delete("v1", "Secret", meta["namespace"], name)
            except NotFound:
                return

    # ------------------------------------------------------------- misc
    def _stored_state(self, obj: Mapping[str, Any]) -> str:
        status = obj.get("status")
        state = status.get("state") if isinstance(status, Mapping) else None
        if isinstance(state, str) and state in self.table.states and not (
            self.table.states[state].final
        ):
            return state
        if state is not None:
            self.event(obj, "Warning", "StateRepaired",
                       f"stored state {str(state)[:64]!r} is not a state of {self.table.name}; "
                       f"restarting from {self.table.initial}")
        return self.table.initial

    def event(self, obj: Mapping[str, Any], type_: str, reason: str, message: str) -> None:
        """Record an Event about ``obj``; best effort."""
        try:
            self.api.record_event(obj, type_, reason, message)
        except ApiError:
            return


def _resource_ref(spec: Mapping[str, Any], namespace: str) -> tuple[str, str] | None:
    ref = spec.get("resourceRef")
    if ref is None:
        return None
    if not isinstance(ref, Mapping) or not isinstance(ref.get("name"), str) or not ref["name"]:
        raise TerminalError("spec.resourceRef must be {name: <string>, namespace: <string>}")
    ns = ref.get("namespace", namespace)
    if not isinstance(ns, str) or not ns:
        raise TerminalError("spec.resourceRef.namespace must be a namespace name")
    return ns, ref["name"]


def _class_ref(spec: Mapping[str, Any]) -> str | None:
    ref = spec.get("classRef")
    if ref is None:
        return None
    if not isinstance(ref, Mapping) or not isinstance(ref.get("name"), str) or not ref["name"]:
        raise TerminalError("spec.classRef must be {name: <string>}")
    return ref["name"]


def _conditions(status: Mapping[str, Any]) -> list[Any]:
    stored = status.get("conditions")
    return stored if isinstance(stored, list) else []


def _controlled_by(obj: Mapping[str, Any], uid: str) -> bool:
    refs = obj.get("metadata", {}).get("ownerReferences") or []
    return any(isinstance(r, Mapping) and r.get("uid") == uid and r.get("controller")
               for r in refs)


def _owner(obj: Mapping[str, Any]) -> dict[str, Any]:
    meta = obj["metadata"]
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": meta["name"],
            "uid": meta["uid"], "controller": True, "blockOwnerDeletion": True}


def _drop_finalizer(meta: dict[str, Any]) -> None:
    meta["finalizers"] = [f for f in meta.get("finalizers") or [] if f != FINALIZER]


def _generation(obj: Mapping[str, Any]) -> int:
    value = obj["metadata"].get("generation", 1)
    return value if isinstance(value, int) and not isinstance(value, bool) else 1


def _stuck(machine: type[LifecycleMachine], state: str, since: str, old: Mapping[str, Any],
           gen: int, now: datetime) -> list[Condition]:
    """The Stuck condition the managed status uses, for a claim held in ``state``."""
    held = stuck(machine, state, since, _conditions(old), gen, now)
    return [held] if held is not None else []


# ---------------------------------------------------------------------------
# Running claims beside the managed reconciler on the harness
# ---------------------------------------------------------------------------


class ClaimInformer:
    """Maps changes of managed resources and their connection Secrets to work-queue keys.

    It stands in for the watches of a real controller (seed 002's
    ``EnqueueRequestForClaim`` and the secret propagation controller's
    watch): each :meth:`sync` lists both kinds, compares resourceVersions
    with the last sync, and enqueues the managed resource (on creation, a
    generation change or a deletion request: the engine's event filters) and
    the claim its ``spec.claimRef`` names (on any change, including a
    rotated connection Secret). Listing keeps it deterministic on the virtual
    clock; it is for the harness, not for production scale.
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
            ref = (obj.get("spec") or {}).get("claimRef") or {}
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
            for c in {claim, before[3] if before else None} - {None}:
                self.enqueue(claim_kind, c[1], c[0])  # type: ignore[index]
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
    """A resource class manifest (``DatabaseInstanceClass`` unless ``class_kind`` is given)."""
    if class_kind is None:
        from lifecycle.machines.claim import DatabaseInstanceClass as class_kind
    template: dict[str, Any] = {
        "forProvider": {"engine": "postgres", "storage_gb": 20, **for_provider},
        "providerConfigRef": {"name": provider_config},
        "reclaimPolicy": reclaim_policy,
    }
    if resource_namespace is not None:
        template["resourceNamespace"] = resource_namespace
    return {
        "apiVersion": class_kind.api_version,
        "kind": class_kind.kind,
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
    **portable: Any,
) -> dict[str, Any]:
    """A ``DatabaseClaim`` manifest; ``portable`` holds fields like ``engineVersion``."""
    spec: dict[str, Any] = dict(portable)
    if selector is not None:
        spec["classSelector"] = {"matchLabels": dict(selector)}
    if class_name is not None:
        spec["classRef"] = {"name": class_name}
    if resource is not None:
        spec["resourceRef"] = {"namespace": resource[0], "name": resource[1]}
    if secret_name is not None:
        spec["writeConnectionSecretToRef"] = {"name": secret_name}
    return {"apiVersion": "claims.lifecycle.dev/v1alpha1", "kind": "DatabaseClaim",
            "metadata": {"name": name, "namespace": namespace}, "spec": spec}


class ClaimEnvironment:
    """A harness :class:`~lifecycle.testing.Environment` with claims, classes and an informer.

    Composition only: registers the claim and class kinds with the
    environment's API, adds the claim reconciler to its work queue beside the
    managed reconciler, and follows every reconcile with an informer sync.
    """

    def __init__(self, env: Environment, binding: ClaimBinding | None = None) -> None:
        if binding is None:
            from lifecycle.machines.claim import DATABASE_BINDING as binding
        self.env = env
        self.api = env.api
        self.binding = binding
        claim = binding.claim
        self.api.register(ResourceType(claim.group, claim.version, claim.kind, claim.plural,
                                       namespaced=True))
        self.api.register(binding.resource_class.resource_type())
        env.namespace(DEFAULT_RESOURCE_NAMESPACE)
        self.reconciler = ClaimReconciler(self.api, binding, clock=env.clock.now)
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

    def run(self, max_steps: int = 10_000) -> list[Step]:
        """Sync the informer, then run the work queue until only Ready polls remain."""
        self.informer.sync()
        return self.env.run_until_idle(max_steps=max_steps)

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
        spec = self.claim(name, namespace).get("spec") or {}
        ref = spec.get("resourceRef")
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


def claim_environment(**options: Any) -> ClaimEnvironment:
    """The bundled database kind on a fresh simulated cloud, with claims and classes."""
    from lifecycle.testing import simulated_environment

    env, _ = simulated_environment(**options)
    return ClaimEnvironment(env)
