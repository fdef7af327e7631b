"""What a controller calls, and how the :class:`~lifecycle.core.values.Result` it returns
is applied to a work queue: the requeue matrix, in one place.

:func:`requeue_of` reads one row of the matrix (pure): what a queue does with
the key after a reconcile. The operator's controller (:mod:`lifecycle.driver.manager`)
applies it with :func:`apply_result`, through the queue's own operations
(:class:`Requeues`); the test harness's queue on virtual time
(:mod:`lifecycle.testing.queue`) applies the same row to itself.

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

import attrs

from lifecycle.core.values import Result, ResultKind

__all__ = ["AFTER", "BACKOFF", "NOW", "Reconciles", "Requeue", "Requeues", "apply_result",
           "requeue_of"]

#: :attr:`Requeue.add`: queue the key now.
NOW = "now"
#: :attr:`Requeue.add`: queue the key after :attr:`Requeue.delay` seconds.
AFTER = "after"
#: :attr:`Requeue.add`: queue the key after its next backoff delay, never below
#: :attr:`Requeue.delay` seconds.
BACKOFF = "backoff"


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


@attrs.frozen
class Requeue:
    """One row of the requeue matrix: what a queue does with a key after one reconcile."""

    #: The outcome as the operator's metrics name it: ``success``, ``requeue``,
    #: ``requeue_after`` or ``error``.
    outcome: str
    #: Whether the key's backoff is reset (every row but a backoff's).
    forget: bool
    #: How the key is queued again: :data:`NOW`, :data:`AFTER`, :data:`BACKOFF`, or None
    #: when it is not.
    add: str | None
    #: Seconds: the interval of :data:`AFTER`, the least delay of :data:`BACKOFF`.
    delay: float = 0.0


def requeue_of(result: Result | None) -> Requeue:
    """The row of the requeue matrix for one reconcile's ``result`` (None: it raised)."""
    if result is None:
        return Requeue("error", False, BACKOFF)
    if result.kind is ResultKind.BACKOFF:
        return Requeue("requeue", False, BACKOFF, result.after)
    if result.kind is ResultKind.REQUEUE_NOW:
        return Requeue("requeue", True, NOW)
    if result.kind is ResultKind.REQUEUE_AFTER:
        return Requeue("requeue_after", True, AFTER, result.after)
    return Requeue("success", True, None)


def apply_result(queue: Requeues, key: Hashable, result: Result | None) -> tuple[str, float]:
    """Apply one reconcile's ``result`` to ``queue`` (None: the reconcile raised), as
    :func:`requeue_of` reads the matrix.

    Returns the outcome as the operator's metrics name it (``success``,
    ``requeue``, ``requeue_after``, ``error``) and the delay in seconds
    before ``key`` is reconciled again (0 when it is not requeued).
    """
    row = requeue_of(result)
    if row.add == BACKOFF:
        return row.outcome, queue.add_rate_limited(key, at_least=row.delay)
    if row.forget:
        queue.forget(key)
    if row.add == NOW:
        queue.add(key)
    elif row.add == AFTER:
        queue.add_after(key, row.delay)
    return row.outcome, row.delay
