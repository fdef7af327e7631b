"""The bundled DatabaseInstance kind on the harness, over a simulated cloud.

:func:`simulated_environment` is what the ``lifecycle_env`` pytest fixture
builds by default (it is registered in the ``lifecycle.environments``
entry-point group as ``simcloud``); :func:`database_manifest` writes a
DatabaseInstance manifest; :func:`claim_environment` adds claims of a binding
whose managed kind is DatabaseInstance.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from lifecycle.core.claims import ClaimBinding
from lifecycle.core.kind import Kind
from lifecycle.machines.database import DatabaseInstance
from lifecycle.providers.simcloud import DatabaseConnector, SimCloud
from lifecycle.testing.claims import ClaimEnvironment
from lifecycle.testing.harness import Environment

__all__ = ["claim_environment", "database_manifest", "simulated_environment"]


def database_manifest(
    name: str,
    namespace: str = "default",
    *,
    annotations: Mapping[str, str] | None = None,
    deletion_policy: str | None = None,
    **parameters: Any,
) -> dict[str, Any]:
    """A DatabaseInstance manifest: ``parameters`` go to ``spec.forProvider``.

    A parameter may be given by its Python name (``storage_gb``) or its spec
    key (``storageGB``); it is written under its spec key.
    """
    spec: dict[str, Any] = {
        "forProvider": {"engine": "postgres", "storageGB": 20,
                        **DatabaseInstance.to_spec(parameters)},
        "writeConnectionSecretToRef": {"name": f"{name}-conn"},
    }
    if deletion_policy is not None:
        spec["deletionPolicy"] = deletion_policy
    return {
        "apiVersion": DatabaseInstance.api_version,
        "kind": DatabaseInstance.kind,
        "metadata": {"name": name, "namespace": namespace,
                     "annotations": dict(annotations or {})},
        "spec": spec,
    }


def simulated_environment(
    *, cloud: SimCloud | None = None, kinds: Iterable[Kind] = (), **options: Any
) -> tuple[Environment, SimCloud]:
    """An Environment with DatabaseInstance (and ``kinds``) on ``cloud`` or a fresh SimCloud.

    The environment has a default ProviderConfig and keeps the cloud as
    ``env.cloud``; ``options`` go to :class:`~lifecycle.testing.Environment`.
    """
    cloud = cloud if cloud is not None else SimCloud(seed=0)
    connector = DatabaseConnector(cloud)
    pairs = [(DatabaseInstance, connector)] + [(k, connector) for k in kinds]
    env = Environment(pairs, **options)
    env.cloud = cloud  # type: ignore[attr-defined]
    env.provider_config()
    return env, cloud


def claim_environment(binding: ClaimBinding, **options: Any) -> ClaimEnvironment:
    """Claims of ``binding`` (whose managed kind is DatabaseInstance) on a simulated cloud.

    ``options`` go to :func:`simulated_environment` (``cloud=`` among them).
    """
    env, _ = simulated_environment(**options)
    return ClaimEnvironment(env, binding)
