"""The operator: one controller per kind, leader election, metrics and probes.

A :class:`Controller` feeds a :class:`~lifecycle.driver.queue.WorkQueue` from
an :class:`~lifecycle.driver.informer.Informer` through the event filters
(:func:`add_triggers`, :func:`update_triggers`) and runs N workers that call
the engine's reconciler and apply its :class:`~lifecycle.core.values.Result`
to the queue with :func:`~lifecycle.core.requeue.apply_result` (the requeue
matrix; the harness's queue on virtual time applies it with the same function).

A :class:`Manager` runs controllers for any number of kinds: managed kinds,
claims and parents, each with the reconciler and extra watches
:func:`lifecycle.driver.kinds.controller_spec` chooses. Informers start at
once on every replica (a warm standby has its queue filled); workers start
only while this replica leads, when leader election is on. Keys can be
sharded across replicas: each shard elects its own leader. Kinds whose timing
sets ``sweep`` are also swept for drift while the workers run
(:mod:`lifecycle.driver.sweep`).

Every reconcile gets a short reconcile ID, on each line logged about it: the
debug ``reconciled`` line, a backoff or handled error (info, with the reason),
and an unexpected exception (error, with a traceback of code locations only:
exception messages and values are left out, so no secret reaches the log).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, cast

import attrs

from lifecycle.core.contract import Connector
from lifecycle.core.decide import ReconcilePolicy
from lifecycle.core.errors import UnhandledError
from lifecycle.core.kind import (
    PROVIDER_CONFIG_API,
    PROVIDER_CONFIG_KIND,
    Kind,
)
from lifecycle.core.requeue import Reconciles, apply_result
from lifecycle.core.values import ResultKind
from lifecycle.driver.filters import (
    add_triggers,
    is_ignored,
    meta_field,
    one_line,
    redacted_traceback,
    shard_of,
    update_triggers,
)
from lifecycle.driver.informer import Informer, InformerOptions, ListWatcher, object_key
from lifecycle.driver.kinds import (
    Target,
    Watch,
    controller_spec,
    engine_reconciler,
    register_types,
)
from lifecycle.driver.leader import LeaderElector, LeaseOptions
from lifecycle.driver.metrics import OperatorMetrics, ProbeServer
from lifecycle.driver.queue import WorkQueue, default_rate_limiter
from lifecycle.driver.references import follow_references
from lifecycle.driver.sweep import DriftSweeper, sweep_targets
from lifecycle.runtime.providerconfigs import ProviderConfigReconciler, config_of
from lifecycle.runtime.reads import DEFAULT_READS_TTL

__all__ = [
    "Controller",
    "Manager",
    "ManagerOptions",
    "Reconciles",
    "add_triggers",
    "engine_reconciler",
    "redacted_traceback",
    "shard_of",
    "update_triggers",
]

log = logging.getLogger("lifecycle.driver.manager")

Key = tuple[str | None, str]


# -------------------------------------------------------------- controller
class _WatchHandler:
    """Turns changes of a watched kind into keys of the controller's own kind."""

    def __init__(self, controller: Controller, watch: Watch) -> None:
        self.controller = controller
        self.watch = watch

    def _queue(self, *objs: dict[str, Any]) -> None:
        cached = self.controller.informer.items
        keys = {key for obj in objs for key in self.watch.keys(obj, cached)}
        for key in sorted(keys, key=lambda k: (k[0] or "", k[1])):
            self.controller.enqueue(key)

    def on_add(self, obj: dict[str, Any]) -> None:
        """A watched object appeared: queue the keys it maps to."""
        self._queue(obj)

    def on_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        """A watched object changed: queue the keys of its old and new versions."""
        version = meta_field(new, "resourceVersion")
        if meta_field(old, "resourceVersion") != version or not version:
            self._queue(old, new)

    def on_delete(self, obj: dict[str, Any]) -> None:
        """A watched object is gone: queue the keys it mapped to."""
        self._queue(obj)

    def on_resync(self, obj: dict[str, Any]) -> None:
        """Nothing: the controller's own resync queues its objects."""


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
        self.watches: list[Informer] = []
        #: Called with (old, new) for every add (old None), update and delete (new None)
        #: of the controller's own objects: how another controller follows this kind.
        self.followers: list[Callable[[dict[str, Any] | None, dict[str, Any] | None], None]] = []
        self._threads: list[threading.Thread] = []
        self.metrics.controller(name, workers)
        self.metrics.watch_queue(name, self.queue)
        self.metrics.watch_informer(name, self.informer)

    def watch(self, watch: Watch, source: ListWatcher) -> Informer:
        """Also watch another kind: its changes queue the keys ``watch.keys`` maps them to."""
        informer = Informer(f"{self.name}/{watch.kind.lower()}", source,
                            _WatchHandler(self, watch), self.informer.options)
        self.watches.append(informer)
        return informer

    @property
    def informers(self) -> list[Informer]:
        """The controller's own informer followed by those of its extra watches."""
        return [self.informer, *self.watches]

    # ------------------------------------------------------------ handler
    def enqueue(self, key: Key) -> None:
        """Queue ``key`` if this replica handles it."""
        if self.owns(key):
            self.queue.add(key)

    def _enqueue(self, obj: dict[str, Any]) -> None:
        self.enqueue(object_key(obj))

    def on_add(self, obj: dict[str, Any]) -> None:
        """A new object: queue it unless ignored."""
        if add_triggers(obj):
            self._enqueue(obj)
        for follow in self.followers:
            follow(None, obj)

    def on_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        """A change: queue it if the filters say so."""
        if update_triggers(old, new):
            self._enqueue(new)
        for follow in self.followers:
            follow(old, new)

    def on_delete(self, obj: dict[str, Any]) -> None:
        """The object is gone: nothing to reconcile; its backoff is forgotten."""
        self.queue.forget(object_key(obj))
        for follow in self.followers:
            follow(obj, None)

    def on_resync(self, obj: dict[str, Any]) -> None:
        """Periodic resync: every cached object not ignored is queued again."""
        if not is_ignored(obj):
            self._enqueue(obj)

    # ------------------------------------------------------------ running
    def start_informer(self) -> None:
        """Start list-watching, extra watches included (the queue fills before workers run)."""
        for informer in self.informers:
            informer.start()

    def stop_informers(self, timeout: float = 5.0) -> None:
        """Stop the controller's informers."""
        for informer in self.informers:
            informer.stop(timeout)

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
        self.stop_informers()
        return drained

    def _work(self) -> None:
        while True:
            key = self.queue.get()
            if key is None:
                return
            try:
                self.process(cast(Key, key))  # the queue holds only this controller's keys
            finally:
                self.queue.done(key)

    def process(self, key: Key) -> None:
        """Reconcile one key and apply the requeue matrix to the queue."""
        namespace, name = key
        self.metrics.worker_started(self.name)
        started = time.monotonic()
        outcome = "error"
        rid = os.urandom(4).hex()
        try:
            result = self.reconciler.reconcile(namespace, name)
        except UnhandledError as exc:
            _, delay = apply_result(self.queue, key, None)
            reason = type(exc.__cause__).__name__ if exc.__cause__ else "UnhandledError"
            log.info("reconcile error: %s; retry in %.2fs", one_line(str(exc)), delay,
                     extra=_fields(self.name, key, rid, result="error", reason=reason))
        except Exception as exc:  # a bug in a machine or client must not kill the worker
            _, delay = apply_result(self.queue, key, None)
            log.error("reconcile raised %s; retry in %.2fs", type(exc).__name__, delay,
                      extra=_fields(self.name, key, rid, result="error",
                                    reason=type(exc).__name__,
                                    traceback=redacted_traceback(exc)))
        else:
            outcome, delay = apply_result(self.queue, key, result)
            fields = _fields(self.name, key, rid, result=outcome, reason=result.reason)
            if result.kind is ResultKind.BACKOFF:
                log.info("backing off: %s; retry in %.2fs", result.reason or "unspecified",
                         delay, extra=fields)
            elif result.reason == "TerminalError":
                log.info("terminal error: not retried until the object changes", extra=fields)
            log.debug("reconciled: %s %s", result.kind.value, result.reason, extra=fields)
        finally:
            elapsed = time.monotonic() - started
            self.metrics.reconciled(self.name, outcome, elapsed)
            self.metrics.worker_finished(self.name)


#: How long a change of a provider config's users waits, so that a burst is counted once:
#: a config being deleted (its release waits on the count), and a live one (the count is
#: only shown, in ``status.users``: written at most once per ten seconds of churn).
USAGE_DELAY, USAGE_REFRESH = 2.0, 10.0


def _live(obj: dict[str, Any]) -> bool:
    """Whether an object still counts as a user of its provider config."""
    meta = obj.get("metadata") or {}
    return not (meta.get("deletionTimestamp") and not meta.get("finalizers"))


def _fields(controller: str, key: Key, rid: str | None = None, **extra: Any) -> dict[str, Any]:
    fields = {"controller": controller,
              "object": f"{key[0]}/{key[1]}" if key[0] else key[1], **extra}
    if rid is not None:
        fields["reconcileID"] = rid
    return fields


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
    ``allow_adoption`` names the namespaces (``"*"``: all) whose objects may
    adopt an existing external resource with the ``lifecycle.dev/adopt``
    annotation. ``track_provider_config_usage`` runs the ProviderConfig usage
    controller (:mod:`lifecycle.runtime.providerconfigs`): a config in use keeps
    a finalizer, and its status counts its users. ``journal_key`` seals the
    intent journal (:mod:`lifecycle.runtime.journalkey`; None: a key per process).
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
    reads_ttl: float = DEFAULT_READS_TTL
    allow_cross_namespace_secrets: bool = False
    allow_adoption: frozenset[str] = frozenset()
    track_provider_config_usage: bool = True
    journal_key: bytes | None = attrs.field(default=None, repr=False)

    def __attrs_post_init__(self) -> None:
        if self.shard_count < 1 or not 0 <= self.shard_index < self.shard_count:
            raise ValueError("need 0 <= shard_index < shard_count")


ReconcilerFactory = Callable[[Any, Kind, Connector, "ManagerOptions"], Reconciles]


class Manager:
    """Controllers for several kinds, with optional leader election, metrics and probes.

    ``kinds`` pairs each target with its connector: a managed
    :class:`~lifecycle.core.kind.Kind` needs one; a
    :class:`~lifecycle.core.claims.ClaimBinding` or a
    :class:`~lifecycle.runtime.children.ParentKind` takes ``None``.
    ``reconciler_factory`` builds managed kinds' reconcilers.
    """

    def __init__(
        self,
        cluster: Any,
        kinds: Sequence[tuple[Target, Connector | None]],
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
        register_types(cluster, [target for target, _ in kinds])
        for target, connector in kinds:
            spec = controller_spec(cluster, target, connector, options, reconciler_factory)
            if spec.kind in self.controllers:
                raise ValueError(f"{spec.kind} is listed twice")
            controller = self.controllers[spec.kind] = self._controller(
                spec.name, spec.reconciler,
                cluster.list_watcher(spec.api_version, spec.kind, options.namespace,
                                     options.label_selector), options.workers)
            for watch in spec.watches:
                controller.watch(watch, cluster.list_watcher(
                    watch.api_version, watch.kind,
                    None if watch.all_namespaces else options.namespace))
        follow_references(self, [t for t, _ in kinds])
        swept = sweep_targets(kinds, self.controllers)  # kinds with a drift sweep
        self.sweeper = DriftSweeper(cluster, swept) if swept else None
        if options.track_provider_config_usage:
            self._track_provider_configs(cluster, [t for t, _ in kinds])
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
        #: Called last by :meth:`stop` and :meth:`crash`: what the manager's helpers started
        #: alongside it (the cached reader's Secret informer, for instance).
        self.closers: list[Callable[[], None]] = []
        self._stopping = False

    def _controller(self, name: str, reconciler: Reconciles, source: ListWatcher,
                    workers: int) -> Controller:
        """A controller with the options' rate limiter, informer options and sharding."""
        options = self.options
        queue = WorkQueue(name, metrics=self.metrics, rate_limiter=default_rate_limiter(
            options.backoff_base, options.backoff_cap, options.qps, options.burst))
        return Controller(name, reconciler, source, workers=workers, queue=queue,
                          informer_options=options.informer, metrics=self.metrics,
                          owns=self._owns)

    def _track_provider_configs(self, cluster: Any, targets: Sequence[Target]) -> None:
        """Run the ProviderConfig usage controller, following the managed kinds' informers.

        A claim kind never reaches this point: :func:`controller_spec` refuses it.
        """
        managed = [t for t in targets if isinstance(t, Kind)]
        for api_version in dict.fromkeys(k.provider_config_api for k in managed):
            self._track_provider_config(cluster, managed, api_version)

    def _track_provider_config(self, cluster: Any, managed: Sequence[Kind],
                               api_version: str) -> None:
        controllers = self.controllers
        usage = ProviderConfigReconciler(
            cluster, managed, lambda kind: controllers[kind.kind].informer.items(),
            api_version=api_version, namespace=self.options.namespace)
        name = "providerconfig" if api_version == PROVIDER_CONFIG_API else (
            f"providerconfig.{api_version.partition('/')[0]}")
        controller = self.controllers[f"{PROVIDER_CONFIG_KIND}.{api_version}"] = (
            self._controller(name, usage,
                             cluster.list_watcher(api_version, PROVIDER_CONFIG_KIND, None), 1))

        def follow(old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
            before = None if old is None else (config_of(old), _live(old))
            after = None if new is None else (config_of(new), _live(new))
            if before != after:
                for name in {s[0] for s in (before, after) if s is not None}:
                    if controller.owns((None, name)):  # a burst of users: one pass, one write
                        config = controller.informer.get((None, name)) or {}
                        deleting = (config.get("metadata") or {}).get("deletionTimestamp")
                        controller.queue.add_after(
                            (None, name), USAGE_DELAY if deleting else USAGE_REFRESH)

        for kind in usage.kinds:
            controllers[kind.kind].followers.append(follow)

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
            load = getattr(getattr(controller.reconciler, "names", None), "load", None)
            if load is not None:  # the external-name index: listed now, not in a pass
                load()
            controller.start_workers()
        if self.sweeper is not None:
            self.sweeper.start()

    def _stop_workers(self) -> None:
        with self._state_lock:
            running, self._workers_running = self._workers_running, False
        if not running:
            return
        if self.sweeper is not None:
            self.sweeper.stop()
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
            controller.stop_informers()
        if self.probes is not None:
            self.probes.stop()
        for close in self.closers:
            close()
        self._done.set()
        log.info("operator stopped", extra={"identity": self.options.identity})

    def crash(self) -> None:
        """Stop abruptly, as a killed process would: no lease release, no draining wait."""
        with self._state_lock:
            self._stopping = True
        if self.elector is not None:
            self.elector.crash()
        if self.sweeper is not None:
            self.sweeper.stop(0.5)
        for controller in self.controllers.values():
            controller.queue.shut_down()
            controller.stop_informers(timeout=0.5)
        if self.probes is not None:
            self.probes.stop()
        for close in self.closers:
            close()
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
                   for i in c.informers for t in i._threads) or self._stopping

    def ready(self) -> bool:
        """Readiness: every informer has synced its first list and we are not stopping."""
        return not self._stopping and all(i.synced.is_set() for c in self.controllers.values()
                                          for i in c.informers)

    def wait_synced(self, timeout: float = 30.0) -> bool:
        """Block until every informer has synced."""
        deadline = time.monotonic() + timeout
        return all(i.wait_synced(max(0.0, deadline - time.monotonic()))
                   for c in self.controllers.values() for i in c.informers)
