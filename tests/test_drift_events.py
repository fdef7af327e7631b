"""Drift Events name the fields that drifted, never their values.

The rule (:func:`lifecycle.core.values.drift_detail`) without fakes; then a Role and a
Database changed by hand on the session's real PostgreSQL server (once per admin kind):
the repair's Event says which fields drifted, and no value (the password, the limit)
appears in any Event or condition.
"""

from __future__ import annotations

import pytest
from postgres_helpers import execute
from psycopg import sql

from lifecycle.core.decide import Facts, choose_event
from lifecycle.core.values import Observation, drift_detail
from lifecycle.providers.postgres.scenarios.testing import PostgresServer, manifest
from lifecycle.testing import Environment


def test_the_detail_names_fields_sorted_once_and_nothing_else() -> None:
    assert drift_detail(["password", "connectionLimit", "password"]) == (
        ": drift on connectionLimit, password")
    assert drift_detail([]) == ""
    # A value put there by mistake is never shown: only field-shaped names are.
    assert drift_detail(["hunter2 secret", "p@ss", "", "x" * 80, "spec.size"]) == (
        ": drift on spec.size")
    many = [f"field{i}" for i in range(12)]
    assert drift_detail(many).endswith(", ...") and "field9" not in drift_detail(many)


def test_the_update_event_carries_the_detail() -> None:
    drifted = Observation(exists=True, up_to_date=False, drifted=("connectionLimit",))
    choice = choose_event(Facts("ready", observation=drifted))
    assert choice.message == "external resource differs from spec: drift on connectionLimit"
    plain = choose_event(Facts("ready", observation=Observation(exists=True, up_to_date=False)))
    assert plain.message == "external resource differs from spec"


def drift_messages(env: Environment, name: str) -> list[str]:
    return [e["message"] for e in env.events(name) if "differs from spec" in e["message"]]


@pytest.mark.postgres
def test_a_role_changed_by_hand_names_what_drifted(env: Environment,
                                                   server: PostgresServer) -> None:
    env.apply(manifest("Role", "app", connectionLimit=5))
    env.run_until_idle()
    role = env.get("Role", "app")["status"]["externalName"]
    execute(server, sql.SQL("ALTER ROLE {} CONNECTION LIMIT 42 PASSWORD 'hand-set-9x7'")
            .format(sql.Identifier(role)))
    env.advance(70)  # the next poll sees it and repairs it

    drifts = drift_messages(env, "app")
    assert any("drift on connectionLimit, password" in m for m in drifts), drifts
    assert not any("42" in m for m in drifts), drifts  # a name, never the value
    texts = [e["message"] for e in env.events()] + [
        c.get("message", "") for c in env.get("Role", "app")["status"]["conditions"]]
    secret = env.secret("app-conn")["password"]
    for text in texts:
        assert "hand-set-9x7" not in text and secret not in text


@pytest.mark.postgres
def test_a_database_changed_by_hand_names_what_drifted(env: Environment,
                                                       server: PostgresServer) -> None:
    env.apply(manifest("Database", "db", connectionLimit=3, allowConnections=True))
    env.run_until_idle()
    name = env.get("Database", "db")["status"]["externalName"]
    execute(server, sql.SQL("ALTER DATABASE {} WITH CONNECTION LIMIT 7 ALLOW_CONNECTIONS false")
            .format(sql.Identifier(name)))
    env.advance(70)

    assert any("drift on allowConnections, connectionLimit" in m
               for m in drift_messages(env, "db")), drift_messages(env, "db")


def test_a_simulated_instance_resized_by_hand_names_what_drifted() -> None:
    from lifecycle.machines.database import DatabaseInstance
    from lifecycle.providers.simcloud import SimCloud
    from lifecycle.providers.simcloud.scenarios.harness import (
        database_manifest,
        simulated_environment,
    )

    env, cloud = simulated_environment(cloud=SimCloud(seed=3, create_polls=0))
    env.apply(database_manifest("db", engine="postgres", storage_gb=20, size="small"))
    env.run_until_idle()
    name = env.get(DatabaseInstance.kind, "db")["status"]["externalName"]
    with cloud._lock:  # an out-of-band change, as a console user would make
        cloud._instances[name].size = "large"
        cloud._instances[name].storage_gb = 40
    env.advance(400)

    messages = [e["message"] for e in env.events("db") if "differs from spec" in e["message"]]
    assert any("drift on size, storageGB" in m for m in messages), messages
    assert not any("large" in m or "40" in m for m in messages), messages
