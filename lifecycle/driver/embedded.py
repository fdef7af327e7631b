"""An embedded cluster behind a real HTTP endpoint, for ``lifecycle run --embedded`` and tests.

:func:`embedded_cluster` builds an :class:`~lifecycle.apiserver.EmbeddedAPI`
serving the given kinds and the engine's ProviderConfig, seeds a default
ProviderConfig with its credentials Secret, and serves it over HTTP on
loopback, so the operator talks to it through the official client exactly as
it would to a cluster.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence

from lifecycle.apiserver import EmbeddedAPI, ResourceType
from lifecycle.driver.http import APIServerHTTP
from lifecycle.kind import PROVIDER_CONFIG_API, PROVIDER_CONFIG_KIND, Kind

__all__ = ["EXAMPLE_CREDENTIALS", "embedded_cluster", "seed_provider_config"]

#: Credentials of the default ProviderConfig (what the simulated cloud accepts).
EXAMPLE_CREDENTIALS = {"accessKeyId": "AKIDEXAMPLE", "secretAccessKey": "s3cr3t"}


def seed_provider_config(api: EmbeddedAPI, name: str = "default",
                         credentials: Mapping[str, str] = EXAMPLE_CREDENTIALS,
                         namespace: str = "default") -> None:
    """Create a ProviderConfig and its credentials Secret in ``api``."""
    secret = f"{name}-credentials"
    api.create({"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": secret, "namespace": namespace},
                "data": {k: base64.b64encode(v.encode()).decode()
                         for k, v in credentials.items()}})
    api.create({"apiVersion": PROVIDER_CONFIG_API, "kind": PROVIDER_CONFIG_KIND,
                "metadata": {"name": name},
                "spec": {"credentials": {"secretRef": {"name": secret,
                                                       "namespace": namespace}}}})


def embedded_cluster(kinds: Sequence[Kind], *, api: EmbeddedAPI | None = None,
                     seed_config: bool = True, bookmark_interval: float = 1.0,
                     watch_window: int = 10_000) -> APIServerHTTP:
    """An embedded API serving ``kinds`` over HTTP (started); stop it with ``.stop()``."""
    if api is None:
        api = EmbeddedAPI(bookmark_interval=bookmark_interval, watch_window=watch_window)
    group, _, version = PROVIDER_CONFIG_API.partition("/")
    api.register(ResourceType(group, version, PROVIDER_CONFIG_KIND, "providerconfigs",
                              namespaced=False))
    for kind in kinds:
        api.register(ResourceType(kind.group, kind.version, kind.kind, kind.plural,
                                  namespaced=kind.namespaced))
    if seed_config:
        seed_provider_config(api)
    return APIServerHTTP(api).start()
