"""The work queue's guarantees (lifecycle.driver.queue)."""

from __future__ import annotations

import threading
import time

import pytest

from lifecycle.driver.queue import WorkQueue
from lifecycle.kube.ratelimit import BucketRateLimiter, ItemExponentialBackoff, MaxOfRateLimiter


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_key_queued_twice_is_handed_out_once() -> None:
    queue = WorkQueue()
    queue.add("a")
    queue.add("a")
    queue.add("b")
    assert len(queue) == 2
    assert queue.get(timeout=0) == "a"
    assert queue.get(timeout=0) == "b"
    assert queue.get(timeout=0) is None


def test_a_key_added_while_processing_waits_for_done() -> None:
    queue = WorkQueue()
    queue.add("a")
    assert queue.get(timeout=0) == "a"
    queue.add("a")
    queue.add("a")
    assert queue.get(timeout=0) is None  # never handed to a second worker
    queue.done("a")
    assert queue.get(timeout=0) == "a"  # and exactly once more afterwards
    queue.done("a")
    assert queue.get(timeout=0) is None


def test_many_workers_never_process_one_key_concurrently() -> None:
    queue = WorkQueue()
    active: set[str] = set()
    overlaps: list[str] = []
    processed = []
    lock = threading.Lock()

    def worker() -> None:
        while (key := queue.get()) is not None:
            with lock:
                if key in active:
                    overlaps.append(key)
                active.add(key)
            time.sleep(0.0005)
            with lock:
                active.discard(key)
                processed.append(key)
            queue.done(key)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for i in range(2000):
        queue.add(f"k{i % 10}")
    deadline = time.monotonic() + 10
    while (len(queue) or queue.in_flight()) and time.monotonic() < deadline:
        time.sleep(0.01)
    queue.shut_down()
    for thread in threads:
        thread.join(5)
    assert overlaps == []
    assert set(processed) == {f"k{i}" for i in range(10)}
    assert len(processed) < 2000  # adds collapsed


def test_add_after_keeps_the_earliest_time_and_an_immediate_add_wins() -> None:
    clock = FakeClock()
    queue = WorkQueue(clock=clock)
    queue.add_after("a", 10)
    queue.add_after("a", 30)
    queue.add_after("a", 5)
    assert queue.due("a") == pytest.approx(5)
    assert queue.get(timeout=0) is None
    clock.now += 5
    assert queue.get(timeout=0) == "a"
    queue.done("a")
    queue.add_after("b", 10)
    queue.add("b")
    assert queue.get(timeout=0) == "b"
    queue.done("b")
    clock.now += 20
    assert queue.get(timeout=0) is None  # the superseded delayed add does not fire again


def test_a_retry_scheduled_before_an_immediate_rerun_does_not_fire_early() -> None:
    # A pass ends with a backoff while an event already re-queued the key: the
    # re-run supersedes that delayed retry, and the re-run's own (later)
    # retry is the one that counts.
    clock = FakeClock()
    queue = WorkQueue(clock=clock)
    queue.add("a")
    assert queue.get(timeout=0) == "a"
    queue.add("a")  # an event arrives during the pass
    queue.add_after("a", 1)  # the pass's result: retry in 1 s
    queue.done("a")
    assert queue.get(timeout=0) == "a"  # the event's re-run, at once
    queue.add_after("a", 5)  # its result: retry no sooner than 5 s
    queue.done("a")
    clock.now += 1
    assert queue.get(timeout=0) is None  # the stale 1 s retry must not fire
    clock.now += 4
    assert queue.get(timeout=0) == "a"


def test_get_wakes_up_when_a_delayed_key_falls_due() -> None:
    queue = WorkQueue()
    queue.add_after("a", 0.05)
    started = time.monotonic()
    assert queue.get(timeout=2) == "a"
    assert 0.04 <= time.monotonic() - started < 1.0


def test_rate_limited_retries_back_off_exponentially_and_reset_on_forget() -> None:
    limiter = ItemExponentialBackoff(base=1.0, cap=8.0)
    queue = WorkQueue(rate_limiter=limiter, clock=FakeClock())
    delays = [queue.add_rate_limited("a") for _ in range(6)]
    assert delays == [1.0, 2.0, 4.0, 8.0, 8.0, 8.0]
    assert queue.retries("a") == 6
    queue.forget("a")
    assert queue.retries("a") == 0
    assert queue.add_rate_limited("a") == 1.0
    assert queue.add_rate_limited("b", at_least=30.0) == 30.0  # a provider's retry-after


def test_the_bucket_bounds_the_overall_retry_rate() -> None:
    clock = FakeClock()
    bucket = BucketRateLimiter(qps=10, burst=3, clock=clock)
    assert [bucket.when(i) for i in range(3)] == [0.0, 0.0, 0.0]
    assert bucket.when(3) == pytest.approx(0.1)
    assert bucket.when(4) == pytest.approx(0.2)
    clock.now += 10
    assert bucket.when(5) == 0.0
    combined = MaxOfRateLimiter(ItemExponentialBackoff(0.001, 1), BucketRateLimiter(1, 1))
    assert combined.when("x") == pytest.approx(0.001)
    assert combined.when("y") >= 0.9  # the bucket dominates once empty


def test_invalid_limits_are_refused() -> None:
    with pytest.raises(ValueError):
        ItemExponentialBackoff(base=2, cap=1)
    with pytest.raises(ValueError):
        BucketRateLimiter(qps=0)


def test_shutdown_releases_getters_and_drain_waits_for_in_flight_keys() -> None:
    queue = WorkQueue()
    queue.add("a")
    assert queue.get() == "a"
    results: list[object] = []
    getter = threading.Thread(target=lambda: results.append(queue.get()))
    getter.start()
    queue.add("b")  # taken by the blocked getter
    getter.join(2)
    assert results == ["b"]
    queue.add("c")
    queue.shut_down()
    assert queue.get(timeout=0) is None  # no new work once shutting down
    assert queue.drain(timeout=0.05) is False  # a and b are in flight
    for key in ("a", "b"):
        queue.done(key)
    assert queue.drain(timeout=1) is True
    queue.add("d")
    queue.add_after("e", 0.01)
    assert len(queue) == 1 and queue.waiting() == 0  # only c; nothing accepted after shutdown
