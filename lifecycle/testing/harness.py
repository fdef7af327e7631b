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
ever sleeps. Requeue-now items run first, then the earliest due item.
"""

from __future__ import annotations

import base64
import heapq
import itertools
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import attrs
import yaml

from lifecycle.core.conditions import get as get_condition
from lifecycle.core.decide import ReconcilePolicy
from lifecycle.core.errors import UnhandledError
from lifecycle.core.kind import PROVIDER_CONFIG_API, PROVIDER_CONFIG_KIND, Kind
from lifecycle.core.values import Condition, Result, ResultKind
from lifecycle.driver.crds import crds
from lifecycle.kube.errors import NotFound
from lifecycle.runtime.contract import Connector
from lifecycle.runtime.reconciler import Reconciler
from lifecycle.sim.apiserver import EmbeddedAPI
from lifecycle.sim.crds import CRD, apply_crd

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


class VirtualClock:
    """A clock that moves only when told; the harness advances it to the next due item."""

    def __init__(self, start: datetime | None = None) -> None:
        self.current = start or datetime(2026, 1, 1, tzinfo=UTC)

    def now(self) -> datetime:
        """The current virtual time."""
        return self.current

    def advance(self, seconds: float) -> None:
        """Move forward by ``seconds``."""
        self.current += timedelta(seconds=max(0.0, seconds))


@attrs.frozen
class Step:
    """One reconcile the harness ran: its key, result, and the state before and after."""

    kind: str
    namespace: str | None
    name: str
    time: datetime
    before: str | None
    after: str | None
    result: Result | None
    error: str | None = None


@attrs.frozen
class Backoff:
    """Per-item exponential backoff of the simulated work queue (seconds)."""

    base: float = 1.0
    cap: float = 60.0

    def delay(self, failures: int, at_least: float = 0.0) -> float:
        """The delay after ``failures`` consecutive failures, never below ``at_least``."""
        exponent = min(max(0, failures - 1), 64)  # 2**64 s is past any cap
        return max(at_least, min(self.cap, self.base * 2.0**exponent))


class Environment:
    """An embedded cluster, kinds and their connectors, with a virtual work queue.

    ``kinds`` pairs each :class:`Kind` with the connector its reconciler uses.
    Every kind (and ProviderConfig) is served from its generated CRD; the kinds
    named in ``lenient`` are then served as :meth:`serve_lenient` describes.
    """

    def __init__(
        self,
        kinds: Sequence[tuple[Kind, Connector]],
        *,
        operator_id: str | None = None,
        default_policy: ReconcilePolicy = ReconcilePolicy.MANAGE,
        backoff: Backoff = Backoff(),
        api: EmbeddedAPI | None = None,
        clock: VirtualClock | None = None,
        seed: int = 0,
        lenient: Sequence[str] = (),
    ) -> None:
        self.clock = clock or VirtualClock()
        self.api = api or EmbeddedAPI(clock=self.clock.now, seed=seed)
        # Every kind is served from its generated CRD, as on a cluster: unknown
        # fields are pruned, defaults applied and invalid objects refused (422).
        for doc in crds([kind for kind, _ in kinds]):
            apply_crd(self.api, doc)
        for kind_name in lenient:
            self.serve_lenient(kind_name)
        self.kinds: dict[str, Kind] = {}
        self.reconcilers: dict[str, Reconciler] = {}
        for kind, connector in kinds:
            self.kinds[kind.kind] = kind
            self.reconcilers[kind.kind] = Reconciler(
                self.api, kind, connector, operator_id=operator_id,
                default_policy=default_policy, clock=self.clock.now,
            )
        self.backoff = backoff
        self.steps: list[Step] = []
        self._due: dict[tuple[str, str | None, str], tuple[float, str]] = {}
        self._heap: list[tuple[float, int, tuple[str, str | None, str]]] = []
        self._seq = itertools.count()
        self._failures: dict[tuple[str, str | None, str], int] = {}
        self._elapsed = 0.0

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
    ) -> dict[str, Any]:
        """Create a ProviderConfig (extra ``spec`` fields merged in) and its credentials Secret."""
        creds = dict(credentials or {"accessKeyId": "AKIDEXAMPLE", "secretAccessKey": "s3cr3t"})
        secret_name = f"{name}-credentials"
        self.api.create({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": secret_name, "namespace": namespace},
            "data": {k: base64.b64encode(v.encode()).decode() for k, v in creds.items()},
        })
        return self.api.create({
            "apiVersion": PROVIDER_CONFIG_API, "kind": PROVIDER_CONFIG_KIND,
            "metadata": {"name": name},
            "spec": {**(spec or {}),
                     "credentials": {"secretRef": {"name": secret_name, "namespace": namespace}}},
        })

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

    def apply(self, manifest: Mapping[str, Any] | str) -> dict[str, Any]:
        """Create the object, or update its spec, labels and annotations; enqueue it.

        ``manifest`` is a dict or YAML text. Annotations set to ``None`` are removed.
        """
        data = yaml.safe_load(manifest) if isinstance(manifest, str) else dict(manifest)
        meta = data["metadata"]
        namespace = meta.get("namespace", "default") if self._namespaced(data["kind"]) else None
        if namespace is not None:
            meta["namespace"] = namespace
        try:
            current = self.api.get(data["apiVersion"], data["kind"], namespace, meta["name"])
        except NotFound:
            meta["annotations"] = {k: v for k, v in (meta.get("annotations") or {}).items()
                                   if v is not None}
            obj = self.api.create(data)
        else:
            cmeta = current["metadata"]
            annotations = {**(cmeta.get("annotations") or {}), **(meta.get("annotations") or {})}
            cmeta["annotations"] = {k: v for k, v in annotations.items() if v is not None}
            cmeta["labels"] = {**(cmeta.get("labels") or {}), **(meta.get("labels") or {})}
            if "spec" in data:
                current["spec"] = data["spec"]
            obj = self.api.replace(current)
        self.enqueue(data["kind"], meta["name"], namespace)
        return obj

    def delete(self, kind: str, name: str, namespace: str | None = "default") -> None:
        """Request deletion (sets deletionTimestamp while finalizers remain); enqueue."""
        ns = namespace if self._namespaced(kind) else None
        self.api.delete(self.kinds[kind].api_version, kind, ns, name)
        self.enqueue(kind, name, ns)

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
        """The recorded transitions as (from, to, event)."""
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
        key = (kind, namespace, name)
        due = self._elapsed + after
        current = self._due.get(key)
        if current is not None and current[0] <= due:
            return
        self._due[key] = (due, reason)
        heapq.heappush(self._heap, (due, next(self._seq), key))

    def reconcile(self, kind: str, name: str, namespace: str | None = "default") -> Step:
        """Run one reconcile now, apply its result to the queue, and return the step."""
        ns = namespace if self._namespaced(kind) else None
        key = (kind, ns, name)
        self._due.pop(key, None)
        before = self._state_or_none(kind, name, ns)
        reconciler = self.reconcilers[kind]
        error = None
        result: Result | None
        try:
            result = reconciler.reconcile(ns, name)
        except UnhandledError as exc:
            result, error = None, str(exc)
        after = self._state_or_none(kind, name, ns)
        step = Step(kind, ns, name, self.clock.now(), before, after, result, error)
        self.steps.append(step)
        self._schedule(key, result)
        return step

    def _schedule(self, key: tuple[str, str | None, str], result: Result | None) -> None:
        kind, ns, name = key
        if result is None or result.kind is ResultKind.BACKOFF:
            failures = self._failures.get(key, 0) + 1
            self._failures[key] = failures
            at_least = result.after if result is not None else 0.0
            self.enqueue(kind, name, ns, self.backoff.delay(failures, at_least), "Backoff")
            return
        self._failures.pop(key, None)
        if result.kind is ResultKind.REQUEUE_NOW:
            self.enqueue(kind, name, ns, 0.0, "Now")
        elif result.kind is ResultKind.REQUEUE_AFTER:
            self.enqueue(kind, name, ns, result.after, result.reason or "After")

    def pending(self) -> dict[tuple[str, str | None, str], tuple[float, str]]:
        """Queued keys with their virtual due time and reason."""
        return dict(self._due)

    def run_until_idle(self, max_steps: int = 10_000, horizon: float = 24 * 3600.0) -> list[Step]:
        """Run queued reconciles in due order until only Ready polls remain.

        Raises ``AssertionError`` if the queue does not settle within
        ``max_steps`` reconciles or ``horizon`` virtual seconds.
        """
        ran: list[Step] = []
        while self._due:
            if all(reason == "Poll" for _, reason in self._due.values()):
                return ran
            due, _, key = heapq.heappop(self._heap)
            current = self._due.get(key)
            if current is None or current[0] != due:
                continue  # superseded entry
            if due > horizon:
                raise AssertionError(f"queue did not settle within {horizon}s: {self._due}")
            if due > self._elapsed:
                self.clock.advance(due - self._elapsed)
                self._elapsed = due
            ran.append(self.reconcile(key[0], key[2], key[1]))
            if len(ran) >= max_steps:
                raise AssertionError(f"queue did not settle in {max_steps} steps: {self._due}")
        return ran

    def advance(self, seconds: float) -> list[Step]:
        """Move virtual time forward, running every reconcile that falls due on the way."""
        target = self._elapsed + seconds
        ran: list[Step] = []
        while self._heap and self._heap[0][0] <= target:
            due, _, key = heapq.heappop(self._heap)
            current = self._due.get(key)
            if current is None or current[0] != due:
                continue
            self.clock.advance(due - self._elapsed)
            self._elapsed = due
            ran.append(self.reconcile(key[0], key[2], key[1]))
        self.clock.advance(target - self._elapsed)
        self._elapsed = target
        return ran

    # ------------------------------------------------------------- helpers
    def _namespaced(self, kind: str) -> bool:
        known = self.kinds.get(kind)
        return known.namespaced if known is not None else kind not in {"Namespace"}

    def _state_or_none(self, kind: str, name: str, ns: str | None) -> str | None:
        try:
            obj = self.api.get(self.kinds[kind].api_version, kind, ns, name)
        except NotFound:
            return None
        status = obj.get("status")
        return status.get("state") if isinstance(status, Mapping) else None
