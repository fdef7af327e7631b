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
from lifecycle.driver.queue import ItemExponentialBackoff, WorkQueue
from lifecycle.kube.errors import ServerError
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

    def _note(self, what: str, obj: dict[str, Any]) -> None:
        with self.lock:
            self.log.append((what, obj["metadata"]["name"]))

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
            assert eventually(lambda: api.stats["watch"] >= 1)  # a watch is open
            time.sleep(0.05)
            opened = api.stats["watch"]
            api.faults.drop_watches()
            assert eventually(lambda o=opened: api.stats["watch"] > o)  # and re-opened
    api.delete(AV, "Widget", "default", "w3")
    assert eventually(lambda: cache_matches(api, informer))
    assert informer.stats.watches >= 3 and informer.stats.lists == 1
    assert recorder.names("delete") == {"w3"}


def test_410_relists_and_delivers_what_was_missed(running: Any) -> None:
    api, informer, recorder = running(InformerOptions(resync=0, backoff_base=0.05,
                                                      backoff_cap=0.1),
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
