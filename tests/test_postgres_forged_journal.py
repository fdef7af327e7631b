"""The forged-journal attack of issue 28 against a real PostgreSQL server.

A tenant names a role and a database it did not create (``app_prod`` and its
database, made by hand, unmarked) and writes the report's intent-journal
entry on its objects, with no adopt annotation and adoption not allowed.
Before entries were sealed both went Ready: the role's password was reset to
the tenant's Secret, and deleting the objects ran ``DROP DATABASE`` and
``DROP ROLE``. Now both are refused like any unmarked resource, and the
victims stay byte for byte as they were (attributes, password verifier,
comment) through the refusal and the deletion, with either admin kind. An
entry copied from the tenant's own legitimate Role is refused the same way.
"""

from __future__ import annotations

import pytest
from postgres_helpers import can_login, unique
from postgres_helpers import execute as run
from psycopg import sql
from test_postgres_ownership import database_row, deleted, refused, role_row

from lifecycle.core.kind import INTENT, INTENT_MAC
from lifecycle.providers.postgres.scenarios.testing import PostgresServer, manifest
from lifecycle.testing import Environment

pytestmark = pytest.mark.postgres

#: The report's entry, exactly as the tenant wrote it.
FORGED = ('{"operation":"update","key":"x/update/1/1","generation":1,'
          '"started":"2020-01-01T00:00:00Z","outcome":"succeeded"}')
PASSWORD = "their-own-pass-1"


def _forged(kind: str, name: str, external: str, **annotations: str) -> dict:
    doc = manifest(kind, name, external_name=external)
    doc["metadata"]["annotations"].update({INTENT: FORGED, **annotations})
    return doc


def test_a_forged_journal_takes_over_neither_the_role_nor_the_database(
        env: Environment, server: PostgresServer) -> None:
    role, database = unique("app_prod"), unique("proddb")
    run(server, sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
        sql.Identifier(role), sql.Literal(PASSWORD)))
    run(server, sql.SQL("CREATE DATABASE {} OWNER {}").format(
        sql.Identifier(database), sql.Identifier(role)))
    roles, databases = role_row(server, role), database_row(server, database)
    assert roles is not None and databases is not None
    env.apply(_forged("Role", "r", role))
    env.apply(_forged("Database", "d", database, **{INTENT_MAC: "5a" * 32}))
    # The tenant's legitimate role, whose sealed entry it copies onto a second object.
    env.apply(manifest("Role", "mine"))
    env.advance(300)
    assert env.state("Role", "mine") == "ready"
    for kind, name in (("Role", "r"), ("Database", "d")):
        assert refused(env, kind, name)[0] == "ExternalResourceNotOwned", (kind, name)
    assert role_row(server, role) == roles and database_row(server, database) == databases
    assert can_login(server, role, PASSWORD)
    deleted(env, "Database", "d")
    deleted(env, "Role", "r")  # lets go of the name: the next claimant is judged alone
    assert role_row(server, role) == roles and database_row(server, database) == databases
    own = env.get("Role", "mine")["metadata"]["annotations"]
    copied = manifest("Role", "copy", external_name=role)
    copied["metadata"]["annotations"].update({INTENT: own[INTENT], INTENT_MAC: own[INTENT_MAC]})
    env.apply(copied)
    env.advance(300)
    assert refused(env, "Role", "copy")[0] == "ExternalResourceNotOwned"
    deleted(env, "Role", "copy")
    deleted(env, "Role", "mine")
    assert role_row(server, role) == roles and database_row(server, database) == databases
    assert can_login(server, role, PASSWORD)
    run(server, sql.SQL("DROP DATABASE {}").format(sql.Identifier(database)))
    run(server, sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))
