"""The supporting reads of a pass: the namespace's annotations and the provider config.

Every pass reads them; :class:`TTLCache` lets a reconciler reuse them for a
few seconds, the way an operator reads them from a cache.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from lifecycle.core import objects
from lifecycle.core.contract import ProviderConfig
from lifecycle.core.errors import CredentialsError
from lifecycle.core.kind import PROVIDER_CONFIG_API, PROVIDER_CONFIG_KIND
from lifecycle.kube.cluster import Cluster
from lifecycle.kube.errors import NotFound
from lifecycle.runtime.credentials import resolve_credentials

__all__ = ["DEFAULT_READS_TTL", "TTLCache", "namespace_annotations", "provider_config"]

#: How long an operator reuses the supporting reads, in seconds (``ManagerOptions.reads_ttl``).
DEFAULT_READS_TTL = 5.0


def namespace_annotations(api: Cluster, namespace: str | None) -> Mapping[str, str]:
    """The annotations of ``namespace`` (empty for cluster-scoped objects or a missing one)."""
    if not namespace:
        return {}
    try:
        ns = api.get("v1", "Namespace", None, namespace)
    except NotFound:
        return {}
    return ns["metadata"].get("annotations") or {}


def provider_config(api: Cluster, name: str,
                    api_version: str = PROVIDER_CONFIG_API) -> ProviderConfig:
    """The provider config ``name`` (of ``api_version``) with its decoded credentials.

    Raises :class:`CredentialsError` when the config or its credentials are missing
    (:func:`~lifecycle.runtime.credentials.resolve_credentials` reads them from the
    source ``credentials.source`` names).
    """
    try:
        config = api.get(api_version, PROVIDER_CONFIG_KIND, None, str(name))
    except NotFound:
        raise CredentialsError(f"provider config {name!r} not found",
                               reason="ProviderConfigMissing") from None
    cspec = objects.spec(config)
    credentials = resolve_credentials(api, str(name), cspec)  # credentials.source, spec.tls
    return ProviderConfig(name=str(name), spec=cspec, credentials=credentials)


class TTLCache:
    """Values reused for ``ttl`` seconds (``ttl`` 0: every call loads afresh).

    Only successful loads are kept: an error (a missing provider config) is
    seen again on the next pass.
    """

    def __init__(self, ttl: float) -> None:
        self.ttl = ttl
        self._entries: dict[Any, tuple[float, Any]] = {}

    def get(self, key: Any, load: Callable[[], Any]) -> Any:
        """The value cached under ``key``, or ``load()`` (kept for ``ttl`` seconds)."""
        if self.ttl <= 0:
            return load()
        moment = time.monotonic()
        entry = self._entries.get(key)
        if entry is not None and entry[0] > moment:
            return entry[1]
        value = load()
        self._entries[key] = (moment + self.ttl, value)
        return value
