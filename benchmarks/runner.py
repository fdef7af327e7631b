"""A minimal in-process operator for the benchmarks: a work queue and N worker threads.

:class:`WorkQueue` behaves like a controller work queue: a key is queued at
most once, a key being processed is never handed to a second worker (adding
it meanwhile queues it again once that worker is done), and delayed adds wait
in a heap until due. :class:`Runner` drives a
:class:`~lifecycle.reconciler.Reconciler` from it with ``workers`` threads and
follows the requeue matrix, with every requeue delay multiplied by
``time_scale`` (0 runs waiting states back to back, so a benchmark measures the
engine rather than its poll intervals).

Two stopping rules cover the benchmarks: ``settle`` stops once every key has
reached a Ready poll (or is done), and a ``duration`` keeps every key polling
and stops after that many seconds. Each worker counts its reconciles and the
CPU time of its own thread, so a rate can be read as wall-clock or as CPU time
on a shared machine.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections import deque
from collections.abc import Hashable, Iterable
from typing import Any

import attrs

from lifecycle.errors import UnhandledError
from lifecycle.reconciler import Reconciler
from lifecycle.values import ResultKind

#: The result reason of a Ready object's next poll.
POLL = "Poll"


class WorkQueue:
    """A deduplicating, delay-capable work queue safe for many threads."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._queue: deque[Hashable] = deque()
        self._queued: set[Hashable] = set()
        self._processing: set[Hashable] = set()
        self._again: set[Hashable] = set()
        self._delayed: list[tuple[float, int, Hashable]] = []
        self._seq = itertools.count()
        self._closed = False

    def __len__(self) -> int:
        """Keys waiting now or later (not those being processed)."""
        with self._cond:
            return len(self._queue) + len(self._delayed)

    def add(self, key: Hashable) -> None:
        """Queue ``key`` now, unless it is already queued."""
        with self._cond:
            self._add_locked(key)

    def _add_locked(self, key: Hashable) -> None:
        if self._closed or key in self._queued:
            return
        if key in self._processing:
            self._again.add(key)
            return
        self._queued.add(key)
        self._queue.append(key)
        self._cond.notify()

    def add_after(self, key: Hashable, delay: float) -> None:
        """Queue ``key`` once ``delay`` seconds have passed (at once when not positive)."""
        if delay <= 0:
            self.add(key)
            return
        with self._cond:
            if self._closed:
                return
            heapq.heappush(self._delayed, (time.monotonic() + delay, next(self._seq), key))
            self._cond.notify()

    def get(self) -> Hashable | None:
        """The next key to process, blocking until one is due; ``None`` once closed."""
        with self._cond:
            while True:
                if self._closed:
                    return None
                self._promote_locked()
                if self._queue:
                    key = self._queue.popleft()
                    self._queued.discard(key)
                    self._processing.add(key)
                    return key
                timeout = self._delayed[0][0] - time.monotonic() if self._delayed else None
                self._cond.wait(timeout)

    def _promote_locked(self) -> None:
        now = time.monotonic()
        while self._delayed and self._delayed[0][0] <= now:
            _, _, key = heapq.heappop(self._delayed)
            self._add_locked(key)

    def done(self, key: Hashable) -> None:
        """Mark ``key`` processed; re-queue it if it was added meanwhile."""
        with self._cond:
            self._processing.discard(key)
            if key in self._again:
                self._again.discard(key)
                self._add_locked(key)

    def close(self) -> None:
        """Wake every waiting worker with ``None``; later adds are ignored."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()


@attrs.define
class RunStats:
    """What one run did: reconciles, errors, wall and summed worker CPU seconds."""

    workers: int
    reconciles: int
    errors: int
    wall_seconds: float
    cpu_seconds: float
    settled: int

    @property
    def per_second(self) -> float:
        """Reconciles per wall-clock second."""
        return self.reconciles / self.wall_seconds if self.wall_seconds > 0 else 0.0

    @property
    def per_cpu_second(self) -> float:
        """Reconciles per second of worker CPU time."""
        return self.reconciles / self.cpu_seconds if self.cpu_seconds > 0 else 0.0

    @property
    def cpu_us_per_reconcile(self) -> float:
        """Mean worker CPU microseconds per reconcile."""
        return self.cpu_seconds / self.reconciles * 1e6 if self.reconciles else 0.0

    @property
    def wall_us_per_reconcile(self) -> float:
        """Mean wall-clock microseconds per reconcile (times the worker count)."""
        return self.wall_seconds * self.workers / self.reconciles * 1e6 if self.reconciles else 0.0


class Runner:
    """Runs ``reconciler`` over keys ``(namespace, name)`` with ``workers`` threads."""

    def __init__(self, reconciler: Reconciler, *, workers: int = 1, time_scale: float = 0.0,
                 backoff: float = 0.01) -> None:
        if workers < 1:
            raise ValueError("workers must be at least 1")
        self.reconciler = reconciler
        self.workers = workers
        self.time_scale = time_scale
        self.backoff = backoff
        self.queue = WorkQueue()
        self._lock = threading.Lock()
        self._reconciles = 0
        self._errors = 0
        self._cpu = 0.0
        self._outstanding: set[Hashable] = set()
        self._all_settled = threading.Event()
        self._settle = True

    def settle(self, keys: Iterable[tuple[str | None, str]], timeout: float = 3600.0) -> RunStats:
        """Reconcile every key until each reaches a Ready poll or is done."""
        self._settle = True
        return self._run(list(keys), timeout)

    def poll(self, keys: Iterable[tuple[str | None, str]], duration: float) -> RunStats:
        """Keep reconciling every key back to back for ``duration`` seconds."""
        self._settle = False
        return self._run(list(keys), duration)

    def _run(self, keys: list[tuple[str | None, str]], limit: float) -> RunStats:
        self.queue = WorkQueue()
        self._reconciles = self._errors = 0
        self._cpu = 0.0
        self._outstanding = set(keys)
        self._all_settled.clear()
        threads = [threading.Thread(target=self._work, name=f"bench-worker-{i}", daemon=True)
                   for i in range(self.workers)]
        start = time.perf_counter()
        for key in keys:
            self.queue.add(key)
        for thread in threads:
            thread.start()
        if not keys:
            self._all_settled.set()
        self._all_settled.wait(limit)
        self.queue.close()
        for thread in threads:
            thread.join()
        wall = time.perf_counter() - start  # reconciles still in flight at the limit count
        return RunStats(self.workers, self._reconciles, self._errors, wall, self._cpu,
                        len(keys) - len(self._outstanding))

    def _work(self) -> None:
        reconciler, queue = self.reconciler, self.queue
        count = errors = 0
        cpu_start = time.thread_time()
        while True:
            key = queue.get()
            if key is None:
                break
            namespace, name = key  # type: ignore[misc]
            try:
                result: Any = reconciler.reconcile(namespace, name)
            except UnhandledError:
                result = None
            count += 1
            if result is None:
                errors += 1
                queue.add_after(key, self.backoff)
            elif result.kind is ResultKind.DONE:
                self._settled(key)
            elif result.kind is ResultKind.REQUEUE_NOW:
                queue.add(key)
            elif result.reason == POLL and self._settle:
                self._settled(key)
            elif result.reason == POLL:
                queue.add(key)
            else:
                queue.add_after(key, result.after * self.time_scale)
            queue.done(key)
        cpu = time.thread_time() - cpu_start
        with self._lock:
            self._reconciles += count
            self._errors += errors
            self._cpu += cpu

    def _settled(self, key: Hashable) -> None:
        with self._lock:
            self._outstanding.discard(key)
            if not self._outstanding:
                self._all_settled.set()
