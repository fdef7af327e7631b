"""PostgreSQL kinds reach Ready in the pass that creates them (``Completion.finished``).

Every statement has finished when it returns, so the pass that runs
``CREATE ROLE`` observes the role at once and concludes Ready: one pass, one
status write, against two of each for a provider whose create is pending.
"""

from __future__ import annotations

from typing import Any

import pytest
from postgres_helpers import unique

from lifecycle.machines.postgres import Database, Extension, Role, Schema
from lifecycle.providers.postgres.scenarios.testing import manifest

pytestmark = pytest.mark.postgres


def test_postgres_clients_declare_each_statement_finished_not_the_kinds() -> None:
    from lifecycle.core.values import Completion
    from lifecycle.providers.postgres.tenancy import FINISHED

    assert not any(kind.observe_after_create for kind in (Role, Database, Schema, Extension))
    assert Completion(finished=True) == FINISHED


@pytest.mark.parametrize(("kind", "params"), [
    ("Role", {"login": True}),
    ("Database", {}),
])
def test_a_role_or_database_is_ready_after_one_pass_and_one_status_write(
        env: Any, kind: str, params: dict[str, Any]) -> None:
    env.apply(manifest(kind, "x", external_name=unique("sync"), **params))
    env.api.reset_stats()
    steps = env.run_until_idle()
    assert [(s.before, s.after) for s in steps] == [(None, "ready")]
    assert env.api.stats["replace_status"] == 1
    assert [(e["reason"], e["message"]) for e in env.events("x")] == [
        ("Available", "unclaimed -> creating -> ready: creating the external resource; "
         "Available")]
    obj = env.get(kind, "x")
    assert obj["status"]["observedGeneration"] == obj["metadata"]["generation"]
    # The claim and the pending entry in one write; the close rides on the database's
    # late-initialised defaults, and on no write of its own for a role (the Ready state
    # keeps the entry from being resumed).
    late_init = obj["metadata"]["generation"] - 1
    assert env.api.writes(kind) - env.api.stats["replace_status"] == 1 + late_init
    assert '"operation": "create"' in obj["metadata"]["annotations"]["lifecycle.dev/intent"]


def test_schemas_of_one_name_in_two_databases_do_not_conflict(env: Any) -> None:
    for db in ("a", "b"):
        env.apply(manifest("Database", f"db-{db}", external_name=unique(f"scope{db}")))
    env.run_until_idle()
    name = unique("shared")
    for db in ("a", "b"):
        database = env.get("Database", f"db-{db}")["metadata"]["annotations"][
            "lifecycle.dev/external-name"]
        env.apply(manifest("Schema", f"s-{db}", external_name=name, database=database))
    env.run_until_idle()
    assert env.state("Schema", "s-a") == env.state("Schema", "s-b") == "ready"
