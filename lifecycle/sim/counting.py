"""Call counts of the embedded API: how many calls of each verb, per kind.

A mixin of :class:`lifecycle.sim.apiserver.EmbeddedAPI`; the benchmarks and
tests read :attr:`Counting.stats` and :meth:`Counting.writes`.
"""

from __future__ import annotations

import collections
import threading

from lifecycle.sim.faults import WRITE_VERBS

__all__ = ["Counting"]


class Counting:
    """Calls per verb and kind, failed and faulted calls included (a mixin)."""

    _lock: threading.RLock
    _calls: dict[tuple[str, str], int]  # (verb, kind) -> calls

    def _count(self, verb: str, kind: str) -> None:
        key = (verb, kind)
        with self._lock:
            calls = self._calls
            calls[key] = calls.get(key, 0) + 1

    @property
    def stats(self) -> collections.Counter[str]:
        """Calls so far per verb (failed and faulted calls included), as of now."""
        totals: collections.Counter[str] = collections.Counter()
        with self._lock:
            for (verb, _), calls in self._calls.items():
                totals[verb] += calls
        return totals

    def writes(self, kind: str | None = None) -> int:
        """How many write calls (create, replace, replace_status, patch, delete) were made."""
        with self._lock:
            return sum(calls for (verb, of), calls in self._calls.items()
                       if verb in WRITE_VERBS and (kind is None or of == kind))

    def reset_stats(self) -> None:
        """Zero ``stats`` and the per-kind counters."""
        with self._lock:
            self._calls.clear()
