"""The generic reconciler through the harness: every step of one pass, in order.

Each test drives the bundled DatabaseInstance kind on the embedded cluster and
the simulated cloud, and asserts state, conditions, result and cloud calls.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from helpers import KIND, cond, external, make, ready

from lifecycle.core.contract import ManagedResource
from lifecycle.core.errors import UnhandledError
from lifecycle.core.kind import (
    CONNECTION_SECRET_LABEL,
    EXTERNAL_NAME,
    FINALIZER,
    INTENT,
    OPERATION,
    OWNER,
    PAUSED,
    PROVIDER_CONFIG_API,
    PROVIDER_CONFIG_KIND,
    RECONCILE_POLICY,
    connection_secret_ref,
)
from lifecycle.core.values import Creation, Intent, Observation, ResultKind
from lifecycle.kube.errors import Conflict, Invalid, ServerError, TooManyRequests
from lifecycle.providers.simcloud import CloudThrottled, CloudUnavailable, SimCloud
from lifecycle.providers.simcloud.scenarios.harness import database_manifest, simulated_environment
from lifecycle.runtime.effects import Effects, next_intent
from lifecycle.testing import Environment


# ---------------------------------------------------------------- happy path
def test_create_to_ready_with_conditions_secret_and_calls() -> None:
    env, cloud = make()
    env.apply(database_manifest("db"))
    first = env.reconcile(KIND, "db")
    assert (first.before, first.after) == (None, "creating")
    assert first.result.kind is ResultKind.REQUEUE_AFTER
    assert first.result.after == 2.0  # the kind's wait interval for creating
    env.run_until_idle()
    obj = env.get(KIND, "db")
    assert env.state(KIND, "db") == "ready"
    assert cond(env, "Ready") == ("True", "Available")
    assert cond(env, "Synced") == ("True", "ReconcileSuccess")
    assert cond(env, "Creating")[0] == "False"
    assert obj["status"]["phase"] == "Ready"
    assert obj["status"]["observedGeneration"] == obj["metadata"]["generation"]
    assert env.history(KIND, "db") == [
        ("unclaimed", "creating", "create"),
        ("creating", "ready", "available"),
    ]
    name = external(env)
    assert cloud.creations(name) == 1
    assert cloud.count("create") == 1
    secret = env.secret("db-conn")
    assert secret["password"] == cloud.password_of(name)
    assert secret["endpoint"].startswith(name)
    assert sorted(e["reason"] for e in env.events("db")) == ["Available", "Create"]


def test_ready_and_in_sync_polls_without_writing() -> None:
    env, cloud = make()
    ready(env)
    writes = env.api.writes()
    step = env.reconcile(KIND, "db")
    assert step.result.kind is ResultKind.REQUEUE_AFTER
    assert 27.0 <= step.result.after <= 33.0  # poll 30 s with 10% jitter
    assert env.api.writes() == writes  # status, secret and object unchanged: nothing written
    assert cloud.count("create") == 1 and cloud.count("modify") == 0


# ------------------------------------------------------------ step 1: get
def test_not_found_is_done_without_calls() -> None:
    env, cloud = make()
    step = env.reconcile(KIND, "missing")
    assert step.result.kind is ResultKind.DONE
    assert cloud.calls == []


def test_api_error_on_get_is_unhandled() -> None:
    env, _ = make()
    env.apply(database_manifest("db"))
    env.api.faults.add("get", KIND, error=ServerError, times=1)
    with pytest.raises(UnhandledError):
        env.reconcilers[KIND].reconcile("default", "db")


def test_api_throttling_backs_off_with_retry_after() -> None:
    env, _ = make()
    env.apply(database_manifest("db"))
    env.api.faults.add("get", KIND, error=TooManyRequests("slow down", retry_after=12.0), times=1)
    result = env.reconcilers[KIND].reconcile("default", "db")
    assert result.kind is ResultKind.BACKOFF
    assert result.after == 12.0


# ------------------------------------------------- step 2: operation annotation
def test_ignore_writes_nothing() -> None:
    env, cloud = make()
    env.apply(database_manifest("db", annotations={OPERATION: "ignore"}))
    rv = env.get(KIND, "db")["metadata"]["resourceVersion"]
    step = env.reconcile(KIND, "db")
    assert step.result.kind is ResultKind.DONE
    obj = env.get(KIND, "db")
    assert obj["metadata"]["resourceVersion"] == rv
    assert "status" not in obj or not obj["status"]
    assert cloud.calls == []


def test_reconcile_annotation_is_removed_and_forces_writes() -> None:
    env, _ = make()
    ready(env)
    status_writes = env.api.stats["replace_status"]
    env.apply(
        {
            **database_manifest("db"),
            "metadata": {"name": "db", "annotations": {OPERATION: "reconcile"}},
        }
    )
    env.reconcile(KIND, "db")
    obj = env.get(KIND, "db")
    assert OPERATION not in obj["metadata"]["annotations"]
    assert env.api.stats["replace_status"] == status_writes + 1  # shortcut forced to run


def test_a_forced_pass_rewrites_the_connection_secret_and_an_idle_one_does_not() -> None:
    env, _ = make()
    ready(env)
    namespace, name = connection_secret_ref(env.get(KIND, "db"))
    secret = env.api.get("v1", "Secret", namespace, name)
    data = secret["data"]
    secret["metadata"]["labels"] = {"kept": "by-someone"}  # the label the cache selects on
    env.api.replace(secret)
    env.clock.advance(120)
    env.reconcile(KIND, "db")  # an unforced poll: the data is unchanged, nothing is written
    assert env.api.get("v1", "Secret", namespace, name)["metadata"]["labels"] == {
        "kept": "by-someone"}
    env.apply({**database_manifest("db"),
               "metadata": {"name": "db", "annotations": {OPERATION: "reconcile"}}})
    env.reconcile(KIND, "db")
    repaired = env.api.get("v1", "Secret", namespace, name)
    assert repaired["metadata"]["labels"] == {"kept": "by-someone",
                                              CONNECTION_SECRET_LABEL: "true"}
    assert repaired["data"] == data


def test_unknown_operation_value_is_reported_and_ignored() -> None:
    env, _ = make()
    env.apply(database_manifest("db", annotations={OPERATION: "explode"}))
    env.run_until_idle()
    assert env.state(KIND, "db") == "ready"
    status, reason = cond(env, "ConfigValid")
    assert (status, reason) == ("False", "UnknownOperation")
    assert "explode" in env.condition(KIND, "db", "ConfigValid").message
    assert env.get(KIND, "db")["status"]["phase"] == "Progressing"


# ------------------------------------------------ step 3: ownership, policy
def test_namespace_owned_by_other_operator_is_skipped() -> None:
    env, cloud = make()
    env.namespace("team-a", {OWNER: "other-operator"})
    env.apply(database_manifest("db", namespace="team-a"))
    rv = env.get(KIND, "db", "team-a")["metadata"]["resourceVersion"]
    step = env.reconcile(KIND, "db", "team-a")
    assert step.result.kind is ResultKind.DONE
    assert env.get(KIND, "db", "team-a")["metadata"]["resourceVersion"] == rv
    assert cloud.calls == []
    assert [(e["type"], e["reason"]) for e in env.events("db")] == [("Warning", "NotOwned")]


@pytest.mark.parametrize(
    ("object_policy", "namespace_policy", "creates", "note"),
    [
        (None, None, 1, None),
        ("skip", None, 0, None),
        (None, "skip", 0, None),
        ("manage", "skip", 1, None),  # the object annotation wins
        ("sometimes", None, 1, "object annotation"),  # unknown: operator default, said so
        (None, "whenever", 1, "namespace annotation"),
    ],
)
def test_reconcile_policy_resolution(object_policy, namespace_policy, creates, note) -> None:
    env, cloud = make()
    env.namespace("team", {RECONCILE_POLICY: namespace_policy} if namespace_policy else {})
    annotations = {RECONCILE_POLICY: object_policy} if object_policy else {}
    env.apply(database_manifest("db", namespace="team", annotations=annotations))
    env.run_until_idle()
    assert cloud.count("create") == creates
    config = env.condition(KIND, "db", "ConfigValid", "team")
    if note is None:
        assert config is None or config.status.value == "True"
    else:
        assert config.reason == "UnknownReconcilePolicy"
        assert note in config.message and "'manage'" in config.message


def test_skip_policy_on_absent_resource_reports_and_polls() -> None:
    env, cloud = make()
    env.apply(database_manifest("db", annotations={RECONCILE_POLICY: "skip"}))
    env.reconcile(KIND, "db")
    step = env.reconcile(KIND, "db")
    assert step.result.kind is ResultKind.REQUEUE_AFTER
    assert cloud.count("create") == 0
    assert cond(env, "Synced") == ("True", "ReconcileSkipped")


def test_skip_policy_does_not_update_drift() -> None:
    env, cloud = make()
    ready(env)
    env.apply(
        {
            **database_manifest("db", storage_gb=50),
            "metadata": {"name": "db", "annotations": {RECONCILE_POLICY: "skip"}},
        }
    )
    env.run_until_idle()
    assert cloud.count("modify") == 0
    assert cond(env, "Synced") == ("True", "ReconcileSkipped")


def test_pause_stops_external_calls() -> None:
    env, cloud = make()
    env.apply(database_manifest("db", annotations={PAUSED: "true"}))
    step = env.reconcile(KIND, "db")
    assert step.result.kind is ResultKind.DONE
    assert cloud.calls == []
    assert cond(env, "Synced") == ("False", "ReconcilePaused")
    assert cond(env, "Ready") == ("Unknown", "ReconcilePaused")  # unset conditions start Unknown


# ------------------------------------------- step 4: deletion without delete
@pytest.mark.parametrize(
    ("annotations", "deletion_policy"),
    [({RECONCILE_POLICY: "detach-on-delete"}, None), ({}, "Orphan")],
)
def test_deletion_that_orphans(annotations, deletion_policy) -> None:
    env, cloud = make()
    env.apply(database_manifest("db", annotations=annotations, deletion_policy=deletion_policy))
    env.run_until_idle()
    name = external(env)
    env.delete(KIND, "db")
    env.run_until_idle()
    assert not env.exists(KIND, "db")
    assert cloud.count("delete") == 0
    assert name in cloud.instances()


# ------------------------------------------------- step 5: take ownership
def test_finalizer_and_name_are_acquired_before_any_mutating_external_call() -> None:
    # Observing changes nothing and may come first; the claim is committed, in the
    # same write as the pending journal entry, before the create.
    env, cloud = make()
    env.apply(database_manifest("db"))
    seen: list[list[str]] = []
    real_replace = env.api.replace

    def spy(obj: dict[str, Any]) -> dict[str, Any]:
        meta = obj["metadata"]
        if FINALIZER in (meta.get("finalizers") or []) and not seen:
            assert (meta.get("annotations") or {}).get(EXTERNAL_NAME)
            assert json.loads(meta["annotations"][INTENT])["outcome"] == "pending"
            seen.append([c.operation for c in cloud.calls])
        return real_replace(obj)

    env.api.replace = spy  # type: ignore[method-assign]
    env.reconcile(KIND, "db")
    assert seen == [["describe"]]
    assert [c.operation for c in cloud.calls] == ["describe", "create"]
    meta = env.get(KIND, "db")["metadata"]
    assert FINALIZER in meta["finalizers"]
    assert meta["annotations"][EXTERNAL_NAME].startswith("db-")


def test_user_chosen_external_name_is_kept() -> None:
    env, cloud = make()
    env.apply(database_manifest("db", annotations={EXTERNAL_NAME: "legacy-db"}))
    env.run_until_idle()
    assert "legacy-db" in cloud.instances()


def test_conflict_on_object_write_is_retried_from_fresh_read() -> None:
    env, _ = make()
    env.apply(database_manifest("db"))
    env.api.faults.add("replace", KIND, error=Conflict, times=2)
    env.run_until_idle()
    assert env.state(KIND, "db") == "ready"
    assert FINALIZER in env.get(KIND, "db")["metadata"]["finalizers"]


def test_conflict_on_status_write_is_retried() -> None:
    env, _ = make()
    env.apply(database_manifest("db"))
    env.api.faults.add("replace_status", KIND, error=Conflict, times=3)
    env.run_until_idle()
    assert env.state(KIND, "db") == "ready"


# ------------------------------------------------------- step 6: connect
@pytest.mark.parametrize(
    ("setup", "reason"),
    [
        ("no-config", "ProviderConfigMissing"),
        ("no-secret", "CredentialsMissing"),
        ("wrong-keys", "CredentialsMissing"),
        ("bad-secret", "InvalidCredentials"),
    ],
)
def test_connect_failures_are_handled(setup: str, reason: str) -> None:
    cloud = SimCloud(seed=1, credentials={"AKIDEXAMPLE": "s3cr3t"})
    env = Environment(
        [
            (
                __import__("lifecycle.machines.database").machines.database.DatabaseInstance,
                __import__("lifecycle.providers.simcloud").providers.simcloud.DatabaseConnector(cloud),
            )
        ]
    )
    if setup == "no-secret":
        env.provider_config()
        env.api.delete("v1", "Secret", "default", "default-credentials")
    elif setup == "wrong-keys":
        env.provider_config(credentials={"user": "x"})
    elif setup == "bad-secret":
        env.provider_config(credentials={"accessKeyId": "AKIDEXAMPLE", "secretAccessKey": "no"})
    env.apply(database_manifest("db"))
    step = env.reconcile(KIND, "db")
    assert step.after == "failed"
    assert step.result.kind is ResultKind.BACKOFF
    assert cond(env, "Failed") == ("True", reason)
    assert cond(env, "Synced")[1] == "ReconcileError"
    failure = env.get(KIND, "db")["status"]["failure"]
    assert failure == {"operation": "connect", "reason": reason, "severity": "Retryable",
                       "generation": 1}
    assert cloud.count("create") == 0
    for event in env.events("db"):
        assert "s3cr3t" not in event["message"] and event["message"] != "no"


# ------------------------------------------------ step 7: observe, and errors
@pytest.mark.parametrize("operation", ["describe", "create", "modify", "delete"])
def test_provider_error_on_each_call_fails_then_recovers(operation: str) -> None:
    env, cloud = make()
    if operation in ("modify", "delete"):
        ready(env)
    else:
        env.apply(database_manifest("db"))
    cloud.fail_next(operation, CloudUnavailable("service unavailable"), times=1)
    if operation == "modify":
        env.apply(database_manifest("db", storage_gb=40, version="15"))
    elif operation == "delete":
        env.delete(KIND, "db")
    step = env.reconcile(KIND, "db")
    assert step.after == "failed", step
    assert step.result.kind is ResultKind.BACKOFF
    assert cond(env, "Failed")[0] == "True"
    assert cond(env, "Ready")[0] in ("False", "Unknown")
    expected_op = {
        "describe": "observe",
        "create": "create",
        "modify": "update",
        "delete": "delete",
    }[operation]
    assert env.get(KIND, "db")["status"]["failure"]["operation"] == expected_op
    env.run_until_idle()
    if operation == "delete":
        assert not env.exists(KIND, "db")
        assert cloud.instances() == {}
    else:
        assert env.state(KIND, "db") == "ready"
        assert cond(env, "Failed")[0] == "False"
    assert cloud.creations(external(env) if env.exists(KIND, "db") else "x") <= 1


def test_throttling_backs_off_at_least_retry_after() -> None:
    env, cloud = make()
    env.apply(database_manifest("db"))
    cloud.fail_next("describe", CloudThrottled("slow down", retry_after=17.0))
    step = env.reconcile(KIND, "db")
    assert step.result.kind is ResultKind.BACKOFF
    assert step.result.after == 17.0
    assert cond(env, "Failed") == ("True", "Throttled")


def test_terminal_error_waits_for_a_new_generation() -> None:
    env, cloud = make()
    env.apply(database_manifest("db", version="9.6"))  # a version the cloud does not offer
    step = env.reconcile(KIND, "db")
    assert step.after == "failed"
    assert step.result.kind is ResultKind.DONE
    failure = env.get(KIND, "db")["status"]["failure"]
    assert failure["severity"] == "Terminal"
    calls = len(cloud.calls)
    assert env.reconcile(KIND, "db").result.reason == "TerminalError"
    assert len(cloud.calls) == calls  # no retry at the same generation
    env.apply(
        {
            **database_manifest("db", version="9.6"),
            "metadata": {"name": "db", "annotations": {OPERATION: "reconcile"}},
        }
    )
    env.reconcile(KIND, "db")
    assert len(cloud.calls) > calls  # the reconcile annotation forces a retry
    env.apply(database_manifest("db", version="16"))
    env.run_until_idle()
    assert env.state(KIND, "db") == "ready"


def test_invalid_spec_shape_is_a_clear_condition() -> None:
    env, cloud = make()
    manifest = database_manifest("db", storage_gb="lots", colour="blue")
    # The current CRD refuses the wrong type (the unknown field alone would be pruned
    # under fieldValidation=Ignore; the harness refuses it by default, as kubectl does).
    with pytest.raises(Invalid) as refused:
        env.apply(manifest, field_validation="Ignore")
    # (the CRD has CEL rules, which a real server does not check after a type error: <nil>)
    assert [(c["field"], c["reason"]) for c in refused.value.causes] == [
        ("<nil>", "FieldValueInvalid"), ("spec.forProvider.storageGB", "FieldValueTypeInvalid")]
    assert not env.exists(KIND, "db")
    # Such an object can still be stored under an older CRD without validation.
    env.serve_lenient(KIND)
    env.apply(manifest)
    env.reconcile(KIND, "db")
    failed = env.condition(KIND, "db", "Failed")
    assert failed.reason == "InvalidSpec"
    assert "colour" in failed.message
    assert cloud.count("create") == 0


def test_lenient_serving_changes_the_stored_crd_of_that_kind_only() -> None:
    env, _ = simulated_environment(cloud=SimCloud(seed=1), lenient=(KIND,))
    crd = env.api.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", None,
                      "databaseinstances.db.lifecycle.dev")
    version = crd["spec"]["versions"][0]
    schema = version["schema"]["openAPIV3Schema"]
    assert schema["properties"]["spec"] == {"x-kubernetes-preserve-unknown-fields": True}
    assert schema["properties"]["status"] == {"x-kubernetes-preserve-unknown-fields": True}
    assert "status" in version["subresources"]
    assert {c["type"]: c["status"] for c in crd["status"]["conditions"]}["Established"] == "True"
    env.apply(database_manifest("db", storage_gb="lots", colour="blue"))
    assert env.get(KIND, "db")["spec"]["forProvider"]["colour"] == "blue"
    config = env.api.get(PROVIDER_CONFIG_API, PROVIDER_CONFIG_KIND, None, "default")
    config["spec"]["credentials"] = {"secretRef": "default-credentials"}
    with pytest.raises(Invalid):  # ProviderConfig is still served from its current CRD
        env.api.replace(config)
    with pytest.raises(KeyError):
        env.serve_lenient("NoSuchKind")


def test_provider_reports_failed_then_recovers() -> None:
    env, cloud = make()
    ready(env)
    cloud.fail_instance(external(env), "storage exhausted")
    step = env.reconcile(KIND, "db")
    assert step.after == "failed"
    assert cond(env, "Failed") == ("True", "ProviderFailed")
    assert "storage exhausted" in env.condition(KIND, "db", "Failed").message
    cloud.recover_instance(external(env))
    env.run_until_idle()
    assert env.state(KIND, "db") == "ready"


# ----------------------------------------------------- step 8: the transition
def test_pending_provider_operation_waits_without_backoff() -> None:
    env, _ = make(create_polls=5)
    env.apply(database_manifest("db"))
    results = [env.reconcile(KIND, "db").result for _ in range(4)]
    assert all(r.kind in (ResultKind.REQUEUE_AFTER, ResultKind.REQUEUE_NOW) for r in results)
    assert {r.after for r in results if r.kind is ResultKind.REQUEUE_AFTER} == {2.0}


def test_create_journal_and_password_before_create() -> None:
    env, cloud = make()
    env.apply(database_manifest("db"))
    order: list[str] = []
    real_create, real_replace = env.api.create, env.api.replace

    def create(obj: dict[str, Any]) -> dict[str, Any]:
        if obj["kind"] == "Secret":
            order.append("secret")
        return real_create(obj)

    def replace(obj: dict[str, Any]) -> dict[str, Any]:
        intent = (obj["metadata"].get("annotations") or {}).get(INTENT)
        if intent:
            order.append("intent:" + json.loads(intent)["outcome"])
        return real_replace(obj)

    env.api.create, env.api.replace = create, replace  # type: ignore[method-assign]
    original = cloud.create_instance

    def cloud_create(*args: Any, **kwargs: Any) -> Any:
        order.append("cloud-create")
        return original(*args, **kwargs)

    cloud.create_instance = cloud_create  # type: ignore[method-assign]
    env.reconcile(KIND, "db")
    # The entry stays pending after the call: the observation that shows the
    # instance closes it, with the next object write.
    assert order == ["secret", "intent:pending", "cloud-create"]
    env.reconcile(KIND, "db")
    assert order[3:] == ["intent:succeeded"]


def test_password_is_reused_after_a_lost_create() -> None:
    env, cloud = make()
    env.apply(database_manifest("db"))
    cloud.fail_next("create", CloudUnavailable("timeout"))
    env.reconcile(KIND, "db")
    password = env.secret("db-conn")["password"]
    env.run_until_idle()
    assert cloud.password_of(external(env)) == password
    assert env.secret("db-conn")["password"] == password


def test_late_init_written_back_to_spec_and_observed_in_the_same_pass() -> None:
    # Only the provider's own values were filled in, so the observation holds for
    # the generation the write produced: the status observes it, no pass is needed.
    env, _ = make(create_polls=0)
    env.apply(database_manifest("db"))
    env.reconcile(KIND, "db")  # creates; nothing observed yet
    step = env.reconcile(KIND, "db")
    obj = env.get(KIND, "db")
    assert obj["spec"]["forProvider"]["version"] == "15"
    assert obj["metadata"]["generation"] == 2
    assert obj["status"]["observedGeneration"] == 2
    assert step.after == "ready"
    assert step.result.kind is ResultKind.REQUEUE_AFTER and step.result.reason == "Poll"


def test_update_on_spec_change() -> None:
    env, cloud = make()
    ready(env)
    env.apply(database_manifest("db", storage_gb=80))
    step = env.reconcile(KIND, "db")
    assert (step.before, step.after) == ("ready", "updating")
    assert cond(env, "Ready") == ("False", "Updating")
    env.run_until_idle()
    assert env.state(KIND, "db") == "ready"
    assert cloud.instances()[external(env)]["storage_gb"] == 80
    assert ("ready", "updating", "update") in env.history(KIND, "db")


def test_drift_out_of_band_is_repaired() -> None:
    env, cloud = make()
    ready(env)
    cloud.drift(external(env), storage_gb=999)
    env.reconcile(KIND, "db")
    env.run_until_idle()
    assert cloud.instances()[external(env)]["storage_gb"] == 20


def test_vanished_while_ready_is_recreated_once() -> None:
    env, cloud = make()
    ready(env)
    name = external(env)
    cloud.remove_instance(name)
    step = env.reconcile(KIND, "db")
    assert (step.before, step.after) == ("ready", "creating")
    env.run_until_idle()
    assert env.state(KIND, "db") == "ready"
    assert cloud.creations(name) == 2  # once, then once more after it vanished
    hist = json.dumps(env.get(KIND, "db")["status"]["history"])
    assert "ExternalResourceVanished" in hist


def test_delete_removes_external_then_finalizer() -> None:
    env, cloud = make(delete_polls=2)
    ready(env)
    env.delete(KIND, "db")
    step = env.reconcile(KIND, "db")
    assert (step.before, step.after) == ("ready", "deleting")
    assert env.get(KIND, "db")["status"]["phase"] == "Terminating"
    env.run_until_idle()
    assert not env.exists(KIND, "db")
    assert cloud.instances() == {}
    assert cloud.count("delete") == 1


def test_delete_of_missing_external_is_success() -> None:
    env, cloud = make()
    ready(env)
    cloud.remove_instance(external(env))
    env.delete(KIND, "db")
    env.run_until_idle()
    assert not env.exists(KIND, "db")


def test_spec_change_while_deleting_is_ignored() -> None:
    env, cloud = make(delete_polls=3)
    ready(env)
    env.delete(KIND, "db")
    env.reconcile(KIND, "db")
    env.apply(database_manifest("db", storage_gb=500))
    env.run_until_idle()
    assert not env.exists(KIND, "db")
    assert cloud.count("modify") == 0


# ----------------------------------------------- steps 9-10: secret, status
def test_connection_secret_written_only_when_changed() -> None:
    env, _ = make()
    ready(env)
    rv = env.api.get("v1", "Secret", "default", "db-conn")["metadata"]["resourceVersion"]
    env.advance(200)  # several polls
    assert env.api.get("v1", "Secret", "default", "db-conn")["metadata"]["resourceVersion"] == rv
    secret = env.api.get("v1", "Secret", "default", "db-conn")
    assert secret["metadata"]["ownerReferences"][0]["kind"] == KIND


def test_history_is_bounded() -> None:
    env, cloud = make()
    ready(env)
    for i in range(8):
        cloud.fail_instance(external(env), "blip")
        env.reconcile(KIND, "db")
        assert env.state(KIND, "db") == "failed", i
        cloud.recover_instance(external(env))
        env.reconcile(KIND, "db")
        assert env.state(KIND, "db") == "ready", i
    history = env.get(KIND, "db")["status"]["history"]
    assert len(history) == 10
    assert {"from", "to", "event", "reason", "time"} <= set(history[-1])


@pytest.mark.parametrize("stored", ["exploded", 42, "deleted", {"a": 1}])
def test_corrupt_stored_state_is_repaired(stored: Any) -> None:
    env, _ = make()
    ready(env)
    obj = env.get(KIND, "db")
    obj["status"]["state"] = stored
    obj["status"]["conditions"] = [{"bogus": True}, "not-a-condition"]
    # The current CRD refuses the status ("deleted" is a valid state; the conditions are not).
    with pytest.raises(Invalid) as refused:
        env.api.replace_status(obj)
    fields = {c["field"] for c in refused.value.causes}
    assert {"status.conditions[0].type", "status.conditions[1]"} <= fields
    assert ("status.state" in fields) == (stored != "deleted")
    assert env.state(KIND, "db") == "ready"
    # A status written under an older CRD without validation is still read back.
    env.serve_lenient(KIND)
    env.api.replace_status(obj)
    assert env.state(KIND, "db") == stored
    env.reconcile(KIND, "db")
    assert env.state(KIND, "db") == "ready"
    assert "StateRepaired" in [e["reason"] for e in env.events("db")]
    assert cond(env, "Ready") == ("True", "Available")
    assert cond(env, "StatusValid") == ("False", "StateRepaired")
    assert "restarted from unclaimed" in env.condition(KIND, "db", "StatusValid").message
    env.reconcile(KIND, "db")
    assert cond(env, "StatusValid") == ("True", "Valid")


def test_stuck_in_creating_is_reported() -> None:
    env, _cloud = make(create_polls=10_000)
    env.apply(database_manifest("db"))
    env.reconcile(KIND, "db")
    env.advance(2000)  # longer than the 1800 s limit of Creating
    assert env.state(KIND, "db") == "creating"
    assert cond(env, "Stuck") == ("True", "StuckInCreating")
    assert "Stuck" in [e["reason"] for e in env.events("db")]


def test_new_generation_not_observed_makes_ready_unknown() -> None:
    env, cloud = make()
    ready(env)
    cloud.fail_next("describe", CloudUnavailable("down"))
    env.apply(database_manifest("db", storage_gb=30))
    env.reconcile(KIND, "db")
    assert cond(env, "Ready") == ("Unknown", "GenerationNotObserved")
    obj = env.get(KIND, "db")
    assert obj["status"]["observedGeneration"] == obj["metadata"]["generation"]


def test_one_broken_resource_does_not_stop_others() -> None:
    env, _ = make()
    mangled = {**database_manifest("mangled"), "spec": "not-an-object"}
    with pytest.raises(Invalid) as refused:  # the current CRD refuses it
        env.apply(mangled)
    assert [c["field"] for c in refused.value.causes] == ["<nil>", "spec"]  # CEL not checked
    env.serve_lenient(KIND)  # an older CRD without validation stored it
    env.apply(database_manifest("bad", engine="oracle"))
    env.apply(mangled)
    for i in range(3):
        env.apply(database_manifest(f"good-{i}"))
    env.run_until_idle()
    assert [env.state(KIND, f"good-{i}") for i in range(3)] == ["ready"] * 3
    assert env.state(KIND, "bad") == "failed"
    assert env.state(KIND, "mangled") == "failed"
    assert env.condition(KIND, "mangled", "Failed").reason == "InvalidSpec"


# ------------------------------------------------------- supporting reads
def test_supporting_reads_are_reused_for_reads_ttl_and_errors_are_not() -> None:
    from lifecycle.machines.database import DatabaseInstance
    from lifecycle.providers.simcloud import DatabaseConnector
    from lifecycle.runtime.reconciler import Reconciler

    env, cloud = make()
    config = env.api.get("lifecycle.dev/v1alpha1", "ProviderConfig", None, "default")
    env.api.delete("lifecycle.dev/v1alpha1", "ProviderConfig", None, "default")
    cached = Reconciler(env.api, DatabaseInstance, DatabaseConnector(cloud), reads_ttl=3600.0,
                        clock=env.clock.now)
    env.apply(database_manifest("db"))
    cached.reconcile("default", "db")
    assert cond(env, "Failed") == ("True", "ProviderConfigMissing")  # a miss is not cached
    env.api.create({k: config[k] for k in ("apiVersion", "kind", "spec")}
                   | {"metadata": {"name": "default"}})
    cached.reconcile("default", "db")
    assert env.state(KIND, "db") == "creating"
    gets = env.api.stats["get"]
    cached.reconcile("default", "db")
    # Only the object and its connection Secret were read: namespace, provider
    # config and credentials came from the cache.
    assert env.api.stats["get"] - gets == 2
    env.api.delete("lifecycle.dev/v1alpha1", "ProviderConfig", None, "default")
    cached.reconcile("default", "db")
    assert env.state(KIND, "db") in ("creating", "ready")  # still within the TTL
    fresh = Reconciler(env.api, DatabaseInstance, DatabaseConnector(cloud), clock=env.clock.now)
    fresh.reconcile("default", "db")
    assert env.get(KIND, "db")["status"]["failure"]["reason"] == "ProviderConfigMissing"


# ------------------------------------------------------- effects, intent journal
class _Port:
    """An ObjectPort over a plain dict of annotations, recording every commit."""

    def __init__(self) -> None:
        self.committed: dict[str, str] = {}
        self.log: list[tuple[str, str]] = []

    def annotations(self) -> dict[str, str]:
        return self.committed

    def annotate(self, key: str, value: str) -> None:
        self.committed[key] = value
        self.log.append((key, value))

    def stage(self, key: str, value: str) -> None:
        self.committed[key] = value
        self.log.append((key, "staged:" + value))


def test_effects_journal_each_call_through_the_object_port() -> None:
    calls: list[str] = []

    class Client:
        def create(self, r: ManagedResource) -> Creation:
            calls.append(r.idempotency_key)
            return Creation(connection={"host": "h"}, external_name="assigned-7")

    resource = ManagedResource(kind=KIND, namespace="default", name="db", uid="u-1",
                               generation=3, external_name="db-x", parameters=None)
    port = _Port()
    effects = Effects(Client(), resource, port,  # type: ignore[arg-type]
                      lambda: datetime(2026, 1, 1, tzinfo=UTC))
    effects.create()
    intents = [json.loads(v) for k, v in port.log if k == INTENT]
    # Committed before the call; closed only by an observation showing the effect.
    assert [i["outcome"] for i in intents] == ["pending"]
    assert calls == [intents[0]["key"]] == ["u-1/create/3/1"]
    assert port.committed[EXTERNAL_NAME] == "assigned-7" == effects.external_name
    assert (effects.operation, effects.connection) == ("create", {"host": "h"})
    # Nothing to close while the effect is not visible; then the close is staged.
    assert not effects.close_observed(Observation.absent())
    assert effects.close_observed(Observation(exists=True))
    key, value = port.log[-1]
    assert key == INTENT and value.startswith("staged:")
    assert json.loads(value.removeprefix("staged:"))["outcome"] == "succeeded"


def test_a_pending_intent_is_resumed_and_a_new_one_gets_a_new_key() -> None:
    at = datetime(2026, 1, 1, tzinfo=UTC)
    pending = Intent("create", "u/create/2/4", 2, "2026-01-01T00:00:00Z")
    assert next_intent(pending, "create", "u", 2, at) is pending
    assert next_intent(pending, "update", "u", 2, at).key == "u/update/2/5"
    done = Intent("create", "u/create/2/4", 2, "2026-01-01T00:00:00Z", outcome="succeeded")
    assert next_intent(done, "create", "u", 2, at).key == "u/create/2/5"
    assert next_intent(None, "delete", "u", 9, at).key == "u/delete/9/1"
