"""A rate-limited work queue with the guarantees controllers rely on.

- A key added while it is already queued is queued once (the adds collapse).
- A key is never handed to two workers at once: a key added while it is being
  processed is held back and queued again when the worker calls :meth:`WorkQueue.done`.
- :meth:`WorkQueue.add_after` delays a key (the earliest pending time wins);
  :meth:`WorkQueue.add_rate_limited` delays it by the rate limiter: per-item
  exponential backoff combined with an overall token bucket; :meth:`WorkQueue.forget`
  resets a key's backoff after a success.
- :meth:`WorkQueue.shut_down` stops handing out keys at once (queued keys are
  left: the next leader's informer re-lists them); :meth:`WorkQueue.drain` waits
  for the keys in flight.

The defaults (1 s doubling to 60 s per item; 10 per second, bursts of 100
overall) and how they compare with controller-runtime and crossplane-runtime
are in ``docs/driver.md``.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable
from typing import Protocol

import attrs

from lifecycle.kube.ratelimit import (
    BucketRateLimiter,
    ItemExponentialBackoff,
    MaxOfRateLimiter,
    RateLimiter,
)

__all__ = ["QueueMetrics", "WorkQueue", "default_rate_limiter"]


def default_rate_limiter(base: float = 1.0, cap: float = 60.0, qps: float = 10.0,
                         burst: int = 100) -> RateLimiter:
    """Per-item backoff from ``base`` to ``cap`` seconds and an overall ``qps``/``burst`` bucket."""
    return MaxOfRateLimiter(ItemExponentialBackoff(base, cap), BucketRateLimiter(qps, burst))


class QueueMetrics(Protocol):
    """What a queue reports; :class:`lifecycle.driver.metrics.OperatorMetrics` implements it."""

    def queue_added(self, name: str) -> None:
        """A key was queued (or collapsed into a queued one)."""
        ...

    def queue_started(self, name: str, waited: float) -> None:
        """A worker took a key that had waited ``waited`` seconds in the queue."""
        ...

    def queue_finished(self, name: str, worked: float) -> None:
        """A worker finished a key after ``worked`` seconds."""
        ...

    def queue_retried(self, name: str) -> None:
        """A key was re-queued through the rate limiter."""
        ...


@attrs.define
class _NoMetrics:
    def queue_added(self, name: str) -> None:
        pass

    def queue_started(self, name: str, waited: float) -> None:
        pass

    def queue_finished(self, name: str, worked: float) -> None:
        pass

    def queue_retried(self, name: str) -> None:
        pass


class WorkQueue:
    """A deduplicating, delaying, rate-limited queue of hashable keys for N workers.

    ``name`` labels metrics; ``rate_limiter`` defaults to
    :func:`default_rate_limiter`; ``clock`` is monotonic seconds.
    """

    def __init__(
        self,
        name: str = "queue",
        *,
        rate_limiter: RateLimiter | None = None,
        metrics: QueueMetrics | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = name
        self.rate_limiter = rate_limiter or default_rate_limiter()
        self.metrics = metrics or _NoMetrics()
        self._clock = clock
        self._cond = threading.Condition()
        self._queue: deque[Hashable] = deque()
        self._dirty: set[Hashable] = set()
        self._processing: dict[Hashable, float] = {}
        self._added_at: dict[Hashable, float] = {}
        self._waiting: list[tuple[float, int, Hashable]] = []
        self._due: dict[Hashable, float] = {}
        self._seq = itertools.count()
        self._shutting_down = False

    # ------------------------------------------------------------------- adds
    def add(self, key: Hashable) -> None:
        """Queue ``key`` now, unless it is queued already (or being processed: later)."""
        with self._cond:
            self._add_locked(key)

    def _add_locked(self, key: Hashable) -> None:
        if self._shutting_down:
            return
        self.metrics.queue_added(self.name)
        self._due.pop(key, None)  # an immediate add supersedes a pending delayed one
        if key in self._dirty:
            return
        self._dirty.add(key)
        self._added_at.setdefault(key, self._clock())
        if key in self._processing:
            return
        self._queue.append(key)
        self._cond.notify()

    def add_after(self, key: Hashable, delay: float) -> None:
        """Queue ``key`` after ``delay`` seconds; an earlier pending time is kept."""
        if delay <= 0:
            self.add(key)
            return
        with self._cond:
            if self._shutting_down:
                return
            due = self._clock() + delay
            current = self._due.get(key)
            if current is not None and current <= due:
                return
            self._due[key] = due
            heapq.heappush(self._waiting, (due, next(self._seq), key))
            self._cond.notify()

    def add_rate_limited(self, key: Hashable, at_least: float = 0.0) -> float:
        """Queue ``key`` after the rate limiter's delay (never below ``at_least``); returns it."""
        delay = max(at_least, self.rate_limiter.when(key))
        self.metrics.queue_retried(self.name)
        self.add_after(key, delay)
        return delay

    def forget(self, key: Hashable) -> None:
        """Reset the backoff of ``key`` (after a successful reconcile)."""
        self.rate_limiter.forget(key)

    def retries(self, key: Hashable) -> int:
        """How many rate-limited retries ``key`` has had since it was last forgotten."""
        return self.rate_limiter.retries(key)

    # ------------------------------------------------------------- workers
    def get(self, timeout: float | None = None) -> Hashable | None:
        """Block until a key is ready and mark it in flight; ``None`` on shutdown or timeout."""
        deadline = None if timeout is None else self._clock() + timeout
        with self._cond:
            while True:
                if self._shutting_down:
                    return None  # stop taking work; queued keys are left behind
                self._promote_due()
                if self._queue:
                    key = self._queue.popleft()
                    self._dirty.discard(key)
                    # This reconcile supersedes any delayed retry still pending for the
                    # key (one scheduled just before an event re-queued it): the result
                    # of this pass schedules the next one.
                    self._due.pop(key, None)
                    moment = self._clock()
                    self._processing[key] = moment
                    waited = moment - self._added_at.pop(key, moment)
                    self.metrics.queue_started(self.name, waited)
                    return key
                wait = None
                if self._waiting:
                    wait = max(0.0, self._waiting[0][0] - self._clock())
                if deadline is not None:
                    left = deadline - self._clock()
                    if left <= 0:
                        return None
                    wait = left if wait is None else min(wait, left)
                self._cond.wait(wait)

    def _promote_due(self) -> None:
        moment = self._clock()
        while self._waiting and self._waiting[0][0] <= moment:
            due, _, key = heapq.heappop(self._waiting)
            if self._due.get(key) == due:
                del self._due[key]
                self._add_locked(key)

    def done(self, key: Hashable) -> None:
        """Mark ``key`` finished; if it was added meanwhile, it is queued again now."""
        with self._cond:
            started = self._processing.pop(key, None)
            if started is not None:
                self.metrics.queue_finished(self.name, self._clock() - started)
            if key in self._dirty and not self._shutting_down:
                self._queue.append(key)
            self._cond.notify_all()

    # ------------------------------------------------------------- shutdown
    def shut_down(self) -> None:
        """Stop accepting keys; blocked :meth:`get` calls return ``None``."""
        with self._cond:
            self._shutting_down = True
            self._cond.notify_all()

    def drain(self, timeout: float | None = None) -> bool:
        """Wait until no key is in flight; ``False`` if ``timeout`` passed first."""
        deadline = None if timeout is None else self._clock() + timeout
        with self._cond:
            while self._processing:
                left = None if deadline is None else deadline - self._clock()
                if left is not None and left <= 0:
                    return False
                self._cond.wait(left)
            return True

    @property
    def shutting_down(self) -> bool:
        """Whether :meth:`shut_down` was called."""
        return self._shutting_down

    # ------------------------------------------------------------- insight
    def __len__(self) -> int:
        """The depth: keys ready to be handed out."""
        with self._cond:
            return len(self._queue)

    def waiting(self) -> int:
        """Keys scheduled for later (``add_after`` or backoff)."""
        with self._cond:
            return len(self._due)

    def in_flight(self) -> dict[Hashable, float]:
        """Keys being processed, with how long each has been running (seconds)."""
        with self._cond:
            moment = self._clock()
            return {key: moment - start for key, start in self._processing.items()}

    def due(self, key: Hashable) -> float | None:
        """Seconds until ``key``'s delayed add, if one is pending."""
        with self._cond:
            when = self._due.get(key)
            return None if when is None else when - self._clock()
