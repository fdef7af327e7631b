"""Where the journal key comes from, and the journal as the engine reads and writes it.

Intent-journal entries are sealed (:mod:`lifecycle.core.seal`) with a key
only the operator holds. It must outlive the process (an entry written before
a restart is read after it) and be the same on every replica, so the operator
takes it from one of:

* a file (``lifecycle run --journal-key-file PATH``): its bytes, trailing
  whitespace stripped, at least 32 of them; a missing file is created with a
  new random key (64 hex digits, mode 0600) on first start;
* a Secret (``lifecycle run --journal-key-secret NAMESPACE/NAME``), best in
  the operator's own namespace, which tenants cannot read: its ``key`` field;
  a missing Secret is created with a new random key on first start (two
  replicas starting at once both end with the one that was created first);
* ``$LIFECYCLE_JOURNAL_KEY`` (the key itself, for a Secret mounted as an
  environment variable).

Without any of them (the embedded API, the test harness, ``lifecycle serve``,
``lifecycle demo``, the crash explorer) every process has a key of its own
(:func:`process_key`): entries outlive a restart of the engine within the
process, not a restart of the process, and a stale one is then refused, which
only ever makes the engine refuse an unmarked resource, never take one.

Errors (:class:`JournalKeyError`) name the file or Secret and what is wrong,
never a byte of the key; :class:`Journal` does not show its key in ``repr``.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import os
import secrets
import threading
import uuid
from collections.abc import Mapping
from typing import Any

import attrs

from lifecycle.core.errors import LifecycleError
from lifecycle.core.kind import INTENT, INTENT_MAC
from lifecycle.core.seal import KEY_BYTES, Subject, check_key, mac, unseal
from lifecycle.core.values import Intent

__all__ = ["ENV_KEY", "SECRET_FIELD", "Journal", "JournalKeyError", "key_from_env",
           "key_from_file", "key_from_secret", "new_key", "process_key", "subject_of"]

#: The environment variable holding the key itself.
ENV_KEY = "LIFECYCLE_JOURNAL_KEY"
#: The field of the key's Secret.
SECRET_FIELD = "key"

_lock = threading.Lock()
_process: list[bytes] = []


class JournalKeyError(LifecycleError):
    """The journal key cannot be read or stored (the message never holds the key)."""


def new_key() -> bytes:
    """A fresh random key: 64 hex digits (256 bits), as text bytes."""
    return secrets.token_hex(KEY_BYTES).encode()


def process_key() -> bytes:
    """This process's own key, made on first use (the default without a configured key)."""
    with _lock:
        if not _process:
            _process.append(new_key())
        return _process[0]


def _checked(key: bytes, where: str) -> bytes:
    try:
        return check_key(key.rstrip())
    except ValueError as exc:
        raise JournalKeyError(f"journal key from {where}: {exc}") from None


def key_from_file(path: str, *, create: bool = True) -> bytes:
    """The key stored in ``path``; with ``create``, a new one is stored there when it is missing."""
    try:
        with open(path, "rb") as f:
            return _checked(f.read(4096), f"file {path!r}")
    except FileNotFoundError:
        if not create:
            raise JournalKeyError(f"journal key file {path!r} does not exist") from None
    except OSError as exc:
        raise JournalKeyError(f"journal key file {path!r} cannot be read: "
                              f"{exc.strerror or type(exc).__name__}") from None
    key = new_key()
    # Written whole beside the target, then linked into place: a link never replaces a
    # file, and a reader (another replica, another process) sees either no key or all of it.
    partial = f"{path}.{os.getpid()}.{uuid.uuid4().hex}.partial"
    try:
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(key + b"\n")
            f.flush()
            os.fsync(f.fileno())
        os.link(partial, path)
    except FileExistsError:  # another replica stored one first: use it
        return key_from_file(path, create=False)
    except OSError as exc:
        raise JournalKeyError(f"journal key file {path!r} cannot be created: "
                              f"{exc.strerror or type(exc).__name__}") from None
    finally:
        with contextlib.suppress(OSError):
            os.unlink(partial)
    return key


def key_from_env(environ: Mapping[str, str] | None = None) -> bytes | None:
    """The key in ``$LIFECYCLE_JOURNAL_KEY``, or None when it is unset or empty."""
    value = (os.environ if environ is None else environ).get(ENV_KEY, "")
    return _checked(value.encode(), f"${ENV_KEY}") if value.strip() else None


def key_from_secret(api: Any, namespace: str, name: str) -> bytes:
    """The key in Secret ``namespace/name`` (field ``key``), created with a new key if missing.

    ``api`` is a cluster (``get`` and ``create``). Racing replicas: the one
    whose create loses reads the winner's key.
    """
    from lifecycle.kube.errors import AlreadyExists, ApiError, NotFound

    where = f"Secret {namespace}/{name}"
    try:
        try:
            found = api.get("v1", "Secret", namespace, name)
        except NotFound:
            body = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                    "metadata": {"name": name, "namespace": namespace,
                                 "labels": {"app.kubernetes.io/managed-by": "lifecycle"}},
                    "data": {SECRET_FIELD: base64.b64encode(new_key()).decode()}}
            try:
                found = api.create(body)
            except AlreadyExists:
                found = api.get("v1", "Secret", namespace, name)
    except ApiError as exc:
        raise JournalKeyError(f"journal key {where} cannot be read or created: "
                              f"{type(exc).__name__} {getattr(exc, 'status', '')}".rstrip()
                              ) from None
    data = found.get("data") if isinstance(found, Mapping) else None
    encoded = data.get(SECRET_FIELD) if isinstance(data, Mapping) else None
    if not isinstance(encoded, str):
        raise JournalKeyError(f"journal key {where} has no {SECRET_FIELD!r} field")
    try:
        key = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise JournalKeyError(f"journal key {where}: field {SECRET_FIELD!r} is not "
                              "base64") from None
    return _checked(key, where)


def subject_of(kind: str, namespace: str | None, name: str, uid: str,
               external_name: str) -> Subject:
    """The :class:`Subject` of an entry (``namespace`` None or "" for cluster-scoped)."""
    return Subject(kind, namespace or "", name, uid, external_name)


@attrs.frozen
class Journal:
    """The intent journal of one operator: entries sealed and checked with its key.

    :meth:`read` returns only an entry this operator sealed for exactly this
    subject; anything else reads as no entry.
    """

    key: bytes = attrs.field(factory=process_key, converter=check_key, repr=False)

    def read(self, annotations: Mapping[str, Any], subject: Subject) -> Intent | None:
        """The trusted entry in ``annotations`` about ``subject``, or None."""
        return unseal(self.key, subject, annotations.get(INTENT), annotations.get(INTENT_MAC))

    def mac(self, intent: Intent, subject: Subject) -> str:
        """The MAC of ``intent`` about ``subject`` (the ``lifecycle.dev/intent-mac`` text)."""
        return mac(self.key, subject, intent)
