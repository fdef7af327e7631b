"""The v1 Events the embedded API records, built as the API server stores them."""

from __future__ import annotations

import collections
import random
import threading
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from lifecycle.core.objects import metadata
from lifecycle.kube.errors import AlreadyExists
from lifecycle.kube.resources import EVENT, ResourceType
from lifecycle.sim.faults import FaultInjector
from lifecycle.sim.validation import check_event_type, check_name

__all__ = ["Events", "new_event", "repeated_event"]


def new_event(
    involved: Mapping[str, Any],
    name: str,
    type: str,
    reason: str,
    message: str,
    component: str,
    stamp: str,
) -> dict[str, Any]:
    """A first Event about ``involved`` (``count`` 1), in its namespace or ``default``."""
    meta = involved.get("metadata")
    if meta.__class__ is not dict:
        meta = metadata(involved)
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": meta.get("namespace") or "default"},
        "involvedObject": {
            "apiVersion": involved.get("apiVersion", ""),
            "kind": involved.get("kind", ""),
            "name": str(meta.get("name", "object")),
            "namespace": meta.get("namespace", ""),
            "uid": str(meta.get("uid", "")),
            "resourceVersion": meta.get("resourceVersion", ""),
        },
        "type": type,
        "reason": reason,
        "message": message,
        "count": 1,
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "source": {"component": component},
        "eventTime": None,
        "reportingComponent": component,
        "reportingInstance": "",
    }


def repeated_event(existing: Mapping[str, Any], stamp: str) -> dict[str, Any]:
    """``existing`` seen once more: ``count`` incremented, ``lastTimestamp`` now."""
    new = dict(existing)
    new["metadata"] = dict(existing["metadata"])
    new["count"] = int(existing.get("count", 1)) + 1
    new["lastTimestamp"] = stamp
    return new


class Events:
    """The Event recorder of the embedded API (mixed into ``EmbeddedAPI``), and the expiry
    of Events: as a real server (``--event-ttl``, one hour by default) keeps an Event
    :attr:`event_ttl` seconds after its last write, then deletes it (watchers see
    ``DELETED``). Expired Events are removed at the next write of any object."""

    #: Seconds an Event is kept after its last write (``None``: forever).
    event_ttl: float | None = 3600.0
    _expiring = False

    _lock: threading.RLock
    _rng: random.Random
    _store: dict[tuple[str, str], dict[tuple[str | None, str], dict[str, Any]]]
    _event_index: dict[tuple[str, ...], str]
    faults: FaultInjector

    _clock: Any
    _log: Any

    def _count(self, verb: str, kind: str) -> None:
        raise NotImplementedError

    def _record(self, change_type: str, rtype: ResourceType, obj: dict[str, Any],
                previous: dict[str, Any] | None) -> None:
        raise NotImplementedError

    def _events_written(self, change_type: str, rtype: ResourceType,
                        obj: dict[str, Any]) -> None:
        """After any write: note an Event's deadline, then delete the Events past theirs."""
        if rtype is EVENT and change_type != "DELETED" and self.event_ttl is not None:
            meta = obj["metadata"]
            deadlines = self.__dict__.setdefault("_event_deadlines", collections.deque())
            deadlines.append((self._clock() + timedelta(seconds=self.event_ttl),
                              (meta.get("namespace"), meta["name"]), meta["resourceVersion"]))
        deadlines = self.__dict__.get("_event_deadlines")
        if not deadlines or self._expiring or deadlines[0][0] > self._clock():
            return
        self._expiring = True
        try:
            now, table = self._clock(), self._store[("v1", "Event")]
            while deadlines and deadlines[0][0] <= now:
                _, key, version = deadlines.popleft()
                stored = table.get(key)
                if stored is None or stored["metadata"]["resourceVersion"] != version:
                    continue  # written again since (a later deadline) or gone
                del table[key]
                self._log.rv += 1
                gone = {**stored, "metadata": {**stored["metadata"],
                                               "resourceVersion": str(self._log.rv)}}
                self._record("DELETED", EVENT, gone, stored)
        finally:
            self._expiring = False

    def _timestamp(self) -> str:
        raise NotImplementedError

    def _out(self, verb: str, obj: dict[str, Any], dry_run: bool = False) -> dict[str, Any]:
        raise NotImplementedError

    def _check_namespace_open(self, rtype: ResourceType, namespace: str, name: Any) -> None:
        raise NotImplementedError

    def _created(self, rtype: ResourceType, table: dict[tuple[str | None, str], dict[str, Any]],
                 namespace: str | None, name: str, new: dict[str, Any], *,
                 dry_run: bool = False) -> dict[str, Any]:
        raise NotImplementedError

    def _commit(self, rtype: ResourceType, stored: dict[str, Any], new: dict[str, Any],
                dry_run: bool = False) -> dict[str, Any]:
        raise NotImplementedError

    def record_event(
        self,
        involved: dict[str, Any],
        type: str,
        reason: str,
        message: str,
        *,
        component: str = "lifecycle",
    ) -> dict[str, Any]:
        """Record a v1 Event about ``involved`` in its namespace (``default`` if cluster-scoped).

        An event identical to an earlier one (same involved uid, type, reason,
        message and component) increments that event's ``count`` and
        ``lastTimestamp`` instead of creating a new Event. Faults for
        ``create`` of kind ``Event`` apply.
        """
        self._count("record_event", "Event")
        self.faults.check("create", "Event")
        meta = involved.get("metadata")
        if meta.__class__ is not dict:
            meta = metadata(involved)
        namespace = meta.get("namespace") or "default"
        uid = str(meta.get("uid", ""))
        index_key = (namespace, uid, type, reason, message, component)
        with self._lock:
            stamp = self._timestamp()
            table = self._store[("v1", "Event")]
            existing_name = self._event_index.get(index_key)
            existing = table.get((namespace, existing_name)) if existing_name else None
            if existing is not None:
                return self._out("record_event",
                                 self._commit(EVENT, existing, repeated_event(existing, stamp)))
            name = f"{meta.get('name', 'object')}.{self._rng.getrandbits(64):016x}"
            event = new_event(involved, name, type, reason, message, component, stamp)
            # The checks of a create that an Event built here can fail, in their order: its
            # metadata is only a name and a namespace, and it has no owners and no schema.
            self._check_namespace_open(EVENT, namespace, name)
            check_name(EVENT, name)
            if (namespace, name) in table:
                raise AlreadyExists(f'{EVENT.resource} "{name}" already exists')
            check_event_type(name, event)
            created = self._created(EVENT, table, namespace, name, event)
            self._event_index[index_key] = name
            return self._out("record_event", created)
