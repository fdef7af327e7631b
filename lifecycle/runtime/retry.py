"""Conflict retries of the runtime's writes, ending in an error the work queue backs off on."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from lifecycle.core.errors import UnhandledError
from lifecycle.kube.conflict import ConflictsExhausted, on_conflict

__all__ = ["retry_conflicts"]

T = TypeVar("T")


def retry_conflicts(attempt: Callable[[], T], refresh: Callable[[], object], *, what: str) -> T:
    """Run ``attempt``, retrying a 409 Conflict after ``refresh`` (a fresh read).

    When every attempt conflicts, raises :class:`UnhandledError` ``"<what>
    kept conflicting"``: the pass ends and the work queue retries it later
    with backoff.
    """
    try:
        return on_conflict(attempt, refresh, what=what)
    except ConflictsExhausted:
        raise UnhandledError(f"{what} kept conflicting") from None
