"""Acknowledged writes that survive ``kill -9``: save and fsync before answering.

:class:`DurableSave` is the :class:`~lifecycle.sim.persist.Autosave` of
``lifecycle serve --state``. Besides saving every ``interval`` seconds (for
state that changes outside the API, such as a simulated provider's), it is
the HTTP face's ``after_write`` hook: every successful write is saved to the
SQLite state file, and the file's write-ahead log is fsynced, *before* the
answer is sent. A client that saw its write acknowledged (the operator
writing a finalizer right after it created an external resource, say) finds
it again after any crash of the server, power loss included.

Saves are serialised: a snapshot is taken and written under one lock, so a
slower thread can never write an older snapshot over a newer one.

The cost is one snapshot of the store (a copy of every object), the changed
objects' JSON and one ``fsync`` per acknowledged write: a create took 7.8 ms
(median) instead of 0.9 ms on an empty store, 16 ms instead of 1.1 ms beside
1,000 objects (docs/reliability.md). ``durable=False`` keeps the old behaviour (a ``kill -9``
loses the writes of the last interval).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Mapping
from typing import Any

from lifecycle.sim.persist import Autosave, StateFile

__all__ = ["DurableSave", "fsync_file"]


def fsync_file(path: str | os.PathLike[str]) -> bool:
    """``fsync`` the file at ``path``; whether it existed."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    return True


class DurableSave(Autosave):
    """An :class:`Autosave` whose saves are serialised and reach the disk.

    Call :meth:`save` after each write (``APIServerHTTP.after_write``) to
    make it durable before it is acknowledged.
    """

    def __init__(self, state: StateFile, snapshot: Callable[[], Mapping[str, Any]], *,
                 interval: float = 0.5, changed: Callable[[], bool] = lambda: True,
                 durable: bool = True) -> None:
        super().__init__(state, snapshot, interval=interval, changed=changed)
        self.durable = durable
        self.syncs = 0
        self._serial = threading.Lock()
        self._wal = state.path.with_name(state.path.name + "-wal")
        with contextlib.suppress(OSError):  # the log's directory entry, once
            fsync_file(state.path.parent)

    def save(self) -> bool:
        """Save now if something changed, then fsync the write-ahead log; whether it wrote."""
        with self._serial:
            wrote = super().save()
            if wrote and self.durable:
                if not fsync_file(self._wal):
                    fsync_file(self.state.path)
                self.syncs += 1
            return wrote

    def stop(self) -> None:
        """Stop the thread and save one last time, serialised with every other save."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
        with self._serial:
            self.state.save(self.snapshot())
            if self.durable:
                fsync_file(self._wal)
