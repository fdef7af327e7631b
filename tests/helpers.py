"""Shared helpers of the reconciler tests: the bundled kind on a seeded simulated cloud."""

from __future__ import annotations

from typing import Any

from lifecycle.core.kind import EXTERNAL_NAME, FINALIZER
from lifecycle.providers.simcloud import SimCloud
from lifecycle.providers.simcloud.scenarios.harness import database_manifest, simulated_environment
from lifecycle.testing import Environment

KIND = "DatabaseInstance"


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
