"""A cached reader over :class:`~lifecycle.driver.cluster.KubeCluster`: reads from informers.

:class:`CachedCluster` serves ``get`` of a kind from the store of an informer
the operator already runs for it (the manager's informer of each kind it
reconciles, and optionally one on Secrets), so a reconcile of an unchanged
object reads nothing from the API server. Everything else is passed through:
writes, lists, events, watches, and reads of kinds without a store.

Staleness is handled the way it must be with any cache:

* every write carries the ``resourceVersion`` the caller read, so a write
  based on a stale read fails with ``409 Conflict`` instead of overwriting;
  after a conflict the next read of that object goes to the API server, so
  the caller's retry starts from the truth;
* an object this process just wrote is remembered until the informer has
  caught up with it (forgotten as the informer's event arrives; at most
  ``WRITTEN_TTL`` seconds, so it never doubles the memory of the stores), so the next read
  (often the next pass, a moment later) never sees the version before the
  write; a write that released the last finalizer of a deleting object is
  not remembered (the object is gone);
* a store that has not finished its first list is not used; a miss in a
  store that covers the whole kind (no namespace, no label selector) means
  the object does not exist, as in controller-runtime's cached client; a miss
  in a partial store is read from the API server.

Besides the kinds it reconciles, a pass reads its namespace and its provider
config's credentials Secret. :func:`cached_manager` serves those from
informers too: one on Namespaces (only the operator's namespace when it
serves one), and one per Secret a ProviderConfig names (``metadata.name``
field selector), started as the ProviderConfig informer shows the configs.
A change to either is then seen as the watch delivers it, and no pass asks
the API server.

Objects are handed out shared, as a controller-runtime cache hands them out:
a read returns the store's object itself and a write returns the object the
API server answered, which is also what the cache keeps. A caller must not
change either; it copies first (:func:`lifecycle.kube.objects.clone`). The
engine never changes what it reads or writes back. The mutation detector of
:mod:`lifecycle.kube.sharing` (on in the test suite) holds every caller to
that: a change is caught the next time the object is handed out, and on
:meth:`CachedCluster.check_shared` and :meth:`CachedCluster.stop`.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, Protocol

from lifecycle.core.contract import Connector
from lifecycle.core.kind import CONNECTION_SECRET_LABEL, PROVIDER_CONFIG_KIND
from lifecycle.core.objects import metadata
from lifecycle.driver.cluster import KubeCluster
from lifecycle.driver.informer import Informer, InformerOptions
from lifecycle.driver.kinds import Target
from lifecycle.driver.manager import Manager, ManagerOptions
from lifecycle.kube.errors import AlreadyExists, Conflict, NotFound
from lifecycle.kube.sharing import MutationDetector
from lifecycle.runtime.credentials import credential_secrets

__all__ = ["CachedCluster", "Store", "cached_manager"]

Key = tuple[str | None, str]
#: Objects remembered after a write, at most (the oldest are forgotten first).
MAX_WRITTEN = 10_000
#: Seconds an object written here is preferred to an informer that has not caught up.
#: Informers lag by milliseconds; past this, the store (or a 409 and a fresh read) decides.
WRITTEN_TTL = 10.0
#: Secrets named by ProviderConfigs watched one by one, at most (more are read from the
#: API server): each is a watch connection and a thread.
MAX_NAMED_SECRETS = 32


class Store(Protocol):
    """What the cache reads: an informer's store (:class:`~lifecycle.driver.informer.Informer`)."""

    synced: threading.Event

    def get(self, key: Key) -> dict[str, Any] | None:
        """The stored object for ``(namespace, name)``, or None."""
        ...


class _Ignore:
    """An informer handler that does nothing (the cache only needs the store)."""

    def on_add(self, obj: dict[str, Any]) -> None:
        """Ignored."""

    def on_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        """Ignored."""

    def on_delete(self, obj: dict[str, Any]) -> None:
        """Ignored."""

    def on_resync(self, obj: dict[str, Any]) -> None:
        """Ignored."""


def _version(obj: dict[str, Any] | None) -> str:
    return str(metadata(obj).get("resourceVersion", "")) if obj is not None else ""


def _caught_up(stored: dict[str, Any] | None, written: dict[str, Any], base: str) -> bool:
    """Whether the store holds ``written`` or something after it."""
    return stored is not None and _ahead(_version(stored), _version(written), base)


def _ahead(seen: str | None, ours: str, base: str) -> bool:
    """Whether a store whose object is at version ``seen`` (None: it holds none) holds
    the version ``ours`` written over ``base``, or something after it."""
    if seen is None:
        return False
    if seen.isdigit() and ours.isdigit():
        return int(seen) >= int(ours)
    # Opaque versions: the store has moved once it shows neither the base nor nothing.
    return seen != base


def _stored_version(store: Store, key: Key) -> str | None:
    """The version of ``store``'s object for ``key`` (None: none held), without unpacking
    it when the store can tell (:meth:`~lifecycle.driver.informer.Informer.version`)."""
    version = getattr(store, "version", None)
    if version is not None:
        found: str | None = version(key)
        return found
    obj = store.get(key)
    return None if obj is None else _version(obj)


class CachedCluster:
    """A :class:`~lifecycle.kube.cluster.Cluster` reading from informer stores, writing through."""

    def __init__(self, cluster: KubeCluster, *,
                 clock: Any = time.monotonic, detect_mutations: bool | None = None) -> None:
        self.cluster = cluster
        self.clock = clock
        #: Checks that no caller changes an object handed out (default: the
        #: ``LIFECYCLE_MUTATION_DETECTOR`` environment variable).
        self.detector = MutationDetector(detect_mutations, source="the informer cache")
        self._stores: dict[tuple[str, str], tuple[Store, bool]] = {}
        self._written: OrderedDict[tuple[str, str, str | None, str],
                                   tuple[dict[str, Any], str, float]] = OrderedDict()
        self._fresh: set[tuple[str, str, str | None, str]] = set()
        self._lock = threading.Lock()
        self._informers: list[Informer] = []
        #: Stores of single objects (a Secret a ProviderConfig names), by identity.
        self._named: dict[tuple[str, str, str | None, str], Informer] = {}
        #: Reads answered from a store, and reads sent to the API server.
        self.hits = 0
        self.misses = 0

    # -------------------------------------------------------------- stores
    def serve_from(self, api_version: str, kind: str, store: Store, *,
                   complete: bool = False) -> None:
        """Answer reads of ``kind`` from ``store``; ``complete``: it holds every object.

        A store that tells of the objects it takes in (an informer's
        ``observers``) also ends the remembering of a write as soon as it has
        caught up with it, so the written objects kept beside the stores are
        only those still in flight.
        """
        self._stores[(api_version, kind)] = (store, complete)
        observers = getattr(store, "observers", None)
        if isinstance(observers, list):
            namespaced = self.cluster.info(api_version, kind).namespaced
            observers.append(lambda obj: self._caught_up_with(api_version, kind, namespaced,
                                                              obj))

    def _caught_up_with(self, api_version: str, kind: str, namespaced: bool,
                        obj: dict[str, Any]) -> None:
        """Forget the write of ``obj``'s object once the store shows it (or later)."""
        meta = metadata(obj)
        ident = (api_version, kind, meta.get("namespace") if namespaced else None,
                 str(meta.get("name", "")))
        if ident not in self._written:
            return
        with self._lock:
            found = self._written.get(ident)
            if found is None:
                return
            written, base, _ = found
            if (metadata(written).get("uid") == meta.get("uid")
                    and _caught_up(obj, written, base)):
                del self._written[ident]

    def use_informers(self, manager: Manager) -> None:
        """Serve each kind the manager reconciles from the manager's own informer."""
        for controller in manager.controllers.values():
            source = controller.informer.source
            info = getattr(source, "info", None)
            if info is None:
                continue
            complete = (getattr(source, "namespace", None) is None
                        and getattr(source, "label_selector", None) is None)
            self.serve_from(info.api_version, info.kind, controller.informer, complete=complete)

    def watch_secrets(self, namespace: str | None = None,
                      options: InformerOptions | None = None, *,
                      label_selector: str | None = None) -> Informer:
        """Start an informer on Secrets and serve Secret reads from it.

        The operator then needs ``list`` and ``watch`` on Secrets besides
        ``get``; the store holds every Secret of ``namespace`` (or all) that
        matches ``label_selector``. With a selector or a namespace the store
        is partial: a Secret it does not hold is read from the API server.
        """
        informer = Informer("secrets",
                            self.cluster.list_watcher("v1", "Secret", namespace, label_selector),
                            _Ignore(), options or InformerOptions(resync=0)).start()
        self._informers.append(informer)
        self.serve_from("v1", "Secret", informer,
                        complete=namespace is None and label_selector is None)
        return informer

    def watch_namespaces(self, name: str | None = None,
                         options: InformerOptions | None = None) -> Informer:
        """Start an informer on Namespaces (only ``name`` when given) and serve Namespace
        reads from it. The operator then needs ``list`` and ``watch`` on Namespaces."""
        selector = None if name is None else f"metadata.name={name}"
        informer = Informer("namespaces",
                            self.cluster.list_watcher("v1", "Namespace", None,
                                                      field_selector=selector),
                            _Ignore(), options or InformerOptions(resync=0)).start()
        self._informers.append(informer)
        self.serve_from("v1", "Namespace", informer, complete=name is None)
        return informer

    def follow_credentials(self, configs: Informer, namespace: str | None = None) -> None:
        """Serve the Secrets the ProviderConfigs of ``configs`` name from informers.

        With ``namespace`` (the operator watches one namespace, and may list and
        watch Secrets there only) a Secret elsewhere is left to a read when a pass
        needs it, as without the cache.

        Each Secret gets an informer of its own (a ``metadata.name`` field
        selector in its namespace, :meth:`watch_object`), started when the
        ProviderConfig informer first shows a config naming it; at most
        :data:`MAX_NAMED_SECRETS` of them.
        """
        def seen(config: dict[str, Any]) -> None:
            if config.get("metadata", {}).get("deletionTimestamp"):
                return
            for where, name in credential_secrets(config):
                if namespace is None or where == namespace:
                    self.watch_object("v1", "Secret", where, name)

        configs.observers.append(seen)

    def watch_object(self, api_version: str, kind: str, namespace: str | None,
                     name: str) -> Informer | None:
        """Serve reads of one object from an informer of its own (started now, or the
        one already running); None past :data:`MAX_NAMED_SECRETS`."""
        ident = (api_version, kind, namespace, name)
        with self._lock:
            found = self._named.get(ident)
            if found is not None or len(self._named) >= MAX_NAMED_SECRETS:
                return found
            informer = Informer(f"{kind.lower()}-{namespace}-{name}",
                                self.cluster.list_watcher(
                                    api_version, kind, namespace,
                                    field_selector=f"metadata.name={name}"),
                                _Ignore(), InformerOptions(resync=0))
            self._named[ident] = informer
            self._informers.append(informer)
        return informer.start()

    def wait_synced(self, timeout: float = 30.0) -> bool:
        """Block until every informer this cache started has synced (those started
        meanwhile included); False when ``timeout`` passed first."""
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                informers = list(self._informers)
            if all(i.wait_synced(max(0.0, deadline - time.monotonic())) for i in informers):
                with self._lock:
                    if len(self._informers) == len(informers):
                        return True
            elif time.monotonic() >= deadline:
                return False

    def stop(self) -> None:
        """Stop the informers this cache started itself; with the detector on, check
        every object handed out (:class:`~lifecycle.kube.sharing.SharedObjectChanged`)."""
        with self._lock:
            informers = list(self._informers)
        for informer in informers:
            informer.stop()
        self.detector.check()

    def check_shared(self) -> None:
        """Run the mutation detector over every object handed out and still remembered."""
        self.detector.check()

    # --------------------------------------------------------------- reads
    def get(self, api_version: str, kind: str, namespace: str | None,
            name: str) -> dict[str, Any]:
        """The object from the store when it can answer; else from the API server."""
        return self._read(api_version, kind, namespace, name, presume=False)

    def lookup(self, api_version: str, kind: str, namespace: str | None,
               name: str) -> dict[str, Any] | None:
        """Like :meth:`get`, but a miss in a synced partial store is None, not a live read.

        For a caller that creates what is absent and retries from a fresh
        read on ``AlreadyExists``: the create itself tells an object the
        store does not hold (another's, or one not caught up yet), so the
        read before it costs nothing. ``NotFound`` is None too.
        """
        try:
            return self._read(api_version, kind, namespace, name, presume=True)
        except NotFound:
            return None

    def _store(self, api_version: str, kind: str, namespace: str | None,
               name: str) -> tuple[Store, bool] | None:
        """The synced store that answers for ``name`` and whether a miss there means
        NotFound: the object's own informer, else its kind's; None if neither."""
        if self._named:
            named = self._named.get((api_version, kind, namespace, name))
            if named is not None and named.synced.is_set():
                return named, True
        found = self._stores.get((api_version, kind))
        if found is None or not found[0].synced.is_set():
            return None
        return found

    def _read(self, api_version: str, kind: str, namespace: str | None, name: str, *,
              presume: bool) -> dict[str, Any]:
        found = self._store(api_version, kind, namespace, name)
        if found is None:
            return self.cluster.get(api_version, kind, namespace, name)
        store, complete = found
        info = self.cluster.info(api_version, kind)
        ns = namespace if info.namespaced else None
        ident = (api_version, kind, ns, name)
        with self._lock:
            fresh = ident in self._fresh
            self._fresh.discard(ident)
            written = self._written.get(ident)
        if fresh:
            return self._live(ident)
        if written is not None:
            obj, base, at = written
            if self.clock() - at < WRITTEN_TTL and not _ahead(
                    _stored_version(store, (ns, name)), _version(obj), base):
                self.hits += 1
                return self._lend(obj)
            with self._lock:
                self._written.pop(ident, None)
        shared = getattr(store, "shared", None)  # no copy: handed out shared anyway
        stored = store.get((ns, name)) if shared is None else shared((ns, name))
        if stored is None:
            if complete or presume:
                self.hits += 1
                raise NotFound(f'{kind.lower()}s "{name}" not found')
            return self._live(ident)
        self.hits += 1
        return self._lend(stored)

    def _live(self, ident: tuple[str, str, str | None, str]) -> dict[str, Any]:
        self.misses += 1
        obj = self.cluster.get(*ident)
        self._remember(ident, obj, "")
        return self._lend(obj)

    def _lend(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Hand out ``obj`` itself (shared: the caller must not change it)."""
        self.detector.lend(obj)
        return obj

    # -------------------------------------------------------------- writes
    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Create through the API server; remember the result.

        ``AlreadyExists`` sends the next read of that name to the API server.
        """
        try:
            made = self.cluster.create(obj)
        except AlreadyExists:
            self._forget(self._ident(obj))
            raise
        self._remember(self._ident(made), made, "")
        return self._lend(made)

    def replace(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Write through (guarded by the body's resourceVersion); remember the result."""
        return self._write(self.cluster.replace, obj)

    def replace_status(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Write the status through; remember the result."""
        return self._write(self.cluster.replace_status, obj)

    def _write(self, call: Any, obj: dict[str, Any]) -> dict[str, Any]:
        ident = self._ident(obj)
        try:
            written = call(obj)
        except (Conflict, NotFound):
            self._forget(ident)  # the retry reads the truth
            raise
        self._remember(ident, written, _version(obj))
        return self._lend(written)

    def delete(self, api_version: str, kind: str, namespace: str | None, name: str) -> None:
        """Delete through the API server; the next read of it goes there too."""
        self._forget((api_version, kind, namespace if self.cluster.info(
            api_version, kind).namespaced else None, name))
        self.cluster.delete(api_version, kind, namespace, name)

    def _forget(self, ident: tuple[str, str, str | None, str]) -> None:
        """Send the next read of ``ident`` to the API server (kinds with a store only:
        reads of other kinds go there anyway, and would never clear the mark)."""
        if (ident[0], ident[1]) not in self._stores:
            return
        with self._lock:
            self._written.pop(ident, None)
            self._fresh.add(ident)

    def _ident(self, obj: dict[str, Any]) -> tuple[str, str, str | None, str]:
        api_version, kind = str(obj.get("apiVersion", "")), str(obj.get("kind", ""))
        meta = metadata(obj)
        namespaced = self.cluster.info(api_version, kind).namespaced
        return (api_version, kind, meta.get("namespace") if namespaced else None,
                str(meta.get("name", "")))

    def _remember(self, ident: tuple[str, str, str | None, str], obj: dict[str, Any],
                  base: str) -> None:
        if (ident[0], ident[1]) not in self._stores:
            return
        meta = metadata(obj)
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            # The write released the last finalizer of a deleting object: it is gone.
            with self._lock:
                self._written.pop(ident, None)
            return
        found = self._store(*ident)
        if found is not None and _ahead(_stored_version(found[0], (ident[2], ident[3])),
                                        _version(obj), base):
            return  # the informer's event came first: the store answers already
        expect = getattr(found[0], "expect", None) if found is not None else None
        if expect is not None:
            expect(obj)  # its watch event is taken from this answer, not decoded again
        at = self.clock()
        with self._lock:
            written = self._written
            written[ident] = (obj, base, at)
            written.move_to_end(ident)
            while len(written) > MAX_WRITTEN:
                written.popitem(last=False)
            # Oldest first: drop what is past WRITTEN_TTL, which no read would use any
            # more, so the objects written lately are all that is kept beside the stores.
            while written:
                oldest = next(iter(written.values()))
                if at - oldest[2] < WRITTEN_TTL:
                    break
                written.popitem(last=False)

    # ------------------------------------------------------- pass-through
    def list(self, api_version: str, kind: str, namespace: str | None = None,
             label_selector: str | None = None) -> tuple[list[dict[str, Any]], str]:
        """List a kind: from its store when a synced store holds every object of the
        kind (no label selector asked; the store's resourceVersion), else from the API
        server (a consistent list with its resourceVersion). Each object is the
        caller's to read, not to change, like a read's."""
        found = self._stores.get((api_version, kind))
        if (found is None or not found[1] or label_selector is not None
                or not found[0].synced.is_set() or not hasattr(found[0], "items")):
            return self.cluster.list(api_version, kind, namespace, label_selector)
        store = found[0]
        ns = namespace if self.cluster.info(api_version, kind).namespaced else None
        items = [obj for obj in store.items()
                 if ns is None or metadata(obj).get("namespace") == ns]
        self.hits += 1
        return items, str(getattr(store, "resource_version", None) or "")

    def record_event(self, involved: dict[str, Any], type: str, reason: str,
                     message: str) -> dict[str, Any]:
        """Record an Event (a repeat is aggregated by the underlying cluster)."""
        return self.cluster.record_event(involved, type, reason, message)

    def list_watcher(self, api_version: str, kind: str, namespace: str | None = None,
                     label_selector: str | None = None, **selectors: Any) -> Any:
        """The underlying cluster's list-and-watch source (``field_selector`` passed on)."""
        return self.cluster.list_watcher(api_version, kind, namespace, label_selector,
                                         **selectors)

    def __getattr__(self, name: str) -> Any:
        # info, register and anything else KubeCluster offers.
        return getattr(self.cluster, name)


def cached_manager(cluster: KubeCluster, pairs: Sequence[tuple[Target, Connector | None]],
                   options: ManagerOptions | None = None, *, secrets: bool = False,
                   supporting: bool | None = None, **kwargs: Any) -> Manager:
    """A :class:`~lifecycle.driver.manager.Manager` whose reconcilers read through a cache.

    Each kind is read from the manager's own informer for it; everything
    else (namespaces, provider configs, leases, and Secrets unless
    ``secrets``) from the API server. ``secrets`` also starts an informer on
    the connection Secrets the engine writes (labelled
    ``lifecycle.dev/connection-secret=true``) in the watched namespace (all
    when none), which needs ``list`` and ``watch`` on Secrets; other Secrets
    (provider credentials) are still read from the API server unless
    ``supporting``. ``supporting`` (default: as ``secrets``) serves the
    supporting reads of a pass from informers too: the Namespace (the watched
    one, or all), which needs ``list`` and ``watch`` on Namespaces, and each
    Secret a ProviderConfig names (:meth:`CachedCluster.follow_credentials`,
    when the manager runs a ProviderConfig informer). The manager's
    :meth:`~lifecycle.driver.manager.Manager.stop` stops the cache (its
    informers, and the mutation detector's last check).
    """
    options = options or ManagerOptions()
    cached = CachedCluster(cluster)
    manager = Manager(cached, pairs, options, **kwargs)
    cached.use_informers(manager)
    if secrets:
        cached.watch_secrets(options.namespace,
                             label_selector=f"{CONNECTION_SECRET_LABEL}=true")
    if secrets if supporting is None else supporting:
        cached.watch_namespaces(options.namespace)
        for controller in manager.controllers.values():
            info = getattr(controller.informer.source, "info", None)
            if info is not None and info.kind == PROVIDER_CONFIG_KIND:
                cached.follow_credentials(controller.informer, options.namespace)
    manager.closers.append(cached.stop)
    return manager
