"""The ``metav1.Status`` of an error answer, with the ``details`` a real server adds.

A real API server names the object of a NotFound, AlreadyExists or Conflict
answer in ``details`` (``name``, ``group`` and ``kind``, the resource's
plural), from the same ``<resource>[.<group>] "<name>"`` its message starts
with; :func:`status_of` adds them to an error's ``to_status()``.
"""

from __future__ import annotations

import re
from typing import Any

from lifecycle.kube.errors import ApiError

__all__ = ["status_of"]

_NAMED = re.compile(r'^(?:Operation cannot be fulfilled on )?([A-Za-z0-9-]+)((?:\.[a-z0-9-]+)*) '
                    r'"([^"]*)"')
_REASONS = ("NotFound", "AlreadyExists", "Conflict")


def status_of(exc: ApiError) -> dict[str, Any]:
    """``exc.to_status()``, with ``details`` naming the object where a real server has them."""
    status = exc.to_status()
    if exc.reason not in _REASONS or "details" in status:
        return status
    found = _NAMED.match(exc.message)
    if found is None:
        return status
    resource, group, name = found.group(1), found.group(2).lstrip("."), found.group(3)
    details: dict[str, Any] = {"name": name}
    if group:
        details["group"] = group
    details["kind"] = resource
    status["details"] = details
    return status
