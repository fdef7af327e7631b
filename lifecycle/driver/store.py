"""The compact form informers keep objects in: decoded once, keys and short strings shared.

A watched object decoded the ordinary way costs five to six times its JSON
in memory: every dict gets its own copy of every key (``"metadata"``,
``"lastTransitionTime"``, ...) and of every short value repeated across
objects (states, reasons, condition types, timestamps to the second), and a
decode followed by a compacting copy leaves the first copy's memory behind,
fragmented. :func:`decode` builds the compact form directly from the bytes
on the wire, in one pass:

* every dict key, and every string value of at most :data:`INTERN_LIMIT`
  characters, is interned: stored once for the whole process;
* ``metadata.managedFields`` (server-side apply bookkeeping, often larger
  than the rest of the object) is dropped: the engine never reads it and
  never writes it back (its writes are whole-object replaces and merge patches
  of its own fields, which leave the server's record as it is).

Everything else is kept as the server sent it, so an object read back from
a store equals the object the server serves, ``managedFields`` aside
(:func:`compact` gives the same form for an object already decoded).
"""

from __future__ import annotations

import json
import sys
from itertools import chain
from typing import Any

__all__ = ["DROPPED", "INTERN_LIMIT", "compact", "decode"]

#: Strings up to this many characters are interned (timestamps to the second are 20).
INTERN_LIMIT = 24
#: Metadata fields a store does not keep.
DROPPED = ("managedFields",)

_intern = sys.intern
_flatten = chain.from_iterable


#: Leaf dicts remembered for sharing, at most (the table is emptied when full).
SHARED_LIMIT = 4096
_SCALARS = frozenset({str, int, type(None)})
#: Keyed by the pairs flattened into one tuple (key, value, key, value, ...): the
#: decoder's pair tuples are not kept alive by the table.
_shared: dict[tuple[Any, ...], dict[str, Any]] = {}


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """One JSON object as a dict: keys interned, short string values interned.

    A dict whose values are all strings, integers or nulls (a condition, a
    reference, a history entry) is shared with an equal one decoded recently.
    """
    flat = True
    for index, (key, value) in enumerate(pairs):
        cls = value.__class__
        if cls is str:
            if len(value) <= INTERN_LIMIT:
                pairs[index] = (key, _intern(value))
        elif cls not in _SCALARS:
            flat = False
    if not flat:
        return {_intern(key): value for key, value in pairs}
    signature = tuple(_flatten(pairs))
    found = _shared.get(signature)
    if found is None:
        found = {_intern(key): value for key, value in pairs}
        if len(_shared) >= SHARED_LIMIT:
            _shared.clear()
        _shared[signature] = found
    return found


def _trim(obj: Any) -> Any:
    meta = obj.get("metadata") if obj.__class__ is dict else None
    if meta.__class__ is dict:
        for field in DROPPED:
            meta.pop(field, None)
    return obj


def decode(raw: bytes | str) -> Any:
    """A Kubernetes object (or list, or watch event) decoded into the compact form.

    Objects found at ``object`` (a watch event) and under ``items`` (a list)
    lose their ``metadata.managedFields`` as the top-level object does.
    """
    doc = json.loads(raw, object_pairs_hook=_pairs)
    if doc.__class__ is dict:
        _trim(doc)
        inner = doc.get("object")
        if inner.__class__ is dict:
            _trim(inner)
        items = doc.get("items")
        if items.__class__ is list:
            for item in items:
                _trim(item)
    return doc


def compact(value: Any) -> Any:
    """A copy of a decoded object in the compact form :func:`decode` builds."""
    return _trim(_copy(value))


def _copy(value: Any) -> Any:
    cls = value.__class__
    if cls is dict:
        return {_intern(k): _copy(v) for k, v in value.items()}
    if cls is list:
        return [_copy(v) for v in value]
    if cls is str and len(value) <= INTERN_LIMIT:
        return _intern(value)
    return value
