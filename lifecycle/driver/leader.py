"""Leader election on a ``coordination.k8s.io/v1`` Lease.

One replica holds the Lease and renews it every ``retry_period``; the others
watch it. Expiry is judged with the local clock from when a replica last saw
the Lease *change* (not from the timestamps written in it), so clock skew
between nodes cannot hand the lease to two replicas. A standby takes over
once the record has not changed for ``lease_duration``. A leader that cannot
renew for ``renew_deadline`` steps down. On a graceful stop the leader
releases the Lease (empty holder, 1 s duration) so a standby takes over at
once.

Every write carries the Lease's resourceVersion, so two candidates racing for
an expired lease cannot both win: one gets a 409.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import attrs

from lifecycle.core.objects import spec as lease_spec
from lifecycle.kube.cluster import Cluster
from lifecycle.kube.errors import AlreadyExists, ApiError, Conflict, NotFound

__all__ = ["LeaderElector", "LeaseOptions"]

log = logging.getLogger("lifecycle.driver.leader")

LEASE_API = "coordination.k8s.io/v1"


@attrs.frozen
class LeaseOptions:
    """Which Lease to hold and how (seconds); defaults are client-go's."""

    name: str
    namespace: str
    identity: str
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0

    def __attrs_post_init__(self) -> None:
        if not self.lease_duration > self.renew_deadline > self.retry_period > 0:
            raise ValueError("need lease_duration > renew_deadline > retry_period > 0")
        if not self.identity:
            raise ValueError("identity must not be empty")
        if not self.name or not self.namespace:
            raise ValueError("the Lease needs a name and a namespace")


def _micro_time(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    """Campaigns for a Lease; calls ``on_started`` when leading and ``on_stopped`` when not.

    :meth:`run` blocks until :meth:`stop` (which releases a held lease) or
    until leadership is lost. ``clock`` is monotonic seconds; ``sleep(event,
    seconds)`` waits between attempts and returns whether ``event`` (the stop
    signal) is set. Tests inject both to run the election on virtual time.
    """

    def __init__(self, cluster: Cluster, options: LeaseOptions, *,
                 on_started: Callable[[], None] = lambda: None,
                 on_stopped: Callable[[], None] = lambda: None,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[threading.Event, float], bool] | None = None) -> None:
        self.cluster = cluster
        self.options = options
        self.on_started = on_started
        self.on_stopped = on_stopped
        self._clock = clock
        self._wait = sleep or (lambda event, seconds: event.wait(seconds))
        self._leading = threading.Event()
        self._stop = threading.Event()
        self._crashed = False
        self._observed: dict[str, Any] | None = None
        self._observed_at = 0.0
        self._lease: dict[str, Any] | None = None
        self.transitions = 0
        self.lost = False

    @property
    def is_leader(self) -> bool:
        """Whether this replica holds the lease now."""
        return self._leading.is_set()

    def wait_leading(self, timeout: float | None = None) -> bool:
        """Block until this replica leads (or ``timeout`` passes)."""
        return self._leading.wait(timeout)

    def run(self) -> None:
        """Campaign, then renew while leading; returns on stop or loss of the lease."""
        opts = self.options
        while not self._stop.is_set():
            if self.try_acquire_or_renew():
                break
            self._wait(self._stop, opts.retry_period)
        if self._stop.is_set():
            return
        self._leading.set()
        log.info("became leader", extra={"lease": opts.name, "identity": opts.identity})
        try:
            self.on_started()
            last_renew = self._clock()
            while not self._wait(self._stop, opts.retry_period):
                if self.try_acquire_or_renew():
                    last_renew = self._clock()
                elif self._clock() - last_renew >= opts.renew_deadline:
                    self.lost = True
                    log.error("lost the lease: not renewed within %.1fs", opts.renew_deadline,
                              extra={"lease": opts.name, "identity": opts.identity})
                    break
        finally:
            self._leading.clear()
            if not self._crashed:
                self.on_stopped()
            if not self.lost and not self._crashed:
                self.release()

    def stop(self) -> None:
        """End :meth:`run`; a held lease is released (unless :meth:`crash` was called)."""
        self._stop.set()

    def crash(self) -> None:
        """Stop renewing without releasing or notifying, as a killed process would."""
        self._crashed = True
        self._stop.set()

    # -------------------------------------------------------------- lease
    def try_acquire_or_renew(self) -> bool:
        """One attempt: create, take over (if free or expired) or renew the Lease.

        Returns whether this replica holds the Lease afterwards. Never raises
        for API errors: they count as a failed attempt.
        """
        opts = self.options
        stamp = _micro_time(datetime.now(UTC))
        try:
            current = self.cluster.get(LEASE_API, "Lease", opts.namespace, opts.name)
        except NotFound:
            body = {"apiVersion": LEASE_API, "kind": "Lease",
                    "metadata": {"name": opts.name, "namespace": opts.namespace},
                    "spec": {"holderIdentity": opts.identity,
                             "leaseDurationSeconds": _seconds(opts.lease_duration),
                             "acquireTime": stamp, "renewTime": stamp,
                             "leaseTransitions": 0}}
            try:
                self._lease = self.cluster.create(body)
            except (AlreadyExists, Conflict):
                return False
            except ApiError as exc:
                log.warning("cannot create lease: %s", exc)
                return False
            self._observe(self._lease)
            return True
        except ApiError as exc:
            log.warning("cannot read lease: %s", exc)
            return False
        spec = lease_spec(current)
        holder = spec.get("holderIdentity") or ""
        if spec != (self._observed or {}).get("spec"):
            self._observe(current)
        if holder and holder != opts.identity:
            duration = float(spec.get("leaseDurationSeconds") or opts.lease_duration)
            if self._clock() < self._observed_at + duration:
                return False  # held by someone else and not expired
        new_spec = dict(spec)
        new_spec["holderIdentity"] = opts.identity
        new_spec["leaseDurationSeconds"] = _seconds(opts.lease_duration)
        new_spec["renewTime"] = stamp
        if holder != opts.identity:
            new_spec["acquireTime"] = stamp
            new_spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
        body = dict(current)
        body["spec"] = new_spec
        try:
            self._lease = self.cluster.replace(body)
        except ApiError as exc:
            if not isinstance(exc, Conflict):
                log.warning("cannot renew lease: %s", exc)
            return False
        if holder != opts.identity:
            self.transitions += 1
        self._observe(self._lease)
        return True

    def _observe(self, lease: dict[str, Any]) -> None:
        self._observed = lease
        self._observed_at = self._clock()

    def release(self) -> bool:
        """Give the lease up if this replica holds it: empty holder, 1 s duration."""
        lease = self._lease
        holder = lease_spec(lease).get("holderIdentity") if lease is not None else None
        if lease is None or holder != self.options.identity:
            return False
        body = dict(lease)
        body["spec"] = {**lease["spec"], "holderIdentity": None, "leaseDurationSeconds": 1,
                        "renewTime": _micro_time(datetime.now(UTC))}
        try:
            self._lease = self.cluster.replace(body)
        except ApiError as exc:
            log.warning("cannot release lease: %s", exc)
            return False
        log.info("released the lease", extra={"lease": self.options.name})
        return True


def _seconds(value: float) -> int:
    return max(1, round(value))
