"""The intent journal is closed by observation, also after a crash.

A call of ``create`` (or ``update``) leaves a ``pending`` journal entry: its
success is not written after the call, and a crash right after the call
leaves the same entry. The next observation that shows the effect happened
closes it as ``succeeded``, so a later, unrelated call of the same operation
mints a new idempotency key instead of reusing the old one.
"""

from __future__ import annotations

import json
from contextlib import suppress
from typing import Any

from helpers import KIND, Crash, external, make, ready

from lifecycle.core.kind import INTENT
from lifecycle.core.values import Intent, Observation
from lifecycle.providers.simcloud import SimCloud
from lifecycle.providers.simcloud.scenarios.harness import database_manifest
from lifecycle.runtime.effects import closed_intent
from lifecycle.testing import Environment


def intent(env: Environment, name: str = "db") -> dict[str, Any]:
    """The journal entry on the stored object."""
    return json.loads(env.get(KIND, name)["metadata"]["annotations"][INTENT])


def crash_after_create(env: Environment, cloud: SimCloud) -> str:
    """Apply ``db`` and crash right after the cloud accepted the create; the key used.

    The version is given, so nothing is late-initialised and the generation
    stays the same: only the journal can tell a new create from the old one.
    """
    env.apply(database_manifest("db", version="15"))
    real_create = cloud.create_instance
    crashed: list[str] = []

    def create(*args: Any, **kwargs: Any) -> Any:
        real_create(*args, **kwargs)
        crashed.append(kwargs["client_token"])
        raise Crash

    cloud.create_instance = create  # type: ignore[method-assign]
    with suppress(Crash):
        env.reconcile(KIND, "db")
    cloud.create_instance = real_create  # type: ignore[method-assign]
    assert len(crashed) == 1
    return crashed[0]


def client_token(cloud: SimCloud, name: str) -> str | None:
    """The idempotency key the cloud recorded with the instance's creation."""
    (doc,) = [i for i in cloud.snapshot()["instances"] if i["name"] == name]
    return doc["client_token"]


def test_a_create_interrupted_before_its_outcome_is_closed_by_the_next_observation() -> None:
    env, cloud = make()
    key = crash_after_create(env, cloud)
    assert intent(env) == {**intent(env), "outcome": "pending", "key": key}
    assert client_token(cloud, external(env)) == key

    env.enqueue(KIND, "db")
    env.run_until_idle()

    assert env.state(KIND, "db") == "ready"
    # Observed, so closed; the close needs no write of its own and no pass made one:
    # the entry reads pending, and the Ready state keeps it from being resumed.
    assert intent(env)["outcome"] == "pending"
    assert intent(env)["key"] == key
    assert cloud.creations(external(env)) == 1


def test_a_vanished_resource_is_recreated_under_a_new_key_after_a_closed_crash() -> None:
    env, cloud = make()
    old_key = crash_after_create(env, cloud)
    env.enqueue(KIND, "db")
    env.run_until_idle()
    assert env.state(KIND, "db") == "ready"

    cloud.remove_instance(external(env))
    env.enqueue(KIND, "db")
    env.run_until_idle()

    assert env.state(KIND, "db") == "ready"
    assert cloud.creations(external(env)) == 2
    new_key = client_token(cloud, external(env))
    uid = env.get(KIND, "db")["metadata"]["uid"]
    assert old_key == f"{uid}/create/1/1"
    assert new_key == f"{uid}/create/1/2"  # not the pending 1/1: the object was Ready
    assert intent(env) == {**intent(env), "key": new_key, "outcome": "pending"}


def test_an_update_interrupted_before_its_outcome_is_closed_and_a_later_update_gets_a_new_key(
) -> None:
    env, cloud = make()
    ready(env, version="15")
    env.apply(database_manifest("db", version="15", storage_gb=30))
    real_modify = cloud.modify_instance
    crashed: list[str] = []

    def modify(*args: Any, **kwargs: Any) -> Any:
        real_modify(*args, **kwargs)
        crashed.append(intent(env)["key"])
        raise Crash  # after the cloud accepted it, before the pass recorded anything

    cloud.modify_instance = modify  # type: ignore[method-assign]
    with suppress(Crash):
        env.run_until_idle()
    cloud.modify_instance = real_modify  # type: ignore[method-assign]
    assert len(crashed) == 1
    old_key = crashed[0]
    assert intent(env)["outcome"] == "pending"

    env.enqueue(KIND, "db")
    env.run_until_idle()
    assert env.state(KIND, "db") == "ready"
    after_crash = intent(env)

    # Drift at the same generation: the repair is a new intent with a new key.
    cloud.drift(external(env), storage_gb=20)
    env.enqueue(KIND, "db")
    env.run_until_idle()
    assert env.state(KIND, "db") == "ready"
    assert cloud.instances()[external(env)]["storage_gb"] == 30
    repaired = intent(env)
    assert repaired["operation"] == "update"
    assert repaired["key"] != old_key
    uid = env.get(KIND, "db")["metadata"]["uid"]
    assert old_key == f"{uid}/update/2/2"  # the create before it was 1/1
    assert repaired["key"] == f"{uid}/update/2/3"
    assert after_crash == {**after_crash, "key": old_key}


def test_a_pending_intent_stays_pending_while_observation_does_not_show_its_effect() -> None:
    at = "2026-01-01T00:00:00Z"
    create = Intent("create", "u/create/1/1", 1, at)
    update = Intent("update", "u/update/2/1", 2, at)
    delete = Intent("delete", "u/delete/2/1", 2, at)
    stale = Observation(exists=True, up_to_date=False)
    current = Observation(exists=True, up_to_date=True)
    absent = Observation.absent()

    assert closed_intent(create, absent) is None
    assert closed_intent(create, stale) == Intent("create", "u/create/1/1", 1, at, "succeeded")
    assert closed_intent(update, stale) is None
    assert closed_intent(update, absent) is None
    assert closed_intent(update, current) == Intent("update", "u/update/2/1", 2, at,
                                                    "succeeded")
    assert closed_intent(delete, current) is None
    assert closed_intent(delete, absent) == Intent("delete", "u/delete/2/1", 2, at, "succeeded")
    for done in ("succeeded", "failed"):
        assert closed_intent(Intent("create", "k", 1, at, done), current) is None
    assert closed_intent(None, current) is None
    assert closed_intent(create, None) is None


def test_a_create_lost_before_it_reached_the_cloud_is_retried_with_the_same_key() -> None:
    env, cloud = make()
    env.apply(database_manifest("db"))
    real_create = cloud.create_instance

    def lost(*args: Any, **kwargs: Any) -> Any:
        raise Crash

    cloud.create_instance = lost  # type: ignore[method-assign]
    with suppress(Crash):
        env.reconcile(KIND, "db")
    cloud.create_instance = real_create  # type: ignore[method-assign]
    pending = intent(env)
    assert pending["outcome"] == "pending"

    env.enqueue(KIND, "db")
    env.run_until_idle()
    assert env.state(KIND, "db") == "ready"
    assert client_token(cloud, external(env)) == pending["key"]
    assert intent(env) == {**pending, "outcome": "succeeded"}
    assert cloud.creations(external(env)) == 1

