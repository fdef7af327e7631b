"""Rules of the managed pass's runtime modules that a sampled mutation run found unchecked:
the external-name index under a concurrent claim, the connection Secret's refusals.

Each test names the rule and fails on a one-line breakage of ``lifecycle/runtime``.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

import attrs
import pytest
from helpers import (
    CLUSTER_SCOPED,
    LaggingStore,
    NamesOnlyProvider,
    cluster_scoped_manifest,
    name_holder,
)

from lifecycle.core.errors import HandledError, Severity, TerminalError
from lifecycle.core.kind import EXTERNAL_NAME, RECONCILE_POLICY
from lifecycle.core.values import Creation, Intent, ResultKind
from lifecycle.kube.conflict import ConflictsExhausted
from lifecycle.kube.errors import AlreadyExists, Conflict, Forbidden, NotFound
from lifecycle.machines.database import DatabaseInstance
from lifecycle.providers.simcloud import DatabaseConnector, SimCloud
from lifecycle.providers.simcloud.client import DatabaseClient
from lifecycle.providers.simcloud.scenarios.harness import database_manifest, simulated_environment
from lifecycle.runtime.effects import next_intent
from lifecycle.runtime.names import NameIndex, name_key
from lifecycle.runtime.passes import ObjectGone, Pass
from lifecycle.runtime.reads import TTLCache
from lifecycle.runtime.secrets import ConnectionSecrets
from lifecycle.testing import Environment


# -------------------------------------------------------- the external-name index
def test_a_name_claimed_by_a_third_object_while_the_holder_is_read_stays_with_it() -> None:
    """The holder found in the index is read afresh outside the lock; if a third object
    claimed the name meanwhile, the claim reports that object and never takes it over."""
    a = name_holder("a", "ua", "2026-01-01T00:00:00Z", held="x")
    b = name_holder("b", "ub", "2026-01-02T00:00:00Z", annotated="x")
    c = name_holder("c", "uc", "2026-01-03T00:00:00Z", annotated="x")
    objs: dict[str, Any] = {"a": a}
    index: NameIndex

    def reader(_ns: str | None, name: str) -> Any:
        if name == "a" and "a" in objs:  # a is gone; while b's claim reads it, c takes x
            del objs["a"]
            objs["c"] = c
            assert index.claim(c, "x") is None
        return objs.get(name)

    index = NameIndex(lambda: list(objs.values()), reader)
    holder_c = ("uc", "default", "c", "2026-01-03T00:00:00Z")
    assert index.claim(b, "x") == holder_c
    assert index.claim(b, "x") == holder_c  # c keeps it: reading c finds it still holds x


# ---------------------------------------------------------- connection Secrets
class _Refusing:
    """The API server, refusing every Secret write with ``error``."""

    def __init__(self, api: Any, error: Exception) -> None:
        self._api, self._error = api, error

    def __getattr__(self, name: str) -> Any:
        return getattr(self._api, name)

    def create(self, body: Any) -> Any:
        raise self._error

    def replace(self, body: Any) -> Any:
        raise self._error


@pytest.mark.parametrize("error", [Forbidden("secrets is forbidden"),
                                   NotFound('namespaces "default" not found')])
def test_a_secret_that_cannot_be_written_is_connection_secret_unavailable(
        error: Exception) -> None:
    env, _ = simulated_environment()
    owner = database_manifest("db")
    owner["metadata"]["uid"] = "u-db"
    secrets = ConnectionSecrets(_Refusing(env.api, error), DatabaseInstance,
                                lambda: "pw")
    with pytest.raises(HandledError) as caught:
        secrets.publish(owner, {"endpoint": "db.example"})
    assert caught.value.reason == "ConnectionSecretUnavailable"
    assert caught.value.message.startswith(
        "connection Secret default/db-conn cannot be written: ")
    assert caught.value.severity is Severity.RETRYABLE


# ------------------------------------------------------------- the pass's resource
def test_a_connector_sees_what_the_status_recorded_of_the_resource(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``ManagedResource.observed`` is the object's ``status.atProvider``: a provider that
    compares with what it last observed (the PostgreSQL grants) reads it there."""
    env, _ = simulated_environment()
    env.apply(database_manifest("db"))
    env.run_until_idle()
    recorded = env.get("DatabaseInstance", "db")["status"]["atProvider"]
    assert recorded
    seen: list[Any] = []
    connect = DatabaseConnector.connect

    def spy(self: DatabaseConnector, resource: Any, config: Any) -> Any:
        seen.append(resource.observed)
        return connect(self, resource, config)

    monkeypatch.setattr(DatabaseConnector, "connect", spy)
    env.reconcile("DatabaseInstance", "db")
    assert seen and all(observed == recorded for observed in seen)


# ------------------------------------------------------------- the transition line
def test_a_state_change_is_logged_once_with_its_structured_fields(
        caplog: pytest.LogCaptureFixture) -> None:
    env, _ = simulated_environment()
    env.apply(database_manifest("db"))
    with caplog.at_level(logging.INFO, logger="lifecycle.runtime.reconciler"):
        env.run_until_idle()
    lines = [r for r in caplog.records
             if r.name == "lifecycle.runtime.reconciler" and " -> " in r.getMessage()]
    assert lines
    first = lines[0]
    assert first.getMessage() == (
        f"DatabaseInstance default/db: {first.__dict__['from']} -> {first.__dict__['to']} "
        f"({first.__dict__['reason']})")
    assert (first.__dict__["kind"], first.__dict__["object"]) == ("DatabaseInstance", "default/db")
    assert first.__dict__["from"] != first.__dict__["to"]
    assert [r.__dict__["to"] for r in lines][-1] == env.state("DatabaseInstance", "db")


# ------------------------------------------------------------------- the journal
def test_a_new_intent_counts_on_from_the_last_keys_sequence_else_starts_at_one() -> None:
    at = datetime(2026, 1, 1, tzinfo=UTC)
    done = Intent("update", "u/update/2/7", 2, "2025-12-31T00:00:00Z", "succeeded")
    assert next_intent(done, "update", "u", 2, at).key == "u/update/2/8"
    for odd in ("opaque", "u/update/2/x", ""):
        previous = Intent("update", odd, 2, "2025-12-31T00:00:00Z", "succeeded")
        assert next_intent(previous, "update", "u", 2, at).key == "u/update/2/1"


# ------------------------------------------------------- a call that finished
def _steps_of_a_create_answering(monkeypatch: pytest.MonkeyPatch, *, finished: bool) -> list[str]:
    """The states a new object passes through when the create answers without describing
    the instance, saying ``finished`` or not (the instance is available at once)."""
    create = DatabaseClient.create

    def answer(self: DatabaseClient, resource: Any) -> Creation:
        return attrs.evolve(create(self, resource), observation=None, finished=finished)

    monkeypatch.setattr(DatabaseClient, "create", answer)
    env, _ = simulated_environment(cloud=SimCloud(seed=1, create_polls=0))
    env.apply(database_manifest("db"))
    return [str(s.after) for s in env.run_until_idle()]


def test_a_create_that_says_it_finished_is_observed_again_in_the_same_pass(
        monkeypatch: pytest.MonkeyPatch) -> None:
    assert _steps_of_a_create_answering(monkeypatch, finished=True) == ["ready"]


def test_a_create_that_says_nothing_leaves_the_observation_to_the_next_pass(
        monkeypatch: pytest.MonkeyPatch) -> None:
    assert _steps_of_a_create_answering(monkeypatch, finished=False) == ["creating", "ready"]


# ------------------------------------------------------------- the provider config
def test_with_the_reads_cache_on_each_object_gets_the_provider_config_it_names() -> None:
    """The reconciler's cache of supporting reads (``reads_ttl``) keeps each provider
    config under its own name: an object naming a config without a secret key is refused
    even right after another object connected with the default one."""
    env, _ = simulated_environment()
    env.reconcilers["DatabaseInstance"].reads = TTLCache(600.0)  # type: ignore[attr-defined]
    env.provider_config("half", credentials={"accessKeyId": "AKIDEXAMPLE"})
    env.apply(database_manifest("a"))
    env.run_until_idle()
    assert env.state("DatabaseInstance", "a") == "ready"
    other = database_manifest("b")
    other["spec"]["providerConfigRef"] = {"name": "half"}
    env.apply(other)
    env.reconcile("DatabaseInstance", "b")
    synced = env.condition("DatabaseInstance", "b", "Synced")
    assert synced is not None and synced.status.value == "False"
    assert synced.message == "provider config 'half' credentials lack 'secretAccessKey'"


def test_details_that_cannot_be_published_fail_the_pass_with_the_secrets_error(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(self: ConnectionSecrets, owner: Any, details: Any, forced: bool = False,
                **_: Any) -> None:
        raise HandledError("connection Secret default/db-conn cannot be written: forbidden",
                           reason="ConnectionSecretUnavailable")

    env, _ = simulated_environment(cloud=SimCloud(seed=1, create_polls=0))
    monkeypatch.setattr(ConnectionSecrets, "publish", refused)
    env.apply(database_manifest("db"))
    env.reconcile("DatabaseInstance", "db")
    synced = env.condition("DatabaseInstance", "db", "Synced")
    assert synced is not None and synced.status.value == "False"
    assert synced.message == "connection Secret default/db-conn cannot be written: forbidden"
    failure = env.get("DatabaseInstance", "db")["status"]["failure"]
    assert (failure["operation"], failure["reason"]) == ("publish",
                                                         "ConnectionSecretUnavailable")


def test_a_connection_secret_is_read_once_per_pass_and_anothers_is_refused() -> None:
    env, _ = simulated_environment()
    env.apply(database_manifest("db"))  # stored, never reconciled: its Secret is kept
    owner = env.get("DatabaseInstance", "db")
    secrets = ConnectionSecrets(env.api, DatabaseInstance, lambda: "pw")
    assert secrets.stored_password(owner) is None
    secrets.publish(owner, {"password": "one"})
    assert secrets.stored_password(owner) == "one"
    stored = env.api.get("v1", "Secret", "default", "db-conn")
    env.api.replace({**stored, "data": {"password": "dHdv"}})  # "two", written by someone else
    assert secrets.stored_password(owner) == "one"  # read once per pass
    assert ConnectionSecrets(env.api, DatabaseInstance).stored_password(owner) == "two"
    env.api.create({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                    "metadata": {"name": "theirs", "namespace": "default"}, "data": {}})
    elsewhere = {**owner, "spec": {**owner["spec"],
                                   "writeConnectionSecretToRef": {"name": "theirs"}}}
    with pytest.raises(TerminalError) as caught:
        secrets.stored_password(elsewhere)
    assert caught.value.reason == "ConnectionSecretNotOwned"
    assert caught.value.message == (
        "connection Secret default/theirs exists and does not belong to this resource; "
        "choose another spec.writeConnectionSecretToRef")


# ------------------------------------------------------------------ leaving
def test_the_pass_that_lets_a_deleted_object_go_writes_no_status() -> None:
    """The finalizer's removal lets the object go: a status written before it would be
    a write for an object about to vanish."""
    env, _ = simulated_environment(cloud=SimCloud(seed=1, create_polls=0, delete_polls=0))
    env.apply(database_manifest("db"))
    env.run_until_idle()
    env.delete("DatabaseInstance", "db")
    env.api.reset_stats()
    steps = env.run_until_idle()
    assert [s.result.reason for s in steps] == ["Deleted"]
    assert env.api.stats["replace_status"] == 0 and env.api.stats["replace"] == 2
    with pytest.raises(NotFound):
        env.get("DatabaseInstance", "db")


def test_a_pass_on_an_object_that_is_gone_is_done_as_not_found() -> None:
    env, _ = simulated_environment()
    step = env.reconcile("DatabaseInstance", "absent")
    assert (step.result.kind, step.result.reason) == (ResultKind.DONE, "NotFound")
    assert env.api.writes("DatabaseInstance") == 0


def test_a_new_object_claims_its_default_name_before_it_commits_it() -> None:
    """An object without an annotation takes ownership with the kind's default name: it
    claims that name in the index (loaded as an operator's workers start) in the pass
    that commits it, so an object annotated with the same name later conflicts."""
    env, _ = simulated_environment(cloud=SimCloud(seed=1, create_polls=0))
    assert env.reconcilers["DatabaseInstance"].names.load()  # type: ignore[attr-defined]
    env.apply(database_manifest("a"))
    env.reconcile("DatabaseInstance", "a")
    taken = env.get("DatabaseInstance", "a")["metadata"]["annotations"][EXTERNAL_NAME]
    env.apply(database_manifest("b", annotations={EXTERNAL_NAME: taken}))
    env.reconcile("DatabaseInstance", "b")
    failed = env.condition("DatabaseInstance", "b", "Failed")
    assert failed is not None and failed.reason == "ExternalNameConflict"
    assert failed.message == f"external name {taken!r} is held by default/a; choose another name"


def test_a_pass_whose_object_vanished_midway_is_done_as_not_found(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def vanished(self: Pass, status: Any) -> None:
        raise ObjectGone

    env, _ = simulated_environment()
    env.apply(database_manifest("db"))
    monkeypatch.setattr(Pass, "write_status", vanished)
    step = env.reconcile("DatabaseInstance", "db")
    assert (step.result.kind, step.result.reason) == (ResultKind.DONE, "NotFound")


# --------------------------------------------------- conflicts on the Secret
class _Conflicting:
    """The API server, answering the first ``times`` Secret writes with a 409."""

    def __init__(self, api: Any, times: int) -> None:
        self._api, self.left = api, times

    def __getattr__(self, name: str) -> Any:
        return getattr(self._api, name)

    def create(self, body: Any) -> Any:
        if self.left:
            self.left -= 1
            raise Conflict("the object has been modified")
        return self._api.create(body)


def test_a_conflicting_secret_write_is_retried_from_a_fresh_read() -> None:
    env, _ = simulated_environment()
    env.apply(database_manifest("db"))
    owner = env.get("DatabaseInstance", "db")
    api = _Conflicting(env.api, 2)
    ConnectionSecrets(api, DatabaseInstance, lambda: "pw").publish(owner, {"endpoint": "e"})
    assert api.left == 0
    assert env.secret("db-conn") == {"endpoint": "e"}


def test_a_secret_write_that_keeps_conflicting_says_so() -> None:
    env, _ = simulated_environment()
    env.apply(database_manifest("db"))
    owner = env.get("DatabaseInstance", "db")
    secrets = ConnectionSecrets(_Conflicting(env.api, 1000), DatabaseInstance, lambda: "pw")
    with pytest.raises(ConflictsExhausted, match=r"^connection Secret write kept conflicting"):
        secrets.publish(owner, {"endpoint": "e"})


# --------------------------------------------- names under their provider config
def test_one_external_name_under_two_provider_configs_names_two_resources() -> None:
    def under(config: str | None, name: str, uid: str) -> dict[str, Any]:
        obj = name_holder(name, uid, "2026-01-01T00:00:00Z", held="x")
        if config is not None:
            obj["spec"]["providerConfigRef"] = {"name": config}
        return obj

    eu, us, plain = under("eu", "a", "ua"), under("us", "b", "ub"), under(None, "c", "uc")
    assert name_key(eu, "x") == ("eu", (), "x") and name_key(plain, "x") == ("default", (), "x")
    index = NameIndex(lambda: [], lambda _ns, name: None)
    assert [index.claim(o, "x") for o in (eu, us, plain)] == [None, None, None]


def test_of_two_listed_holders_of_one_name_the_index_loads_the_older() -> None:
    older = name_holder("a", "ua", "2026-01-01T00:00:00Z", held="x")
    newer = name_holder("b", "ub", "2026-01-02T00:00:00Z", held="x")
    objs = {"a": older, "b": newer}
    for listed in ([older, newer], [newer, older]):
        index = NameIndex(lambda listed=listed: listed, lambda _ns, name: objs.get(name))
        c = name_holder("c", "uc", "2026-01-03T00:00:00Z", annotated="x")
        assert index.claim(c, "x") == ("ua", "default", "a", "2026-01-01T00:00:00Z")


def test_a_password_another_writer_stored_first_is_kept_not_the_new_one() -> None:
    """The create of the Secret meets one created meanwhile (another replica's, for the
    same object): the retry reads it and keeps its password, never writing a new one."""
    env, _ = simulated_environment()
    env.apply(database_manifest("db"))
    owner = env.get("DatabaseInstance", "db")

    class Raced:
        def __getattr__(self, name: str) -> Any:
            return getattr(env.api, name)

        def create(self, body: Any) -> Any:
            env.api.create({**body, "data": {"password": "Zmlyc3Q="}})  # "first"
            raise AlreadyExists("secrets \"db-conn\" already exists")

    secrets = ConnectionSecrets(Raced(), DatabaseInstance, lambda: "second")
    assert secrets.ensure_password(owner) == "first"
    assert env.secret("db-conn") == {"password": "first"}


def test_a_pass_that_moved_twice_logs_the_state_it_started_from(
        caplog: pytest.LogCaptureFixture) -> None:
    """A create observed again in the same pass moves the object twice (unclaimed ->
    creating -> ready); its log line names the state the pass started from."""
    cloud = SimCloud(seed=1, create_polls=0)
    sync = attrs.evolve(DatabaseInstance, observe_after_create=True)
    env = Environment([(sync, DatabaseConnector(cloud))])
    env.provider_config()
    env.apply(database_manifest("db"))
    with caplog.at_level(logging.INFO, logger="lifecycle.runtime.reconciler"):
        steps = env.run_until_idle()
    assert [s.after for s in steps] == ["ready"]
    lines = [r.getMessage() for r in caplog.records
             if r.name == "lifecycle.runtime.reconciler" and " -> " in r.getMessage()]
    assert lines == ["DatabaseInstance default/db: unclaimed -> ready (Available)"]


def test_a_repaired_state_is_reported_by_an_event_carrying_the_repairs_message() -> None:
    env, _ = simulated_environment(cloud=SimCloud(seed=1, create_polls=0))
    env.apply(database_manifest("db"))
    env.run_until_idle()
    env.serve_lenient("DatabaseInstance")  # a status written under a CRD without validation
    obj = env.get("DatabaseInstance", "db")
    obj["status"]["state"] = "no-such-state"
    env.api.replace_status(obj)
    env.reconcile("DatabaseInstance", "db")
    note = env.condition("DatabaseInstance", "db", "StatusValid")
    assert note is not None and note.reason == "StateRepaired"
    assert "restarted from unclaimed" in note.message
    repaired = [e for e in env.events("db") if e["reason"] == "StateRepaired"]
    assert [(e["type"], e["message"]) for e in repaired] == [("Warning", note.message)]


def test_of_two_holders_the_older_takes_the_name_back_from_the_newer_in_the_index() -> None:
    """Both objects carry the finalizer and the name (as after a restore), and the index
    was loaded when only the newer one did: the older one's claim takes the name."""
    older = name_holder("a", "ua", "2026-01-01T00:00:00Z", held="x")
    newer = name_holder("b", "ub", "2026-01-02T00:00:00Z", held="x")
    objs = {"a": older, "b": newer}
    index = NameIndex(lambda: [newer], lambda _ns, name: objs.get(name))
    assert index.claim(older, "x") is None
    assert index.claim(newer, "x") == ("ua", "default", "a", "2026-01-01T00:00:00Z")


def test_an_observe_only_pass_gives_the_client_the_stored_password(
        monkeypatch: pytest.MonkeyPatch) -> None:
    env, _ = simulated_environment(cloud=SimCloud(seed=1, create_polls=0))
    env.apply(database_manifest("db"))
    env.run_until_idle()
    stored = env.secret("db-conn")["password"]
    obj = env.get("DatabaseInstance", "db")
    obj["metadata"]["annotations"][RECONCILE_POLICY] = "skip"
    env.api.replace(obj)
    seen: list[Any] = []
    connect = DatabaseConnector.connect

    def spy(self: DatabaseConnector, resource: Any, config: Any) -> Any:
        seen.append(resource.password)
        return connect(self, resource, config)

    monkeypatch.setattr(DatabaseConnector, "connect", spy)
    env.reconcile("DatabaseInstance", "db")
    assert seen == [stored] and stored


# ------------------------------------------------- a name the provider assigned
def test_a_finished_create_is_observed_again_under_the_name_the_provider_assigned(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A provider that names what it creates (``Kind.names_assigned``), whose create says
    it finished without describing the resource: the resource is observed again in the
    same pass under the name the provider assigned, so the object is Ready at once."""
    create = DatabaseClient.create

    def assigning(self: DatabaseClient, resource: Any) -> Creation:
        assigned = f"{resource.external_name}-assigned"
        made = create(self, attrs.evolve(resource, external_name=assigned))
        return attrs.evolve(made, external_name=assigned, observation=None, finished=True)

    monkeypatch.setattr(DatabaseClient, "create", assigning)
    cloud = SimCloud(seed=1, create_polls=0)
    env = Environment([(attrs.evolve(DatabaseInstance, names_assigned=True),
                        DatabaseConnector(cloud))])
    env.provider_config()
    env.apply(database_manifest("db"))
    steps = env.run_until_idle()
    assigned = env.get("DatabaseInstance", "db")["metadata"]["annotations"][EXTERNAL_NAME]
    assert assigned.endswith("-assigned") and list(cloud.instances()) == [assigned]
    assert [str(s.after) for s in steps] == ["ready"]


# ------------------------------------------------- a cluster-scoped holder
def test_a_conflict_names_a_cluster_scoped_holder_by_its_name() -> None:
    env = Environment([(CLUSTER_SCOPED, DatabaseConnector(SimCloud(seed=1, create_polls=0)))])
    env.provider_config()
    assert env.reconcilers["DatabaseInstance"].names.load()  # type: ignore[attr-defined]
    env.apply(cluster_scoped_manifest("a"))
    env.reconcile("DatabaseInstance", "a", None)
    taken = env.get("DatabaseInstance", "a", None)["metadata"]["annotations"][EXTERNAL_NAME]
    env.apply(cluster_scoped_manifest("b", annotations={EXTERNAL_NAME: taken}))
    env.reconcile("DatabaseInstance", "b", None)
    failed = env.condition("DatabaseInstance", "b", "Failed", None)
    assert failed is not None and failed.reason == "ExternalNameConflict"
    assert failed.message == f"external name {taken!r} is held by a; choose another name"


# ---------------------------------------- the Secret check belongs to the take-over
def test_an_object_holding_its_name_is_not_refused_for_a_secret_it_never_writes() -> None:
    """The connection Secret is checked as an object is taken over: a new object naming a
    Secret that is not its own is refused before it commits anything. An object holding
    its name already is past that check; of a kind without a password whose provider gives
    no connection details, it never reads or writes its Secret, so another's Secret
    appearing under its reference neither concerns nor stops it."""
    provider = NamesOnlyProvider()
    env = Environment([(attrs.evolve(DatabaseInstance, password=False), provider)])
    env.provider_config()
    env.apply(database_manifest("db"))
    env.run_until_idle()
    assert env.state("DatabaseInstance", "db") == "ready" and len(provider.names) == 1
    with pytest.raises(NotFound):
        env.api.get("v1", "Secret", "default", "db-conn")
    theirs = env.api.create({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                             "metadata": {"name": "db-conn", "namespace": "default"},
                             "data": {}})
    new = database_manifest("new")
    new["spec"]["writeConnectionSecretToRef"] = {"name": "db-conn"}
    env.apply(new)
    env.reconcile("DatabaseInstance", "new")
    failed = env.condition("DatabaseInstance", "new", "Failed")
    assert failed is not None and failed.reason == "ConnectionSecretNotOwned"
    step = env.reconcile("DatabaseInstance", "db")
    assert step.error is None and env.state("DatabaseInstance", "db") == "ready"
    failed = env.condition("DatabaseInstance", "db", "Failed")
    assert failed is None or failed.status.value == "False"
    assert env.api.get("v1", "Secret", "default", "db-conn") == theirs


# ------------------------------------------ a Secret the cache has not seen yet
def test_a_read_only_take_over_confirms_a_missing_secret_with_the_api_server() -> None:
    """A pass that creates a missing Secret may take the cache's word that it is missing
    (its create tells otherwise); a read-only pass creates nothing, so it reads the API
    server: a Secret the cache lags behind gives its stored password, or is refused when
    it is another's."""
    env, _ = simulated_environment()
    env.apply(database_manifest("db"))
    owner = env.get("DatabaseInstance", "db")
    ConnectionSecrets(env.api, DatabaseInstance, lambda: "stored").ensure_password(owner)
    lagging = LaggingStore(env.api)
    secrets = ConnectionSecrets(lagging, DatabaseInstance, lambda: "new")
    assert secrets.take_over(owner, holds=False, read_only=True) == "stored"
    assert lagging.lookups == 0
    env.api.create({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                    "metadata": {"name": "theirs", "namespace": "default"},
                    "data": {"password": "dGhlaXJz"}})
    pointing = {**owner, "spec": {**owner["spec"], "writeConnectionSecretToRef": {
        "name": "theirs"}}}
    with pytest.raises(TerminalError) as caught:
        ConnectionSecrets(LaggingStore(env.api), DatabaseInstance, lambda: "new").take_over(
            pointing, holds=False, read_only=True)
    assert caught.value.reason == "ConnectionSecretNotOwned"
    creating = LaggingStore(env.api)
    assert ConnectionSecrets(creating, DatabaseInstance, lambda: "new").take_over(
        owner, holds=False, read_only=False) == "stored"
    assert creating.lookups == 1 and env.secret("db-conn") == {"password": "stored"}


def test_an_edited_external_name_is_reported_and_never_followed() -> None:
    """After naming, an edit of the external-name annotation is a ConfigValid note with
    both names and the object's generation; the pass keeps the name it took."""
    env, cloud = simulated_environment(cloud=SimCloud(seed=1, create_polls=0, delete_polls=0))
    env.apply(database_manifest("db"))
    env.run_until_idle()
    named = env.get("DatabaseInstance", "db")["metadata"]["annotations"][EXTERNAL_NAME]
    env.apply(database_manifest("db", annotations={EXTERNAL_NAME: "other"}))
    env.reconcile("DatabaseInstance", "db")
    obj = env.get("DatabaseInstance", "db")
    note = next(c for c in obj["status"]["conditions"] if c["type"] == "ConfigValid")
    assert (note["status"], note["reason"]) == ("False", "ExternalNameChanged")
    assert note["message"] == (
        f"annotation {EXTERNAL_NAME} changed from {named!r} to 'other' after the resource "
        f"was named; still managing {named!r}")
    assert note["observedGeneration"] == obj["metadata"]["generation"]
    assert env.state("DatabaseInstance", "db") == "ready"
    assert "other" not in cloud.instances() and named in cloud.instances()
