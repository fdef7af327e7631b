"""The operator under test: an embedded API, the bundled database kind and a simulated cloud.

:func:`build` wires a fresh :class:`~lifecycle.sim.apiserver.EmbeddedAPI`, a
ProviderConfig with its credentials Secret, a
:class:`~lifecycle.providers.simcloud.SimCloud` and a
:class:`~lifecycle.runtime.reconciler.Reconciler` for ``DatabaseInstance``, then
creates ``n`` objects (not timed by any benchmark).
"""

from __future__ import annotations

import base64
from typing import Any

import attrs

from lifecycle.core.kind import PROVIDER_CONFIG_API, PROVIDER_CONFIG_KIND
from lifecycle.kube.resources import ResourceType
from lifecycle.machines.database import DatabaseInstance
from lifecycle.providers.simcloud import DatabaseConnector, SimCloud
from lifecycle.runtime.reads import DEFAULT_READS_TTL
from lifecycle.runtime.reconciler import Reconciler
from lifecycle.sim.apiserver import EmbeddedAPI

NAMESPACE = "default"


def manifest(name: str, namespace: str = NAMESPACE) -> dict[str, Any]:
    """A DatabaseInstance as a user would apply it (the version is left to late-init)."""
    return {
        "apiVersion": DatabaseInstance.api_version,
        "kind": DatabaseInstance.kind,
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "forProvider": {"engine": "postgres", "storageGB": 20},
            "writeConnectionSecretToRef": {"name": f"{name}-conn"},
        },
    }


@attrs.define
class Operator:
    """One wired operator: the API, the cloud, the reconciler and the object keys."""

    api: EmbeddedAPI
    cloud: SimCloud
    reconciler: Reconciler
    keys: list[tuple[str | None, str]]


def build(n: int, *, latency: float = 0.0, create_polls: int = 0) -> Operator:
    """An operator with ``n`` freshly created DatabaseInstances and a cloud of ``latency`` s."""
    api = EmbeddedAPI()
    api.register(ResourceType("lifecycle.dev", "v1alpha1", PROVIDER_CONFIG_KIND,
                              "providerconfigs", namespaced=False))
    kind = DatabaseInstance
    api.register(ResourceType(kind.group, kind.version, kind.kind, kind.plural,
                              namespaced=kind.namespaced))
    creds = {"accessKeyId": "AKIDBENCH", "secretAccessKey": "bench-secret"}
    api.create({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "default-credentials", "namespace": NAMESPACE},
        "data": {k: base64.b64encode(v.encode()).decode() for k, v in creds.items()},
    })
    api.create({
        "apiVersion": PROVIDER_CONFIG_API, "kind": PROVIDER_CONFIG_KIND,
        "metadata": {"name": "default"},
        "spec": {"credentials": {"secretRef": {"name": "default-credentials",
                                               "namespace": NAMESPACE}}},
    })
    cloud = SimCloud(seed=0, create_polls=create_polls, modify_polls=0, delete_polls=0,
                     latency=latency)
    # As the driver runs it (ManagerOptions.reads_ttl): supporting reads reused briefly.
    # The driver itself (and the kubernetes client it imports) is not loaded.
    reconciler = Reconciler(api.shared(), kind, DatabaseConnector(cloud),
                            reads_ttl=DEFAULT_READS_TTL)
    keys: list[tuple[str | None, str]] = []
    for i in range(n):
        name = f"db-{i:06d}"
        api.create(manifest(name))
        keys.append((NAMESPACE, name))
    return Operator(api, cloud, reconciler, keys)
