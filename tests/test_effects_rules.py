"""Rules of a pass's effects and of the intent journal (:mod:`lifecycle.runtime.effects`):

* a kind whose creates finish (``observe_after_create``) observes again after a create
  whose answer said nothing; by default an act does not;
* no pass leaves a provider's client open: a connect whose observe fails closes the
  client it opened, and a pass interrupted between connecting and acting still
  closes it;
* an observation whose ownership mark is not text, or a second observation after a
  resumed create that is no Observation, is refused as ``InvalidObservation``;
* a deletion of an object whose create was interrupted resumes the create with its
  journalled key and deletes what it made under the recorded name; a resumed create
  whose answer is no :class:`~lifecycle.core.values.Creation` names nothing;
  :meth:`Effects.resume_create <lifecycle.runtime.effects.Effects.resume_create>`
  answers the name the provider assigned;
* effects from :func:`~lifecycle.runtime.effects.connect` stage a closed entry (it
  rides on the next write) unless told to defer it, and take the stored state as not
  Ready by default, so a pending entry for the same call is resumed with its key;
* a cluster-scoped object's journal entries are sealed for the empty namespace, the
  subject the next pass reads them under, so a retried create gets a new key;
* an entry closed before an act is staged once, and the act stages nothing more;
* :func:`~lifecycle.runtime.effects.closed_intent` closes only what it knows to have
  taken effect: a pending entry of an operation other than create, update or delete
  is never closed, and effects holding such an entry stage nothing when they observe;
* what a call left is unknown (None) when the provider's observe answers no
  Observation, and, without ``observe_again``, after a call whose answer neither
  describes the resource nor says the call finished;
* :meth:`Effects.act <lifecycle.runtime.effects.Effects.act>` starts from the journal
  entry it is handed; within an act each entry written is the one answered next,
  without reading the object's annotations again; outside an act
  :meth:`Effects.trusted <lifecycle.runtime.effects.Effects.trusted>` reads the
  object's journal.

Each test names the rule and asserts it through the harness's objects and the
simulated cloud, or through the runtime classes a pass uses.
"""

from __future__ import annotations

from contextlib import suppress
from datetime import UTC, datetime
from typing import Any

import attrs
import pytest
from helpers import (
    CLUSTER_SCOPED,
    KIND,
    AnnotationsPort,
    Crash,
    cluster_scoped_manifest,
    reconcile_dying_in,
)

from lifecycle.core.contract import ManagedResource, ProviderConfig
from lifecycle.core.decide import Choice, Decision, Facts, decide
from lifecycle.core.errors import ExternalError
from lifecycle.core.kind import EXTERNAL_NAME, FINALIZER, INTENT, INTENT_MAC
from lifecycle.core.values import Completion, Creation, Intent, Observation
from lifecycle.machines.database import DatabaseInstance, DatabaseInstanceMachine
from lifecycle.providers.simcloud import DatabaseConnector, SimCloud
from lifecycle.providers.simcloud.client import DatabaseClient
from lifecycle.providers.simcloud.scenarios.harness import database_manifest
from lifecycle.runtime.effects import Effects, closed_intent, connect, stored_intent
from lifecycle.runtime.journalkey import Journal, subject_of
from lifecycle.testing import Environment


def _environment(kind: Any = DatabaseInstance) -> tuple[Environment, SimCloud]:
    cloud = SimCloud(seed=1, create_polls=0)
    env = Environment([(kind, DatabaseConnector(cloud))])
    env.provider_config()
    return env, cloud


M = DatabaseInstance.machine


KEY = b"k" * 32


# ---------------------------------------------------------- a kind whose creates finish
def _first_pass_after_a_create_describing_nothing(monkeypatch: pytest.MonkeyPatch,
                                                  kind: Any) -> str:
    """The state the first pass leaves when the create answers neither an observation
    nor ``finished`` (the instance is available at once)."""
    create = DatabaseClient.create

    def answer(self: DatabaseClient, resource: Any) -> Creation:
        return attrs.evolve(create(self, resource), observation=None, finished=False)

    monkeypatch.setattr(DatabaseClient, "create", answer)
    env, _ = _environment(kind)
    env.apply(database_manifest("db"))
    return str(env.reconcile(KIND, "db").after)


def test_a_kind_whose_creates_finish_observes_again_after_a_create_that_said_nothing(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``Kind.observe_after_create``: the create has finished when it returns, so even a
    create whose answer describes nothing is observed once more in the same pass, and the
    object is Ready after it. Without the flag the pass waits in ``creating``."""
    finishing = attrs.evolve(DatabaseInstance, observe_after_create=True)
    assert _first_pass_after_a_create_describing_nothing(monkeypatch, finishing) == "ready"
    assert _first_pass_after_a_create_describing_nothing(
        monkeypatch, DatabaseInstance) == "creating"


# -------------------------------------------------------------------- the client's life
def test_a_client_whose_observe_fails_is_closed_before_the_pass_ends(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A connect whose observe fails (a handled error, or anything the provider raised)
    closes the client it opened before the error becomes the pass's condition: no pass
    leaves a client open."""
    opened: list[DatabaseClient] = []
    connect = DatabaseConnector.connect

    def spy(self: DatabaseConnector, resource: Any, config: Any) -> Any:
        client = connect(self, resource, config)
        opened.append(client)
        return client

    def unavailable(self: DatabaseClient, resource: Any) -> Any:
        raise ExternalError("describe failed: the region is unavailable",
                            reason="ProviderUnavailable")

    def broken(self: DatabaseClient, resource: Any) -> Any:
        raise KeyError("endpoint")

    monkeypatch.setattr(DatabaseConnector, "connect", spy)
    env, _ = _environment()
    for observe, reason in ((unavailable, "ProviderUnavailable"),
                            (broken, "ProviderClientError")):
        monkeypatch.setattr(DatabaseClient, "observe", observe)
        env.apply(database_manifest("db"))
        env.reconcile(KIND, "db")
        synced = env.condition(KIND, "db", "Synced")
        assert synced is not None and synced.status.value == "False"
        assert env.get(KIND, "db")["status"]["failure"]["reason"] == reason
    assert len(opened) == 2
    assert [client.closed for client in opened] == [True, True]


class _InterruptedGuardMachine(DatabaseInstanceMachine):
    """The database machine whose ``failed_during_update`` guard is interrupted."""

    def failed_during_update(self, facts: Facts) -> bool:
        """Guard: never answers; the process is stopped while it runs."""
        raise Crash


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
    with pytest.raises(Crash):
        env.reconcile(KIND, "db")
    assert len(connector.clients) == 1
    assert connector.clients[0].closed


# ----------------------------------------- a create resumed while its object is deleted
ASSIGNING = attrs.evolve(DatabaseInstance, names_assigned=True)


def _created_then_interrupted_before_the_call() -> tuple[Environment, SimCloud, str]:
    """A kind whose provider names what it creates; the first pass commits its pending
    create entry, then dies before the cloud sees the call. The object is then deleted.
    Returns the environment, the cloud and the external name the object records."""
    env, cloud = _environment(ASSIGNING)
    env.apply(database_manifest("db"))
    reconcile_dying_in(env, cloud, "create_instance")
    meta = env.get(KIND, "db")["metadata"]
    assert '"outcome": "pending"' in meta["annotations"][INTENT]
    assert FINALIZER in meta["finalizers"] and cloud.instances() == {}
    env.delete(KIND, "db")
    return env, cloud, meta["annotations"][EXTERNAL_NAME]


def test_a_deletion_deletes_what_the_resumed_create_made_under_the_recorded_name() -> None:
    """Deleting an object whose create was interrupted repeats the create with its
    journalled key to learn the resource's name. A provider that keeps the requested name
    names nothing new, and the repeated call may have made the resource only now: it is
    observed again under the recorded name and deleted, never left behind."""
    env, cloud, name = _created_then_interrupted_before_the_call()
    env.advance(600)
    assert not env.exists(KIND, "db")
    assert cloud.creations(name) == 1  # made by the resumed create, with the journalled key
    assert name not in cloud.instances()


def test_a_resumed_create_whose_answer_is_no_creation_names_nothing(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A resumed create is read as its answer declares: an answer that is not a
    :class:`Creation` names nothing. The recorded name is observed again, nothing is there,
    and the deletion ends at once, without a failure."""
    env, cloud, _ = _created_then_interrupted_before_the_call()
    monkeypatch.setattr(DatabaseClient, "create", lambda self, resource: None)
    step = env.reconcile(KIND, "db")
    assert step.error is None and step.result is not None
    assert step.result.reason == "Deleted"
    assert not env.exists(KIND, "db") and cloud.instances() == {}


# -------------------------------------------------------------------------- the effects
AT = datetime(2026, 1, 1, tzinfo=UTC)


RESOURCE = ManagedResource(kind="K", namespace="ns", name="n", uid="u", generation=1,
                           external_name="x", parameters=None)


class _Client:
    """A provider client noting each call's idempotency key: create answers ``answer``
    (a plain :class:`Creation` when none is given), update and delete answer
    ``answer``; observe counts and answers ``seen`` (that the resource exists, unless
    told otherwise)."""

    def __init__(self, answer: Any = None, seen: Any = None) -> None:
        self.answer = answer
        self.seen = Observation(exists=True, message="observed") if seen is None else seen
        self.observed = 0
        self.keys: list[str | None] = []

    def connect(self, resource: ManagedResource, config: ProviderConfig) -> _Client:
        """Be the connector too: connecting gives this client."""
        return self

    def observe(self, resource: ManagedResource) -> Any:
        """Answer ``seen`` (counted)."""
        self.observed += 1
        return self.seen

    def create(self, resource: ManagedResource) -> Any:
        """Note the idempotency key; answer ``answer``, or a plain Creation."""
        self.keys.append(resource.idempotency_key)
        return Creation() if self.answer is None else self.answer

    def update(self, resource: ManagedResource) -> Any:
        """Note the idempotency key; answer ``answer``."""
        self.keys.append(resource.idempotency_key)
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
    port = AnnotationsPort()
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
    port = AnnotationsPort()
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
    port = AnnotationsPort()
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
    effects = Effects(client, RESOURCE, AnnotationsPort(), lambda: AT)
    effects.update()
    assert effects.after() is None
    assert client.observed == 1


# ----------------------------------------------------------------- what observe answers
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


def _interrupted_create() -> tuple[AnnotationsPort, Journal]:
    """An object's annotations holding a create journalled and then interrupted (the
    process died in the call), and the journal that sealed it."""
    port, journal = AnnotationsPort(), Journal()
    crashing = _Client()

    def dying(resource: ManagedResource) -> Any:
        raise Crash

    crashing.create = dying  # type: ignore[method-assign]
    with suppress(Crash):
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


# ------------------------------------------------------------------- the intent journal
class _FailingFirstCreate:
    """The simulated cloud's connector; its client's first create fails (a provider error),
    and every create's idempotency key is recorded."""

    def __init__(self, cloud: SimCloud) -> None:
        self.inner = DatabaseConnector(cloud)
        self.keys: list[str] = []

    def connect(self, resource: ManagedResource, config: ProviderConfig) -> Any:
        client, keys = self.inner.connect(resource, config), self.keys

        class Client:
            def __getattr__(self, name: str) -> Any:
                return getattr(client, name)

            def create(self, r: ManagedResource) -> Creation:
                keys.append(r.idempotency_key)
                if len(keys) == 1:
                    raise ExternalError("the provider is unavailable", reason="Unavailable")
                return client.create(r)

        return Client()


def test_a_cluster_scoped_object_s_failed_create_is_retried_under_a_new_key() -> None:
    """A cluster-scoped object's journal entry is sealed for the empty namespace, the
    subject the next pass reads it under: after a create failed, the next pass trusts
    the failed entry and retries under the next key, never under the failed one's."""
    connector = _FailingFirstCreate(SimCloud(seed=1, create_polls=0))
    env = Environment([(CLUSTER_SCOPED, connector)])
    env.provider_config()
    env.apply(cluster_scoped_manifest("db"))
    env.reconcile(KIND, "db", None)
    env.reconcile(KIND, "db", None)
    uid = env.get(KIND, "db", None)["metadata"]["uid"]
    assert connector.keys == [f"{uid}/create/1/1", f"{uid}/create/1/2"]


class _AbsentConnector:
    """A connector whose resource is not there, recording each create's key."""

    def __init__(self) -> None:
        self.keys: list[str] = []

    def connect(self, resource: ManagedResource, config: ProviderConfig) -> Any:
        keys = self.keys

        class Client:
            def observe(self, r: ManagedResource) -> Observation:
                return Observation.absent()

            def create(self, r: ManagedResource) -> Creation:
                keys.append(r.idempotency_key)
                return Creation()

        return Client()


def test_connect_takes_the_stored_state_as_not_ready_by_default() -> None:
    """Unless told the stored state is Ready, the effects ``connect`` makes resume a pending
    entry for the same call and generation with its key (a crash interrupted it), even
    for a kind whose closes are deferred."""
    journal = Journal(KEY)
    resource = ManagedResource(kind=KIND, namespace="default", name="db", uid="u-1",
                               generation=2, external_name="orders", parameters=None)
    pending = Intent("create", "u-1/create/2/1", 2, "2026-01-01T00:00:00Z")
    sealed = journal.mac(pending, subject_of(KIND, "default", "db", "u-1", "orders"))
    port = AnnotationsPort({INTENT: pending.to_json(), INTENT_MAC: sealed})
    connector = _AbsentConnector()
    effects, observation = connect(connector, resource, ProviderConfig("default", {}, {}),
                                   port, lambda: datetime(2026, 1, 2, tzinfo=UTC), journal,
                                   defer_closes=True)
    assert not observation.exists
    effects.create()
    assert connector.keys == ["u-1/create/2/1"]


class _NamingClient:
    """A provider client whose create answers the name it assigned."""

    def __init__(self, assigned: str) -> None:
        self.assigned = assigned
        self.keys: list[str | None] = []

    def observe(self, resource: ManagedResource) -> Observation:
        """Nothing is seen."""
        return Observation(exists=False)

    def create(self, resource: ManagedResource) -> Creation:
        """Note the idempotency key; answer the assigned name."""
        self.keys.append(resource.idempotency_key)
        return Creation(external_name=self.assigned)


def test_a_resumed_create_answers_the_name_the_provider_assigned() -> None:
    """A pending create resumed with its journalled key answers the name the provider
    assigned (committed to the annotation): the name the resource is observed under."""
    resource = ManagedResource(kind="K", namespace="ns", name="n", uid="u", generation=1,
                               external_name="requested", parameters=None)
    journal = Journal()
    entry = Intent("create", "u/create/1/1", 1, "2026-01-01T00:00:00Z")
    subject = subject_of("K", "ns", "n", "u", "requested")
    port = AnnotationsPort({INTENT: entry.to_json(), INTENT_MAC: journal.mac(entry, subject)})
    client = _NamingClient("assigned-7")
    effects = Effects(client, resource, port, lambda: AT, journal)
    assert effects.resume_create() == "assigned-7"
    assert client.keys == ["u/create/1/1"]
    assert port.values[EXTERNAL_NAME] == "assigned-7"
    assert effects.resource.external_name == "assigned-7"


# --------------------------------------------------------------------- closing an entry
def test_a_pending_entry_of_an_operation_the_engine_does_not_know_is_never_closed() -> None:
    """Only a create, an update or a delete has an effect an observation can show: an
    entry of any other operation (written by another version of the operator, say) is
    left pending whether the resource exists, is up to date or is absent; the known
    operations still close (the rule is not "never close")."""
    pending = Intent("resize", "u/resize/1/1", 1, "2026-01-01T00:00:00Z")
    for seen in (Observation(exists=True, up_to_date=True), Observation(exists=True),
                 Observation(exists=False)):
        assert closed_intent(pending, seen) is None
    create = Intent("create", "u/create/1/1", 1, "2026-01-01T00:00:00Z")
    closed = closed_intent(create, Observation(exists=True))
    assert closed is not None and closed.outcome == "succeeded"


def test_effects_holding_a_sealed_entry_of_an_unknown_operation_stage_nothing() -> None:
    """Effects whose object holds a pending entry of an unknown operation, sealed by this
    operator for this object (so trusted), close nothing when they observe the resource:
    ``close_observed`` answers False and no annotation is staged or deferred, so the
    entry on the object stays as it was."""
    journal = Journal()
    entry = Intent("resize", "u/resize/1/1", 1, "2026-01-01T00:00:00Z")
    subject = subject_of(RESOURCE.kind, RESOURCE.namespace, RESOURCE.name, RESOURCE.uid,
                         str(RESOURCE.external_name))
    port = AnnotationsPort({INTENT: entry.to_json(), INTENT_MAC: journal.mac(entry, subject)})
    effects = Effects(_Client(), RESOURCE, port, lambda: AT, journal)
    assert effects.trusted() == entry  # trusted: the rule is about the operation alone
    assert not effects.close_observed(Observation(exists=True, up_to_date=True))
    assert not effects.close_observed(Observation(exists=False))
    assert port.calls == []
    assert port.values[INTENT] == entry.to_json()


# --------------------------------------------------------------------- what a call left
def test_what_a_call_left_is_unknown_without_observing_unless_asked_to_observe_again(
) -> None:
    """After an update whose answer neither describes the resource nor says it finished,
    ``after()`` (``observe_again`` left at its default) answers None without calling
    observe: the next pass observes. Asked to observe again, it does, once."""
    client = _Client(answer=Completion())
    effects = Effects(client, RESOURCE, AnnotationsPort(), lambda: AT)
    effects.update()
    assert effects.after() is None
    assert client.observed == 0
    seen = effects.after(observe_again=True)
    assert seen is not None and seen.message == "observed" and client.observed == 1


# ------------------------------------------------------------------------------ the act
class _Host:
    """A machine host whose one action updates twice, noting the entry trusted between."""

    def __init__(self) -> None:
        self.between: Intent | None = None

    def twice(self, effects: Effects) -> None:
        """Update, note the trusted entry, update again."""
        effects.update()
        self.between = effects.trusted()
        effects.update()


SUBJECT = subject_of("K", "ns", "n", "u", "x")
UPDATING = Decision(source="ready", choice=Choice("update", "UpdateRequested"),
                    actions=("twice",))


def test_an_act_starts_from_the_entry_it_is_handed() -> None:
    """The act's first call continues from the handed entry (a pending update of this
    generation is resumed with its key), not from what the annotations hold."""
    pending = Intent("update", "u/update/1/4", 1, "2026-01-01T00:00:00Z")
    port = AnnotationsPort()
    client = _Client()
    effects = Effects(client, RESOURCE, port, lambda: AT, Journal())
    effects.act(Facts(state="ready"), UPDATING, _Host(), DatabaseInstance.machine,
                entry=pending)
    assert client.keys[0] == "u/update/1/4"
    assert port.reads == 0


def test_within_an_act_the_entry_written_is_the_one_answered() -> None:
    """Between two calls of one act, the trusted entry is the one the first call wrote,
    answered without reading the object's annotations again: the second call resumes
    that pending entry's key."""
    journal = Journal()
    port = AnnotationsPort()
    client = _Client()
    effects = Effects(client, RESOURCE, port, lambda: AT, journal)
    host = _Host()
    effects.act(Facts(state="ready"), UPDATING, host, DatabaseInstance.machine, entry=None)
    assert host.between is not None and host.between.key == "u/update/1/1"
    assert client.keys == ["u/update/1/1", "u/update/1/1"]
    assert port.reads == 0


def test_outside_an_act_the_trusted_entry_is_read_from_the_object() -> None:
    """Once an act is over, :meth:`Effects.trusted` reads the object's journal again:
    an entry written on the object afterwards is the one it answers."""
    journal = Journal()
    port = AnnotationsPort()
    effects = Effects(_Client(), RESOURCE, port, lambda: AT, journal)
    effects.act(Facts(state="ready"), Decision(source="ready", choice=Choice(None, "Idle")),
                _Host(), DatabaseInstance.machine)
    later = Intent("delete", "u/delete/1/1", 1, "2026-01-01T00:00:00Z")
    port.values.update({INTENT: later.to_json(), INTENT_MAC: journal.mac(later, SUBJECT)})
    assert effects.trusted() == later


def test_an_act_does_not_observe_after_a_create_by_default() -> None:
    """A create that says nothing of its effect (not finished, no observation) is not
    observed again by an act left at its default: the next pass observes."""
    machine = DatabaseInstance.machine
    facts = Facts(state="unclaimed", observation=Observation(exists=False))
    decision = decide(machine, facts)
    assert decision.actions
    client = _Client(Creation())
    effects = Effects(client, RESOURCE, AnnotationsPort(), lambda: AT, Journal())
    decided, _, following = effects.act(facts, decision, machine.guard_host(), machine)
    assert decided.error is None and client.keys
    assert client.observed == 0
    assert following is None
