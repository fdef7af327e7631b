"""CustomResourceDefinitions as objects of the embedded API, served as a real server serves them.

Creating, updating or deleting an ``apiextensions.k8s.io/v1``
CustomResourceDefinition in an :class:`~lifecycle.sim.apiserver.EmbeddedAPI`
(in process or over HTTP) does what the API server's CRD controllers do:

* the definition is checked (structural schemas, names, one storage
  version) and a bad one is refused with 422; ``spec.scope`` and
  ``spec.names.kind`` are immutable once the CRD is Established, and every
  version in ``status.storedVersions`` must stay in ``spec.versions``;
* ``spec.names.singular``/``listKind`` and ``spec.conversion`` are defaulted;
* the status gets ``acceptedNames``, ``storedVersions`` and the conditions
  ``NamesAccepted`` (False with ``PluralConflict``, ``KindConflict``... when
  another CRD of the group already uses a name) and ``Established``;
* every version with ``served: true`` is served with the version's schema
  (pruning, defaulting, validation: :mod:`lifecycle.sim.schema`), status
  subresource, short names, categories and printer columns; a version added
  later is served, one removed or no longer served is not;
* deleting the CRD adds the ``customresourcecleanup.apiextensions.k8s.io``
  finalizer and a ``Terminating`` condition, refuses new objects of the kind
  (405), deletes every object of it and, once the last is gone (their own
  finalizers permitting), removes the CRD and stops serving the kind.

Objects of all served versions share one store, keep the ``apiVersion`` they
were written with, and watches see the writes made through their version.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lifecycle.kube.errors import MethodNotAllowed
from lifecycle.kube.objects import clone
from lifecycle.kube.resources import ResourceType
from lifecycle.schema.crds import check_crd
from lifecycle.sim import celrules
from lifecycle.sim import schema as schemas
from lifecycle.sim.gc import plan_delete

#: The store the controller works for: :class:`~lifecycle.sim.apiserver.EmbeddedAPI`
#: (not imported here, so that the store may import this module).
EmbeddedAPI = Any

__all__ = ["CLEANUP_FINALIZER", "CRD", "CRDController", "apply_crd", "resource_types"]

#: The CustomResourceDefinition kind itself (cluster-scoped, with a status subresource).
CRD = ResourceType("apiextensions.k8s.io", "v1", "CustomResourceDefinition",
                   "customresourcedefinitions", namespaced=False, status_subresource=True,
                   short_names=("crd", "crds"), categories=("api-extensions",))
#: The finalizer that holds a deleted CRD until every object of its kind is gone.
CLEANUP_FINALIZER = "customresourcecleanup.apiextensions.k8s.io"

_NAME_FIELDS = (("plural", "PluralConflict"), ("singular", "SingularConflict"),
                ("kind", "KindConflict"), ("listKind", "ListKindConflict"))


def resource_types(crd: Mapping[str, Any]) -> list[ResourceType]:
    """The resource types a CRD serves: one per version with ``served: true``."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    found = []
    for version in spec.get("versions") or []:
        if not isinstance(version, Mapping) or version.get("served") is not True:
            continue
        found.append(ResourceType(
            spec.get("group", ""), version.get("name", ""), names.get("kind", ""),
            names.get("plural", ""), namespaced=spec.get("scope") == "Namespaced",
            status_subresource="status" in (version.get("subresources") or {}),
            schema=(version.get("schema") or {}).get("openAPIV3Schema"),
            short_names=tuple(names.get("shortNames") or ()),
            categories=tuple(names.get("categories") or ()),
            printer_columns=tuple(version.get("additionalPrinterColumns") or ()),
        ))
    return found


def apply_crd(api: EmbeddedAPI, crd: Mapping[str, Any]) -> dict[str, Any]:
    """Create ``crd`` in ``api``, or update the stored one to it; returns it as stored.

    Re-applying an identical CRD changes nothing.
    """
    name = crd["metadata"]["name"]
    try:
        stored = api.get(CRD.api_version, CRD.kind, None, name)
    except Exception:  # NotFound: create it
        return api.create(clone(dict(crd)))
    body = clone(dict(crd))
    body["metadata"] = {**stored["metadata"], **body.get("metadata", {}),
                        "resourceVersion": stored["metadata"]["resourceVersion"]}
    return api.replace(body)


class CRDController:
    """What the API server's CRD registry and controllers do, for one :class:`EmbeddedAPI`.

    The store calls :meth:`admit` before it writes a CRD, :meth:`written`
    after, :meth:`deleting` when a CRD is deleted, :meth:`check_create` before
    it creates a custom object and :meth:`recorded` after every change it
    records. All run with the store's lock held.
    """

    def __init__(self, api: EmbeddedAPI) -> None:
        self.api = api
        #: CRD name -> the (api_version, kind) keys it serves.
        self._served: dict[str, set[tuple[str, str]]] = {}
        self._busy = False

    # ---------------------------------------------------------------- admission
    def admit(self, new: dict[str, Any], old: dict[str, Any] | None) -> dict[str, Any]:
        """Default and check a CRD about to be written; :class:`Invalid` (422) if it is bad."""
        spec = new.get("spec")
        if isinstance(spec, dict):
            spec = new["spec"] = dict(spec)
            names = spec.get("names")
            if isinstance(names, dict) and isinstance(names.get("kind"), str):
                names = spec["names"] = dict(names)
                names.setdefault("singular", names["kind"].lower())
                names.setdefault("listKind", f"{names['kind']}List")
            spec.setdefault("conversion", {"strategy": "None"})
        name = str((new.get("metadata") or {}).get("name") or "")
        causes = [_cause(problem) for problem in check_crd(new)]
        if not causes:
            causes = celrules.crd_problems(new)
        if old is not None and isinstance(spec, dict):
            causes.extend(self._update_causes(spec, old))
        if causes:
            raise schemas.invalid(CRD, name, causes)
        return new

    def _update_causes(self, spec: Mapping[str, Any], old: Mapping[str, Any]) -> list[dict]:
        old_spec = old.get("spec") or {}
        causes = []
        if _condition(old, "Established") == "True":
            for field, value, before in (
                    ("spec.scope", spec.get("scope"), old_spec.get("scope")),
                    ("spec.names.kind", (spec.get("names") or {}).get("kind"),
                     (old_spec.get("names") or {}).get("kind"))):
                if value != before:
                    causes.append({"reason": "FieldValueInvalid", "field": field,
                                   "message": f"Invalid value: {_quote(value)}: "
                                              f"field is immutable"})
        versions = {v.get("name") for v in spec.get("versions") or [] if isinstance(v, Mapping)}
        stored = (old.get("status") or {}).get("storedVersions") or []
        for index, version in enumerate(stored):
            if version not in versions:
                causes.append({"reason": "FieldValueInvalid",
                               "field": f"status.storedVersions[{index}]",
                               "message": f"Invalid value: {_quote(version)}: must appear in "
                                          f"spec.versions"})
        return causes

    # ------------------------------------------------------------------ serving
    def written(self, crd: dict[str, Any]) -> None:
        """After a CRD write: accept its names, serve its versions and record its status."""
        meta = crd["metadata"]
        if meta.get("deletionTimestamp"):
            return
        name = meta["name"]
        spec = crd.get("spec") or {}
        names = dict(spec.get("names") or {})
        conflict = self._conflict(name, spec)
        old_status = crd.get("status") or {}
        stamp = self.api._timestamp()
        conditions = list(old_status.get("conditions") or [])
        if conflict is None:
            accepted = {k: names[k] for k in ("plural", "singular", "shortNames", "kind",
                                               "listKind", "categories") if k in names}
            conditions = _set(conditions, "NamesAccepted", "True", "NoConflicts",
                              "no conflicts found", stamp)
            conditions = _set(conditions, "Established", "True", "InitialNamesAccepted",
                              "the initial names have been accepted", stamp)
            self._serve(name, crd)
        else:
            accepted = dict(old_status.get("acceptedNames") or {})
            reason, message = conflict
            conditions = _set(conditions, "NamesAccepted", "False", reason, message, stamp)
            if _condition(crd, "Established") != "True":
                conditions = _set(conditions, "Established", "False", "NotAccepted",
                                  "not all names are accepted", stamp)
                self._unserve(name)
            else:
                self._serve(name, crd)
        storage = [v.get("name") for v in spec.get("versions") or []
                   if isinstance(v, Mapping) and v.get("storage")]
        stored_versions = list(old_status.get("storedVersions") or [])
        for version in storage:
            if version not in stored_versions:
                stored_versions.append(version)
        status = {**old_status, "conditions": conditions, "acceptedNames": accepted,
                  "storedVersions": stored_versions}
        if status != old_status:
            self.api._replace_status(CRD, crd, status)

    def _conflict(self, name: str, spec: Mapping[str, Any]) -> tuple[str, str] | None:
        """The reason and message of a name another CRD of the group already uses."""
        names = spec.get("names") or {}
        group = spec.get("group")
        for other in self.api._store[(CRD.api_version, CRD.kind)].values():
            other_spec = other.get("spec") or {}
            if other["metadata"]["name"] == name or other_spec.get("group") != group:
                continue
            taken = (other.get("status") or {}).get("acceptedNames") or {}
            used = {v for k in ("plural", "singular", "kind", "listKind")
                    if isinstance(v := taken.get(k), str)}
            used |= set(taken.get("shortNames") or ())
            for field, reason in _NAME_FIELDS:
                if names.get(field) in used:
                    return reason, f"{names[field]!r} is already in use".replace("'", '"')
            for short in names.get("shortNames") or ():
                if short in used:
                    return "ShortNamesConflict", f'"{short}" is already in use'
        return None

    def _serve(self, name: str, crd: Mapping[str, Any]) -> None:
        api = self.api
        wanted = resource_types(crd)
        keys = {(t.api_version, t.kind) for t in wanted}
        before = self._served.get(name, set())
        table: dict[Any, Any] = next((api._store[k] for k in sorted(before) if k in api._store),
                     next((api._store[k] for k in sorted(keys) if k in api._store), {}))
        for key in before - keys:
            api._types.pop(key, None)
            api._store.pop(key, None)
        schema_changed = False
        for rtype in wanted:
            key = (rtype.api_version, rtype.kind)
            known = api._types.get(key)
            schema_changed |= known is None or known.schema != rtype.schema
            api._types[key] = rtype
            api._store[key] = table
        self._served[name] = keys
        if schema_changed and wanted:
            _restore(table, {(t.api_version): t for t in wanted})

    def _unserve(self, name: str) -> None:
        for key in self._served.pop(name, set()):
            self.api._types.pop(key, None)
            self.api._store.pop(key, None)

    def serves(self, key: tuple[str, str]) -> bool:
        """Whether a CRD object serves the type ``(api_version, kind)``."""
        return any(key in keys for keys in self._served.values())

    # ----------------------------------------------------------------- deletion
    def deleting(self, crd: dict[str, Any]) -> dict[str, Any]:
        """The CRD about to be deleted, holding the cleanup finalizer and Terminating."""
        meta = crd["metadata"]
        if CLEANUP_FINALIZER in (meta.get("finalizers") or ()) or meta.get("deletionTimestamp"):
            return crd
        new = dict(crd)
        new["metadata"] = dict(meta, finalizers=[*(meta.get("finalizers") or ()),
                                                 CLEANUP_FINALIZER])
        status = dict(crd.get("status") or {})
        status["conditions"] = _set(list(status.get("conditions") or []), "Terminating",
                                    "True", "InstanceDeletionInProgress",
                                    "CustomResource deletion is in progress",
                                    self.api._timestamp())
        new["status"] = status
        return self.api._commit(CRD, crd, new)

    def recorded(self, change_type: str, rtype: ResourceType, obj: dict[str, Any]) -> None:
        """After every recorded change: clean up a terminating CRD; finish it once empty."""
        if self._busy:
            return
        self._busy = True
        try:
            if rtype.api_version == CRD.api_version and rtype.kind == CRD.kind:
                name = obj["metadata"]["name"]
                if change_type == "DELETED":
                    self._unserve(name)
                    self._accept_waiting((obj.get("spec") or {}).get("group"))
                elif obj["metadata"].get("deletionTimestamp") and CLEANUP_FINALIZER in (
                        obj["metadata"].get("finalizers") or ()):
                    self._clean_up(name)
            elif change_type == "DELETED":
                key = (rtype.api_version, rtype.kind)
                for name, keys in list(self._served.items()):
                    if key in keys:
                        self._finish(name)
        finally:
            self._busy = False

    def _clean_up(self, name: str) -> None:
        """Delete every object the terminating CRD ``name`` serves; finish once none is left."""
        api = self.api
        for key in sorted(self._served.get(name, set())):
            rtype = api._types.get(key)
            table = api._store.get(key)
            if rtype is None or table is None:
                continue
            for obj_key in sorted(table, key=lambda k: (k[0] or "", k[1])):
                stored = table.get(obj_key)
                if stored is None or stored["metadata"].get("deletionTimestamp"):
                    continue
                if stored.get("apiVersion") not in (None, rtype.api_version):
                    continue  # written through another version: deleted through that one
                planned = plan_delete(rtype, stored, None, api._timestamp())
                if planned is None:
                    api._remove(rtype, stored)
                else:
                    api._commit(rtype, stored, planned)
        self._finish(name)

    def check_create(self, rtype: ResourceType) -> None:
        """A kind whose CRD is being deleted accepts no new objects (405)."""
        if not self._served:
            return
        key = (rtype.api_version, rtype.kind)
        for name, keys in self._served.items():
            if key in keys:
                crd = self.api._store[(CRD.api_version, CRD.kind)].get((None, name))
                if crd is not None and crd["metadata"].get("deletionTimestamp"):
                    raise MethodNotAllowed("create not allowed while custom resource "
                                           "definition is terminating")

    def _finish(self, name: str) -> None:
        api = self.api
        crd = api._store[(CRD.api_version, CRD.kind)].get((None, name))
        if crd is None or not crd["metadata"].get("deletionTimestamp"):
            return
        if any(api._store.get(key) for key in self._served.get(name, set())):
            return
        self._unserve(name)
        new = dict(crd)
        finalizers = [f for f in crd["metadata"].get("finalizers") or ()
                      if f != CLEANUP_FINALIZER]
        new["metadata"] = dict(crd["metadata"], finalizers=finalizers)
        if not finalizers:
            del new["metadata"]["finalizers"]
        status = dict(crd.get("status") or {})
        status["conditions"] = _set(list(status.get("conditions") or []), "Terminating",
                                    "False", "InstanceDeletionCompleted",
                                    "removed all instances", api._timestamp())
        new["status"] = status
        api._commit(CRD, crd, new)
        if not finalizers:
            self._accept_waiting((crd.get("spec") or {}).get("group"))

    def _accept_waiting(self, group: Any) -> None:
        """CRDs of ``group`` whose names were refused are tried again."""
        for other in list(self.api._store[(CRD.api_version, CRD.kind)].values()):
            if (other.get("spec") or {}).get("group") == group and _condition(
                    other, "NamesAccepted") == "False":
                self.written(other)


def _restore(table: dict[Any, dict[str, Any]], types: Mapping[str, ResourceType]) -> None:
    """Stored objects read back pruned and defaulted by the (new) schema of their version."""
    for key, obj in list(table.items()):
        rtype = types.get(obj.get("apiVersion", ""))
        if rtype is None or not isinstance(rtype.schema, Mapping):
            continue
        fresh = schemas.default(schemas.prune(obj, rtype.schema), rtype.schema)
        if fresh != obj:
            table[key] = fresh


def _condition(obj: Mapping[str, Any], kind: str) -> str | None:
    for entry in (obj.get("status") or {}).get("conditions") or []:
        if isinstance(entry, Mapping) and entry.get("type") == kind:
            return str(entry.get("status"))
    return None


def _set(conditions: list[Any], kind: str, status: str, reason: str, message: str,
         stamp: str) -> list[Any]:
    """Conditions with ``kind`` set; its time moves only when its status flips."""
    out = []
    found = False
    for entry in conditions:
        if isinstance(entry, Mapping) and entry.get("type") == kind:
            found = True
            when = entry.get("lastTransitionTime") if entry.get("status") == status else stamp
            out.append({"type": kind, "status": status, "lastTransitionTime": when or stamp,
                        "reason": reason, "message": message})
        else:
            out.append(entry)
    if not found:
        out.append({"type": kind, "status": status, "lastTransitionTime": stamp,
                    "reason": reason, "message": message})
    return out


def _cause(problem: str) -> dict[str, str]:
    field, sep, message = problem.partition(": ")
    if not sep or " " in field:
        return {"reason": "FieldValueInvalid", "field": "", "message": problem}
    return {"reason": "FieldValueInvalid", "field": field, "message": message}


def _quote(value: Any) -> str:
    return f'"{value}"' if isinstance(value, str) else str(value)
