"""A minimal in-process operator for the benchmarks: a work queue and N worker threads.

The operator's own :class:`~lifecycle.driver.queue.WorkQueue` hands out keys
(a key queued at most once, never to two workers at a time, delayed adds
waiting until due); its rate limiter is not used, so the benchmark measures
the engine rather than the overall retry limit. :class:`Runner` drives a
:class:`~lifecycle.runtime.reconciler.Reconciler` from it with ``workers`` threads and
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

import threading
import time
from collections.abc import Hashable, Iterable
from typing import Any

import attrs

from lifecycle.core.errors import UnhandledError
from lifecycle.core.values import ResultKind
from lifecycle.driver.queue import WorkQueue
from lifecycle.runtime.reconciler import Reconciler

#: The result reason of a Ready object's next poll.
POLL = "Poll"


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
        self.queue.shut_down()
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
