"""One requeue matrix: :func:`lifecycle.core.requeue.apply_result` on the operator's queue
and on the harness's queue on virtual time.

Each result is applied to a recording queue (the operations the matrix
asks for), to the operator's :class:`~lifecycle.driver.queue.WorkQueue` and
to the harness's :class:`~lifecycle.testing.queue.VirtualQueue`; both real
queues must then hold the key at the same delay.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import pytest

from lifecycle.core.requeue import apply_result
from lifecycle.core.values import Result
from lifecycle.driver.queue import WorkQueue
from lifecycle.kube.ratelimit import ItemExponentialBackoff
from lifecycle.testing.queue import Backoff, VirtualClock, VirtualQueue

KEY = ("DatabaseInstance", "default", "db")


class Recording:
    """A queue that records the operations asked of it."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def add(self, key: Hashable) -> None:
        self.calls.append(("add", key))

    def add_after(self, key: Hashable, delay: float) -> None:
        self.calls.append(("add_after", key, delay))

    def add_rate_limited(self, key: Hashable, at_least: float = 0.0) -> float:
        self.calls.append(("add_rate_limited", key, at_least))
        return max(at_least, 1.0)

    def forget(self, key: Hashable) -> None:
        self.calls.append(("forget", key))


@pytest.mark.parametrize(("result", "outcome", "calls"), [
    (Result.done("Ready"), ("success", 0.0), [("forget", KEY)]),
    (Result.now("Dirty"), ("requeue", 0.0), [("forget", KEY), ("add", KEY)]),
    (Result.later(30, "Poll"), ("requeue_after", 30.0),
     [("forget", KEY), ("add_after", KEY, 30.0)]),
    (Result.backoff("Throttled", at_least=5), ("requeue", 5.0),
     [("add_rate_limited", KEY, 5.0)]),
    (None, ("error", 1.0), [("add_rate_limited", KEY, 0.0)]),
])
def test_each_result_asks_the_queue_for_its_row_of_the_matrix(
        result: Result | None, outcome: tuple[str, float], calls: list[tuple[Any, ...]]) -> None:
    queue = Recording()
    assert apply_result(queue, KEY, result) == outcome
    assert queue.calls == calls


@pytest.mark.parametrize("result", [
    Result.done(), Result.now(), Result.later(30, "Poll"), Result.backoff("Throttled", 5),
    Result.backoff("Failed"), None,
])
def test_operator_and_harness_queues_hold_the_key_at_the_same_delay(
        result: Result | None) -> None:
    moment = [100.0]
    work = WorkQueue(rate_limiter=ItemExponentialBackoff(1.0, 60.0), clock=lambda: moment[0])
    virtual = VirtualQueue(Backoff(1.0, 60.0), VirtualClock())
    for _ in range(2):  # two failures before: a backoff's delay grows with them
        work.rate_limiter.when(KEY)
        virtual.limiter.when(KEY)
    _, delay = apply_result(work, KEY, result)
    virtual.settle(KEY, result, None if result is not None else "boom")
    queued = virtual.queued(KEY)
    if result is not None and result.kind.value in ("done", "requeue-now"):
        assert work.due(KEY) is None
        assert (queued is None) == (result.kind.value == "done")
        assert len(work) == (1 if result.kind.value == "requeue-now" else 0)
        return
    assert queued is not None and work.due(KEY) == pytest.approx(queued.delay) == delay
    if result is None or result.kind.value == "backoff":
        assert queued.reason == "Backoff" and queued.attempts == 3
        assert delay == max(4.0, result.after if result is not None else 0.0)
        assert queued.error == ("boom" if result is None else result.reason)
    else:
        assert queued.reason == "Poll" and queued.attempts == 0


def test_a_pass_that_does_not_back_off_resets_the_harness_backoff() -> None:
    virtual = VirtualQueue(Backoff(1.0, 60.0), VirtualClock())
    virtual.settle(KEY, None, "boom")
    virtual.settle(KEY, None, "boom")
    virtual.settle(KEY, Result.later(10, "Poll"), None)
    queued = virtual.queued(KEY)
    assert queued is not None and queued.attempts == 0 and queued.error is None
