"""Rules of the reconciler and the effects that a sampled mutation run of
``lifecycle/runtime`` found unchecked:

* a reconciler reads the supporting reads afresh on every pass unless given a
  ``reads_ttl``;
* ``"*"`` among the namespaces allowing adoption allows it everywhere;
* a reconcile the API server throttles backs off with the reason ``APIThrottled``;
* a deletion that finds another's resource under its name treats its own as gone:
  its pending delete entry is closed as succeeded, and the note that says the
  resource was left alone is for the object's generation;
* a reconciler refuses a kind whose machine declares no states with the engine's
  definition error;
* a pass interrupted between connecting and acting still closes the provider's
  client;
* effects from :func:`~lifecycle.runtime.effects.connect` stage a closed entry
  (it rides on the next write) unless told to defer it; :class:`Effects` not told
  the object is Ready resumes a pending entry with its key; an entry closed before
  an act is staged once, and the act stages nothing more; what a call left is
  unknown when the provider's observe answers no Observation;
* an observation whose ownership mark is not text, or a second observation after
  a resumed create that is no Observation, is refused as ``InvalidObservation``.

Each test names the rule and asserts it through the reconciler on the embedded API
server, or through the runtime classes a pass uses.
"""

from __future__ import annotations

from contextlib import suppress
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import attrs
import pytest
from helpers import KIND, external

from lifecycle.core.contract import ManagedResource, ProviderConfig
from lifecycle.core.decide import Facts, decide
from lifecycle.core.errors import ExternalError, MachineDefinitionError
from lifecycle.core.kind import ADOPT, EXTERNAL_NAME, INTENT, INTENT_MAC, OWNER
from lifecycle.core.machine import LifecycleMachine
from lifecycle.core.ownership import mark_uid, owner_mark
from lifecycle.core.values import Completion, Creation, Observation, ResultKind
from lifecycle.kube.errors import TooManyRequests
from lifecycle.machines.database import DatabaseInstance, DatabaseInstanceMachine
from lifecycle.providers.simcloud import OWNER_TAG, DatabaseConnector, SimCloud
from lifecycle.providers.simcloud.client import DatabaseClient
from lifecycle.providers.simcloud.scenarios.harness import database_manifest, simulated_environment
from lifecycle.runtime import reads
from lifecycle.runtime.effects import Effects, connect, stored_intent
from lifecycle.runtime.journalkey import Journal
from lifecycle.runtime.reconciler import Reconciler
from lifecycle.testing import Environment

CREDS = ("AKIDEXAMPLE", "s3cr3t")
PARAMS = {"engine": "postgres", "storage_gb": 20}
M = DatabaseInstance.machine


class _Crash(BaseException):
    """The operator process dying (or being interrupted) in the middle of a pass."""


def _env(cloud: SimCloud, **options: Any) -> tuple[Environment, DatabaseConnector]:
    """An environment whose DatabaseInstance reconciler is built with only ``options``
    (the reconciler's own defaults otherwise) on ``cloud``."""
    env = Environment([(DatabaseInstance, DatabaseConnector(cloud))])
    env.provider_config()
    connector = DatabaseConnector(cloud)
    env.reconcilers[KIND] = Reconciler(env.operator_api, DatabaseInstance, connector,
                                       clock=env.clock.now, **options)
    return env, connector


# ------------------------------------------------------------------ the supporting reads
def test_a_reconciler_reads_the_namespace_afresh_on_every_pass_by_default(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Without ``reads_ttl`` nothing is reused: a namespace handed to another operator
    stops the very next pass, however little time went by (the reads' clock stands
    still here, so only a reconciler that caches nothing sees the change)."""
    monkeypatch.setattr(reads, "time", SimpleNamespace(monotonic=lambda: 1000.0))
    cloud = SimCloud(seed=1, create_polls=0)
    env, _ = _env(cloud)
    env.namespace("team-a")
    env.apply(database_manifest("db", "team-a"))
    env.reconcile(KIND, "db", "team-a")
    calls = len(cloud.calls)
    env.namespace("team-a", {OWNER: "other-operator"})
    step = env.reconcile(KIND, "db", "team-a")
    assert step.result is not None
    assert (step.result.kind, step.result.reason) == (ResultKind.DONE, "NotOwned")
    assert len(cloud.calls) == calls


# ------------------------------------------------------------------------------ adoption
def test_adoption_allowed_in_every_namespace_lets_an_object_adopt_anywhere() -> None:
    """``"*"`` among the namespaces allowing adoption allows it in every namespace: an
    object asking to adopt a resource it did not create takes it over and marks it."""
    cloud = SimCloud(seed=3, create_polls=0)
    cloud.create_instance(CREDS, "legacy", PARAMS)
    env, _ = _env(cloud, allow_adoption=frozenset({"*"}))
    env.namespace("team-a")
    env.apply(database_manifest("db", "team-a",
                                annotations={EXTERNAL_NAME: "legacy", ADOPT: "true"}))
    env.run_until_idle()
    assert env.state(KIND, "db", "team-a") == "ready"
    uid = env.get(KIND, "db", "team-a")["metadata"]["uid"]
    assert mark_uid(cloud.instances()["legacy"]["tags"][OWNER_TAG]) == uid


# ------------------------------------------------------------------- the reconcile's end
def test_a_throttled_reconcile_backs_off_saying_the_api_throttled_it() -> None:
    """A reconcile the API server throttles backs off no sooner than its Retry-After,
    with the reason ``APIThrottled``."""
    env, _ = simulated_environment(cloud=SimCloud(seed=1, create_polls=0))
    env.apply(database_manifest("db"))
    env.faults.fail("get", KIND, "db", error=TooManyRequests(retry_after=42), times=1)
    step = env.reconcile(KIND, "db")
    assert step.result is not None
    assert (step.result.kind, step.result.after, step.result.reason) == (
        ResultKind.BACKOFF, 42.0, "APIThrottled")


# ------------------------------------------------------- deleting beside another's resource
def _kept(cloud: SimCloud) -> Environment:
    """An environment holding ``db``, Ready, which another finalizer keeps once deleted."""
    env, _ = simulated_environment(cloud=cloud)
    doc = database_manifest("db")
    doc["metadata"]["finalizers"] = ["example.com/keep"]
    env.apply(doc)
    env.run_until_idle()
    assert env.state(KIND, "db") == "ready"
    return env


def test_a_deletion_that_leaves_anothers_resource_notes_it_for_the_objects_generation() -> None:
    """The ``ExternalResourceLeftAlone`` note of a deletion that finds another's resource
    under the object's name is about the generation the pass reconciled."""
    cloud = SimCloud(seed=3, create_polls=0)
    cloud.create_instance(CREDS, "precious", PARAMS)
    env, _ = simulated_environment(cloud=cloud)
    doc = database_manifest("a", annotations={EXTERNAL_NAME: "precious"})
    doc["metadata"]["finalizers"] = ["example.com/keep"]
    env.apply(doc)
    env.reconcile(KIND, "a")
    env.delete(KIND, "a")
    env.reconcile(KIND, "a")
    obj = env.get(KIND, "a")
    note = env.condition(KIND, "a", "Informational")
    assert note is not None and note.reason == "ExternalResourceLeftAlone"
    assert note.observed_generation == obj["metadata"]["generation"]
    assert obj["status"]["observedGeneration"] == obj["metadata"]["generation"]


def test_a_deletion_that_finds_anothers_resource_under_its_name_closes_its_pending_delete(
) -> None:
    """A deletion interrupted after its delete was journalled, whose name another
    object's resource holds by the next pass, treats its own resource as gone: the
    finalizer goes, the other resource is left alone, and the pending delete entry is
    closed as succeeded (a later call gets a new key)."""
    cloud = SimCloud(seed=3, create_polls=0)
    env = _kept(cloud)
    name = external(env)
    env.delete(KIND, "db")

    def dying(*args: Any, **kwargs: Any) -> Any:
        raise _Crash

    real, cloud.delete_instance = cloud.delete_instance, dying  # type: ignore[method-assign]
    try:
        with suppress(_Crash):
            env.reconcile(KIND, "db")
    finally:
        cloud.delete_instance = real  # type: ignore[method-assign]
    pending = stored_intent(env.get(KIND, "db")["metadata"]["annotations"])
    assert pending is not None and (pending.operation, pending.outcome) == ("delete", "pending")
    cloud.remove_instance(name)
    cloud.create_instance(CREDS, name, PARAMS,
                          tags={OWNER_TAG: owner_mark("lifecycle", "uid-elsewhere")})
    env.reconcile(KIND, "db")
    obj = env.get(KIND, "db")
    assert env.state(KIND, "db") == "deleted"
    assert obj["metadata"]["finalizers"] == ["example.com/keep"]
    assert cloud.instances()[name]["state"] == "available"
    closed = stored_intent(obj["metadata"]["annotations"])
    assert closed is not None and (closed.key, closed.outcome) == (pending.key, "succeeded")


# -------------------------------------------------------------------- building a reconciler
class _Stateless(LifecycleMachine):
    """A claim machine that declares no states (the managed kinds' event check skips
    claim machines)."""

    is_claim = True


def test_a_reconciler_refuses_a_kind_whose_machine_declares_no_states() -> None:
    """Building a reconciler for a kind whose machine declares no states fails at once
    with the engine's definition error naming the machine."""
    kind = attrs.evolve(DatabaseInstance, machine=_Stateless)
    env, _ = simulated_environment()
    with pytest.raises(MachineDefinitionError, match=r"^_Stateless declares no states$"):
        Reconciler(env.operator_api, kind, DatabaseConnector(SimCloud(seed=1)))


# ----------------------------------------------------------------- the provider's client
class _InterruptedGuardMachine(DatabaseInstanceMachine):
    """The database machine whose ``failed_during_update`` guard is interrupted."""

    def failed_during_update(self, facts: Facts) -> bool:
        """Guard: never answers; the process is stopped while it runs."""
        raise _Crash


class _RecordingConnector(DatabaseConnector):
    """The simulated cloud's connector, keeping every client it connected."""

    def __init__(self, cloud: SimCloud) -> None:
        super().__init__(cloud)
        self.clients: list[Any] = []

    def connect(self, resource: ManagedResource, config: ProviderConfig) -> Any:
        """Connect, and keep the client."""
        client = super().connect(resource, config)
        self.clients.append(client)
        return client


def test_a_pass_interrupted_between_connecting_and_acting_still_closes_the_client() -> None:
    """A pass that ends after it connected, before the effects act (here a guard the
    decision evaluates is interrupted), closes the provider's client all the same."""
    cloud = SimCloud(seed=1, create_polls=5)
    connector = _RecordingConnector(cloud)
    env = Environment([(attrs.evolve(DatabaseInstance, machine=_InterruptedGuardMachine),
                        connector)])
    env.provider_config()
    env.apply(database_manifest("db"))
    env.reconcile(KIND, "db")
    assert env.state(KIND, "db") == "creating"
    obj = env.get(KIND, "db")
    env.api.replace_status({**obj, "status": {**obj["status"], "state": "failed"}})
    connector.clients.clear()
    with pytest.raises(_Crash):
        env.reconcile(KIND, "db")
    assert len(connector.clients) == 1
    assert connector.clients[0].closed


# ------------------------------------------------------------------------------ the effects
AT = datetime(2026, 1, 1, tzinfo=UTC)
RESOURCE = ManagedResource(kind="K", namespace="ns", name="n", uid="u", generation=1,
                           external_name="x", parameters=None)


class _Port:
    """The reconciled object's annotations, recording how each one was set."""

    def __init__(self) -> None:
        self.values: dict[str, str] = {}
        self.calls: list[tuple[str, str]] = []

    def annotations(self) -> dict[str, str]:
        """The annotations, staged and deferred ones applied."""
        return dict(self.values)

    def annotate(self, key: str, value: str) -> None:
        """Commit one annotation."""
        self.calls.append(("annotate", key))
        self.values[key] = value

    def stage(self, key: str, value: str) -> None:
        """Set one annotation with the next write."""
        self.calls.append(("stage", key))
        self.values[key] = value

    def defer(self, key: str, value: str) -> None:
        """Set one annotation with the next write, if the pass makes one."""
        self.calls.append(("defer", key))
        self.values[key] = value


class _Client:
    """A provider client: every call answers ``answer``; observe answers ``seen``."""

    def __init__(self, answer: Any = None, seen: Any = None) -> None:
        self.answer = answer
        self.seen = Observation(exists=True) if seen is None else seen
        self.observed = 0

    def connect(self, resource: ManagedResource, config: ProviderConfig) -> _Client:
        """Be the connector too: connecting gives this client."""
        return self

    def observe(self, resource: ManagedResource) -> Any:
        """Answer ``seen``."""
        self.observed += 1
        return self.seen

    def create(self, resource: ManagedResource) -> Any:
        """Answer ``answer``."""
        return self.answer

    def update(self, resource: ManagedResource) -> Any:
        """Answer ``answer``."""
        return self.answer

    def delete(self, resource: ManagedResource) -> Any:
        """Answer ``answer``."""
        return self.answer


def test_the_effects_connect_makes_stage_a_closed_entry_unless_told_to_defer_it() -> None:
    """By default the effects :func:`connect` returns stage a closed journal entry, so
    that it rides on the object's next write: it is deferred (waiting for a write the
    pass makes anyway) only when the caller asks."""
    client = _Client(answer=Creation())
    config = ProviderConfig(name="default", spec={}, credentials={})
    port = _Port()
    effects, seen = connect(client, RESOURCE, config, port, lambda: AT, Journal())
    assert seen.exists
    effects.create()
    port.calls.clear()
    assert effects.close_observed(Observation(exists=True))
    assert port.calls == [("stage", INTENT_MAC), ("stage", INTENT)]
    closed = stored_intent(port.values)
    assert closed is not None and (closed.operation, closed.outcome) == ("create", "succeeded")


def test_effects_not_told_the_object_is_ready_resume_a_pending_entry_with_its_key() -> None:
    """Effects that defer closes but are not told the stored state is Ready take a
    pending entry as interrupted: the next call of that operation resumes it with its
    key, so a provider that remembers client tokens does nothing twice."""
    port = _Port()
    effects = Effects(_Client(), RESOURCE, port, lambda: AT, defer_closes=True)
    effects.update()
    first = stored_intent(port.values)
    effects.update()
    again = stored_intent(port.values)
    assert first is not None and again is not None
    assert (again.key, again.outcome) == (first.key, "pending")


def test_an_entry_closed_before_an_act_is_staged_once_and_the_act_stages_nothing_more() -> None:
    """An entry closed outside an act is staged there and then; an act that follows
    (closing nothing, calling nothing) stages nothing more and ends normally."""
    port = _Port()
    effects = Effects(_Client(), RESOURCE, port, lambda: AT)
    effects.update()
    assert effects.close_observed(Observation(exists=True))
    staged = [call for call in port.calls if call[1] == INTENT]
    assert staged == [("annotate", INTENT), ("stage", INTENT)]
    facts = Facts(state="ready", observation=Observation(exists=True))
    decision = decide(M, facts)
    assert not decision.actions
    acted, notices, following = effects.act(facts, decision, M.guard_host(), M,
                                            entry=effects.trusted())
    assert (acted, notices, following) == (decision, (), None)
    assert [call for call in port.calls if call[1] == INTENT] == staged
    closed = stored_intent(port.values)
    assert closed is not None and (closed.operation, closed.outcome) == ("update", "succeeded")
    assert effects.closed


def test_what_a_call_left_is_unknown_when_observe_answers_no_observation() -> None:
    """After a call that says it finished, the resource is observed once more; when the
    provider's observe answers something that is not an Observation, what the call left
    is unknown (None) and the next pass observes."""
    client = _Client(answer=Completion(finished=True), seen={"exists": True})
    effects = Effects(client, RESOURCE, _Port(), lambda: AT)
    effects.update()
    assert effects.after() is None
    assert client.observed == 1


# ------------------------------------------------------------------- what observe answers
def test_an_observation_whose_ownership_mark_is_not_text_fails_the_pass_as_invalid(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A provider whose observe reports an ownership mark that is not text answers an
    invalid observation: the pass fails ``InvalidObservation`` naming the mark's type,
    nothing is created, and the client is closed."""
    cloud = SimCloud(seed=1, create_polls=0)
    connector = _RecordingConnector(cloud)
    env = Environment([(DatabaseInstance, connector)])
    env.provider_config()
    monkeypatch.setattr(DatabaseClient, "observe",
                        lambda self, resource: Observation(exists=True, owner=42))
    env.apply(database_manifest("db"))
    step = env.reconcile(KIND, "db")
    assert step.error is None
    failed = env.condition(KIND, "db", "Failed")
    assert failed is not None and failed.status.value == "True"
    assert (failed.reason, failed.message) == (
        "InvalidObservation", "observe returned an ownership mark of type int, not text")
    assert cloud.count("create") == 0
    assert [client.closed for client in connector.clients] == [True]


class _Resumed(_Client):
    """A provider that names what it creates: nothing is seen under the recorded name,
    the repeated create answers the name it assigned, and observe then answers
    ``again``."""

    def __init__(self, again: Any) -> None:
        super().__init__(answer=Creation(external_name="x-assigned"),
                         seen=Observation.absent())
        self.again = again
        self.closed = False

    def observe(self, resource: ManagedResource) -> Any:
        """Nothing under the recorded name; ``again`` under the assigned one."""
        self.observed += 1
        return self.seen if resource.external_name == "x" else self.again

    def close(self) -> None:
        """Note the close."""
        self.closed = True


def _interrupted_create() -> tuple[_Port, Journal]:
    """An object's annotations holding a create journalled and then interrupted (the
    process died in the call), and the journal that sealed it."""
    port, journal = _Port(), Journal()
    crashing = _Client()

    def dying(resource: ManagedResource) -> Any:
        raise _Crash

    crashing.create = dying  # type: ignore[method-assign]
    with suppress(_Crash):
        Effects(crashing, RESOURCE, port, lambda: AT, journal).create()
    pending = stored_intent(port.values)
    assert pending is not None and (pending.operation, pending.outcome) == ("create", "pending")
    return port, journal


def test_what_observe_answers_after_a_resumed_create_is_checked_as_the_first_answer() -> None:
    """A deletion that resumes an interrupted create observes the resource again under
    the name the provider assigned; an answer that is not an Observation is refused there
    as on the first observation (``InvalidObservation``), and the client is closed."""
    config = ProviderConfig(name="default", spec={}, credentials={})
    port, journal = _interrupted_create()
    client = _Resumed(again=Observation(exists=True, owner=""))
    effects, seen = connect(client, RESOURCE, config, port, lambda: AT, journal, resume=True)
    assert seen.exists and effects.resource.external_name == "x-assigned"
    port, journal = _interrupted_create()
    client = _Resumed(again={"exists": True})
    with pytest.raises(ExternalError) as refused:
        connect(client, RESOURCE, config, port, lambda: AT, journal, resume=True)
    assert (refused.value.reason, str(refused.value)) == (
        "InvalidObservation", "observe returned dict, not an Observation")
    assert client.observed == 2 and client.closed
