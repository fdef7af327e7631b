"""Fixtures for the tests that run against the throwaway PostgreSQL server.

``conftest.py`` registers this module as a plugin (``pytest_plugins``), so every
test module under ``tests/`` can ask for these fixtures by argument name
without importing them (an import would shadow the argument: ruff F811):

- ``postgres_server`` (session): the one started :class:`PostgresServer`.
- ``server``: that server, started again before and after the test in case a
  test stopped it.
- ``admin``: the admin the Environment logs in as, parametrized by kind
  (:data:`ADMIN_KINDS`): ``superuser`` (the server's own superuser) and
  ``createrole`` (a role with only LOGIN, CREATEROLE and CREATEDB, which
  cannot read ``pg_authid``: what managed cloud servers hand out). An
  :class:`Admin` with ``kind``, ``user``, ``password``, ``superuser``.
- ``env``: a harness Environment whose ProviderConfig ``default`` points at
  the server (``sslmode=disable``) as ``admin``, so every test asking for it
  runs once per admin kind.
- ``superuser_env``: the same with the superuser admin only, for tests of
  what only a superuser may do (superuser roles, tablespaces, REPLICATION).

The plain helpers (``unique``, ``query``, ``execute``, ``can_login``, ``POLL``)
are in :mod:`postgres_helpers`. PostgreSQL is imported only when a test asks
for one of these fixtures.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import TYPE_CHECKING

import attrs
import pytest

if TYPE_CHECKING:
    from lifecycle.providers.postgres.scenarios.testing import PostgresServer
    from lifecycle.testing import Environment


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """One started throwaway server for the whole test session."""
    from lifecycle.providers.postgres.scenarios.testing import started_server

    yield from started_server()


@pytest.fixture
def server(postgres_server: PostgresServer) -> Iterator[PostgresServer]:
    """The session server, started again if a test left it stopped."""
    postgres_server.start()
    yield postgres_server
    postgres_server.start()


@pytest.fixture
def dsn(server: PostgresServer, monkeypatch: pytest.MonkeyPatch) -> str:
    """``LIFECYCLE_POSTGRES_DSN`` pointing at the session server (superuser)."""
    from lifecycle.providers.postgres.scenarios.verify import POSTGRES_DSN_ENV

    value = (f"postgresql://{server.user}:{server.password}@{server.host}:{server.port}"
             "/postgres?sslmode=disable")
    monkeypatch.setenv(POSTGRES_DSN_ENV, value)
    return value


#: The admin kinds ``env`` runs each test with.
ADMIN_KINDS = ("superuser", "createrole")
#: The name of the session's non-superuser admin role.
CREATEROLE_ADMIN = "lifecycle_createrole_admin"


@attrs.frozen
class Admin:
    """The role an Environment logs in as: its kind (one of :data:`ADMIN_KINDS`) and login."""

    kind: str
    user: str
    password: str = attrs.field(repr=False)

    @property
    def superuser(self) -> bool:
        """Whether this admin is a superuser."""
        return self.kind == "superuser"


@pytest.fixture(scope="session")
def postgres_admins(postgres_server: PostgresServer) -> dict[str, Admin]:
    """Each admin kind's login on the session server; the CREATEROLE CREATEDB admin is
    created once, as a plain role (no superuser, no pg_authid, no predefined roles)."""
    from psycopg import sql

    password = secrets.token_urlsafe(18)
    with postgres_server.connect() as conn:
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN CREATEROLE CREATEDB PASSWORD {}").format(
            sql.Identifier(CREATEROLE_ADMIN), sql.Literal(password)))
    return {"superuser": Admin("superuser", postgres_server.user, postgres_server.password),
            "createrole": Admin("createrole", CREATEROLE_ADMIN, password)}


@pytest.fixture(params=ADMIN_KINDS)
def admin(request: pytest.FixtureRequest, server: PostgresServer,
          postgres_admins: dict[str, Admin]) -> Admin:
    """The admin of ``env``: once the superuser, once the CREATEROLE CREATEDB role."""
    return postgres_admins[request.param]


def admin_environment(server: PostgresServer, admin: Admin) -> Environment:
    """An Environment whose ProviderConfig points at ``server`` as ``admin``."""
    from lifecycle.providers.postgres.scenarios.testing import postgres_environment

    return postgres_environment(server.host, server.port, admin.user, admin.password,
                                "disable")


@pytest.fixture
def env(server: PostgresServer, admin: Admin) -> Environment:
    """An Environment pointed at the test server, once per admin kind."""
    return admin_environment(server, admin)


@pytest.fixture
def superuser_env(server: PostgresServer, postgres_admins: dict[str, Admin]) -> Environment:
    """An Environment pointed at the test server as its superuser only."""
    return admin_environment(server, postgres_admins["superuser"])
