"""Plain helpers for the tests that run against the throwaway PostgreSQL server.

Import these by name (``from postgres_helpers import execute, query, unique``); the
fixtures live in :mod:`postgres_fixtures`, which ``conftest.py`` registers.

- :data:`POLL`: enough virtual time for a Ready poll, the repair it triggers and the
  check after.
- :func:`unique`: a PostgreSQL name no other test uses.
- :func:`query`, :func:`execute`: one statement run out of band as the server's
  superuser (never as the admin the Environment under test uses).
- :func:`can_login`: whether a role logs in with a password.
- :func:`act_as`: make a non-superuser admin a member of a role it must act as.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

import psycopg

if TYPE_CHECKING:
    from lifecycle.providers.postgres.scenarios.testing import PostgresServer

#: Enough virtual time for a Ready poll, the repair it triggers and the check after.
POLL = 75.0


def unique(prefix: str) -> str:
    """A PostgreSQL name no other test uses."""
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def query(server: PostgresServer, text: str, *params: Any) -> list[tuple[Any, ...]]:
    """Rows of one query run as the server's superuser."""
    with server.connect() as conn:
        return conn.execute(text, params).fetchall()  # type: ignore[arg-type]


def execute(server: PostgresServer, statement: Any) -> None:
    """Run one out-of-band statement as the server's superuser."""
    with server.connect() as conn:
        conn.execute(statement)


def can_login(server: PostgresServer, role: str, password: str) -> bool:
    """Whether ``role`` can log in with ``password``."""
    try:
        with server.connect(role, password) as conn:
            return conn.execute("SELECT current_user").fetchone() == (role,)
    except psycopg.OperationalError:
        return False


def act_as(server: PostgresServer, admin: Any, role: str) -> None:
    """Make a non-superuser ``admin`` (a :class:`postgres_fixtures.Admin`) a member of
    ``role``, as PostgreSQL 15 asks before it may make ``role`` an owner or reassign what
    it owns; nothing for a superuser."""
    if not admin.superuser:
        execute(server, psycopg.sql.SQL("GRANT {} TO {}").format(
            psycopg.sql.Identifier(role), psycopg.sql.Identifier(admin.user)))
