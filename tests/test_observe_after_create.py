"""``Kind.observe_after_create``: a synchronous create reaches Ready in the pass that made it.

A provider whose create has finished when it returns lets the engine observe
once more in the same pass; when that shows the resource available, the pass
concludes both transitions (unclaimed -> creating -> ready) with one status
write, one connection-Secret update and one Event naming the path. Anything else (still pending, not
visible yet, an error) leaves the pass exactly as without the flag.
"""

from __future__ import annotations

from typing import Any

import attrs

from lifecycle.core.errors import ExternalError
from lifecycle.core.kind import INTENT
from lifecycle.core.plan import after_create, created
from lifecycle.core.values import Observation, ProviderStatus, ResultKind
from lifecycle.machines.database import DatabaseInstance
from lifecycle.providers.simcloud import DatabaseConnector, SimCloud
from lifecycle.providers.simcloud.scenarios.harness import database_manifest
from lifecycle.providers.simcloud.scenarios.verify import simcloud_target
from lifecycle.testing import Environment
from lifecycle.verify import CONCURRENT, VARIANTS, ExternalSystem, explore

SYNC = attrs.evolve(DatabaseInstance, observe_after_create=True)
KIND = SYNC.kind


def environment(**cloud_options: Any) -> tuple[Environment, SimCloud]:
    cloud = SimCloud(seed=1, **cloud_options)
    env = Environment([(SYNC, DatabaseConnector(cloud))])
    env.provider_config()
    return env, cloud


def writes(env: Environment) -> dict[str, int]:
    status = env.api.stats["replace_status"]
    return {"object": env.api.writes(KIND) - status, "status": status,
            "secret": env.api.writes("Secret"), "event": env.api.stats["record_event"]}


def test_a_finished_create_is_ready_after_one_pass_and_one_status_write() -> None:
    env, _ = environment(create_polls=0)
    env.apply(database_manifest("db"))
    env.api.reset_stats()
    steps = env.run_until_idle()
    assert [s.after for s in steps] == ["ready"]
    assert steps[0].result.kind is ResultKind.REQUEUE_AFTER and steps[0].result.reason == "Poll"
    assert writes(env) == {"object": 2, "status": 1, "secret": 2, "event": 1}
    obj = env.get(KIND, "db")
    assert obj["status"]["observedGeneration"] == obj["metadata"]["generation"] == 2
    assert '"outcome": "succeeded"' in obj["metadata"]["annotations"][INTENT]
    assert [(e["type"], e["reason"], e["message"]) for e in env.events("db")] == [
        ("Normal", "Available", "unclaimed -> creating -> ready: "
         "creating the external resource; Available")]
    secret = env.secret("db-conn")
    assert set(secret) >= {"password", "endpoint", "port"}
    history = obj["status"].get("history") or []
    assert [h.get("to") for h in history][-2:] == ["creating", "ready"]


def test_a_create_still_pending_leaves_the_pass_as_it_was() -> None:
    env, _ = environment(create_polls=2)
    env.apply(database_manifest("db"))
    env.api.reset_stats()
    steps = env.run_until_idle()
    # The create's own answer shows the operation pending: the pass waits as before,
    # without observing again (the cloud's answer is taken, not a poll of it).
    assert steps[0].after == "creating" and steps[0].result.reason == "Waiting"
    assert [s.after for s in steps][-1] == "ready" and len(steps) == 3
    assert writes(env) == {"object": 2, "status": 3, "secret": 3, "event": 2}


def test_without_the_flag_the_create_answered_available_takes_one_pass() -> None:
    """The kind as shipped needs no flag: the cloud's answer says the instance is available."""
    cloud = SimCloud(seed=1, create_polls=0)
    env = Environment([(DatabaseInstance, DatabaseConnector(cloud))])
    env.provider_config()
    env.apply(database_manifest("db"))
    env.api.reset_stats()
    steps = env.run_until_idle()
    assert [s.after for s in steps] == ["ready"]
    assert writes(env) == {"object": 2, "status": 1, "secret": 2, "event": 1}
    assert cloud.count("describe") == 1  # the observation before the create, no other


def _synchronous_cloud_target(kind: Any) -> Any:
    def system() -> ExternalSystem:
        cloud = SimCloud(seed=0, create_polls=0, modify_polls=0, delete_polls=0)
        return ExternalSystem(DatabaseConnector(cloud), lambda: set(cloud.instances()),
                              cloud.creations)

    return attrs.evolve(simcloud_target(kind), system=system)


def test_crash_safe_at_every_point_with_fresh_and_stale_reads() -> None:
    target = _synchronous_cloud_target(SYNC)
    fresh = explore(target)
    assert fresh.counterexamples == []
    stale = explore(target, variants=(*VARIANTS, CONCURRENT), stale=1)
    assert stale.counterexamples == []
    # The kind as shipped, whose cloud answers the create available, does the same work.
    shipped = explore(_synchronous_cloud_target(DatabaseInstance))
    assert shipped.counterexamples == []
    assert shipped.points == fresh.points
    assert sum("record_event" in op for op in fresh.operations) == sum(
        "record_event" in op for op in shipped.operations)


# ------------------------------------------------------------- the pure decision

def _create_decision() -> tuple[Any, Any]:
    from lifecycle.core.decide import Facts, decide

    facts = Facts(state="unclaimed", observation=Observation.absent())
    return facts, decide(DatabaseInstance.machine, facts)


def test_only_an_available_resource_moves_the_pass_on() -> None:
    facts, decision = _create_decision()
    assert created(decision, facts)
    machine = DatabaseInstance.machine
    moved = after_create(machine, facts, decision, Observation(exists=True))
    assert moved is not None
    after, following = moved
    assert after.state == "creating"
    assert (following.transition.source, following.transition.target) == ("creating", "ready")
    assert after_create(machine, facts, decision, Observation.absent()) is None
    pending = Observation(exists=True, status=ProviderStatus.PENDING, message="building")
    assert after_create(machine, facts, decision, pending) is None
    assert after_create(machine, facts, decision, "not an observation") is None
    drifted = Observation(exists=True, up_to_date=False)  # would act again: update
    assert after_create(machine, facts, decision, drifted) is None


def test_a_pass_that_did_not_create_is_not_followed() -> None:
    from lifecycle.core.decide import Facts, decide

    facts = Facts(state="creating", observation=Observation(exists=True))
    assert not created(decide(DatabaseInstance.machine, facts), facts)  # available, no create
    facts, decision = _create_decision()
    failed = decision.failing(ExternalError("boom", reason="ProviderError"), "create")
    assert not created(failed, facts)
    assert not created(decision, attrs.evolve(facts, deleting=True))


def test_the_two_transitions_of_the_pass_are_recorded_as_one_event() -> None:
    from datetime import UTC, datetime

    from lifecycle.core.plan import Plan, conclude, passage
    from lifecycle.core.status import Settled

    facts, decision = _create_decision()
    machine = DatabaseInstance.machine
    now = datetime(2026, 1, 1, tzinfo=UTC)
    made = conclude(machine, {}, facts, decision, now=now, key="k")
    after, following = after_create(machine, facts, decision, Observation(exists=True))
    then = conclude(machine, made.settled.status, after, following, now=now, key="k")
    assert made.settled.events == (
        ("Normal", "Create", "unclaimed -> creating: creating the external resource"),)
    assert passage(made, then) == (
        ("Normal", "Available",
         "unclaimed -> creating -> ready: creating the external resource; Available"),)
    # Other Events of either step are kept, in order, around the joined one.
    stuck = ("Warning", "Stuck", "in creating for too long")
    with_stuck = attrs.evolve(then, settled=Settled(then.settled.status,
                                                    (stuck, *then.settled.events)))
    assert passage(made, with_stuck) == (
        ("Normal", "Available",
         "unclaimed -> creating -> ready: creating the external resource; Available"),
        stuck)
    # A step without its transition Event (a kind's own status builder) is not joined.
    quiet = attrs.evolve(then, settled=Settled(then.settled.status, (stuck,)))
    assert passage(made, quiet) == (*made.settled.events, stuck)
    nothing = Plan(then.source, then.choice, None, then.settled, then.result)
    assert passage(made, nothing) == made.settled.events + then.settled.events
