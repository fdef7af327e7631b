"""Rules of the reconciler, the connection Secrets, the effects, the external-name index and
the pass's conclusion that a second sampled mutation run found unchecked.

Each test names the rule in the engine's words and asserts it through the public surface:
the harness's objects, Secrets and simulated cloud, or the runtime classes a pass uses.
"""

from __future__ import annotations

from typing import Any, ClassVar

import attrs
import pytest
from helpers import LaggingStore, b64, name_holder
from statemachine import State

from lifecycle.core.kind import (
    CONNECTION_SECRET_LABEL,
    EXTERNAL_NAME,
    FINALIZER,
    OWNER_UID,
)
from lifecycle.core.machine import Timing
from lifecycle.kube.errors import AlreadyExists
from lifecycle.machines.database import DatabaseInstance, DatabaseInstanceMachine
from lifecycle.machines.managed import ManagedResourceMachine
from lifecycle.machines.postgres import kinds as postgres_kinds
from lifecycle.providers.postgres.scenarios.testing import manifest as postgres_manifest
from lifecycle.providers.simcloud import OWNER_TAG, DatabaseConnector, SimCloud
from lifecycle.providers.simcloud.client import DatabaseClient
from lifecycle.providers.simcloud.scenarios.harness import database_manifest, simulated_environment
from lifecycle.runtime.journalkey import subject_of
from lifecycle.runtime.names import NameIndex
from lifecycle.runtime.secrets import ConnectionSecrets
from lifecycle.testing import Environment

KIND = "DatabaseInstance"
CREDS = ("AKIDEXAMPLE", "s3cr3t")


def _foreign(cloud: SimCloud, name: str = "precious") -> None:
    """``name``: a resource created outside the operator, marked by no object."""
    cloud.create_instance(CREDS, name, {"engine": "postgres", "storage_gb": 20},
                          password="owners-password-1")


# ---------------------------------------------------------- the external-name index
def test_the_index_loads_every_listed_holder_past_objects_that_hold_no_name() -> None:
    """Loading the index skips an object that holds no name (no finalizer, or only an
    annotation asked for) and goes on: a holder listed after it still keeps its name."""
    asking = name_holder("a", "ua", "2026-01-01T00:00:00Z", annotated="y")
    bare = name_holder("b", "ub", "2026-01-01T00:00:00Z")
    holder = name_holder("c", "uc", "2026-01-02T00:00:00Z", held="x")
    objs = {"a": asking, "b": bare, "c": holder}
    index = NameIndex(lambda: [asking, bare, holder], lambda _ns, name: objs.get(name))
    late = name_holder("d", "ud", "2026-01-03T00:00:00Z", annotated="x")
    assert index.claim(late, "x") == ("uc", "default", "c", "2026-01-02T00:00:00Z")


# ------------------------------------------------------------------ the effects
def test_an_observe_that_answers_no_observation_fails_the_pass_as_invalid_observation(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A provider whose observe answers something else than an Observation is a handled
    error of its own reason, ``InvalidObservation``, naming what it answered."""
    monkeypatch.setattr(DatabaseClient, "observe", lambda self, resource: {"exists": True})
    env, _ = simulated_environment()
    env.apply(database_manifest("db"))
    env.reconcile(KIND, "db")
    failed = env.condition(KIND, "db", "Failed")
    assert failed is not None and failed.status.value == "True"
    assert (failed.reason, failed.message) == (
        "InvalidObservation", "observe returned dict, not an Observation")
    assert env.get(KIND, "db")["status"]["failure"]["reason"] == "InvalidObservation"


def test_the_entry_the_observation_closed_is_sealed_under_the_operators_key() -> None:
    """A create that the same pass sees done closes its journal entry as succeeded; the
    closed entry on the object carries its own MAC, so the operator still trusts it."""
    env, _ = simulated_environment(cloud=SimCloud(seed=3, create_polls=0))
    env.apply(database_manifest("db"))
    assert [s.after for s in env.run_until_idle()] == ["ready"]
    meta = env.get(KIND, "db")["metadata"]
    annotations = meta["annotations"]
    journal = env.reconcilers[KIND].journal  # type: ignore[attr-defined]
    entry = journal.read(annotations, subject_of(
        KIND, meta["namespace"], meta["name"], meta["uid"], annotations[EXTERNAL_NAME]))
    assert entry is not None
    assert (entry.operation, entry.outcome) == ("create", "succeeded")
    assert entry.key == f"{meta['uid']}/create/1/1"


# ------------------------------------------------------------------ the reconciler
def test_the_external_resource_is_marked_with_the_operators_own_id() -> None:
    """An operator with an id marks what it creates ``<operator id>/<object uid>``, the
    mark its ownership rule later checks (another operator's resource is not its own)."""
    env, cloud = simulated_environment(cloud=SimCloud(seed=3, create_polls=0),
                                       operator_id="team-op")
    env.apply(database_manifest("db"))
    env.run_until_idle()
    assert env.state(KIND, "db") == "ready"
    meta = env.get(KIND, "db")["metadata"]
    tags = cloud.instances()[meta["annotations"][EXTERNAL_NAME]]["tags"]
    assert tags[OWNER_TAG] == f"team-op/{meta['uid']}"
    env.reconcile(KIND, "db")  # the next pass finds its own mark
    assert env.state(KIND, "db") == "ready"


def _grant_by_reference() -> dict[str, Any]:
    doc = postgres_manifest("Grant", "g", namespace="team-a", privileges=["CONNECT"])
    doc["spec"]["forProvider"].update(roleRef={"name": "app"}, databaseRef={"name": "db"})
    return doc


def test_an_unresolved_reference_ends_the_pass_before_the_take_over() -> None:
    """References are resolved before the object is taken over: one that names nothing
    yet is ``ReferenceUnresolved`` and nothing is committed (no finalizer)."""
    env = Environment(postgres_kinds())
    env.namespace("team-a")
    env.apply(_grant_by_reference())
    env.reconcile("Grant", "g", "team-a")
    synced = env.condition("Grant", "g", "Synced", "team-a")
    assert synced is not None and synced.status.value == "False"
    assert synced.reason == "ReferenceUnresolved"
    assert synced.message == (
        "unresolved reference(s): roleRef: Role 'app' not found in namespace 'team-a'; "
        "databaseRef: Database 'db' not found in namespace 'team-a'")
    assert FINALIZER not in (env.get("Grant", "g", "team-a")["metadata"].get("finalizers") or [])


def test_a_resolved_reference_is_written_into_the_spec_by_the_pass() -> None:
    """A reference to a Ready object of the same namespace is resolved by the pass: its
    external name is written into ``spec.forProvider``."""
    env = Environment(postgres_kinds())
    env.namespace("team-a")
    for kind, name in (("Role", "app"), ("Database", "db")):
        env.apply(postgres_manifest(kind, name, namespace="team-a"))
        stored = env.get(kind, name, "team-a")
        env.api.replace_status({**stored, "status": {
            "externalName": f"{name}_pg",
            "conditions": [{"type": "Ready", "status": "True", "reason": "Available",
                            "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}})
    env.apply(_grant_by_reference())
    env.reconcile("Grant", "g", "team-a")
    given = env.get("Grant", "g", "team-a")["spec"]["forProvider"]
    assert (given["role"], given["database"]) == ("app_pg", "db_pg")
    synced = env.condition("Grant", "g", "Synced", "team-a")
    assert synced is not None and synced.reason != "ReferenceUnresolved"


@pytest.mark.parametrize("name", ["precious", "precious-" + "x" * 70])
def test_a_deleted_object_leaves_anothers_resource_untouched_and_says_so(name: str) -> None:
    """Deleting an object whose external name is another's deletes nothing: the object
    lets go with an Informational ``ExternalResourceLeftAlone`` note naming the resource
    by at most its first 64 characters (seen here because another finalizer keeps the
    object)."""
    env, cloud = simulated_environment(cloud=SimCloud(seed=3, create_polls=0))
    _foreign(cloud, name)
    doc = database_manifest("a", annotations={EXTERNAL_NAME: name})
    doc["metadata"]["finalizers"] = ["example.com/keep"]
    env.apply(doc)
    env.reconcile(KIND, "a")
    env.delete(KIND, "a")
    env.reconcile(KIND, "a")
    assert env.state(KIND, "a") == "deleted"
    note = env.condition(KIND, "a", "Informational")
    assert note is not None and note.reason == "ExternalResourceLeftAlone"
    assert note.message == f"external resource {name[:64]!r} is not this object's: left untouched"
    assert cloud.instances()[name]["state"] == "available"
    assert cloud.count("delete", name) == 0


def test_a_resource_refused_as_anothers_is_neither_recorded_nor_late_initialised() -> None:
    """What observe saw of a resource the object does not own is not the object's: the
    pass fails ``ExternalResourceNotOwned`` without recording it in ``status.atProvider``
    and without late-initialising the spec from it."""
    env, cloud = simulated_environment(cloud=SimCloud(seed=3, create_polls=0))
    _foreign(cloud)
    env.apply(database_manifest("a", annotations={EXTERNAL_NAME: "precious"}))
    spec = env.get(KIND, "a")["spec"]
    env.reconcile(KIND, "a")
    obj = env.get(KIND, "a")
    assert obj["status"]["failure"]["reason"] == "ExternalResourceNotOwned"
    assert "atProvider" not in obj["status"]
    assert obj["spec"] == spec and obj["metadata"]["generation"] == 1


class ForgettingMachine(DatabaseInstanceMachine):
    """The database machine plus a Retired state, left by an orphaning deletion whose
    transition runs an action that needs no provider."""

    retired = State("Retired")

    retire = ManagedResourceMachine.ready.to(retired)
    orphan = retired.to(ManagedResourceMachine.deleted, on="forget_external")

    state_docs = {**ManagedResourceMachine.state_docs, "retired": "kept, no longer served"}
    ready_condition = {**ManagedResourceMachine.ready_condition,
                       "retired": ("False", "Retired")}
    #: What each ``forget_external`` was given.
    forgotten: ClassVar[list[Any]] = []

    def forget_external(self, effects: Any) -> None:
        """Action: note that the resource was let go."""
        ForgettingMachine.forgotten.append(effects)


def test_an_orphaning_pass_runs_its_transitions_actions_without_a_provider() -> None:
    """An orphaning deletion connects to no provider; a machine's action on that
    transition still runs, given no effects, and the object goes."""
    kind = attrs.evolve(DatabaseInstance, machine=ForgettingMachine)
    cloud = SimCloud(seed=3, create_polls=0)
    env = Environment([(kind, DatabaseConnector(cloud))])
    env.provider_config()
    env.apply(database_manifest("db"))
    env.run_until_idle()
    obj = env.get(KIND, "db")
    env.api.replace_status({**obj, "status": {**obj["status"], "state": "retired"}})
    obj = env.get(KIND, "db")
    env.api.replace({**obj, "spec": {**obj["spec"], "deletionPolicy": "Orphan"}})
    ForgettingMachine.forgotten.clear()
    env.delete(KIND, "db")
    env.reconcile(KIND, "db")
    assert ForgettingMachine.forgotten == [None]
    assert env.exists(KIND, "db") is False
    assert cloud.instances()[obj["metadata"]["annotations"][EXTERNAL_NAME]]["state"] == (
        "available")


# ------------------------------------------------------------------ the conclusion
class PollingMachine(DatabaseInstanceMachine):
    """The database machine with no wait intervals: every state polls."""

    timing = Timing(poll=30.0, wait={})


def test_a_pass_that_acted_and_saw_the_result_concludes_both_steps_for_its_object() -> None:
    """A create seen done in the same pass is concluded twice, the call's step then the
    observation's, each for this object: a kind that waits in no state (its creating step
    polls at the object's jittered interval) still goes unclaimed -> ready in one pass."""
    kind = attrs.evolve(DatabaseInstance, machine=PollingMachine)
    env = Environment([(kind, DatabaseConnector(SimCloud(seed=3, create_polls=0)))])
    env.provider_config()
    env.apply(database_manifest("db"))
    step = env.reconcile(KIND, "db")
    assert step.after == "ready"
    assert [(h["from"], h["to"]) for h in env.get(KIND, "db")["status"]["history"]] == [
        ("unclaimed", "creating"), ("creating", "ready")]


# ------------------------------------------------------------ connection Secrets
def _owner() -> tuple[Environment, dict[str, Any]]:
    env, _ = simulated_environment()
    env.apply(database_manifest("db"))  # stored, never reconciled
    return env, env.get(KIND, "db")


def test_a_password_asked_for_outside_read_only_is_generated_and_persisted_first() -> None:
    """Outside read-only, the password for the client is the one stored, or a new one
    written to the connection Secret before it is handed out."""
    env, owner = _owner()
    given = ConnectionSecrets(env.api, DatabaseInstance, lambda: "generated-1").password(
        owner, read_only=False, forced=False)
    assert given == "generated-1"
    assert env.secret("db-conn") == {"password": "generated-1"}
    again = ConnectionSecrets(env.api, DatabaseInstance, lambda: "generated-2").password(
        owner, read_only=False, forced=False)
    assert again == "generated-1"


def test_publishing_with_keep_sets_only_the_keys_the_secret_lacks() -> None:
    """``keep`` merges only what the Secret lacks or holds empty: a value already there
    (the password a retry must reuse) is never written over."""
    env, owner = _owner()
    secrets = ConnectionSecrets(env.api, DatabaseInstance, lambda: "pw")
    secrets.publish(owner, {"password": "first-password", "username": ""})
    secrets.publish(owner, {"password": "second-password", "username": "admin",
                            "endpoint": "db.example"}, keep=True)
    assert env.secret("db-conn") == {"password": "first-password", "username": "admin",
                                     "endpoint": "db.example"}


def test_a_read_only_take_over_reads_the_password_from_the_api_server() -> None:
    """A read-only pass (one that must change nothing) creates no Secret, so it never
    takes a cache's miss for absence: the stored password is read from the API server."""
    env, owner = _owner()
    ConnectionSecrets(env.api, DatabaseInstance, lambda: "stored-password").ensure_password(
        owner)
    api = LaggingStore(env.api)
    secrets = ConnectionSecrets(api, DatabaseInstance, lambda: "never-used")
    assert secrets.take_over(owner, holds=True, read_only=True) == "stored-password"
    assert api.lookups == 0
    assert env.secret("db-conn") == {"password": "stored-password"}


def test_a_forced_take_over_rewrites_the_secret_another_writer_created_first() -> None:
    """A forced pass writes the connection Secret even when nothing changes: when another
    writer for the same object created it first (without the operator's label and owner
    reference), the password is kept and the Secret is written with both."""
    env, owner = _owner()
    uid = owner["metadata"]["uid"]

    class Raced:
        def __getattr__(self, name: str) -> Any:
            return getattr(env.api, name)

        def create(self, body: Any) -> Any:
            env.api.create({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                            "metadata": {"name": "db-conn", "namespace": "default",
                                         "annotations": {OWNER_UID: uid}},
                            "data": {"password": b64("first-password")}})
            raise AlreadyExists('secrets "db-conn" already exists')

    secrets = ConnectionSecrets(Raced(), DatabaseInstance, lambda: "second-password")
    assert secrets.take_over(owner, holds=False, read_only=False,
                             forced=True) == "first-password"
    stored = env.api.get("v1", "Secret", "default", "db-conn")
    assert env.secret("db-conn") == {"password": "first-password"}
    assert stored["metadata"].get("labels") == {CONNECTION_SECRET_LABEL: "true"}
    assert [(r["uid"], r["controller"])
            for r in stored["metadata"].get("ownerReferences") or []] == [(uid, True)]
