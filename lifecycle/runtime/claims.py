"""The claim reconciler: gathers a claim's facts, fires one event, writes status.

One :class:`ClaimReconciler` runs a claim kind's machine through its
compiled table, one event per pass. The pure parts live in
:mod:`lifecycle.core.claims`: the event is chosen by
:func:`~lifecycle.core.claims.choose_claim_event` from
:class:`~lifecycle.core.claims.ClaimFacts`, and the status by
:func:`~lifecycle.core.claims.settle_claim`. Here is the I/O around them:
reading the claim, its class and the managed resource it names
(:meth:`ClaimReconciler.gather`), and the one sequence decide -> fire ->
status -> requeue (:meth:`ClaimReconciler.conclude`).

Dynamic provisioning records ``spec.resourceRef`` on the claim *before*
creating the managed resource under a name derived from the claim's uid, so
a retry after a crash adopts it instead of creating a second one; the claim
binds when the resource is Ready. Binding copies the resource's connection
Secret into the claim's namespace; every later pass of a bound claim
re-syncs it, so a rotated password reaches the claim. Propagation happens
only on the ``bind`` event, which requires the resource's ``spec.claimRef``
to carry this claim's uid.

The side effects the machine's actions perform are :class:`ClaimEffects`,
which write through a :class:`ClaimStore` (never back into the reconciler).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

import attrs

from lifecycle.core import objects
from lifecycle.core.claim_namespaces import (
    CrossNamespaceBinding,
    cross_namespace_refusal,
    first_grant,
)
from lifecycle.core.claims import (
    PROPAGATED_FROM,
    RELEASED,
    ClaimBinding,
    ClaimFacts,
    ClassSelection,
    ResourceClass,
    ResourceView,
    choose_claim_event,
    claim_reference,
    claim_secret_name,
    class_problem,
    class_ref,
    dynamic_name,
    resource_ref,
    select_class,
    settle_claim,
)
from lifecycle.core.decide import restore, transit
from lifecycle.core.errors import HandledError, TerminalError, UnhandledError
from lifecycle.core.kind import FINALIZER
from lifecycle.core.plan import Plan, conclude
from lifecycle.core.values import Result, now
from lifecycle.kube.cluster import Cluster
from lifecycle.kube.conflict import ConflictsExhausted, on_conflict
from lifecycle.kube.errors import AlreadyExists, ApiError, NotFound
from lifecycle.kube.objects import (
    add_finalizer,
    clone,
    controlled_by,
    owner_reference,
    remove_finalizer,
)
from lifecycle.runtime.effects import run_actions

__all__ = ["ClaimEffects", "ClaimPass", "ClaimReconciler", "ClaimStore"]


@attrs.define
class ClaimPass:
    """What one claim reconcile has learned so far (internal working state)."""

    obj: dict[str, Any]
    state: str
    dirty: bool = False
    selection: ClassSelection | None = None
    desired: dict[str, Any] | None = None
    resource: dict[str, Any] | None = None


class ClaimStore:
    """The reads and guarded writes of claim reconciles, for one :class:`ClaimBinding`.

    Every write of the claim or the managed resource rebuilds its change on
    the latest read and retries 409 Conflicts with
    :func:`~lifecycle.kube.conflict.on_conflict`.
    """

    def __init__(self, api: Cluster, binding: ClaimBinding) -> None:
        self.api: Any = api
        self.binding = binding

    # ------------------------------------------------------------- reads
    def get_claim(self, namespace: str | None, name: str) -> dict[str, Any]:
        """The claim ``namespace/name`` (NotFound propagates)."""
        kind = self.binding.claim
        return self.api.get(kind.api_version, kind.kind, namespace, name)

    def refetch(self, run: ClaimPass) -> None:
        """Replace the pass's copy of the claim with a fresh read."""
        meta = run.obj["metadata"]
        run.obj = self.get_claim(meta["namespace"], meta["name"])

    def get_resource(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The managed resource ``namespace/name``, or None."""
        managed = self.binding.managed
        try:
            return self.api.get(managed.api_version, managed.kind,
                                namespace if managed.namespaced else None, name)
        except NotFound:
            return None

    def list_classes(self) -> list[dict[str, Any]]:
        """Every resource class of the binding's class kind."""
        kind = self.binding.resource_class
        items, _ = self.api.list(kind.api_version, kind.kind)
        return list(items)

    def get_class(self, name: str) -> ResourceClass:
        """The parsed class ``name``; a missing one is the administrator's ``ClassNotFound``."""
        kind = self.binding.resource_class
        try:
            obj = self.api.get(kind.api_version, kind.kind, None, name)
        except NotFound:
            raise class_problem(f"{kind.kind} {name!r} not found", "ClassNotFound") from None
        return ResourceClass.from_object(obj)

    def cross_namespace_grants(self) -> list[tuple[str, CrossNamespaceBinding]]:
        """Every class's ``crossNamespaceBinding``, by class name (malformed classes grant
        nothing)."""
        grants = []
        for obj in self.list_classes():
            try:
                parsed = ResourceClass.from_object(obj)
            except HandledError:
                continue
            if parsed.cross_namespace is not None:
                grants.append((parsed.name, parsed.cross_namespace))
        return grants

    def namespace_labels(self, namespace: str) -> dict[str, str] | None:
        """The labels of the namespace ``namespace``, or None when it cannot be read."""
        try:
            return dict(objects.labels(self.api.get("v1", "Namespace", None, namespace)))
        except ApiError:
            return None

    def read_secret(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The Secret ``namespace/name``, or None."""
        try:
            return self.api.get("v1", "Secret", namespace, name)
        except NotFound:
            return None

    def source_secret(self, view: ResourceView) -> dict[str, Any] | None:
        """The resource's connection Secret, when it exists and the resource controls it."""
        secret = self.read_secret(*view.secret)
        if secret is None or not controlled_by(secret, view.uid):
            return None
        return secret

    # ------------------------------------------------------------ writes
    def update_claim(self, run: ClaimPass, change: Callable[[dict[str, Any]], Any]) -> None:
        """Apply ``change`` to the claim's spec and commit it, retrying 409s from a fresh read."""
        def on_body(body: dict[str, Any]) -> None:
            spec = dict(body.get("spec") or {})
            change(spec)
            body["spec"] = spec

        self._commit_claim(run, on_body)

    def update_claim_meta(self, run: ClaimPass, change: Callable[[dict[str, Any]], Any]) -> None:
        """Apply ``change`` to a copy of the claim's metadata and commit it, retrying 409s."""
        def on_body(body: dict[str, Any]) -> None:
            meta = clone(body["metadata"])
            change(meta)
            body["metadata"] = meta

        self._commit_claim(run, on_body)

    def _commit_claim(self, run: ClaimPass, on_body: Callable[[dict[str, Any]], None]) -> None:
        def attempt() -> None:
            body = dict(run.obj)
            on_body(body)
            if body != run.obj:
                run.obj = self.api.replace(body)

        on_conflict(attempt, lambda: self.refetch(run), what="claim write")

    def write_status(self, run: ClaimPass, build: Callable[[Mapping[str, Any]], dict[str, Any]]
                     ) -> None:
        """Write ``build(stored status)`` unless unchanged, rebuilding it after each 409."""
        def attempt() -> None:
            old = objects.status(run.obj)
            status = build(old)
            if status != old:
                run.obj = self.api.replace_status({**run.obj, "status": status})

        on_conflict(attempt, lambda: self.refetch(run), what="claim status write")

    def update_resource(
        self, ref: tuple[str, str], change: Callable[[dict[str, Any]], bool]
    ) -> None:
        """Apply ``change`` to a copy of a fresh read of the managed resource; commit if it
        returns True."""
        def attempt() -> None:
            obj = self.get_resource(*ref)
            if obj is None:
                raise HandledError(f"managed resource {ref[0]}/{ref[1]} not found",
                                   reason="ResourceNotFound")
            obj = clone(obj)  # what was read is read-only
            if change(obj):
                self.api.replace(obj)

        on_conflict(attempt, lambda: None, what="managed resource write")

    # ----------------------------------------------------------- secrets
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
        source = self.source_secret(view)
        if source is None:
            raise HandledError(f"connection Secret {view.secret[0]}/{view.secret[1]} is missing "
                               "or not controlled by the resource", reason="SourceSecretNotOwned")
        namespace, name = meta["namespace"], claim_secret_name(run.obj)
        data = dict(source.get("data") or {})
        target = self.read_secret(namespace, name)
        origin = f"{view.secret[0]}/{view.secret[1]}"
        if target is None:
            self.api.create({
                "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                "metadata": {"name": name, "namespace": namespace,
                             "annotations": {PROPAGATED_FROM: origin},
                             "ownerReferences": [owner_reference(run.obj)]},
                "data": data,
            })
            return
        if not controlled_by(target, meta["uid"]):
            raise HandledError(f"Secret {namespace}/{name} exists and is not owned by this "
                               "claim; not overwritten", reason="SecretNotOwned")
        if target.get("data") == data:
            return
        target_meta = target["metadata"]
        self.api.replace({**target, "data": data, "metadata": {
            **target_meta, "annotations": {**(target_meta.get("annotations") or {}),
                                           PROPAGATED_FROM: origin}}})

    def withdraw(self, run: ClaimPass) -> None:
        """Delete the claim's connection Secret when this claim controls it."""
        meta = run.obj["metadata"]
        name = claim_secret_name(run.obj)
        secret = self.read_secret(meta["namespace"], name)
        if secret is not None and controlled_by(secret, meta["uid"]):
            try:
                self.api.delete("v1", "Secret", meta["namespace"], name)
            except NotFound:
                return

    def event(self, obj: Mapping[str, Any], type_: str, reason: str, message: str) -> None:
        """Record an Event about ``obj``; best effort."""
        try:
            self.api.record_event(obj, type_, reason, message)
        except ApiError:
            return


class ClaimEffects:
    """The side effects the claim machine's actions perform, each idempotent."""

    def __init__(self, store: ClaimStore, run: ClaimPass, facts: ClaimFacts) -> None:
        self.store = store
        self.run = run
        self.facts = facts

    def select_class(self) -> None:
        """Write the scheduled or defaulted class into ``spec.classRef``."""
        selection = self.run.selection
        if selection is None or selection.class_name is None:
            raise HandledError("no class was selected", reason="NotScheduled")
        name = selection.class_name
        self.store.update_claim(self.run, lambda spec: spec.__setitem__("classRef",
                                                                        {"name": name}))
        self.run.dirty = True
        self.store.event(self.run.obj, "Normal", selection.reason, selection.message)

    def provision(self) -> None:
        """Record ``spec.resourceRef``, then create the managed resource (adopting our own)."""
        store = self.store
        desired = self.run.desired
        if desired is None:
            raise HandledError("no class to provision from", reason="ClassNotFound")
        meta = desired["metadata"]
        ref = {"namespace": meta["namespace"], "name": meta["name"]}
        store.update_claim(self.run, lambda spec: spec.__setitem__("resourceRef", ref))
        try:
            store.api.create(desired)
        except AlreadyExists:
            existing = store.get_resource(meta["namespace"], meta["name"])
            if existing is None or ResourceView.from_object(existing).claim_uid != self.facts.uid:
                raise HandledError(f"{meta['namespace']}/{meta['name']} exists and is not this "
                                   "claim's", reason="ResourceNameTaken") from None
        except NotFound:
            raise HandledError(f"namespace {meta['namespace']} for provisioned resources does "
                               "not exist", reason="ResourceNamespaceMissing") from None
        store.event(self.run.obj, "Normal", "Provisioned",
                    f"created {store.binding.managed.kind} {meta['namespace']}/{meta['name']}")

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
        self.store.update_resource(ref, change)

    def propagate(self) -> None:
        """Copy the bound resource's connection Secret into the claim's namespace."""
        self.store.propagate(self.run, self.facts)

    def withdraw(self) -> None:
        """Delete the claim's connection Secret, if this claim controls it."""
        self.store.withdraw(self.run)

    def delete_resource(self) -> None:
        """Delete the bound managed resource; its own reconciler deletes the external one."""
        managed = self.store.binding.managed
        view = self.facts.resource
        assert view is not None  # release is chosen only with a resource pointing at us
        try:
            self.store.api.delete(managed.api_version, managed.kind,
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
        self.store.update_resource((view.namespace, view.name), change)


class ClaimReconciler:
    """Reconciles claims of one :class:`ClaimBinding` through the claim machine's table.

    ``reconcile(namespace, name)`` returns a :class:`Result` following the
    requeue matrix; API errors other than NotFound, and writes that keep
    conflicting, raise :class:`UnhandledError` for the work queue's backoff.
    """

    def __init__(
        self, api: Cluster, binding: ClaimBinding, *, clock: Callable[[], datetime] = now
    ) -> None:
        self.store = ClaimStore(api, binding)
        self.binding = binding
        self.clock = clock
        machine = binding.claim.machine
        self.machine = machine
        self.table = machine.table()
        self.host = machine.guard_host()

    @property
    def api(self) -> Any:
        """The API the reconciler reads and writes through."""
        return self.store.api

    @api.setter
    def api(self, api: Cluster) -> None:
        self.store.api = api

    def reconcile(self, namespace: str | None, name: str) -> Result:
        """Run one reconcile of the claim ``namespace/name``."""
        try:
            return self._reconcile(namespace, name)
        except NotFound:
            return Result.done("NotFound")
        except ConflictsExhausted as exc:
            raise UnhandledError(str(exc)) from exc
        except ApiError as exc:
            raise UnhandledError(f"API error during claim reconcile: {exc}") from exc

    def _reconcile(self, namespace: str | None, name: str) -> Result:
        obj = self.store.get_claim(namespace, name)
        meta = obj["metadata"]
        deleting = bool(meta.get("deletionTimestamp"))
        claimed = FINALIZER in objects.finalizers(obj)
        if deleting and not claimed:
            return Result.done("NotClaimed")
        run = ClaimPass(obj=obj, state=self._restore(obj))
        if not claimed:
            self.store.update_claim_meta(run, lambda m: add_finalizer(m, FINALIZER))
        return self.conclude(run, self.gather(run, deleting))

    def _restore(self, obj: Mapping[str, Any]) -> str:
        """The stored state, or the initial one; a corrupt stored value is reported."""
        state = restore(self.machine, objects.status(obj))
        stored = objects.status(obj).get("state")
        if stored is not None and stored != state:
            self.store.event(obj, "Warning", "StateRepaired",
                             f"stored state {str(stored)[:64]!r} is not a state of "
                             f"{self.table.name}; restarting from {self.table.initial}")
        return state

    def get_resource(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The managed resource ``namespace/name``, or None."""
        return self.store.get_resource(namespace, name)

    def claim_secret_name(self, claim: Mapping[str, Any]) -> str:
        """The name of the claim's connection Secret (in the claim's namespace)."""
        return claim_secret_name(claim)

    # ----------------------------------------------------------- gathering
    def gather(self, run: ClaimPass, deleting: bool) -> ClaimFacts:
        """Read what the event choice depends on: references, resource, Secret, class."""
        obj = run.obj
        meta = obj["metadata"]
        spec = objects.spec(obj)
        facts = ClaimFacts(state=run.state, uid=meta["uid"], deleting=deleting,
                           generation=objects.generation(obj))
        try:
            ref = resource_ref(spec, meta["namespace"])
            named_class = class_ref(spec)
        except TerminalError as exc:
            return attrs.evolve(facts, problem=exc)
        dynamic = ref is not None and ref[1] == dynamic_name(obj)
        view = None
        secret_ready = False
        if ref is not None:
            run.resource = self.store.get_resource(*ref)
            if run.resource is not None:
                view = ResourceView.from_object(run.resource)
                secret_ready = (view.claim_uid == meta["uid"]
                                and self.store.source_secret(view) is not None)
        facts = attrs.evolve(facts, resource_ref=ref, dynamic=dynamic, class_ref=named_class,
                             resource=view, secret_ready=secret_ready)
        if ref is not None and ref[0] != meta["namespace"]:
            ours = view is not None and view.claim_uid == meta["uid"]
            own = (dynamic and (view is None or ours)) or (deleting and ours)
            if not own and first_grant(
                    meta["namespace"], ref[0], self.store.cross_namespace_grants(),
                    lambda: self.store.namespace_labels(meta["namespace"])) is None:
                # Another namespace's resource, and no class allows it: nothing is bound or
                # copied, and nothing is said about whether it exists.
                refusal = cross_namespace_refusal(meta["namespace"], ref,
                                                  self.binding.resource_class.kind)
                return attrs.evolve(facts, resource=None, secret_ready=False, problem=refusal)
        if deleting:
            return facts
        try:
            if ref is None and named_class is None:
                run.selection = select_class(spec.get("classSelector"),
                                             self.store.list_classes())
                return attrs.evolve(facts, selection=run.selection)
            if named_class is not None and (ref is None or (dynamic and view is None)):
                run.desired = self.binding.build_resource(obj, self.store.get_class(named_class))
                return attrs.evolve(facts, class_ready=True)
        except HandledError as exc:
            return attrs.evolve(facts, problem=exc)
        return facts

    # ------------------------------------------- decide, fire, status, requeue
    def conclude(self, run: ClaimPass, facts: ClaimFacts) -> Result:
        """The one sequence after gathering: choose, fire, write status, requeue.

        The choice is the claim's (:func:`~lifecycle.core.claims.choose_claim_event`);
        firing (:func:`~lifecycle.core.decide.transit`) and the conclusion
        (:func:`~lifecycle.core.plan.conclude`: status through
        :func:`~lifecycle.core.claims.settle_claim`, then the requeue result)
        are the managed reconciler's own. An event the state does not allow,
        or an action's handled error, keeps the state (no fail edge: the
        idempotent actions are retried on the next pass); otherwise a problem
        found while gathering is reported. A bound claim polls at its poll
        interval while its resource is not Ready (the claim waits on no
        operation of its own). A final state removes the finalizer.
        """
        choice = choose_claim_event(facts)
        decision = transit(self.machine, run.state, choice, facts)
        if decision.error is None and facts.problem is not None:
            decision = attrs.evolve(decision, error=facts.problem)
        if decision.transition is not None:
            # The managed reconciler's action runner. The claim's actions are the engine's
            # own code: nothing they raise is wrapped (every exception passes through),
            # and any handled error, informational or not, keeps the state.
            acted, notices = run_actions(decision, self.host, ClaimEffects(self.store, run, facts),
                                         passthrough=(Exception,))
            if acted is not decision or notices:
                failed = acted if acted is not decision else decision.failing(notices[0], "action")
                decision = attrs.evolve(failed, transition=None)
        # The status reports the generation as this pass's own writes left it.
        written = attrs.evolve(facts, generation=objects.generation(run.obj))
        moment = self.clock()
        key = run.obj["metadata"]["uid"]

        def concluded(old: Mapping[str, Any]) -> Plan:
            return conclude(self.machine, old, written, decision, now=moment, key=key,
                            dirty=run.dirty, settler=settle_claim, fallback=False,
                            waiting=False)

        done = concluded(objects.status(run.obj))
        for type_, reason, message in done.settled.events:
            self.store.event(run.obj, type_, reason, message)
        self.store.write_status(run, lambda old: concluded(old).settled.status)
        if self.table.states[done.target].final:
            self.store.update_claim_meta(run, lambda m: remove_finalizer(m, FINALIZER))
        return done.result
