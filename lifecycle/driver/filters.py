"""Which informer events deserve a reconcile, which shard a key belongs to, and how a
failure is logged without leaking anything.

The change filter follows controller-runtime's generation-changed predicate,
widened to the engine's control annotations; see :func:`update_triggers`.
"""

from __future__ import annotations

import os
import traceback
import zlib
from typing import Any

from lifecycle.core import objects
from lifecycle.core.kind import OPERATION, PAUSED, RECONCILE_POLICY
from lifecycle.core.objects import metadata

__all__ = ["add_triggers", "is_ignored", "meta_field", "one_line", "redacted_traceback",
           "shard_of", "update_triggers"]

Key = tuple[str | None, str]


def meta_field(obj: dict[str, Any], field: str) -> Any:
    """One field of an object's metadata (None when absent)."""
    return metadata(obj).get(field)


def is_ignored(obj: dict[str, Any]) -> bool:
    """Whether the object carries ``lifecycle.dev/operation: ignore``."""
    return objects.annotations(obj).get(OPERATION) == "ignore"


def add_triggers(obj: dict[str, Any]) -> bool:
    """A newly seen object is reconciled unless it is ignored."""
    return not is_ignored(obj)


def update_triggers(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """The change filter: does this change deserve a reconcile?

    Yes when the generation changed, the deletion timestamp changed, the
    operation annotation became ``reconcile`` or stopped being ``ignore``, or
    one of the engine's control annotations (paused, reconcile policy)
    changed; never while the object is ignored. Status-only and other
    metadata-only writes (the engine's own finalizer, journal and claim
    writes among them) do not trigger.
    """
    if is_ignored(new):
        return False
    if meta_field(old, "generation") != meta_field(new, "generation"):
        return True
    if meta_field(old, "deletionTimestamp") != meta_field(new, "deletionTimestamp"):
        return True
    before, after = objects.annotations(old), objects.annotations(new)
    if after.get(OPERATION) == "reconcile" and before.get(OPERATION) != "reconcile":
        return True
    if before.get(OPERATION) == "ignore":
        return True
    return any(before.get(a) != after.get(a) for a in (PAUSED, RECONCILE_POLICY))


def shard_of(key: Key, count: int) -> int:
    """The shard (``0..count-1``) a ``(namespace, name)`` key belongs to (stable hash)."""
    namespace, name = key
    return zlib.crc32(f"{namespace or ''}/{name}".encode()) % count


def redacted_traceback(exc: BaseException, limit: int = 12) -> str:
    """``Type at file:line in function <- ...``: where ``exc`` was raised, innermost first.

    Only code locations and the exception's type name: no message, no
    arguments and no local values, any of which could hold a secret.
    """
    frames = traceback.extract_tb(exc.__traceback__)[-limit:]
    where = " <- ".join(f"{os.path.basename(f.filename)}:{f.lineno} in {f.name}"
                        for f in reversed(frames))
    return f"{type(exc).__name__} at {where}" if where else type(exc).__name__


def one_line(text: str, limit: int = 300) -> str:
    """``text`` on one line, whitespace collapsed, cut at ``limit`` characters."""
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[:limit] + "..."
