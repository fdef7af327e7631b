"""A test harness for lifecycle machines (its pytest fixture is in :mod:`lifecycle.testing.plugin`).

:class:`Environment` wires an embedded API, kinds with their connectors and a
virtual clock. Tests apply manifests, step single reconciles or run a
simulated work queue until the objects settle, then assert on states,
conditions, results and the external calls made::

    def test_database_becomes_ready(lifecycle_env):
        env = lifecycle_env()
        env.apply(database("orders"))
        env.run_until_idle()
        assert env.state("DatabaseInstance", "orders") == "ready"

The work queue here follows the requeue matrix with virtual time: no test
ever sleeps. Requeue-now items run first, then the earliest due item;
failures back off by the operator's per-item rule, and ``run_until_idle``
reports an object that keeps failing instead of retrying it for a virtual
day. ``apply`` merges like ``kubectl apply``; ``faults`` fails the engine's
own API calls; ``steps`` keeps a bounded history.
"""

from __future__ import annotations

import base64
import copy
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import yaml

from lifecycle.core.conditions import get as get_condition
from lifecycle.core.contract import Connector
from lifecycle.core.decide import ReconcilePolicy
from lifecycle.core.errors import UnhandledError
from lifecycle.core.history import DEFAULT_LIMIT, History
from lifecycle.core.kind import PROVIDER_CONFIG_API, PROVIDER_CONFIG_KIND, Kind
from lifecycle.core.requeue import Reconciles
from lifecycle.core.values import Condition, Result
from lifecycle.core.vocabulary import ConditionTypes
from lifecycle.kube.errors import BadRequest, NotFound
from lifecycle.runtime.reconciler import Reconciler
from lifecycle.schema.crds import crds
from lifecycle.sim.apiserver import EmbeddedAPI
from lifecycle.sim.crds import CRD, apply_crd
from lifecycle.sim.openapi import unknown_fields
from lifecycle.testing.faults import ApiFaults, FaultyAPI
from lifecycle.testing.queue import (
    Backoff,
    Key,
    NotSettled,
    Queued,
    Step,
    VirtualClock,
    VirtualQueue,
)
from lifecycle.testing.wakeups import ReferenceWakeups

__all__ = ["DEFAULT_BACKOFF", "DEFAULT_MAX_ATTEMPTS", "FIELD_VALIDATION", "Backoff",
           "Environment", "NotSettled", "Queued", "Step", "VirtualClock", "merge_applied"]

#: Failed reconciles in a row after which :meth:`Environment.run_until_idle` gives up on an object.
DEFAULT_MAX_ATTEMPTS = 20

#: The queue's backoff unless told otherwise: 1 s doubling to 60 s, the operator's default.
DEFAULT_BACKOFF = Backoff()

#: What :meth:`Environment.apply` does with a field the kind's schema does not declare, as the
#: API server's ``fieldValidation``: refuse the manifest (``Strict``, kubectl's default), keep
#: going and record a warning (``Warn``), or drop the field silently (``Ignore``).
FIELD_VALIDATION = ("Strict", "Warn", "Ignore")

#: Top-level fields :meth:`Environment.apply` never merges (metadata is merged field by field).
_NOT_APPLIED = frozenset({"apiVersion", "kind", "metadata", "status"})

#: The schema :meth:`Environment.serve_lenient` serves: ``spec`` and ``status`` keep anything.
_LENIENT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "apiVersion": {"type": "string"}, "kind": {"type": "string"},
        "metadata": {"type": "object"},
        "spec": {"x-kubernetes-preserve-unknown-fields": True},
        "status": {"x-kubernetes-preserve-unknown-fields": True},
    },
}


def merge_applied(current: Mapping[str, Any], last: Mapping[str, Any] | None,
                  manifest: Mapping[str, Any]) -> dict[str, Any]:
    """``kubectl apply``'s three-way merge of one mapping (lists are replaced whole).

    Fields of ``manifest`` are set (``None`` removes one); fields the last
    applied manifest ``last`` had and ``manifest`` no longer has are removed;
    every other field of ``current`` (one the engine or someone else wrote)
    is kept.
    """
    last = last or {}
    merged = dict(current)
    for key in last:
        if key not in manifest:
            merged.pop(key, None)
    for key, value in manifest.items():
        if value is None:
            merged.pop(key, None)
        elif isinstance(value, Mapping):
            base, before = merged.get(key), last.get(key)
            merged[key] = merge_applied(base if isinstance(base, Mapping) else {},
                                        before if isinstance(before, Mapping) else None, value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


class Environment:
    """An embedded cluster, kinds and their connectors, with a virtual work queue.

    ``kinds`` pairs each :class:`Kind` with the connector its reconciler uses.
    Every kind (and ProviderConfig) is served from its generated CRD; the kinds
    named in ``lenient`` are then served as :meth:`serve_lenient` describes.
    ``backoff`` sets the queue's per-item backoff (the operator's rule);
    ``seed`` seeds the embedded API and :attr:`faults`; ``history`` is how
    many steps :attr:`steps` keeps (``None``: every one); ``allow_adoption``
    the namespaces (``"*"``: all) whose objects may adopt an existing external
    resource, as the operator's ``--allow-adoption``; ``field_validation`` what
    :meth:`apply` does with a field the schema does not declare (``Strict``,
    the default, refuses the manifest as ``kubectl apply`` does; see
    :data:`FIELD_VALIDATION`). The reference, with an example of each method,
    is ``docs/harness.md``.
    """

    def __init__(
        self,
        kinds: Sequence[tuple[Kind, Connector]],
        *,
        operator_id: str | None = None,
        default_policy: ReconcilePolicy = ReconcilePolicy.MANAGE,
        backoff: Backoff = DEFAULT_BACKOFF,
        api: EmbeddedAPI | None = None,
        clock: VirtualClock | None = None,
        seed: int = 0,
        lenient: Sequence[str] = (),
        history: int | None = DEFAULT_LIMIT,
        allow_adoption: Collection[str] = (),
        field_validation: str = "Strict",
    ) -> None:
        _check_mode(field_validation)
        #: :meth:`apply`'s default ``fieldValidation`` (:data:`FIELD_VALIDATION`).
        self.field_validation = field_validation
        #: The unknown-field warnings of :meth:`apply` under ``Warn``, oldest first.
        self.warnings: list[str] = []
        self.clock = clock or VirtualClock()
        self.api = api or EmbeddedAPI(clock=self.clock.now, seed=seed, detect_mutations=True)
        #: Faults of the engine's API calls (:class:`~lifecycle.testing.faults.ApiFaults`).
        self.faults = ApiFaults(seed)
        #: The API as the reconcilers see it: :attr:`faults` first, then :attr:`api`'s
        #: shared view (the engine reads the stored objects without copying them; a
        #: reconciler that changed one fails with ``SharedObjectChanged``).
        self.operator_api = FaultyAPI(self.api.shared(), self.faults)
        # Every kind is served from its generated CRD, as on a cluster: unknown
        # fields are pruned, defaults applied and invalid objects refused (422).
        for doc in crds([kind for kind, _ in kinds]):
            apply_crd(self.api, doc)
        for kind_name in lenient:
            self.serve_lenient(kind_name)
        self.kinds: dict[str, Kind] = {}
        self.reconcilers: dict[str, Reconciles] = {}
        for kind, connector in kinds:
            self.kinds[kind.kind] = kind
            self.reconcilers[kind.kind] = Reconciler(
                self.operator_api, kind, connector, operator_id=operator_id,
                default_policy=default_policy, clock=self.clock.now,
                allow_adoption=frozenset(allow_adoption),
            )
        #: What waits on a reference: an object is reconciled as soon as what it names
        #: turns Ready, as the operator's informers queue it (not at its backoff).
        self.wakeups = ReferenceWakeups(self.kinds)
        self.backoff = backoff
        #: The newest reconciles run (``history`` of them; ``None`` keeps all), oldest first.
        self.steps: History[Step] = History(history)
        self._queue = VirtualQueue(backoff, self.clock)
        self._applied: dict[Key, dict[str, Any]] = {}

    # ----------------------------------------------------------------- CRDs
    def serve_lenient(self, kind: str) -> dict[str, Any]:
        """Serve ``kind`` from a CRD that keeps whatever ``spec`` and ``status`` hold.

        This models objects a cluster can hold although the kind's current CRD
        would refuse them: objects written under an older CRD version without
        validation, under a CRD with ``x-kubernetes-preserve-unknown-fields``,
        or by a hand edit before the schema was tightened. The engine must
        still handle them (a clear condition, a repaired status, other objects
        carrying on), so tests that store such objects first show that the
        current CRD answers 422, then serve the kind leniently and store them.

        The kind's CustomResourceDefinition object is updated through the store
        (so watches and discovery see the change as on a cluster): every
        version keeps its subresources and printer columns, and its schema
        becomes ``x-kubernetes-preserve-unknown-fields: true`` on ``spec`` and
        ``status`` with no type, default or other validation. ``kind`` is a
        kind name such as ``"DatabaseInstance"`` or ``"ProviderConfig"``;
        returns the CRD as stored. Raises ``KeyError`` if no CRD serves it.
        """
        items, _ = self.api.list(CRD.api_version, CRD.kind)
        for item in items:
            if ((item.get("spec") or {}).get("names") or {}).get("kind") != kind:
                continue
            body = {"apiVersion": item["apiVersion"], "kind": item["kind"],
                    "metadata": item["metadata"], "spec": dict(item["spec"])}
            body["spec"]["versions"] = [
                {**version, "schema": {"openAPIV3Schema": _LENIENT_SCHEMA}}
                for version in item["spec"].get("versions") or []]
            return apply_crd(self.api, body)
        raise KeyError(f"no CustomResourceDefinition serves the kind {kind!r}")

    # ------------------------------------------------------------- objects
    def provider_config(
        self,
        name: str = "default",
        credentials: Mapping[str, str] | None = None,
        namespace: str = "default",
        spec: Mapping[str, Any] | None = None,
        api_version: str = PROVIDER_CONFIG_API,
    ) -> dict[str, Any]:
        """Create or update a ProviderConfig (extra ``spec`` fields merged in) and its Secret.

        ``api_version`` chooses the ProviderConfig kind (a kind's
        ``provider_config_api``; the engine's own by default).

        The Secret ``<name>-credentials`` in ``namespace`` holds ``credentials``
        (an access key pair by default). Calling it again for the same name
        replaces both, so it is safe after an environment that made one.
        """
        creds = dict(credentials or {"accessKeyId": "AKIDEXAMPLE", "secretAccessKey": "s3cr3t"})
        secret_name = f"{name}-credentials"
        self._put({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": secret_name, "namespace": namespace},
            "data": {k: base64.b64encode(v.encode()).decode() for k, v in creds.items()},
        }, namespace)
        return self._put({
            "apiVersion": api_version, "kind": PROVIDER_CONFIG_KIND,
            "metadata": {"name": name},
            "spec": {**(spec or {}),
                     "credentials": {"secretRef": {"name": secret_name, "namespace": namespace}}},
        }, None)

    def _put(self, body: dict[str, Any], namespace: str | None) -> dict[str, Any]:
        try:
            current = self.api.get(body["apiVersion"], body["kind"], namespace,
                                   body["metadata"]["name"])
        except NotFound:
            return self.api.create(body)
        return self.api.replace({**body, "metadata": current["metadata"]})

    def namespace(self, name: str, annotations: Mapping[str, str] | None = None) -> dict[str, Any]:
        """Create (or annotate) a namespace."""
        try:
            ns = self.api.get("v1", "Namespace", None, name)
        except NotFound:
            return self.api.create({"apiVersion": "v1", "kind": "Namespace",
                                    "metadata": {"name": name,
                                                 "annotations": dict(annotations or {})}})
        ns["metadata"]["annotations"] = {**(ns["metadata"].get("annotations") or {}),
                                         **(annotations or {})}
        return self.api.replace(ns)

    def apply(self, manifest: Mapping[str, Any] | str, *,
              field_validation: str | None = None) -> dict[str, Any]:
        """Create the object or merge the manifest into it, as ``kubectl apply`` does; enqueue it.

        A field the kind's schema does not declare (a misspelt ``partitons``)
        is refused with :class:`~lifecycle.kube.errors.BadRequest` naming it,
        as the API server's strict field validation refuses it for kubectl;
        ``field_validation`` (default: the environment's) is ``Warn`` to keep
        going with a warning in :attr:`warnings`, ``Ignore`` to have the field
        pruned silently (see :data:`FIELD_VALIDATION`).

        ``manifest`` is a dict or YAML text. On an existing object the fields
        the manifest sets are written, the fields the previous ``apply`` set
        and this one leaves out are removed, and every other field is kept:
        spec fields the engine late-initialised survive re-applying the same
        manifest. This holds for ``spec`` and every other top-level field but
        ``status``, and for ``metadata.labels`` and ``metadata.annotations``;
        a ``None`` value removes a field. Lists are replaced whole.
        """
        data = copy.deepcopy(yaml.safe_load(manifest) if isinstance(manifest, str)
                             else dict(manifest))
        meta = data["metadata"]
        namespace = meta.get("namespace", "default") if self._namespaced(data["kind"]) else None
        if namespace is not None:
            meta["namespace"] = namespace
        key = (data["kind"], namespace, meta["name"])
        self._check_fields(data, field_validation or self.field_validation)
        old = self._followed(data["kind"], namespace, meta["name"])
        try:
            current = self.api.get(data["apiVersion"], data["kind"], namespace, meta["name"])
        except NotFound:
            created = merge_applied({}, None, data)
            created["metadata"].setdefault("annotations", {})
            obj = self.api.create(created, field_validation="Ignore")  # checked above
        else:
            last = self._applied.get(key, {})
            cmeta, lmeta = current["metadata"], last.get("metadata") or {}
            for field in ("labels", "annotations"):
                cmeta[field] = merge_applied(cmeta.get(field) or {}, lmeta.get(field),
                                             meta.get(field) or {})
            body = merge_applied({k: v for k, v in current.items() if k not in _NOT_APPLIED},
                                 {k: v for k, v in last.items() if k not in _NOT_APPLIED},
                                 {k: v for k, v in data.items() if k not in _NOT_APPLIED})
            merged = {k: v for k, v in current.items() if k in _NOT_APPLIED}
            obj = self.api.replace({**merged, **body}, field_validation="Ignore")
        self._applied[key] = data
        self.enqueue(data["kind"], meta["name"], namespace)
        self._wake(data["kind"], namespace, meta["name"], old)
        return obj

    def _check_fields(self, data: dict[str, Any], mode: str) -> None:
        """Refuse (``Strict``) or record (``Warn``) the fields of a manifest its schema lacks."""
        _check_mode(mode)
        if mode == "Ignore":
            return
        try:
            rtype = self.api.resource_type(data["apiVersion"], data["kind"])
        except NotFound:
            return  # the write itself answers 404
        unknown = unknown_fields(data, rtype, skip_status=rtype.status_subresource)
        if not unknown:
            return
        if mode == "Strict":
            listed = ", ".join(f'unknown field "{path}"' for path in unknown)
            raise BadRequest(f'{rtype.kind} in version "{rtype.version}" cannot be handled as '
                             f"a {rtype.kind}: strict decoding error: {listed} (a misspelt "
                             f"field? apply(..., field_validation=\"Ignore\") prunes it)")
        self.warnings += [f'{rtype.kind} {data["metadata"]["name"]}: unknown field "{path}"'
                          for path in unknown]

    def delete(self, kind: str, name: str, namespace: str | None = "default") -> None:
        """Request deletion (sets deletionTimestamp while finalizers remain); enqueue."""
        ns = namespace if self._namespaced(kind) else None
        old = self._followed(kind, ns, name)
        self.api.delete(self.kinds[kind].api_version, kind, ns, name)
        self.enqueue(kind, name, ns)
        self._wake(kind, ns, name, old)

    def get(self, kind: str, name: str, namespace: str | None = "default") -> dict[str, Any]:
        """The object as stored; raises ``NotFound``."""
        ns = namespace if self._namespaced(kind) else None
        return self.api.get(self.kinds[kind].api_version, kind, ns, name)

    def exists(self, kind: str, name: str, namespace: str | None = "default") -> bool:
        """Whether the object is still stored."""
        try:
            self.get(kind, name, namespace)
        except NotFound:
            return False
        return True

    def state(self, kind: str, name: str, namespace: str | None = "default") -> str | None:
        """The machine state stored in status, or ``"deleted"`` once the object is gone."""
        try:
            obj = self.get(kind, name, namespace)
        except NotFound:
            return "deleted"
        status = obj.get("status")
        return status.get("state") if isinstance(status, Mapping) else None

    def condition(
        self, kind: str, name: str, type_: str, namespace: str | None = "default"
    ) -> Condition | None:
        """One condition of the object."""
        obj = self.get(kind, name, namespace)
        return get_condition((obj.get("status") or {}).get("conditions") or [], type_)

    def history(
        self, kind: str, name: str, namespace: str | None = "default"
    ) -> list[tuple[str, str, str]]:
        """The transitions recorded in ``status.history`` as (from, to, event), oldest first.

        Only changes of state are recorded there (the machine's last ten by
        default): a self-transition (``wait`` in Creating, ``available`` in
        Ready) changes nothing and is not. Every pass, self-transitions
        included, is in :attr:`steps` (``before == after``).
        """
        obj = self.get(kind, name, namespace)
        return [(h["from"], h["to"], h["event"])
                for h in (obj.get("status") or {}).get("history") or []]

    def secret(self, name: str, namespace: str = "default") -> dict[str, str]:
        """A Secret's data, decoded."""
        obj = self.api.get("v1", "Secret", namespace, name)
        return {k: base64.b64decode(v).decode() for k, v in (obj.get("data") or {}).items()}

    def events(self, name: str | None = None) -> list[dict[str, Any]]:
        """Kubernetes Events recorded, optionally about one object name, oldest first.

        Ordered by first occurrence, then by when the server last wrote them
        (a repeated Event is one object whose ``count`` grows).
        """
        items, _ = self.api.list("v1", "Event")
        chosen = [e for e in items if name is None or e["involvedObject"]["name"] == name]
        return sorted(chosen, key=lambda e: (str(e.get("firstTimestamp") or ""),
                                             int(e["metadata"]["resourceVersion"])))

    # --------------------------------------------------------------- queue
    def enqueue(self, kind: str, name: str, namespace: str | None = "default",
                after: float = 0.0, reason: str = "Event") -> None:
        """Schedule a reconcile ``after`` virtual seconds from now (earliest wins)."""
        self._queue.add((kind, namespace, name), after, reason)

    def reconcile(self, kind: str, name: str, namespace: str | None = "default") -> Step:
        """Run one reconcile now, apply its result to the queue, and return the step.

        An API error the engine does not handle (any but NotFound, and a
        fault of :attr:`faults`) ends the step with ``error`` set and the key
        retried with backoff, as the operator does. Any other exception (a
        bug) propagates, so the test fails.
        """
        ns = namespace if self._namespaced(kind) else None
        key = (kind, ns, name)
        self._queue.take(key)
        before = self._state_or_none(kind, name, ns)
        old = self._followed(kind, ns, name)
        reconciler = self.reconcilers[kind]
        error = None
        result: Result | None
        try:
            result = reconciler.reconcile(ns, name)
        except UnhandledError as exc:
            result, error = None, str(exc)
        after = self._state_or_none(kind, name, ns, key)
        step = Step(kind, ns, name, self.clock.now(), before, after, result, error)
        self.steps.append(step)
        self._queue.settle(key, result, error)
        self._wake(kind, ns, name, old)
        return step

    def pending(self) -> dict[tuple[str, str | None, str], tuple[float, str]]:
        """Queued keys with their virtual due time (seconds since the start) and reason."""
        return dict(self._queue.due)

    def queued(self, kind: str, name: str, namespace: str | None = "default") -> Queued | None:
        """Where the object stands in the queue: next due time, reason, failed attempts.

        ``None`` when it is not queued (done, or never enqueued).
        """
        ns = namespace if self._namespaced(kind) else None
        return self._queue.queued((kind, ns, name))

    def retrying(self) -> list[Queued]:
        """Every queued object whose last reconcile failed, most attempts first."""
        found = [q for q in map(self._queue.queued, list(self._queue.due)) if q and q.attempts]
        return sorted(found, key=lambda q: (-q.attempts, q.kind, q.namespace or "", q.name))

    def run_until_idle(self, max_steps: int = 10_000, horizon: float = 24 * 3600.0,
                       max_attempts: int | None = DEFAULT_MAX_ATTEMPTS,
                       stop_when_stuck: bool = True) -> list[Step]:
        """Run queued reconciles in due order until only Ready polls remain; return them.

        Raises :class:`NotSettled` (an ``AssertionError``) with a summary
        naming every object still queued, its failed attempts and its last
        error when an object has failed ``max_attempts`` reconciles in a row
        (``None``: never), when an object reports ``Stuck`` (its operation
        outlasted the state's ``max_in_state``; unless ``stop_when_stuck`` is
        false), when ``max_steps`` reconciles ran, or when the next one is due
        more than ``horizon`` virtual seconds after the call.
        """
        ran: list[Step] = []
        limit = self._queue.elapsed + horizon
        while self._queue.due:
            if all(reason == "Poll" for _, reason in self._queue.due.values()):
                return ran
            popped = self._queue.next_due()
            if popped is None:
                break
            due, key = popped
            if due > limit:
                self._queue.push_back(due, key)
                raise self._not_settled(f"queue did not settle within {horizon:g}s")
            self._queue.move_to(due)
            ran.append(self.reconcile(key[0], key[2], key[1]))
            if stop_when_stuck and key in self._queue.stuck and key in self._queue.due:
                raise self._not_settled(f"queue did not settle: {key[0]} {key[2]} is Stuck")
            if max_attempts is not None and self._queue.attempts(key) >= max_attempts:
                raise self._not_settled(
                    f"queue did not settle: {key[0]} {key[2]} failed {max_attempts} "
                    "reconciles in a row")
            if len(ran) >= max_steps:
                raise self._not_settled(f"queue did not settle in {max_steps} steps")
        return ran

    def _not_settled(self, headline: str) -> NotSettled:
        queued = [q for q in map(self._queue.queued, list(self._queue.due))
                  if q is not None and q.reason != "Poll"]
        queued.sort(key=lambda q: (-q.attempts, q.delay, q.kind, q.namespace or "", q.name))
        lines = [q.describe() for q in queued[:20]]
        if len(queued) > 20:
            lines.append(f"... and {len(queued) - 20} more")
        return NotSettled("\n  ".join([f"{headline}; still queued:", *lines]), queued)

    def advance(self, seconds: float) -> list[Step]:
        """Move virtual time forward, running every reconcile that falls due on the way."""
        target = self._queue.elapsed + seconds
        ran: list[Step] = []
        while (popped := self._queue.next_due(target)) is not None:
            due, key = popped
            self._queue.move_to(due)
            ran.append(self.reconcile(key[0], key[2], key[1]))
        self._queue.move_to(target)
        return ran

    # ------------------------------------------------------------- helpers
    def _followed(self, kind: str, ns: str | None, name: str) -> dict[str, Any] | None:
        """The stored object when :attr:`wakeups` follows its kind (else, or absent: None)."""
        known = self.kinds.get(kind)
        if known is None or not self.wakeups.follows(known):
            return None
        try:
            return self.api.get(known.api_version, kind, ns, name)
        except NotFound:
            return None

    def _wake(self, kind: str, ns: str | None, name: str, old: dict[str, Any] | None) -> None:
        """Queue now (reason ``Reference``) what the change of this object from ``old`` may
        resolve (:meth:`~lifecycle.testing.wakeups.ReferenceWakeups.changed`)."""
        known = self.kinds.get(kind)
        if known is None or not self.wakeups.follows(known):
            return
        for key in self.wakeups.changed(known, old, self._followed(kind, ns, name)):
            self._queue.add(key, 0.0, "Reference")

    def _namespaced(self, kind: str) -> bool:
        known = self.kinds.get(kind)
        return known.namespaced if known is not None else kind not in {"Namespace"}

    def _state_or_none(self, kind: str, name: str, ns: str | None,
                       key: Key | None = None) -> str | None:
        """The stored state; with ``key``, also note whether the object reports Stuck."""
        try:
            obj = self.api.get(self.kinds[kind].api_version, kind, ns, name)
        except NotFound:
            obj = {}
        status = obj.get("status")
        status = status if isinstance(status, Mapping) else {}
        if key is not None:
            stuck = get_condition(status.get("conditions") or [], ConditionTypes.STUCK)
            if stuck is not None and stuck.status.value == "True":
                self._queue.stuck[key] = stuck.message or stuck.reason
            else:
                self._queue.stuck.pop(key, None)
        return status.get("state")


def _check_mode(mode: str) -> None:
    if mode not in FIELD_VALIDATION:
        raise ValueError(f"field_validation must be one of {', '.join(FIELD_VALIDATION)}, "
                         f"not {mode!r}")
