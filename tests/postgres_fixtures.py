"""Fixtures for the tests that run against the throwaway PostgreSQL server.

``conftest.py`` registers this module as a plugin (``pytest_plugins``), so every
test module under ``tests/`` can ask for these fixtures by argument name
without importing them (an import would shadow the argument: ruff F811):

- ``postgres_server`` (session): the one started :class:`PostgresServer`.
- ``server``: that server, started again before and after the test in case a
  test stopped it.
- ``env``: a harness Environment whose ProviderConfig ``default`` points at
  the server with its superuser admin (``sslmode=disable``).

The plain helpers (``unique``, ``query``, ``execute``, ``can_login``, ``POLL``)
are in :mod:`postgres_helpers`. PostgreSQL is imported only when a test asks
for one of these fixtures.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from lifecycle.providers.postgres.testing import PostgresServer
    from lifecycle.testing import Environment


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """One started throwaway server for the whole test session."""
    from lifecycle.providers.postgres.testing import started_server

    yield from started_server()


@pytest.fixture
def server(postgres_server: PostgresServer) -> Iterator[PostgresServer]:
    """The session server, started again if a test left it stopped."""
    postgres_server.start()
    yield postgres_server
    postgres_server.start()


@pytest.fixture
def env(server: PostgresServer) -> Environment:
    """An Environment whose ProviderConfig points at the test server (superuser admin)."""
    from lifecycle.providers.postgres.testing import postgres_environment

    return postgres_environment(server.host, server.port, server.user, server.password,
                                "disable")
