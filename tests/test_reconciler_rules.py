"""Rules of the reconciler's pass (:mod:`lifecycle.runtime.reconciler`):

* the gate: a namespace owned by this operator (its ``operator_id``) is reconciled,
  never skipped as another operator's; the ``NotOwned`` Event says which operator owns
  the namespace; the operator-wide ``default_policy`` applies to an object and
  namespace that set none (under ``skip`` nothing is created);
* the supporting reads are read afresh on every pass unless the reconciler is given a
  ``reads_ttl``; with one, they are cached per namespace, so an object is judged by
  its own namespace's annotations, never by those read for another namespace;
* ``"*"`` among the namespaces allowing adoption allows it everywhere;
* a reconciler given a journal key seals every entry with it, the one written before
  a create included;
* an API error other than NotFound or throttling ends the reconcile as an error that
  says so and names what the API server answered; a reconcile the API server
  throttles backs off with the reason ``APIThrottled``;
* a deletion that finds another's resource under its name treats its own as gone: its
  pending delete entry is closed as succeeded, and its ``ExternalResourceLeftAlone``
  note is for the object's generation (its quoting of the name:
  ``test_runtime_rules_extra.py``);
* a reconciler refuses a kind whose machine declares no states with the engine's
  definition error;
* a reconciler given an index of external names (``names``) claims in that index; the
  pass that removes the finalizer releases the object's external name, so another
  object takes it although the first one lingers under another finalizer;
* a pass (of the reconciler's ``pass_type``) starts in the state the gate restored
  from the object's status;
* a machine's guards see the unmarked resource an object owns as out of date
  (``up_to_date`` False);
* an action that runs without a provider (an orphaning deletion) is guarded like any
  other: an error of kind code fails the pass with ``ProviderClientError``, naming
  only its class, and an API error propagates for the work queue's backoff;
* a deletion does not resolve references: an object being deleted whose references
  cannot be resolved is still deleted, its resource with it.

Each test names the rule and asserts it through the reconciler on the embedded API
server.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, ClassVar

import attrs
import pytest
from helpers import KIND, external, name_holder, ready, reconcile_dying_in
from statemachine import State

from lifecycle.core.decide import Facts, ReconcilePolicy
from lifecycle.core.errors import MachineDefinitionError
from lifecycle.core.kind import ADOPT, EXTERNAL_NAME, FINALIZER, INTENT, OWNER
from lifecycle.core.machine import LifecycleMachine
from lifecycle.core.ownership import mark_uid, owner_mark
from lifecycle.core.references import UnresolvedReference
from lifecycle.core.values import ResultKind
from lifecycle.kube.errors import ApiError, NotFound, TooManyRequests
from lifecycle.machines.database import DatabaseInstance, DatabaseInstanceMachine
from lifecycle.machines.managed import ManagedResourceMachine
from lifecycle.providers.simcloud import OWNER_TAG, DatabaseConnector, SimCloud
from lifecycle.providers.simcloud.scenarios.harness import database_manifest, simulated_environment
from lifecycle.runtime import reads
from lifecycle.runtime.effects import Inputs, stored_intent
from lifecycle.runtime.journalkey import Journal, process_key, subject_of
from lifecycle.runtime.names import NameIndex
from lifecycle.runtime.reconciler import Pass, Reconciler
from lifecycle.runtime.references import References
from lifecycle.testing import Environment

#: A configured journal key (64 hex digits), not this process's own.
KEY = b"0123456789abcdef" * 4


def _stored(name: str = "db") -> tuple[Environment, dict[str, Any]]:
    """An environment holding the object ``name``, stored and never reconciled."""
    env, _ = simulated_environment(cloud=SimCloud(seed=1, create_polls=0))
    env.apply(database_manifest(name))
    return env, env.get(KIND, name)


CREDS = ("AKIDEXAMPLE", "s3cr3t")
PARAMS = {"engine": "postgres", "storage_gb": 20}


def _env(cloud: SimCloud, **options: Any) -> tuple[Environment, DatabaseConnector]:
    """An environment whose DatabaseInstance reconciler is built with only ``options``
    (the reconciler's own defaults otherwise) on ``cloud``."""
    env = Environment([(DatabaseInstance, DatabaseConnector(cloud))])
    env.provider_config()
    connector = DatabaseConnector(cloud)
    env.reconcilers[KIND] = Reconciler(env.operator_api, DatabaseInstance, connector,
                                       clock=env.clock.now, **options)
    return env, connector


M = ManagedResourceMachine


# ------------------------------------------------------------------- the intent journal
def test_the_journal_entry_of_a_create_is_sealed_with_the_operators_configured_key() -> None:
    """A reconciler given a journal key seals every entry with it, the one written by the
    pass's actions before a create included: another process holding the same key trusts
    the entry, and the process's own key does not."""
    assert process_key() != KEY
    cloud = SimCloud(seed=1, create_polls=0)
    env = Environment([(DatabaseInstance, DatabaseConnector(cloud))])
    env.provider_config()
    env.reconcilers[KIND] = Reconciler(env.operator_api, DatabaseInstance,
                                       DatabaseConnector(cloud), clock=env.clock.now,
                                       journal_key=KEY)
    env.apply(database_manifest("db"))
    reconcile_dying_in(env, cloud, "create_instance")
    meta = env.get(KIND, "db")["metadata"]
    assert INTENT in meta["annotations"]
    subject = subject_of(KIND, "default", "db", meta["uid"], meta["annotations"][EXTERNAL_NAME])
    entry = Journal(KEY).read(meta["annotations"], subject)
    assert entry is not None and entry.operation == "create" and entry.outcome == "pending"
    assert Journal().read(meta["annotations"], subject) is None


# --------------------------------------------------------------- the reconcile's errors
def test_a_reconcile_that_meets_an_api_error_says_so_and_names_the_error() -> None:
    """An API error other than NotFound or throttling ends the reconcile as an error for
    the work queue's backoff, saying it happened during reconcile and what the API server
    answered."""
    env, _ = _stored()
    env.faults.fail("get", KIND, "db", times=1)
    step = env.reconcile(KIND, "db")
    assert step.result is None and step.error is not None
    assert step.error.startswith("API error during reconcile: ")
    assert "injected fault: get" in step.error


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


# ----------------------------------------------------------------- the supporting reads
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


def test_cached_reads_keep_each_namespace_s_annotations_apart(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """With a ``reads_ttl`` the namespace's annotations are reused, but only for objects
    of that namespace: an object whose namespace is handed to another operator stops
    (``NotOwned``, no provider call) even right after a pass in a namespace that is
    ours (the reads' clock stands still here, so every cached read is still fresh)."""
    monkeypatch.setattr(reads, "time", SimpleNamespace(monotonic=lambda: 1000.0))
    cloud = SimCloud(seed=1, create_polls=0)
    env = Environment([(DatabaseInstance, DatabaseConnector(cloud))])
    env.provider_config()
    env.reconcilers[KIND] = Reconciler(env.operator_api, DatabaseInstance,
                                       DatabaseConnector(cloud), clock=env.clock.now,
                                       reads_ttl=60.0)
    env.namespace("team-a")
    env.namespace("team-b", {OWNER: "other-operator"})
    env.apply(database_manifest("db", "team-a"))
    env.apply(database_manifest("db", "team-b"))
    ours = env.reconcile(KIND, "db", "team-a")
    assert ours.result is not None and ours.result.reason != "NotOwned"
    calls = len(cloud.calls)
    theirs = env.reconcile(KIND, "db", "team-b")
    assert theirs.result is not None
    assert (theirs.result.kind, theirs.result.reason) == (ResultKind.DONE, "NotOwned")
    assert len(cloud.calls) == calls


# ----------------------------------------------------------------------------- adoption
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


# --------------------------------------------------- deleting beside another's resource
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
    reconcile_dying_in(env, cloud, "delete_instance")
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


# ---------------------------------------------------------------- building a reconciler
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


# -------------------------------------------------------------- the external-name index
def test_a_reconciler_given_an_index_of_names_claims_in_that_index() -> None:
    """``names`` is the index the reconciler claims in (shared, say, with a kind naming
    the same resources): a name another object holds there is refused with
    ``ExternalNameConflict`` and nothing is created, though no object of this kind in
    the cluster holds it."""
    holder = name_holder("a", "ua", "2026-01-01T00:00:00Z", held="orders")
    shared = NameIndex(lambda: [holder], lambda _ns, name: holder if name == "a" else None)
    cloud = SimCloud(seed=1, create_polls=0)
    env = Environment([(DatabaseInstance, DatabaseConnector(cloud))])
    env.provider_config()
    env.reconcilers[KIND] = Reconciler(env.operator_api, DatabaseInstance,
                                       DatabaseConnector(cloud), clock=env.clock.now,
                                       names=shared)
    env.apply(database_manifest("db", annotations={EXTERNAL_NAME: "orders"}))
    env.reconcile(KIND, "db")
    failed = env.condition(KIND, "db", "Failed")
    assert failed is not None and failed.reason == "ExternalNameConflict"
    assert failed.message == "external name 'orders' is held by default/a; choose another name"
    assert list(cloud.instances()) == []


def test_the_final_pass_releases_the_name_while_the_object_lingers() -> None:
    """The pass that deletes the resource and removes the finalizer gives the external
    name back: another object takes it (and creates the resource anew) although the
    first object is still stored, kept by another finalizer, its annotation naming it."""
    cloud = SimCloud(seed=1, create_polls=0)
    env, _ = simulated_environment(cloud=cloud)
    doc = database_manifest("a")
    doc["metadata"]["finalizers"] = ["example.com/keep"]
    env.apply(doc)
    env.run_until_idle()
    name = external(env, "a")
    env.delete(KIND, "a")
    env.run_until_idle()
    first = env.get(KIND, "a")
    assert first["metadata"]["finalizers"] == ["example.com/keep"]
    assert first["metadata"]["annotations"][EXTERNAL_NAME] == name
    assert name not in cloud.instances()
    env.apply(database_manifest("b", annotations={EXTERNAL_NAME: name}))
    step = env.reconcile(KIND, "b")
    assert env.condition(KIND, "b", "Failed") is None
    assert step.after == "ready"
    uid = env.get(KIND, "b")["metadata"]["uid"]
    assert mark_uid(cloud.instances()[name]["tags"][OWNER_TAG]) == uid


# ----------------------------------------------------------------------------- the gate
def test_a_namespace_owned_by_this_operator_is_reconciled() -> None:
    """The reconciler's ``operator_id`` is the one the namespace's owner annotation is
    compared with: a namespace this operator owns is reconciled (the resource is
    created), not skipped as ``NotOwned``."""
    env, cloud = simulated_environment(cloud=SimCloud(seed=1, create_polls=0),
                                       operator_id="op-a")
    env.namespace("team-a", {OWNER: "op-a"})
    env.apply(database_manifest("db", "team-a"))
    step = env.reconcile(KIND, "db", "team-a")
    assert step.result is not None and step.result.reason != "NotOwned"
    assert step.after == "ready"
    assert len(cloud.instances()) == 1
    assert not [e for e in env.events("db") if e["reason"] == "NotOwned"]


def test_the_operators_default_policy_applies_when_no_annotation_sets_one() -> None:
    """An object and namespace without a reconcile-policy annotation get the
    reconciler's ``default_policy``: under ``skip`` the absent resource is only
    reported, never created."""
    env, cloud = simulated_environment(cloud=SimCloud(seed=1, create_polls=0),
                                       default_policy=ReconcilePolicy.SKIP)
    env.apply(database_manifest("db"))
    env.reconcile(KIND, "db")
    assert list(cloud.instances()) == []
    assert cloud.count("create") == 0
    synced = env.condition(KIND, "db", "Synced")
    assert synced is not None and synced.reason == "ReconcileSkipped"
    assert synced.message.endswith("reconcile policy 'skip' forbids creating it")


def test_a_not_owned_event_says_which_operator_owns_the_namespace() -> None:
    """A pass skipped because another operator owns the namespace records a Warning
    ``NotOwned`` Event naming the namespace and its owner."""
    env, cloud = simulated_environment(cloud=SimCloud(seed=1, create_polls=0),
                                       operator_id="op-a")
    env.namespace("team-b", {OWNER: "op-b"})
    env.apply(database_manifest("db", "team-b"))
    step = env.reconcile(KIND, "db", "team-b")
    assert step.result is not None and step.result.reason == "NotOwned"
    events = [e for e in env.events("db") if e["reason"] == "NotOwned"]
    assert [(e["type"], e["message"]) for e in events] == [
        ("Warning", "namespace team-b is owned by operator 'op-b'; skipped")]
    assert list(cloud.instances()) == []


# ----------------------------------------------------------------------------- the pass
class _StatePass(Pass):
    """A pass that notes the state it started in when it takes the object over."""

    seen: ClassVar[list[Any]] = []

    def take_over(self, admit: Any, *, deleting: bool, modify: bool) -> Inputs:
        """Note the pass's state, then take over as a pass does."""
        _StatePass.seen.append(self.state)
        return super().take_over(admit, deleting=deleting, modify=modify)


class _StateReconciler(Reconciler):
    """A reconciler whose passes are :class:`_StatePass`."""

    pass_type = _StatePass


def test_a_pass_starts_in_the_state_the_gate_restored() -> None:
    """The pass a reconciler makes (of its ``pass_type``) carries the state restored from
    the object's status: the initial state for a new object, the stored one after."""
    cloud = SimCloud(seed=1, create_polls=0)
    env = Environment([(DatabaseInstance, DatabaseConnector(cloud))])
    env.provider_config()
    env.reconcilers[KIND] = _StateReconciler(env.operator_api, DatabaseInstance,
                                             DatabaseConnector(cloud), clock=env.clock.now)
    _StatePass.seen.clear()
    env.apply(database_manifest("db"))
    env.reconcile(KIND, "db")
    assert env.state(KIND, "db") == "ready"
    env.reconcile(KIND, "db")
    assert _StatePass.seen == ["unclaimed", "ready"]


# ------------------------------------------------------------------- the ownership rule
class _AdoptingMachine(DatabaseInstanceMachine):
    """The database machine plus an Adopting state, left by an update whose guard notes
    how up to date the observation it is given says the resource is."""

    adopting = State("Adopting")

    begin_adoption = M.unclaimed.to(adopting)
    update = adopting.to(M.updating, cond="notes_observation", on="update_external")

    state_docs = {**M.state_docs, "adopting": "taking over an existing resource"}
    ready_condition = {**M.ready_condition, "adopting": ("False", "Adopting")}
    #: ``up_to_date`` of each observation the guard was given.
    seen: ClassVar[list[Any]] = []

    def notes_observation(self, facts: Facts) -> bool:
        """Guard: note the observation's ``up_to_date``; always passes."""
        assert facts.observation is not None
        _AdoptingMachine.seen.append(facts.observation.up_to_date)
        return True


def test_guards_see_an_unmarked_resource_the_object_takes_as_out_of_date() -> None:
    """An object adopting an unmarked resource (allowed) that matches its spec updates it
    to write the mark: the machine's guards see that observation as out of date,
    ``up_to_date`` False as an Observation declares it (a bool)."""
    cloud = SimCloud(seed=3, create_polls=0)
    cloud.create_instance(CREDS, "legacy", PARAMS)
    kind = attrs.evolve(DatabaseInstance, machine=_AdoptingMachine)
    env = Environment([(kind, DatabaseConnector(cloud))], allow_adoption=("default",))
    env.provider_config()
    env.apply(database_manifest("db", annotations={EXTERNAL_NAME: "legacy", ADOPT: "true"}))
    obj = env.get(KIND, "db")
    env.api.replace_status({**obj, "status": {"state": "adopting"}})
    _AdoptingMachine.seen.clear()
    step = env.reconcile(KIND, "db")
    assert _AdoptingMachine.seen == [False]
    assert type(_AdoptingMachine.seen[0]) is bool
    assert step.before == "adopting" and step.after in ("updating", "ready")
    uid = env.get(KIND, "db")["metadata"]["uid"]
    assert mark_uid(cloud.instances()["legacy"]["tags"][OWNER_TAG]) == uid


# -------------------------------------------------------------------------- the actions
class _RetiringMachine(DatabaseInstanceMachine):
    """The database machine plus a Retired state, left by an orphaning deletion whose
    transition runs an action that needs no provider and raises what it is told to."""

    retired = State("Retired")

    retire = M.ready.to(retired)
    orphan = retired.to(M.deleted, on="forget_external")

    state_docs = {**M.state_docs, "retired": "kept, no longer served"}
    ready_condition = {**M.ready_condition, "retired": ("False", "Retired")}
    #: What the next ``forget_external`` raises.
    raises: ClassVar[list[BaseException]] = []

    def forget_external(self, effects: Any) -> None:
        """Action: let the resource go; raises what the test set."""
        raise _RetiringMachine.raises[0]


def _retired_and_deleted(cloud: SimCloud) -> Environment:
    """An environment holding ``db`` in the Retired state, deleted under ``Orphan``."""
    kind = attrs.evolve(DatabaseInstance, machine=_RetiringMachine)
    env = Environment([(kind, DatabaseConnector(cloud))])
    env.provider_config()
    env.apply(database_manifest("db"))
    env.run_until_idle()
    obj = env.get(KIND, "db")
    env.api.replace_status({**obj, "status": {**obj["status"], "state": "retired"}})
    obj = env.get(KIND, "db")
    env.api.replace({**obj, "spec": {**obj["spec"], "deletionPolicy": "Orphan"}})
    env.delete(KIND, "db")
    return env


def test_an_action_without_a_provider_that_raises_fails_the_pass_naming_its_class() -> None:
    """An action on an orphaning transition (run with no provider) that raises an error
    of kind code fails the pass as any action does: ``ProviderClientError`` naming only
    the exception's class, the object kept with its finalizer and state."""
    cloud = SimCloud(seed=3, create_polls=0)
    env = _retired_and_deleted(cloud)
    _RetiringMachine.raises[:] = [RuntimeError("password=hunter2")]
    step = env.reconcile(KIND, "db")
    assert step.error is None and step.result is not None
    assert step.result.reason == "ProviderClientError"
    obj = env.get(KIND, "db")
    assert obj["status"]["failure"]["reason"] == "ProviderClientError"
    synced = env.condition(KIND, "db", "Synced")
    assert synced is not None and synced.status.value == "False"
    assert synced.message == "provider client raised RuntimeError"
    assert (step.after, obj["metadata"]["finalizers"]) == ("retired", [FINALIZER])


def test_an_api_error_in_an_action_without_a_provider_propagates_for_backoff() -> None:
    """An API error raised in an action on an orphaning transition is the engine's own:
    it ends the pass unhandled (the work queue backs off), nothing recorded as a
    provider error."""
    cloud = SimCloud(seed=3, create_polls=0)
    env = _retired_and_deleted(cloud)
    _RetiringMachine.raises[:] = [ApiError("the API server is gone")]
    step = env.reconcile(KIND, "db")
    assert step.error is not None and step.error.startswith("API error during reconcile")
    obj = env.get(KIND, "db")
    assert "failure" not in obj["status"]
    assert (step.after, obj["metadata"]["finalizers"]) == ("retired", [FINALIZER])


# --------------------------------------------------------------------------- references
class _Unresolvable(References):
    """References that can never be resolved (their target is gone)."""

    def resolve(self, run: Any) -> UnresolvedReference:
        """Refuse: the referenced object is not found."""
        return UnresolvedReference("unresolved reference(s): networkRef: Network 'gone' "
                                   "not found in namespace 'default'")


def test_a_deletion_does_not_resolve_references() -> None:
    """An object being deleted whose references no longer resolve is still deleted: the
    resource is deleted and the finalizer removed, no reference refusal in the way."""
    cloud = SimCloud(seed=1, create_polls=0)
    env, _ = simulated_environment(cloud=cloud)
    ready(env)
    reconciler = env.reconcilers[KIND]
    reconciler.references = _Unresolvable(DatabaseInstance)
    env.delete(KIND, "db")
    env.run_until_idle()
    try:
        left = env.get(KIND, "db")
    except NotFound:
        left = None
    assert left is None
    assert cloud.count("delete") == 1
