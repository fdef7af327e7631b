"""The v1 Events the embedded API records, built as the API server stores them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lifecycle.core.objects import metadata

__all__ = ["new_event", "repeated_event"]


def new_event(
    involved: Mapping[str, Any],
    name: str,
    type: str,
    reason: str,
    message: str,
    component: str,
    stamp: str,
) -> dict[str, Any]:
    """A first Event about ``involved`` (``count`` 1), in its namespace or ``default``."""
    meta = involved.get("metadata")
    if meta.__class__ is not dict:
        meta = metadata(involved)
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": meta.get("namespace") or "default"},
        "involvedObject": {
            "apiVersion": involved.get("apiVersion", ""),
            "kind": involved.get("kind", ""),
            "name": str(meta.get("name", "object")),
            "namespace": meta.get("namespace", ""),
            "uid": str(meta.get("uid", "")),
            "resourceVersion": meta.get("resourceVersion", ""),
        },
        "type": type,
        "reason": reason,
        "message": message,
        "count": 1,
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "source": {"component": component},
        "reportingComponent": component,
    }


def repeated_event(existing: Mapping[str, Any], stamp: str) -> dict[str, Any]:
    """``existing`` seen once more: ``count`` incremented, ``lastTimestamp`` now."""
    new = dict(existing)
    new["metadata"] = dict(existing["metadata"])
    new["count"] = int(existing.get("count", 1)) + 1
    new["lastTimestamp"] = stamp
    return new
