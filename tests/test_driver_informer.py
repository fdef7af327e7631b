"""Informers through the official client, event filters and the controller's requeue matrix."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from lifecycle.core.errors import UnhandledError
from lifecycle.core.kind import OPERATION, PAUSED
from lifecycle.core.values import Result
from lifecycle.driver.cluster import KubeCluster, api_client
from lifecycle.driver.informer import Informer, InformerOptions
from lifecycle.driver.manager import Controller, shard_of, update_triggers
from lifecycle.driver.queue import WorkQueue
from lifecycle.kube.errors import ResourceVersionTooLarge, ServerError
from lifecycle.kube.ratelimit import ItemExponentialBackoff
from lifecycle.kube.resources import ResourceType
from lifecycle.sim.apiserver import EmbeddedAPI
from lifecycle.sim.http import APIServerHTTP

WIDGET = ResourceType("example.test", "v1", "Widget", "widgets", namespaced=True)
AV = WIDGET.api_version


class Recorder:
    """A handler that records what the informer told it."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.log: list[tuple[str, str]] = []
        self.objects: list[tuple[str, dict[str, Any]]] = []

    def _note(self, what: str, obj: dict[str, Any]) -> None:
        with self.lock:
            self.log.append((what, obj["metadata"]["name"]))
            self.objects.append((what, obj))

    def on_add(self, obj: dict[str, Any]) -> None:
        self._note("add", obj)

    def on_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        self._note("update", new)

    def on_delete(self, obj: dict[str, Any]) -> None:
        self._note("delete", obj)

    def on_resync(self, obj: dict[str, Any]) -> None:
        self._note("resync", obj)

    def names(self, what: str) -> set[str]:
        with self.lock:
            return {name for kind, name in self.log if kind == what}


def serve(**api_options: Any) -> tuple[EmbeddedAPI, APIServerHTTP]:
    api = EmbeddedAPI(**api_options)
    api.register(WIDGET)
    return api, APIServerHTTP(api).start()


def widget(name: str) -> dict[str, Any]:
    return {"apiVersion": AV, "kind": "Widget",
            "metadata": {"name": name, "namespace": "default"}, "spec": {"n": 1}}


def eventually(check: Callable[[], bool], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return check()


@pytest.fixture
def running() -> Iterator[Callable[..., tuple[EmbeddedAPI, Informer, Recorder]]]:
    started: list[tuple[Informer, APIServerHTTP, EmbeddedAPI]] = []

    def start(options: InformerOptions, **api_options: Any
              ) -> tuple[EmbeddedAPI, Informer, Recorder]:
        api, face = serve(**api_options)
        source = KubeCluster(api_client(host=face.url)).list_watcher(AV, "Widget")
        recorder = Recorder()
        informer = Informer("widget", source, recorder, options).start()
        started.append((informer, face, api))
        assert informer.wait_synced(10)
        return api, informer, recorder

    start.started = started  # type: ignore[attr-defined]
    yield start
    for informer, face, api in started:
        informer.stop()
        face.stop()
        api.close()


def cache_matches(api: EmbeddedAPI, informer: Informer) -> bool:
    items, _ = api.list(AV, "Widget")
    return {o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in items} == {
        o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in informer.items()}


def test_dropped_watches_resume_without_losing_events(running: Any) -> None:
    api, informer, recorder = running(InformerOptions(resync=0, backoff_base=0.01),
                                      bookmark_interval=0.2)
    for i in range(40):
        api.create(widget(f"w{i}"))
        if i % 7 == 0:
            # The watch delivered the widget just made, so it is open (lists == 1 below).
            assert eventually(lambda n=f"w{i}": any(
                o["metadata"]["name"] == n for o in informer.items()))
            opened = api.stats["watch"]
            api.faults.drop_watches()
            assert eventually(lambda o=opened: api.stats["watch"] > o)  # and re-opened
    api.delete(AV, "Widget", "default", "w3")
    assert eventually(lambda: cache_matches(api, informer))
    assert informer.stats.watches >= 3 and informer.stats.lists == 1
    assert recorder.names("delete") == {"w3"}


def test_410_relists_and_delivers_what_was_missed(running: Any) -> None:
    api, informer, recorder = running(InformerOptions(resync=0, backoff_base=0.05,
                                                      backoff_cap=0.1, relist_after_errors=0),
                                      bookmark_interval=0.2, watch_window=20)
    api.create(widget("old"))
    assert eventually(lambda: "old" in recorder.names("add"))
    fault = api.faults.add("watch", error=ServerError)  # the informer cannot watch for now
    api.faults.drop_watches()
    for i in range(30):  # more changes than the server retains
        api.create(widget(f"n{i}"))
    api.delete(AV, "Widget", "default", "old")
    api.faults.remove(fault)
    assert eventually(lambda: cache_matches(api, informer))
    assert informer.stats.relists_after_gone >= 1
    assert "old" in recorder.names("delete")
    assert {f"n{i}" for i in range(30)} <= recorder.names("add")


def last(recorder: Recorder, what: str, name: str) -> dict[str, Any] | None:
    with recorder.lock:
        found = [obj for kind, obj in recorder.objects
                 if kind == what and obj["metadata"]["name"] == name]
    return found[-1] if found else None


def test_a_410_relist_delivers_changes_and_deletions_made_during_the_gap(
        running: Any) -> None:
    api, informer, recorder = running(InformerOptions(resync=0, backoff_base=0.05,
                                                      backoff_cap=0.1, relist_after_errors=0),
                                      bookmark_interval=0.2, watch_window=10)
    for name in ("kept", "changed", "gone"):
        api.create(widget(name))
    assert eventually(lambda: recorder.names("add") == {"kept", "changed", "gone"})
    fault = api.faults.add("watch", error=ServerError)
    api.faults.drop_watches()
    api.patch(AV, "Widget", "default", "changed", {"spec": {"n": 2}})
    api.delete(AV, "Widget", "default", "gone")
    for i in range(12):  # push both changes out of the server's history
        api.create(widget(f"filler{i}"))
    api.faults.remove(fault)
    assert eventually(lambda: cache_matches(api, informer))
    assert informer.stats.relists_after_gone >= 1
    updated = last(recorder, "update", "changed")
    assert updated is not None and updated["spec"] == {"n": 2}
    assert updated["metadata"]["resourceVersion"] == api.get(
        AV, "Widget", "default", "changed")["metadata"]["resourceVersion"]
    deleted = last(recorder, "delete", "gone")
    assert deleted is not None and deleted["metadata"]["name"] == "gone"
    assert "kept" not in recorder.names("update") | recorder.names("delete")


def test_a_server_restarted_with_a_lower_counter_is_relisted(running: Any) -> None:
    """Watching from a version the new server never issued: 504 ResourceVersionTooLarge."""
    api, informer, recorder = running(InformerOptions(resync=0, backoff_base=0.05,
                                                      backoff_cap=0.2, relist_after_errors=0),
                                      bookmark_interval=0.2)
    for name in ("kept", "changed"):
        api.create(widget(name))
    saved = api.snapshot()  # the state a restarted server comes back with
    api.patch(AV, "Widget", "default", "changed", {"spec": {"n": 5}})
    for i in range(20):
        api.create(widget(f"lost{i}"))
    assert eventually(lambda: informer.resource_version == api.resource_version)
    seen = informer.resource_version

    face = next(f for i, f, a in running.started if a is api)
    port = face.port
    face.stop()
    api.close()  # the old process is gone, and its watch connections with it
    restarted = EmbeddedAPI()
    restarted.register(WIDGET)
    restarted.restore(saved["objects"], saved["resourceVersion"])
    assert int(restarted.resource_version) < int(seen)
    running.started.append((informer, APIServerHTTP(restarted, port=port).start(), restarted))

    assert eventually(lambda: cache_matches(restarted, informer))
    assert informer.stats.relists_after_unknown_version >= 1
    assert {f"lost{i}" for i in range(20)} <= recorder.names("delete")
    reverted = last(recorder, "update", "changed")
    assert reverted is not None and reverted["spec"] == {"n": 1}
    restarted.create(widget("new"))  # and the informer follows the new server
    assert eventually(lambda: informer.get(("default", "new")) is not None)


class ScriptedSource:
    """A list-watch source answering from scripts: lists in turn, one watch per call."""

    def __init__(self, lists: list[list[dict[str, Any]]],
                 watches: list[Callable[[], Iterator[tuple[str, dict[str, Any]]]]]) -> None:
        self.lists = lists
        self.watches = watches
        self.listed = 0
        self.watched = 0

    def list(self) -> tuple[list[dict[str, Any]], str]:
        items = self.lists[min(self.listed, len(self.lists) - 1)]
        self.listed += 1
        return items, str(100 * self.listed)

    def watch(self, resource_version: str, *, timeout: float,
              inactivity: float) -> Iterator[tuple[str, dict[str, Any]]]:
        script = self.watches[min(self.watched, len(self.watches) - 1)]
        self.watched += 1
        return script()

    def stop(self) -> None:
        pass


def stamped(name: str, rv: str, uid: str = "u") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default", "resourceVersion": rv,
                         "uid": f"{uid}-{name}"}}


def quiet() -> Iterator[tuple[str, dict[str, Any]]]:
    time.sleep(0.05)
    yield "BOOKMARK", {"metadata": {"resourceVersion": "1"}}


@pytest.mark.parametrize("answer", ["error response", "ERROR event"])
def test_resource_version_too_large_relists(answer: str) -> None:
    too_large = ResourceVersionTooLarge("Too large resource version: 100, current: 7")

    def refused() -> Iterator[tuple[str, dict[str, Any]]]:
        if answer == "error response":
            raise too_large
        yield "ERROR", too_large.to_status()

    source = ScriptedSource(
        lists=[[stamped("a", "5"), stamped("b", "6"), stamped("c", "7")],
               [stamped("a", "5"), stamped("b", "9"), stamped("c", "3", uid="other")]],
        watches=[refused, quiet])
    recorder = Recorder()
    informer = Informer("x", source, recorder,
                        InformerOptions(resync=0, relist_after_errors=0)).start()
    try:
        assert eventually(lambda: source.listed >= 2 and source.watched >= 2)
        assert informer.stats.relists_after_unknown_version == 1
        assert informer.stats.errors == 0  # a relist, not a failure to back off from
        assert recorder.names("update") == {"b"}
        assert recorder.names("delete") == {"c"} and ("add", "c") in recorder.log[3:]
        assert "a" not in recorder.names("update") | recorder.names("delete")
    finally:
        informer.stop()


def test_watches_that_deliver_nothing_but_errors_relist() -> None:
    def failing() -> Iterator[tuple[str, dict[str, Any]]]:
        yield "ERROR", ServerError("etcdserver: request timed out").to_status()

    source = ScriptedSource(lists=[[stamped("a", "5")], [stamped("a", "8")]],
                            watches=[failing, failing, failing, quiet])
    recorder = Recorder()
    informer = Informer("x", source, recorder,
                        InformerOptions(resync=0, backoff_base=0.01, relist_after_errors=3)
                        ).start()
    try:
        assert eventually(lambda: source.listed >= 2 and source.watched >= 4)
        assert informer.stats.relists_after_errors == 1
        assert informer.stats.errors == 3
        assert source.listed == 2  # the quiet watch afterwards needs no further list
        assert recorder.names("update") == {"a"}
    finally:
        informer.stop()


def test_a_silent_watch_is_abandoned_after_the_inactivity_timeout(running: Any) -> None:
    api, informer, _ = running(InformerOptions(resync=0, inactivity_timeout=0.5,
                                               backoff_base=0.01), bookmark_interval=1000)
    assert eventually(lambda: informer.stats.watches >= 3, timeout=6)
    assert informer.stats.errors >= 2  # read timeouts, each followed by a reconnect
    api.create(widget("late"))
    assert eventually(lambda: informer.get(("default", "late")) is not None)


def test_resync_offers_every_cached_object_again(running: Any) -> None:
    api, _, recorder = running(InformerOptions(resync=0.2), bookmark_interval=0.2)
    api.create(widget("a"))
    api.create(widget("b"))
    assert eventually(lambda: recorder.names("resync") == {"a", "b"})


# ---------------------------------------------------------------------- filters
def obj(generation: int = 1, annotations: dict[str, str] | None = None,
        deleting: str | None = None, status: Any = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "x", "generation": generation,
                            "annotations": dict(annotations or {})}
    if deleting:
        meta["deletionTimestamp"] = deleting
    return {"metadata": meta, "status": status}


@pytest.mark.parametrize(("old", "new", "expected"), [
    (obj(1), obj(2), True),                                           # spec changed
    (obj(1, status={"a": 1}), obj(1, status={"a": 2}), False),        # status only
    (obj(1), obj(1, {"lifecycle.dev/intent": "{}"}), False),          # engine's own journal
    (obj(1), obj(1, deleting="2024-01-01T00:00:00Z"), True),          # deletion requested
    (obj(1), obj(1, {OPERATION: "reconcile"}), True),                 # gained reconcile
    (obj(1, {OPERATION: "reconcile"}), obj(1), False),                # reconcile removed
    (obj(1, {OPERATION: "ignore"}), obj(1), True),                    # lost ignore
    (obj(1), obj(2, {OPERATION: "ignore"}), False),                   # never while ignored
    (obj(1, {OPERATION: "ignore"}), obj(1, deleting="t", annotations={OPERATION: "ignore"}),
     False),
    (obj(1), obj(1, {PAUSED: "true"}), True),                         # pause toggled
])
def test_event_filters(old: dict[str, Any], new: dict[str, Any], expected: bool) -> None:
    assert update_triggers(old, new) is expected


def test_sharding_splits_keys_stably() -> None:
    keys = [("default", f"k{i}") for i in range(300)]
    shards = [shard_of(k, 3) for k in keys]
    assert set(shards) == {0, 1, 2}
    assert shards == [shard_of(k, 3) for k in keys]
    assert min(shards.count(s) for s in range(3)) > 60


# ----------------------------------------------------------- requeue matrix
class NullSource:
    def list(self) -> tuple[list[dict[str, Any]], str]:
        return [], "1"

    def watch(self, resource_version: str, *, timeout: float,
              inactivity: float) -> Iterator[tuple[str, dict[str, Any]]]:
        return iter(())

    def stop(self) -> None:
        pass


class Scripted:
    def __init__(self, outcome: Result | Exception) -> None:
        self.outcome = outcome

    def reconcile(self, namespace: str | None, name: str) -> Result:
        if isinstance(self.outcome, Exception):
            raise self.outcome
        return self.outcome


@pytest.mark.parametrize(("outcome", "due", "retries", "immediately"), [
    (Result.done(), None, 0, False),
    (Result.now("dirty"), None, 0, True),
    (Result.later(30, "Poll"), 30.0, 0, False),
    (Result.backoff("Failed"), 2.0, 2, False),
    (Result.backoff("Throttled", at_least=20), 20.0, 2, False),
    (UnhandledError("api down"), 2.0, 2, False),
    (RuntimeError("bug"), 2.0, 2, False),
])
def test_results_map_to_queue_operations(outcome: Any, due: float | None, retries: int,
                                         immediately: bool) -> None:
    queue = WorkQueue("t", rate_limiter=ItemExponentialBackoff(1.0, 60.0), clock=lambda: 0.0)
    controller = Controller("t", Scripted(outcome), NullSource(), queue=queue)
    key = ("default", "x")
    queue.rate_limiter.when(key)  # one earlier failure: a success resets it, a failure doubles
    controller.process(key)
    assert queue.due(key) == (None if due is None else pytest.approx(due))
    assert queue.retries(key) == retries
    assert (len(queue) == 1) is immediately
