"""Rules of the reconciler's pass that a fourth sampled mutation run of
``lifecycle/runtime`` found unchecked in :mod:`lifecycle.runtime.reconciler`:

* a namespace owned by this operator (its ``operator_id``) is reconciled, never
  skipped as another operator's;
* the operator-wide ``default_policy`` applies to an object and namespace that set
  none: under ``skip`` nothing is created;
* the ``NotOwned`` Event says which operator owns the namespace;
* a pass (of the reconciler's ``pass_type``) starts in the state the gate restored
  from the object's status;
* the pass that removes the finalizer releases the object's external name, so another
  object takes the name although the first one lingers under another finalizer;
* a machine's guards see the unmarked resource an object owns as out of date
  (``up_to_date`` False), the observation that chooses the update writing the mark;
* an action that runs without a provider (an orphaning deletion) is guarded like any
  other: an error of kind code fails the pass with ``ProviderClientError``, naming
  only its class, and an API error propagates for the work queue's backoff.

Each test names the rule and asserts it through the reconciler on the embedded API
server.
"""

from __future__ import annotations

from typing import Any, ClassVar

import attrs
from helpers import KIND, external
from statemachine import State

from lifecycle.core.decide import Facts, ReconcilePolicy
from lifecycle.core.kind import ADOPT, EXTERNAL_NAME, FINALIZER, OWNER
from lifecycle.core.ownership import mark_uid
from lifecycle.kube.errors import ApiError
from lifecycle.machines.database import DatabaseInstance, DatabaseInstanceMachine
from lifecycle.machines.managed import ManagedResourceMachine
from lifecycle.providers.simcloud import OWNER_TAG, DatabaseConnector, SimCloud
from lifecycle.providers.simcloud.scenarios.harness import database_manifest, simulated_environment
from lifecycle.runtime.effects import Inputs
from lifecycle.runtime.reconciler import Pass, Reconciler
from lifecycle.testing import Environment

CREDS = ("AKIDEXAMPLE", "s3cr3t")
PARAMS = {"engine": "postgres", "storage_gb": 20}
M = ManagedResourceMachine


# ------------------------------------------------------------------------------ the gate
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


# ------------------------------------------------------------------ the external-name index
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


# --------------------------------------------------------------------- the ownership rule
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


# ------------------------------------------------------------------------------ the actions
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
