"""One home for optimistic-concurrency retries.

A write guarded by ``resourceVersion`` answers 409 Conflict when the object
changed since it was read. :func:`on_conflict` runs an attempt, and on a
conflict calls ``refresh`` (a fresh read) and tries again, a bounded number of
times; every other error propagates unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from lifecycle.kube.errors import Conflict

__all__ = ["CONFLICT_ATTEMPTS", "ConflictsExhausted", "on_conflict"]

T = TypeVar("T")

#: Attempts one write makes before giving up (the first try plus four retries).
CONFLICT_ATTEMPTS = 5


class ConflictsExhausted(Exception):
    """Every attempt of a guarded write met a 409 Conflict."""


def on_conflict(
    attempt: Callable[[], T],
    refresh: Callable[[], object],
    *,
    attempts: int = CONFLICT_ATTEMPTS,
    what: str = "write",
) -> T:
    """Run ``attempt``; on :class:`Conflict` call ``refresh`` and try again.

    ``attempt`` rebuilds its request from the latest state each time, so a
    retry never overwrites a change it has not seen. After ``attempts``
    conflicts in a row raises :class:`ConflictsExhausted` naming ``what``.
    """
    if attempts < 1:
        raise ValueError("attempts must be at least 1")
    for _ in range(attempts):
        try:
            return attempt()
        except Conflict:
            refresh()
    raise ConflictsExhausted(f"{what} kept conflicting ({attempts} attempts)")
