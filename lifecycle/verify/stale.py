"""The stale-cache mode of the explorer: reads from informer stores that lag behind.

An operator that reads from its informers' caches (as ``lifecycle run`` does,
:class:`~lifecycle.driver.cache.CachedCluster`) sees every object as its
informer last heard of it: possibly some writes behind, with watch events
that arrive late and several changes folded into one. Safety must then come
from the ``resourceVersion`` guard on every write, never from the read being
fresh.

In this mode the engine reads through the operator's own
:class:`~lifecycle.driver.cache.CachedCluster`, whose stores are
:class:`LaggingStore`\\ s over the embedded API: before each read a store moves
only as far as ``lag`` writes behind the server's newest resourceVersion
(the worst an informer that is at most ``lag`` writes late can show), and
never back. Each move is delivered like a watch: the keys it added, changed
or removed go through the operator's own event filters and, when they pass,
are queued. Stores lag only within one instant of the virtual clock: once it has
moved (a requeue after a wait), they have caught up with what was written
before, as a real informer, milliseconds behind, has. When the engine has
nothing left to do, the stores catch up too (an informer on a quiet server
does) and what that delivers is queued in turn.
A restarted engine starts with stores caught up, as a fresh informer's list is.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any, cast

from lifecycle.driver.cache import CachedCluster
from lifecycle.driver.cluster import KubeCluster
from lifecycle.driver.filters import add_triggers, update_triggers
from lifecycle.kube.errors import NotFound
from lifecycle.kube.objects import clone

__all__ = ["LaggingStore", "StaleView"]

Key = tuple[str | None, str]
#: Called with (kind, namespace, name) for each delivered change that passes the filters.
Enqueue = Callable[[str, str | None, str], None]


class LaggingStore:
    """An informer's store for one kind that is at most ``lag`` writes behind the server.

    Implements what :class:`~lifecycle.driver.cache.CachedCluster` reads
    (``synced`` and ``get``). The store's position only moves forward; each
    move diffs the kind's state at the new resourceVersion (an exact list)
    against the store and delivers the differences to ``deliver``, folded
    into one event per key, as a watch that fell behind delivers them.
    """

    def __init__(self, api: Any, api_version: str, kind: str, lag: int,
                 deliver: Callable[[str, dict[str, Any] | None, dict[str, Any] | None], None],
                 floor: Callable[[], int] = lambda: 0) -> None:
        self.api = api
        self.api_version = api_version
        self.kind = kind
        self.lag = lag
        self._floor = floor
        self.synced = threading.Event()
        self._deliver = deliver
        self.position = int(api.resource_version)
        self._objects = self._state_at(self.position)
        self.synced.set()

    def _state_at(self, rv: int) -> dict[Key, dict[str, Any]]:
        try:
            items, _, _, _ = self.api.list_page(self.api_version, self.kind,
                                                resource_version=str(rv),
                                                resource_version_match="Exact")
        except NotFound:  # the kind is not served (yet): an informer would see nothing
            return {}
        found: dict[Key, dict[str, Any]] = {}
        for obj in items:
            meta = obj["metadata"]
            found[(meta.get("namespace"), meta["name"])] = obj
        return found

    def advance(self, to: int) -> bool:
        """Move to resourceVersion ``to`` (if ahead); deliver what changed; True if anything did."""
        if to <= self.position:
            return False
        state = self._state_at(to)
        self.position = to
        old = self._objects
        self._objects = state
        changed = False
        for key in sorted(set(old) | set(state), key=lambda k: (k[0] or "", k[1])):
            before, after = old.get(key), state.get(key)
            if before is not None and after is not None and (
                    before["metadata"].get("resourceVersion")
                    == after["metadata"].get("resourceVersion")):
                continue
            changed = True
            self._deliver(self.kind, before, after)
        return changed

    def get(self, key: Key) -> dict[str, Any] | None:
        """The object as the store holds it, after moving to at most ``lag`` writes behind
        (and at least to ``floor()``)."""
        self.advance(max(int(self.api.resource_version) - self.lag, self._floor()))
        found = self._objects.get(key)
        return clone(found) if found is not None else None


class StaleView:
    """The lagging stores of one engine, and the watch events they deliver.

    ``kinds`` are ``(api_version, kind)`` pairs read through the cache;
    changes of the kinds in ``watched`` (kind names) are queued through
    ``enqueue`` when the operator's event filters let them through.

    ``now`` is the virtual clock. An informer falls behind by milliseconds,
    not by seconds: a store lags only behind the writes of the current
    instant, so once the clock has moved (a requeue after a wait) it has
    caught up with everything written before. Without ``now`` only the
    write count bounds the lag.
    """

    def __init__(self, api: Any, kinds: Iterable[tuple[str, str]], lag: int,
                 watched: Iterable[str], enqueue: Enqueue,
                 now: Callable[[], Any] | None = None) -> None:
        if lag < 1:
            raise ValueError("a stale view lags by at least one write")
        self.lag = lag
        self.api = api
        self._watched = set(watched)
        self._enqueue = enqueue
        self._now = now
        self._instant: Any = None
        self._floor = 0
        self.stores = {pair: LaggingStore(api, pair[0], pair[1], lag, self._deliver,
                                          self.floor)
                       for pair in dict.fromkeys(kinds)}

    def floor(self) -> int:
        """The oldest resourceVersion a store may show now: the newest one written before
        the current instant (0 without a clock)."""
        if self._now is None:
            return 0
        instant = self._now()
        if instant != self._instant:
            self._instant = instant
            self._floor = int(self.api.resource_version)
        return self._floor

    def _deliver(self, kind: str, before: dict[str, Any] | None,
                 after: dict[str, Any] | None) -> None:
        if kind not in self._watched:
            return
        if after is None:
            triggers = True  # a deletion is always delivered
        elif before is None:
            triggers = add_triggers(after)
        else:
            triggers = update_triggers(before, after)
        if triggers:
            meta = (after or before or {}).get("metadata") or {}
            self._enqueue(kind, meta.get("namespace"), meta["name"])

    def catch_up(self) -> bool:
        """Move every store to the newest version (a quiet informer); True if anything changed."""
        changed = False
        for store in self.stores.values():
            changed |= store.advance(int(store.api.resource_version))
        return changed

    def cache(self, engine_api: Any, clock: Callable[[], float]) -> CachedCluster:
        """The operator's cached reader over ``engine_api``, serving every kind from its store."""
        # An embedded-API face stands in for the official-client cluster it duck-types.
        cached = CachedCluster(cast(KubeCluster, _WithInfo(engine_api)), clock=clock)
        for (api_version, kind), store in self.stores.items():
            cached.serve_from(api_version, kind, store, complete=True)
        return cached


class _WithInfo:
    """Gives an embedded-API face the ``info`` a :class:`CachedCluster` asks its cluster for
    (the served type, whose ``namespaced`` it reads)."""

    def __init__(self, api: Any) -> None:
        self._api = api
        self.info = api.resource_type

    def __getattr__(self, name: str) -> Any:
        return getattr(self._api, name)
