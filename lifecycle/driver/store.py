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

An informer keeps its objects smaller still, packed (:class:`Packer`): each
object as its compact JSON, deflated against a dictionary of sample objects
of the same kind the packer learned, a few tens to a few hundred bytes for
an object of one to two kilobytes. A read unpacks it into a new dict
(:func:`loads`), which no other reader shares.
"""

from __future__ import annotations

import json
import sys
import threading
import zlib
from itertools import chain
from typing import Any

__all__ = ["DROPPED", "INTERN_LIMIT", "Packer", "compact", "decode", "loads"]

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
    return _trim_all(json.loads(raw, object_pairs_hook=_pairs))


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


def loads(raw: bytes | str) -> Any:
    """A Kubernetes object, list or watch event decoded with plain dicts, ``managedFields``
    dropped as :func:`decode` drops them (for objects that are packed, not kept, once read)."""
    return _trim_all(json.loads(raw))


def _trim_all(doc: Any) -> Any:
    """``doc`` with ``managedFields`` dropped from the object, a watch event's object and
    a list's items."""
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


#: Dictionaries a :class:`Packer` learns, at most (each is kept for the objects packed with it).
MAX_DICTIONARIES = 8
#: Bytes of samples one dictionary holds, at most (the newest samples are kept).
DICTIONARY_BYTES = 8_192
#: An object packing to more than this share of its JSON becomes a sample for a new dictionary.
POOR_RATIO = 0.25
#: ... unless it packs to fewer bytes than this anyway.
SMALL = 96
#: Fields whose values never enter a dictionary (a Secret's data): only their keys do.
BLANKED = ("data", "stringData")
_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, check_circular=False).encode


def _deflate(raw: bytes, dictionary: bytes) -> bytes:
    """``raw`` deflated (level 1: a third of the time of level 6, a few bytes larger)."""
    if dictionary:
        packer = zlib.compressobj(1, zlib.DEFLATED, -15, 8, zlib.Z_DEFAULT_STRATEGY, dictionary)
    else:
        packer = zlib.compressobj(1, zlib.DEFLATED, -15)
    return packer.compress(raw) + packer.flush()


def _sample(obj: dict[str, Any]) -> bytes:
    """``obj``'s JSON for a dictionary, with the values of :data:`BLANKED` fields emptied."""
    blanked = {k: ({f: "" for f in v} if k in BLANKED and v.__class__ is dict else v)
               for k, v in obj.items()}
    return _dumps(blanked).encode()


class Packer:
    """Packs objects of one kind into bytes and back: deflated compact JSON.

    The packer learns its dictionaries from the objects it packs: when an
    object packs poorly (more than :data:`POOR_RATIO` of its JSON), its JSON
    (with a Secret's data values emptied, so no secret ends up in a
    dictionary) is added to the samples, and a new dictionary, the newest
    :data:`DICTIONARY_BYTES` of samples, is used from then on. Each packed
    object starts with the number of the dictionary it was packed with, so
    objects packed earlier still unpack. At most :data:`MAX_DICTIONARIES` are
    learned: the memory a packer holds for itself is bounded, whatever the
    number of objects. Safe to use from several threads.

    A packed object starts with the number of its dictionary and its
    ``metadata.resourceVersion`` (:meth:`version` reads it without unpacking).
    """

    def __init__(self) -> None:
        self._dictionaries: list[bytes] = [b""]
        self._lock = threading.Lock()

    @property
    def dictionaries(self) -> int:
        """How many dictionaries the packer has learned."""
        return len(self._dictionaries) - 1

    def pack(self, obj: dict[str, Any]) -> bytes:
        """``obj`` packed (its compact JSON, deflated against the latest dictionary)."""
        raw = _dumps(obj).encode()
        meta = obj.get("metadata")
        found = meta.get("resourceVersion") if meta.__class__ is dict else None
        version = found.encode("latin-1", "replace") if found.__class__ is str else b""
        if len(version) > 255:
            version = b""  # not a server's version: read by unpacking
        dictionaries = self._dictionaries
        number = len(dictionaries) - 1
        packed = _deflate(raw, dictionaries[number])
        if (len(packed) > SMALL and len(packed) > POOR_RATIO * len(raw)
                and number + 1 < MAX_DICTIONARIES):
            with self._lock:
                if len(self._dictionaries) - 1 == number:
                    learned = (self._dictionaries[-1] + _sample(obj))[-DICTIONARY_BYTES:]
                    self._dictionaries.append(learned)
                dictionaries = self._dictionaries
                number = len(dictionaries) - 1
            packed = _deflate(raw, dictionaries[number])
        return bytes((number, len(version))) + version + packed

    @staticmethod
    def copy(obj: dict[str, Any]) -> dict[str, Any]:
        """A dict of the caller's own equal to ``obj`` (through its compact JSON)."""
        found: dict[str, Any] = json.loads(_dumps(obj))
        return found

    @staticmethod
    def version(packed: bytes) -> str:
        """The ``metadata.resourceVersion`` of the object ``packed`` holds ("" if none)."""
        return packed[2:2 + packed[1]].decode("latin-1")

    def unpack(self, packed: bytes) -> dict[str, Any]:
        """The object ``packed`` holds, as a new dict of its own."""
        dictionary = self._dictionaries[packed[0]]
        if dictionary:
            unpacker = zlib.decompressobj(-15, zdict=dictionary)
        else:
            unpacker = zlib.decompressobj(-15)
        found: dict[str, Any] = json.loads(
            unpacker.decompress(memoryview(packed)[2 + packed[1]:]))
        return found
