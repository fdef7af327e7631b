"""Leader election on a Lease: options, acquire, renew, expiry, release, races, outages.

Most tests drive :class:`LeaderElector` on virtual time: a :class:`VirtualTime`
is both its clock and its ``sleep``, and runs scheduled actions (faults,
crashes, stops) at given virtual moments, so :meth:`LeaderElector.run` runs in
the test's own thread, deterministically and in milliseconds.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from lifecycle.driver.cache import cached_manager
from lifecycle.driver.informer import InformerOptions
from lifecycle.driver.leader import LEASE_API, LeaderElector, LeaseOptions
from lifecycle.driver.manager import ManagerOptions
from lifecycle.kube.errors import Conflict, ServerError
from lifecycle.kube.resources import LEASE
from lifecycle.machines.database import DatabaseInstance
from lifecycle.providers.simcloud import DatabaseConnector, SimCloud
from lifecycle.sim.apiserver import EmbeddedAPI
from lifecycle.sim.embedded import InProcessCluster, register_kinds

NAME, NAMESPACE = "operator-lease", "default"


class VirtualTime:
    """A virtual monotonic clock whose ``sleep`` jumps ahead and runs due actions."""

    def __init__(self) -> None:
        self.now = 0.0
        self._due: list[tuple[float, int, Callable[[], None]]] = []
        self._order = itertools.count()

    def __call__(self) -> float:
        return self.now

    def at(self, moment: float, action: Callable[[], None]) -> None:
        """Run ``action`` once virtual time reaches ``moment``."""
        heapq.heappush(self._due, (moment, next(self._order), action))

    def advance(self, seconds: float) -> None:
        """Move time on by ``seconds``, running the actions that fall due."""
        target = self.now + seconds
        while self._due and self._due[0][0] <= target:
            moment, _, action = heapq.heappop(self._due)
            self.now = max(self.now, moment)
            action()
        self.now = target

    def sleep(self, event: threading.Event, seconds: float) -> bool:
        """The elector's wait: no real waiting; returns whether ``event`` is set."""
        if event.is_set():
            return True
        if self.now > 10_000:
            raise AssertionError("the election never ended (runaway virtual time)")
        self.advance(seconds)
        return event.is_set()


@pytest.fixture
def api() -> Iterator[EmbeddedAPI]:
    server = EmbeddedAPI()
    yield server
    server.close()


@pytest.fixture
def clock() -> VirtualTime:
    return VirtualTime()


def options(identity: str, **timing: float) -> LeaseOptions:
    return LeaseOptions(NAME, NAMESPACE, identity, **timing)


def elector(api: EmbeddedAPI, clock: VirtualTime, identity: str, *,
            cluster: Any = None, **kwargs: Any) -> LeaderElector:
    return LeaderElector(cluster or api, options(identity), clock=clock, sleep=clock.sleep,
                         **kwargs)


def lease(api: EmbeddedAPI) -> dict[str, Any]:
    return api.get(LEASE_API, "Lease", NAMESPACE, NAME)


def holder(api: EmbeddedAPI) -> str | None:
    return lease(api)["spec"].get("holderIdentity")


# ------------------------------------------------------------------ options
@pytest.mark.parametrize("timing", [
    {"lease_duration": 10.0, "renew_deadline": 10.0},      # duration must exceed deadline
    {"lease_duration": 5.0, "renew_deadline": 10.0},
    {"renew_deadline": 2.0, "retry_period": 2.0},           # deadline must exceed retry
    {"retry_period": 0.0},
    {"retry_period": -1.0, "renew_deadline": 0.5, "lease_duration": 1.0},
])
def test_inconsistent_timings_are_refused_with_a_clear_message(timing: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="lease_duration > renew_deadline > retry_period > 0"):
        options("a", **timing)


def test_identity_name_and_namespace_are_required() -> None:
    with pytest.raises(ValueError, match="identity"):
        LeaseOptions(NAME, NAMESPACE, "")
    with pytest.raises(ValueError, match="name and a namespace"):
        LeaseOptions("", NAMESPACE, "a")
    with pytest.raises(ValueError, match="name and a namespace"):
        LeaseOptions(NAME, "", "a")


def test_defaults_are_client_gos() -> None:
    opts = options("a")
    assert (opts.lease_duration, opts.renew_deadline, opts.retry_period) == (15.0, 10.0, 2.0)


# ------------------------------------------------------------ acquire / hold
def test_a_free_lease_is_created_and_held(api: EmbeddedAPI, clock: VirtualTime) -> None:
    a = elector(api, clock, "a")
    assert a.try_acquire_or_renew()
    spec = lease(api)["spec"]
    assert spec["holderIdentity"] == "a"
    assert spec["leaseDurationSeconds"] == 15
    assert spec["leaseTransitions"] == 0
    assert spec["acquireTime"] == spec["renewTime"]


def test_a_second_candidate_does_not_take_a_held_lease(api: EmbeddedAPI,
                                                       clock: VirtualTime) -> None:
    a, b = elector(api, clock, "a"), elector(api, clock, "b")
    assert a.try_acquire_or_renew()
    for _ in range(5):  # b keeps trying while a keeps renewing: never acquires
        clock.advance(2.0)
        assert a.try_acquire_or_renew()
        assert not b.try_acquire_or_renew()
    assert holder(api) == "a"
    assert b.transitions == 0


def test_renewal_moves_renew_time_and_keeps_acquire_time(api: EmbeddedAPI,
                                                         clock: VirtualTime) -> None:
    a = elector(api, clock, "a")
    assert a.try_acquire_or_renew()
    first = lease(api)
    # The Lease's timestamps are wall-clock microseconds: renew once the wall clock
    # has moved past the first stamp (not after a fixed pause).
    deadline = time.monotonic() + 5
    while (datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ") <= first["spec"]["renewTime"]
           and time.monotonic() < deadline):
        time.sleep(0.0005)
    clock.advance(2.0)
    assert a.try_acquire_or_renew()
    second = lease(api)
    assert int(second["metadata"]["resourceVersion"]) > int(first["metadata"]["resourceVersion"])
    assert second["spec"]["renewTime"] > first["spec"]["renewTime"]
    assert second["spec"]["acquireTime"] == first["spec"]["acquireTime"]
    assert second["spec"]["leaseTransitions"] == 0


def test_run_renews_until_stopped_then_releases(api: EmbeddedAPI, clock: VirtualTime) -> None:
    calls: list[str] = []
    a = elector(api, clock, "a", on_started=lambda: calls.append("started"),
                on_stopped=lambda: calls.append("stopped"))
    versions: list[str] = []
    for moment in range(3, 30, 3):
        clock.at(moment, lambda: versions.append(lease(api)["metadata"]["resourceVersion"]))
    clock.at(30.0, a.stop)
    a.run()
    assert calls == ["started", "stopped"]
    assert len(set(versions)) == len(versions), "every retry period renews the lease"
    assert not a.is_leader and not a.lost
    spec = lease(api)["spec"]
    assert not spec.get("holderIdentity")  # released on a graceful stop
    assert spec["leaseDurationSeconds"] == 1


def test_a_released_lease_is_taken_at_once(api: EmbeddedAPI, clock: VirtualTime) -> None:
    a, b = elector(api, clock, "a"), elector(api, clock, "b")
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()
    assert a.release()
    assert b.try_acquire_or_renew()  # no waiting out the lease duration
    assert holder(api) == "b"
    assert lease(api)["spec"]["leaseTransitions"] == 1
    assert not a.release(), "a no longer holds the lease: nothing to release"
    assert holder(api) == "b"


# --------------------------------------------------------------- expiry
def test_a_standby_takes_over_only_after_the_lease_duration(api: EmbeddedAPI,
                                                            clock: VirtualTime) -> None:
    a, b = elector(api, clock, "a"), elector(api, clock, "b")
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()      # b sees the record at t=0
    # a dies: it stops renewing. Until 15 s after b last saw a change, b waits.
    clock.advance(14.9)
    assert not b.try_acquire_or_renew()
    assert holder(api) == "a"
    clock.advance(0.1)
    assert b.try_acquire_or_renew()
    spec = lease(api)["spec"]
    assert spec["holderIdentity"] == "b"
    assert spec["leaseTransitions"] == 1
    assert b.transitions == 1
    # a comes back: it must not grab the lease from b.
    assert not a.try_acquire_or_renew()
    assert holder(api) == "b"


def test_expiry_is_judged_from_when_the_record_last_changed(api: EmbeddedAPI,
                                                            clock: VirtualTime) -> None:
    a, b = elector(api, clock, "a"), elector(api, clock, "b")
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()
    clock.advance(10.0)
    assert a.try_acquire_or_renew()          # a renews at t=10: the record changes
    assert not b.try_acquire_or_renew()      # b sees the change at t=10
    clock.advance(14.0)                      # t=24: 24 s since b first saw the lease
    assert not b.try_acquire_or_renew(), "expiry counts from the last change, not first sight"
    clock.advance(1.0)
    assert b.try_acquire_or_renew()


def test_a_crashed_leaders_standby_takes_over_in_run(api: EmbeddedAPI,
                                                     clock: VirtualTime) -> None:
    a = elector(api, clock, "a")
    events: list[tuple[str, float]] = []
    b = elector(api, clock, "b", on_started=lambda: events.append(("b leads", clock.now)))
    assert a.try_acquire_or_renew()          # a leads at t=0 and then dies silently
    clock.at(40.0, b.stop)
    b.run()
    assert events and events[0][0] == "b leads"
    # b polls every 2 s; it saw a's record at t=0, so it leads at the first poll >= 15 s.
    assert 15.0 <= events[0][1] <= 15.0 + 2.0
    assert not holder(api)  # b released it when stopped


# ----------------------------------------------------------------- races
class RaceBefore:
    """Wraps b's cluster so that ``rival`` runs its attempt just before b's write."""

    def __init__(self, api: EmbeddedAPI, rival: LeaderElector) -> None:
        self.api = api
        self.rival = rival
        self.conflicts = 0
        self.rival_won = False

    def get(self, *args: Any) -> dict[str, Any]:
        return self.api.get(*args)

    def _race(self) -> None:
        if not self.rival_won:
            self.rival_won = self.rival.try_acquire_or_renew()

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        self._race()
        return self.api.create(obj)

    def replace(self, obj: dict[str, Any]) -> dict[str, Any]:
        self._race()
        try:
            return self.api.replace(obj)
        except Conflict:
            self.conflicts += 1
            raise


def test_two_candidates_racing_to_create_the_lease_yield_one_leader(
        api: EmbeddedAPI, clock: VirtualTime) -> None:
    a = elector(api, clock, "a")
    race = RaceBefore(api, a)
    b = elector(api, clock, "b", cluster=race)
    assert not b.try_acquire_or_renew()      # b read NotFound, a created first
    assert race.rival_won
    assert holder(api) == "a"
    assert not b.try_acquire_or_renew()


def test_two_candidates_racing_for_an_expired_lease_yield_one_leader(
        api: EmbeddedAPI, clock: VirtualTime) -> None:
    old = elector(api, clock, "old")
    assert old.try_acquire_or_renew()
    a = elector(api, clock, "a")
    race = RaceBefore(api, a)
    b = elector(api, clock, "b", cluster=race)
    assert not a.try_acquire_or_renew() and not b.try_acquire_or_renew()
    clock.advance(15.0)                      # expired for both
    race.rival_won = False
    assert not b.try_acquire_or_renew()      # a wrote first; b's write is a 409
    assert race.rival_won and race.conflicts == 1
    assert holder(api) == "a"
    assert lease(api)["spec"]["leaseTransitions"] == 1, "exactly one takeover"
    assert b.transitions == 0 and a.transitions == 1


def test_an_injected_409_on_renewal_is_a_failed_attempt_not_an_error(
        api: EmbeddedAPI, clock: VirtualTime) -> None:
    a = elector(api, clock, "a")
    assert a.try_acquire_or_renew()
    api.faults.add("replace", "Lease", error=Conflict, times=1)
    assert not a.try_acquire_or_renew()
    assert a.try_acquire_or_renew()
    assert holder(api) == "a"


def test_many_threads_campaigning_at_once_never_have_two_leaders(api: EmbeddedAPI) -> None:
    lock = threading.Lock()
    leading: set[str] = set()
    overlaps: list[set[str]] = []
    started: list[str] = []

    def hooks(identity: str) -> dict[str, Callable[[], None]]:
        def on_started() -> None:
            with lock:
                if leading:
                    overlaps.append(set(leading) | {identity})
                leading.add(identity)
                started.append(identity)

        def on_stopped() -> None:
            with lock:
                leading.discard(identity)

        return {"on_started": on_started, "on_stopped": on_stopped}

    # Handovers go through release, so they never wait out the lease: a long lease costs
    # nothing and keeps a starved thread from losing it while it still believes it leads.
    timing = {"lease_duration": 10.0, "renew_deadline": 8.0, "retry_period": 0.02}
    asked = [threading.Event() for _ in range(6)]

    class Asking:
        """The API as one candidate sees it, noting that the candidate read the Lease."""

        def __init__(self, index: int) -> None:
            self.index = index

        def __getattr__(self, name: str) -> Any:
            return getattr(api, name)

        def get(self, *args: Any, **kwargs: Any) -> Any:
            asked[self.index].set()
            return api.get(*args, **kwargs)

    def wait_for(condition: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + 5
        while not condition():
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            time.sleep(0.01)

    def leader() -> str | None:
        with lock:
            return next(iter(leading), None)

    candidates = [LeaderElector(Asking(i), options(f"c{i}", **timing), **hooks(f"c{i}"))
                  for i in range(6)]
    threads = [threading.Thread(target=c.run, daemon=True) for c in candidates]
    for thread in threads:
        thread.start()
    try:
        # Every candidate is campaigning (has read the Lease) and one of them leads.
        wait_for(lambda: all(e.is_set() for e in asked) and leader() is not None,
                 "six candidates campaigning under one leader")
        # Hand the lease round: stop whoever leads, three times.
        for _ in range(3):
            current = leader()
            assert current is not None
            candidates[int(current[1:])].stop()
            wait_for(lambda c=current: leader() not in (None, c),
                     f"a new leader after {current} stopped")
    finally:
        for c in candidates:
            c.stop()
        for thread in threads:
            thread.join(5)
    assert overlaps == []
    # A stopped (or lost) candidate never campaigns again: every leader is a new identity,
    # and the three stops handed the lease on at least three times. More starts than four
    # can only come from a leader that lost the lease to scheduling delays.
    lost = [c.options.identity for c in candidates if c.lost]
    assert len(started) == len(set(started)), started
    assert 4 <= len(started) <= 4 + len(lost), (started, lost)
    assert sum(c.transitions for c in candidates) >= 3


# ----------------------------------------------------------------- outages
def test_a_leader_that_cannot_reach_the_api_steps_down_after_the_renew_deadline(
        api: EmbeddedAPI, clock: VirtualTime) -> None:
    calls: list[tuple[str, float]] = []
    a = elector(api, clock, "a", on_started=lambda: calls.append(("started", clock.now)),
                on_stopped=lambda: calls.append(("stopped", clock.now)))
    clock.at(5.0, lambda: api.faults.add("*", "Lease", error=ServerError))
    a.run()                                  # returns by itself: leadership lost
    assert a.lost and not a.is_leader
    assert [c[0] for c in calls] == ["started", "stopped"]
    # The last renewal succeeded at t=4; renew deadline 10 s; polls every 2 s.
    assert 14.0 <= calls[1][1] <= 14.0 + 2.0
    api.faults.clear()
    assert holder(api) == "a", "an unreachable API cannot be told of a release"


def test_a_standby_keeps_waiting_while_the_api_is_unreachable(api: EmbeddedAPI,
                                                              clock: VirtualTime) -> None:
    b = elector(api, clock, "b")
    api.faults.add("*", "Lease", error=ServerError)
    clock.at(60.0, b.stop)
    b.run()
    assert not b.is_leader and not b.lost and b.transitions == 0


def test_a_manager_that_loses_the_api_stops_its_workers_and_ends(api: EmbeddedAPI) -> None:
    register_kinds(api, [DatabaseInstance])
    lease_duration, renew_deadline, retry_period = 0.6, 0.4, 0.05
    opts = ManagerOptions(leader_election=True, identity="m", lease_duration=lease_duration,
                          renew_deadline=renew_deadline, retry_period=retry_period, workers=1,
                          informer=InformerOptions(resync=0))
    manager = cached_manager(InProcessCluster(api),  # type: ignore[arg-type]
                             [(DatabaseInstance, DatabaseConnector(SimCloud()))], opts,
                             secrets=True).start()
    # The lease is free, so the first attempt takes it; the loss comes one renew deadline
    # plus at most one retry period after the fault. Budgets are those figures with a wide
    # margin for a loaded machine; the measured times are reported when one is exceeded.
    margin = 4.0
    try:
        began = time.monotonic()
        assert manager.elector is not None and manager.elector.wait_leading(
            retry_period + margin), f"not leading after {time.monotonic() - began:.2f}s"
        controller = manager.controllers["DatabaseInstance"]
        assert not controller.queue.shutting_down
        api.faults.add("*", LEASE.kind, error=ServerError)
        faulted = time.monotonic()
        budget = renew_deadline + retry_period + margin
        ended = manager.wait(budget)
        took = time.monotonic() - faulted
        assert ended, f"losing the lease ends the manager: not ended after {took:.2f}s " \
                      f"(expected about {renew_deadline + retry_period:.2f}s)"
        assert took >= renew_deadline - retry_period, \
            f"stepped down after {took:.2f}s, before the {renew_deadline}s renew deadline"
        assert manager.lost_lease and not manager.healthy()
        assert controller.queue.shutting_down, "workers stopped taking work"
        assert controller._threads and all(not t.is_alive() for t in controller._threads)
    finally:
        api.faults.clear()
        manager.stop()
