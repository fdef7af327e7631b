"""What a controller calls, and how the :class:`~lifecycle.core.values.Result` it returns
is applied to a work queue: the requeue matrix, in one place.

The operator's controller (:mod:`lifecycle.driver.manager`) and the test
harness's queue on virtual time (:mod:`lifecycle.testing.queue`) both apply
a reconcile's outcome with :func:`apply_result`:

=====================  =================================================  ==============
result                 queue                                              outcome
=====================  =================================================  ==============
done                   forget the backoff                                 success
requeue now (dirty)    forget the backoff, add now                        requeue
requeue after          forget the backoff, add after the interval         requeue_after
backoff (handled)      add rate-limited (at least the provider's delay)   requeue
unhandled error        add rate-limited                                   error
=====================  =================================================  ==============
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Protocol

from lifecycle.core.values import Result, ResultKind

__all__ = ["Reconciles", "Requeues", "apply_result"]


class Reconciles(Protocol):
    """What a controller calls: one reconcile of ``namespace/name``."""

    def reconcile(self, namespace: str | None, name: str) -> Result:
        """One reconcile of ``namespace/name``."""
        ...


class Requeues(Protocol):
    """The queue operations the requeue matrix uses."""

    def add(self, key: Hashable) -> None:
        """Queue ``key`` now."""
        ...

    def add_after(self, key: Hashable, delay: float) -> None:
        """Queue ``key`` after ``delay`` seconds."""
        ...

    def add_rate_limited(self, key: Hashable, at_least: float = 0.0) -> float:
        """Queue ``key`` after its next backoff delay (never below ``at_least``); the delay."""
        ...

    def forget(self, key: Hashable) -> None:
        """Reset ``key``'s backoff."""
        ...


def apply_result(queue: Requeues, key: Hashable, result: Result | None) -> tuple[str, float]:
    """Apply one reconcile's ``result`` to ``queue`` (None: the reconcile raised).

    Returns the outcome as the operator's metrics name it (``success``,
    ``requeue``, ``requeue_after``, ``error``) and the delay in seconds
    before ``key`` is reconciled again (0 when it is not requeued).
    """
    if result is None:
        return "error", queue.add_rate_limited(key)
    if result.kind is ResultKind.BACKOFF:
        return "requeue", queue.add_rate_limited(key, at_least=result.after)
    queue.forget(key)
    if result.kind is ResultKind.REQUEUE_NOW:
        queue.add(key)
        return "requeue", 0.0
    if result.kind is ResultKind.REQUEUE_AFTER:
        queue.add_after(key, result.after)
        return "requeue_after", result.after
    return "success", 0.0
