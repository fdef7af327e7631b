"""Watches of the embedded API: the history of writes and the streams that read it.

Every write of the embedded API appends one :class:`Change` to a
:class:`History`, a ring holding the last ``window`` writes under one
monotonically increasing resourceVersion. A :class:`Watch` reads the history
from a cursor: it filters by kind, namespace, label and field selector, turns
moves into or out of the selectors into ``ADDED`` and ``DELETED``, sends bookmarks,
and ends with a 410 ``ERROR`` event when the ring has slid past it.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple

import attrs

from lifecycle.core.objects import labels as _object_labels
from lifecycle.kube.errors import Gone
from lifecycle.kube.selectors import LabelSelector
from lifecycle.sim.fields import FieldSelector, field_set
from lifecycle.sim.sharing import Lender

__all__ = ["Change", "History", "Watch", "WatchEvent", "labels_of"]


@attrs.frozen
class WatchEvent:
    """One watch event: ``ADDED``, ``MODIFIED``, ``DELETED``, ``BOOKMARK`` or ``ERROR``."""

    type: str
    object: dict[str, Any]


class Change(NamedTuple):
    """One entry of the history: a write of one object, and the object before it.

    A named tuple: immutable, and cheap to build on every write.
    """

    rv: int
    type: str
    key: tuple[str, str]
    namespace: str | None
    object: dict[str, Any]
    previous: dict[str, Any] | None


_new_tuple = tuple.__new__


def labels_of(obj: Mapping[str, Any] | None) -> Mapping[str, str]:
    """The labels of a stored object (empty for ``None`` or an object without labels)."""
    if obj is None:
        return {}
    return _object_labels(obj)


class History:
    """The write log of one embedded API: its resourceVersion, last writes and open watches.

    ``lock`` is the server's lock; every method and attribute is used with it
    held. ``rv`` is the latest resourceVersion; the ring keeps the changes
    numbered ``oldest_retained()..rv``. ``bookmark_interval`` is how often a
    quiet watch that asked for bookmarks receives one.
    """

    def __init__(self, lock: threading.RLock, window: int, bookmark_interval: float) -> None:
        if window < 1:
            raise ValueError("watch_window must be at least 1")
        self.cond = threading.Condition(lock)
        self.window = window
        self.bookmark_interval = bookmark_interval
        self.rv = 0
        self.compacted = 0
        self.watches: set[Watch] = set()
        self.closed = False
        #: Hands stored objects to watchers (set by the server): copies unless shared.
        self.lender: Lender = Lender(detect=False)
        self._ring: list[Change | None] = [None] * window

    def oldest_retained(self) -> int:
        """The oldest resourceVersion whose change is still in the ring (and not compacted)."""
        return max(1, self.rv - self.window + 1, self.compacted + 1)

    def compact(self) -> int:
        """Drop every change up to the current resourceVersion from what watches may replay."""
        self.compacted = self.rv
        return self.rv

    def record(
        self,
        change_type: str,
        key: tuple[str, str],
        namespace: str | None,
        obj: dict[str, Any],
        previous: dict[str, Any] | None,
    ) -> None:
        """Append one change at the current resourceVersion and wake the watches."""
        # tuple.__new__ builds the named tuple without the Python frame of Change.__new__
        self._ring[self.rv % self.window] = _new_tuple(
            Change, (self.rv, change_type, key, namespace, obj, previous))
        if self.watches:  # only an open watch waits (a stopped one is woken by its stop)
            self.cond.notify_all()

    def change(self, rv: int) -> Change:
        """The retained change written at ``rv``."""
        found = self._ring[rv % self.window]
        assert found is not None
        return found

    def state_at(
        self,
        key: tuple[str, str],
        table: Mapping[tuple[str | None, str], dict[str, Any]],
        rv: int,
    ) -> dict[tuple[str | None, str], dict[str, Any]]:
        """The objects of one kind as they were at ``rv``, given the current ``table``.

        Undoes, newest first, every retained change of the kind after ``rv``;
        the caller makes sure the history reaches back to ``rv + 1``.
        """
        state = dict(table)
        for at in range(self.rv, rv, -1):
            change = self.change(at)
            if change.key != key or change.rv != at:
                continue
            object_key = (change.namespace, change.object["metadata"]["name"])
            if change.previous is None:
                state.pop(object_key, None)
            else:
                state[object_key] = change.previous
        return state

    def open(
        self,
        key: tuple[str, str],
        namespace: str | None,
        selector: LabelSelector,
        cursor: int,
        initial: list[tuple[str, dict[str, Any]]],
        timeout: float | None,
        bookmarks: bool,
        fields: FieldSelector | None = None,
    ) -> Watch:
        """A new watch reading after ``cursor``; it has ended already if the log is closed."""
        stream = Watch(self, key, namespace, selector, cursor, initial, timeout, bookmarks,
                       fields)
        if self.closed:
            stream._stopped = True
        else:
            self.watches.add(stream)
        return stream

    def drop_watches(self) -> None:
        """End every open watch now, as if their connections had dropped."""
        with self.cond:
            for stream in list(self.watches):
                stream._stop_locked()
            self.cond.notify_all()

    def close(self) -> None:
        """End every open watch; watches opened afterwards end at once."""
        with self.cond:
            self.closed = True
        self.drop_watches()


class Watch:
    """An iterator of :class:`WatchEvent` for one kind, from the embedded API's ``watch``.

    Blocks until the next event arrives; ends after ``timeout`` seconds, on
    :meth:`stop`, when the API is closed or when its faults drop all
    watches. If the history slides past a watcher that fell behind, it yields
    one ``ERROR`` event carrying a 410 ``Status`` and then ends.
    """

    def __init__(
        self,
        history: History,
        key: tuple[str, str],
        namespace: str | None,
        selector: LabelSelector,
        cursor: int,
        initial: list[tuple[str, dict[str, Any]]],
        timeout: float | None,
        bookmarks: bool,
        fields: FieldSelector | None = None,
    ) -> None:
        self._history = history
        self._share = history.lender.shares("watch")  # opened through a shared view: shared
        self._key = key
        self._namespace = namespace
        self._selector = selector
        self._fields = fields or FieldSelector()
        self._cursor = cursor
        self._pending: collections.deque[tuple[str, dict[str, Any]]] = collections.deque(initial)
        self._deadline = None if timeout is None else time.monotonic() + timeout
        self._bookmarks = bookmarks
        self._next_bookmark = time.monotonic() + history.bookmark_interval
        self._stopped = False
        self._expired = False

    @property
    def resource_version(self) -> str:
        """The last resourceVersion this watch has read up to (to resume from)."""
        return str(self._cursor)

    @property
    def stopped(self) -> bool:
        """Whether the watch has ended."""
        return self._stopped

    def stop(self) -> None:
        """End the watch; a blocked iteration returns promptly."""
        with self._history.cond:
            self._stop_locked()
            self._history.cond.notify_all()

    def _stop_locked(self) -> None:
        self._stopped = True
        self._pending.clear()
        self._history.watches.discard(self)

    def __iter__(self) -> Iterator[WatchEvent]:
        return self

    def __enter__(self) -> Watch:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def __next__(self) -> WatchEvent:
        with self._history.cond:
            kind, obj = self._next_locked()
            return WatchEvent(kind, self._history.lender.out(obj, "watch", self._share))

    def _next_locked(self) -> tuple[str, dict[str, Any]]:
        history = self._history
        while True:
            if self._stopped:
                raise StopIteration
            if self._pending:
                return self._pending.popleft()
            if self._expired:
                self._stop_locked()
                raise StopIteration
            moment = time.monotonic()
            if self._deadline is not None and moment >= self._deadline:
                self._stop_locked()
                raise StopIteration
            self._collect()
            if self._pending:
                continue
            if self._bookmarks and moment >= self._next_bookmark:
                self._next_bookmark = moment + history.bookmark_interval
                return "BOOKMARK", {
                    "apiVersion": self._key[0],
                    "kind": self._key[1],
                    "metadata": {"resourceVersion": str(self._cursor)},
                }
            wait: float | None = None
            if self._deadline is not None:
                wait = self._deadline - moment
            if self._bookmarks:
                until = self._next_bookmark - moment
                wait = until if wait is None else min(wait, until)
            history.cond.wait(wait)

    def _collect(self) -> None:
        """Move history entries after the cursor into the pending queue (lock held)."""
        history = self._history
        latest = history.rv
        if self._cursor >= latest:
            return
        oldest = history.oldest_retained()
        if self._cursor + 1 < oldest:
            self._pending.append(("ERROR", expired_status(self._cursor, oldest)))
            self._expired = True
            return
        key, namespace = self._key, self._namespace
        everything = not self._selector.requirements and self._fields.empty
        for rv in range(self._cursor + 1, latest + 1):
            change = history.change(rv)
            if change.key != key or (namespace is not None and change.namespace != namespace):
                continue
            if everything:
                self._pending.append((change.type, change.object))
                continue
            now_in = self._selected(change.object)
            if change.type != "MODIFIED":
                if now_in:
                    self._pending.append((change.type, change.object))
                continue
            was_in = self._selected(change.previous)
            if now_in and was_in:
                self._pending.append(("MODIFIED", change.object))
            elif now_in:
                self._pending.append(("ADDED", change.object))
            elif was_in and change.previous is not None:
                # As a real server: the object as it was, at the new version.
                gone = dict(change.previous)
                gone["metadata"] = {**change.previous["metadata"],
                                    "resourceVersion": change.object["metadata"][
                                        "resourceVersion"]}
                self._pending.append(("DELETED", gone))
        self._cursor = latest

    def _selected(self, obj: dict[str, Any] | None) -> bool:
        """Whether ``obj`` passes the label and field selectors (``None`` never does)."""
        if obj is None:
            return False
        if not self._selector.matches(labels_of(obj)):
            return False
        return self._fields.empty or self._fields.matches(field_set(*self._key, obj))


def expired_status(requested: int, oldest: int) -> dict[str, Any]:
    """The 410 ``Status`` for a watch at ``requested`` when ``oldest`` is the oldest kept."""
    return Gone(f"too old resource version: {requested} ({oldest - 1})").to_status()
