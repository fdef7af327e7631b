"""The work queue's rate limiters and bookkeeping, on a clock the test moves.

Complements ``tests/test_driver_queue.py`` (concurrency guarantees) with the
exact figures: backoff doubling and its cap, the token bucket's waits and
refill, what the queue reports to its metrics, the earliest-wins rule of
delayed adds, and the timeouts of ``get`` and ``drain``.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from lifecycle.driver.queue import WorkQueue, default_rate_limiter
from lifecycle.kube.ratelimit import BucketRateLimiter, ItemExponentialBackoff, MaxOfRateLimiter


class Clock:
    """Monotonic seconds that move only when told."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Recorder:
    """Queue metrics, recorded as (call, name, value)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, float | None]] = []

    def queue_added(self, name: str) -> None:
        self.calls.append(("added", name, None))

    def queue_started(self, name: str, waited: float) -> None:
        self.calls.append(("started", name, waited))

    def queue_finished(self, name: str, worked: float) -> None:
        self.calls.append(("finished", name, worked))

    def queue_retried(self, name: str) -> None:
        self.calls.append(("retried", name, None))


# ---------------------------------------------------------------- backoff
def test_item_backoff_doubles_from_base_to_cap_and_forget_resets() -> None:
    b = ItemExponentialBackoff(0.5, 6.0)
    assert [b.when("k") for _ in range(6)] == [0.5, 1.0, 2.0, 4.0, 6.0, 6.0]
    assert b.retries("k") == 6 and b.retries("other") == 0
    assert b.when("other") == 0.5, "per key"
    b.forget("k")
    assert b.retries("k") == 0 and b.when("k") == 0.5
    b.forget("never-seen")  # harmless


def test_item_backoff_after_very_many_failures_is_the_cap() -> None:
    b = ItemExponentialBackoff(1e-30, 1e30)
    delays = [b.when("k") for _ in range(70)]
    assert delays[64] == pytest.approx(1e-30 * 2.0**64)
    assert delays[65] == 1e30 and delays[69] == 1e30


@pytest.mark.parametrize(("base", "cap"), [(0.0, 1.0), (-1.0, 1.0), (2.0, 1.0)])
def test_item_backoff_refuses_bad_bounds(base: float, cap: float) -> None:
    with pytest.raises(ValueError, match="0 < base <= cap"):
        ItemExponentialBackoff(base, cap)


def test_bucket_hands_out_the_burst_then_one_token_per_interval() -> None:
    clock = Clock()
    bucket = BucketRateLimiter(qps=2.0, burst=3, clock=clock)
    assert [bucket.when("k") for _ in range(3)] == [0.0, 0.0, 0.0]
    assert bucket.when("k") == pytest.approx(0.5)
    assert bucket.when("k") == pytest.approx(1.0)
    clock.now += 1.0                          # two tokens back: the debt is paid
    assert bucket.when("k") == pytest.approx(0.5)
    clock.now += 100.0                        # refills to the burst, no more
    assert [bucket.when("k") for _ in range(3)] == [0.0, 0.0, 0.0]
    assert bucket.when("k") == pytest.approx(0.5)
    assert bucket.retries("k") == 0
    bucket.forget("k")


def test_bucket_exact_last_token_is_free() -> None:
    bucket = BucketRateLimiter(qps=1.0, burst=1, clock=Clock())
    assert bucket.when("k") == 0.0, "the last token leaves exactly zero: no wait"


@pytest.mark.parametrize(("qps", "burst"), [(0.0, 1), (-1.0, 1), (1.0, 0)])
def test_bucket_refuses_bad_settings(qps: float, burst: int) -> None:
    with pytest.raises(ValueError, match="qps > 0 and burst >= 1"):
        BucketRateLimiter(qps, burst)


def test_max_of_limiters_takes_the_longest_delay_and_forgets_everywhere() -> None:
    clock = Clock()
    item = ItemExponentialBackoff(1.0, 8.0)
    bucket = BucketRateLimiter(qps=1.0, burst=1, clock=clock)
    both = MaxOfRateLimiter(item, bucket)
    assert both.when("a") == 1.0            # item 1.0, bucket 0.0
    assert both.when("a") == 2.0            # item 2.0, bucket 1.0
    assert both.when("b") == 2.0            # item 1.0 for b, bucket 2.0
    assert (both.retries("a"), both.retries("b")) == (2, 1)
    both.forget("a")
    assert both.retries("a") == 0 and both.retries("b") == 1


def test_default_rate_limiter_uses_its_arguments() -> None:
    limiter = default_rate_limiter(base=0.25, cap=0.5, qps=1000.0, burst=2)
    assert isinstance(limiter, MaxOfRateLimiter)
    item, bucket = limiter.limiters
    assert isinstance(item, ItemExponentialBackoff) and (item.base, item.cap) == (0.25, 0.5)
    assert isinstance(bucket, BucketRateLimiter) and (bucket.qps, bucket.burst) == (1000.0, 2)
    defaults = default_rate_limiter()
    d_item, d_bucket = defaults.limiters
    assert (d_item.base, d_item.cap, d_bucket.qps, d_bucket.burst) == (1.0, 60.0, 10.0, 100)


# ------------------------------------------------------------------ queue
def queue(clock: Clock | None = None, **kwargs: Any) -> tuple[WorkQueue, Recorder]:
    metrics = Recorder()
    return WorkQueue("widgets", metrics=metrics, clock=clock or Clock(), **kwargs), metrics


def test_metrics_name_the_queue_and_measure_wait_and_work() -> None:
    clock = Clock()
    q, metrics = queue(clock)
    q.add("k")
    clock.now += 3.0
    assert q.get(timeout=0) == "k"
    clock.now += 2.0
    q.done("k")
    assert metrics.calls == [("added", "widgets", None), ("started", "widgets", 3.0),
                             ("finished", "widgets", 2.0)]
    q.done("k")  # done twice: nothing more to report
    assert len(metrics.calls) == 3


def test_a_key_added_twice_waits_from_its_first_add() -> None:
    clock = Clock()
    q, metrics = queue(clock)
    q.add("k")
    clock.now += 1.0
    q.add("k")
    clock.now += 1.0
    assert q.get(timeout=0) == "k" and len(q) == 0
    assert metrics.calls[-1] == ("started", "widgets", 2.0)
    assert [c[0] for c in metrics.calls].count("added") == 2


def test_an_immediate_add_supersedes_a_delayed_one() -> None:
    clock = Clock()
    q, _ = queue(clock)
    q.add_after("k", 10.0)
    assert q.waiting() == 1 and q.due("k") == 10.0
    q.add("k")
    assert q.waiting() == 0 and q.due("k") is None
    assert q.get(timeout=0) == "k"
    q.done("k")
    clock.now += 11.0
    assert q.get(timeout=0) is None, "the superseded delayed add never fires"


def test_add_after_keeps_the_earliest_time_and_a_zero_delay_is_now() -> None:
    clock = Clock()
    q, _ = queue(clock)
    q.add_after("k", 5.0)
    q.add_after("k", 9.0)
    assert q.due("k") == 5.0
    q.add_after("k", 5.0)                      # the same time: still one entry
    assert q.waiting() == 1
    q.add_after("k", 2.0)
    assert q.due("k") == 2.0
    q.add_after("now", 0.0)
    assert len(q) == 1 and q.due("now") is None
    clock.now += 2.0
    assert q.get(timeout=0) == "now"
    assert q.get(timeout=0) == "k"


def test_add_rate_limited_reports_a_retry_and_respects_at_least() -> None:
    clock = Clock()
    limiter = ItemExponentialBackoff(1.0, 60.0)
    q, metrics = queue(clock, rate_limiter=limiter)
    assert q.add_rate_limited("k") == 1.0
    assert q.due("k") == 1.0
    assert q.add_rate_limited("j", at_least=7.0) == 7.0
    assert q.due("j") == 7.0
    assert [c for c in metrics.calls if c[0] == "retried"] == [("retried", "widgets", None)] * 2
    assert q.retries("k") == 1
    q.forget("k")
    assert q.retries("k") == 0


def test_get_times_out_and_returns_none() -> None:
    q = WorkQueue("real")
    started = time.monotonic()
    assert q.get(timeout=0.05) is None
    assert time.monotonic() - started >= 0.04


def test_get_without_a_timeout_waits_for_a_delayed_key() -> None:
    q = WorkQueue("real")
    q.add_after("k", 0.05)
    assert q.get() == "k"


def test_drain_waits_for_keys_in_flight_and_times_out() -> None:
    q = WorkQueue("real")
    assert q.drain(timeout=0) is True, "nothing in flight"
    q.add("k")
    assert q.get(timeout=0) == "k"
    started = time.monotonic()
    assert q.drain(timeout=0.05) is False
    assert time.monotonic() - started >= 0.04
    threading.Timer(0.05, q.done, args=("k",)).start()
    assert q.drain() is True
    assert q.in_flight() == {}


def test_in_flight_reports_how_long_each_key_has_run() -> None:
    clock = Clock()
    q, _ = queue(clock)
    q.add("k")
    q.get(timeout=0)
    clock.now += 4.0
    assert q.in_flight() == {"k": 4.0}


def test_constructor_defaults_and_exact_messages() -> None:
    b = ItemExponentialBackoff()
    assert (b.base, b.cap) == (1.0, 60.0)
    assert ItemExponentialBackoff(2.0, 2.0).when("k") == 2.0, "base == cap is allowed"
    bucket = BucketRateLimiter()
    assert (bucket.qps, bucket.burst) == (10.0, 100)
    with pytest.raises(ValueError, match=r"^backoff needs 0 < base <= cap$"):
        ItemExponentialBackoff(0.0)
    with pytest.raises(ValueError, match=r"^bucket needs qps > 0 and burst >= 1$"):
        BucketRateLimiter(0.0)
    q = WorkQueue()
    assert q.name == "queue" and q.shutting_down is False


def test_a_part_token_left_after_the_draw_means_no_wait() -> None:
    clock = Clock()
    bucket = BucketRateLimiter(qps=2.0, burst=2, clock=clock)
    assert [bucket.when("k"), bucket.when("k")] == [0.0, 0.0]
    clock.now += 0.75                          # 1.5 tokens back; one drawn leaves 0.5
    assert bucket.when("k") == 0.0


def test_a_rate_limited_add_without_a_floor_takes_the_limiters_delay() -> None:
    q, _ = queue(rate_limiter=ItemExponentialBackoff(0.25, 1.0))
    assert q.add_rate_limited("k") == 0.25


def test_drain_with_no_time_left_returns_at_once() -> None:
    q, _ = queue()                             # the clock never moves
    q.add("k")
    assert q.get(timeout=0) == "k"
    assert q.drain(timeout=0) is False
