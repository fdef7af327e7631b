"""Recording an Event about an object, best effort."""

from __future__ import annotations

import logging
from typing import Any

from lifecycle.kube.cluster import Cluster
from lifecycle.kube.errors import ApiError

__all__ = ["record_event"]

log = logging.getLogger("lifecycle.runtime.reconciler")


def record_event(api: Cluster, obj: dict[str, Any], type_: str, reason: str,
                 message: str) -> None:
    """Record an Event about ``obj``, best effort (as client-go's recorder): an API error
    is logged at DEBUG, never raised."""
    try:
        api.record_event(obj, type_, reason, message)
    except ApiError as exc:
        log.debug("event %s not recorded: %s", reason, exc)
