"""An embedded, in-memory Kubernetes API server.

Tests, the demo and the benchmarks run the engine against :class:`EmbeddedAPI`
instead of a cluster. It keeps objects as plain JSON-like dicts and follows the
API server's rules that a controller can observe: uids, a monotonically
increasing ``resourceVersion``, optimistic concurrency, ``generation``, the
status subresource, finalizers and graceful deletion, label and field
selectors, JSON merge patch, server-side dry runs, paginated lists, garbage
collection of dependents and namespace deletion (:mod:`lifecycle.sim.gc`), and
watches with a bounded history that expires (``410 Gone``).
``docs/embedded-api.md`` lists what it implements and where it differs.

Every object passed in is copied, so a caller can never alias the stored
state through what it wrote. A stored object is never mutated after it is
written: each write builds a new dict, which lets the watch history share
references. What the API returns is a copy too, except through
:meth:`EmbeddedAPI.shared`: that view returns the stored objects themselves,
which its callers must not change (:mod:`lifecycle.sim.sharing`, with its
mutation detector).

Faults (errors, latency, dropped watches) are injected through
:attr:`EmbeddedAPI.faults`; see :class:`FaultInjector`.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable
from datetime import datetime
from typing import Any

from lifecycle.core.objects import metadata
from lifecycle.core.values import now, rfc3339
from lifecycle.kube.errors import (
    AlreadyExists,
    Forbidden,
    Invalid,
    NotFound,
)
from lifecycle.kube.objects import clone, merge_patch
from lifecycle.kube.resources import BUILTIN_TYPES, NAMESPACE, SECRET, ResourceType
from lifecycle.sim.counting import Counting
from lifecycle.sim.crds import CRD, CRDController
from lifecycle.sim.events import Events
from lifecycle.sim.faults import FaultInjector
from lifecycle.sim.gc import Collector, Deletes, deletion_done
from lifecycle.sim.openapi import check_fields
from lifecycle.sim.reads import Reads
from lifecycle.sim.schema import admit as admit_schema
from lifecycle.sim.sharing import Lender, SharedView
from lifecycle.sim.snapshots import Snapshots
from lifecycle.sim.validation import (
    admit_new,
    check_immutable,
    check_meta_types,
    check_name,
    check_resource_version,
    check_uid,
    keep_namespace_spec,
    object_key,
    prepare_secret,
    type_key,
    validate_metadata,
    validate_owner_references,
)
from lifecycle.sim.watch import History

__all__ = ["EmbeddedAPI"]

_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
# Metadata the server owns: ignored on create, kept from the stored object on update.
_SERVER_METADATA = ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds")
_NOT_CREATED = (*_SERVER_METADATA, "resourceVersion", "generation")
_KEPT_ON_UPDATE = (*_SERVER_METADATA, "name", "namespace", "resourceVersion", "generation")
# The bits uuid.UUID(int=..., version=4) clears and sets (variant RFC 4122, version 4).
_UUID_CLEAR = ~((0xC000 << 48) | (0xF000 << 64))
_UUID_SET = (0x8000 << 48) | (4 << 76)
_HINT = (" (a misspelt field? field_validation=\"Ignore\" prunes it, as the call's keyword "
         "or EmbeddedAPI's)")
_log = logging.getLogger(__name__)


def _uuid4(bits: int) -> str:
    """``str(uuid.UUID(int=bits, version=4))``, formatted directly."""
    text = "%032x" % (bits & _UUID_CLEAR | _UUID_SET)
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


class EmbeddedAPI(Counting, Reads, Deletes, Events, Snapshots):
    """An in-memory Kubernetes API server for tests, the demo and benchmarks.

    ``clock`` supplies timestamps (default: :func:`lifecycle.core.values.now`);
    ``watch_window`` is how many writes the watch history retains; ``seed``
    makes generated names, uids and fault probabilities reproducible. The
    namespace ``default`` exists from the start.

    ``stats`` counts calls per verb (failed and faulted calls included);
    :meth:`writes` sums the write verbs, optionally for one kind.

    :meth:`shared` is a view whose reads, writes and watches return the stored
    objects themselves, not copies: its callers treat them as read-only and
    copy before changing. ``detect_mutations`` turns on the detector that
    raises :class:`~lifecycle.kube.sharing.SharedObjectChanged` when a caller
    changed one (default: the ``LIFECYCLE_MUTATION_DETECTOR`` environment
    variable); :meth:`check_shared` runs it over everything handed out.

    ``field_validation`` is what :meth:`create`, :meth:`replace` and :meth:`patch` do with a
    field the schema does not declare, as a request's ``fieldValidation``: ``Strict`` (the
    default) refuses the write with :class:`~lifecycle.kube.errors.BadRequest` naming it,
    ``Warn`` logs it and ``Ignore`` prunes it silently; each call may pass its own. Writes
    through :meth:`shared` (the engine's) are pruned unchecked: a real server prunes them
    for a client naming no ``fieldValidation`` too, and the engine sees the same object.
    """

    def __init__(
        self,
        *,
        clock: Callable[[], datetime] | None = None,
        watch_window: int = 10_000,
        seed: int = 0,
        bookmark_interval: float = 1.0,
        detect_mutations: bool | None = None,
        field_validation: str = "Strict",
    ) -> None:
        check_fields({}, CRD, field_validation, skip_status=False)  # a known mode
        self.field_validation = field_validation
        self._clock = clock or now
        self._lender = Lender(detect=detect_mutations)
        self._last_stamp: tuple[datetime | None, str] = (None, "")
        self._lock = threading.RLock()
        self._log = History(self._lock, watch_window, bookmark_interval)
        self._log.lender = self._lender
        self._rng = random.Random(seed)
        self._types: dict[tuple[str, str], ResourceType] = {}
        self._store: dict[tuple[str, str], dict[tuple[str | None, str], dict[str, Any]]] = {}
        self._event_index: dict[tuple[str, ...], str] = {}
        self._restored_rv = 0  # history before a restore is gone: older watches get 410
        self._gc = Collector(self)
        self._crds = CRDController(self)
        self.faults = FaultInjector(seed)
        self.faults.on_drop(self._log.drop_watches)
        self._calls: dict[tuple[str, str], int] = {}  # (verb, kind) -> calls
        for rtype in (*BUILTIN_TYPES, CRD):
            self.register(rtype)
        self._create(
            NAMESPACE, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}}
        )

    @property
    def bookmark_interval(self) -> float:
        """Seconds between bookmarks on a quiet watch that asked for them."""
        return self._log.bookmark_interval

    @bookmark_interval.setter
    def bookmark_interval(self, seconds: float) -> None:
        self._log.bookmark_interval = seconds

    # -- types ---------------------------------------------------------------

    def register(self, rtype: ResourceType) -> None:
        """Serve a kind. Registering the same type again is a no-op.

        So is registering a built-in kind or one a CustomResourceDefinition
        object serves: those change only through the definition.
        """
        key = (rtype.api_version, rtype.kind)
        with self._lock:
            existing = self._types.get(key)
            if existing is not None and (
                    existing in (*BUILTIN_TYPES, CRD) or self._crds.serves(key)):
                return
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

    @property
    def resource_version(self) -> str:
        """The current (latest) resourceVersion of the whole server."""
        return str(self._log.rv)

    def _record(
        self,
        change_type: str,
        rtype: ResourceType,
        obj: dict[str, Any],
        previous: dict[str, Any] | None,
    ) -> None:
        """Append one change, wake the watches, and let the garbage collector follow it."""
        namespace = obj["metadata"].get("namespace") if rtype.namespaced else None
        self._log.record(change_type, (rtype.api_version, rtype.kind), namespace, obj, previous)
        self._lender.replaced(previous)
        self._gc.track(rtype, None if change_type == "DELETED" else obj, previous)
        if change_type == "DELETED":
            self._gc.removed(rtype, obj)
        if rtype is CRD or change_type == "DELETED":
            self._crds.recorded(change_type, rtype, obj)
        self._events_written(change_type, rtype, obj)  # Events expire (events.py)

    def _timestamp(self) -> str:
        moment = self._clock()
        last = self._last_stamp  # one second is formatted many times: keep the last one
        if last[0] == moment:
            return last[1]
        text = rfc3339(moment)
        self._last_stamp = (moment, text)
        return text

    # -- helpers -------------------------------------------------------------------

    def _type_of(self, obj: Any) -> ResourceType:
        return self.resource_type(*type_key(obj))

    def _out(self, verb: str, obj: dict[str, Any], dry_run: bool = False) -> dict[str, Any]:
        """What ``verb`` returns (lock held): a dry run's answer is never stored, so copied."""
        return clone(obj) if dry_run else self._lender.out(obj, verb)

    def shared(self) -> SharedView:
        """A view of this API whose answers are the stored objects, not copies.

        For callers that never change what they read (the engine): reads cost
        no copy. With the mutation detector on, a change to a shared object
        raises :class:`~lifecycle.kube.sharing.SharedObjectChanged` at the
        server's next look at it.
        """
        return SharedView(self, self._lender)

    def check_shared(self) -> None:
        """Run the mutation detector over every object handed out and not replaced since.

        Raises :class:`~lifecycle.kube.sharing.SharedObjectChanged` naming the
        first changed object and path; does nothing without ``share`` and the
        detector.
        """
        with self._lock:
            self._lender.check()

    # -- create ----------------------------------------------------------------

    def _check_fields(self, obj: Any, rtype: ResourceType, mode: str | None, *,
                      skip_status: bool) -> None:
        """The unknown fields of a write, under ``mode``, else ``Ignore`` for the engine's
        :meth:`shared` view (no walk on its hot path) or :attr:`field_validation`."""
        mode = mode or ("Ignore" if self._lender.in_view() else self.field_validation)
        for path in check_fields(obj, rtype, mode, skip_status=skip_status, hint=_HINT):
            _log.warning("%s: unknown field %r is pruned", rtype.kind, path)

    def create(self, obj: dict[str, Any], *, dry_run: bool = False,
               field_validation: str | None = None) -> dict[str, Any]:
        """Create an object and return it as stored.

        The server sets uid, creationTimestamp, resourceVersion and generation;
        incoming values of those are ignored. ``metadata.generateName`` makes a
        unique name. Custom kinds (types with a status subresource) drop
        ``status``. Namespaced objects need an existing namespace. With
        ``dry_run`` everything is checked and the answer built (name, uid and
        timestamp filled, no resourceVersion) but nothing is stored or sent.
        """
        rtype = self._type_of(obj)
        self._count("create", rtype.kind)
        self.faults.check("create", rtype.kind)
        self._check_fields(obj, rtype, field_validation, skip_status=rtype.status_subresource)
        with self._lock:
            new = self._lender.taken(obj, "create")
            return self._out("create", self._create(rtype, new, dry_run=dry_run), dry_run)

    def _create(
        self, rtype: ResourceType, new: dict[str, Any], *, dry_run: bool = False
    ) -> dict[str, Any]:
        """Create from an owned copy (lock held or taken); returns the stored object."""
        with self._lock:
            check_meta_types(rtype, new)
            meta = new.get("metadata")
            if meta is None:
                meta = {}
            meta = dict(meta)
            new["metadata"] = meta
            for field in _NOT_CREATED:
                meta.pop(field, None)
            if rtype.namespaced:
                namespace = meta.get("namespace")
                if not namespace:
                    raise Invalid(f"{rtype.kind}: metadata.namespace: Required value")
                self._check_namespace_open(rtype, namespace, meta.get("name"))
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
                    name = prefix + "".join(self._rng.choice(_ALPHABET) for _ in range(5))
                    if (namespace, name) not in table:
                        break
                meta["name"] = name
            check_name(rtype, name)
            name = str(name)  # check_name refused anything but a string
            validate_metadata(rtype, name, meta, new)
            validate_owner_references(rtype, name, meta)
            admit_new(rtype, name, new)
            self._crds.check_create(rtype)
            if rtype is CRD:
                new = self._crds.admit(new, None)
            new = admit_schema(rtype, new)
            if (namespace, name) in table:  # checked by the storage, after validation
                raise AlreadyExists(f'{rtype.resource} "{name}" already exists')
            new["apiVersion"], new["kind"] = rtype.api_version, rtype.kind
            self._created(rtype, table, namespace, name, new, dry_run=dry_run)
            if dry_run:
                return new
            self._gc.adopted(rtype, new)
            if rtype is CRD:
                self._crds.written(new)
            return new

    def _check_namespace_open(self, rtype: ResourceType, namespace: str, name: Any) -> None:
        """A namespaced create needs its namespace to exist and not be terminating."""
        ns_obj = self._store[("v1", "Namespace")].get((None, namespace))
        if ns_obj is None:
            raise NotFound(f'namespaces "{namespace}" not found')
        if ns_obj["metadata"].get("deletionTimestamp"):
            raise Forbidden(
                f'{rtype.resource} "{name or ""}" is forbidden: unable to create new content '
                f"in namespace {namespace} because it is being terminated"
            )

    def _created(self, rtype: ResourceType, table: dict[tuple[str | None, str], dict[str, Any]],
                 namespace: str | None, name: str, new: dict[str, Any], *,
                 dry_run: bool = False) -> dict[str, Any]:
        """Fill in what the server sets on a create and store ``new`` (lock held, admitted)."""
        meta = new["metadata"]
        meta["uid"] = _uuid4(self._rng.getrandbits(128))
        meta["creationTimestamp"] = self._timestamp()
        if rtype not in BUILTIN_TYPES:  # built-in kinds have no generation
            meta["generation"] = 1
        if dry_run:
            return new
        self._log.rv += 1
        meta["resourceVersion"] = str(self._log.rv)
        table[(namespace, name)] = new
        self._record("ADDED", rtype, new, None)
        return new

    # -- update --------------------------------------------------------------------

    def _target_of_update(self, rtype: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
        """The stored object an update of ``obj`` writes over, after its uid and
        resourceVersion preconditions (``NotFound``, ``Conflict``)."""
        meta = obj.get("metadata")
        if meta.__class__ is not dict:
            meta = metadata(obj)
        stored = self._stored(rtype, object_key(rtype, meta.get("namespace"), meta.get("name")))
        check_uid(stored, meta.get("uid"))
        check_resource_version(rtype, stored, meta.get("resourceVersion"))
        return stored

    def replace(self, obj: dict[str, Any], *, dry_run: bool = False,
                field_validation: str | None = None) -> dict[str, Any]:
        """Update the main resource (PUT) and return the object as stored.

        ``status`` comes from the stored object for types with a status
        subresource. A stale ``metadata.resourceVersion`` or a different uid
        raises :class:`Conflict`. A write that changes nothing is not stored
        and does not bump the resourceVersion. Removing the last finalizer of
        an object being deleted removes it. With ``dry_run`` the answer is
        built and nothing is stored.
        """
        rtype = self._type_of(obj)
        self._count("replace", rtype.kind)
        self.faults.check("replace", rtype.kind)
        check_meta_types(rtype, obj)
        self._check_fields(obj, rtype, field_validation, skip_status=rtype.status_subresource)
        with self._lock:
            stored = self._target_of_update(rtype, obj)
            if rtype.status_subresource and obj.__class__ is dict and "status" in obj:
                # the stored status wins: do not copy the incoming one (keep its key's place)
                obj = {k: (None if k == "status" else v) for k, v in obj.items()}
            # the server's own copy (metadata type-checked above): deep, or below its
            # metadata the body a SharedView caller hands over (Lender.taken)
            new = self._lender.taken(obj, "replace")
            result = self._replace(rtype, stored, new, dry_run=dry_run, owned=True)
            return self._out("replace", result, dry_run)

    def _replace(self, rtype: ResourceType, stored: dict[str, Any], new: dict[str, Any],
                 dry_run: bool = False, owned: bool = False) -> dict[str, Any]:
        """Write an owned object over ``stored`` (lock held; preconditions checked).

        ``new`` may share parts with ``stored`` (a merge patch's result), so
        its metadata is copied before it is changed; with ``owned`` it is a
        private deep copy whose metadata types were checked already, and is
        changed in place.
        """
        old_meta = stored["metadata"]
        name = old_meta["name"]
        if not owned:
            check_meta_types(rtype, new)
        meta = new.get("metadata")
        if not isinstance(meta, dict):
            raise Invalid(f'{rtype.kind} "{name}" is invalid: metadata: Required value')
        if not owned or meta.__class__ is not dict:
            meta = dict(meta)
            new["metadata"] = meta
        new["apiVersion"], new["kind"] = rtype.api_version, rtype.kind
        for field in _KEPT_ON_UPDATE:
            if field in old_meta:
                meta[field] = old_meta[field]
            else:
                meta.pop(field, None)
        validate_metadata(rtype, name, meta, new, stored)
        validate_owner_references(rtype, name, meta)
        if rtype is NAMESPACE:
            keep_namespace_spec(new, stored, name)
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
        if rtype is CRD:
            new = self._crds.admit(new, stored)
        new = admit_schema(rtype, new, old=stored)
        meta = new["metadata"]
        if rtype is SECRET:
            prepare_secret(new, name)
            new.setdefault("type", stored.get("type", "Opaque"))
        check_immutable(rtype, name, stored, new)
        if new.get("spec") != stored.get("spec") and "generation" in old_meta:
            meta["generation"] = old_meta["generation"] + 1
        result = self._commit(rtype, stored, new, dry_run=dry_run)
        if dry_run:
            return result
        if rtype is CRD and result is not stored:
            self._crds.written(result)
        if result is not stored and meta.get("ownerReferences") != old_meta.get("ownerReferences"):
            self._gc.adopted(rtype, result)
        return result

    def _commit(self, rtype: ResourceType, stored: dict[str, Any], new: dict[str, Any],
                dry_run: bool = False) -> dict[str, Any]:
        """Store ``new`` unless it equals ``stored``; remove it if its deletion is done.

        With ``dry_run`` nothing is stored: ``new`` comes back with the stored
        resourceVersion.
        """
        if new == stored:
            return stored
        meta = new["metadata"]
        if dry_run:
            meta["resourceVersion"] = stored["metadata"]["resourceVersion"]
            return new
        self._log.rv += 1
        meta["resourceVersion"] = str(self._log.rv)
        table = self._store[(rtype.api_version, rtype.kind)]
        key = (meta.get("namespace") if rtype.namespaced else None, meta["name"])
        if deletion_done(rtype, new):
            del table[key]
            self._record("DELETED", rtype, new, stored)
        else:
            table[key] = new
            self._record("MODIFIED", rtype, new, stored)
        return new

    def replace_status(self, obj: dict[str, Any], *, dry_run: bool = False) -> dict[str, Any]:
        """Update the status subresource: only ``status`` changes; generation stays.

        Types without a status subresource answer :class:`NotFound`. With
        ``dry_run`` the answer is built and nothing is stored.
        """
        rtype = self._type_of(obj)
        self._count("replace_status", rtype.kind)
        self.faults.check("replace_status", rtype.kind)
        with self._lock:
            try:
                stored = self._target_of_update(rtype, obj)
            except Exception:
                check_meta_types(rtype, obj)  # a body that does not decode is refused first
                raise
            if obj.get("metadata") is not stored["metadata"]:  # the stored one decoded
                check_meta_types(rtype, obj)
            status = self._lender.taken(obj.get("status"), "replace_status", levels=0)
            result = self._replace_status(rtype, stored, status, dry_run)
            return self._out("replace_status", result, dry_run)

    def _replace_status(
        self, rtype: ResourceType, stored: dict[str, Any], status: Any, dry_run: bool = False
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
        new = admit_schema(rtype, new, old=stored, subresource="status")
        return self._commit(rtype, stored, new, dry_run=dry_run)

    def patch(
        self,
        api_version: str,
        kind: str,
        namespace: str | None,
        name: str,
        patch: dict[str, Any],
        *,
        subresource: str | None = None,
        dry_run: bool = False,
        field_validation: str | None = None,
    ) -> dict[str, Any]:
        """Apply a JSON merge patch (RFC 7386) to the object or its ``status`` subresource.

        A ``metadata.resourceVersion`` (or ``uid``) in the patch is a
        precondition. The result is written with the rules of :meth:`replace`
        or :meth:`replace_status` (``dry_run`` included).
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
            stored = self._stored(rtype, object_key(rtype, namespace, name))
            patch_meta = patch.get("metadata")
            if isinstance(patch_meta, dict):
                check_uid(stored, patch_meta.get("uid"))
                check_resource_version(rtype, stored, patch_meta.get("resourceVersion"))
            merged = merge_patch(stored, patch)
            self._check_fields(merged, rtype, field_validation, skip_status=(
                rtype.status_subresource and subresource is None))
            if subresource == "status":
                result = self._replace_status(rtype, stored, merged.get("status"), dry_run)
            else:
                result = self._replace(rtype, stored, merged, dry_run=dry_run)
            return self._out("patch", result, dry_run)

    # -- delete --------------------------------------------------------------------

    def _deleting(self, rtype: ResourceType, stored: dict[str, Any]) -> dict[str, Any]:
        """The object a delete starts from (a CRD first gets its cleanup finalizer)."""
        return self._crds.deleting(stored) if rtype is CRD else stored

    def compact(self) -> int:
        """Forget the watch history before the current resourceVersion, as etcd's
        compaction does; return that version. A watch (or an exact list) from an
        older resourceVersion answers 410 Gone from now on."""
        with self._lock:
            return self._log.compact()

    def close(self) -> None:
        """End every open watch; watches opened afterwards end at once."""
        self._log.close()
