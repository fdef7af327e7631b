"""The pure model of resource claims: classes, scheduling, provisioning names, the event choice.

Three kinds of object meet in a claim's lifecycle:

* a **resource claim** (namespaced): an application team's portable request,
  e.g. ``DatabaseClaim``; it names a class (``spec.classRef``), asks for one
  by labels (``spec.classSelector.matchLabels``), or names an existing managed
  resource (``spec.resourceRef``);
* a **resource class** (cluster-scoped): an administrator's template of a
  managed resource's spec (``specTemplate``: ``forProvider``,
  ``providerConfigRef``, ``reclaimPolicy``, ``resourceNamespace``);
* the **managed resource**, which knows nothing of claims; a bound one
  carries ``spec.claimRef`` pointing back at its claim, the single source of
  truth for who may use it.

Nothing here does I/O. :func:`select_class` schedules or defaults a claim to
a class; a :class:`ClaimBinding` builds the managed resource dynamic
provisioning creates, with *configurators* (:data:`Configurator`);
:func:`choose_claim_event` picks exactly one event of the claim machine from
the :class:`ClaimFacts` of a pass; :func:`settle_claim` is the status that
pass leaves behind and the Events it records. The claim reconciler (:mod:`lifecycle.runtime.claims`)
gathers the facts and carries out the actions.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

import attrs

from lifecycle.core import conditions as cond
from lifecycle.core import objects
from lifecycle.core.claim_namespaces import CROSS_NAMESPACE_REFUSED, CrossNamespaceBinding
from lifecycle.core.decide import Choice
from lifecycle.core.errors import HandledError, Severity, TerminalError
from lifecycle.core.kind import Kind, connection_secret_ref
from lifecycle.core.machine import LifecycleMachine, camel
from lifecycle.core.status import (
    Outcome,
    Settled,
    kept_history,
    stored_conditions,
    stuck,
    valid_timestamp,
)
from lifecycle.core.values import Condition, ConditionStatus, HistoryEntry, rfc3339
from lifecycle.core.vocabulary import Reasons

__all__ = [
    "CLAIM_NAME",
    "CLAIM_NAMESPACE",
    "CLASS_NAME",
    "DEFAULT_CLASS",
    "DEFAULT_RESOURCE_NAMESPACE",
    "PROPAGATED_FROM",
    "REFUSALS",
    "RELEASED",
    "ClaimBinding",
    "ClaimFacts",
    "ClassKind",
    "ClassSelection",
    "Configurator",
    "ReclaimPolicy",
    "ResourceClass",
    "ResourceView",
    "choose_claim_event",
    "claim_reference",
    "claim_secret_name",
    "class_problem",
    "class_ref",
    "configure_from_class",
    "configure_object_meta",
    "dynamic_name",
    "resource_ref",
    "select_class",
    "settle_claim",
]

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


def class_problem(message: str, reason: str) -> HandledError:
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
    cross_namespace: CrossNamespaceBinding | None = None

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> ResourceClass:
        """Parse a class object; a malformed one raises :class:`HandledError` ``InvalidClass``.

        The error is retryable: an administrator fixes classes, not the claim's author.
        """
        meta = objects.metadata(obj)
        name = str(meta.get("name", ""))

        def bad(text: str) -> HandledError:
            return class_problem(f"class {name!r}: {text}", "InvalidClass")

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
        try:
            cross = CrossNamespaceBinding.parse(obj.get("crossNamespaceBinding"), namespace)
        except ValueError as exc:
            raise bad(f"crossNamespaceBinding: {exc}") from None
        return cls(name=name, uid=str(meta.get("uid", "")), for_provider=dict(for_provider),
                   provider_config=ref.get("name", "default"), reclaim_policy=policy,
                   resource_namespace=namespace, deletion_policy=deletion,
                   cross_namespace=cross)


#: A configurator fills in a dynamically provisioned managed resource from its claim and
#: class. It mutates ``managed`` in place and raises
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

    Everything the claim reconciler needs to schedule, default, provision,
    bind and propagate for one trio of kinds; configurators run in order.
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
            raise class_problem(f"class {resource_class.name!r} with this claim makes an "
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


def _is_default(obj: Mapping[str, Any]) -> bool:
    return str(objects.annotations(obj).get(DEFAULT_CLASS, "")).lower() == "true"


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
                    if all(objects.labels(c).get(k) == v for k, v in wanted.items())]
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
        raise class_problem(
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
        spec = objects.spec(obj)
        ref = objects.mapping(spec.get("claimRef"))
        try:
            policy = ReclaimPolicy(spec.get("reclaimPolicy", ReclaimPolicy.RETAIN.value))
        except ValueError:
            policy = ReclaimPolicy.RETAIN
        ready = cond.get(objects.status(obj).get("conditions") or [], cond.READY)
        return cls(
            namespace=str(meta.get("namespace") or ""),
            name=str(meta["name"]),
            uid=str(meta["uid"]),
            claim_uid=str(ref["uid"]) if ref.get("uid") else None,
            claim=f"{ref.get('namespace', '')}/{ref.get('name', '')}",
            ready=ready is not None and ready.status is T,
            deleting=bool(meta.get("deletionTimestamp")),
            released=bool(objects.annotations(obj).get(RELEASED)),
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
    class, two defaults); ``generation`` is the claim's ``metadata.generation``.
    """

    state: str
    uid: str
    deleting: bool = False
    generation: int = 1
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
        if facts.problem.reason == CROSS_NAMESPACE_REFUSED and facts.state != "released":
            # No longer allowed (the class changed): the claim's copy of the Secret goes.
            return Choice("lose", facts.problem.reason, facts.problem.message)
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


def resource_ref(spec: Mapping[str, Any], namespace: str) -> tuple[str, str] | None:
    """The (namespace, name) ``spec.resourceRef`` names, or None; malformed is terminal.

    The namespace defaults to the claim's.
    """
    ref = spec.get("resourceRef")
    if ref is None:
        return None
    if not isinstance(ref, Mapping) or not isinstance(ref.get("name"), str) or not ref["name"]:
        raise TerminalError("spec.resourceRef must be {name: <string>, namespace: <string>}")
    ns = ref.get("namespace", namespace)
    if not isinstance(ns, str) or not ns:
        raise TerminalError("spec.resourceRef.namespace must be a namespace name")
    return ns, ref["name"]


def class_ref(spec: Mapping[str, Any]) -> str | None:
    """The class name ``spec.classRef`` names, or None; malformed is terminal."""
    ref = spec.get("classRef")
    if ref is None:
        return None
    name = ref.get("name") if isinstance(ref, Mapping) else None
    if not isinstance(name, str) or not name:
        raise TerminalError("spec.classRef must be {name: <string>}")
    return name



def claim_secret_name(claim: Mapping[str, Any]) -> str:
    """The name of the claim's copy of the connection Secret (in the claim's namespace).

    ``spec.writeConnectionSecretToRef.name`` when set, else ``<claim>-connection``.
    """
    ref = objects.spec(claim).get("writeConnectionSecretToRef")
    name = ref.get("name") if isinstance(ref, Mapping) else None
    if isinstance(name, str) and name:
        return name
    return f"{claim['metadata']['name']}-connection"


# ---------------------------------------------------------------------------
# What one pass leaves behind: status and Events
# ---------------------------------------------------------------------------


def settle_claim(machine: type[LifecycleMachine], old: Mapping[str, Any],
                 outcome: Outcome[ClaimFacts],
                 now: datetime) -> Settled:
    """The claim's status after one pass, built on the stored one, and its Events (pure).

    Ready follows the target state (True only where the machine says so;
    otherwise its reason is the error's or the choice's); Synced reports the
    error; Stuck comes from the machine's time limits; ``history`` gains the
    transition; ``bindingPhase`` is the state's display name; ``resourceRef``
    is kept while binding or bound. Keys of ``old`` not written here are kept.
    Events: the transition, else the error, else a refusal.
    """
    facts, decision, t = outcome.facts, outcome.decision, outcome.transition
    when = rfc3339(now)
    source, target, choice, error = decision.source, outcome.target, decision.choice, decision.error
    generation = facts.generation
    spec = machine.table().states[target]
    ready_status, ready_reason = spec.ready
    if ready_status != "True":
        ready_reason = error.reason if error else (choice.reason or ready_reason)
    message = error.message if error else choice.message
    updates = [
        Condition(cond.READY, ConditionStatus(ready_status), ready_reason,
                  "" if ready_status == "True" else message, generation),
        Condition(cond.SYNCED, F, Reasons.RECONCILE_ERROR, error.message, generation) if error
        else Condition(cond.SYNCED, T, Reasons.RECONCILE_SUCCESS, "", generation),
    ]
    moved = t is not None and t.source != t.target
    events: tuple[tuple[str, str, str], ...] = ()
    if t is not None and moved:
        events = (("Normal", camel(t.event), f"{t.source} -> {t.target}: {choice.message}"),)
    elif error is not None:
        events = (("Warning", error.reason, error.message),)
    elif choice.reason in REFUSALS:
        events = (("Warning", choice.reason, choice.message),)
    history = kept_history(old.get("history"))
    if t is not None and moved:
        history.append(HistoryEntry(t.source, t.target, t.event, choice.reason, when).to_dict())
    since = (valid_timestamp(old.get("stateSince")) if target == source else when) or when
    stored = stored_conditions(old)
    held = stuck(machine, target, since, stored, generation, now)
    conditions = cond.merge(stored, [*updates, *([held] if held is not None else [])], when)
    status = {
        **old,
        "state": target,
        "bindingPhase": spec.name,
        "observedGeneration": generation,
        "conditions": conditions,
        "phase": cond.phase(conditions, facts.deleting),
        "stateSince": since,
        "history": history[-machine.history_limit:],
    }
    ref = facts.resource_ref
    if ref is not None and target in ("binding", "bound"):
        status["resourceRef"] = {"namespace": ref[0], "name": ref[1]}
    return Settled(status, events)
