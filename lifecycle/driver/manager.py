"""The operator: one controller per kind, leader election, metrics and probes.

A :class:`Controller` feeds a :class:`~lifecycle.driver.queue.WorkQueue` from
an :class:`~lifecycle.driver.informer.Informer` through the event filters
(:func:`add_triggers`, :func:`update_triggers`) and runs N workers that call
the engine's reconciler and turn its :class:`~lifecycle.core.values.Result`
into queue operations (the requeue matrix):

=====================  =================================================  ==============
result                 queue                                              metric result
=====================  =================================================  ==============
done                   forget the backoff                                 success
requeue now (dirty)    forget the backoff, add now                        requeue
requeue after          forget the backoff, add after the interval         requeue_after
backoff (handled)      add rate-limited (at least the provider's delay)   requeue
unhandled error        add rate-limited                                   error
=====================  =================================================  ==============

A :class:`Manager` runs controllers for any number of kinds. Informers start
at once on every replica (a warm standby has its queue filled); workers start
only while this replica leads, when leader election is on. Keys can be
sharded across replicas: each shard elects its own leader.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import zlib
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import attrs

from lifecycle.core.decide import ReconcilePolicy
from lifecycle.core.errors import UnhandledError
from lifecycle.core.kind import OPERATION, PAUSED, RECONCILE_POLICY, Kind
from lifecycle.core.objects import annotations, metadata
from lifecycle.core.values import Result, ResultKind
from lifecycle.driver.informer import Informer, InformerOptions, ListWatcher, object_key
from lifecycle.driver.leader import LeaderElector, LeaseOptions
from lifecycle.driver.metrics import OperatorMetrics, ProbeServer
from lifecycle.driver.queue import WorkQueue, default_rate_limiter
from lifecycle.runtime.contract import Connector
from lifecycle.runtime.reconciler import Reconciler

__all__ = [
    "Controller",
    "Manager",
    "ManagerOptions",
    "add_triggers",
    "shard_of",
    "update_triggers",
]

log = logging.getLogger("lifecycle.driver.manager")

Key = tuple[str | None, str]


# ----------------------------------------------------------------- filters
def _meta(obj: dict[str, Any], field: str) -> Any:
    return metadata(obj).get(field)


def is_ignored(obj: dict[str, Any]) -> bool:
    """Whether the object carries ``lifecycle.dev/operation: ignore``."""
    return annotations(obj).get(OPERATION) == "ignore"


def add_triggers(obj: dict[str, Any]) -> bool:
    """A newly seen object is reconciled unless it is ignored."""
    return not is_ignored(obj)


def update_triggers(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """The change filter: does this change deserve a reconcile?

    Yes when the generation changed, the deletion timestamp changed, the
    operation annotation became ``reconcile`` or stopped being ``ignore``, or
    one of the engine's control annotations (paused, reconcile policy)
    changed; never while the object is ignored. Status-only and other
    metadata-only writes (the engine's own finalizer, journal and claim
    writes among them) do not trigger.
    """
    if is_ignored(new):
        return False
    if _meta(old, "generation") != _meta(new, "generation"):
        return True
    if _meta(old, "deletionTimestamp") != _meta(new, "deletionTimestamp"):
        return True
    before, after = annotations(old), annotations(new)
    if after.get(OPERATION) == "reconcile" and before.get(OPERATION) != "reconcile":
        return True
    if before.get(OPERATION) == "ignore":
        return True
    return any(before.get(a) != after.get(a) for a in (PAUSED, RECONCILE_POLICY))


def shard_of(key: Key, count: int) -> int:
    """The shard (``0..count-1``) a ``(namespace, name)`` key belongs to (stable hash)."""
    namespace, name = key
    return zlib.crc32(f"{namespace or ''}/{name}".encode()) % count


# -------------------------------------------------------------- controller
class Reconciles(Protocol):
    """What a controller calls: the engine's :class:`~lifecycle.runtime.reconciler.Reconciler`."""

    def reconcile(self, namespace: str | None, name: str) -> Result:
        """One reconcile of ``namespace/name``."""
        ...


class Controller:
    """Informer, filters, work queue and ``workers`` threads for one kind.

    ``owns(key)`` decides whether this replica handles a key (sharding).
    """

    def __init__(
        self,
        name: str,
        reconciler: Reconciles,
        source: ListWatcher,
        *,
        workers: int = 2,
        queue: WorkQueue | None = None,
        informer_options: InformerOptions | None = None,
        metrics: OperatorMetrics | None = None,
        owns: Callable[[Key], bool] = lambda key: True,
    ) -> None:
        if workers < 1:
            raise ValueError("workers must be at least 1")
        self.name = name
        self.reconciler = reconciler
        self.workers = workers
        self.metrics = metrics or OperatorMetrics()
        self.queue = queue if queue is not None else WorkQueue(name, metrics=self.metrics)
        self.informer = Informer(name, source, self, informer_options or InformerOptions())
        self.owns = owns
        self._threads: list[threading.Thread] = []
        self._active = 0
        self._lock = threading.Lock()
        self.metrics.controller(name, workers)
        self.metrics.watch_queue(name, self.queue)
        self.metrics.watch_informer(name, self.informer)

    # ------------------------------------------------------------ handler
    def _enqueue(self, obj: dict[str, Any]) -> None:
        key = object_key(obj)
        if self.owns(key):
            self.queue.add(key)

    def on_add(self, obj: dict[str, Any]) -> None:
        """A new object: queue it unless ignored."""
        if add_triggers(obj):
            self._enqueue(obj)

    def on_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        """A change: queue it if the filters say so."""
        if update_triggers(old, new):
            self._enqueue(new)

    def on_delete(self, obj: dict[str, Any]) -> None:
        """The object is gone: nothing to reconcile; its backoff is forgotten."""
        self.queue.forget(object_key(obj))

    def on_resync(self, obj: dict[str, Any]) -> None:
        """Periodic resync: every cached object not ignored is queued again."""
        if not is_ignored(obj):
            self._enqueue(obj)

    # ------------------------------------------------------------ running
    def start_informer(self) -> None:
        """Start list-watching (the queue fills even before workers run)."""
        self.informer.start()

    def start_workers(self) -> None:
        """Start the worker threads."""
        self._threads = [
            threading.Thread(target=self._work, name=f"{self.name}-worker-{i}", daemon=True)
            for i in range(self.workers)
        ]
        for thread in self._threads:
            thread.start()

    def stop_workers(self, timeout: float = 30.0) -> bool:
        """Stop handing out keys and wait for in-flight reconciles; ``False`` on timeout."""
        self.queue.shut_down()
        drained = self.queue.drain(timeout)
        for thread in self._threads:
            thread.join(max(0.0, timeout))
        return drained

    def stop(self, timeout: float = 30.0) -> bool:
        """Stop workers (draining) and the informer."""
        drained = self.stop_workers(timeout)
        self.informer.stop()
        return drained

    def _work(self) -> None:
        while True:
            key = self.queue.get()
            if key is None:
                return
            try:
                self.process(key)
            finally:
                self.queue.done(key)

    def process(self, key: Key) -> None:
        """Reconcile one key and apply the requeue matrix to the queue."""
        namespace, name = key
        with self._lock:
            self._active += 1
            self.metrics.active_workers.labels(controller=self.name).set(self._active)
        started = time.monotonic()
        outcome = "error"
        try:
            result = self.reconciler.reconcile(namespace, name)
        except UnhandledError as exc:
            delay = self.queue.add_rate_limited(key)
            log.warning("reconcile failed: %s; retry in %.2fs", exc, delay,
                        extra=_fields(self.name, key, result="error"))
        except Exception as exc:  # a bug in a machine or client must not kill the worker
            delay = self.queue.add_rate_limited(key)
            log.error("reconcile raised %s; retry in %.2fs", type(exc).__name__, delay,
                      extra=_fields(self.name, key, result="error"))
        else:
            outcome = self._requeue(key, result)
            log.debug("reconciled: %s %s", result.kind.value, result.reason,
                      extra=_fields(self.name, key, result=outcome))
        finally:
            elapsed = time.monotonic() - started
            self.metrics.reconciled(self.name, outcome, elapsed)
            with self._lock:
                self._active -= 1
                self.metrics.active_workers.labels(controller=self.name).set(self._active)

    def _requeue(self, key: Key, result: Result) -> str:
        queue = self.queue
        if result.kind is ResultKind.BACKOFF:
            queue.add_rate_limited(key, at_least=result.after)
            return "requeue"
        queue.forget(key)
        if result.kind is ResultKind.REQUEUE_NOW:
            queue.add(key)
            return "requeue"
        if result.kind is ResultKind.REQUEUE_AFTER:
            queue.add_after(key, result.after)
            return "requeue_after"
        return "success"


def _fields(controller: str, key: Key, **extra: Any) -> dict[str, Any]:
    return {"controller": controller, "object": f"{key[0]}/{key[1]}" if key[0] else key[1],
            **extra}


# ----------------------------------------------------------------- manager
def default_identity() -> str:
    """``HOSTNAME_PID``: unique per replica (the pod name in a cluster)."""
    return f"{socket.gethostname()}_{os.getpid()}"


@attrs.frozen
class ManagerOptions:
    """How the operator runs. Times are seconds.

    ``workers`` is per kind. ``namespace`` ``None`` watches all namespaces.
    Backoff: per item from ``backoff_base`` doubling to ``backoff_cap``, and
    an overall bucket of ``qps`` / ``burst``. ``leader_election`` campaigns
    for ``lease_name`` in ``lease_namespace`` (suffixed with the shard when
    ``shard_count`` > 1). ``probe_address`` ``(host, port)`` serves metrics and
    probes; ``None`` disables it. ``drain_timeout`` bounds the wait for
    in-flight reconciles on shutdown. ``reads_ttl`` is how long a reconciler
    reuses a namespace's annotations and a provider config with its
    credentials (saving three API reads per reconcile; a rotated credential
    is picked up within that time). ``allow_cross_namespace_secrets`` lets a
    namespaced object write its connection Secret into another namespace.
    """

    workers: int = 2
    namespace: str | None = None
    label_selector: str | None = None
    informer: InformerOptions = attrs.field(factory=InformerOptions)
    backoff_base: float = 1.0
    backoff_cap: float = 60.0
    qps: float = 10.0
    burst: int = 100
    leader_election: bool = False
    lease_name: str = "lifecycle-operator"
    lease_namespace: str = "default"
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    identity: str = attrs.field(factory=default_identity)
    shard_index: int = 0
    shard_count: int = 1
    operator_id: str | None = None
    default_policy: ReconcilePolicy = ReconcilePolicy.MANAGE
    probe_address: tuple[str, int] | None = None
    drain_timeout: float = 30.0
    reads_ttl: float = 5.0
    allow_cross_namespace_secrets: bool = False

    def __attrs_post_init__(self) -> None:
        if self.shard_count < 1 or not 0 <= self.shard_index < self.shard_count:
            raise ValueError("need 0 <= shard_index < shard_count")


ReconcilerFactory = Callable[[Any, Kind, Connector, "ManagerOptions"], Reconciles]


def engine_reconciler(cluster: Any, kind: Kind, connector: Connector,
                      options: ManagerOptions) -> Reconciles:
    """The engine's :class:`~lifecycle.runtime.reconciler.Reconciler` for one kind."""
    return Reconciler(cluster, kind, connector, operator_id=options.operator_id,
                      default_policy=options.default_policy, reads_ttl=options.reads_ttl,
                      allow_cross_namespace_secrets=options.allow_cross_namespace_secrets)


class Manager:
    """Controllers for several kinds, with optional leader election, metrics and probes."""

    def __init__(
        self,
        cluster: Any,
        kinds: Sequence[tuple[Kind, Connector]],
        options: ManagerOptions = ManagerOptions(),
        *,
        metrics: OperatorMetrics | None = None,
        reconciler_factory: ReconcilerFactory = engine_reconciler,
    ) -> None:
        if not kinds:
            raise ValueError("a manager needs at least one kind")
        self.cluster = cluster
        self.options = options
        self.metrics = metrics or OperatorMetrics()
        self.controllers: dict[str, Controller] = {}
        for kind, connector in kinds:
            name = kind.kind.lower()
            queue = WorkQueue(name, metrics=self.metrics, rate_limiter=default_rate_limiter(
                options.backoff_base, options.backoff_cap, options.qps, options.burst))
            self.controllers[kind.kind] = Controller(
                name, reconciler_factory(cluster, kind, connector, options),
                cluster.list_watcher(kind.api_version, kind.kind, options.namespace,
                                     options.label_selector),
                workers=options.workers, queue=queue, informer_options=options.informer,
                metrics=self.metrics, owns=self._owns,
            )
        self.elector: LeaderElector | None = None
        if options.leader_election:
            lease = options.lease_name
            if options.shard_count > 1:
                lease = f"{lease}-{options.shard_index}-of-{options.shard_count}"
            self.elector = LeaderElector(
                cluster,
                LeaseOptions(lease, options.lease_namespace, options.identity,
                             options.lease_duration, options.renew_deadline,
                             options.retry_period),
                on_started=self._start_workers, on_stopped=self._stop_workers)
            self.metrics.leader.labels(name=lease).set(0)
        self.probes: ProbeServer | None = None
        self._elector_thread: threading.Thread | None = None
        self._workers_running = False
        self._state_lock = threading.Lock()
        self._done = threading.Event()
        self._stopping = False

    def _owns(self, key: Key) -> bool:
        count = self.options.shard_count
        return count == 1 or shard_of(key, count) == self.options.shard_index

    # ------------------------------------------------------------ lifecycle
    def start(self) -> Manager:
        """Start probes and informers; start workers now or once elected."""
        if self.options.probe_address is not None:
            host, port = self.options.probe_address
            self.probes = ProbeServer(self.metrics, healthy=self.healthy, ready=self.ready,
                                      host=host, port=port).start()
        for controller in self.controllers.values():
            controller.start_informer()
        if self.elector is None:
            self._start_workers()
        else:
            self._elector_thread = threading.Thread(target=self._campaign, name="leader",
                                                    daemon=True)
            self._elector_thread.start()
        log.info("operator started", extra={"kinds": sorted(self.controllers),
                                            "identity": self.options.identity})
        return self

    def _campaign(self) -> None:
        assert self.elector is not None
        self.elector.run()
        if self.elector.lost:
            self._done.set()  # losing the lease ends the process (it restarts as a standby)

    def _start_workers(self) -> None:
        with self._state_lock:
            if self._workers_running or self._stopping:
                return
            self._workers_running = True
        if self.elector is not None:
            self.metrics.leader.labels(name=self.elector.options.name).set(1)
        for controller in self.controllers.values():
            controller.start_workers()

    def _stop_workers(self) -> None:
        with self._state_lock:
            running, self._workers_running = self._workers_running, False
        if not running:
            return
        for controller in self.controllers.values():
            controller.stop_workers(self.options.drain_timeout)
        if self.elector is not None:
            self.metrics.leader.labels(name=self.elector.options.name).set(0)

    def stop(self) -> None:
        """Graceful shutdown: stop taking work, finish in-flight reconciles, release the lease."""
        with self._state_lock:
            self._stopping = True
        if self.elector is not None:
            self.elector.stop()  # its exit path stops the workers, then releases
            if self._elector_thread is not None:
                self._elector_thread.join(self.options.drain_timeout + 5)
        self._stop_workers()
        for controller in self.controllers.values():
            controller.informer.stop()
        if self.probes is not None:
            self.probes.stop()
        self._done.set()
        log.info("operator stopped", extra={"identity": self.options.identity})

    def crash(self) -> None:
        """Stop abruptly, as a killed process would: no lease release, no draining wait."""
        with self._state_lock:
            self._stopping = True
        if self.elector is not None:
            self.elector.crash()
        for controller in self.controllers.values():
            controller.queue.shut_down()
            controller.informer.stop(timeout=0.5)
        if self.probes is not None:
            self.probes.stop()
        self._done.set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the manager stops (or loses its lease)."""
        return self._done.wait(timeout)

    @property
    def lost_lease(self) -> bool:
        """Whether leadership was lost (the process should exit non-zero)."""
        return self.elector is not None and self.elector.lost

    # -------------------------------------------------------------- probes
    def healthy(self) -> bool:
        """Liveness: the lease was not lost and every informer thread runs."""
        if self.lost_lease:
            return False
        return all(t.is_alive() for c in self.controllers.values()
                   for t in c.informer._threads) or self._stopping

    def ready(self) -> bool:
        """Readiness: every informer has synced its first list and we are not stopping."""
        return not self._stopping and all(c.informer.synced.is_set()
                                          for c in self.controllers.values())

    def wait_synced(self, timeout: float = 30.0) -> bool:
        """Block until every informer has synced."""
        deadline = time.monotonic() + timeout
        return all(c.informer.wait_synced(max(0.0, deadline - time.monotonic()))
                   for c in self.controllers.values())
