"""Rate limiters of a work queue: how long a key waits before it is retried.

:class:`ItemExponentialBackoff` doubles each key's delay from ``base`` to
``cap`` seconds; :class:`BucketRateLimiter` bounds the retries of all keys
together with a token bucket; :class:`MaxOfRateLimiter` takes the longest
delay of several. The operator's work queue
(:class:`lifecycle.driver.queue.WorkQueue`) combines the first two; the
harness's queue on virtual time (:class:`lifecycle.testing.queue.VirtualQueue`)
uses the same per-key rule. All are thread-safe.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from typing import Protocol

__all__ = ["BucketRateLimiter", "ItemExponentialBackoff", "MaxOfRateLimiter", "RateLimiter"]


class RateLimiter(Protocol):
    """Decides how long a key waits before it is retried."""

    def when(self, key: Hashable) -> float:
        """The delay in seconds for one more retry of ``key`` (records the retry)."""
        ...

    def forget(self, key: Hashable) -> None:
        """Stop tracking ``key``: its next retry starts from the smallest delay."""
        ...

    def retries(self, key: Hashable) -> int:
        """How many retries of ``key`` were recorded since it was last forgotten."""
        ...


class ItemExponentialBackoff:
    """Per-key exponential backoff: ``base * 2**retries``, capped at ``cap`` seconds."""

    def __init__(self, base: float = 1.0, cap: float = 60.0) -> None:
        if base <= 0 or cap < base:
            raise ValueError("backoff needs 0 < base <= cap")
        self.base = base
        self.cap = cap
        self._failures: dict[Hashable, int] = {}
        self._lock = threading.Lock()

    def when(self, key: Hashable) -> float:
        """The next delay of ``key``; each call doubles the following one."""
        with self._lock:
            failures = self._failures.get(key, 0)
            self._failures[key] = failures + 1
        if failures > 64:
            return self.cap
        return min(self.cap, self.base * 2.0**failures)

    def forget(self, key: Hashable) -> None:
        """Reset ``key`` to the base delay."""
        with self._lock:
            self._failures.pop(key, None)

    def retries(self, key: Hashable) -> int:
        """Retries of ``key`` since it was last forgotten."""
        with self._lock:
            return self._failures.get(key, 0)


class BucketRateLimiter:
    """An overall token bucket: ``qps`` tokens per second, holding at most ``burst``.

    Every retry of any key takes a token; when none is left, the retry waits
    for the next one. It bounds the total retry rate of a controller however
    many keys fail at once.
    """

    def __init__(self, qps: float = 10.0, burst: int = 100,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if qps <= 0 or burst < 1:
            raise ValueError("bucket needs qps > 0 and burst >= 1")
        self.qps = qps
        self.burst = burst
        self._clock = clock
        self._tokens = float(burst)
        self._last = clock()
        self._lock = threading.Lock()

    def when(self, key: Hashable) -> float:
        """Reserve a token and return how long to wait for it."""
        with self._lock:
            moment = self._clock()
            self._tokens = min(self.burst, self._tokens + (moment - self._last) * self.qps)
            self._last = moment
            self._tokens -= 1.0
            return 0.0 if self._tokens >= 0 else -self._tokens / self.qps

    def forget(self, key: Hashable) -> None:
        """Nothing to forget: the bucket is shared by all keys."""

    def retries(self, key: Hashable) -> int:
        """The bucket does not count per key."""
        return 0


class MaxOfRateLimiter:
    """The longest delay of several limiters (each records every retry)."""

    def __init__(self, *limiters: RateLimiter) -> None:
        self.limiters = limiters

    def when(self, key: Hashable) -> float:
        """The maximum of the limiters' delays."""
        return max(limiter.when(key) for limiter in self.limiters)

    def forget(self, key: Hashable) -> None:
        """Forget ``key`` in every limiter."""
        for limiter in self.limiters:
            limiter.forget(key)

    def retries(self, key: Hashable) -> int:
        """The largest retry count any limiter records."""
        return max(limiter.retries(key) for limiter in self.limiters)
