"""Prometheus metrics with controller-runtime's names, and the probe endpoint.

:class:`OperatorMetrics` holds, in its own registry:

- ``controller_runtime_reconcile_total{controller,result}`` (result ``success``,
  ``error``, ``requeue``, ``requeue_after``), ``controller_runtime_reconcile_errors_total``,
  ``controller_runtime_reconcile_time_seconds``, ``controller_runtime_active_workers``,
  ``controller_runtime_max_concurrent_reconciles``;
- ``workqueue_depth``, ``workqueue_adds_total``, ``workqueue_retries_total``,
  ``workqueue_queue_duration_seconds``, ``workqueue_work_duration_seconds``,
  ``workqueue_unfinished_work_seconds``, ``workqueue_longest_running_processor_seconds``
  (label ``name``);
- ``leader_election_master_status{name}``;
- ``lifecycle_resources{kind,state}``: cached objects per machine state,
  ``lifecycle_stuck_resources{kind,state}``: those whose ``Stuck`` condition is
  True (held in a state past its ``Timing.max_in_state``), and
  ``lifecycle_watch_relists_total{kind}``/``lifecycle_watch_errors_total{kind}``.

:class:`ProbeServer` serves ``/metrics``, ``/healthz`` and ``/readyz``.
"""

from __future__ import annotations

import collections
import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from lifecycle.core.objects import status as stored_status
from lifecycle.core.vocabulary import ConditionTypes

__all__ = ["OperatorMetrics", "ProbeServer"]

log = logging.getLogger("lifecycle.driver.metrics")

_RECONCILE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45,
                      0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0,
                      4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60)
_QUEUE_BUCKETS = tuple(10.0**e for e in range(-8, 2))


class OperatorMetrics:
    """The operator's metrics, in ``registry`` (a fresh one by default)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.reconcile_total = Counter(
            "controller_runtime_reconcile_total",
            "Total number of reconciliations per controller", ["controller", "result"],
            registry=r)
        self.reconcile_errors = Counter(
            "controller_runtime_reconcile_errors_total",
            "Total number of reconciliation errors per controller", ["controller"], registry=r)
        self.reconcile_time = Histogram(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller", ["controller"],
            buckets=_RECONCILE_BUCKETS, registry=r)
        self.active_workers = Gauge(
            "controller_runtime_active_workers",
            "Number of currently used workers per controller", ["controller"], registry=r)
        self.max_concurrent = Gauge(
            "controller_runtime_max_concurrent_reconciles",
            "Maximum number of concurrent reconciles per controller", ["controller"],
            registry=r)
        self.depth = Gauge("workqueue_depth", "Current depth of workqueue", ["name"],
                           registry=r)
        self.adds = Counter("workqueue_adds_total", "Total number of adds handled by workqueue",
                            ["name"], registry=r)
        self.retries = Counter("workqueue_retries_total",
                               "Total number of retries handled by workqueue", ["name"],
                               registry=r)
        self.queue_latency = Histogram(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested",
            ["name"], buckets=_QUEUE_BUCKETS, registry=r)
        self.work_duration = Histogram(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes", ["name"],
            buckets=_QUEUE_BUCKETS, registry=r)
        self.unfinished = Gauge(
            "workqueue_unfinished_work_seconds",
            "How many seconds of work has been done that is in progress", ["name"], registry=r)
        self.longest = Gauge(
            "workqueue_longest_running_processor_seconds",
            "How many seconds has the longest running processor for workqueue been running",
            ["name"], registry=r)
        self.leader = Gauge("leader_election_master_status",
                            "Whether this replica is the leader (1) or not (0)", ["name"],
                            registry=r)
        self._informers: dict[str, Any] = {}
        self._informers_lock = threading.Lock()
        self._children: dict[tuple[int, tuple[str, ...]], Any] = {}
        r.register(_InformerCollector(self))

    def _child(self, metric: Any, *values: str) -> Any:
        """``metric.labels(*values)``, looked up once: the hot paths record through it."""
        key = (id(metric), values)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*values)
        return child

    # -------------------------------------------------------------- queues
    def watch_queue(self, name: str, queue: Any) -> None:
        """Export depth and in-flight gauges of a :class:`~lifecycle.driver.queue.WorkQueue`."""
        self.depth.labels(name=name).set_function(lambda: len(queue))
        self.unfinished.labels(name=name).set_function(
            lambda: sum(queue.in_flight().values()))
        self.longest.labels(name=name).set_function(
            lambda: max(queue.in_flight().values(), default=0.0))
        self.adds.labels(name=name)
        self.retries.labels(name=name)

    def queue_added(self, name: str) -> None:
        """Count one add."""
        self._child(self.adds, name).inc()

    def queue_started(self, name: str, waited: float) -> None:
        """Observe how long a key waited."""
        self._child(self.queue_latency, name).observe(waited)

    def queue_finished(self, name: str, worked: float) -> None:
        """Observe how long a key was processed."""
        self._child(self.work_duration, name).observe(worked)

    def queue_retried(self, name: str) -> None:
        """Count one rate-limited retry."""
        self._child(self.retries, name).inc()

    # --------------------------------------------------------- controllers
    def controller(self, name: str, workers: int) -> None:
        """Initialise a controller's series (so they exist at zero)."""
        self.max_concurrent.labels(controller=name).set(workers)
        self.active_workers.labels(controller=name).set(0)
        for result in ("success", "error", "requeue", "requeue_after"):
            self.reconcile_total.labels(controller=name, result=result)
        self.reconcile_errors.labels(controller=name)

    def worker_started(self, name: str) -> None:
        """One more worker of controller ``name`` is reconciling."""
        self._child(self.active_workers, name).inc()

    def worker_finished(self, name: str) -> None:
        """One worker of controller ``name`` has finished its reconcile."""
        self._child(self.active_workers, name).dec()

    def reconciled(self, name: str, result: str, seconds: float) -> None:
        """Record one finished reconcile."""
        self._child(self.reconcile_total, name, result).inc()
        if result == "error":
            self._child(self.reconcile_errors, name).inc()
        self._child(self.reconcile_time, name).observe(seconds)

    def watch_informer(self, kind: str, informer: Any) -> None:
        """Export the per-state gauge and watch counters of an informer."""
        with self._informers_lock:
            self._informers[kind] = informer

    def informers(self) -> list[tuple[str, Any]]:
        """The informers whose caches feed ``lifecycle_resources``."""
        with self._informers_lock:
            return list(self._informers.items())

    def render(self) -> bytes:
        """The exposition text of every metric."""
        return generate_latest(self.registry)


class _InformerCollector:
    """Computes ``lifecycle_resources`` from the informers' caches at scrape time."""

    def __init__(self, metrics: OperatorMetrics) -> None:
        self.metrics = metrics

    def describe(self) -> Iterable[Any]:
        return []

    def collect(self) -> Iterator[Any]:
        resources = GaugeMetricFamily("lifecycle_resources",
                                      "Objects per kind and lifecycle machine state",
                                      labels=["kind", "state"])
        relists = CounterMetricFamily("lifecycle_watch_relists",
                                      "Re-lists after a watch expired (410 Gone)",
                                      labels=["kind"])
        errors = CounterMetricFamily("lifecycle_watch_errors",
                                     "Failed list or watch requests", labels=["kind"])
        stuck = GaugeMetricFamily("lifecycle_stuck_resources",
                                  "Objects held in a state longer than its maximum time",
                                  labels=["kind", "state"])
        for kind, informer in self.metrics.informers():
            counts: collections.Counter[str] = collections.Counter()
            stuck_counts: collections.Counter[str] = collections.Counter()
            for obj in informer.items():
                status = stored_status(obj)
                state = status.get("state")
                counts[str(state or "unknown")] += 1
                if _is_stuck(status):
                    stuck_counts[str(state or "unknown")] += 1
            for state, count in sorted(counts.items()):
                resources.add_metric([kind, state], count)
            for state, count in sorted(stuck_counts.items()):
                stuck.add_metric([kind, state], count)
            relists.add_metric([kind], informer.stats.relists_after_gone)
            errors.add_metric([kind], informer.stats.errors)
        yield resources
        yield stuck
        yield relists
        yield errors


def _is_stuck(status: Mapping[str, Any]) -> bool:
    """Whether a stored status carries ``Stuck=True``."""
    conditions = status.get("conditions")
    return isinstance(conditions, list) and any(
        isinstance(c, dict) and c.get("type") == ConditionTypes.STUCK and c.get("status") == "True"
        for c in conditions)


class ProbeServer:
    """Serves ``/metrics``, ``/healthz`` and ``/readyz`` on ``host:port`` (0: a free port).

    ``healthy`` and ``ready`` are called per probe; a false answer is a 500.
    """

    def __init__(self, metrics: OperatorMetrics, *, healthy: Callable[[], bool],
                 ready: Callable[[], bool], host: str = "127.0.0.1", port: int = 0) -> None:
        self.metrics = metrics
        self.healthy = healthy
        self.ready = ready
        handler = type("ProbeHandler", (_ProbeHandler,), {"probe": self})
        self._server = ThreadingHTTPServer((host, port), handler)
        self._server.daemon_threads = True
        bound_host, bound_port = self._server.socket.getsockname()[:2]
        #: ``http://HOST:PORT`` (kept after :meth:`stop`, for messages and checks).
        self.url = f"http://{bound_host}:{bound_port}"
        self._thread: threading.Thread | None = None

    def start(self) -> ProbeServer:
        """Serve in a daemon thread."""
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.2}, name="probes",
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving."""
        self._server.shutdown()
        self._server.server_close()


class _ProbeHandler(BaseHTTPRequestHandler):
    """Answers probes for :attr:`probe` (each server's subclass sets it)."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    probe: ProbeServer

    def log_message(self, format: str, *args: Any) -> None:
        log.debug(format, *args)

    def do_GET(self) -> None:
        probe = self.probe
        path = self.path.split("?")[0]
        content_type = "text/plain; charset=utf-8"
        try:
            if path == "/metrics":
                status, body, content_type = 200, probe.metrics.render(), CONTENT_TYPE_LATEST
            elif path in ("/healthz", "/livez"):
                ok = probe.healthy()
                status, body = (200, b"ok") if ok else (500, b"unhealthy")
            elif path == "/readyz":
                ok = probe.ready()
                status, body = (200, b"ok") if ok else (500, b"not ready")
            else:
                status, body = 404, b"not found"
        except Exception as exc:  # a probe must answer, never hang
            status, body = 500, f"probe failed: {type(exc).__name__}".encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
