"""An idle Ready object costs reads only: 300 s of virtual polls, 0 writes.

The harness runs the bundled kind on its virtual clock, so five minutes of
polling take milliseconds; writes are counted on the embedded API itself
(every verb that changes something, for every kind, Events included). The
check is shown to catch an engine that rewrites an unchanged status.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from helpers import KIND, make, ready

from lifecycle.core import conditions
from lifecycle.testing import Environment

NAMES = ("a", "b", "c")
IDLE = 300.0


def settled() -> tuple[Environment, object]:
    env, cloud = make()
    for name in NAMES:
        ready(env, name)
    return env, cloud


def idle_writes(env: Environment) -> tuple[int, int, list[object]]:
    """(writes of any kind, Events recorded, polls run) over :data:`IDLE` virtual seconds."""
    writes = env.api.writes()
    events = len(env.events())
    start = env.clock.now()
    polls = env.advance(IDLE)
    assert env.clock.now() - start >= timedelta(seconds=IDLE)
    return env.api.writes() - writes, len(env.events()) - events, polls


def test_idle_ready_objects_make_no_writes_for_300_seconds_of_polls() -> None:
    env, _ = settled()
    versions = {n: env.get(KIND, n)["metadata"]["resourceVersion"] for n in NAMES}
    reads_before = env.api.stats["get"]
    writes, events, polls = idle_writes(env)
    # Each object is polled about every 30 s (with jitter): at least 9 polls each.
    per_object = {n: sum(1 for p in polls if p.name == n) for n in NAMES}
    assert all(count >= 9 for count in per_object.values()), per_object
    assert all(p.after == "ready" and p.error is None for p in polls)
    assert env.api.stats["get"] > reads_before, "the polls did read"
    assert (writes, events) == (0, 0)
    assert {n: env.get(KIND, n)["metadata"]["resourceVersion"] for n in NAMES} == versions


def test_an_idle_object_stays_queued_only_for_its_next_poll() -> None:
    env, _ = settled()
    idle_writes(env)
    for name in NAMES:
        queued = env.queued(KIND, name)
        assert queued is not None and queued.reason == "Poll" and queued.attempts == 0


def test_the_check_catches_an_engine_that_rewrites_an_unchanged_status(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A merge that stamps every condition with the current time (a common slip) makes
    each poll change the status, so each poll writes it: the count above must see that."""
    env, _ = settled()
    real_merge = conditions.merge

    def restamping(existing, updates, when):  # type: ignore[no-untyped-def]
        return [dict(c, lastTransitionTime=when) for c in real_merge(existing, updates, when)]

    monkeypatch.setattr(conditions, "merge", restamping)
    writes, _, polls = idle_writes(env)
    assert polls
    assert writes >= len(polls), "every poll of the broken engine writes the status"
