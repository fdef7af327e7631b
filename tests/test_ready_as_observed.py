"""Ready reports the external resource; a refused spec change shows in Synced only.

A change the provider refuses (terminal: an impossible value, a parameter it cannot
change, a policy's refusal of the update) leaves the external resource as it was. When
the pass had observed it existing and available, Ready stays True (as observed) and
Synced is False naming the refusal; the Failed condition carries its reason. A failed
create, a refused update of a resource that is not available, and an error that is not
terminal keep the rules they had. The pure rules are checked on the core functions;
one end-to-end run on the simulated cloud shows the same through the harness.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from helpers import KIND

from lifecycle.core.decide import decide, gate
from lifecycle.core.errors import ExternalError, HandledError, TerminalError
from lifecycle.core.kind import FINALIZER
from lifecycle.core.plan import Plan, conclude, gather
from lifecycle.core.status import refused_change
from lifecycle.core.values import Observation, ProviderStatus, ResultKind
from lifecycle.machines.managed import ManagedResourceMachine as M
from lifecycle.providers.simcloud.scenarios.harness import database_manifest

T0 = datetime(2026, 1, 1, tzinfo=UTC)
DRIFTED = Observation(exists=True, up_to_date=False)
REFUSED = TerminalError("version '99' is not offered for engine postgres",
                        reason="InvalidParameter")


def obj(status: dict[str, Any] | None, generation: int = 1) -> dict[str, Any]:
    meta = {"name": "x", "uid": "u", "generation": generation, "finalizers": [FINALIZER]}
    return {"metadata": meta, "status": status or {}}


def run(status: dict[str, Any] | None, observation: Observation | None, *,
        error: HandledError | None = None, generation: int = 1, seconds: float = 0.0,
        action_error: HandledError | None = None) -> Plan:
    """One pass on the pure path: gate, gather, decide; ``action_error`` is what the
    decided transition's action raised (as the reconciler's runner records it)."""
    o = obj(status, generation)
    g = gate(M, o, {})
    old = o["status"]
    facts = gather(g, old, observation=observation, error=error)
    decision = decide(M, facts)
    if action_error is not None:
        assert decision.actions, decision
        decision = decision.failing(action_error, decision.choice.event)
    return conclude(M, old, facts, decision, now=T0 + timedelta(seconds=seconds), key="u",
                    notes=g.notes)


def conditions(p: Plan) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in p.settled.status["conditions"]}


def ready_status() -> dict[str, Any]:
    created = run(None, Observation.absent())
    up = run(created.settled.status, Observation(exists=True), seconds=10)
    assert up.target == "ready"
    assert conditions(up)["Ready"]["status"] == "True"
    return up.settled.status


# ---------------------------------------------------------------- pure rules
def test_a_refused_update_of_an_available_resource_keeps_ready_true() -> None:
    p = run(ready_status(), DRIFTED, generation=2, seconds=20, action_error=REFUSED)

    got = conditions(p)
    assert got["Ready"]["status"] == "True" and got["Ready"]["reason"] == "Available"
    assert got["Ready"]["observedGeneration"] == 2
    assert got["Synced"]["status"] == "False"
    assert "InvalidParameter" in got["Synced"]["message"]
    assert REFUSED.message in got["Synced"]["message"]
    assert got["Failed"]["status"] == "True" and got["Failed"]["reason"] == "InvalidParameter"
    # Terminal: the failure is recorded and nothing is retried until the spec changes.
    assert p.target == "failed"
    assert p.settled.status["failure"]["reason"] == "InvalidParameter"
    assert p.result.kind is ResultKind.DONE
    assert p.settled.status["phase"] == "Progressing"  # Synced False is not healthy
    assert gate(M, obj(p.settled.status, 2), {}).stop == "TerminalError"


def test_a_forced_retry_from_failed_still_reports_the_resource() -> None:
    refused = run(ready_status(), DRIFTED, generation=2, seconds=20, action_error=REFUSED)
    # Refused again from the failed state (a later pass of a new generation, say):
    # the resource is still there and usable, so Ready stays True.
    again = run(refused.settled.status, DRIFTED, generation=3, seconds=30,
                action_error=REFUSED)
    assert again.source == "failed"
    assert conditions(again)["Ready"]["status"] == "True"
    assert conditions(again)["Synced"]["status"] == "False"


def test_the_refusal_is_reported_as_ready_even_from_a_status_without_ready() -> None:
    # A lost status (restored from nothing): Ready True with the machine's declared reason.
    p = run({"state": "ready"}, DRIFTED, seconds=5, action_error=REFUSED)
    assert conditions(p)["Ready"]["status"] == "True"
    assert conditions(p)["Ready"]["reason"] == "Available"


@pytest.mark.parametrize("observation", [
    Observation(exists=True, up_to_date=False, status=ProviderStatus.PENDING),
    Observation(exists=True, up_to_date=False, status=ProviderStatus.FAILED),
])
def test_a_resource_not_available_is_not_reported_ready(observation: Observation) -> None:
    status = ready_status()
    o = obj(status, 2)
    g = gate(M, o, {})
    facts = gather(g, status, observation=observation)
    decision = decide(M, facts).failing(REFUSED, "update")
    assert not refused_change(facts, decision)
    p = conclude(M, status, facts, decision, now=T0 + timedelta(seconds=20), key="u")
    assert conditions(p)["Ready"]["status"] == "False"


def test_a_retryable_update_error_keeps_its_rules() -> None:
    busy = ExternalError("instance is modifying; retry later", reason="ProviderBusy")
    p = run(ready_status(), DRIFTED, generation=2, seconds=20, action_error=busy)
    assert conditions(p)["Ready"]["status"] == "False"
    assert p.result.kind is ResultKind.BACKOFF


def test_a_refused_create_is_not_ready() -> None:
    p = run(None, Observation.absent(), action_error=REFUSED)
    assert conditions(p)["Ready"]["status"] == "False"
    assert conditions(p)["Synced"]["status"] == "False"
    assert p.target == "failed"


def test_a_terminal_observe_error_is_not_a_refused_change() -> None:
    p = run(ready_status(), None, generation=2, seconds=20, error=REFUSED)
    assert conditions(p)["Ready"]["status"] != "True"


def test_the_rule_needs_an_update_an_observation_and_a_terminal_error() -> None:
    status = ready_status()
    g = gate(M, obj(status, 2), {})
    facts = gather(g, status, observation=DRIFTED)
    decision = decide(M, facts)
    assert decision.choice.event == "update"
    assert not refused_change(facts, decision)  # no error: nothing refused
    assert refused_change(facts, decision.failing(REFUSED, "update"))
    assert not refused_change(facts, decision.failing(
        ExternalError("x", reason="ProviderBusy"), "update"))
    deleting = gather(gate(M, {**obj(status, 2), "metadata": {
        **obj(status, 2)["metadata"], "deletionTimestamp": "2026-01-01T00:00:00Z"}}, {}),
        status, observation=DRIFTED)
    assert not refused_change(deleting, decide(M, deleting).failing(REFUSED, "delete"))


# ---------------------------------------------------------------- end to end
def test_an_impossible_version_change_leaves_ready_true(lifecycle_env: Any) -> None:
    env = lifecycle_env()
    env.apply(database_manifest("db", version="15"))
    env.run_until_idle()
    assert env.state(KIND, "db") == "ready"

    env.apply(database_manifest("db", version="99"))  # not offered by the cloud
    env.run_until_idle()

    obj_ = env.get(KIND, "db")
    ready = env.condition(KIND, "db", "Ready")
    synced = env.condition(KIND, "db", "Synced")
    failed = env.condition(KIND, "db", "Failed")
    assert ready is not None and ready.status.value == "True", ready
    assert ready.observed_generation == obj_["metadata"]["generation"]
    assert synced is not None and synced.status.value == "False", synced
    assert "InvalidParameter" in synced.message and "99" in synced.message
    assert failed is not None and failed.reason == "InvalidParameter"
    assert ("DatabaseInstance", "default", "db") not in env.pending()  # terminal

    # Set back to a possible value, it is Synced again.
    env.apply(database_manifest("db", version="16"))
    env.run_until_idle()
    assert env.state(KIND, "db") == "ready"
    synced = env.condition(KIND, "db", "Synced")
    assert synced is not None and synced.status.value == "True"


@pytest.mark.postgres
def test_a_refused_encoding_change_leaves_the_database_ready(env: Any, server: Any) -> None:
    """The issue's second example on the real server (``env``: both admin kinds): a
    Database created UTF8 asked for LATIN1 is refused (``ImmutableField``) and stays the
    UTF8 database it is, Ready True."""
    from lifecycle.providers.postgres.scenarios.testing import manifest

    env.apply(manifest("Database", "enc"))
    env.run_until_idle()
    assert env.state("Database", "enc") == "ready"
    env.apply(manifest("Database", "enc", encoding="LATIN1"))
    env.run_until_idle()

    failed = env.condition("Database", "enc", "Failed")
    assert failed is not None and failed.reason == "ImmutableField", failed
    synced = env.condition("Database", "enc", "Synced")
    assert synced is not None and synced.status.value == "False"
    assert "ImmutableField" in synced.message and "cannot change" in synced.message
    ready = env.condition("Database", "enc", "Ready")
    assert ready is not None and ready.status.value == "True", ready
    env.delete("Database", "enc")
    env.run_until_idle()
    assert not env.exists("Database", "enc")
