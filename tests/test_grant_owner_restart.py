"""One owner per role and target for the Grant-like kinds, across an operator restart.

The owner of a (role, target) pair is read from the kind's objects (the oldest object
holding the engine's finalizer and naming the pair; age by creationTimestamp, then uid,
which the API server sets and no tenant can write), not from what one operator process
happened to reconcile first. So a restarted operator that reconciles the refused object
first still refuses it, the original keeps its privileges, and the two never undo each
other. Runs against the real server of the session fixture, once per admin kind.
"""

from __future__ import annotations

import uuid

import pytest

from lifecycle.core.kind import FINALIZER
from lifecycle.machines.postgres import kinds
from lifecycle.providers.postgres.scenarios.testing import PostgresServer, manifest
from lifecycle.providers.postgres.tenancy import Claims
from lifecycle.testing import Environment

pytestmark = pytest.mark.postgres

#: Virtual time for several Ready polls (one a minute).
POLLS = 200.0


def unique(prefix: str) -> str:
    """A PostgreSQL name no other test uses."""
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def database_acl(server: PostgresServer, db: str, role: str) -> set[str]:
    """The role's explicit privileges on a database."""
    with server.connect() as conn:
        return {r[0] for r in conn.execute(
            "SELECT a.privilege_type FROM pg_database d, LATERAL aclexplode(d.datacl) a "
            "JOIN pg_roles r ON r.oid = a.grantee WHERE d.datname = %s AND r.rolname = %s",
            [db, role]).fetchall()}


def restarted(env: Environment) -> Environment:
    """A new operator on the same API and clock: fresh reconcilers, connectors and work
    queue, nothing remembered from the first."""
    return Environment(kinds(), api=env.api, clock=env.clock)


def refusal(env: Environment, name: str) -> str:
    """The reason and message of the Grant's Failed condition ("" when there is none)."""
    failed = env.condition("Grant", name, "Failed")
    return "" if failed is None else f"{failed.reason}: {failed.message}"


def two_grants(env: Environment, server: PostgresServer) -> tuple[str, str]:
    """A Role and a Database, Grant ``g`` (CONNECT) Ready and Grant ``h`` (CREATE) on the
    same pair refused before it was taken over; returns the role and database."""
    role, db = unique("own"), unique("owndb")
    env.apply(manifest("Role", "r", external_name=role))
    env.apply(manifest("Database", "d", external_name=db))
    env.apply(manifest("Grant", "g", role=role, database=db, privileges=["CONNECT"]))
    env.run_until_idle()
    assert env.state("Grant", "g") == "ready"
    env.advance(1.0)  # h is the younger object, whatever the uids
    env.apply(manifest("Grant", "h", role=role, database=db, privileges=["CREATE"]))
    env.run_until_idle()
    assert refusal(env, "h").startswith("TargetConflict: ")
    assert FINALIZER not in env.get("Grant", "h")["metadata"].get("finalizers", [])
    assert database_acl(server, db, role) == {"CONNECT"}
    return role, db


def changed(env: Environment, role: str, db: str) -> None:
    """The tenant changes the refused Grant's spec (a new generation, asked again)."""
    env.apply(manifest("Grant", "h", role=role, database=db, privileges=["CREATE", "TEMPORARY"]))


def test_the_original_grant_keeps_its_target_when_a_restarted_operator_meets_the_other_first(
        env: Environment, server: PostgresServer) -> None:
    """After a restart the refused Grant, its spec changed, is reconciled first: it is
    refused again (naming the original), gets no finalizer and grants nothing; the
    original stays Ready with its privileges, and polls later neither has undone the
    other."""
    role, db = two_grants(env, server)
    after = restarted(env)
    changed(after, role, db)
    first = after.reconcile("Grant", "h")
    assert first.error is None
    assert refusal(after, "h").startswith("TargetConflict: ")
    assert "default/g" in refusal(after, "h")
    assert FINALIZER not in after.get("Grant", "h")["metadata"].get("finalizers", [])
    after.reconcile("Grant", "g")
    assert after.state("Grant", "g") == "ready"
    assert database_acl(server, db, role) == {"CONNECT"}
    for name in ("g", "h"):
        after.enqueue("Grant", name)
    after.run_until_idle()
    after.advance(POLLS)
    assert database_acl(server, db, role) == {"CONNECT"}
    assert after.state("Grant", "g") == "ready"
    assert refusal(after, "h").startswith("TargetConflict: ")
    # The refused one is deleted at once and touches nothing; the original still holds.
    after.delete("Grant", "h")
    after.run_until_idle()
    assert not after.exists("Grant", "h")
    assert database_acl(server, db, role) == {"CONNECT"}


def test_an_operator_without_the_list_lets_the_first_claimant_win_after_a_restart(
        env: Environment, server: PostgresServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """The check above can fail: with the record kept only in the process (the list never
    handed over), the restarted operator admits the refused Grant it meets first."""
    role, db = two_grants(env, server)
    monkeypatch.setattr(Claims, "bind", lambda self, kind, objects: None)
    after = restarted(env)
    changed(after, role, db)
    after.reconcile("Grant", "h")
    assert FINALIZER in after.get("Grant", "h")["metadata"].get("finalizers", [])
    assert "CREATE" in database_acl(server, db, role)
    after.delete("Grant", "h")
    after.delete("Grant", "g")
    after.run_until_idle()


def test_when_two_grants_hold_one_target_the_older_keeps_it_before_and_after_a_restart(
        env: Environment, server: PostgresServer) -> None:
    """A Grant taken over for another database whose spec is then changed to the pair the
    older Grant holds: both carry the finalizer, the older keeps the pair (its privileges
    untouched) and the newer is refused, in the first operator and in a restarted one
    whichever it reconciles first."""
    role, db, other = unique("both"), unique("bothdb"), unique("bothdb2")
    env.apply(manifest("Role", "r", external_name=role))
    env.apply(manifest("Database", "d", external_name=db))
    env.apply(manifest("Database", "e", external_name=other))
    env.apply(manifest("Grant", "g", role=role, database=db, privileges=["CONNECT"]))
    env.run_until_idle()
    env.advance(1.0)  # h is the younger object, whatever the uids
    env.apply(manifest("Grant", "h", role=role, database=other, privileges=["CREATE"]))
    env.run_until_idle()
    assert env.state("Grant", "h") == "ready"
    env.apply(manifest("Grant", "h", role=role, database=db, privileges=["CREATE"]))
    env.run_until_idle()
    assert FINALIZER in env.get("Grant", "h")["metadata"].get("finalizers", [])
    assert refusal(env, "h").startswith("TargetConflict: ")
    assert database_acl(server, db, role) == {"CONNECT"}
    for order in (("h", "g"), ("g", "h")):
        after = restarted(env)
        for name in order:
            after.reconcile("Grant", name)
        after.advance(POLLS)
        assert after.state("Grant", "g") == "ready"
        assert refusal(after, "h").startswith("TargetConflict: ")
        assert "default/g" in refusal(after, "h")
        assert database_acl(server, db, role) == {"CONNECT"}
        env = after
