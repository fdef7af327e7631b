"""Wrappers that make every side effect of the engine a crash point, and trace the rest.

:class:`CrashingAPI` stands between the engine and the API store,
:class:`CrashingConnector` and :class:`CrashingClient` between the engine and
the external system; each write or mutating call goes through
:meth:`Recorder.effect`. :class:`TracedReconciler` writes every reconcile
and its outcome to the trace.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from lifecycle.core import objects
from lifecycle.core.contract import (
    ExternalClient,
    ManagedResource,
    ProviderConfig,
    admission,
    bind_objects,
)
from lifecycle.core.kind import INTENT, INTENT_MAC
from lifecycle.core.requeue import Reconciles
from lifecycle.core.values import Result
from lifecycle.verify.model import ExternalSystem, Recorder

__all__ = ["CrashingAPI", "CrashingClient", "CrashingConnector", "TracedReconciler"]


def _obj_label(obj: Mapping[str, Any]) -> str:
    meta = objects.metadata(obj)
    ns = meta.get("namespace")
    return f"{obj.get('kind')} {ns + '/' if ns else ''}{meta.get('name')}"


class CrashingAPI:
    """The API as the engine sees it: reads pass through, every write is a side-effect point.

    Labels name the object and, for metadata writes, what changed (finalizers,
    annotation keys, the intent journal's operation and outcome); Secret data
    is never shown.
    """

    def __init__(self, api: Any, recorder: Recorder) -> None:
        self._api = api
        self._recorder = recorder

    def __getattr__(self, name: str) -> Any:
        return getattr(self._api, name)

    def get(self, api_version: str, kind: str, namespace: str | None, name: str) -> dict[str, Any]:
        """Read one object (not a side effect)."""
        return self._api.get(api_version, kind, namespace, name)

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Create an object: a side-effect point."""
        return self._recorder.effect(f"api.create {_obj_label(obj)}",
                                     lambda: self._api.create(obj))

    def replace(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Write metadata and spec: a side-effect point."""
        label = f"api.replace {_obj_label(obj)}{self._diff(obj)}"
        return self._recorder.effect(label, lambda: self._api.replace(obj))

    def replace_status(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Write status: a side-effect point."""
        state = objects.status(obj).get("state")
        label = f"api.replace_status {_obj_label(obj)} (state={state})"
        return self._recorder.effect(label, lambda: self._api.replace_status(obj))

    def patch(self, api_version: str, kind: str, namespace: str | None, name: str,
              patch: dict[str, Any], **options: Any) -> dict[str, Any]:
        """Merge-patch an object: a side-effect point."""
        label = f"api.patch {kind} {namespace + '/' if namespace else ''}{name}"
        return self._recorder.effect(
            label, lambda: self._api.patch(api_version, kind, namespace, name, patch, **options))

    def delete(self, api_version: str, kind: str, namespace: str | None, name: str,
               **options: Any) -> Any:
        """Delete an object: a side-effect point."""
        label = f"api.delete {kind} {namespace + '/' if namespace else ''}{name}"
        return self._recorder.effect(
            label, lambda: self._api.delete(api_version, kind, namespace, name, **options))

    def record_event(self, involved: dict[str, Any], type: str, reason: str,
                     message: str, **options: Any) -> Any:
        """Record an Event: a side-effect point."""
        label = f"api.record_event {_obj_label(involved)} {type}/{reason}"
        return self._recorder.effect(
            label, lambda: self._api.record_event(involved, type, reason, message, **options))

    def _diff(self, obj: Mapping[str, Any]) -> str:
        if obj.get("kind") == "Secret":
            return ""
        meta = objects.metadata(obj)
        try:
            stored = self._api.get(obj.get("apiVersion"), obj.get("kind"),
                                   meta.get("namespace"), meta.get("name"))
        except Exception:  # the write itself will report the problem
            return ""
        parts = []
        old_f, new_f = set(objects.finalizers(stored)), set(objects.finalizers(obj))
        parts += [f"+finalizer {f}" for f in sorted(new_f - old_f)]
        parts += [f"-finalizer {f}" for f in sorted(old_f - new_f)]
        old_a, new_a = objects.annotations(stored), objects.annotations(obj)
        for key in sorted(set(old_a) | set(new_a)):
            if old_a.get(key) == new_a.get(key):
                continue
            if key == INTENT_MAC and old_a.get(INTENT) != new_a.get(INTENT):
                continue  # the entry's MAC, written with it
            if key == INTENT and key in new_a:
                parts.append(f"intent {_intent_summary(new_a[key])}")
            elif key in new_a:
                parts.append(f"+{key.rpartition('/')[2]}")
            else:
                parts.append(f"-{key.rpartition('/')[2]}")
        if stored.get("spec") != obj.get("spec"):
            parts.append("spec")
        return f" ({', '.join(parts)})" if parts else ""


def _intent_summary(raw: str) -> str:
    try:
        data = json.loads(raw)
        return f"{data.get('operation')}:{data.get('outcome') or 'pending'}"
    except (ValueError, AttributeError):
        return "?"


class CrashingClient:
    """An external client whose create, update and delete are side-effect points."""

    def __init__(self, client: ExternalClient, connector: CrashingConnector) -> None:
        self._client = client
        self._connector = connector

    def observe(self, resource: ManagedResource) -> Any:
        """Observe (not a side effect; traced)."""
        recorder = self._connector.recorder
        try:
            observation = self._client.observe(resource)
        except Exception as exc:
            recorder.note(f"external.observe {resource.external_name} -> {type(exc).__name__}")
            raise
        if not observation.exists:
            recorder.note(f"external.observe {resource.external_name} -> absent")
            return observation
        status = getattr(observation, "status", None)
        recorder.note(
            f"external.observe {resource.external_name} -> exists"
            f"{'' if status is None else ' ' + getattr(status, 'value', str(status))}"
            f"{'' if observation.up_to_date else ' (differs from spec)'}")
        return observation

    def create(self, resource: ManagedResource) -> Any:
        """Create: a side-effect point; also counts materialisations when needed."""
        name = resource.external_name
        self._connector.seen.add(name)
        before = name in self._connector.system.names()

        def call() -> Any:
            try:
                return self._client.create(resource)
            finally:
                if not before and name in self._connector.system.names():
                    self._connector.materialised[name] = (
                        self._connector.materialised.get(name, 0) + 1)

        return self._connector.recorder.effect(f"external.create {name}", call)

    def update(self, resource: ManagedResource) -> Any:
        """Update: a side-effect point."""
        return self._connector.recorder.effect(
            f"external.update {resource.external_name}", lambda: self._client.update(resource))

    def delete(self, resource: ManagedResource) -> Any:
        """Delete: a side-effect point."""
        return self._connector.recorder.effect(
            f"external.delete {resource.external_name}", lambda: self._client.delete(resource))

    def close(self) -> None:
        """Close the wrapped client, if it can be closed."""
        close = getattr(self._client, "close", None)
        if callable(close):
            close()


class CrashingConnector:
    """Wraps a connector so every client it builds reports its side effects."""

    def __init__(self, system: ExternalSystem, recorder: Recorder) -> None:
        self.system = system
        self.recorder = recorder
        self.seen: set[str] = set()
        self.materialised: dict[str, int] = {}

    def connect(self, resource: ManagedResource, config: ProviderConfig) -> CrashingClient:
        """Connect through the real connector (not a side effect)."""
        return CrashingClient(self.system.connector.connect(resource, config), self)

    @property
    def admit(self) -> Callable[[ManagedResource, ProviderConfig], None] | None:
        """The real connector's optional ``admit``, traced with its answer (not a side
        effect: it changes nothing); None when the real connector has none, so the engine
        asks nothing, as it would of that connector."""
        real = admission(self.system.connector)
        if real is None:
            return None

        def admit(resource: ManagedResource, config: ProviderConfig) -> None:
            label = f"admit {resource.namespace}/{resource.name}"
            try:
                real(resource, config)
            except Exception as exc:
                reason = getattr(exc, "reason", "") or type(exc).__name__
                self.recorder.note(f"{label} -> refused ({reason})")
                raise
            self.recorder.note(f"{label} -> admitted")

        return admit

    def bind(self, kind: Any, objects: Any) -> None:
        """Hand the engine's list of the kind's objects to the real connector's ``bind``."""
        bind_objects(self.system.connector, kind, objects)

    def creations(self, name: str) -> int:
        """How often ``name`` was materialised."""
        if self.system.creations is not None:
            return self.system.creations(name)
        return self.materialised.get(name, 0)


class TracedReconciler:
    """Delegates to a reconciler and writes each reconcile and its outcome to the trace."""

    def __init__(self, reconciler: Reconciles, recorder: Recorder) -> None:
        self.reconciler = reconciler
        self.recorder = recorder

    def reconcile(self, namespace: str | None, name: str) -> Result:
        """Run one reconcile, tracing its key and result."""
        key = f"{namespace}/{name}" if namespace else name
        self.recorder.note(f"reconcile {key}")
        try:
            result = self.reconciler.reconcile(namespace, name)
        except Exception as exc:
            self.recorder.note(f"reconcile {key} raised {type(exc).__name__}: {exc}")
            raise
        kind = getattr(result, "kind", None)
        self.recorder.note(f"reconcile {key} -> {getattr(kind, 'name', kind)} "
                           f"{getattr(result, 'reason', '')}".rstrip())
        return result

