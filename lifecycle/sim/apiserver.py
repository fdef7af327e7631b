"""An embedded, in-memory Kubernetes API server.

Tests, the demo and the benchmarks run the engine against :class:`EmbeddedAPI`
instead of a cluster. It keeps objects as plain JSON-like dicts and follows the
API server's rules that a controller can observe: uids, a monotonically
increasing ``resourceVersion``, optimistic concurrency, ``generation``, the
status subresource, finalizers and graceful deletion, label selectors, JSON
merge patch, and watches with a bounded history that expires (``410 Gone``).
``docs/embedded-api.md`` lists what it implements and where it differs.

Every object passed in or returned is copied, so callers can never alias the
stored state. Internally a stored object is never mutated after it is written:
each write builds a new dict, which lets the watch history share references.

Faults (errors, latency, dropped watches) are injected through
:attr:`EmbeddedAPI.faults`; see :class:`FaultInjector`.
"""

from __future__ import annotations

import base64
import binascii
import collections
import copy
import random
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime
from typing import Any

import attrs

from lifecycle.core.values import now, rfc3339
from lifecycle.kube.errors import (
    AlreadyExists,
    ApiError,
    Conflict,
    Forbidden,
    Gone,
    Invalid,
    NotFound,
    ServerError,
    TooManyRequests,
    error_from_status,
)
from lifecycle.kube.objects import clone, merge_patch
from lifecycle.kube.resources import (
    BUILTIN_TYPES,
    CONFIG_MAP,
    EVENT,
    NAMESPACE,
    SECRET,
    ResourceType,
)
from lifecycle.kube.selectors import (
    LabelSelector,
    Requirement,
    parse_label_selector,
    valid_label_key,
    valid_label_value,
)

__all__ = [
    "AlreadyExists",
    "ApiError",
    "Conflict",
    "EmbeddedAPI",
    "Fault",
    "FaultInjector",
    "Forbidden",
    "Gone",
    "Invalid",
    "LabelSelector",
    "NotFound",
    "Requirement",
    "ResourceType",
    "ServerError",
    "TooManyRequests",
    "Watch",
    "WatchEvent",
    "clone",
    "error_from_status",
    "merge_patch",
    "parse_label_selector",
]


# ---------------------------------------------------------------------------
# Faults
# ---------------------------------------------------------------------------

VERBS = frozenset(
    {"get", "list", "create", "replace", "replace_status", "patch", "delete", "watch"}
)
WRITE_VERBS = frozenset({"create", "replace", "replace_status", "patch", "delete"})


@attrs.define(eq=False)
class Fault:
    """One injected fault: on matching calls, wait ``latency`` seconds then raise ``error``.

    ``kind`` ``None`` matches every kind. ``times`` ``None`` means unlimited;
    ``fired`` counts how often the fault has triggered.
    """

    verb: str
    kind: str | None = None
    error: BaseException | type[BaseException] | None = None
    probability: float = 1.0
    times: int | None = None
    latency: float = 0.0
    name: str | None = None
    fired: int = 0

    @property
    def exhausted(self) -> bool:
        """Whether the fault has triggered ``times`` times already."""
        return self.times is not None and self.fired >= self.times

    def make_error(self) -> BaseException | None:
        """A fresh exception to raise for one trigger, or ``None`` for latency only."""
        error = self.error
        if error is None:
            return None
        if isinstance(error, type):
            return error(f"injected fault: {self.verb} {self.kind or '*'}")
        return copy.copy(error)


class FaultInjector:
    """Deterministic fault injection for an :class:`EmbeddedAPI`.

    Faults are checked in the order they were added; the first one that
    triggers wins. A fault triggers before the operation, so nothing is
    written. Randomness comes from a private generator seeded with ``seed``.
    """

    def __init__(self, seed: int = 0) -> None:
        self._lock = threading.Lock()
        self._rng = random.Random(seed)
        self._faults: list[Fault] = []
        self._drop_hooks: list[Callable[[], None]] = []

    def add(
        self,
        verb: str,
        kind: str | None = None,
        *,
        error: BaseException | type[BaseException] | None = None,
        probability: float = 1.0,
        times: int | None = None,
        latency: float = 0.0,
        name: str | None = None,
    ) -> Fault:
        """Add a fault on ``verb`` (``*`` for every verb) and return it for later removal."""
        if verb != "*" and verb not in VERBS:
            raise ValueError(f"unknown verb {verb!r}; expected one of {sorted(VERBS)}")
        if not 0.0 <= probability <= 1.0:
            raise ValueError("probability must be within [0, 1]")
        if latency < 0:
            raise ValueError("latency must not be negative")
        fault = Fault(verb, kind, error, probability, times, latency, name)
        with self._lock:
            self._faults.append(fault)
        return fault

    def remove(self, fault: Fault) -> None:
        """Remove one fault; removing a fault twice is harmless."""
        with self._lock:
            self._faults = [f for f in self._faults if f is not fault]

    def clear(self) -> None:
        """Remove every fault."""
        with self._lock:
            self._faults = []

    @property
    def faults(self) -> list[Fault]:
        """The active faults, in order."""
        with self._lock:
            return list(self._faults)

    def drop_watches(self) -> None:
        """End every open watch now, as if their connections had dropped."""
        with self._lock:
            hooks = list(self._drop_hooks)
        for hook in hooks:
            hook()

    def on_drop(self, hook: Callable[[], None]) -> None:
        """Register a callback run by :meth:`drop_watches` (used by the API itself)."""
        with self._lock:
            self._drop_hooks.append(hook)

    def check(self, verb: str, kind: str | None) -> None:
        """Trigger the first matching fault for a call: sleep, then raise its error."""
        if not self._faults:
            return
        triggered: Fault | None = None
        with self._lock:
            for fault in self._faults:
                if fault.verb not in ("*", verb) or fault.kind not in (None, kind):
                    continue
                if fault.exhausted:
                    continue
                if fault.probability < 1.0 and self._rng.random() >= fault.probability:
                    continue
                fault.fired += 1
                triggered = fault
                break
        if triggered is None:
            return
        if triggered.latency > 0:
            time.sleep(triggered.latency)
        error = triggered.make_error()
        if error is not None:
            raise error


# ---------------------------------------------------------------------------
# Watches
# ---------------------------------------------------------------------------


@attrs.frozen
class WatchEvent:
    """One watch event: ``ADDED``, ``MODIFIED``, ``DELETED``, ``BOOKMARK`` or ``ERROR``."""

    type: str
    object: dict[str, Any]


@attrs.frozen
class _Change:
    """One entry of the history: a write of one object, and the object before it."""

    rv: int
    type: str
    key: tuple[str, str]
    namespace: str | None
    object: dict[str, Any]
    previous: dict[str, Any] | None


def _labels(obj: Mapping[str, Any] | None) -> Mapping[str, str]:
    if obj is None:
        return {}
    return obj.get("metadata", {}).get("labels") or {}


class Watch:
    """An iterator of :class:`WatchEvent` for one kind, from :meth:`EmbeddedAPI.watch`.

    Blocks until the next event arrives; ends after ``timeout`` seconds, on
    :meth:`stop`, on :meth:`EmbeddedAPI.close` or when the faults drop all
    watches. If the history slides past a watcher that fell behind, it yields
    one ``ERROR`` event carrying a 410 ``Status`` and then ends.
    """

    def __init__(
        self,
        api: EmbeddedAPI,
        rtype: ResourceType,
        namespace: str | None,
        selector: LabelSelector,
        cursor: int,
        initial: list[tuple[str, dict[str, Any]]],
        timeout: float | None,
        bookmarks: bool,
    ) -> None:
        self._api = api
        self._rtype = rtype
        self._key = (rtype.api_version, rtype.kind)
        self._namespace = namespace
        self._selector = selector
        self._cursor = cursor
        self._pending: collections.deque[tuple[str, dict[str, Any]]] = collections.deque(initial)
        self._deadline = None if timeout is None else time.monotonic() + timeout
        self._bookmarks = bookmarks
        self._next_bookmark = time.monotonic() + api.bookmark_interval
        self._stopped = False
        self._expired = False

    @property
    def resource_version(self) -> str:
        """The last resourceVersion this watch has read up to (to resume from)."""
        return str(self._cursor)

    @property
    def stopped(self) -> bool:
        """Whether the watch has ended."""
        return self._stopped

    def stop(self) -> None:
        """End the watch; a blocked iteration returns promptly."""
        with self._api._cond:
            self._stop_locked()
            self._api._cond.notify_all()

    def _stop_locked(self) -> None:
        self._stopped = True
        self._pending.clear()
        self._api._watches.discard(self)

    def __iter__(self) -> Iterator[WatchEvent]:
        return self

    def __enter__(self) -> Watch:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def __next__(self) -> WatchEvent:
        api = self._api
        with api._cond:
            kind, obj = self._next_locked()
        return WatchEvent(kind, clone(obj))

    def _next_locked(self) -> tuple[str, dict[str, Any]]:
        api = self._api
        while True:
            if self._stopped:
                raise StopIteration
            if self._pending:
                return self._pending.popleft()
            if self._expired:
                self._stop_locked()
                raise StopIteration
            moment = time.monotonic()
            if self._deadline is not None and moment >= self._deadline:
                self._stop_locked()
                raise StopIteration
            self._collect()
            if self._pending:
                continue
            if self._bookmarks and moment >= self._next_bookmark:
                self._next_bookmark = moment + api.bookmark_interval
                return "BOOKMARK", {
                    "apiVersion": self._key[0],
                    "kind": self._key[1],
                    "metadata": {"resourceVersion": str(self._cursor)},
                }
            wait: float | None = None
            if self._deadline is not None:
                wait = self._deadline - moment
            if self._bookmarks:
                until = self._next_bookmark - moment
                wait = until if wait is None else min(wait, until)
            api._cond.wait(wait)

    def _collect(self) -> None:
        """Move history entries after the cursor into the pending queue (lock held)."""
        api = self._api
        latest = api._rv
        if self._cursor >= latest:
            return
        oldest = api._oldest_retained()
        if self._cursor + 1 < oldest:
            self._pending.append(("ERROR", _expired_status(self._cursor, oldest)))
            self._expired = True
            return
        history = api._history
        window = api._window
        key, namespace, selector = self._key, self._namespace, self._selector
        everything = not selector.requirements
        for rv in range(self._cursor + 1, latest + 1):
            change = history[rv % window]
            if change.key != key or (namespace is not None and change.namespace != namespace):
                continue
            if everything:
                self._pending.append((change.type, change.object))
                continue
            now_in = selector.matches(_labels(change.object))
            if change.type != "MODIFIED":
                if now_in:
                    self._pending.append((change.type, change.object))
                continue
            was_in = selector.matches(_labels(change.previous))
            if now_in and was_in:
                self._pending.append(("MODIFIED", change.object))
            elif now_in:
                self._pending.append(("ADDED", change.object))
            elif was_in:
                self._pending.append(("DELETED", change.object))
        self._cursor = latest


def _expired_status(requested: int, oldest: int) -> dict[str, Any]:
    return Gone(f"too old resource version: {requested} ({oldest - 1})").to_status()


# ---------------------------------------------------------------------------
# The server
# ---------------------------------------------------------------------------

_DNS_LABEL_PART = r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?"
_DNS_SUBDOMAIN = re.compile(rf"^{_DNS_LABEL_PART}(?:\.{_DNS_LABEL_PART})*$")
_DNS_LABEL = re.compile(r"^[a-z0-9](?:[-a-z0-9]*[a-z0-9])?$")
_GENERATE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
# Metadata the server owns: ignored on create, kept from the stored object on update.
_SERVER_METADATA = ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds")


def _split_api_version(api_version: str) -> tuple[str, str]:
    group, _, version = api_version.rpartition("/")
    return group, version


class EmbeddedAPI:
    """An in-memory Kubernetes API server for tests, the demo and benchmarks.

    ``clock`` supplies timestamps (default: :func:`lifecycle.core.values.now`);
    ``watch_window`` is how many writes the watch history retains; ``seed``
    makes generated names, uids and fault probabilities reproducible. The
    namespace ``default`` exists from the start.

    ``stats`` counts calls per verb (failed and faulted calls included);
    :meth:`writes` sums the write verbs, optionally for one kind.
    """

    def __init__(
        self,
        *,
        clock: Callable[[], datetime] | None = None,
        watch_window: int = 10_000,
        seed: int = 0,
        bookmark_interval: float = 1.0,
    ) -> None:
        if watch_window < 1:
            raise ValueError("watch_window must be at least 1")
        self._clock = clock or now
        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
        self._rng = random.Random(seed)
        self._types: dict[tuple[str, str], ResourceType] = {}
        self._store: dict[tuple[str, str], dict[tuple[str | None, str], dict[str, Any]]] = {}
        self._rv = 0
        self._window = watch_window
        self._history: list[Any] = [None] * watch_window
        self._watches: set[Watch] = set()
        self._closed = False
        self._event_index: dict[tuple[str, ...], str] = {}
        self.bookmark_interval = bookmark_interval
        self.faults = FaultInjector(seed)
        self.faults.on_drop(self._drop_watches)
        self.stats: collections.Counter[str] = collections.Counter()
        self._kind_stats: collections.Counter[tuple[str, str]] = collections.Counter()
        for rtype in BUILTIN_TYPES:
            self.register(rtype)
        self._create(
            NAMESPACE, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}}
        )

    # -- types ---------------------------------------------------------------

    def register(self, rtype: ResourceType) -> None:
        """Serve a kind. Registering the same type again is a no-op."""
        key = (rtype.api_version, rtype.kind)
        with self._lock:
            existing = self._types.get(key)
            if existing is not None and existing != rtype:
                raise ValueError(
                    f"{rtype.kind} of {rtype.api_version} is already registered "
                    f"differently: {existing}"
                )
            self._types[key] = rtype
            self._store.setdefault(key, {})

    def resource_type(self, api_version: str, kind: str) -> ResourceType:
        """The registered type for ``api_version`` and ``kind``; :class:`NotFound` if none."""
        rtype = self._types.get((api_version, kind))
        if rtype is None:
            raise NotFound(
                f"the server could not find the requested resource ({kind} of {api_version})"
            )
        return rtype

    def resource_type_by_plural(self, api_version: str, plural: str) -> ResourceType:
        """The registered type serving ``plural`` in ``api_version``; :class:`NotFound` if none."""
        with self._lock:
            for rtype in self._types.values():
                if rtype.api_version == api_version and rtype.plural == plural:
                    return rtype
        raise NotFound(f"the server could not find the requested resource ({plural})")

    def types(self) -> list[ResourceType]:
        """Every registered type, in registration order."""
        with self._lock:
            return list(self._types.values())

    # -- bookkeeping -----------------------------------------------------------

    def _count(self, verb: str, kind: str) -> None:
        with self._lock:
            self.stats[verb] += 1
            self._kind_stats[(verb, kind)] += 1

    def writes(self, kind: str | None = None) -> int:
        """How many write calls (create, replace, replace_status, patch, delete) were made."""
        with self._lock:
            if kind is None:
                return sum(self.stats[verb] for verb in WRITE_VERBS)
            return sum(self._kind_stats[(verb, kind)] for verb in WRITE_VERBS)

    def reset_stats(self) -> None:
        """Zero ``stats`` and the per-kind counters."""
        with self._lock:
            self.stats.clear()
            self._kind_stats.clear()

    @property
    def resource_version(self) -> str:
        """The current (latest) resourceVersion of the whole server."""
        return str(self._rv)

    def _oldest_retained(self) -> int:
        return max(1, self._rv - self._window + 1)

    def _record(
        self,
        change_type: str,
        rtype: ResourceType,
        obj: dict[str, Any],
        previous: dict[str, Any] | None,
    ) -> None:
        """Append one change at the current resourceVersion and wake the watches."""
        namespace = obj["metadata"].get("namespace") if rtype.namespaced else None
        self._history[self._rv % self._window] = _Change(
            self._rv, change_type, (rtype.api_version, rtype.kind), namespace, obj, previous
        )
        self._cond.notify_all()

    def _timestamp(self) -> str:
        return rfc3339(self._clock())

    # -- helpers -------------------------------------------------------------------

    def _type_of(self, obj: Any) -> ResourceType:
        if not isinstance(obj, Mapping):
            raise Invalid("the object must be a JSON object")
        api_version, kind = obj.get("apiVersion"), obj.get("kind")
        if not isinstance(api_version, str) or not api_version:
            raise Invalid("apiVersion: Required value")
        if not isinstance(kind, str) or not kind:
            raise Invalid("kind: Required value")
        return self.resource_type(api_version, kind)

    def _key(self, rtype: ResourceType, namespace: str | None, name: str) -> tuple[str | None, str]:
        if not name or not isinstance(name, str):
            raise Invalid(f"{rtype.kind}: metadata.name: Required value")
        if not rtype.namespaced:
            return (None, name)
        if not namespace:
            raise Invalid(f"{rtype.kind} {name!r}: metadata.namespace: Required value")
        return (namespace, name)

    def _stored(self, rtype: ResourceType, key: tuple[str | None, str]) -> dict[str, Any]:
        obj = self._store[(rtype.api_version, rtype.kind)].get(key)
        if obj is None:
            raise NotFound(f'{rtype.resource} "{key[1]}" not found')
        return obj

    @staticmethod
    def _check_rv(rtype: ResourceType, stored: dict[str, Any], given: Any) -> None:
        if given is None or given == "":
            return
        if not isinstance(given, str) or not given.isdigit():
            raise Invalid(
                f"metadata.resourceVersion: Invalid value: {given!r}: "
                f"resourceVersion must be an integer string"
            )
        if given != stored["metadata"]["resourceVersion"]:
            name = stored["metadata"]["name"]
            raise Conflict(
                f'Operation cannot be fulfilled on {rtype.resource} "{name}": '
                f"the object has been modified; please apply your changes to the "
                f"latest version and try again"
            )

    @staticmethod
    def _check_uid(stored: dict[str, Any], given: Any) -> None:
        if given and given != stored["metadata"]["uid"]:
            raise Conflict(
                f"Precondition failed: UID in precondition: {given}, "
                f"UID in object meta: {stored['metadata']['uid']}"
            )

    @staticmethod
    def _validate_metadata(rtype: ResourceType, name: str, meta: dict[str, Any]) -> None:
        where = f'{rtype.kind} "{name}" is invalid'
        labels = meta.get("labels")
        if labels is not None:
            if not isinstance(labels, dict):
                raise Invalid(f"{where}: metadata.labels: must be an object")
            for key, value in labels.items():
                if not valid_label_key(key):
                    raise Invalid(f"{where}: metadata.labels: Invalid value: {key!r}")
                if not valid_label_value(value):
                    raise Invalid(f"{where}: metadata.labels: Invalid value: {value!r}")
        annotations = meta.get("annotations")
        if annotations is not None:
            if not isinstance(annotations, dict):
                raise Invalid(f"{where}: metadata.annotations: must be an object")
            for key, value in annotations.items():
                if not valid_label_key(key) or not isinstance(value, str):
                    raise Invalid(f"{where}: metadata.annotations: Invalid value: {key!r}")
        finalizers = meta.get("finalizers")
        if finalizers is not None and (
            not isinstance(finalizers, list) or not all(isinstance(f, str) for f in finalizers)
        ):
            raise Invalid(f"{where}: metadata.finalizers: must be a list of strings")

    def _prepare_secret(self, obj: dict[str, Any], name: str) -> None:
        """Fold ``stringData`` into ``data`` and check ``data`` is base64 (in place, owned obj)."""
        data = obj.get("data")
        if data is not None and not isinstance(data, dict):
            raise Invalid(f'Secret "{name}" is invalid: data: must be an object')
        data = dict(data or {})
        for key, value in data.items():
            try:
                if not isinstance(value, str):
                    raise TypeError(value)
                base64.b64decode(value, validate=True)
            except (TypeError, binascii.Error):
                raise Invalid(
                    f'Secret "{name}" is invalid: data[{key}]: must be a base64 encoded string'
                ) from None
        string_data = obj.pop("stringData", None)
        if string_data:
            if not isinstance(string_data, dict) or not all(
                isinstance(v, str) for v in string_data.values()
            ):
                raise Invalid(f'Secret "{name}" is invalid: stringData: must map to strings')
            for key, value in string_data.items():
                data[key] = base64.b64encode(value.encode()).decode("ascii")
        if data or "data" in obj:
            obj["data"] = data

    # -- create ----------------------------------------------------------------

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Create an object and return it as stored.

        The server sets uid, creationTimestamp, resourceVersion and generation;
        incoming values of those are ignored. ``metadata.generateName`` makes a
        unique name. Custom kinds (types with a status subresource) drop
        ``status``. Namespaced objects need an existing namespace.
        """
        rtype = self._type_of(obj)
        self._count("create", rtype.kind)
        self.faults.check("create", rtype.kind)
        with self._lock:
            return clone(self._create(rtype, clone(obj)))

    def _create(self, rtype: ResourceType, new: dict[str, Any]) -> dict[str, Any]:
        """Create from an owned copy (lock held or taken); returns the stored object."""
        with self._lock:
            meta = new.get("metadata")
            if meta is None:
                meta = {}
            if not isinstance(meta, dict):
                raise Invalid("metadata: must be an object")
            meta = dict(meta)
            new["metadata"] = meta
            for field in (*_SERVER_METADATA, "resourceVersion", "generation"):
                meta.pop(field, None)
            if rtype.namespaced:
                namespace = meta.get("namespace")
                if not namespace:
                    raise Invalid(f"{rtype.kind}: metadata.namespace: Required value")
                ns_obj = self._store[("v1", "Namespace")].get((None, namespace))
                if ns_obj is None:
                    raise NotFound(f'namespaces "{namespace}" not found')
                if ns_obj["metadata"].get("deletionTimestamp"):
                    raise Forbidden(
                        f"unable to create new content in namespace {namespace} "
                        f"because it is being terminated"
                    )
            else:
                meta.pop("namespace", None)
                namespace = None
            table = self._store[(rtype.api_version, rtype.kind)]
            name = meta.get("name")
            if not name:
                prefix = meta.get("generateName")
                if not prefix or not isinstance(prefix, str):
                    raise Invalid(
                        f"{rtype.kind}: metadata.name: Required value: name or "
                        f"generateName is required"
                    )
                for _ in range(100):
                    suffix = "".join(self._rng.choice(_GENERATE_ALPHABET) for _ in range(5))
                    name = prefix + suffix
                    if (namespace, name) not in table:
                        break
                meta["name"] = name
            pattern = _DNS_LABEL if rtype is NAMESPACE else _DNS_SUBDOMAIN
            if not isinstance(name, str) or len(name) > 253 or not pattern.match(name):
                raise Invalid(
                    f'{rtype.kind} "{name}" is invalid: metadata.name: Invalid value: '
                    f"{name!r}: must be a lowercase RFC 1123 name"
                )
            if (namespace, name) in table:
                raise AlreadyExists(f'{rtype.resource} "{name}" already exists')
            self._validate_metadata(rtype, name, meta)
            if rtype.status_subresource:
                new.pop("status", None)
            if rtype is NAMESPACE:
                new["status"] = {"phase": "Active"}
            elif rtype is SECRET:
                self._prepare_secret(new, name)
                new.setdefault("type", "Opaque")
            elif rtype is EVENT and new.get("type", "Normal") not in ("Normal", "Warning"):
                raise Invalid(
                    f'Event "{name}" is invalid: type: Unsupported value: '
                    f'{new.get("type")!r}: supported values: "Normal", "Warning"'
                )
            new["apiVersion"], new["kind"] = rtype.api_version, rtype.kind
            meta["uid"] = str(uuid.UUID(int=self._rng.getrandbits(128), version=4))
            meta["creationTimestamp"] = self._timestamp()
            meta["generation"] = 1
            self._rv += 1
            meta["resourceVersion"] = str(self._rv)
            table[(namespace, name)] = new
            self._record("ADDED", rtype, new, None)
            return new

    # -- read ----------------------------------------------------------------------

    def get(self, api_version: str, kind: str, namespace: str | None, name: str) -> dict[str, Any]:
        """Read one object; :class:`NotFound` if it does not exist."""
        self._count("get", kind)
        self.faults.check("get", kind)
        rtype = self.resource_type(api_version, kind)
        with self._lock:
            obj = self._stored(rtype, self._key(rtype, namespace, name))
        return clone(obj)

    def list(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        label_selector: str | None = None,
    ) -> tuple[list[dict[str, Any]], str]:
        """List objects of a kind, optionally in one namespace and matching a selector.

        Returns the items sorted by namespace and name, and the list's
        resourceVersion (to start a watch from).
        """
        self._count("list", kind)
        self.faults.check("list", kind)
        rtype = self.resource_type(api_version, kind)
        selector = parse_label_selector(label_selector)
        with self._lock:
            found = self._select(rtype, namespace, selector)
            list_rv = str(self._rv)
        return [clone(obj) for obj in found], list_rv

    def _select(
        self, rtype: ResourceType, namespace: str | None, selector: LabelSelector
    ) -> list[dict[str, Any]]:
        table = self._store[(rtype.api_version, rtype.kind)]
        if not rtype.namespaced:
            namespace = None
        keys = sorted(
            (key for key in table if namespace is None or key[0] == namespace),
            key=lambda key: (key[0] or "", key[1]),
        )
        objects = [table[key] for key in keys]
        if selector.requirements:
            objects = [obj for obj in objects if selector.matches(_labels(obj))]
        return objects

    # -- update --------------------------------------------------------------------

    def replace(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Update the main resource (PUT) and return the object as stored.

        ``status`` comes from the stored object for types with a status
        subresource. A stale ``metadata.resourceVersion`` or a different uid
        raises :class:`Conflict`. A write that changes nothing is not stored
        and does not bump the resourceVersion. Removing the last finalizer of
        an object being deleted removes it.
        """
        rtype = self._type_of(obj)
        self._count("replace", rtype.kind)
        self.faults.check("replace", rtype.kind)
        with self._lock:
            meta = obj.get("metadata") or {}
            stored = self._stored(rtype, self._key(rtype, meta.get("namespace"), meta.get("name")))
            self._check_uid(stored, meta.get("uid"))
            self._check_rv(rtype, stored, meta.get("resourceVersion"))
            if rtype.status_subresource and obj.__class__ is dict and "status" in obj:
                # the stored status wins: do not copy the incoming one (keep its key's place)
                obj = {k: (None if k == "status" else v) for k, v in obj.items()}
            result = self._replace(rtype, stored, clone(obj))
        return clone(result)

    def _replace(
        self, rtype: ResourceType, stored: dict[str, Any], new: dict[str, Any]
    ) -> dict[str, Any]:
        """Write an owned object over ``stored`` (lock held; preconditions checked)."""
        old_meta = stored["metadata"]
        name = old_meta["name"]
        meta = new.get("metadata")
        if not isinstance(meta, dict):
            raise Invalid(f'{rtype.kind} "{name}" is invalid: metadata: must be an object')
        meta = dict(meta)
        new["metadata"] = meta
        new["apiVersion"], new["kind"] = rtype.api_version, rtype.kind
        for field in (*_SERVER_METADATA, "name", "namespace", "resourceVersion", "generation"):
            if field in old_meta:
                meta[field] = old_meta[field]
            else:
                meta.pop(field, None)
        self._validate_metadata(rtype, name, meta)
        if old_meta.get("deletionTimestamp"):
            added = set(meta.get("finalizers") or ()) - set(old_meta.get("finalizers") or ())
            if added:
                raise Invalid(
                    f'{rtype.kind} "{name}" is invalid: metadata.finalizers: '
                    f"Forbidden: no new finalizers can be added if the object is "
                    f"being deleted, found new finalizers {sorted(added)!r}"
                )
        if rtype.status_subresource:
            if "status" in stored:
                new["status"] = stored["status"]
            else:
                new.pop("status", None)
        if rtype is SECRET:
            self._prepare_secret(new, name)
            new.setdefault("type", stored.get("type", "Opaque"))
            if stored.get("type") != new.get("type"):
                raise Invalid(f'Secret "{name}" is invalid: type: field is immutable')
        if rtype in (SECRET, CONFIG_MAP) and stored.get("immutable") is True:
            for field in ("data", "binaryData", "immutable"):
                if new.get(field) != stored.get(field):
                    raise Invalid(
                        f'{rtype.kind} "{name}" is invalid: {field}: Forbidden: '
                        f"field is immutable when `immutable` is set"
                    )
        if new.get("spec") != stored.get("spec"):
            meta["generation"] = old_meta.get("generation", 1) + 1
        return self._commit(rtype, stored, new)

    def _commit(
        self, rtype: ResourceType, stored: dict[str, Any], new: dict[str, Any]
    ) -> dict[str, Any]:
        """Store ``new`` unless it equals ``stored``; remove it if its deletion is done."""
        if new == stored:
            return stored
        meta = new["metadata"]
        self._rv += 1
        meta["resourceVersion"] = str(self._rv)
        table = self._store[(rtype.api_version, rtype.kind)]
        key = (meta.get("namespace") if rtype.namespaced else None, meta["name"])
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            del table[key]
            self._record("DELETED", rtype, new, stored)
        else:
            table[key] = new
            self._record("MODIFIED", rtype, new, stored)
        return new

    def replace_status(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Update the status subresource: only ``status`` changes; generation stays.

        Types without a status subresource answer :class:`NotFound`.
        """
        rtype = self._type_of(obj)
        self._count("replace_status", rtype.kind)
        self.faults.check("replace_status", rtype.kind)
        with self._lock:
            meta = obj.get("metadata") or {}
            stored = self._stored(rtype, self._key(rtype, meta.get("namespace"), meta.get("name")))
            self._check_uid(stored, meta.get("uid"))
            self._check_rv(rtype, stored, meta.get("resourceVersion"))
            result = self._replace_status(rtype, stored, clone(obj.get("status")))
        return clone(result)

    def _replace_status(
        self, rtype: ResourceType, stored: dict[str, Any], status: Any
    ) -> dict[str, Any]:
        if not rtype.status_subresource:
            raise NotFound(
                f"the server could not find the requested resource ({rtype.resource}/status)"
            )
        new = dict(stored)
        new["metadata"] = dict(stored["metadata"])
        if status is None:
            new.pop("status", None)
        else:
            new["status"] = status
        return self._commit(rtype, stored, new)

    def patch(
        self,
        api_version: str,
        kind: str,
        namespace: str | None,
        name: str,
        patch: dict[str, Any],
        *,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        """Apply a JSON merge patch (RFC 7386) to the object or its ``status`` subresource.

        A ``metadata.resourceVersion`` (or ``uid``) in the patch is a
        precondition. The result is written with the rules of :meth:`replace`
        or :meth:`replace_status`.
        """
        self._count("patch", kind)
        self.faults.check("patch", kind)
        rtype = self.resource_type(api_version, kind)
        if subresource not in (None, "status"):
            raise NotFound(
                f"the server could not find the requested resource ({rtype.resource}/{subresource})"
            )
        if not isinstance(patch, dict):
            raise Invalid("a merge patch must be a JSON object")
        with self._lock:
            stored = self._stored(rtype, self._key(rtype, namespace, name))
            patch_meta = patch.get("metadata")
            if isinstance(patch_meta, dict):
                self._check_uid(stored, patch_meta.get("uid"))
                self._check_rv(rtype, stored, patch_meta.get("resourceVersion"))
            merged = merge_patch(stored, patch)
            if subresource == "status":
                result = self._replace_status(rtype, stored, merged.get("status"))
            else:
                result = self._replace(rtype, stored, merged)
        return clone(result)

    # -- delete --------------------------------------------------------------------

    def delete(
        self,
        api_version: str,
        kind: str,
        namespace: str | None,
        name: str,
        *,
        resource_version: str | None = None,
    ) -> dict[str, Any] | None:
        """Delete an object.

        With finalizers, the object only gets ``deletionTimestamp`` (set once)
        and ``deletionGracePeriodSeconds: 0`` and is returned; it goes away when
        its last finalizer is removed. Without, it is removed and ``None`` is
        returned. ``resource_version`` is a precondition.
        """
        self._count("delete", kind)
        self.faults.check("delete", kind)
        rtype = self.resource_type(api_version, kind)
        with self._lock:
            key = self._key(rtype, namespace, name)
            stored = self._stored(rtype, key)
            self._check_rv(rtype, stored, resource_version)
            meta = stored["metadata"]
            if meta.get("finalizers"):
                if meta.get("deletionTimestamp"):
                    return clone(stored)
                new = dict(stored)
                new["metadata"] = dict(
                    meta, deletionTimestamp=self._timestamp(), deletionGracePeriodSeconds=0
                )
                return clone(self._commit(rtype, stored, new))
            self._rv += 1
            gone = dict(stored)
            gone["metadata"] = dict(meta, resourceVersion=str(self._rv))
            del self._store[(rtype.api_version, rtype.kind)][key]
            self._record("DELETED", rtype, gone, stored)
            return None

    # -- watch ---------------------------------------------------------------------

    def watch(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        resource_version: str | None = None,
        *,
        label_selector: str | None = None,
        timeout: float | None = None,
        bookmarks: bool = False,
    ) -> Watch:
        """Watch a kind, optionally in one namespace and matching a label selector.

        With ``resource_version`` ``None`` or ``"0"`` the watch starts with an
        ``ADDED`` event per current object; otherwise it replays every change
        after that version and raises :class:`Gone` at once when the version is
        older than the retained history. Changes that move an object into or
        out of the selector arrive as ``ADDED`` or ``DELETED``.
        """
        self._count("watch", kind)
        self.faults.check("watch", kind)
        rtype = self.resource_type(api_version, kind)
        selector = parse_label_selector(label_selector)
        if not rtype.namespaced:
            namespace = None
        with self._lock:
            initial: list[tuple[str, dict[str, Any]]] = []
            if resource_version in (None, "", "0"):
                cursor = self._rv
                initial = [("ADDED", obj) for obj in self._select(rtype, namespace, selector)]
            else:
                if not resource_version.isdigit():
                    raise Invalid(f"resourceVersion: Invalid value: {resource_version!r}")
                cursor = int(resource_version)
                oldest = self._oldest_retained()
                if cursor + 1 < oldest:
                    raise Gone(f"too old resource version: {cursor} ({oldest - 1})")
            stream = Watch(self, rtype, namespace, selector, cursor, initial, timeout, bookmarks)
            if self._closed:
                stream._stopped = True
            else:
                self._watches.add(stream)
            return stream

    def _drop_watches(self) -> None:
        with self._cond:
            for stream in list(self._watches):
                stream._stop_locked()
            self._cond.notify_all()

    def close(self) -> None:
        """End every open watch; watches opened afterwards end at once."""
        with self._cond:
            self._closed = True
        self._drop_watches()

    # -- events --------------------------------------------------------------------

    def record_event(
        self,
        involved: dict[str, Any],
        type: str,
        reason: str,
        message: str,
        *,
        component: str = "lifecycle",
    ) -> dict[str, Any]:
        """Record a v1 Event about ``involved`` in its namespace (``default`` if cluster-scoped).

        An event identical to an earlier one (same involved uid, type, reason,
        message and component) increments that event's ``count`` and
        ``lastTimestamp`` instead of creating a new Event. Faults for
        ``create`` of kind ``Event`` apply.
        """
        self._count("record_event", "Event")
        self.faults.check("create", "Event")
        meta = involved.get("metadata") or {}
        namespace = meta.get("namespace") or "default"
        uid = str(meta.get("uid", ""))
        index_key = (namespace, uid, type, reason, message, component)
        with self._lock:
            stamp = self._timestamp()
            table = self._store[("v1", "Event")]
            existing_name = self._event_index.get(index_key)
            existing = table.get((namespace, existing_name)) if existing_name else None
            if existing is not None:
                new = dict(existing)
                new["metadata"] = dict(existing["metadata"])
                new["count"] = int(existing.get("count", 1)) + 1
                new["lastTimestamp"] = stamp
                return clone(self._commit(EVENT, existing, new))
            involved_name = str(meta.get("name", "object"))
            name = f"{involved_name}.{self._rng.getrandbits(64):016x}"
            event = {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"name": name, "namespace": namespace},
                "involvedObject": {
                    "apiVersion": involved.get("apiVersion", ""),
                    "kind": involved.get("kind", ""),
                    "name": involved_name,
                    "namespace": meta.get("namespace", ""),
                    "uid": uid,
                    "resourceVersion": meta.get("resourceVersion", ""),
                },
                "type": type,
                "reason": reason,
                "message": message,
                "count": 1,
                "firstTimestamp": stamp,
                "lastTimestamp": stamp,
                "source": {"component": component},
                "reportingComponent": component,
            }
            created = self._create(EVENT, event)
            self._event_index[index_key] = name
            return clone(created)
