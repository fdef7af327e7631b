"""The manager's rules: controllers it builds, keys it queues, results it applies, its lifecycle.

Sources are in-process stand-ins (a list returns fixed objects; a watch blocks
until stopped), so informers start, sync and stop in milliseconds, and a
controller's reconcile is called directly where only its decision matters.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import attrs
import pytest

from lifecycle.core.decide import ReconcilePolicy
from lifecycle.core.errors import UnhandledError
from lifecycle.core.kind import OPERATION, PROVIDER_CONFIG_API, PROVIDER_CONFIG_KIND
from lifecycle.core.parents import OwnedChild, ParentKind, Version
from lifecycle.core.values import Result
from lifecycle.driver.cluster import KubeCluster, api_client
from lifecycle.driver.filters import redacted_traceback, shard_of
from lifecycle.driver.informer import InformerOptions
from lifecycle.driver.kinds import Watch
from lifecycle.driver.leader import LeaseOptions
from lifecycle.driver.manager import (
    USAGE_DELAY,
    USAGE_REFRESH,
    Controller,
    Manager,
    ManagerOptions,
    _fields,
    _live,
    default_identity,
)
from lifecycle.driver.metrics import OperatorMetrics
from lifecycle.driver.queue import WorkQueue
from lifecycle.kube.ratelimit import BucketRateLimiter, ItemExponentialBackoff, MaxOfRateLimiter
from lifecycle.machines.claim import DATABASE_BINDING
from lifecycle.machines.database import DatabaseInstance
from lifecycle.providers.simcloud import DatabaseConnector, SimCloud
from lifecycle.runtime.children import ParentReconciler
from lifecycle.runtime.claims import ClaimReconciler
from lifecycle.runtime.providerconfigs import ProviderConfigReconciler
from lifecycle.runtime.reconciler import Reconciler
from lifecycle.sim.apiserver import EmbeddedAPI
from lifecycle.sim.embedded import InProcessCluster

Key = tuple[str | None, str]
DB_API = DatabaseInstance.api_version
OTHER_API = "configs.example.org/v1"
OTHER = attrs.evolve(DatabaseInstance, kind="Cache", plural="caches",
                     provider_config_api=OTHER_API)
APP = ParentKind(
    group="apps.example.org", kind="App", plural="apps", versions=(Version("v1"),),
    children=(OwnedChild("db", lambda parent: {}, api_version=DB_API, kind="DatabaseInstance"),
              OwnedChild("settings", lambda parent: {}, api_version="v1", kind="ConfigMap")))
QUIET = InformerOptions(resync=0)


# --------------------------------------------------------------------------- stand-ins


class Source:
    """A list of fixed objects, then a watch that blocks until stopped."""

    def __init__(self, items: list[dict[str, Any]] | None = None, *, fail: bool = False,
                 ) -> None:
        self.items = items or []
        self.fail = fail
        self.stopped = threading.Event()

    def list(self) -> tuple[list[dict[str, Any]], str]:
        if self.fail:
            raise ConnectionError("down")
        return list(self.items), "1"

    def watch(self, resource_version: str, *, timeout: float,
              inactivity: float) -> Iterator[tuple[str, dict[str, Any]]]:
        self.stopped.wait()
        yield from ()

    def stop(self) -> None:
        self.stopped.set()


class FakeCluster:
    """Records every list-and-watch source a manager asks for."""

    def __init__(self, *, fail: frozenset[str] = frozenset(), cluster: Any = None) -> None:
        self.calls: list[tuple[str, str, str | None, str | None]] = []
        self.sources: dict[str, list[Source]] = {}
        self.fail = fail
        self.cluster = cluster

    def list_watcher(self, api_version: str, kind: str, namespace: str | None = None,
                     label_selector: str | None = None) -> Source:
        self.calls.append((api_version, kind, namespace, label_selector))
        source = Source(fail=kind in self.fail)
        self.sources.setdefault(kind, []).append(source)
        return source


class Scripted:
    """A reconciler returning (or raising) the given outcomes in turn, recording its calls."""

    def __init__(self, *outcomes: Result | BaseException) -> None:
        self.outcomes = list(outcomes)
        self.calls: list[Key] = []

    def reconcile(self, namespace: str | None, name: str) -> Result:
        self.calls.append((namespace, name))
        outcome = self.outcomes.pop(0) if len(self.outcomes) > 1 else self.outcomes[0]
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome


class FakeElector:
    """An elector whose run and outcome the test decides."""

    def __init__(self, lost: bool = False) -> None:
        self.lost = lost
        self.calls: list[str] = []
        self.options = attrs.evolve(LeaseOptions("fake", "ns", "me"))
        self.released = threading.Event()

    def run(self) -> None:
        self.calls.append("run")
        self.released.wait(5)

    def stop(self) -> None:
        self.calls.append("stop")
        self.released.set()

    def crash(self) -> None:
        self.calls.append("crash")
        self.released.set()


def connector() -> DatabaseConnector:
    return DatabaseConnector(SimCloud())


def sample(metrics: OperatorMetrics, metric: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(metric, labels)


def drain(queue: WorkQueue) -> list[Any]:
    """Every key ready now, in order."""
    out = []
    while (key := queue.get(timeout=0)) is not None:
        out.append(key)
        queue.done(key)
    return out


def obj(name: str, namespace: str | None = "default", **meta: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace, **meta}}


def controller(reconciler: Any = None, **kwargs: Any) -> Controller:
    queue = kwargs.pop("queue", None) or WorkQueue(
        "t", rate_limiter=ItemExponentialBackoff(1.0, 60.0), clock=lambda: 0.0)
    return Controller("t", reconciler or Scripted(Result.done()), Source(), queue=queue,
                      **kwargs)


# --------------------------------------------------------------------------- options


def test_manager_options_defaults_and_shard_refusals() -> None:
    opts = ManagerOptions()
    assert (opts.workers, opts.namespace, opts.label_selector) == (2, None, None)
    assert opts.informer == InformerOptions()
    assert (opts.backoff_base, opts.backoff_cap, opts.qps, opts.burst) == (1.0, 60.0, 10.0, 100)
    assert (opts.leader_election, opts.lease_name, opts.lease_namespace) == (
        False, "lifecycle-operator", "default")
    assert (opts.lease_duration, opts.renew_deadline, opts.retry_period) == (15.0, 10.0, 2.0)
    assert opts.identity == default_identity()
    assert (opts.shard_index, opts.shard_count, opts.operator_id) == (0, 1, None)
    assert opts.default_policy is ReconcilePolicy.MANAGE
    assert (opts.probe_address, opts.drain_timeout, opts.reads_ttl) == (None, 30.0, 5.0)
    assert opts.allow_cross_namespace_secrets is False
    assert opts.allow_adoption == frozenset()
    assert opts.track_provider_config_usage is True
    ManagerOptions(shard_index=2, shard_count=3)
    ManagerOptions(shard_index=0, shard_count=1)
    for index, count in ((0, 0), (-1, 2), (2, 2), (3, 2)):
        with pytest.raises(ValueError) as refused:
            ManagerOptions(shard_index=index, shard_count=count)
        assert str(refused.value) == "need 0 <= shard_index < shard_count"


def test_default_identity_is_the_host_and_the_process() -> None:
    assert default_identity() == f"{socket.gethostname()}_{os.getpid()}"


def test_live_and_log_fields() -> None:
    assert _live({})
    assert _live({"metadata": None})
    assert _live({"metadata": {"deletionTimestamp": "t", "finalizers": ["f"]}})
    assert _live({"metadata": {"finalizers": []}})
    assert not _live({"metadata": {"deletionTimestamp": "t"}})
    assert not _live({"metadata": {"deletionTimestamp": "t", "finalizers": []}})
    assert _fields("c", ("ns", "n")) == {"controller": "c", "object": "ns/n"}
    assert _fields("c", (None, "n"), "r1", result="x") == {
        "controller": "c", "object": "n", "result": "x", "reconcileID": "r1"}
    assert _fields("c", ("", "n"), "") == {"controller": "c", "object": "n",
                                           "reconcileID": ""}


# --------------------------------------------------------------------------- controller


def test_a_controller_needs_a_worker_and_sets_up_its_queue_informer_and_series() -> None:
    with pytest.raises(ValueError) as refused:
        Controller("x", Scripted(Result.done()), Source(), workers=0)
    assert str(refused.value) == "workers must be at least 1"
    source = Source()
    reconciler = Scripted(Result.done())
    assert Controller("two", reconciler, Source()).workers == 2
    built = Controller("widget", reconciler, source, workers=1)
    assert (built.name, built.reconciler, built.workers) == ("widget", reconciler, 1)
    assert isinstance(built.metrics, OperatorMetrics)
    assert built.queue.name == "widget" and built.queue.metrics is built.metrics
    assert built.informer.name == "widget" and built.informer.source is source
    assert built.informer.handler is built and built.informer.options == InformerOptions()
    assert built.owns(("any", "key")) is True
    assert built.watches == [] and built.followers == [] and built.informers == [built.informer]
    assert sample(built.metrics, "controller_runtime_max_concurrent_reconciles",
                  controller="widget") == 1.0
    assert sample(built.metrics, "controller_runtime_active_workers", controller="widget") == 0
    assert sample(built.metrics, "workqueue_depth", name="widget") == 0.0
    assert built.metrics.informers() == [("widget", built.informer)]

    metrics = OperatorMetrics()
    queue = WorkQueue("q")
    options = InformerOptions(resync=3.0)
    shared = Controller("x", reconciler, source, workers=4, queue=queue,
                        informer_options=options, metrics=metrics)
    assert shared.queue is queue and shared.metrics is metrics
    assert shared.informer.options is options
    assert sample(metrics, "controller_runtime_max_concurrent_reconciles",
                  controller="x") == 4.0


def test_own_events_queue_keys_through_the_filters_and_tell_followers() -> None:
    c = controller(owns=lambda key: key[1] != "foreign")
    seen: list[tuple[Any, Any]] = []
    c.followers.append(lambda old, new: seen.append((old, new)))
    a, b = obj("a", generation=1), obj("b", generation=1)
    c.on_add(a)
    c.on_add(obj("ignored", annotations={OPERATION: "ignore"}))
    c.on_add(obj("foreign"))
    assert drain(c.queue) == [("default", "a")]
    changed = obj("b", generation=2)
    c.on_update(b, b)
    assert drain(c.queue) == []
    c.on_update(b, changed)
    assert drain(c.queue) == [("default", "b")]
    c.queue.rate_limiter.when(("default", "b"))
    c.on_delete(changed)
    assert c.queue.retries(("default", "b")) == 0 and drain(c.queue) == []
    c.on_resync(a)
    c.on_resync(obj("ignored", annotations={OPERATION: "ignore"}))
    assert drain(c.queue) == [("default", "a")]
    assert seen == [(None, a), (None, obj("ignored", annotations={OPERATION: "ignore"})),
                    (None, obj("foreign")), (b, b), (b, changed), (changed, None)]
    c.enqueue(("x", "foreign"))
    c.enqueue(("x", "mine"))
    assert drain(c.queue) == [("x", "mine")]


def test_a_watched_kind_queues_the_mapped_keys_sorted_and_once() -> None:
    c = controller(owns=lambda key: key[1] != "skip")
    c.informer._cache[("default", "own")] = c.informer._pack(obj("own"))
    asked: list[list[dict[str, Any]]] = []

    def keys(changed: dict[str, Any], cached: Any) -> list[Key]:
        asked.append(list(cached()))
        return [(ns or None, n) for ns, n in changed["keys"]]

    informer = c.watch(Watch("v1", "Thing", keys), Source())
    assert informer.name == "t/thing" and informer.options is c.informer.options
    assert c.watches == [informer] and c.informers == [c.informer, informer]
    handler = informer.handler

    def thing(version: str | None, *pairs: Key) -> dict[str, Any]:
        meta = {} if version is None else {"resourceVersion": version}
        return {"metadata": meta, "keys": list(pairs)}

    handler.on_add(thing("1", ("b", "y"), (None, "z"), ("a", "x"), ("b", "y"), ("", "a"),
                         ("0", "n")))
    assert asked == [[obj("own")]]
    # No namespace sorts first, as the empty string does.
    assert drain(c.queue) == [(None, "a"), (None, "z"), ("0", "n"), ("a", "x"), ("b", "y")]
    handler.on_update(thing("1", ("a", "old")), thing("1", ("a", "new")))
    assert drain(c.queue) == []
    handler.on_update(thing("1", ("a", "old"), ("a", "both")),
                      thing("2", ("a", "new"), ("a", "both")))
    assert drain(c.queue) == [("a", "both"), ("a", "new"), ("a", "old")]
    handler.on_update(thing(None, ("a", "old")), thing(None, ("a", "new")))
    assert drain(c.queue) == [("a", "new"), ("a", "old")]
    handler.on_update(thing("", ("a", "old")), thing("", ("a", "new")))
    assert drain(c.queue) == [("a", "new"), ("a", "old")]
    handler.on_delete(thing("3", ("c", "gone"), ("c", "skip")))
    assert drain(c.queue) == [("c", "gone")]
    handler.on_resync(thing("3", ("c", "again")))
    assert drain(c.queue) == []


# --------------------------------------------------------------------------- process


@pytest.mark.parametrize(("outcome", "due", "retries", "ready", "result"), [
    (Result.done(), None, 0, [], "success"),
    (Result.now("Dirty"), None, 0, [("default", "x")], "requeue"),
    (Result.later(30, "Poll"), 30.0, 0, [], "requeue_after"),
    (Result.backoff("Failed"), 2.0, 2, [], "requeue"),
    (Result.backoff("Throttled", at_least=20), 20.0, 2, [], "requeue"),
    (Result.backoff("Throttled", at_least=1.5), 2.0, 2, [], "requeue"),
    (UnhandledError("api down"), 2.0, 2, [], "error"),
    (RuntimeError("bug"), 2.0, 2, [], "error"),
])
def test_each_result_becomes_its_queue_operation_and_metric(
        outcome: Any, due: float | None, retries: int, ready: list[Key], result: str) -> None:
    c = controller(Scripted(outcome))
    key = ("default", "x")
    c.queue.rate_limiter.when(key)  # one earlier failure: success forgets, failure doubles
    c.process(key)
    assert c.queue.due(key) == due
    assert c.queue.retries(key) == retries
    assert drain(c.queue) == ready
    for name in ("success", "error", "requeue", "requeue_after"):
        assert sample(c.metrics, "controller_runtime_reconcile_total", controller="t",
                      result=name) == (1.0 if name == result else 0.0)
    assert sample(c.metrics, "controller_runtime_reconcile_errors_total",
                  controller="t") == (1.0 if result == "error" else 0.0)
    assert sample(c.metrics, "controller_runtime_reconcile_time_seconds_count",
                  controller="t") == 1.0
    assert 0.0 <= sample(c.metrics, "controller_runtime_reconcile_time_seconds_sum",
                         controller="t") < 5.0  # type: ignore[operator]
    assert sample(c.metrics, "controller_runtime_active_workers", controller="t") == 0.0


def test_a_reconcile_counts_as_an_active_worker_while_it_runs() -> None:
    during: list[float | None] = []

    class Watching:
        def reconcile(self, namespace: str | None, name: str) -> Result:
            during.append(sample(c.metrics, "controller_runtime_active_workers",
                                 controller="t"))
            if name == "boom":
                raise RuntimeError("x")
            return Result.done()

    c = controller(Watching())
    c.process(("default", "a"))
    c.process((None, "boom"))
    assert during == [1.0, 1.0]
    assert sample(c.metrics, "controller_runtime_active_workers", controller="t") == 0.0
    c.metrics.active_workers.labels(controller="t").set(2)  # two others are running
    c.process(("default", "a"))
    assert during[-1] == 3.0
    assert sample(c.metrics, "controller_runtime_active_workers", controller="t") == 2.0


def _records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "lifecycle.driver.manager"]


def test_what_each_reconcile_logs(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="lifecycle.driver.manager")
    c = controller(Scripted(Result.later(5, "Poll"), Result.backoff("", at_least=3.0),
                            Result.backoff("Throttled", at_least=3.0),
                            Result.done("TerminalError")))
    for _ in range(4):
        c.process(("ns", "w"))
    lines = [(r.levelname, r.getMessage()) for r in _records(caplog)]
    assert lines == [
        ("DEBUG", "reconciled: requeue-after Poll"),
        ("INFO", "backing off: unspecified; retry in 3.00s"),
        ("DEBUG", "reconciled: backoff "),
        ("INFO", "backing off: Throttled; retry in 3.00s"),
        ("DEBUG", "reconciled: backoff Throttled"),
        ("INFO", "terminal error: not retried until the object changes"),
        ("DEBUG", "reconciled: done TerminalError")]
    records = _records(caplog)
    assert [(r.controller, r.object, r.result, r.reason) for r in records] == [  # type: ignore[attr-defined]
        ("t", "ns/w", "requeue_after", "Poll"), ("t", "ns/w", "requeue", ""),
        ("t", "ns/w", "requeue", ""), ("t", "ns/w", "requeue", "Throttled"),
        ("t", "ns/w", "requeue", "Throttled"), ("t", "ns/w", "success", "TerminalError"),
        ("t", "ns/w", "success", "TerminalError")]
    ids = [r.reconcileID for r in records]  # type: ignore[attr-defined]
    assert all(re.fullmatch(r"[0-9a-f]{8}", i) for i in ids)
    assert ids[1] == ids[2] and ids[3] == ids[4] and ids[5] == ids[6]
    assert len({ids[0], ids[1], ids[3], ids[5]}) == 4


def test_errors_are_logged_with_their_reason_and_no_message_of_a_bug(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="lifecycle.driver.manager")
    try:
        raise KeyError("secret-value")
    except KeyError as cause:
        caused = UnhandledError("API  down\n  again")
        caused.__cause__ = cause
    bug = ValueError("password=hunter2")
    c = controller(Scripted(caused, UnhandledError("plain"), bug))
    for _ in range(3):
        c.process((None, "w"))
    records = _records(caplog)
    assert [(r.levelname, r.getMessage()) for r in records] == [
        ("INFO", "reconcile error: API down again; retry in 1.00s"),
        ("INFO", "reconcile error: plain; retry in 2.00s"),
        ("ERROR", "reconcile raised ValueError; retry in 4.00s")]
    assert [(r.controller, r.object, r.result, r.reason) for r in records] == [  # type: ignore[attr-defined]
        ("t", "w", "error", "KeyError"), ("t", "w", "error", "UnhandledError"),
        ("t", "w", "error", "ValueError")]
    assert records[2].traceback == redacted_traceback(bug)  # type: ignore[attr-defined]
    assert not hasattr(records[0], "traceback")
    assert all(re.fullmatch(r"[0-9a-f]{8}", r.reconcileID) for r in records)  # type: ignore[attr-defined]
    assert "hunter2" not in caplog.text and "secret-value" not in caplog.text


def test_workers_take_keys_until_stopped_and_stop_reports_draining() -> None:
    release, entered, quick = threading.Event(), threading.Event(), threading.Event()
    finished = threading.Event()

    class Blocking:
        def __init__(self) -> None:
            self.calls: list[Key] = []

        def reconcile(self, namespace: str | None, name: str) -> Result:
            self.calls.append((namespace, name))
            if name == "slow":
                entered.set()
                release.wait(5)
                finished.set()
            quick.set()
            return Result.done()

    reconciler = Blocking()
    c = Controller("w", reconciler, Source(), workers=2)
    c.start_workers()
    assert [t.name for t in c._threads] == ["w-worker-0", "w-worker-1"]
    assert all(t.daemon and t.is_alive() for t in c._threads)
    c.enqueue(("ns", "quick"))
    assert quick.wait(5)
    c.enqueue(("ns", "slow"))
    assert entered.wait(5)
    assert c.stop_workers(0.05) is False  # the slow reconcile is still in flight
    assert not finished.is_set()  # stop gave up waiting for it
    release.set()
    assert c.queue.drain(5)
    assert reconciler.calls == [("ns", "quick"), ("ns", "slow")]
    assert c.queue.in_flight() == {}
    for thread in c._threads:
        thread.join(5)
        assert not thread.is_alive()
    c.enqueue(("ns", "late"))
    assert reconciler.calls.count(("ns", "late")) == 0

    d = Controller("d", Scripted(Result.done()), Source(), workers=1)
    d.start_informer()
    d.start_workers()
    assert d.informer.wait_synced(5)
    assert d.stop(5) is True
    assert all(not t.is_alive() for t in d._threads + d.informer._threads)
    assert d.informer.source.stopped.is_set()  # type: ignore[attr-defined]


def test_start_and_stop_informers_include_the_extra_watches() -> None:
    c = controller()
    extra = c.watch(Watch("v1", "Thing", lambda o, cached: ()), Source())
    c.start_informer()
    assert c.informer.wait_synced(5) and extra.wait_synced(5)
    assert all(t.is_alive() for i in c.informers for t in i._threads)
    c.stop_informers()
    assert all(not t.is_alive() for i in c.informers for t in i._threads)
    assert extra.source.stopped.is_set()  # type: ignore[attr-defined]


# --------------------------------------------------------------------------- manager: building


def test_a_manager_needs_kinds_and_each_once() -> None:
    with pytest.raises(ValueError) as none:
        Manager(FakeCluster(), [])
    assert str(none.value) == "a manager needs at least one kind"
    with pytest.raises(ValueError) as twice:
        Manager(FakeCluster(), [(DatabaseInstance, connector()), (DatabaseInstance, connector())])
    assert str(twice.value) == "DatabaseInstance is listed twice"


def test_a_manager_builds_one_controller_per_target_with_its_sources() -> None:
    cluster = FakeCluster()
    opts = ManagerOptions(workers=3, namespace="ns", label_selector="a=b", informer=QUIET)
    metrics = OperatorMetrics()
    manager = Manager(cluster, [(DatabaseInstance, connector()), (DATABASE_BINDING, None),
                                (APP, None)], opts, metrics=metrics)
    pc = f"{PROVIDER_CONFIG_KIND}.{PROVIDER_CONFIG_API}"
    assert list(manager.controllers) == ["DatabaseInstance", "DatabaseClaim", "App", pc]
    assert cluster.calls == [
        (DB_API, "DatabaseInstance", "ns", "a=b"),
        ("claims.lifecycle.dev/v1alpha1", "DatabaseClaim", "ns", "a=b"),
        (DB_API, "DatabaseInstance", None, None),
        (DB_API, "DatabaseInstanceClass", None, None),
        ("apps.example.org/v1", "App", "ns", "a=b"),
        (DB_API, "DatabaseInstance", "ns", None),
        (PROVIDER_CONFIG_API, PROVIDER_CONFIG_KIND, None, None)]
    c = manager.controllers
    assert {k: (v.name, v.workers) for k, v in c.items()} == {
        "DatabaseInstance": ("databaseinstance", 3), "DatabaseClaim": ("databaseclaim", 3),
        "App": ("app", 3), pc: ("providerconfig", 1)}
    assert isinstance(c["DatabaseInstance"].reconciler, Reconciler)
    assert isinstance(c["DatabaseClaim"].reconciler, ClaimReconciler)
    assert isinstance(c["App"].reconciler, ParentReconciler)
    assert isinstance(c[pc].reconciler, ProviderConfigReconciler)
    assert [i.name for i in c["DatabaseClaim"].informers] == [
        "databaseclaim", "databaseclaim/databaseinstance",
        "databaseclaim/databaseinstanceclass"]
    assert [i.name for i in c["App"].informers] == ["app", "app/databaseinstance"]
    assert c["DatabaseInstance"].informer.source is cluster.sources["DatabaseInstance"][0]
    for each in c.values():
        assert each.metrics is metrics and each.owns == manager._owns
        assert each.informer.options is QUIET
        assert each.queue.name == each.name and each.queue.metrics is metrics
    assert manager.cluster is cluster and manager.options is opts
    assert manager.elector is None and manager.probes is None and manager.closers == []
    assert sample(metrics, "leader_election_master_status", name="lifecycle-operator") is None


def test_the_engine_reconciler_gets_the_manager_s_options_and_another_factory_is_used() -> None:
    opts = ManagerOptions(operator_id="op", reads_ttl=1.5, track_provider_config_usage=False)
    conn = connector()
    manager = Manager(FakeCluster(), [(DatabaseInstance, conn)], opts)
    built = manager.controllers["DatabaseInstance"].reconciler
    assert isinstance(built, Reconciler)
    assert built.operator_id == "op" and built.reads.ttl == 1.5 and built.connector is conn
    marker = Scripted(Result.done())
    calls: list[tuple[Any, ...]] = []

    def factory(cluster: Any, kind: Any, conn: Any, options: Any) -> Any:
        calls.append((cluster, kind, conn, options))
        return marker

    cluster = FakeCluster()
    other = Manager(cluster, [(DatabaseInstance, conn)], opts, reconciler_factory=factory)
    assert other.controllers["DatabaseInstance"].reconciler is marker
    assert calls == [(cluster, DatabaseInstance, conn, opts)]
    assert list(other.controllers) == ["DatabaseInstance"]


def test_the_manager_s_queues_use_its_backoff_and_bucket() -> None:
    opts = ManagerOptions(backoff_base=0.5, backoff_cap=8.0, qps=3.0, burst=7)
    manager = Manager(FakeCluster(), [(DatabaseInstance, connector())], opts)
    for each in manager.controllers.values():
        limiter = each.queue.rate_limiter
        assert isinstance(limiter, MaxOfRateLimiter)
        item, bucket = limiter.limiters
        assert isinstance(item, ItemExponentialBackoff)
        assert (item.base, item.cap) == (0.5, 8.0)
        assert isinstance(bucket, BucketRateLimiter)
        assert (bucket.qps, bucket.burst) == (3.0, 7)


def test_a_manager_registers_its_kinds_with_a_kube_cluster() -> None:
    kube = KubeCluster(api_client(host="http://127.0.0.1:9"))
    Manager(FakeCluster(cluster=kube), [(DATABASE_BINDING, None)])
    assert kube._infos[("claims.lifecycle.dev/v1alpha1", "DatabaseClaim")].plural == (
        "databaseclaims")
    assert ("db.lifecycle.dev/v1alpha1", "DatabaseInstanceClass") in kube._infos


def test_provider_config_usage_runs_per_config_api_only_for_managed_kinds() -> None:
    off = Manager(FakeCluster(), [(DatabaseInstance, connector())],
                  ManagerOptions(track_provider_config_usage=False))
    assert list(off.controllers) == ["DatabaseInstance"]
    assert off.controllers["DatabaseInstance"].followers == []
    claims_only = Manager(FakeCluster(), [(DATABASE_BINDING, None), (APP, None)])
    assert list(claims_only.controllers) == ["DatabaseClaim", "App"]

    cluster = FakeCluster()
    manager = Manager(cluster, [(DatabaseInstance, connector()), (OTHER, connector()),
                                (DATABASE_BINDING, None)])
    default, other = (f"{PROVIDER_CONFIG_KIND}.{PROVIDER_CONFIG_API}",
                      f"{PROVIDER_CONFIG_KIND}.{OTHER_API}")
    assert list(manager.controllers) == ["DatabaseInstance", "Cache", "DatabaseClaim",
                                         default, other]
    assert manager.controllers[default].name == "providerconfig"
    assert manager.controllers[other].name == "providerconfig.configs.example.org"
    assert cluster.calls[-2:] == [(PROVIDER_CONFIG_API, PROVIDER_CONFIG_KIND, None, None),
                                  (OTHER_API, PROVIDER_CONFIG_KIND, None, None)]
    usage = manager.controllers[default].reconciler
    assert isinstance(usage, ProviderConfigReconciler)
    assert usage.api is cluster and usage.api_version == PROVIDER_CONFIG_API
    assert usage.kinds == (DatabaseInstance,)
    assert manager.controllers[other].reconciler.kinds == (OTHER,)  # type: ignore[attr-defined]
    assert manager.controllers[other].reconciler.api_version == OTHER_API  # type: ignore[attr-defined]
    assert len(manager.controllers["DatabaseInstance"].followers) == 1
    assert len(manager.controllers["Cache"].followers) == 1
    assert manager.controllers["DatabaseClaim"].followers == []
    # The usage reconciler lists users from the managed kinds' informers.
    informer = manager.controllers["DatabaseInstance"].informer
    informer._cache[("a", "db")] = informer._pack({"metadata": {"name": "db", "namespace": "a"},
                                                   "spec": {}})
    assert usage.users("default") == ["DatabaseInstance a/db"]


def _user(name: str, config: str | None, *, deleting: bool = False,
          finalizers: list[str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "ns", "resourceVersion": "1"}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    if finalizers is not None:
        meta["finalizers"] = finalizers
    spec = {} if config is None else {"providerConfigRef": {"name": config}}
    return {"metadata": meta, "spec": spec}


def test_a_change_of_a_user_queues_its_configs_once_after_the_usage_delay() -> None:
    assert (USAGE_DELAY, USAGE_REFRESH) == (2.0, 10.0)
    manager = Manager(FakeCluster(), [(DatabaseInstance, connector())])
    users = manager.controllers["DatabaseInstance"]
    configs = manager.controllers[f"{PROVIDER_CONFIG_KIND}.{PROVIDER_CONFIG_API}"]
    queue = configs.queue

    def pending() -> dict[str, float]:
        found = {name: queue.due((None, name)) for name in ("default", "a", "b")}
        for name in found:
            queue._due.pop((None, name), None)
        queue._waiting.clear()
        return {k: round(v) for k, v in found.items() if v is not None}

    # A live config's count is only shown: a burst is written once per USAGE_REFRESH.
    users.on_add(_user("x", None))
    assert pending() == {"default": 10}
    users.on_update(_user("x", "a"), _user("x", "a"))
    assert pending() == {}
    users.on_update(_user("x", "a"), _user("x", "b"))
    assert pending() == {"a": 10, "b": 10}
    users.on_update(_user("x", "a"), _user("x", "a", deleting=True, finalizers=["f"]))
    assert pending() == {}
    users.on_update(_user("x", "a"), _user("x", "a", deleting=True))
    assert pending() == {"a": 10}
    # A config being deleted waits on its count: its users are recounted after USAGE_DELAY.
    configs.informer._cache[(None, "b")] = configs.informer._pack(
        {"metadata": {"name": "b", "deletionTimestamp": "2026-01-01T00:00:00Z"}})
    users.on_delete(_user("x", "b"))
    assert pending() == {"b": 2}
    assert len(queue) == 0


def test_a_sharded_manager_owns_its_keys_and_queues_only_its_configs() -> None:
    def shard(name: str) -> int:
        return shard_of((None, name), 2)

    mine = next(f"c{i}" for i in range(100) if shard(f"c{i}") == 1)
    theirs = next(f"c{i}" for i in range(100) if shard(f"c{i}") == 0)
    manager = Manager(FakeCluster(), [(DatabaseInstance, connector())],
                      ManagerOptions(shard_index=1, shard_count=2))
    assert manager._owns((None, mine)) and not manager._owns((None, theirs))
    users = manager.controllers["DatabaseInstance"]
    queue = manager.controllers[f"{PROVIDER_CONFIG_KIND}.{PROVIDER_CONFIG_API}"].queue
    users.on_add(_user("x", mine))
    users.on_add(_user("y", theirs))
    assert queue.due((None, mine)) is not None and queue.due((None, theirs)) is None
    single = Manager(FakeCluster(), [(DatabaseInstance, connector())])
    assert single._owns((None, mine)) and single._owns((None, theirs))
    third = Manager(FakeCluster(), [(DatabaseInstance, connector())],
                    ManagerOptions(shard_index=0, shard_count=3))
    assert [third._owns(("ns", f"k{i}")) for i in range(30)] == [
        shard_of(("ns", f"k{i}"), 3) == 0 for i in range(30)]


def test_leader_election_campaigns_for_the_configured_lease() -> None:
    cluster = FakeCluster()
    opts = ManagerOptions(leader_election=True, lease_name="op", lease_namespace="sys",
                          identity="me", lease_duration=9.0, renew_deadline=6.0,
                          retry_period=1.0)
    manager = Manager(cluster, [(DatabaseInstance, connector())], opts)
    assert manager.elector is not None
    assert manager.elector.options == LeaseOptions("op", "sys", "me", 9.0, 6.0, 1.0)
    assert manager.elector.cluster is cluster
    assert manager.elector.on_started == manager._start_workers
    assert manager.elector.on_stopped == manager._stop_workers
    assert sample(manager.metrics, "leader_election_master_status", name="op") == 0.0
    sharded = Manager(cluster, [(DatabaseInstance, connector())],
                      ManagerOptions(leader_election=True, lease_name="op", shard_index=2,
                                     shard_count=3))
    assert sharded.elector is not None and sharded.elector.options.name == "op-2-of-3"
    halves = Manager(cluster, [(DatabaseInstance, connector())],
                     ManagerOptions(leader_election=True, lease_name="op", shard_index=0,
                                    shard_count=2))
    assert halves.elector is not None and halves.elector.options.name == "op-0-of-2"
    assert sample(sharded.metrics, "leader_election_master_status", name="op-2-of-3") == 0.0
    assert sample(sharded.metrics, "leader_election_master_status", name="op") is None


# --------------------------------------------------------------------------- manager: running


def test_start_runs_informers_and_workers_stop_ends_them_and_calls_closers(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="lifecycle.driver.manager")
    manager = Manager(FakeCluster(), [(DatabaseInstance, connector()), (APP, None)],
                      ManagerOptions(workers=2, informer=QUIET, identity="me"))
    closed: list[int] = []
    manager.closers.extend([lambda: closed.append(1), lambda: closed.append(2)])
    assert not manager.ready() and manager.healthy()
    assert manager.wait(0) is False
    assert manager.start() is manager
    assert manager.wait_synced(5) and manager.ready() and manager.healthy()
    assert manager.probes is None and manager._elector_thread is None
    for c in manager.controllers.values():
        assert len(c._threads) == c.workers and all(t.is_alive() for t in c._threads)
    started = [r for r in _records(caplog) if r.getMessage() == "operator started"]
    assert len(started) == 1
    assert started[0].kinds == sorted(manager.controllers)  # type: ignore[attr-defined]
    assert started[0].identity == "me"  # type: ignore[attr-defined]
    manager.stop()
    assert closed == [1, 2] and manager.wait(0) is True
    assert not manager.ready() and manager.healthy()
    for c in manager.controllers.values():
        assert c.queue.shutting_down
        assert all(not t.is_alive() for t in c._threads)
        assert all(not t.is_alive() for i in c.informers for t in i._threads)
    stopped = [r for r in _records(caplog) if r.getMessage() == "operator stopped"]
    assert len(stopped) == 1 and stopped[0].identity == "me"  # type: ignore[attr-defined]


def test_health_fails_when_an_informer_thread_dies_or_the_lease_is_lost() -> None:
    manager = Manager(FakeCluster(), [(DatabaseInstance, connector())],
                      ManagerOptions(informer=QUIET, track_provider_config_usage=False))
    manager.start()
    try:
        assert manager.wait_synced(5) and manager.healthy()
        manager.controllers["DatabaseInstance"].informer.stop()
        assert manager.healthy() is False
        assert manager.lost_lease is False
        manager.elector = FakeElector(lost=True)  # type: ignore[assignment]
        assert manager.lost_lease is True
        manager._stopping = True
        assert manager.healthy() is False
        manager.elector = FakeElector(lost=False)  # type: ignore[assignment]
        assert manager.healthy() and manager.lost_lease is False
    finally:
        manager.elector = None
        manager.stop()


def test_readiness_and_wait_synced_need_every_informer_synced() -> None:
    cluster = FakeCluster(fail=frozenset({"DatabaseInstanceClass"}))
    manager = Manager(cluster, [(DATABASE_BINDING, None)],
                      ManagerOptions(informer=InformerOptions(resync=0, backoff_base=0.01,
                                                              backoff_cap=0.02)))
    manager.start()
    try:
        assert manager.controllers["DatabaseClaim"].informers[0].wait_synced(5)
        assert manager.controllers["DatabaseClaim"].informers[1].wait_synced(5)
        assert manager.wait_synced(0.05) is False
        assert not manager.ready()
    finally:
        manager.stop()


def _free_port(host: str) -> int:
    with socket.socket() as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


def test_probes_serve_on_the_configured_address_while_the_manager_runs() -> None:
    host = "127.0.0.2"  # any loopback address; not the probe server's default
    port = _free_port(host)
    manager = Manager(FakeCluster(), [(DatabaseInstance, connector())],
                      ManagerOptions(informer=QUIET, probe_address=(host, port)))
    manager.start()
    try:
        assert manager.probes is not None and manager.probes.url == f"http://{host}:{port}"
        assert manager.probes.healthy == manager.healthy
        assert manager.probes.ready == manager.ready
        assert manager.probes.metrics is manager.metrics
        assert manager.wait_synced(5)
        with urllib.request.urlopen(manager.probes.url + "/readyz", timeout=5) as answer:
            assert answer.status == 200
    finally:
        manager.stop()
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(manager.probes.url + "/healthz", timeout=2)


def test_workers_start_once_and_not_while_stopping() -> None:
    manager = Manager(FakeCluster(), [(DatabaseInstance, connector())],
                      ManagerOptions(informer=QUIET, workers=1))
    c = manager.controllers["DatabaseInstance"]
    manager._stop_workers()  # not running: nothing to stop
    assert not c.queue.shutting_down
    manager._start_workers()
    threads = list(c._threads)
    assert len(threads) == 1 and manager._workers_running
    manager._start_workers()
    assert c._threads == threads
    manager._stop_workers()
    assert c.queue.shutting_down and not manager._workers_running
    assert not threads[0].is_alive()
    stopping = Manager(FakeCluster(), [(DatabaseInstance, connector())],
                       ManagerOptions(informer=QUIET))
    stopping._stopping = True
    stopping._start_workers()
    assert all(c._threads == [] for c in stopping.controllers.values())
    assert not stopping._workers_running


def test_the_leader_gauge_follows_the_workers() -> None:
    manager = Manager(FakeCluster(), [(DatabaseInstance, connector())],
                      ManagerOptions(informer=QUIET, leader_election=True, lease_name="l"))
    manager._start_workers()
    assert sample(manager.metrics, "leader_election_master_status", name="l") == 1.0
    manager._stop_workers()
    assert sample(manager.metrics, "leader_election_master_status", name="l") == 0.0


def test_losing_the_campaign_ends_the_manager_and_winning_does_not() -> None:
    manager = Manager(FakeCluster(), [(DatabaseInstance, connector())],
                      ManagerOptions(informer=QUIET))
    lost = FakeElector(lost=True)
    lost.released.set()
    manager.elector = lost  # type: ignore[assignment]
    manager._campaign()
    assert lost.calls == ["run"] and manager.wait(0)
    other = Manager(FakeCluster(), [(DatabaseInstance, connector())],
                    ManagerOptions(informer=QUIET))
    kept = FakeElector(lost=False)
    kept.released.set()
    other.elector = kept  # type: ignore[assignment]
    other._campaign()
    assert kept.calls == ["run"] and not other.wait(0)


def test_an_elected_manager_campaigns_in_a_thread_and_stop_ends_the_campaign() -> None:
    manager = Manager(FakeCluster(), [(DatabaseInstance, connector())],
                      ManagerOptions(informer=QUIET, leader_election=True))
    elector = FakeElector()
    manager.elector = elector  # type: ignore[assignment]
    manager.start()
    thread = manager._elector_thread
    assert thread is not None and thread.name == "leader" and thread.daemon
    assert all(c._threads == [] for c in manager.controllers.values())  # not leading yet
    manager.stop()
    assert elector.calls == ["run", "stop"] and not thread.is_alive()
    assert manager.wait(0)


def test_a_manager_leads_on_a_real_lease_and_releases_it_on_stop() -> None:
    api = EmbeddedAPI()
    try:
        opts = ManagerOptions(informer=QUIET, leader_election=True, identity="me",
                              lease_name="op", lease_duration=3.0, renew_deadline=2.0,
                              retry_period=0.05, track_provider_config_usage=False)
        manager = Manager(InProcessCluster(api), [(DATABASE_BINDING, None)], opts)
        manager.start()
        assert manager.elector is not None and manager.elector.wait_leading(5)
        c = manager.controllers["DatabaseClaim"]
        for _ in range(100):
            if c._threads:
                break
            threading.Event().wait(0.01)
        assert len(c._threads) == 2
        assert sample(manager.metrics, "leader_election_master_status", name="op") == 1.0
        manager.stop()
        assert sample(manager.metrics, "leader_election_master_status", name="op") == 0.0
        lease = api.get("coordination.k8s.io/v1", "Lease", "default", "op")
        assert not lease["spec"].get("holderIdentity")
        assert manager.wait(0) and not manager.lost_lease
    finally:
        api.close()


def test_crash_stops_without_draining_or_releasing() -> None:
    manager = Manager(FakeCluster(), [(DatabaseInstance, connector())],
                      ManagerOptions(informer=QUIET, probe_address=("127.0.0.1", 0)))
    elector = FakeElector()
    closed: list[str] = []
    manager.closers.append(lambda: closed.append("closed"))
    manager.start()
    assert manager.wait_synced(5)
    manager.elector = elector  # type: ignore[assignment]
    manager.crash()
    assert elector.calls == ["crash"] and closed == ["closed"] and manager.wait(0)
    assert manager._stopping and not manager.ready()
    for c in manager.controllers.values():
        assert c.queue.shutting_down
        assert all(not t.is_alive() for i in c.informers for t in i._threads)
    assert manager.probes is not None
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(manager.probes.url + "/healthz", timeout=2)
    manager.elector = None
    for c in manager.controllers.values():
        c.stop_workers(5)
    bare = Manager(FakeCluster(), [(DatabaseInstance, connector())],
                   ManagerOptions(informer=QUIET))
    bare.crash()
    assert bare.wait(0) and bare.probes is None


class Stuck(Source):
    """A source whose watch ignores ``stop`` until the test lets it go."""

    def __init__(self) -> None:
        super().__init__()
        self.let_go = threading.Event()

    def watch(self, resource_version: str, *, timeout: float,
              inactivity: float) -> Iterator[tuple[str, dict[str, Any]]]:
        self.let_go.wait(30)
        yield from ()


def test_stopping_informers_gives_up_on_a_stuck_watch_after_the_timeout() -> None:
    stuck = Stuck()
    c = Controller("s", Scripted(Result.done()), stuck, workers=1)
    c.start_informer()
    try:
        assert c.informer.wait_synced(5)
        c.stop_informers(0.05)
        assert c.informer._threads[0].is_alive()  # still stuck: stop did not wait for it
    finally:
        stuck.let_go.set()
    c.informer._threads[0].join(5)
    assert not c.informer._threads[0].is_alive()


def test_crash_does_not_wait_for_a_stuck_watch() -> None:
    class StuckCluster(FakeCluster):
        def list_watcher(self, api_version: str, kind: str, namespace: str | None = None,
                         label_selector: str | None = None) -> Source:
            self.calls.append((api_version, kind, namespace, label_selector))
            source = Stuck()
            self.sources.setdefault(kind, []).append(source)
            return source

    cluster = StuckCluster()
    manager = Manager(cluster, [(DatabaseInstance, connector())],
                      ManagerOptions(informer=QUIET, track_provider_config_usage=False))
    manager.start()
    informer = manager.controllers["DatabaseInstance"].informer
    try:
        assert informer.wait_synced(5)
        manager.crash()
        assert informer._threads[0].is_alive()
    finally:
        for source in cluster.sources["DatabaseInstance"]:
            source.let_go.set()  # type: ignore[attr-defined]
    informer._threads[0].join(5)
    for c in manager.controllers.values():
        c.stop_workers(5)


class SlowToLeave(FakeElector):
    """An elector that takes a moment to step down once told to stop."""

    def run(self) -> None:
        self.calls.append("run")
        self.released.wait(5)
        threading.Event().wait(0.2)  # releasing the lease takes a round trip
        self.calls.append("left")


def test_stop_waits_for_the_campaign_to_end_beyond_the_drain_timeout() -> None:
    manager = Manager(FakeCluster(), [(DatabaseInstance, connector())],
                      ManagerOptions(informer=QUIET, leader_election=True, drain_timeout=0.1))
    elector = SlowToLeave()
    manager.elector = elector  # type: ignore[assignment]
    manager.start()
    manager.stop()
    assert elector.calls == ["run", "stop", "left"]
    assert manager._elector_thread is not None and not manager._elector_thread.is_alive()


class NeverLeaves(FakeElector):
    """An elector stuck in its campaign until the test lets it go."""

    def __init__(self) -> None:
        super().__init__()
        self.let_go = threading.Event()

    def run(self) -> None:
        self.calls.append("run")
        self.let_go.wait(30)


def test_stop_gives_up_on_a_stuck_campaign_after_the_drain_timeout_and_five_seconds() -> None:
    manager = Manager(FakeCluster(), [(DatabaseInstance, connector())],
                      ManagerOptions(informer=QUIET, leader_election=True, drain_timeout=-4.95))
    elector = NeverLeaves()
    manager.elector = elector  # type: ignore[assignment]
    manager.start()
    try:
        manager.stop()  # waits drain_timeout + 5 = 0.05 s for the campaign, then goes on
        assert manager._elector_thread is not None and manager._elector_thread.is_alive()
        assert manager.wait(0)
    finally:
        elector.let_go.set()
    manager._elector_thread.join(5)


# ----------------------------------------------------------------- the waits each call allows


class Recorded:
    """Stands in for a thread or an informer: records the timeouts it is given."""

    def __init__(self) -> None:
        self.timeouts: list[float | None] = []

    def join(self, timeout: float | None = None) -> None:
        self.timeouts.append(timeout)

    def stop(self, timeout: float | None = None) -> None:
        self.timeouts.append(timeout)

    def is_alive(self) -> bool:
        return False


class RecordedEvent(threading.Event):
    """An event that records the timeout of every wait."""

    def __init__(self) -> None:
        super().__init__()
        self.timeouts: list[float | None] = []

    def wait(self, timeout: float | None = None) -> bool:
        self.timeouts.append(timeout)
        return super().wait(0)


def test_stopping_a_controller_waits_as_long_as_it_is_told() -> None:
    c = Controller("r", Scripted(Result.done()), Source(), workers=1)
    informer, thread = Recorded(), Recorded()
    c.informer = informer  # type: ignore[assignment]
    c._threads = [thread]  # type: ignore[list-item]
    c.stop_informers()
    c.stop_informers(0.25)
    assert informer.timeouts == [5.0, 0.25]
    assert c.stop_workers() is True
    assert c.stop_workers(0.5) is True
    assert c.stop_workers(-1.0) is True
    assert c.stop() is True
    assert thread.timeouts == [30.0, 0.5, 0.0, 30.0]
    assert informer.timeouts == [5.0, 0.25, 5.0]


def test_the_manager_bounds_each_wait_by_its_options() -> None:
    manager = Manager(FakeCluster(), [(DatabaseInstance, connector())],
                      ManagerOptions(informer=QUIET, drain_timeout=0.75,
                                     track_provider_config_usage=False))
    c = manager.controllers["DatabaseInstance"]
    informer, campaign = Recorded(), Recorded()
    c.informer = informer  # type: ignore[assignment]
    manager.elector = FakeElector()  # type: ignore[assignment]
    manager._elector_thread = campaign  # type: ignore[assignment]
    manager.stop()
    assert campaign.timeouts == [5.75] and informer.timeouts == [5.0]
    crashed = Manager(FakeCluster(), [(DatabaseInstance, connector())],
                      ManagerOptions(informer=QUIET, track_provider_config_usage=False))
    stopped = Recorded()
    crashed.controllers["DatabaseInstance"].informer = stopped  # type: ignore[assignment]
    crashed.crash()
    assert stopped.timeouts == [0.5]


def test_wait_synced_shares_one_deadline_among_the_informers() -> None:
    manager = Manager(FakeCluster(), [(DATABASE_BINDING, None)],
                      ManagerOptions(informer=QUIET))
    events = []
    for informer in manager.controllers["DatabaseClaim"].informers:
        informer.synced = RecordedEvent()
        informer.synced.set()
        events.append(informer.synced)
    assert manager.wait_synced(0.5) is True
    assert manager.wait_synced() is True
    for event in events:
        short, default = event.timeouts
        assert 0.0 < short <= 0.5  # type: ignore[operator]
        assert 29.0 < default <= 30.0  # type: ignore[operator]
    assert manager.wait_synced(-1.0) is True
    assert [event.timeouts[-1] for event in events] == [0.0] * 3
