"""Garbage collection and namespace deletion of the embedded API.

A real cluster's kube-controller-manager deletes the dependents of a deleted
owner (objects whose ``metadata.ownerReferences`` name its uid) and empties
a deleted Namespace. The embedded API does the same synchronously, inside
the store, so tests see a deterministic outcome:

* **Background** (the default): once the owner is gone, each dependent is
  deleted, unless another of its owners still exists; then only the
  references to the missing owners are removed.
* **Foreground**: the owner gets ``deletionTimestamp`` and the
  ``foregroundDeletion`` finalizer; its dependents are deleted (in the
  foreground too); the owner goes away once no dependent with
  ``blockOwnerDeletion: true`` remains.
* **Orphan**: the owner gets the ``orphan`` finalizer; the references to it
  are removed from its dependents, then the finalizer, and it goes away.
* **Namespace**: it turns ``Terminating`` (``deletionTimestamp``, status
  phase), every object in it is deleted, and it goes away when empty.

Finalizers of dependents are respected: they get ``deletionTimestamp`` and
linger, and their owners in foreground deletion linger with them. An
owner reference from a namespaced dependent names an owner in the
dependent's own namespace; the same uid in another namespace is not its
owner. A reference whose kind the server does not serve is left alone.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from typing import Any, Protocol

from lifecycle.kube.errors import BadRequest, Conflict, Invalid
from lifecycle.kube.objects import clone
from lifecycle.kube.resources import NAMESPACE, ResourceType
from lifecycle.sim.faults import FaultInjector
from lifecycle.sim.sharing import Lender
from lifecycle.sim.validation import object_key
from lifecycle.sim.watch import History

__all__ = [
    "FOREGROUND",
    "ORPHAN",
    "POLICIES",
    "Collector",
    "Deletes",
    "GcStore",
    "check_policy",
    "deletion_done",
    "plan_delete",
]

#: The finalizer of an owner waiting for its blocking dependents to go.
FOREGROUND = "foregroundDeletion"
#: The finalizer of an owner whose dependents are being orphaned.
ORPHAN = "orphan"
#: The finalizer a Namespace carries in ``spec.finalizers`` until it is empty.
NAMESPACE_FINALIZER = "kubernetes"
#: The propagation policies a delete accepts.
POLICIES = ("Foreground", "Background", "Orphan")

TypeKey = tuple[str, str]
ObjKey = tuple[str | None, str]


class GcStore(Protocol):
    """What the collector needs of the store (its lock is held on every call)."""

    def _table(self, rtype: ResourceType) -> dict[ObjKey, dict[str, Any]]: ...

    def _commit(
        self, rtype: ResourceType, stored: dict[str, Any], new: dict[str, Any]
    ) -> dict[str, Any]: ...

    def _remove(self, rtype: ResourceType, stored: dict[str, Any]) -> None: ...

    def _timestamp(self) -> str: ...

    def types(self) -> list[ResourceType]: ...


def check_policy(policy: Any) -> None:
    """A propagation policy must be one of :data:`POLICIES` (or ``None``)."""
    if policy is None or policy in POLICIES:
        return
    raise Invalid(
        f'DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: Unsupported value: '
        f'"{policy}": supported values: "Foreground", "Background", "Orphan"',
        causes=[{"reason": "FieldValueNotSupported", "field": "propagationPolicy",
                 "message": f'Unsupported value: "{policy}": supported values: '
                            f'"Foreground", "Background", "Orphan"'}],
        group="meta.k8s.io", kind="DeleteOptions",
    )


def _finalizers(obj: Mapping[str, Any]) -> list[str]:
    return list(obj["metadata"].get("finalizers") or [])


def _spec_finalizers(rtype: ResourceType, obj: Mapping[str, Any]) -> list[str]:
    if rtype is not NAMESPACE:
        return []
    spec = obj.get("spec")
    return list(spec.get("finalizers") or []) if isinstance(spec, Mapping) else []


def deletion_done(rtype: ResourceType, obj: Mapping[str, Any]) -> bool:
    """Whether an object being deleted has no finalizer left (and should be removed)."""
    return bool(
        obj["metadata"].get("deletionTimestamp")
        and not obj["metadata"].get("finalizers")
        and not _spec_finalizers(rtype, obj)
    )


def plan_delete(
    rtype: ResourceType, stored: dict[str, Any], policy: str | None, stamp: str
) -> dict[str, Any] | None:
    """What a delete makes of ``stored`` at once: ``None`` if it is removed right away.

    Otherwise the object with ``deletionTimestamp`` (kept if already set),
    ``deletionGracePeriodSeconds: 0`` and the finalizers the policy asks for
    (``Foreground`` adds ``foregroundDeletion``, ``Orphan`` adds ``orphan``,
    ``Background`` removes both); a Namespace turns ``Terminating``.
    """
    meta = stored["metadata"]
    finalizers = _finalizers(stored)
    if policy == "Orphan":
        finalizers = [f for f in finalizers if f != FOREGROUND]
        finalizers += [ORPHAN] if ORPHAN not in finalizers else []
    elif policy == "Foreground":
        finalizers = [f for f in finalizers if f != ORPHAN]
        finalizers += [FOREGROUND] if FOREGROUND not in finalizers else []
    elif policy == "Background":
        finalizers = [f for f in finalizers if f not in (ORPHAN, FOREGROUND)]
    if rtype is NAMESPACE and policy != "Orphan":
        finalizers = [f for f in finalizers if f != ORPHAN]
    if not finalizers and not _spec_finalizers(rtype, stored) and rtype is not NAMESPACE:
        return None
    new = dict(stored)
    new_meta = dict(meta)
    new["metadata"] = new_meta
    if not meta.get("deletionTimestamp"):
        new_meta["deletionTimestamp"] = stamp
        new_meta["deletionGracePeriodSeconds"] = 0
        generation = meta.get("generation")
        if isinstance(generation, int) and generation > 0:
            # As a real server: the start of a graceful deletion is a new generation.
            new_meta["generation"] = generation + 1
    if finalizers:
        new_meta["finalizers"] = finalizers
    else:
        new_meta.pop("finalizers", None)
    if rtype is NAMESPACE:
        new["status"] = dict(stored.get("status") or {}, phase="Terminating")
        if not finalizers and not _spec_finalizers(rtype, stored):
            return None
    return new


def _json_name(value: Any) -> str:
    """How a JSON decoder names the type of ``value``."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, list):
        return "array"
    return "object" if isinstance(value, dict) else "string"


def _refs(obj: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    refs = obj["metadata"].get("ownerReferences")
    if not isinstance(refs, list):
        return []
    return [ref for ref in refs if ref.__class__ is dict or isinstance(ref, Mapping)]


class Collector:
    """The garbage collector and namespace controller of one embedded API store.

    :meth:`track` keeps an index from owner uid to dependents on every write;
    :meth:`delete` carries out a delete with a propagation policy;
    :meth:`removed` reacts to an object leaving the store; :meth:`adopted`
    deletes a new dependent whose owners are all gone.
    """

    def __init__(self, store: GcStore) -> None:
        self._store = store
        self._dependents: dict[str, set[tuple[TypeKey, ObjKey]]] = {}

    # -- the index -------------------------------------------------------------------

    def track(
        self, rtype: ResourceType, new: dict[str, Any] | None, old: dict[str, Any] | None
    ) -> None:
        """Update the owner index after a write (``new`` ``None``: the object is gone)."""
        new_refs = new["metadata"].get("ownerReferences") if new is not None else None
        old_refs = old["metadata"].get("ownerReferences") if old is not None else None
        if new_refs == old_refs or not (new_refs or old_refs):
            return  # the same references, or none before or after: the same owners
        old_uids = {str(ref.get("uid")) for ref in _refs(old)} if old is not None else set()
        new_uids = {str(ref.get("uid")) for ref in _refs(new)} if new is not None else set()
        if old_uids == new_uids:
            return
        obj = new if new is not None else old
        assert obj is not None
        entry = ((rtype.api_version, rtype.kind), self._key(rtype, obj))
        for uid in old_uids - new_uids:
            holders = self._dependents.get(uid)
            if holders is not None:
                holders.discard(entry)
                if not holders:
                    del self._dependents[uid]
        for uid in new_uids - old_uids:
            self._dependents.setdefault(uid, set()).add(entry)

    def reindex(self) -> None:
        """Rebuild the owner index from every stored object (after a restore)."""
        self._dependents.clear()
        for rtype in self._store.types():
            for obj in self._store._table(rtype).values():
                self.track(rtype, obj, None)

    @staticmethod
    def _key(rtype: ResourceType, obj: Mapping[str, Any]) -> ObjKey:
        meta = obj["metadata"]
        return (meta.get("namespace") if rtype.namespaced else None, meta["name"])

    def _type(self, key: TypeKey) -> ResourceType | None:
        for rtype in self._store.types():
            if (rtype.api_version, rtype.kind) == key:
                return rtype
        return None

    def _current(self, rtype: ResourceType, key: ObjKey) -> dict[str, Any] | None:
        return self._store._table(rtype).get(key)

    def _owner_types(self, ref: Mapping[str, Any]) -> list[ResourceType]:
        """The served versions of the owner's kind, the one the reference names first."""
        api_version, kind = str(ref.get("apiVersion", "")), ref.get("kind")
        group = api_version.rpartition("/")[0]
        found = [rtype for rtype in self._store.types()
                 if rtype.kind == kind and rtype.group == group]
        return sorted(found, key=lambda rtype: rtype.api_version != api_version)

    def _resolve(
        self, dependent_type: ResourceType, dependent: Mapping[str, Any], ref: Mapping[str, Any],
        owner_types: list[ResourceType] | None = None,
    ) -> tuple[ResourceType, ObjKey] | None:
        """Where the owner ``ref`` names lives, or ``None`` if its kind is not served.

        ``owner_types`` is ``_owner_types(ref)`` when the caller has it already.
        """
        if owner_types is None:
            owner_types = self._owner_types(ref)
        if not owner_types or not isinstance(ref.get("name"), str):
            return None
        owner_type = owner_types[0]
        if owner_type.namespaced:
            namespace = dependent["metadata"].get("namespace") if dependent_type.namespaced else ""
            return owner_type, (namespace or "", ref["name"])
        return owner_type, (None, ref["name"])

    def _owner(
        self, dependent_type: ResourceType, dependent: Mapping[str, Any], ref: Mapping[str, Any]
    ) -> tuple[str, dict[str, Any] | None]:
        """``("unknown", None)``, ``("absent", None)`` or ``("present", owner)``."""
        owner_types = self._owner_types(ref)
        where = self._resolve(dependent_type, dependent, ref, owner_types)
        if where is None:
            return "unknown", None
        for owner_type in owner_types:
            owner = self._current(owner_type, where[1])
            if owner is not None and owner["metadata"].get("uid") == ref.get("uid"):
                return "present", owner
        return "absent", None

    def _dependents_of(
        self, owner_type: ResourceType, owner: Mapping[str, Any]
    ) -> Iterator[tuple[ResourceType, dict[str, Any]]]:
        """The stored objects with a reference resolving to ``owner``."""
        uid = owner["metadata"].get("uid")
        owner_key = self._key(owner_type, owner)
        for type_key, key in sorted(self._dependents.get(uid, ()), key=repr):
            rtype = self._type(type_key)
            dependent = self._current(rtype, key) if rtype is not None else None
            if rtype is None or dependent is None:
                continue
            for ref in _refs(dependent):
                if ref.get("uid") != uid:
                    continue
                where = self._resolve(rtype, dependent, ref)
                if (where is not None and where[1] == owner_key
                        and (where[0].group, where[0].kind) == (owner_type.group, owner_type.kind)):
                    yield rtype, dependent
                    break

    # -- deletion --------------------------------------------------------------------

    def delete(
        self, rtype: ResourceType, stored: dict[str, Any], policy: str | None
    ) -> dict[str, Any] | None:
        """Delete ``stored`` with ``policy`` and cascade; the object afterwards (``None``: gone)."""
        new = plan_delete(rtype, stored, policy, self._store._timestamp())
        if new is None:
            self._store._remove(rtype, stored)
            return None
        if new != stored:
            self._store._commit(rtype, stored, new)
        key = self._key(rtype, stored)
        current = self._current(rtype, key)
        if current is None:
            return None
        if rtype is NAMESPACE:
            self._terminate(current)
        elif ORPHAN in _finalizers(current):
            self._orphan(rtype, current)
        elif FOREGROUND in _finalizers(current):
            for dep_type, dependent in list(self._dependents_of(rtype, current)):
                self._attempt(dep_type, dependent)
            self._check_foreground(rtype, key)
        return self._current(rtype, key)

    def _orphan(self, rtype: ResourceType, owner: dict[str, Any]) -> None:
        uid = owner["metadata"]["uid"]
        for dep_type, dependent in list(self._dependents_of(rtype, owner)):
            self._drop_refs(dep_type, dependent, {uid})
        current = self._current(rtype, self._key(rtype, owner))
        if current is not None and ORPHAN in _finalizers(current):
            self._set_finalizers(rtype, current, [f for f in _finalizers(current) if f != ORPHAN])

    def _set_finalizers(
        self, rtype: ResourceType, stored: dict[str, Any], finalizers: list[str]
    ) -> None:
        new = dict(stored)
        new["metadata"] = dict(stored["metadata"])
        if finalizers:
            new["metadata"]["finalizers"] = finalizers
        else:
            new["metadata"].pop("finalizers", None)
        self._store._commit(rtype, stored, new)

    def _drop_refs(self, rtype: ResourceType, stored: dict[str, Any], uids: set[str]) -> None:
        kept = [ref for ref in stored["metadata"].get("ownerReferences") or []
                if not (isinstance(ref, Mapping) and ref.get("uid") in uids)]
        new = dict(stored)
        new["metadata"] = dict(stored["metadata"])
        if kept:
            new["metadata"]["ownerReferences"] = kept
        else:
            new["metadata"].pop("ownerReferences", None)
        self._store._commit(rtype, stored, new)

    def _attempt(self, rtype: ResourceType, dependent: dict[str, Any]) -> None:
        """Delete a dependent whose owners are gone, or drop references to missing ones."""
        key = self._key(rtype, dependent)
        current = self._current(rtype, key)
        if current is None:
            return
        if current["metadata"].get("deletionTimestamp"):
            if FOREGROUND in _finalizers(current):
                self._check_foreground(rtype, key)
            return
        solid = False
        gone: set[str] = set()
        waiting = False
        for ref in _refs(current):
            state, owner = self._owner(rtype, current, ref)
            if state == "unknown":
                solid = True
            elif state == "absent":
                gone.add(str(ref.get("uid")))
            elif owner is not None and owner["metadata"].get("deletionTimestamp") and (
                FOREGROUND in _finalizers(owner)
            ):
                waiting = True
                gone.add(str(ref.get("uid")))
            else:
                solid = True
        if not gone:
            return
        if solid:
            self._drop_refs(rtype, current, gone)
        else:
            self.delete(rtype, current, "Foreground" if waiting else None)

    def _check_foreground(self, rtype: ResourceType, key: ObjKey) -> None:
        """Remove ``foregroundDeletion`` from an owner once no blocking dependent remains."""
        owner = self._current(rtype, key)
        if owner is None or FOREGROUND not in _finalizers(owner):
            return
        uid = owner["metadata"]["uid"]
        for _dep_type, dependent in self._dependents_of(rtype, owner):
            for ref in _refs(dependent):
                if ref.get("uid") == uid and ref.get("blockOwnerDeletion") is True:
                    return
        self._set_finalizers(rtype, owner, [f for f in _finalizers(owner) if f != FOREGROUND])

    # -- namespaces ----------------------------------------------------------------

    def _contents(self, namespace: str) -> Iterator[tuple[ResourceType, dict[str, Any]]]:
        for rtype in self._store.types():
            if not rtype.namespaced:
                continue
            table = self._store._table(rtype)
            for key in sorted(k for k in table if k[0] == namespace):
                yield rtype, table[key]

    def _terminate(self, namespace: dict[str, Any]) -> None:
        name = namespace["metadata"]["name"]
        for rtype, obj in list(self._contents(name)):
            current = self._current(rtype, self._key(rtype, obj))
            if current is not None and not current["metadata"].get("deletionTimestamp"):
                self.delete(rtype, current, None)
        self._check_namespace(name)

    def _check_namespace(self, name: str) -> None:
        """Finalize a terminating Namespace once nothing is left in it."""
        namespace = self._current(NAMESPACE, (None, name))
        if namespace is None or not namespace["metadata"].get("deletionTimestamp"):
            return
        if next(self._contents(name), None) is not None:
            return
        spec_finalizers = _spec_finalizers(NAMESPACE, namespace)
        if NAMESPACE_FINALIZER not in spec_finalizers:
            return
        new = dict(namespace)
        new["metadata"] = dict(namespace["metadata"])
        new["spec"] = dict(namespace.get("spec") or {})
        new["spec"]["finalizers"] = [f for f in spec_finalizers if f != NAMESPACE_FINALIZER]
        if not new["spec"]["finalizers"]:
            del new["spec"]["finalizers"]
        if deletion_done(NAMESPACE, new):
            self._store._remove(NAMESPACE, namespace)
        else:
            self._store._commit(NAMESPACE, namespace, new)

    # -- reactions -------------------------------------------------------------------

    def removed(self, rtype: ResourceType, obj: dict[str, Any]) -> None:
        """React to ``obj`` leaving the store: cascade to dependents, unblock owners."""
        for dep_type, dependent in list(self._dependents_of(rtype, obj)):
            self._attempt(dep_type, dependent)
        for ref in _refs(obj):
            state, owner = self._owner(rtype, obj, ref)
            if state == "present" and owner is not None and FOREGROUND in _finalizers(owner):
                owner_type = self._type((owner["apiVersion"], owner["kind"]))
                if owner_type is not None:
                    self._check_foreground(owner_type, self._key(owner_type, owner))
        if rtype.namespaced:
            self._check_namespace(obj["metadata"].get("namespace") or "")

    def adopted(self, rtype: ResourceType, obj: dict[str, Any]) -> None:
        """Check a new or re-referenced dependent: delete it if every owner is gone."""
        if _refs(obj):
            self._attempt(rtype, obj)


class Deletes:
    """The delete verb of the embedded API (mixed into ``EmbeddedAPI``)."""

    _lock: threading.RLock
    _lender: Lender
    _log: History
    _gc: Collector
    faults: FaultInjector

    def _count(self, verb: str, kind: str) -> None:
        raise NotImplementedError

    def resource_type(self, api_version: str, kind: str) -> ResourceType:
        """The registered type for ``api_version`` and ``kind``; ``NotFound`` if none."""
        raise NotImplementedError

    def _stored(self, rtype: ResourceType, key: ObjKey) -> dict[str, Any]:
        raise NotImplementedError

    def _table(self, rtype: ResourceType) -> dict[ObjKey, dict[str, Any]]:
        raise NotImplementedError

    def _timestamp(self) -> str:
        raise NotImplementedError

    def _record(
        self, change_type: str, rtype: ResourceType, obj: dict[str, Any],
        previous: dict[str, Any] | None,
    ) -> None:
        raise NotImplementedError

    def _deleting(self, rtype: ResourceType, stored: dict[str, Any]) -> dict[str, Any]:
        return stored

    def _remove(self, rtype: ResourceType, stored: dict[str, Any]) -> None:
        """Remove a stored object now (lock held): a new resourceVersion and ``DELETED``."""
        meta = stored["metadata"]
        self._log.rv += 1
        gone = dict(stored)
        gone["metadata"] = dict(meta, resourceVersion=str(self._log.rv))
        del self._table(rtype)[(meta.get("namespace") if rtype.namespaced else None, meta["name"])]
        self._record("DELETED", rtype, gone, stored)

    def delete(
        self,
        api_version: str,
        kind: str,
        namespace: str | None,
        name: str,
        *,
        resource_version: str | None = None,
        uid: str | None = None,
        propagation_policy: str | None = None,
        dry_run: bool = False,
    ) -> dict[str, Any] | None:
        """Delete an object, and its dependents as the garbage collector would.

        With finalizers, the object only gets ``deletionTimestamp`` (set once)
        and ``deletionGracePeriodSeconds: 0`` and is returned; it goes away when
        its last finalizer is removed. Without, it is removed and ``None`` is
        returned. ``resource_version`` and ``uid`` are preconditions.
        ``propagation_policy`` (``Background`` by default, ``Foreground`` or
        ``Orphan``) says what happens to dependents (see :mod:`lifecycle.sim.gc`);
        a Namespace is emptied first. With ``dry_run`` the answer is what the
        object would become, and nothing changes.
        """
        self._count("delete", kind)
        self.faults.check("delete", kind)
        rtype = self.resource_type(api_version, kind)
        check_policy(propagation_policy)
        with self._lock:
            key = object_key(rtype, namespace, name)
            stored = self._stored(rtype, key)
            for label, field, given, actual in (
                ("UID", "uid", uid, stored["metadata"].get("uid")),
                ("ResourceVersion", "resourceVersion", resource_version,
                 stored["metadata"].get("resourceVersion")),
            ):
                if given is not None and not isinstance(given, str):
                    raise BadRequest(
                        'DeleteOptions in version "v1" cannot be handled as a DeleteOptions: '
                        f"json: cannot unmarshal {_json_name(given)} into Go struct field "
                        f"Preconditions.preconditions.{field} of type "
                        f"{'types.UID' if field == 'uid' else 'string'}"
                    )
                if given not in (None, "") and given != actual:
                    qualified = f"{rtype.kind}.{rtype.group}" if rtype.group else rtype.kind
                    why = ("deleted and then recreated" if field == "uid" else "modified")
                    raise Conflict(
                        f'Operation cannot be fulfilled on {qualified} "{key[1]}": '
                        f"the {label} in the precondition ({given}) does not match the "
                        f"{label} in record ({actual}). The object might have been {why}"
                    )
            if dry_run:
                planned = plan_delete(rtype, stored, propagation_policy, self._timestamp())
                return None if planned is None else clone(planned)
            stored = self._deleting(rtype, stored)
            result = self._gc.delete(rtype, stored, propagation_policy)
            return None if result is None else self._lender.out(result, "delete")
