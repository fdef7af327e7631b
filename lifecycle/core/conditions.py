"""Conditions and phase: one entry per condition type, times that move only on flips.

``Ready`` follows the machine state; ``Synced`` says whether the last
reconcile succeeded; the activity conditions (Creating, Updating, Deleting,
Failed) are True while their state is current and False afterwards, so the
list doubles as a short history. Types are never removed.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from lifecycle.core.values import Condition, ConditionStatus
from lifecycle.core.vocabulary import ConditionTypes, Reasons

__all__ = [
    "ACTIVITY_TYPES",
    "READY",
    "SYNCED",
    "by_type",
    "camel_reason",
    "get",
    "initial",
    "merge",
    "phase",
]

#: The condition types every managed object carries (:class:`ConditionTypes`).
READY = ConditionTypes.READY
SYNCED = ConditionTypes.SYNCED


_WORDS = re.compile(r"[A-Za-z0-9]+")


@functools.lru_cache(maxsize=4096)  # pure, and called for every condition of every reconcile
def camel_reason(reason: str, default: str = Reasons.RECONCILE_ERROR) -> str:
    """``reason`` as a valid CamelCase condition reason (an API server rejects others).

    ``"quota exceeded"`` becomes ``"QuotaExceeded"``; a reason with no letter
    to start it becomes ``default``.
    """
    if _VALID_REASON.fullmatch(reason):
        return reason
    text = "".join(w[:1].upper() + w[1:] for w in _WORDS.findall(reason))
    text = text.lstrip("0123456789")
    return text[:1024] if text else default


_VALID_REASON = re.compile(r"[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?")


def merge(
    existing: Sequence[Mapping[str, Any]], updates: Iterable[Condition], when: str
) -> list[dict[str, Any]]:
    """Apply ``updates`` to a stored condition list, keeping one entry per type.

    ``lastTransitionTime`` is set to ``when`` only when a condition is new or
    its status flips; otherwise the stored time is kept. Entries that are not
    mappings, or lack a type, are dropped (a corrupt list is repaired).
    """
    by_type: dict[str, dict[str, Any]] = {}
    for entry in existing:
        if _normal(entry):
            by_type[entry["type"]] = dict(entry)  # already what from_dict/to_dict would give
        elif isinstance(entry, Mapping) and isinstance(entry.get("type"), str) and entry["type"]:
            by_type[entry["type"]] = Condition.from_dict(entry).to_dict()
    for cond in updates:
        status = _VALUE[cond.status]
        old = by_type.get(cond.type)
        if old is not None and old["status"] == status and old["lastTransitionTime"]:
            stamp = old["lastTransitionTime"]
        else:
            stamp = when
        # As cond.to_dict() with the stamp and a valid reason, built in one go.
        by_type[cond.type] = {"type": cond.type, "status": status,
                              "reason": camel_reason(cond.reason), "message": cond.message,
                              "observedGeneration": cond.observed_generation,
                              "lastTransitionTime": stamp}
    return list(by_type.values())


_VALUE = {s: s.value for s in ConditionStatus}


_KEYS = ("type", "status", "reason", "message", "observedGeneration", "lastTransitionTime")
_STATUSES = frozenset(s.value for s in ConditionStatus)
_TRUE = ConditionStatus.TRUE.value


def _normal(entry: Any) -> bool:
    """Whether a stored entry is a plain dict exactly in the form ``Condition.to_dict`` gives."""
    if entry.__class__ is not dict or tuple(entry) != _KEYS:
        return False
    t, s, r, m, g, w = entry.values()
    return (t.__class__ is str and t != "" and s.__class__ is str and s in _STATUSES
            and r.__class__ is str and m.__class__ is str and w.__class__ is str
            and g.__class__ is int)


def get(conditions: Sequence[Mapping[str, Any]], type_: str) -> Condition | None:
    """The condition of ``type_`` in a stored list, if present."""
    for entry in conditions:
        if (entry.__class__ is dict or isinstance(entry, Mapping)) and entry.get("type") == type_:
            return Condition.from_dict(entry)
    return None


def by_type(conditions: Sequence[Mapping[str, Any]]) -> dict[Any, Mapping[str, Any]]:
    """The entries of a stored list by type, the first of each type as :func:`get` finds it.

    For a caller that looks up several types: one pass over the list instead of one per type.
    """
    found: dict[Any, Mapping[str, Any]] = {}
    for entry in conditions:
        if entry.__class__ is dict or isinstance(entry, Mapping):
            found.setdefault(entry.get("type"), entry)
    return found


def phase(conditions: Sequence[Mapping[str, Any]], deleting: bool) -> str:
    """``Terminating`` if deleting, ``Ready`` if every condition is True, else ``Progressing``.

    Activity conditions that are False record history, not a problem, so
    only ``Ready``, ``Synced`` and other non-activity types count.
    """
    if deleting:
        return "Terminating"
    relevant = False
    for c in conditions:
        if c.get("type") not in ACTIVITY_TYPES:
            if c.get("status") != _TRUE:
                return "Progressing"
            relevant = True
    return "Ready" if relevant else "Progressing"  # phases, not condition types


#: Condition types that record activity history rather than health.
ACTIVITY_TYPES = ConditionTypes.ACTIVITY


def initial(generation: int) -> list[Condition]:
    """``Ready`` and ``Synced`` as Unknown, for an object seen for the first time."""
    return [
        Condition(READY, ConditionStatus.UNKNOWN, "Reconciling", "", generation),
        Condition(SYNCED, ConditionStatus.UNKNOWN, "Reconciling", "", generation),
    ]
