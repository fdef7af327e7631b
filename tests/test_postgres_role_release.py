"""Deleting a role under ``reassignOwnedTo`` / ``dropOwned`` visits only the databases where
it owns or holds something, so a database the admin may not connect to does not block it."""

from __future__ import annotations

from typing import Any

import pytest
from postgres_helpers import act_as, execute, query, unique
from psycopg import sql

from lifecycle.providers.postgres.scenarios.testing import manifest, set_policy

pytestmark = pytest.mark.postgres


@pytest.mark.parametrize("policy", [{"dropOwned": True}, {"reassignOwnedTo": "heir"}])
def test_a_database_the_admin_cannot_enter_does_not_block_the_deletion(
        env: Any, server: Any, admin: Any, policy: dict[str, Any]) -> None:
    closed, heir = unique("closed"), unique("heir")
    execute(server, sql.SQL("CREATE DATABASE {}").format(sql.Identifier(closed)))
    execute(server, sql.SQL("REVOKE ALL ON DATABASE {} FROM PUBLIC").format(
        sql.Identifier(closed)))
    execute(server, sql.SQL("CREATE ROLE {}").format(sql.Identifier(heir)))
    role = unique("leaving")
    spec = {k: (heir if v == "heir" else v) for k, v in policy.items()}
    # The heir was made by hand, not by a Role of this namespace: the policy must say so.
    set_policy(env, {"crossNamespace": True})
    try:
        env.apply(manifest("Role", "r", external_name=role, **spec))
        env.run_until_idle()
        act_as(server, admin, role)
        act_as(server, admin, heir)
        env.delete("Role", "r")
        env.run_until_idle()
        assert not env.exists("Role", "r")
        assert query(server, "SELECT 1 FROM pg_roles WHERE rolname = %s", role) == []
    finally:
        execute(server, sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(closed)))
        execute(server, sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(heir)))
