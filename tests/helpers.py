"""Shared helpers of the reconciler tests: the bundled kind on a seeded simulated cloud."""

from __future__ import annotations

import base64
from contextlib import suppress
from typing import Any

import attrs

from lifecycle.core.kind import EXTERNAL_NAME, FINALIZER, OWNER_UID
from lifecycle.core.values import Creation, Observation
from lifecycle.kube.errors import AlreadyExists, NotFound
from lifecycle.machines.database import DatabaseInstance
from lifecycle.providers.simcloud import SimCloud
from lifecycle.providers.simcloud.scenarios.harness import database_manifest, simulated_environment
from lifecycle.testing import Environment

KIND = "DatabaseInstance"

#: The bundled kind, cluster-scoped.
CLUSTER_SCOPED = attrs.evolve(DatabaseInstance, namespaced=False)


class Crash(BaseException):
    """The operator process dying (or being interrupted) in the middle of a pass: not an
    ``Exception``, so nothing in the engine handles it."""


def reconcile_dying_in(env: Environment, cloud: SimCloud, method: str,
                       name: str = "db") -> None:
    """Reconcile ``name`` with the cloud's ``method`` killing the process when called; the
    method is restored afterwards."""
    real = getattr(cloud, method)

    def dying(*args: Any, **kwargs: Any) -> Any:
        raise Crash

    setattr(cloud, method, dying)
    try:
        with suppress(Crash):
            env.reconcile(KIND, name)
    finally:
        setattr(cloud, method, real)


def cluster_scoped_manifest(name: str, **options: Any) -> dict[str, Any]:
    """``database_manifest`` for :data:`CLUSTER_SCOPED`: no namespace, its connection
    Secret in ``default``."""
    made = database_manifest(name, **options)
    del made["metadata"]["namespace"]
    made["spec"]["writeConnectionSecretToRef"]["namespace"] = "default"
    return made


class AnnotationsPort:
    """The reconciled object's annotations as the journal sees them: records each one set
    (``calls``) and counts the reads (``reads``)."""

    def __init__(self, values: dict[str, str] | None = None) -> None:
        self.values: dict[str, str] = dict(values or {})
        self.calls: list[tuple[str, str]] = []
        self.reads = 0

    def annotations(self) -> dict[str, str]:
        """The annotations, staged and deferred ones applied (a read)."""
        self.reads += 1
        return dict(self.values)

    def annotate(self, key: str, value: str) -> None:
        """Commit one annotation."""
        self.calls.append(("annotate", key))
        self.values[key] = value

    def stage(self, key: str, value: str) -> None:
        """Set one annotation with the next write."""
        self.calls.append(("stage", key))
        self.values[key] = value

    def defer(self, key: str, value: str) -> None:
        """Set one annotation with the next write, if the pass makes one."""
        self.calls.append(("defer", key))
        self.values[key] = value


def make(**cloud_options: Any) -> tuple[Environment, SimCloud]:
    """An Environment with the bundled kind on a SimCloud seeded with 1."""
    return simulated_environment(cloud=SimCloud(seed=1, **cloud_options))


def ready(env: Environment, name: str = "db", **params: Any) -> dict[str, Any]:
    """Apply a DatabaseInstance and run until it is Ready; return the object."""
    env.apply(database_manifest(name, **params))
    env.run_until_idle()
    assert env.state(KIND, name) == "ready"
    return env.get(KIND, name)


def external(env: Environment, name: str = "db") -> str:
    """The external name the object took ownership with (its external-name annotation)."""
    return env.get(KIND, name)["metadata"]["annotations"][EXTERNAL_NAME]


def cond(env: Environment, type_: str, name: str = "db") -> tuple[str, str]:
    """(status, reason) of one condition, which must exist."""
    c = env.condition(KIND, name, type_)
    assert c is not None, f"no {type_} condition"
    return c.status.value, c.reason


def name_holder(name: str, uid: str, created: str, *, held: str | None = None,
                annotated: str | None = None) -> dict[str, Any]:
    """An object as the external-name index reads it: ``held`` is the name it took
    (our finalizer and the annotation), ``annotated`` a name only asked for."""
    meta: dict[str, Any] = {"name": name, "namespace": "default", "uid": uid,
                            "creationTimestamp": created, "annotations": {}}
    if held is not None:
        meta["finalizers"] = [FINALIZER]
        meta["annotations"][EXTERNAL_NAME] = held
    if annotated is not None:
        meta["annotations"][EXTERNAL_NAME] = annotated
    return {"metadata": meta, "spec": {}, "status": {}}


def b64(text: str) -> str:
    """``text`` base64-encoded, as a Secret's data holds it."""
    return base64.b64encode(text.encode()).decode()


class RacedSecretCreate:
    """The API server, where another writer for the same object creates the connection
    Secret (the object's owner annotation, its password, no label or ownerReference)
    just before the operator's own create."""

    def __init__(self, env: Environment, uid: str) -> None:
        self._env, self._uid = env, uid

    def __getattr__(self, name: str) -> Any:
        return getattr(self._env.api, name)

    def create(self, body: Any) -> Any:
        self._env.api.create({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                              "metadata": {"name": "db-conn", "namespace": "default",
                                           "annotations": {OWNER_UID: self._uid}},
                              "data": {"password": b64("first-password")}})
        raise AlreadyExists('secrets "db-conn" already exists')


class CountingCache:
    """The API server behind a cache: Secret reads through the API server are counted,
    and the store (``lookup``) answers what the API server holds."""

    def __init__(self, api: Any) -> None:
        self._api = api
        self.secret_gets = 0
        self.lookups = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._api, name)

    def get(self, api_version: str, kind: str, namespace: str | None, name: str) -> Any:
        if kind == "Secret":
            self.secret_gets += 1
        return self._api.get(api_version, kind, namespace, name)

    def lookup(self, api_version: str, kind: str, namespace: str | None,
               name: str) -> Any:
        self.lookups += 1
        try:
            return self._api.get(api_version, kind, namespace, name)
        except NotFound:
            return None


class LaggingStore:
    """The API server behind a cache whose store has not seen any Secret yet: every
    ``lookup`` misses (and is counted); everything else goes to the API server."""

    def __init__(self, api: Any) -> None:
        self._api, self.lookups = api, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._api, name)

    def lookup(self, api_version: str, kind: str, namespace: str | None,
               name: str) -> None:
        self.lookups += 1
        return None


class NamesOnlyProvider:
    """A provider (its own client) that keeps only the names of its resources: no
    connection details, no ownership marks; ``names`` are the ones that exist."""

    def __init__(self, names: set[str] | None = None) -> None:
        self.names: set[str] = set() if names is None else names

    def connect(self, resource: Any, config: Any) -> NamesOnlyProvider:
        return self

    def observe(self, resource: Any) -> Observation:
        return (Observation(exists=True) if resource.external_name in self.names
                else Observation.absent())

    def create(self, resource: Any) -> Creation:
        self.names.add(resource.external_name)
        return Creation()

    def update(self, resource: Any) -> None:
        return None

    def delete(self, resource: Any) -> None:
        self.names.discard(resource.external_name)
