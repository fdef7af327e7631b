"""Checking a role's password by logging in with it, for admins that cannot read verifiers.

A superuser admin compares the role's stored verifier with the Secret's
password (:mod:`lifecycle.providers.postgres.scram`). An admin without
SELECT on ``pg_authid`` (a ``CREATEROLE``/``CREATEDB`` role, as managed
cloud servers hand out) cannot; it opens one short connection as the role
instead. The server's answer decides:

- the login succeeds, or fails only after authentication (no CONNECT on
  the database, the role's connection limit reached): the password works;
- the server says password authentication failed: it does not;
- anything else (no ``pg_hba.conf`` entry, the server full, unreachable):
  the check could not tell.

The password is only ever handed to libpq; no message carries it.
"""

from __future__ import annotations

import psycopg

from lifecycle.providers.postgres.config import ServerConfig, conninfo

__all__ = ["AFTER_AUTHENTICATION", "WRONG_PASSWORD", "judge", "password_works"]

#: Refusals the server sends only after the password was accepted.
AFTER_AUTHENTICATION = ("permission denied for database", "too many connections for role",
                        "is not permitted to log in")
#: The refusal that means the password is wrong (or expired).
WRONG_PASSWORD = "password authentication failed"


def password_works(server: ServerConfig, user: str, password: str) -> bool | None:
    """Whether ``user`` can authenticate with ``password``; None when the attempt cannot tell."""
    try:
        with server.tls_files() as tls:
            tls.pop("sslcert", None)  # the admin's client certificate is not the role's
            tls.pop("sslkey", None)
            connection = psycopg.connect(
                host=server.host, port=server.port, user=user, password=password,
                dbname=server.database, sslmode=server.sslmode,
                connect_timeout=server.connect_timeout,
                application_name="lifecycle-password-check", autocommit=True,
                **conninfo(tls))
    except psycopg.Error as exc:
        return judge(str(exc))
    connection.close()
    return True


def judge(text: str) -> bool | None:
    """Read libpq's text of a failed login: False for a wrong password, True for a refusal
    after authentication, None otherwise."""
    if "FATAL:" not in text:
        return None
    reply = text.split("FATAL:", 1)[1]
    if WRONG_PASSWORD in reply:
        return False
    if any(words in reply for words in AFTER_AUTHENTICATION):
        return True
    return None
