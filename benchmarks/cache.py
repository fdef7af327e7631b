"""An informer-style object cache that stores each object as compactly as Python allows.

Objects arrive as JSON text (as off a watch stream) and are decoded into
plain dicts and lists. Decoding alone gives every object its own copy of
every key (``"metadata"``, ``"lastTransitionTime"``, ...) and of every short
value repeated across objects (states, reasons, condition types, timestamps
to the second). :class:`ObjectCache` interns dict keys and short strings, so
each of them is stored once for the whole cache; strings longer than
``intern_limit`` (uids, journal annotations, endpoints, messages: mostly
unique per object, where interning would only add an entry to the interned
table) are kept as decoded. The default of 20 characters covers timestamps.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from typing import Any

Key = tuple[str | None, str]


def compact(value: Any, intern_limit: int = 20) -> Any:
    """A copy of a decoded JSON value with keys and short strings interned."""
    cls = value.__class__
    if cls is dict:
        return {sys.intern(k): compact(v, intern_limit) for k, v in value.items()}
    if cls is list:
        return [compact(v, intern_limit) for v in value]
    if cls is str and len(value) <= intern_limit:
        return sys.intern(value)
    return value


class ObjectCache:
    """Objects by ``(namespace, name)``, decoded from JSON and interned."""

    def __init__(self, *, intern: bool = True, intern_limit: int = 20) -> None:
        self.intern = intern
        self.intern_limit = intern_limit
        self._objects: dict[Key, dict[str, Any]] = {}

    def __len__(self) -> int:
        """How many objects are cached."""
        return len(self._objects)

    def __iter__(self) -> Iterator[Key]:
        """The cached keys."""
        return iter(self._objects)

    def apply(self, event_type: str, text: str | bytes) -> Key:
        """Apply one watch event (``ADDED``, ``MODIFIED`` or ``DELETED``) given as JSON text."""
        obj = json.loads(text)
        if self.intern:
            obj = compact(obj, self.intern_limit)
        meta = obj.get("metadata") or {}
        key: Key = (meta.get("namespace"), meta["name"])
        if event_type == "DELETED":
            self._objects.pop(key, None)
        else:
            self._objects[key] = obj
        return key

    def get(self, key: Key) -> dict[str, Any] | None:
        """The cached object (shared, not a copy), or ``None``."""
        return self._objects.get(key)
