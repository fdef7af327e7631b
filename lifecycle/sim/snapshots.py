"""Saving and restoring the embedded API's state: every object and the resourceVersion counter.

A mixin of :class:`lifecycle.sim.apiserver.EmbeddedAPI`; ``lifecycle.sim.persist``
keeps what :meth:`Snapshots.snapshot` returns in a state file.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Iterable
from typing import Any

from lifecycle.core.objects import metadata
from lifecycle.kube.errors import Invalid
from lifecycle.kube.objects import clone
from lifecycle.kube.resources import ResourceType
from lifecycle.sim.crds import CRD, CRDController, resource_types
from lifecycle.sim.validation import object_key, type_key
from lifecycle.sim.watch import History

__all__ = ["Snapshots"]


class Snapshots:
    """``snapshot()`` and ``restore()`` over the store's tables (a mixin)."""

    _lock: threading.RLock
    _store: dict[tuple[str, str], dict[Any, dict[str, Any]]]
    _types: dict[tuple[str, str], ResourceType]
    _log: History
    _crds: CRDController
    _rng: random.Random
    _gc: Any
    _event_index: dict[tuple[str, ...], str]
    _restored_rv: int

    def _type_of(self, obj: Any) -> ResourceType:
        raise NotImplementedError

    def snapshot(self, *, with_external: Callable[[], Any] | None = None) -> dict[str, Any]:
        """Every stored object and the resourceVersion counter, as of one instant.

        Returns ``{"resourceVersion": int, "objects": [...], "external": ...}``
        (objects copied). ``with_external`` is called while the store is held,
        so what it returns (the state of a simulated provider, say) belongs
        to the same instant as the objects: no write can land in between.
        """
        with self._lock:
            tables = {id(table): table for table in self._store.values()}  # versions share one
            objects = [clone(obj) for table in tables.values() for obj in table.values()]
            external = with_external() if with_external is not None else None
            return {"resourceVersion": self._log.rv, "objects": objects, "external": external}

    def restore(self, objects: Iterable[dict[str, Any]], resource_version: int) -> None:
        """Replace every stored object by ``objects``, as :meth:`snapshot` returned them.

        Objects keep their uid, resourceVersion and every other field. Their
        types must be built in, registered, or served by a restored
        CustomResourceDefinition that is not being deleted (which starts
        being served as on a write): :class:`NotFound` otherwise, and nothing
        changes. The counter becomes the highest of ``resource_version``,
        every object's resourceVersion and the current counter, so versions
        are never reused. The history of earlier writes is not restored: a
        watch from an older version gets 410 Gone, one from the restored
        version resumes. Open watches end.
        """
        objects = [clone(obj) for obj in objects]
        with self._lock:
            crds = [obj for obj in objects if type_key(obj) == (CRD.api_version, CRD.kind)]
            served = set(self._types)
            for crd in crds:
                if not metadata(crd).get("deletionTimestamp"):
                    served.update((t.api_version, t.kind) for t in resource_types(crd))
            highest = max(int(resource_version), self._log.rv)
            placed = []
            for obj in objects:
                if type_key(obj) not in served:
                    self._type_of(obj)  # NotFound, naming it
                meta = metadata(obj)
                name, rv = meta.get("name"), str(meta.get("resourceVersion", ""))
                if not isinstance(name, str) or not name or not rv.isdigit() or not meta.get(
                        "uid"):
                    raise Invalid(f"{obj.get('kind')} {name!r}: a restored object needs a "
                                  f"name, a uid and a numeric resourceVersion")
                highest = max(highest, int(rv))
                placed.append(obj)
            self._log.drop_watches()
            for table in {id(t): t for t in self._store.values()}.values():
                table.clear()
            crd_table = self._store[(CRD.api_version, CRD.kind)]
            for crd in crds:
                crd_table[(None, metadata(crd)["name"])] = crd
            self._log.rv = highest  # any write from here on gets a version never issued
            for crd in crds:
                self._crds.written(crd)  # serve its versions (a stored status stays as it is)
            for obj in placed:
                if type_key(obj) == (CRD.api_version, CRD.kind):
                    continue
                rtype = self._type_of(obj)
                meta = metadata(obj)
                key = object_key(rtype, meta.get("namespace"), meta["name"])
                self._store[(rtype.api_version, rtype.kind)][key] = obj
            self._restored_rv = self._log.rv
            # A new stream of names and uids: the one that made the restored objects
            # (same seed) must not be replayed over them.
            self._rng = random.Random(f"{self._rng.getrandbits(64)}:{self._restored_rv}")
            self._gc.reindex()
            self._event_index = {}
            for (namespace, name), event in self._store[("v1", "Event")].items():
                involved = event.get("involvedObject") or {}
                source = event.get("source") or {}
                self._event_index[(
                    str(namespace), str(involved.get("uid", "")), str(event.get("type", "")),
                    str(event.get("reason", "")), str(event.get("message", "")),
                    str(source.get("component", "")))] = name
