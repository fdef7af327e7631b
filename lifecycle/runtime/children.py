"""Parents that own child objects: a kind made of other objects it creates and keeps.

A parent kind declares the objects it owns (:class:`OwnedChild`: a
ConfigMap, a Secret, a managed resource...), each created with a controller
owner reference to the parent. One pass of :class:`ParentReconciler`:

1. get the parent; ignore it if it is gone or being deleted (its children
   carry owner references, so the garbage collector removes them);
2. work on a copy: convert an older stored version up to the newest one
   (:func:`convert_up`), apply spec defaults (:func:`apply_defaults`) and set
   every declared condition that is unset to Unknown
   (:func:`initialize_conditions`);
3. for each owned child: build the desired object from the parent; if none
   exists, create it with a controller owner reference to the parent; if one
   exists that the parent does not own, report ``<Name>Ready=False``
   (reason ``NotOwned``) and leave it untouched; otherwise write back every
   value the parent sets in its compared fields (``spec`` or ``data``) that
   drifted, leaving values the parent does not set (late-initialised
   defaults) alone;
4. copy each child's status into ``status.subresources.<name>`` and its
   readiness into ``<Name>Ready``; ``Ready`` is True when all are;
5. write status only if it changed, so an idle parent causes no writes and
   no watch events. Defaults and conversion are never written back: the
   stored object keeps the version its author used.

"Child" here means an ordinary object the parent owns, not a Kubernetes
subresource (``/status``, ``/scale``); the status key ``subresources`` and the
``Subresources*`` condition reasons keep their established names.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

import attrs

from lifecycle.core import conditions as cond
from lifecycle.core import objects
from lifecycle.core.errors import UnhandledError
from lifecycle.core.parents import OwnedChild, ParentKind, apply_defaults, convert_up
from lifecycle.core.values import Condition, ConditionStatus, Result, now, rfc3339
from lifecycle.kube.cluster import Cluster
from lifecycle.kube.conflict import ConflictsExhausted, on_conflict
from lifecycle.kube.errors import AlreadyExists, ApiError, NotFound
from lifecycle.kube.objects import owned_by, owner_reference
from lifecycle.kube.resources import ResourceType

__all__ = [
    "ChildOutcome", "ParentReconciler", "covers", "initialize_conditions", "overlay",
    "resource_types",
]

T, F, U = ConditionStatus.TRUE, ConditionStatus.FALSE, ConditionStatus.UNKNOWN


def resource_types(kind: ParentKind) -> list[ResourceType]:
    """One type per version ``kind`` serves, to register with an API server."""
    return [ResourceType(kind.group, v.name, kind.kind, kind.plural, kind.namespaced)
            for v in kind.versions]


def initialize_conditions(
    existing: Sequence[Mapping[str, Any]], types: Sequence[str], generation: int, when: str
) -> list[dict[str, Any]]:
    """The stored conditions plus every type in ``types`` that is unset, as Unknown."""
    unset = [Condition(t, U, "Initializing", "", generation) for t in types
             if cond.get(existing, t) is None]
    return cond.merge(existing, unset, when)


def covers(actual: Any, wanted: Any) -> bool:
    """Whether ``actual`` holds every value ``wanted`` sets (mappings compared key by key).

    Fields the parent does not set (a provider's late-initialised defaults,
    keys someone else added) are left alone.
    """
    if isinstance(wanted, Mapping):
        return isinstance(actual, Mapping) and all(
            covers(actual.get(k), v) for k, v in wanted.items())
    return actual == wanted


def overlay(actual: Any, wanted: Any) -> Any:
    """``actual`` with every value ``wanted`` sets written over it (mappings merged)."""
    if isinstance(wanted, Mapping) and isinstance(actual, Mapping):
        return {**actual, **{k: overlay(actual.get(k), v) for k, v in wanted.items()}}
    return copy.deepcopy(wanted)


@attrs.frozen
class ChildOutcome:
    """What reconciling one child found: its condition and projected status."""

    name: str
    condition: Condition
    status: Mapping[str, Any] | None = None


class ParentReconciler:
    """Reconciles one :class:`ParentKind`: defaults, conditions, conversion, owned children.

    ``ready_poll`` is the requeue interval once every child is Ready,
    ``wait`` the interval while one is not (there are no watches on the
    children here, so the parent looks again).
    """

    def __init__(self, api: Cluster, kind: ParentKind, *, clock: Callable[[], datetime] = now,
                 ready_poll: float = 60.0, wait: float = 2.0) -> None:
        self.api: Any = api
        self.kind = kind
        self.clock = clock
        self.ready_poll = ready_poll
        self.wait = wait

    def reconcile(self, namespace: str | None, name: str) -> Result:
        """One pass over the parent ``namespace/name``, whichever version it is stored in."""
        try:
            return self._reconcile(namespace, name)
        except ConflictsExhausted as exc:
            raise UnhandledError(str(exc)) from exc
        except ApiError as exc:
            raise UnhandledError(f"API error during parent reconcile: {exc}") from exc

    def _get(self, namespace: str | None, name: str) -> dict[str, Any] | None:
        for api_version in self.kind.api_versions:
            try:
                return self.api.get(api_version, self.kind.kind, namespace, name)
            except NotFound:
                continue
        return None

    def _reconcile(self, namespace: str | None, name: str) -> Result:
        obj = self._get(namespace, name)
        if obj is None:
            return Result.done("NotFound")
        meta = obj["metadata"]
        if meta.get("deletionTimestamp"):
            return Result.done("Deleting")
        when = rfc3339(self.clock())
        generation = objects.generation(obj)
        old = objects.status(obj)
        conditions = initialize_conditions(old.get("conditions") or [],
                                           self.kind.condition_types, generation, when)
        working = convert_up(obj, self.kind)  # read from a served version, so it converts
        working["spec"] = apply_defaults(working.get("spec"), self.kind.defaults)
        outcomes = [self._reconcile_one(obj, working, child, generation)
                    for child in self.kind.children]
        statuses = [o.condition.status for o in outcomes]
        if all(s is T for s in statuses):
            ready = Condition(cond.READY, T, "SubresourcesReady", "", generation)
        elif any(s is F for s in statuses):
            failing = [o.condition.type for o in outcomes if o.condition.status is F]
            ready = Condition(cond.READY, F, "SubresourcesNotReady",
                              f"not ready: {', '.join(failing)}", generation)
        else:
            ready = Condition(cond.READY, U, "SubresourcesPending", "", generation)
        conditions = cond.merge(conditions, [*(o.condition for o in outcomes), ready], when)
        status = {
            **old,
            "observedGeneration": generation,
            "conditions": conditions,
            "subresources": {o.name: dict(o.status) for o in outcomes if o.status is not None},
        }
        self._write_status(obj, status)
        if ready.status is T:
            return Result.later(self.ready_poll, "Poll")
        return Result.later(self.wait, "Waiting")

    def _reconcile_one(self, parent: Mapping[str, Any], working: Mapping[str, Any],
                       spec: OwnedChild, generation: int) -> ChildOutcome:
        desired = spec.build(working)
        meta = desired.setdefault("metadata", {})
        if self.kind.namespaced:
            meta.setdefault("namespace", parent["metadata"]["namespace"])
        meta["ownerReferences"] = [owner_reference(parent)]
        where = f"{desired['kind']} {meta.get('namespace', '')}/{meta['name']}".replace(" /", " ")
        try:
            child = self.api.get(desired["apiVersion"], desired["kind"], meta.get("namespace"),
                                 meta["name"])
        except NotFound:
            try:
                self.api.create(desired)
            except AlreadyExists:
                return ChildOutcome(spec.name, Condition(spec.condition, U, "CreateRaced",
                                                         f"{where} appeared while creating it",
                                                         generation))
            self._event(parent, "Normal", "Created", f"created {where}")
            return ChildOutcome(spec.name, Condition(spec.condition, U, "Created",
                                                     f"created {where}", generation), {})
        if not owned_by(child, parent["metadata"]["uid"]):
            message = (f"{where} exists and is not owned by {parent['kind']} "
                       f"{parent['metadata']['name']}; left untouched")
            self._event(parent, "Warning", "NotOwned", message)
            return ChildOutcome(spec.name,
                                Condition(spec.condition, F, "NotOwned", message, generation))
        if not all(covers(child.get(f), desired.get(f)) for f in spec.compare):
            child = self._revert_drift(child, desired, spec.compare, where)
        status = spec.ready(child)
        reason = {T: "Ready", F: "NotReady", U: "Pending"}[status]
        return ChildOutcome(spec.name, Condition(spec.condition, status, reason, "", generation),
                       spec.status(child))

    def _revert_drift(self, child: dict[str, Any], desired: Mapping[str, Any],
                      compare: Sequence[str], where: str) -> dict[str, Any]:
        """Write the parent's values over the child's compared fields, retrying 409s."""
        meta = desired["metadata"]
        current = child

        def attempt() -> dict[str, Any]:  # what was read is read-only: write a new body
            return self.api.replace(
                {**current, **{f: overlay(current.get(f), desired.get(f)) for f in compare}})

        def refresh() -> None:
            nonlocal current
            current = self.api.get(desired["apiVersion"], desired["kind"],
                                   meta.get("namespace"), meta["name"])

        return on_conflict(attempt, refresh, what=f"write of {where}")

    def _write_status(self, obj: dict[str, Any], status: dict[str, Any]) -> None:
        """Write status only if it changed, retrying 409s on a fresh read.

        Stops quietly when the parent is gone by then.
        """
        current: dict[str, Any] | None = obj

        def attempt() -> None:
            if current is None or status == current.get("status"):
                return
            self.api.replace_status({**current, "status": status})

        def refresh() -> None:
            nonlocal current
            current = self._get(obj["metadata"].get("namespace"), obj["metadata"]["name"])

        on_conflict(attempt, refresh, what="parent status write")

    def _event(self, obj: Mapping[str, Any], type_: str, reason: str, message: str) -> None:
        try:
            self.api.record_event(obj, type_, reason, message)
        except ApiError:
            return
