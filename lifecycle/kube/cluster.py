"""The Kubernetes API surface the reconciler uses, as a protocol.

The embedded API of the simulator implements it in memory; the driver adapts
the official ``kubernetes`` client to it. Implementations raise the error
classes of :mod:`lifecycle.kube.errors` (``NotFound``, ``Conflict``, ...).
"""

from __future__ import annotations

from typing import Any, Protocol

__all__ = ["Cluster"]


class Cluster(Protocol):
    """Object and status reads and writes, plus Events."""

    def get(self, api_version: str, kind: str, namespace: str | None, name: str) -> dict[str, Any]:
        """Read one object; raise ``NotFound`` if absent."""
        ...

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Create an object; raise ``AlreadyExists`` if the name is taken."""
        ...

    def replace(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Write metadata and spec (never status); ``Conflict`` on a stale resourceVersion."""
        ...

    def replace_status(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Write the status subresource only; ``Conflict`` on a stale resourceVersion."""
        ...

    def record_event(
        self, involved: dict[str, Any], type: str, reason: str, message: str
    ) -> Any:
        """Record a Kubernetes Event about ``involved``."""
        ...
