"""The harness's work queue on virtual time: clock, backoff, steps and what is queued.

:class:`VirtualQueue` applies a reconcile's result with the operator's own
requeue matrix (the row :func:`~lifecycle.core.requeue.requeue_of` reads, which the
operator applies with :func:`~lifecycle.core.requeue.apply_result`), with one
difference: time is virtual, so nothing ever sleeps. Retries back off by the operator's own
per-item rule (:class:`~lifecycle.kube.ratelimit.ItemExponentialBackoff`,
configured by :class:`Backoff`); the operator's overall token bucket
(10 retries a second, bursts of 100) is not modelled.
"""

from __future__ import annotations

import heapq
import itertools
from datetime import UTC, datetime, timedelta

import attrs

from lifecycle.core.requeue import AFTER, BACKOFF, NOW, requeue_of
from lifecycle.core.values import Result, ResultKind
from lifecycle.kube.ratelimit import ItemExponentialBackoff

__all__ = ["Backoff", "Key", "NotSettled", "Queued", "Step", "VirtualClock", "VirtualQueue"]

#: A work-queue key: (kind, namespace or None, name).
Key = tuple[str, str | None, str]


class VirtualClock:
    """A clock that moves only when told; the harness advances it to the next due item."""

    def __init__(self, start: datetime | None = None) -> None:
        self.current = start or datetime(2026, 1, 1, tzinfo=UTC)

    def now(self) -> datetime:
        """The current virtual time."""
        return self.current

    def advance(self, seconds: float) -> None:
        """Move forward by ``seconds``."""
        self.current += timedelta(seconds=max(0.0, seconds))


@attrs.frozen
class Step:
    """One reconcile the harness ran: its key, result, and the state before and after.

    ``result`` is ``None`` and ``error`` the message when the reconcile
    raised (an API error the engine does not handle itself); either way the
    key is retried with backoff. ``before == after`` for passes that kept
    the state (waiting, polling, a self-transition).
    """

    kind: str
    namespace: str | None
    name: str
    time: datetime
    before: str | None
    after: str | None
    result: Result | None
    error: str | None = None

    @property
    def failed(self) -> bool:
        """Whether the pass ends in a retry with backoff (an error or a backoff result)."""
        return self.result is None or self.result.kind is ResultKind.BACKOFF


@attrs.frozen
class Backoff:
    """Per-item exponential backoff of the harness's queue (seconds), the operator's rule.

    The n-th failure in a row waits ``base * 2**(n-1)`` seconds, at most
    ``cap``, and never less than a provider's retry-after: the same delays
    as :class:`lifecycle.kube.ratelimit.ItemExponentialBackoff`, which the
    harness's queue uses. Raises ``ValueError`` unless ``0 < base <= cap``.
    """

    base: float = 1.0
    cap: float = 60.0

    def __attrs_post_init__(self) -> None:
        if not 0 < self.base <= self.cap:
            raise ValueError(f"backoff needs 0 < base <= cap, got base={self.base} cap={self.cap}")

    def delay(self, failures: int, at_least: float = 0.0) -> float:
        """The delay after ``failures`` consecutive failures, never below ``at_least``."""
        exponent = min(max(0, failures - 1), 64)  # 2**64 s is past any cap
        return max(at_least, min(self.cap, self.base * 2.0**exponent))

    def limiter(self) -> ItemExponentialBackoff:
        """The operator's per-item limiter with these delays."""
        return ItemExponentialBackoff(self.base, self.cap)


@attrs.frozen
class Queued:
    """Where one object stands in the harness's queue.

    ``due`` is the virtual time of its next reconcile and ``delay`` how many
    seconds from now that is; ``reason`` why it is queued (``Event``,
    ``Now``, ``Backoff``, ``Waiting``, ``Poll``, ...). ``attempts`` counts
    the reconciles in a row that failed (reset by any pass that does not
    back off), and ``error`` says what the last of them met. ``stuck`` is
    the message of the object's ``Stuck`` condition while it is True (an
    operation has lasted longer than its state's ``max_in_state``).
    """

    kind: str
    namespace: str | None
    name: str
    due: datetime
    delay: float
    reason: str
    attempts: int = 0
    error: str | None = None
    stuck: str | None = None

    def describe(self) -> str:
        """One line: the object, its attempts and why it is retried."""
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        line = f"{self.kind} {where}: {self.reason} in {self.delay:g}s"
        if self.attempts:
            line += f" after {self.attempts} failed attempt{'s' * (self.attempts > 1)}"
        if self.error:
            line += f" ({self.error})"
        if self.stuck:
            line += f" (Stuck: {self.stuck})"
        return line


class NotSettled(AssertionError):
    """``run_until_idle`` stopped before the queue settled; ``queued`` says where each object is.

    The message names every object still retrying and why.
    """

    def __init__(self, message: str, queued: list[Queued]) -> None:
        super().__init__(message)
        self.queued = queued


class VirtualQueue:
    """Keys due at virtual times (seconds since the start); the earliest due time wins."""

    def __init__(self, backoff: Backoff, clock: VirtualClock) -> None:
        self.backoff = backoff
        self.limiter = backoff.limiter()
        self.clock = clock
        self.elapsed = 0.0
        self.due: dict[Key, tuple[float, str]] = {}
        self.errors: dict[Key, str] = {}
        self.stuck: dict[Key, str] = {}
        self._heap: list[tuple[float, int, Key]] = []
        self._seq = itertools.count()

    def add(self, key: Key, after: float = 0.0, reason: str = "Event") -> None:
        """Schedule ``key`` ``after`` seconds from now, unless it is due sooner already."""
        due = self.elapsed + max(0.0, after)
        current = self.due.get(key)
        if current is not None and current[0] <= due:
            return
        self.due[key] = (due, reason)
        heapq.heappush(self._heap, (due, next(self._seq), key))

    def take(self, key: Key) -> None:
        """``key`` is being reconciled now: its pending entry is superseded."""
        self.due.pop(key, None)

    def settle(self, key: Key, result: Result | None, error: str | None) -> None:
        """Apply one reconcile's outcome (``result`` None: it raised ``error``) with the
        operator's own requeue matrix (:func:`~lifecycle.core.requeue.requeue_of`): each
        key queued with why (``Now``, ``Backoff``, the result's reason), a failure's
        message kept for :class:`Queued`."""
        row = requeue_of(result)
        reason = result.reason if result is not None else ""
        if row.forget:
            self.limiter.forget(key)
            self.errors.pop(key, None)
        if row.add == BACKOFF:
            delay = max(row.delay, self.limiter.when(key))
            self.errors[key] = error or reason or "failed"
            self.add(key, delay, "Backoff")
        elif row.add == NOW:
            self.add(key, 0.0, "Now")
        elif row.add == AFTER:
            self.add(key, row.delay, reason or "After")

    def attempts(self, key: Key) -> int:
        """Failed reconciles of ``key`` in a row."""
        return self.limiter.retries(key)

    def next_due(self, limit: float | None = None) -> tuple[float, Key] | None:
        """Pop the earliest live entry (due no later than ``limit``), or ``None``."""
        while self._heap and (limit is None or self._heap[0][0] <= limit):
            due, _, key = heapq.heappop(self._heap)
            current = self.due.get(key)
            if current is not None and current[0] == due:
                return due, key
        return None

    def push_back(self, due: float, key: Key) -> None:
        """Put back an entry popped by :meth:`next_due` and not run."""
        heapq.heappush(self._heap, (due, next(self._seq), key))

    def move_to(self, moment: float) -> None:
        """Advance the clock to ``moment`` seconds since the start (never backwards)."""
        if moment > self.elapsed:
            self.clock.advance(moment - self.elapsed)
            self.elapsed = moment

    def queued(self, key: Key) -> Queued | None:
        """Where ``key`` stands, or ``None`` when it is not queued."""
        entry = self.due.get(key)
        if entry is None:
            return None
        due, reason = entry
        delay = max(0.0, due - self.elapsed)
        return Queued(key[0], key[1], key[2], self.clock.now() + timedelta(seconds=delay),
                      delay, reason, self.attempts(key), self.errors.get(key),
                      self.stuck.get(key))

