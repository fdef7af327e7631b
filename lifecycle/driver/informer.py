"""List-then-watch into a local cache, informer style.

An :class:`Informer` lists a kind once, then watches from the list's
resourceVersion, applying every event to its cache and telling a
:class:`Handler`. It keeps going through everything a watch can do:

- a watch that ends (server timeout, dropped connection) resumes from the
  last resourceVersion seen, bookmarks included;
- a watch that stays silent longer than ``inactivity_timeout`` is abandoned
  and resumed (silent, half-dead watches are a known failure of Python
  operators; the client's read timeout enforces it);
- ``410 Gone`` (the version left the server's history) re-lists, and the
  difference between the cache and the fresh list is delivered as adds,
  updates and deletes, so nothing that happened meanwhile is lost;
- a version the server never issued (it restarted with a lower counter, or
  it is another server) re-lists the same way: a real server answers
  ``504 Timeout`` with the cause ``ResourceVersionTooLarge``, as an error
  response or as an ``ERROR`` event;
- other errors reconnect with exponential backoff, and after
  ``relist_after_errors`` watches in a row that delivered nothing but an
  error, re-list too (the version may be one the server cannot serve);
- every ``resync`` seconds the handler sees every cached object again.

The cache keeps each object packed (:class:`~lifecycle.driver.store.Packer`):
a few tens of bytes for an object of a kilobyte or two. The objects a watch
changed last (at most :data:`YOUNG` of them) are kept as the watch delivered
them until others push them out, and packed then: an object in the middle of
a change (one reconcile writes it two or three times) is not packed at every
step, and the handler's previous object is the one it was handed last time,
not unpacked again. :meth:`Informer.get` gives a dict of the caller's own;
:meth:`Informer.shared` and :meth:`Informer.items` give objects to read, not
to change (a young one is the very object the handler saw).

Most watch events of an operator's objects are the echoes of its own writes.
A writer that hands the informer the server's answer (:meth:`Informer.expect`)
spares it decoding them: a resourceVersion is the server's revision, unique
across every object, so an event line whose one ``"resourceVersion"`` is that
of an answer held carries exactly that answer's object, which is used instead
of decoding the line (the store, the observers and the handler see what they
would have seen). A line naming ``resourceVersion`` more than once (a
reference in the spec, an odd key) is decoded, as is everything when the
source yields decoded events only.
"""

from __future__ import annotations

import logging
import random
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any, Protocol

import attrs

from lifecycle.core.objects import metadata
from lifecycle.driver import store
from lifecycle.driver.store import Packer
from lifecycle.kube.errors import ApiError, ResourceVersionTooLarge, error_from_status

__all__ = ["Handler", "Informer", "InformerOptions", "ListWatcher", "object_key"]

log = logging.getLogger("lifecycle.driver.informer")

Key = tuple[str | None, str]
#: Written objects held for their watch events, at most (the oldest are dropped first).
MAX_EXPECTED = 1024
#: Objects a watch changed last kept unpacked, at most (the oldest are packed first).
YOUNG = 128
_VERSION = b'"resourceVersion":"'


def object_key(obj: dict[str, Any]) -> Key:
    """``(namespace, name)`` of an object (namespace ``None`` if cluster-scoped)."""
    meta = metadata(obj)
    return (meta.get("namespace") or None, str(meta.get("name", "")))


class ListWatcher(Protocol):
    """Lists and watches one kind; :class:`lifecycle.driver.cluster.KubeCluster` provides it."""

    def list(self) -> tuple[list[dict[str, Any]], str]:
        """All objects and the list's resourceVersion."""
        ...

    def watch(self, resource_version: str, *, timeout: float,
              inactivity: float) -> Iterator[tuple[str, dict[str, Any]]]:
        """Stream ``(type, object)`` events after ``resource_version``.

        Ends when the server ends the stream; raises when no byte arrives for
        ``inactivity`` seconds. ``ERROR`` events are yielded as they come.
        """
        ...

    def stop(self) -> None:
        """Abort a running :meth:`watch` promptly."""
        ...


class Handler(Protocol):
    """Receives the informer's notifications (called from the informer thread)."""

    def on_add(self, obj: dict[str, Any]) -> None:
        """A new object (from the initial list, a re-list, or a watch)."""
        ...

    def on_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        """An object changed."""
        ...

    def on_delete(self, obj: dict[str, Any]) -> None:
        """An object is gone (last known state)."""
        ...

    def on_resync(self, obj: dict[str, Any]) -> None:
        """The periodic resync: an unchanged cached object, offered again."""
        ...


@attrs.frozen
class InformerOptions:
    """Timing of one informer (seconds).

    ``watch_timeout`` is asked of the server per watch request (jittered up
    to twice, as client-go does, so replicas do not reconnect in step);
    ``inactivity_timeout`` is the client-side read timeout; ``resync`` 0
    disables the resync; reconnects back off from ``backoff_base`` to
    ``backoff_cap``; ``relist_after_errors`` watches in a row that ended in
    an error before any event re-list (0: never for that reason).
    """

    resync: float = 600.0
    watch_timeout: float = 300.0
    inactivity_timeout: float = 90.0
    backoff_base: float = 0.2
    backoff_cap: float = 30.0
    relist_after_errors: int = 3


@attrs.define
class InformerStats:
    """Counters an informer keeps (also exported as metrics)."""

    lists: int = 0
    watches: int = 0
    relists_after_gone: int = 0
    relists_after_unknown_version: int = 0
    relists_after_errors: int = 0
    errors: int = 0
    events: int = 0
    resyncs: int = 0
    #: Events taken from a written object handed over (:meth:`Informer.expect`), not decoded.
    echoes: int = 0


class Informer:
    """Keeps a cache of one kind in step with the server and notifies a handler.

    ``packed`` (the default) keeps the cached objects packed; without it they
    are kept as the source decoded them, and reads share them.
    """

    def __init__(self, name: str, source: ListWatcher, handler: Handler,
                 options: InformerOptions = InformerOptions(), *,
                 sleep: Callable[[threading.Event, float], bool] | None = None,
                 packed: bool = True) -> None:
        self.name = name
        self.source = source
        self.handler = handler
        self.options = options
        self.stats = InformerStats()
        self.synced = threading.Event()
        #: Packs the cached objects (None: they are kept as decoded).
        self.packer = Packer() if packed else None
        self._cache: dict[Key, Any] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._resource_version: str | None = None
        self._delivered = False  # whether the current watch delivered an event
        self._wait = sleep or (lambda event, seconds: event.wait(seconds))
        #: Called with each object a list or a watch event stores (or a watch event
        #: removes), after the store holds it and before the handler hears of it; from
        #: the informer thread.
        self.observers: list[Callable[[dict[str, Any]], None]] = []
        #: Objects as written by this process, by resourceVersion, until their event comes.
        self._expected: OrderedDict[str, dict[str, Any]] = OrderedDict()
        #: Keys whose cached object is held unpacked (a dict in the cache), oldest first.
        self._young: OrderedDict[Key, None] = OrderedDict()

    # --------------------------------------------------------------- cache
    def get(self, key: Key) -> dict[str, Any] | None:
        """The cached object for ``(namespace, name)`` (a dict of the caller's own when
        packed)."""
        with self._lock:
            entry = self._cache.get(key)
        if entry is None:
            return None
        if entry.__class__ is dict and self.packer is not None:
            return self.packer.copy(entry)  # a young one: the handler's, copied
        return self._unpack(entry)

    def shared(self, key: Key) -> dict[str, Any] | None:
        """The cached object for ``key``, to read and never change: a young one is the
        object itself (no copy, no unpacking), an older one unpacked."""
        with self._lock:
            entry = self._cache.get(key)
        return None if entry is None else self._unpack(entry)

    def version(self, key: Key) -> str | None:
        """The resourceVersion of the cached object for ``key`` ("" when it has none),
        read without unpacking it; None when the cache holds no such object."""
        with self._lock:
            entry = self._cache.get(key)
        if entry is None:
            return None
        if entry.__class__ is dict:
            found = _rv(entry)
            return found if isinstance(found, str) else ""
        return Packer.version(entry)

    def items(self) -> Iterator[dict[str, Any]]:
        """Every cached object, as of the call, to read and never change (unpacked one at
        a time as the caller iterates, so a pass over a large store never holds it all
        decoded at once)."""
        with self._lock:
            entries = list(self._cache.values())
        return map(self._unpack, entries)

    def stored_bytes(self) -> int | None:
        """The bytes of the packed objects held (None when the objects are not packed)."""
        if self.packer is None:
            return None
        with self._lock:
            entries = list(self._cache.values())
        packer = self.packer
        return sum(len(e) if e.__class__ is bytes else len(packer.pack(e)) for e in entries)

    def _pack(self, obj: dict[str, Any]) -> Any:
        return obj if self.packer is None else self.packer.pack(obj)

    def _unpack(self, entry: Any) -> dict[str, Any]:
        return entry if self.packer is None or entry.__class__ is dict else (
            self.packer.unpack(entry))

    def _age(self, key: Key) -> list[tuple[Key, dict[str, Any]]]:
        """Mark ``key``'s object young (with the lock held); the objects pushed out of
        the young ones, to pack."""
        young = self._young
        young[key] = None
        young.move_to_end(key)
        out = []
        while len(young) > YOUNG:
            old, _ = young.popitem(last=False)
            entry = self._cache.get(old)
            if entry.__class__ is dict:
                out.append((old, entry))
        return out

    def _pack_aged(self, aged: list[tuple[Key, dict[str, Any]]]) -> None:
        """Pack objects pushed out of the young ones (unless changed meanwhile)."""
        for key, obj in aged:
            assert self.packer is not None
            packed = self.packer.pack(obj)
            with self._lock:
                if self._cache.get(key) is obj:
                    self._cache[key] = packed

    def __len__(self) -> int:
        with self._lock:
            return len(self._cache)

    def expect(self, obj: dict[str, Any]) -> None:
        """``obj`` is the server's answer to a write this process made: its watch event,
        when it comes, is taken from here instead of being decoded. The caller does not
        change ``obj`` afterwards (the store and the handler will see it)."""
        version = metadata(obj).get("resourceVersion")
        if not isinstance(version, str) or not version:
            return
        with self._lock:
            expected = self._expected
            expected[version] = obj
            while len(expected) > MAX_EXPECTED:
                expected.popitem(last=False)

    def _echo(self, line: bytes) -> dict[str, Any] | None:
        """The written object whose event ``line`` is, when one is held; else None."""
        start = line.find(_VERSION)
        if start < 0:
            return None
        start += len(_VERSION)
        if line.find(_VERSION, start) >= 0:
            return None  # more than one: which is the object's is only told by decoding
        version = line[start:line.find(b'"', start)].decode("latin-1")
        with self._lock:
            return self._expected.pop(version, None)

    def _passed(self, version: str) -> None:
        """Drop the written objects at or before ``version``, a watch event's: a watch
        delivers in order, so their events will not come (filtered out, or delivered
        before the writer handed them over)."""
        if not version.isdigit():
            return
        seen = int(version)
        with self._lock:
            expected = self._expected
            while expected:
                first = next(iter(expected))
                if not first.isdigit() or int(first) > seen:
                    return
                del expected[first]

    def _events(self, resource_version: str, timeout: float,
                inactivity: float) -> Iterator[tuple[str, Any]]:
        """The watch's events, decoded unless an event is one of this process's writes."""
        lines = getattr(self.source, "watch_lines", None)
        if lines is None:
            yield from self.source.watch(resource_version, timeout=timeout,
                                         inactivity=inactivity)
            return
        for kind, line in lines(resource_version, timeout=timeout, inactivity=inactivity):
            if kind in ("MODIFIED", "ADDED") and self._expected:
                obj = self._echo(line)
                if obj is not None:
                    self.stats.echoes += 1
                    yield kind, obj
                    continue
            event = store.loads(line)
            yield kind or str(event.get("type", "")), event.get("object") or {}

    @property
    def resource_version(self) -> str | None:
        """The last resourceVersion the informer has seen."""
        return self._resource_version

    # ------------------------------------------------------------- running
    def start(self) -> Informer:
        """Run the list-watch loop and the resync timer in daemon threads."""
        self._threads = [threading.Thread(target=self._run, name=f"informer-{self.name}",
                                          daemon=True)]
        if self.options.resync > 0:
            self._threads.append(threading.Thread(target=self._resync_loop,
                                                  name=f"resync-{self.name}", daemon=True))
        for thread in self._threads:
            thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Stop watching; returns once the threads ended (or ``timeout`` passed)."""
        self._stop.set()
        self.source.stop()
        for thread in self._threads:
            thread.join(timeout)

    def _run(self) -> None:
        failures = 0
        failed_watches = 0  # watches in a row that delivered nothing but an error
        while not self._stop.is_set():
            watching = False
            try:
                if self._resource_version is None:
                    self._relist()
                    failed_watches = 0
                watching = True
                self._delivered = False
                if self._watch_once():
                    failures = failed_watches = 0
                    continue
                # A watch that ended without a single event (not even a bookmark) is
                # treated like an error, so a server that keeps closing cannot spin us.
                failures += 1
                if self._wait(self._stop, self._backoff(failures)):
                    return
            except ResourceVersionTooLarge:
                self.stats.relists_after_unknown_version += 1
                log.info("the server never issued resourceVersion %s of %s (504); re-listing",
                         self._resource_version, self.name)
                self._resource_version = None
                continue
            except Exception as exc:
                if isinstance(exc, ApiError) and exc.status == 410:
                    self.stats.relists_after_gone += 1
                    log.info("watch of %s expired (410); re-listing", self.name)
                    self._resource_version = None
                    continue
                if self._stop.is_set():
                    return
                failures += 1
                self.stats.errors += 1
                if watching and self._delivered:
                    failed_watches = 0
                elif watching:
                    failed_watches += 1
                limit = self.options.relist_after_errors
                if limit and failed_watches >= limit:
                    failed_watches = 0
                    self.stats.relists_after_errors += 1
                    log.warning("%d watches of %s in a row failed before any event; "
                                "re-listing", limit, self.name)
                    self._resource_version = None
                delay = self._backoff(failures)
                log.warning("list/watch of %s failed (%s: %s); retrying in %.2fs",
                            self.name, type(exc).__name__, _short(exc), delay)
                if self._wait(self._stop, delay):
                    return

    def _backoff(self, failures: int) -> float:
        opts = self.options
        delay = min(opts.backoff_cap, opts.backoff_base * 2 ** min(failures - 1, 20))
        return delay * (1 + random.random() * 0.2)

    def _relist(self) -> None:
        items, resource_version = self.source.list()
        self.stats.lists += 1
        fresh = {object_key(obj): obj for obj in items}
        packed = {key: self._pack(obj) for key, obj in fresh.items()}
        with self._lock:
            held = self._cache
            self._cache = packed
            self._young.clear()
        for obj in fresh.values():
            for observe in self.observers:
                observe(obj)
        for key, entry in held.items():  # the previous objects unpacked one at a time
            now, old = fresh.get(key), self._unpack(entry)
            if now is None or _uid(now) != _uid(old):
                self.handler.on_delete(old)  # gone, or replaced by another of that name
        for key, obj in fresh.items():
            entry = held.get(key)
            before = None if entry is None else self._unpack(entry)
            if before is None or _uid(before) != _uid(obj):
                self.handler.on_add(obj)
            elif _rv(before) != _rv(obj):
                self.handler.on_update(before, obj)
        self._resource_version = resource_version
        if self._expected:
            self._passed(resource_version)
        self.synced.set()

    def _watch_once(self) -> bool:
        """One watch request; returns whether any event (bookmarks included) arrived."""
        assert self._resource_version is not None
        opts = self.options
        timeout = opts.watch_timeout * (1 + random.random())
        self.stats.watches += 1
        got = False
        for kind, obj in self._events(self._resource_version, timeout,
                                      opts.inactivity_timeout):
            if self._stop.is_set():
                break
            if kind == "ERROR":
                raise error_from_status(obj) if isinstance(obj, dict) else ApiError(str(obj))
            got = self._delivered = True
            rv = _rv(obj)
            if kind == "BOOKMARK":
                if rv:
                    self._resource_version = rv
                continue
            self.stats.events += 1
            self._apply(kind, obj)
            if rv:
                self._resource_version = rv
                if self._expected:
                    self._passed(str(rv))
        return got

    def _apply(self, kind: str, obj: dict[str, Any]) -> None:
        key = object_key(obj)
        aged: list[tuple[Key, dict[str, Any]]] = []
        with self._lock:
            held = self._cache.get(key)
            if kind == "DELETED":
                self._cache.pop(key, None)
                self._young.pop(key, None)
            else:
                self._cache[key] = obj  # young: packed once pushed out (:meth:`_age`)
                if self.packer is not None:
                    aged = self._age(key)
        if aged:
            self._pack_aged(aged)
        before = None if held is None or kind == "DELETED" else self._unpack(held)
        for observe in self.observers:
            observe(obj)
        if kind == "DELETED":
            self.handler.on_delete(obj)
        elif before is None:
            self.handler.on_add(obj)
        else:
            self.handler.on_update(before, obj)

    def _resync_loop(self) -> None:
        while not self._wait(self._stop, self.options.resync):
            if not self.synced.is_set():
                continue
            self.stats.resyncs += 1
            for obj in self.items():
                if self._stop.is_set():
                    return
                self.handler.on_resync(obj)

    def wait_synced(self, timeout: float | None = None) -> bool:
        """Block until the first list has been applied."""
        return self.synced.wait(timeout)


def _rv(obj: dict[str, Any]) -> Any:
    return metadata(obj).get("resourceVersion")


def _uid(obj: dict[str, Any]) -> Any:
    return metadata(obj).get("uid")


def _short(exc: BaseException) -> str:
    return str(exc).splitlines()[0][:200] if str(exc) else ""

