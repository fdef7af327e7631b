"""The operator's requeue of objects waiting on a reference, through the informers.

An object whose reference is unresolved (:mod:`lifecycle.runtime.references`)
is retried with backoff, which may be a minute away. The operator does not
wait for it: :func:`follow_references` keeps a
:class:`~lifecycle.core.references.ReferenceIndex` from the referencing
kinds' informer events (which objects wait on which names, and on which
selectors), and when an object of a referenced kind turns Ready (or, Ready,
changes its labels or external name, or goes: a selector that matched it
and another may now match one) it queues at once the objects waiting on
it. Nothing polls: a referenced kind the operator runs is followed through
its own informer, one it does not run through an extra watch of the
referencing controller.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from lifecycle.core.kind import Kind
from lifecycle.core.references import ReferenceIndex, declared, turned_resolvable
from lifecycle.driver.informer import object_key
from lifecycle.driver.kinds import Watch


class Manages(Protocol):
    """What :func:`follow_references` needs of the operator: its controllers by kind,
    a cluster that opens list-watchers, and the watched namespace."""

    @property
    def controllers(self) -> Mapping[str, Any]:
        """The running controllers by kind name."""

    @property
    def cluster(self) -> Any:
        """The cluster the controllers' informers list and watch."""

    @property
    def options(self) -> Any:
        """The operator's options (its watched namespace)."""

__all__ = ["Manages", "follow_references", "turned_resolvable"]

Key = tuple[str | None, str]


def follow_references(manager: Manages, targets: Sequence[Any]) -> ReferenceIndex | None:
    """Wire the requeue of referencing objects into ``manager``'s controllers; the index
    (None when no kind declares a reference)."""
    managed = [t for t in targets if isinstance(t, Kind) and declared(t.parameters)]
    if not managed:
        return None
    by_target = {(t.api_version, t.kind): t for t in targets if isinstance(t, Kind)}
    controllers = manager.controllers
    index = ReferenceIndex()
    lock = threading.Lock()

    def waiting(api_version: str, kind: str, obj: dict[str, Any]) -> set[tuple[str, Key]]:
        with lock:
            return index.waiting_on(api_version, kind, obj)

    def woken(api_version: str, kind: str, old: dict[str, Any] | None,
              new: dict[str, Any] | None) -> list[tuple[str, Key]]:
        with lock:
            return index.woken(api_version, kind, old, new)

    for kind in managed:
        referrer = controllers[kind.kind]

        def track(old: dict[str, Any] | None, new: dict[str, Any] | None,
                  kind: Kind = kind) -> None:
            obj = new if new is not None else old
            assert obj is not None
            with lock:
                index.update(kind.kind, kind.parameters, new, object_key(obj))

        referrer.followers.append(track)
        for api_version, name in dict.fromkeys(d.target for d in declared(kind.parameters)):
            referenced = by_target.get((api_version, name))
            if referenced is not None and referenced.kind in controllers:
                controllers[referenced.kind].followers.append(
                    _waker(manager, api_version, name, woken))
            else:  # a kind this operator does not run: watch it for the referrers
                referrer.watch(Watch(api_version, name, _keys(kind.kind, api_version, name,
                                                                waiting)),
                               manager.cluster.list_watcher(api_version, name,
                                                            manager.options.namespace))
    return index


def _waker(manager: Manages, api_version: str, kind: str, woken: Any) -> Any:
    """A follower of a referenced kind's controller: queue what waits on a changed object
    (:meth:`~lifecycle.core.references.ReferenceIndex.woken`)."""
    def wake(old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        for referrer, key in woken(api_version, kind, old, new):
            controller = manager.controllers.get(referrer)
            if controller is not None:
                controller.enqueue(key)
    return wake


def _keys(referrer: str, api_version: str, kind: str, waiting: Any) -> Any:
    """A watch's key map: the referrers of ``referrer``'s kind waiting on a Ready object."""
    def keys(obj: dict[str, Any], cached: Any) -> Iterable[Key]:
        if not turned_resolvable(None, obj):
            return ()
        return [key for who, key in waiting(api_version, kind, obj) if who == referrer]
    return keys
