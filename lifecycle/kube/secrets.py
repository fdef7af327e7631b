"""Reading a Secret and its data: the Kubernetes side of every Secret the engine reads.

:func:`read_secret` reads one Secret (or, when the caller creates it if missing,
asks a cached cluster's store alone); :func:`decode` gives its ``data``
base64-decoded. What a Secret means (a connection Secret, a provider config's
credentials) is decided by the modules that read it.
"""

from __future__ import annotations

import binascii
from collections.abc import Mapping
from typing import Any

from lifecycle.kube.cluster import Cluster
from lifecycle.kube.errors import NotFound

__all__ = ["decode", "read_secret"]


def read_secret(api: Cluster, namespace: str, name: str, *,
                creating: bool = False) -> dict[str, Any] | None:
    """The Secret ``namespace/name``, or None when it does not exist.

    ``creating``: the caller creates the Secret when this returns None and
    treats ``AlreadyExists`` as a conflict to retry from a fresh read. A
    cached cluster may then answer None from its store alone (its ``lookup``),
    since the create itself tells a Secret the store does not hold.
    """
    lookup = getattr(api, "lookup", None) if creating else None
    if lookup is not None:
        found: dict[str, Any] | None = lookup("v1", "Secret", namespace, name)
        return found
    try:
        return api.get("v1", "Secret", namespace, name)
    except NotFound:
        return None


def decode(secret: Mapping[str, Any]) -> dict[str, str]:
    """A Secret's data, base64-decoded; undecodable values are skipped."""
    data = secret.get("data")
    out: dict[str, str] = {}
    for key, value in (data.items() if isinstance(data, Mapping) else ()):
        try:
            # What base64.b64decode does for a str or bytes value, without its wrappers.
            out[key] = binascii.a2b_base64(value).decode()
        except (ValueError, TypeError):
            continue
    return out
