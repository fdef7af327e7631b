"""The drift sweep: per provider config, one catalogue read for all of a kind's Ready objects.

A kind whose timing sets ``sweep`` (:class:`lifecycle.core.machine.Timing`) and whose
connector offers ``sweep`` (:class:`Sweeps`) is swept by a :class:`DriftSweeper` while
the manager's workers run: every ``sweep`` seconds, the kind's Ready objects (from the
controller's informer, so no API call is made per object) are grouped by the
ProviderConfig they name; for each config, its credentials are read as a pass reads
them (:func:`lifecycle.runtime.reads.provider_config`, from the cached reader's
informers when the manager has them) and the connector reads the catalogue state of
all its objects at once. The keys it names as drifted are queued, and the normal
reconcile (observe, then update) repairs them. The sweep writes nothing, neither to
the provider nor to the API server.

Who decides what is read, and with what: the server and the credentials are the
ProviderConfig's (cluster-scoped, written by the operator's administrator), reached
through the object's ``providerConfigRef`` exactly as its own pass reaches them; only
objects that name that config are handed to the connector, and only keys among them
are queued. An object not Ready (refused by the config's policy, in conflict over its
external name, failing) is not swept: its own requeues handle it.

A key the connector names is queued once per catalogue state it saw (a fingerprint),
so a difference the reconcile does not remove (a value the provider reports in
another spelling, say) costs one reconcile, not one per sweep. A sweep that fails (a
missing or invalid config, bad credentials, the server down) is logged once per
config and reason, with the connector's secret-free message and every credential
value redacted, and is tried again at the next sweep; reconciles are not touched.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import attrs

from lifecycle.core import objects as objs
from lifecycle.core.contract import ProviderConfig
from lifecycle.core.errors import HandledError
from lifecycle.core.kind import Kind
from lifecycle.core.references import is_ready
from lifecycle.driver.filters import is_ignored, one_line
from lifecycle.runtime.reads import provider_config
from lifecycle.runtime.redaction import credential_values, redact

__all__ = ["DriftSweeper", "Sweeps", "SweptController", "config_name", "sweep_targets"]

log = logging.getLogger("lifecycle.driver.sweep")

Key = tuple[str | None, str]


@runtime_checkable
class Sweeps(Protocol):
    """A connector that reads the provider's state of many objects at once."""

    def sweep(self, kind: Kind, config: ProviderConfig,
              objects: Sequence[Mapping[str, Any]]) -> Mapping[Key, Hashable]:
        """The keys of ``objects`` (Ready objects of ``kind``, all naming ``config``) whose
        external resource drifted, each with a fingerprint of what the provider holds now.
        Reads only; raises a :class:`HandledError` when the provider cannot be read."""
        ...


class SweptController(Protocol):
    """What the sweep needs of a kind's controller (:class:`lifecycle.driver.manager.Controller`):
    its informer, which keys it owns (its shard), and its work queue."""

    name: str
    informer: Any

    def owns(self, key: Key) -> bool:
        """Whether this operator reconciles ``key``."""
        ...

    def enqueue(self, key: Key) -> None:
        """Queue ``key`` for a reconcile."""
        ...


@attrs.define
class SweepTarget:
    """One swept kind: its connector, its controller and when it is next due."""

    kind: Kind
    connector: Sweeps
    controller: SweptController
    interval: float
    due: float = 0.0


def config_name(obj: Mapping[str, Any]) -> str:
    """The ProviderConfig an object names (``spec.providerConfigRef.name``; default
    ``default``), as its pass reads it."""
    ref = objs.mapping(objs.spec(obj).get("providerConfigRef"))
    return str(ref.get("name") or "default")


def sweep_targets(pairs: Iterable[tuple[Any, Any]],
                  controllers: Mapping[str, SweptController]) -> list[SweepTarget]:
    """The kinds of ``pairs`` to sweep: a managed kind whose timing sets ``sweep`` and whose
    connector offers it (:class:`Sweeps`)."""
    out = []
    for target, connector in pairs:
        interval = getattr(getattr(getattr(target, "machine", None), "timing", None),
                           "sweep", None)
        if isinstance(target, Kind) and interval and isinstance(connector, Sweeps):
            out.append(SweepTarget(target, connector, controllers[target.kind], interval))
    return out


def _key(obj: Mapping[str, Any]) -> Key:
    meta = objs.mapping(obj.get("metadata"))
    return meta.get("namespace") or None, str(meta.get("name"))


def _swept(obj: dict[str, Any]) -> bool:
    """Whether an object is swept: Ready, not being deleted and not ignored (as the
    controller's own resync skips it)."""
    return (not objs.mapping(obj.get("metadata")).get("deletionTimestamp")
            and is_ready(obj) and not is_ignored(obj))


class DriftSweeper:
    """Sweeps the :class:`SweepTarget` kinds on a thread of its own while started.

    ``cluster`` is what configs and credentials are read from (the manager's, so the
    cached reader's informers serve them). The counters say what it did: ``sweeps``
    (catalogue reads made, one per kind and config), ``enqueued`` (keys queued),
    ``failures`` (reads that failed).
    """

    def __init__(self, cluster: Any, targets: Sequence[SweepTarget], *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.cluster = cluster
        self.targets = list(targets)
        self.clock = clock
        self.sweeps = self.enqueued = self.failures = 0
        #: The fingerprint each queued key was last queued for, per kind.
        self._queued: dict[tuple[str, Key], Hashable] = {}
        #: The failure last logged per (kind, config), until a sweep of it succeeds.
        self._failing: dict[tuple[str, str], str] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def start(self) -> DriftSweeper:
        """Start sweeping: each kind first one interval from now."""
        with self._lock:
            if self._thread is not None:
                return self
            now = self.clock()
            for target in self.targets:
                target.due = now + target.interval
            self._stop = threading.Event()
            self._thread = threading.Thread(target=self._run, args=(self._stop,),
                                            name="drift-sweep", daemon=True)
            self._thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Stop sweeping (a read under way finishes first, up to ``timeout``)."""
        with self._lock:
            thread, self._thread = self._thread, None
            self._stop.set()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def _run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            now = self.clock()
            configs: dict[tuple[str, str], Any] = {}  # each config read once per round
            for target in self.targets:
                if target.due <= now and not stop.is_set():
                    target.due = now + target.interval
                    try:
                        self.sweep(target, configs)
                    except Exception as exc:  # a bug must not end the sweeps
                        log.error("drift sweep raised %s", type(exc).__name__,
                                  extra={"controller": target.controller.name})
            wait = min(t.due for t in self.targets) - self.clock()
            stop.wait(max(0.01, wait))

    def sweep(self, target: SweepTarget,
              configs: dict[tuple[str, str], Any] | None = None) -> int:
        """Sweep one kind now, config by config; the number of keys queued. ``configs``
        holds the configs already read in this round (the kinds due together share them:
        one read of each config and its credentials per round)."""
        controller = target.controller
        if not controller.informer.synced.is_set():
            return 0
        by_config: dict[str, list[Mapping[str, Any]]] = {}
        for obj in controller.informer.items():
            if _swept(obj) and controller.owns(_key(obj)):
                by_config.setdefault(config_name(obj), []).append(obj)
        queued = 0
        for name, found in sorted(by_config.items()):
            queued += self._sweep_config(target, name, found, {} if configs is None
                                         else configs)
        seen = {(target.kind.kind, _key(o)) for found in by_config.values() for o in found}
        for ident in [i for i in self._queued if i[0] == target.kind.kind and i not in seen]:
            del self._queued[ident]  # gone, or no longer Ready: its own requeues handle it
        return queued

    def _sweep_config(self, target: SweepTarget, name: str,
                      found: Sequence[Mapping[str, Any]],
                      configs: dict[tuple[str, str], Any]) -> int:
        kind, controller = target.kind, target.controller
        config = self._config(configs, kind.provider_config_api, name)
        if isinstance(config, HandledError):
            self._failed(kind, name, f"{config.reason}: {one_line(str(config))}")
            return 0
        secrets = credential_values(config.credentials)
        try:
            drifts = target.connector.sweep(kind, config, found)
        except HandledError as exc:
            self._failed(kind, name, f"{exc.reason}: {one_line(redact(str(exc), secrets))}")
            return 0
        except Exception as exc:  # an unexpected error's text may hold anything: its type
            self._failed(kind, name, type(exc).__name__)
            return 0
        self.sweeps += 1
        if self._failing.pop((kind.kind, name), None) is not None:
            log.info("drift sweep of %s on provider config %r works again", kind.kind, name,
                     extra={"controller": controller.name})
        keys = {_key(o) for o in found}
        queued = 0
        for key in sorted(keys, key=lambda k: (k[0] or "", k[1])):
            ident = (kind.kind, key)
            if key not in drifts:
                self._queued.pop(ident, None)
                continue
            if self._queued.get(ident) == drifts[key]:
                continue  # queued once for this state already
            self._queued[ident] = drifts[key]
            controller.enqueue(key)
            queued += 1
        self.enqueued += queued
        if queued:
            log.debug("drift sweep queued %d %s on provider config %r", queued, kind.kind,
                      name, extra={"controller": controller.name})
        return queued

    def _config(self, configs: dict[tuple[str, str], Any], api_version: str,
                name: str) -> ProviderConfig | HandledError:
        """The config ``name`` with its credentials, read as a pass reads it, or the
        error reading it gave (secret-free: no credential was read); once per round."""
        ident = (api_version, name)
        if ident not in configs:
            try:
                configs[ident] = provider_config(self.cluster, name, api_version)
            except HandledError as exc:
                configs[ident] = exc
        found: ProviderConfig | HandledError = configs[ident]
        return found

    def _failed(self, kind: Kind, name: str, message: str) -> None:
        self.failures += 1
        ident = (kind.kind, name)
        if self._failing.get(ident) == message:
            return
        self._failing[ident] = message
        log.warning("drift sweep of %s on provider config %r failed: %s; drift is left to "
                    "the poll until it works", kind.kind, name, message,
                    extra={"kind": kind.kind, "providerConfig": name})
