"""The dry-run plan: the pure path of one reconcile, and the hot-path benchmark's subject."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from helpers import KIND, make, ready

from benchmarks import hot_path
from lifecycle.core.errors import ExternalError
from lifecycle.core.kind import FINALIZER, OPERATION, PAUSED
from lifecycle.core.plan import plan, restore
from lifecycle.core.values import Observation, ProviderStatus, ResultKind
from lifecycle.machines.database import DatabaseInstance
from lifecycle.machines.managed import ManagedResourceMachine as M
from lifecycle.providers.simcloud.scenarios.harness import database_manifest

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def obj(state: object = None, deleting: bool = False) -> dict:
    meta = {"name": "x", "uid": "u", "generation": 1, "finalizers": [FINALIZER]}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta, "status": {"state": state} if state is not None else {}}


@pytest.mark.parametrize(
    ("state", "observation", "error", "deleting", "target", "result", "expected_ready"),
    [
        (None, Observation.absent(), None, False, "creating", ResultKind.REQUEUE_AFTER,
         ("False", "Creating")),
        ("creating", Observation(exists=True), None, False, "ready", ResultKind.REQUEUE_AFTER,
         ("True", "Available")),
        ("ready", Observation(exists=True, up_to_date=False), None, False, "updating",
         ResultKind.REQUEUE_AFTER, ("False", "Updating")),
        # The stored status never observed generation 1 and observe failed: Ready is
        # unknown; the state that reports Ready is held (no fail edge).
        ("ready", None, ExternalError("down"), False, "ready", ResultKind.BACKOFF,
         ("Unknown", "GenerationNotObserved")),
        ("ready", Observation(exists=True, status=ProviderStatus.FAILED), None, False, "failed",
         ResultKind.BACKOFF, ("False", "Unavailable")),
        ("ready", Observation(exists=True), None, True, "deleting", ResultKind.REQUEUE_AFTER,
         ("False", "Deleting")),
        ("deleting", Observation.absent(), None, True, "deleted", ResultKind.DONE,
         ("False", "Deleted")),
        ("garbage", Observation(exists=True), None, False, "ready", ResultKind.REQUEUE_AFTER,
         ("True", "Available")),
    ],
)
def test_plan(state, observation, error, deleting, target, result, expected_ready) -> None:
    p = plan(M, obj(state, deleting), observation=observation, error=error, now=NOW)
    assert p.target == target
    assert p.result.kind is result
    assert p.settled.status["state"] == target
    found = next(c for c in p.settled.status["conditions"] if c["type"] == "Ready")
    assert (found["status"], found["reason"]) == expected_ready


def test_plan_of_an_observed_generation_reports_ready_from_the_target_state() -> None:
    stored = obj("creating")
    stored["status"]["observedGeneration"] = 1
    p = plan(M, stored, error=ExternalError("down"), now=NOW)
    assert p.target == "failed"
    found = next(c for c in p.settled.status["conditions"] if c["type"] == "Ready")
    assert (found["status"], found["reason"], found["message"]) == ("False", "Unavailable", "down")


def test_restore_repairs_corrupt_states() -> None:
    assert restore(M, {"state": "ready"}) == "ready"
    for bad in ({"state": "nope"}, {"state": 3}, {"state": "deleted"}, "not-a-dict", None):
        assert restore(M, bad) == "unclaimed"


def test_hot_path_benchmark_measures_all_three() -> None:
    # Figures are reported by the benchmark, never asserted here; this only
    # checks the benchmark runs and reports its keys.
    report = hot_path.run(repeat=1)
    for key in ("hot_path_us", "statemachine_build_send_us", "hot_path_speedup"):
        assert report[key] > 0
    assert hot_path.hot_path().target == "ready"
    assert hot_path.statemachine_build_and_send().current_state_value == "ready"


def test_plan_command_explains_the_next_reconcile(tmp_path, capsys) -> None:
    from lifecycle.cli import main

    dump = tmp_path / "orders.yaml"
    dump.write_text(
        "apiVersion: db.lifecycle.dev/v1alpha1\nkind: DatabaseInstance\n"
        "metadata: {name: orders, uid: u-1, generation: 3, "
        "finalizers: [lifecycle.dev/finalizer]}\n"
        "spec: {forProvider: {engine: postgres}}\nstatus: {state: ready}\n")
    assert main(["plan", "--object", str(dump), "--observed", "drifted"]) == 0
    out = capsys.readouterr().out
    assert "event:      update (UpdateRequested" in out
    assert "transition: ready -> updating" in out and "update_external" in out
    assert main(["plan", "--object", str(dump), "--error", "provider down"]) == 0
    out = capsys.readouterr().out
    assert "event:      none (ExternalError: provider down)" in out
    assert "transition:" not in out and "result:     backoff" in out
    dump.write_text(dump.read_text().replace(
        "generation: 3,", "generation: 3, deletionTimestamp: '2026-01-01T00:00:00Z',"))
    assert main(["plan", "--object", str(dump), "--observed", "absent"]) == 0
    out = capsys.readouterr().out
    assert "ready -> deleted" in out and "event:      gone" in out
    dump.write_text(dump.read_text().replace("lifecycle.dev/finalizer", "someone-else"))
    assert main(["plan", "--object", str(dump)]) == 0
    assert "event:      none (NotClaimed" in capsys.readouterr().out


def test_plan_command_errors_are_one_line(tmp_path, capsys) -> None:
    from lifecycle.cli import main

    assert main(["plan", "--object", str(tmp_path / "missing.yaml")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot read" in err
    dump = tmp_path / "x.yaml"
    dump.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
    assert main(["plan", "--object", str(dump)]) == 2
    assert "no bundled kind" in capsys.readouterr().err


def test_plan_reads_a_malformed_generation_as_the_reconciler_does() -> None:
    broken = obj("ready")
    broken["metadata"]["generation"] = "7"
    p = plan(M, broken, observation=Observation(exists=True), now=NOW)
    assert p.settled.status["observedGeneration"] == 1


def test_plan_predicts_what_the_reconciler_writes() -> None:
    # The dry run and the reconciler share one decision and one conclusion:
    # the plan of a drifted object is exactly what the next pass does.
    env, _ = make()
    ready(env, storage_gb=20)
    env.apply(database_manifest("db", storage_gb=40))
    stored = env.get(KIND, "db")
    p = plan(DatabaseInstance.machine, stored,
             observation=Observation(exists=True, up_to_date=False), now=env.clock.now())
    env.reconcile(KIND, "db")
    after = env.get(KIND, "db")["status"]
    assert p.target == after["state"] == "updating"
    for type_ in ("Ready", "Synced", "Updating"):
        planned = next(c for c in p.settled.status["conditions"] if c["type"] == type_)
        written = next(c for c in after["conditions"] if c["type"] == type_)
        assert (planned["status"], planned["reason"]) == (written["status"], written["reason"])
    assert p.settled.status["history"][-1] == after["history"][-1]


def test_held_and_stopped_passes_conclude_without_an_event() -> None:
    paused = obj("ready")
    paused["metadata"]["annotations"] = {PAUSED: "true"}
    p = plan(M, paused, observation=Observation(exists=True), now=NOW)
    assert (p.choice.event, p.result.reason) == (None, "Paused")
    synced = next(c for c in p.settled.status["conditions"] if c["type"] == "Synced")
    assert synced["reason"] == "ReconcilePaused" and PAUSED in synced["message"]
    ignored = obj("ready")
    ignored["metadata"]["annotations"] = {OPERATION: "ignore"}
    p = plan(M, ignored, observation=Observation(exists=True), now=NOW)
    assert (p.choice.event, p.result.reason, p.settled.status) == (None, "Ignored",
                                                                   {"state": "ready"})


@pytest.mark.parametrize("garbage", ["x", "2026-13-45T99:00:00Z", 7, None])
def test_a_corrupt_state_time_is_restarted_not_kept(garbage: object) -> None:
    from lifecycle.machines.postgres import RoleMachine

    stored = obj("creating")
    stored["status"].update(stateSince=garbage, operationSince=garbage)
    pending = Observation(exists=True, status=ProviderStatus.PENDING)
    p = plan(RoleMachine, stored, observation=pending, now=NOW)
    assert p.target == "creating"
    assert p.settled.status["stateSince"] == "2026-01-01T00:00:00Z"
    assert p.settled.status["operationSince"] == "2026-01-01T00:00:00Z"


def test_a_valid_state_time_is_kept_and_counts_towards_stuck() -> None:
    from lifecycle.machines.postgres import RoleMachine

    stored = obj("creating")
    stored["status"].update(stateSince="2025-12-31T23:00:00Z",
                            operationSince="2025-12-31T23:00:00Z")
    pending = Observation(exists=True, status=ProviderStatus.PENDING)
    p = plan(RoleMachine, stored, observation=pending, now=NOW)
    assert p.settled.status["stateSince"] == "2025-12-31T23:00:00Z"
    stuck = {c["type"]: c for c in p.settled.status["conditions"]}["Stuck"]
    assert (stuck["status"], stuck["reason"]) == ("True", "StuckInCreating")


def test_plan_command_prints_one_json_document(tmp_path, capsys) -> None:
    import json

    from lifecycle.cli import main

    dump = tmp_path / "orders.yaml"
    dump.write_text(
        "apiVersion: db.lifecycle.dev/v1alpha1\nkind: DatabaseInstance\n"
        "metadata: {name: orders, uid: u-1, generation: 3, "
        "finalizers: [lifecycle.dev/finalizer]}\n"
        "spec: {forProvider: {engine: postgres}}\nstatus: {state: ready}\n")
    assert main(["plan", "--object", str(dump), "--observed", "drifted", "-o", "json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["state"] == "ready" and document["target"] == "updating"
    assert document["decision"]["event"] == "update"
    assert document["decision"]["reason"] == "UpdateRequested"
    assert document["transition"] == {"source": "ready", "event": "update",
                                      "target": "updating", "guards": [],
                                      "actions": ["update_external"]}
    ready = next(c for c in document["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "Updating")
    assert document["requeue"]["kind"] == "requeue-after" and document["requeue"]["after"] > 0
    assert [e["reason"] for e in document["events"]] == ["Update"]
    # The same dry run, the machine named by the kind, with an error instead.
    assert main(["plan", "--object", str(dump), "--machine", "DatabaseInstance",
                 "--error", "provider down", "-o", "json"]) == 0
    failed = json.loads(capsys.readouterr().out)
    assert failed["decision"]["event"] is None and failed["transition"] is None
    assert failed["decision"]["reason"] == "ExternalError"
    assert failed["requeue"]["kind"] == "backoff" and failed["target"] == "ready"
