"""Objects handed out shared, and the mutation detector that holds callers to it.

A cache that hands its objects out without copying them (an informer's store,
the embedded API's shared view) is only correct while no caller changes what
it got: a change would alter the cache's state behind its back. Callers copy
first (:func:`lifecycle.kube.objects.clone`), as the objects of a
controller-runtime or client-go informer cache must be copied.

:class:`MutationDetector` checks that, like client-go's
``KUBE_CACHE_MUTATION_DETECTOR``: each object handed out is remembered with a
private copy, and the copy is compared with the object when it is handed out
again, when the owner touches or replaces it, and on :meth:`MutationDetector.check`.
A difference raises :class:`SharedObjectChanged`, naming the object and the
first changed path (never a value: it may be a Secret's). It is on when asked,
or when the environment variable ``LIFECYCLE_MUTATION_DETECTOR`` is
``1``/``true``; it costs a copy per object handed out and a comparison per
look, so it is meant for tests.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from lifecycle.kube.objects import clone

__all__ = ["MutationDetector", "SharedObjectChanged", "changed_path", "detector_from_env"]

#: Remembered objects beyond which the oldest are checked and forgotten.
MAX_REMEMBERED = 50_000


class SharedObjectChanged(RuntimeError):
    """A caller changed an object that was handed to it shared (read-only)."""


def detector_from_env() -> bool:
    """Whether ``LIFECYCLE_MUTATION_DETECTOR`` asks for the mutation detector."""
    return os.environ.get("LIFECYCLE_MUTATION_DETECTOR", "").strip().lower() in {"1", "true",
                                                                                 "yes"}


def changed_path(before: Any, after: Any, path: str = "") -> str | None:
    """The first path at which ``after`` differs from ``before`` (``None`` if equal).

    Paths look like ``.metadata.labels`` or ``.status.conditions[0]``; ``.``
    is the whole object.
    """
    if before.__class__ is not after.__class__:
        return path or "."
    if isinstance(before, dict):
        for key in before.keys() | after.keys():
            if key not in before or key not in after:
                return f"{path}.{key}"
            found = changed_path(before[key], after[key], f"{path}.{key}")
            if found is not None:
                return found
        return None
    if isinstance(before, list):
        if len(before) != len(after):
            return path or "."
        for index, (old, new) in enumerate(zip(before, after, strict=True)):
            found = changed_path(old, new, f"{path}[{index}]")
            if found is not None:
                return found
        return None
    return None if before == after else (path or ".")


class MutationDetector:
    """Remembers shared objects with private copies and checks they stay unchanged.

    ``enabled`` defaults to :func:`detector_from_env`; when off, every method
    returns at once. ``source`` names who shared the objects in the error
    message. Safe to use from several threads.
    """

    def __init__(self, enabled: bool | None = None, *, source: str = "the cache") -> None:
        self.enabled = detector_from_env() if enabled is None else enabled
        self.source = source
        self._lock = threading.Lock()
        # id(object) -> (the object as handed out, a private copy of it)
        self._lent: dict[int, tuple[dict[str, Any], dict[str, Any]]] = {}

    def lend(self, obj: dict[str, Any]) -> None:
        """``obj`` is handed out: remember it, or check it if it was handed out before."""
        if not self.enabled:
            return
        entries: list[tuple[dict[str, Any], dict[str, Any]]] = []
        with self._lock:
            entry = self._lent.get(id(obj))
            if entry is None:
                if len(self._lent) >= MAX_REMEMBERED:
                    entries = list(self._lent.values())
                    self._lent.clear()
                self._lent[id(obj)] = (obj, clone(obj))
        for old in entries:
            self._verify(old)
        if entry is not None:
            self._verify(entry)

    def touched(self, obj: dict[str, Any]) -> None:
        """The owner looks at ``obj`` again: it must be as it was handed out."""
        if self.enabled:
            with self._lock:
                entry = self._lent.get(id(obj))
            if entry is not None:
                self._verify(entry)

    def replaced(self, previous: dict[str, Any] | None) -> None:
        """A newer version replaced ``previous`` (or deleted it): check it one last time."""
        if self.enabled and previous is not None:
            with self._lock:
                entry = self._lent.pop(id(previous), None)
            if entry is not None:
                self._verify(entry)

    def check(self) -> None:
        """Compare every remembered object with its copy; :class:`SharedObjectChanged` if
        any changed."""
        with self._lock:
            entries = list(self._lent.values())
        for entry in entries:
            self._verify(entry)

    def _verify(self, entry: tuple[dict[str, Any], dict[str, Any]]) -> None:
        obj, copy = entry
        if obj == copy:
            return
        meta = copy.get("metadata") or {}
        namespace = meta.get("namespace")
        name = f"{namespace}/{meta.get('name')}" if namespace else str(meta.get("name"))
        where = changed_path(copy, obj) or "."
        raise SharedObjectChanged(
            f"{copy.get('kind')} {name} (resourceVersion {meta.get('resourceVersion')}) was "
            f"changed at {where} after {self.source} shared it: objects it shares are "
            f"read-only; copy one with lifecycle.kube.objects.clone() before changing it"
        )
