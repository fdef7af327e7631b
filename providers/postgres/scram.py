"""Password verifiers as PostgreSQL stores them in ``pg_authid.rolpassword``.

The role client never sends a cleartext password to the server: it sends a
SCRAM-SHA-256 verifier computed here (as ``psql``'s ``\\password`` does), so
the password cannot appear in the server's statement log. To detect a
password the user changed in the connection Secret, the client recomputes
the stored verifier from the candidate password with the stored salt and
iteration count and compares; nothing is ever logged or returned.

Passwords are prepared with SASLprep (RFC 4013) exactly where PostgreSQL
does: a pure-ASCII password is used as is; otherwise it is mapped,
NFKC-normalised and checked, and a password SASLprep rejects is used as raw
UTF-8, which is PostgreSQL's own fallback.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import stringprep
import unicodedata

__all__ = ["ITERATIONS", "matches", "saslprep", "scram_verifier"]

#: The iteration count PostgreSQL uses by default (``scram_iterations``).
ITERATIONS = 4096
_PREFIX = "SCRAM-SHA-256$"

_PROHIBITED = (
    stringprep.in_table_c12,
    stringprep.in_table_c21,
    stringprep.in_table_c22,
    stringprep.in_table_c3,
    stringprep.in_table_c4,
    stringprep.in_table_c5,
    stringprep.in_table_c6,
    stringprep.in_table_c7,
    stringprep.in_table_c8,
    stringprep.in_table_c9,
    stringprep.in_table_a1,
)


def saslprep(password: str) -> bytes:
    """The bytes PostgreSQL hashes for ``password`` (SASLprep, or raw UTF-8 if rejected)."""
    raw = password.encode("utf-8")
    if password.isascii():
        return raw
    mapped = "".join(
        " " if stringprep.in_table_c12(ch) else ch
        for ch in password
        if not stringprep.in_table_b1(ch)
    )
    prepared = unicodedata.normalize("NFKC", mapped)
    if not prepared or any(check(ch) for ch in prepared for check in _PROHIBITED):
        return raw
    if any(stringprep.in_table_d1(ch) for ch in prepared) and (
        any(stringprep.in_table_d2(ch) for ch in prepared)
        or not stringprep.in_table_d1(prepared[0])
        or not stringprep.in_table_d1(prepared[-1])
    ):
        return raw
    return prepared.encode("utf-8")


def _keys(password: str, salt: bytes, iterations: int) -> tuple[bytes, bytes]:
    salted = hashlib.pbkdf2_hmac("sha256", saslprep(password), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", "sha256").digest()
    stored_key = hashlib.sha256(client_key).digest()
    server_key = hmac.new(salted, b"Server Key", "sha256").digest()
    return stored_key, server_key


def scram_verifier(password: str, *, salt: bytes | None = None,
                   iterations: int = ITERATIONS) -> str:
    """A SCRAM-SHA-256 verifier for ``password`` in PostgreSQL's storage format."""
    salt = salt if salt is not None else secrets.token_bytes(16)
    stored_key, server_key = _keys(password, salt, iterations)
    b64 = base64.b64encode
    return (f"{_PREFIX}{iterations}:{b64(salt).decode()}$"
            f"{b64(stored_key).decode()}:{b64(server_key).decode()}")


def matches(password: str, stored: str | None, role: str) -> bool | None:
    """Whether ``password`` is the one behind the stored verifier of ``role``.

    Returns None when the stored value is in a format this module cannot
    check (the caller then cannot tell); a role without a password never
    matches.
    """
    if stored is None:
        return False
    if stored.startswith(_PREFIX):
        try:
            head, keys = stored[len(_PREFIX):].split("$", 1)
            iterations_text, salt_text = head.split(":", 1)
            stored_text, server_text = keys.split(":", 1)
            salt = base64.b64decode(salt_text, validate=True)
            want_stored = base64.b64decode(stored_text, validate=True)
            want_server = base64.b64decode(server_text, validate=True)
            iterations = int(iterations_text)
        except ValueError:
            return None
        if iterations <= 0:
            return None
        stored_key, server_key = _keys(password, salt, iterations)
        return hmac.compare_digest(stored_key, want_stored) and hmac.compare_digest(
            server_key, want_server)
    if stored.startswith("md5") and len(stored) == 35:
        digest = hashlib.md5((password + role).encode("utf-8"), usedforsecurity=False)
        return hmac.compare_digest("md5" + digest.hexdigest(), stored)
    return None
