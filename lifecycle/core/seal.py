"""Sealed intent-journal entries: a journal a tenant cannot forge (pure).

The journal entry (:class:`~lifecycle.core.values.Intent`) lives in the
object's ``lifecycle.dev/intent`` annotation, which anyone who may write the
object may write too. The engine trusts an entry (to resume its key, or to
take an unmarked external resource as its own) only when the
``lifecycle.dev/intent-mac`` annotation written with it holds its MAC: an
HMAC-SHA256, under a key only the operator holds, of the entry and of what it
is about, the :class:`Subject`: the object's kind, namespace, name and uid,
and the external name the call was made on. So

* a forged entry (no MAC, or one made without the key) is refused;
* an entry copied onto another object is refused (another uid);
* an entry replayed after the external name changed is refused (another name);
* an entry whose fields were edited (a failed create turned pending) is refused.

Refused means read as no entry at all: exactly like a missing mark. The key
is an input here; where it comes from is :mod:`lifecycle.runtime.journalkey`.
Nothing here logs, and no error message carries the key or a MAC.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
from collections.abc import Mapping

import attrs

from lifecycle.core.values import Intent

__all__ = ["KEY_BYTES", "Subject", "check_key", "mac", "unseal"]

#: The least key length accepted, in bytes (the length of a SHA-256 block's digest).
KEY_BYTES = 32
#: A MAC's length in hex digits, and the longest entry text the engine ever writes.
_MAC_CHARS = 64
_MAX_ENTRY = 4096
#: Versions the signed message, so a later format can never be confused with this one.
_DOMAIN = "lifecycle.dev/intent/v1"


@attrs.frozen
class Subject:
    """What an entry is about: the object (kind, namespace, name, uid) and the external name.

    ``namespace`` is ``""`` for a cluster-scoped object.
    """

    kind: str
    namespace: str
    name: str
    uid: str
    external_name: str


def check_key(key: object) -> bytes:
    """``key`` as bytes when it may sign entries; ValueError (naming no byte of it) otherwise."""
    if not isinstance(key, bytes | bytearray):
        raise ValueError(f"a journal key must be bytes, not {type(key).__name__}")
    if len(key) < KEY_BYTES:
        raise ValueError(f"a journal key needs at least {KEY_BYTES} bytes, "
                         f"this one has {len(key)}")
    return bytes(key)


def _message(subject: Subject, intent: Intent) -> bytes:
    """The signed text: every field of the subject and of the entry, unambiguously framed."""
    return json.dumps([_DOMAIN, subject.kind, subject.namespace, subject.name, subject.uid,
                       subject.external_name, intent.operation, intent.key, intent.generation,
                       intent.started, intent.outcome],
                      separators=(",", ":"), ensure_ascii=True).encode()


def mac(key: bytes, subject: Subject, intent: Intent) -> str:
    """The entry's MAC (hex HMAC-SHA256 of :func:`_message` under ``key``)."""
    return hmac.new(key, _message(subject, intent), hashlib.sha256).hexdigest()


def unseal(key: bytes, subject: Subject, raw: object, found: object) -> Intent | None:
    """The entry ``raw`` holds when ``found`` is its MAC under ``key`` for ``subject``; else None.

    Anything else (absent, unreadable, unsealed as written before entries
    were sealed, sealed by another key, about another object or another
    external name, edited) reads as no entry.
    """
    if (not isinstance(raw, str) or not isinstance(found, str) or len(found) != _MAC_CHARS
            or len(raw) > _MAX_ENTRY):
        return None  # checked before the cache, which then never holds a tenant's megabytes
    return _unsealed(key, subject, raw, found)


# A pass reads the entry it just wrote several times: check each text once. The result
# depends only on the (immutable) arguments and Intent is frozen, so it never goes stale.
@functools.lru_cache(maxsize=256)
def _unsealed(key: bytes, subject: Subject, raw: str, found: str) -> Intent | None:
    if not found.isascii():
        return None
    try:
        data = json.loads(raw)
    except ValueError:
        return None
    intent = Intent.from_dict(data) if isinstance(data, Mapping) else None
    if intent is None:
        return None
    if not hmac.compare_digest(found, mac(key, subject, intent)):
        return None
    return intent
