"""Rules of the managed pass (:class:`~lifecycle.runtime.passes.Pass`) that a sampled
mutation run of ``lifecycle/runtime`` found unchecked: what a connector's ``admit`` is
asked with, when staged metadata is committed, what a pass without a password kind reads
while deleting, what a write that keeps conflicting is called, a forced pass whose
request was taken back meanwhile, and the pass's views of its object.

Each test names the rule and asserts it through the pass or the reconciler on the
embedded API server.
"""

from __future__ import annotations

import json
from typing import Any

import attrs
import pytest
from helpers import KIND, NamesOnlyProvider, make

from lifecycle.core.contract import ManagedResource, ProviderConfig
from lifecycle.core.externalname import external_name_of
from lifecycle.core.kind import EXTERNAL_NAME, FINALIZER, INTENT, OPERATION
from lifecycle.core.values import Observation
from lifecycle.kube.conflict import CONFLICT_ATTEMPTS
from lifecycle.kube.errors import Conflict, NotFound
from lifecycle.machines.database import DatabaseInstance
from lifecycle.providers.simcloud import DatabaseConnector, SimCloud
from lifecycle.providers.simcloud.scenarios.harness import database_manifest, simulated_environment
from lifecycle.runtime.passes import Pass
from lifecycle.runtime.secrets import ConnectionSecrets
from lifecycle.testing import Environment


def _pass_on(env: Environment, name: str = "db") -> Pass:
    """A pass on the stored object ``name``, as the reconciler starts one (no index)."""
    obj = env.get(KIND, name)
    return Pass(obj=obj, state="unclaimed", generation=obj["metadata"]["generation"],
                secrets=ConnectionSecrets(env.api, DatabaseInstance), api=env.api,
                kind=DatabaseInstance,
                name=external_name_of(obj, DatabaseInstance.external_name))


def _object_replaces(env: Environment, monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The bodies of the operator's object writes (replace) of the kind, as they happen."""
    api = env.operator_api.api
    original = api.replace
    seen: list[dict[str, Any]] = []

    def replace(body: dict[str, Any], **kwargs: Any) -> Any:
        if body.get("kind") == KIND:
            seen.append(body)
        return original(body, **kwargs)

    monkeypatch.setattr(api, "replace", replace)
    return seen


# ------------------------------------------------------------------ admission
class _Admitting:
    """The simulated cloud's connector, recording what its ``admit`` is asked with."""

    def __init__(self) -> None:
        self.inner = DatabaseConnector(SimCloud(seed=1, create_polls=0))
        self.asked: list[tuple[ManagedResource, ProviderConfig]] = []

    def admit(self, resource: ManagedResource, config: ProviderConfig) -> None:
        self.asked.append((resource, config))

    def connect(self, resource: ManagedResource, config: ProviderConfig) -> Any:
        return self.inner.connect(resource, config)


def test_admit_sees_the_name_to_be_taken_and_the_objects_provider_config() -> None:
    """A connector's ``admit`` judges the object as it would be created: under the
    external name the object is about to take, with the provider config the object names
    (its credentials read), so a provider can refuse by region, quota or account."""
    connector = _Admitting()
    env = Environment([(DatabaseInstance, connector)])
    env.provider_config()
    env.provider_config("eu", credentials={"accessKeyId": "AKIDEU", "secretAccessKey": "eu-s3"})
    manifest = database_manifest("db", annotations={EXTERNAL_NAME: "orders-db"})
    manifest["spec"]["providerConfigRef"] = {"name": "eu"}
    env.apply(manifest)
    env.reconcile(KIND, "db")
    ((resource, config),) = connector.asked
    assert resource.external_name == "orders-db"
    assert isinstance(config, ProviderConfig)
    assert config.name == "eu"
    assert config.credentials == {"accessKeyId": "AKIDEU", "secretAccessKey": "eu-s3"}


# --------------------------------------------------------- staged metadata
def test_a_pass_that_calls_nothing_still_commits_the_finalizer_and_the_name() -> None:
    """Ownership is staged to ride on the pass's first object write; a pass that finds
    the resource up to date and so calls nothing writes it on its own before the status:
    the object it reports Ready carries the finalizer and the external name."""
    provider = NamesOnlyProvider({"orders-db"})
    env = Environment([(attrs.evolve(DatabaseInstance, password=False), provider)])
    env.provider_config()
    env.apply(database_manifest("db", annotations={EXTERNAL_NAME: "orders-db"}))
    step = env.reconcile(KIND, "db")
    assert step.error is None and env.state(KIND, "db") == "ready"
    meta = env.get(KIND, "db")["metadata"]
    assert FINALIZER in meta["finalizers"]
    assert meta["annotations"][EXTERNAL_NAME] == "orders-db"
    assert provider.names == {"orders-db"}


def test_a_closed_journal_entry_waits_for_the_objects_next_write(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Closing a journal entry costs no write of its own: an update the provider finished
    at once is one object write (its pending entry, before the call); the entry closed
    after it rides on the object's next write, which this pass does not make."""
    env, _ = make(create_polls=0, modify_polls=0)
    env.apply(database_manifest("db"))
    env.run_until_idle()
    env.apply(database_manifest("db", storage_gb=40))
    writes = _object_replaces(env, monkeypatch)
    step = env.reconcile(KIND, "db")
    assert step.error is None and (step.before, step.after) == ("ready", "ready")
    assert [json.loads(w["metadata"]["annotations"][INTENT])["outcome"] for w in writes] == [
        "pending"]
    stored = json.loads(env.get(KIND, "db")["metadata"]["annotations"][INTENT])
    assert (stored["operation"], stored["outcome"]) == ("update", "pending")


# ------------------------------------------------------------ the journal's view
def test_the_journals_view_of_the_object_includes_what_is_staged_and_writes_nothing() -> None:
    """The pass is the object as the intent journal sees it: its annotations are the
    stored ones with every staged change applied, read without a write and without
    changing the pass's object."""
    env, _ = simulated_environment()
    env.apply(database_manifest("db", annotations={"team": "orders"}))
    run = _pass_on(env)
    version = run.obj["metadata"]["resourceVersion"]
    assert dict(run.annotations()) == {"team": "orders"}
    run.stage(INTENT, "staged-entry")
    run.defer("lifecycle.dev/note", "deferred")
    assert dict(run.annotations()) == {"team": "orders", INTENT: "staged-entry",
                                       "lifecycle.dev/note": "deferred"}
    assert run.obj["metadata"]["annotations"] == {"team": "orders"}
    assert env.get(KIND, "db")["metadata"]["resourceVersion"] == version


# ---------------------------------------------------------------- credentials
def test_a_pass_scrubs_the_credentials_of_the_provider_config_it_read() -> None:
    """Once a pass has read its provider config, every credential value of it is taken
    out of the status's condition messages and the events it scrubs; the rest is kept."""
    env, _ = simulated_environment()
    env.apply(database_manifest("db"))
    run = _pass_on(env)
    run.provider_config()
    status = {"state": "creating",
              "conditions": [{"type": "Synced", "status": "False",
                              "message": "observe failed: s3cr3t rejected"}]}
    events = [("Warning", "CannotObserve", "login AKIDEXAMPLE with s3cr3t failed")]
    assert run.scrubbed(status, events) == (
        {"state": "creating",
         "conditions": [{"type": "Synced", "status": "False",
                         "message": "observe failed: *** rejected"}]},
        [("Warning", "CannotObserve", "login *** with *** failed")])


# -------------------------------------------------------- a pass without an index
def test_a_pass_without_a_name_index_claims_nothing() -> None:
    """The index of claimed names is the reconciler's; a pass made without one (a tool
    driving one pass) claims no name and so refuses none."""
    env, _ = simulated_environment()
    env.apply(database_manifest("db", annotations={EXTERNAL_NAME: "orders-db"}))
    run = _pass_on(env)
    assert run.index is None and run.name.claimed == "orders-db"
    assert run.claim(False) is None and run.claim(True) is None


# ---------------------------------------------------- deleting without a password
class _Publishing(NamesOnlyProvider):
    """A provider whose connection details include a ``password`` key, recording the
    password each connect is given."""

    def __init__(self) -> None:
        super().__init__(set())
        self.given: list[str | None] = []

    def connect(self, resource: Any, config: Any) -> _Publishing:
        self.given.append(resource.password)
        return self

    def observe(self, resource: Any) -> Observation:
        seen = super().observe(resource)
        return attrs.evolve(seen, connection={"password": "provider-said"}) if seen.exists \
            else seen


def test_a_kind_without_a_password_is_given_none_while_deleting() -> None:
    """A kind without a password never hands its provider one, deleting included: a
    ``password`` its provider published among the connection details is not read back
    from the connection Secret for the deletion."""
    provider = _Publishing()
    env = Environment([(attrs.evolve(DatabaseInstance, password=False), provider)])
    env.provider_config()
    env.apply(database_manifest("db"))
    env.run_until_idle()
    assert env.state(KIND, "db") == "ready"
    assert env.secret("db-conn") == {"password": "provider-said"}
    env.delete(KIND, "db")
    env.run_until_idle()
    assert env.state(KIND, "db") == "deleted" and not provider.names
    assert provider.given and set(provider.given) == {None}


def test_a_resource_asked_for_read_only_without_a_take_over_persists_no_password() -> None:
    """Without a take-over that read the password, the pass's resource carries the one
    stored in the connection Secret; asked for read-only, it never generates or writes
    one (none stored: no password, and no Secret)."""
    env, _ = simulated_environment()
    env.apply(database_manifest("db"))
    assert _pass_on(env).managed_resource(False, True).password is None
    with pytest.raises(NotFound):
        env.api.get("v1", "Secret", "default", "db-conn")
    owner = env.get(KIND, "db")
    ConnectionSecrets(env.api, DatabaseInstance, lambda: "stored-pw").ensure_password(owner)
    assert _pass_on(env).managed_resource(False, True).password == "stored-pw"
    assert env.secret("db-conn") == {"password": "stored-pw"}


# -------------------------------------------------- writes that keep conflicting
@pytest.mark.parametrize(("verb", "what"), [("update", "object write"),
                                            ("update_status", "status write")])
def test_a_write_that_keeps_conflicting_ends_the_pass_naming_the_write(
        verb: str, what: str) -> None:
    """An object or status write that meets a 409 at every attempt ends the pass with an
    error naming which write it was, for the operator's log and the queue's backoff."""
    env, _ = make(create_polls=0)
    env.apply(database_manifest("db"))
    env.faults.fail(verb, KIND, error=Conflict)
    step = env.reconcile(KIND, "db")
    assert step.error == f"{what} kept conflicting ({CONFLICT_ATTEMPTS} attempts)"


# ------------------------------------------------ a forced pass taken back meanwhile
def test_a_forced_pass_whose_request_was_removed_meanwhile_goes_on(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A forced pass removes the ``reconcile`` operation annotation with a write of its
    own; when that write conflicts because another client removed the annotation (and
    changed something else) meanwhile, the retry from the fresh read has nothing to
    remove: the pass goes on, and the other client's change is kept."""
    env, _ = make(create_polls=0)
    env.apply(database_manifest("db", annotations={"team": "orders"}))
    env.run_until_idle()
    env.apply(database_manifest("db", annotations={"team": "orders", OPERATION: "reconcile"}))
    api = env.operator_api.api
    original = api.replace
    raced: list[str] = []

    def racing(body: dict[str, Any], **kwargs: Any) -> Any:
        if body.get("kind") == KIND and not raced:
            current = api.get(body["apiVersion"], KIND, "default", "db")
            annotations = dict(current["metadata"]["annotations"])
            del annotations[OPERATION]
            annotations["team"] = "payments"
            edited = {**current, "metadata": {**current["metadata"], "annotations": annotations}}
            raced.append(original(edited)["metadata"]["resourceVersion"])
        return original(body, **kwargs)

    monkeypatch.setattr(api, "replace", racing)
    step = env.reconcile(KIND, "db")
    assert raced and step.error is None
    assert step.result is not None
    env.run_until_idle()
    assert env.state(KIND, "db") == "ready"
    annotations = env.get(KIND, "db")["metadata"]["annotations"]
    assert OPERATION not in annotations and annotations["team"] == "payments"
