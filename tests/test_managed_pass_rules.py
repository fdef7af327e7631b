"""Rules of the managed pass (:mod:`lifecycle.runtime.passes`) and of a pass's
conclusion (:mod:`lifecycle.core.conclusion`):

* the take-over: a connector's ``admit`` judges an object's parameters without a
  password, and is asked only about an object that does not hold its name yet; a
  pass takes its inputs read-only exactly when the policy forbids changes, and inputs
  read read-only persist no password; a resource asked for after the take-over
  carries the password the take-over read; a forced pass rewrites the connection
  Secret another writer created first, with the operator's label and ownerReference;
* the resource of a cluster-scoped object names its namespace as ""; an edited
  external-name annotation is quoted in its note by its first 64 characters, and the
  ``ExternalNameConflict`` message quotes at most 64 characters of the name;
* a pass whose transition ends in a final state publishes no connection details;
* a metadata change is written from a copy of the object's metadata; an annotation is
  set on an object that carries none; a forced pass whose annotations vanished
  meanwhile has no operation annotation to remove and goes on;
* a deletion hands the provider no parameters when the spec does not parse; a
  deletion whose name another object holds, or no provider could hold, observes its
  resource absent and removes only its finalizer;
* late-initialisation writes nothing into an object without a spec;
* a note that stands across a pass that acted and then saw the result keeps its
  ``lastTransitionTime``.

Each test names the rule and asserts it through the reconciler on the embedded API
server, or through the runtime classes a pass uses.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

import attrs
import pytest
from helpers import CLUSTER_SCOPED, KIND, RacedSecretCreate, cluster_scoped_manifest, ready
from statemachine import State

from lifecycle.core.contract import ManagedResource, ProviderConfig
from lifecycle.core.decide import Choice, Decision, Facts, ReconcilePolicy
from lifecycle.core.errors import TerminalError
from lifecycle.core.externalname import external_name_of
from lifecycle.core.kind import (
    CONNECTION_SECRET_LABEL,
    EXTERNAL_NAME,
    FINALIZER,
    INTENT,
    INTENT_MAC,
    OPERATION,
)
from lifecycle.core.machine import LifecycleMachine, TransitionSpec
from lifecycle.core.values import Intent
from lifecycle.kube.errors import NotFound
from lifecycle.kube.objects import clone
from lifecycle.machines.database import DatabaseInstance
from lifecycle.machines.managed import ManagedResourceMachine
from lifecycle.providers.simcloud import DatabaseConnector, SimCloud
from lifecycle.providers.simcloud.scenarios.harness import database_manifest, simulated_environment
from lifecycle.runtime.effects import Inputs
from lifecycle.runtime.passes import Pass, staged_meta
from lifecycle.runtime.reconciler import Reconciler
from lifecycle.runtime.secrets import ConnectionSecrets
from lifecycle.testing import Environment


def _stored(name: str = "db") -> tuple[Environment, dict[str, Any]]:
    """An environment holding the object ``name``, stored and never reconciled."""
    env, _ = simulated_environment(cloud=SimCloud(seed=1, create_polls=0))
    env.apply(database_manifest(name))
    return env, env.get(KIND, name)


def _pass(env: Environment, obj: dict[str, Any], secrets: ConnectionSecrets | None = None,
          *, forced: bool = False) -> Pass:
    """A pass on ``obj`` as the reconciler starts one (no index)."""
    return Pass(obj=obj, state="unclaimed", generation=obj["metadata"]["generation"],
                secrets=secrets or ConnectionSecrets(env.api, DatabaseInstance), api=env.api,
                kind=DatabaseInstance, forced=forced,
                name=external_name_of(obj, DatabaseInstance.external_name))


def _written_by_the_operator(env: Environment, uid: str) -> bool:
    """Whether the connection Secret carries the operator's label and ``uid``'s
    controller ownerReference."""
    meta = env.api.get("v1", "Secret", "default", "db-conn")["metadata"]
    refs = [(r["uid"], r["controller"]) for r in meta.get("ownerReferences") or []]
    return meta.get("labels") == {CONNECTION_SECRET_LABEL: "true"} and refs == [(uid, True)]


def _no_secret(env: Environment, name: str = "db-conn") -> bool:
    """Whether the Secret ``name`` does not exist."""
    try:
        env.api.get("v1", "Secret", "default", name)
    except NotFound:
        return True
    return False


class _Recording:
    """The simulated cloud's connector, recording what its ``admit`` and ``connect`` are
    asked with."""

    def __init__(self, cloud: SimCloud | None = None) -> None:
        self.inner = DatabaseConnector(cloud or SimCloud(seed=1, create_polls=0))
        self.admitted: list[ManagedResource] = []
        self.connected: list[ManagedResource] = []

    def admit(self, resource: ManagedResource, config: ProviderConfig) -> None:
        self.admitted.append(resource)

    def connect(self, resource: ManagedResource, config: ProviderConfig) -> Any:
        self.connected.append(resource)
        return self.inner.connect(resource, config)


class _SeenGoneMachine(LifecycleMachine):
    """The standard lifecycle, except that an unclaimed object is deleted (``gone``) only
    when its resource was observed absent: a guard that reads the pass's observation."""

    unclaimed = State("Unclaimed", initial=True)
    creating = State("Creating")
    ready = State("Ready")
    updating = State("Updating")
    deleting = State("Deleting")
    failed = State("Failed")
    deleted = State("Deleted", final=True)

    create = (
        unclaimed.to(creating, on="create_external")
        | creating.to.itself(on="create_external")
        | ready.to(creating, on="create_external")
        | updating.to(creating, on="create_external")
        | failed.to(creating, on="create_external")
    )
    update = (
        unclaimed.to(updating, on="update_external")
        | creating.to(updating, on="update_external")
        | ready.to(updating, on="update_external")
        | updating.to.itself(on="update_external")
        | failed.to(updating, on="update_external")
    )
    wait = (
        creating.to.itself()
        | updating.to.itself()
        | deleting.to.itself()
        | unclaimed.to(creating)
        | ready.to(updating)
        | failed.to(updating, cond="failed_during_update")
        | failed.to(creating)
    )
    available = (
        unclaimed.to(ready)
        | creating.to(ready)
        | ready.to.itself()
        | updating.to(ready)
        | failed.to(ready)
    )
    fail = (
        unclaimed.to(failed)
        | creating.to(failed)
        | ready.to(failed)
        | updating.to(failed)
        | deleting.to(failed)
        | failed.to.itself()
    )
    delete = (
        unclaimed.to(deleting, on="delete_external")
        | creating.to(deleting, on="delete_external")
        | ready.to(deleting, on="delete_external")
        | updating.to(deleting, on="delete_external")
        | failed.to(deleting, on="delete_external")
        | deleting.to.itself(on="delete_external")
    )
    gone = (
        deleting.to(deleted)
        | unclaimed.to(deleted, cond="seen_gone")
        | creating.to(deleted)
        | ready.to(deleted)
        | updating.to(deleted)
        | failed.to(deleted)
    )
    orphan = (
        unclaimed.to(deleted)
        | creating.to(deleted)
        | ready.to(deleted)
        | updating.to(deleted)
        | deleting.to(deleted)
        | failed.to(deleted)
    )

    ready_condition = ManagedResourceMachine.ready_condition
    activity_conditions = ManagedResourceMachine.activity_conditions
    failed_during_update = ManagedResourceMachine.failed_during_update
    create_external = ManagedResourceMachine.create_external
    update_external = ManagedResourceMachine.update_external
    delete_external = ManagedResourceMachine.delete_external

    def seen_gone(self, facts: Facts) -> bool:
        """Guard: the pass observed the external resource absent (not merely unobserved)."""
        return facts.observation is not None and not facts.observation.exists


#: The bundled kind under :class:`_SeenGoneMachine`.
SEEN_GONE = attrs.evolve(DatabaseInstance, machine=_SeenGoneMachine)


def _config_valid(env: Environment) -> dict[str, Any]:
    found = [c for c in env.get(KIND, "db")["status"]["conditions"]
             if c.get("type") == "ConfigValid"]
    assert len(found) == 1
    return found[0]


# ------------------------------------------------------------------------ the take-over
class _Admitting:
    """The simulated cloud's connector, recording what its ``admit`` is asked with."""

    def __init__(self) -> None:
        self.inner = DatabaseConnector(SimCloud(seed=1, create_polls=0))
        self.asked: list[ManagedResource] = []

    def admit(self, resource: ManagedResource, config: ProviderConfig) -> None:
        self.asked.append(resource)

    def connect(self, resource: ManagedResource, config: ProviderConfig) -> Any:
        return self.inner.connect(resource, config)


def test_admit_judges_the_objects_parameters_without_a_password() -> None:
    """A connector's ``admit`` is asked about the object as it would be created: with the
    parameters its spec asks for (so a provider can refuse a size or an engine), and no
    password, since none is persisted before the object is admitted."""
    connector = _Admitting()
    env = Environment([(DatabaseInstance, connector)])
    env.provider_config()
    manifest = database_manifest("db", storage_gb=60, annotations={EXTERNAL_NAME: "orders"})
    env.apply(manifest)
    env.reconcile(KIND, "db")
    (resource,) = connector.asked
    assert resource.parameters is not None
    assert resource.parameters == DatabaseInstance.parse_parameters(manifest["spec"])
    assert resource.parameters.storage_gb == 60
    assert resource.password is None


def test_a_forced_pass_rewrites_the_connection_secret_another_writer_created_first() -> None:
    """A forced pass writes the connection Secret even when its data does not change: when
    another writer for the same object created it just before the pass's own create, the
    take-over keeps that password and writes the Secret with the operator's label and
    ownerReference."""
    env, obj = _stored()
    uid = obj["metadata"]["uid"]
    secrets = ConnectionSecrets(RacedSecretCreate(env, uid), DatabaseInstance,
                                lambda: "second-password")
    run = _pass(env, obj, secrets, forced=True)
    assert run.connection_secret(read_only=False) is None
    assert run.password == "first-password"
    assert env.secret("db-conn") == {"password": "first-password"}
    assert _written_by_the_operator(env, uid)


def test_a_forced_pass_asked_for_its_resource_without_a_take_over_rewrites_the_secret() -> None:
    """A pass asked for its resource without a take-over (outside read-only) persists the
    password first, forced like the pass: a Secret another writer created just before is
    kept with its password and written with the operator's label and ownerReference."""
    env, obj = _stored()
    uid = obj["metadata"]["uid"]
    secrets = ConnectionSecrets(RacedSecretCreate(env, uid), DatabaseInstance,
                                lambda: "second-password")
    run = _pass(env, obj, secrets, forced=True)
    resource = run.managed_resource(deleting=False, read_only=False)
    assert resource.password == "first-password"
    assert _written_by_the_operator(env, uid)


def test_admit_is_not_asked_again_about_an_object_that_holds_its_name() -> None:
    """A connector's ``admit`` judges an object before it takes its name; once the object
    holds it (finalizer and annotation committed), later passes, an update included, do
    not ask again."""
    connector = _Recording()
    env = Environment([(DatabaseInstance, connector)])
    env.provider_config()
    env.apply(database_manifest("db"))
    env.run_until_idle()
    assert env.state(KIND, "db") == "ready" and len(connector.admitted) == 1
    env.apply(database_manifest("db", storage_gb=40))
    env.run_until_idle()
    updated = env.get(KIND, "db")
    assert updated["status"]["observedGeneration"] == updated["metadata"]["generation"] > 1
    assert len(connector.admitted) == 1


def test_a_pass_reading_its_inputs_read_only_persists_no_password() -> None:
    """A pass's inputs read read-only (a policy that does not let it modify) read the
    stored password, and persist none: with no connection Secret, the resource carries
    no password and no Secret is created."""
    env, obj = _stored()
    taken = _pass(env, obj).inputs(deleting=False, read_only=True)
    assert taken.error is None and taken.resource is not None
    assert taken.resource.password is None
    assert _no_secret(env)


def test_the_resource_after_a_take_over_carries_the_password_the_take_over_read() -> None:
    """Once the take-over read the connection Secret (read-only: none is stored), the
    resource carries what it read and the Secret is not read again or written: no
    password, and no Secret created."""
    env, obj = _stored()
    run = _pass(env, obj)
    assert run.connection_secret(read_only=True) is None and run.password is None
    resource = run.managed_resource(deleting=False, read_only=False)
    assert resource.password is None
    assert _no_secret(env)


def test_the_resource_of_a_cluster_scoped_object_names_its_namespace_as_empty() -> None:
    """The resource handed to a connector names the namespace of a cluster-scoped object
    as the empty string (``ManagedResource.namespace`` is a string), never None."""
    connector = _Recording()
    env = Environment([(CLUSTER_SCOPED, connector)])
    env.provider_config()
    env.apply(cluster_scoped_manifest("db"))
    env.reconcile(KIND, "db", None)
    assert connector.connected
    assert [r.namespace for r in connector.connected] == [""] * len(connector.connected)


def test_an_edited_external_name_is_quoted_by_its_first_64_characters() -> None:
    """An external-name annotation edited after the resource was named is reported, never
    followed; the note quotes the new annotation by its first 64 characters only."""
    cloud = SimCloud(seed=1, create_polls=0)
    env = Environment([(DatabaseInstance, DatabaseConnector(cloud))])
    env.provider_config()
    env.apply(database_manifest("db", annotations={EXTERNAL_NAME: "orders"}))
    env.run_until_idle()
    assert env.state(KIND, "db") == "ready"
    edited = "n" * 70
    env.apply(database_manifest("db", annotations={EXTERNAL_NAME: edited}))
    env.reconcile(KIND, "db")
    found = [c for c in env.get(KIND, "db")["status"]["conditions"]
             if c.get("reason") == "ExternalNameChanged"]
    assert [c["message"] for c in found] == [
        f"annotation {EXTERNAL_NAME} changed from 'orders' to {'n' * 64!r} after the "
        "resource was named; still managing 'orders'"]
    assert list(cloud.instances()) == ["orders"]


class _InputsPass(Pass):
    """A pass that notes how take-over asks for the connection's inputs."""

    seen: ClassVar[list[Any]] = []

    def inputs(self, deleting: bool, read_only: bool) -> Inputs:
        """Note ``read_only``, then read the inputs as a pass does."""
        _InputsPass.seen.append(read_only)
        return super().inputs(deleting, read_only)


class _InputsReconciler(Reconciler):
    """A reconciler whose passes are :class:`_InputsPass`."""

    pass_type = _InputsPass


def test_the_inputs_are_read_only_exactly_when_the_policy_forbids_changes() -> None:
    """Under ``skip`` (no create, no update) the take-over reads the connection's inputs
    read-only; under ``manage`` it reads them writable."""
    for policy, expected in ((ReconcilePolicy.SKIP, True), (ReconcilePolicy.MANAGE, False)):
        cloud = SimCloud(seed=1, create_polls=0)
        env, _ = simulated_environment(cloud=cloud)
        env.reconcilers[KIND] = _InputsReconciler(
            env.operator_api, DatabaseInstance, DatabaseConnector(cloud),
            clock=env.clock.now, default_policy=policy)
        _InputsPass.seen.clear()
        env.apply(database_manifest("db"))
        env.reconcile(KIND, "db")
        assert _InputsPass.seen == [expected]


# --------------------------------------------------------------------------- publishing
def _decision(source: str, event: str, target: str) -> Decision:
    """The decision of a pass that fires ``event`` from ``source`` to ``target``."""
    return Decision(source, Choice(event, "test"),
                    TransitionSpec(source=source, event=event, target=target))


def test_a_pass_that_moves_to_a_final_state_publishes_no_connection_details() -> None:
    """Connection details are merged into the Secret by a pass that goes on managing the
    resource; a pass whose transition ends in a final state (the resource left, the
    finalizer about to go) publishes nothing, even when it is not a deletion."""
    env, obj = _stored()
    run = _pass(env, obj)
    leaving = _decision("ready", "orphan", "deleted")
    assert DatabaseInstance.machine.table().states["deleted"].final
    assert run.publish({"endpoint": "db.example"}, Facts(state="ready"), leaving) == leaving
    with pytest.raises(NotFound):
        env.api.get("v1", "Secret", "default", "db-conn")
    staying = _decision("creating", "available", "ready")
    assert run.publish({"endpoint": "db.example"}, Facts(state="creating"),
                       staying) == staying
    assert env.secret("db-conn") == {"endpoint": "db.example"}


# ------------------------------------------------------------------------ object writes
def test_a_label_change_is_written_and_works_on_a_copy_of_the_objects_metadata() -> None:
    """A pass's metadata change is applied to a copy of the object's metadata (labels,
    annotations and finalizers included) and written: a change to the labels reaches the
    API server, and the pass's object changes only by what the write returns."""
    env, _ = simulated_environment()
    manifest = database_manifest("db")
    manifest["metadata"]["labels"] = {"team": "a"}
    env.apply(manifest)
    run = _pass(env, env.get(KIND, "db"))
    run.mutate(lambda meta: meta["labels"].__setitem__("team", "b"))
    assert env.get(KIND, "db")["metadata"]["labels"] == {"team": "b"}
    copy = staged_meta(run)
    copy["labels"]["team"] = "c"
    assert run.obj["metadata"]["labels"] == {"team": "b"}


# ----------------------------------------------------------------------------- deletion
def test_deleting_an_object_whose_spec_does_not_parse_hands_the_provider_no_parameters() -> None:
    """A spec that no longer parses must not block deletion: the resource to delete
    carries no parameters (None), while any other pass is refused with the spec's error."""
    env, obj = _stored()
    obj["spec"]["forProvider"]["noSuchField"] = 1
    run = _pass(env, obj)
    assert run.managed_resource(deleting=True, read_only=False).parameters is None
    with pytest.raises(TerminalError):
        _pass(env, obj).managed_resource(deleting=False, read_only=False)


def test_deleting_an_object_whose_name_another_object_holds_removes_only_its_finalizer() -> None:
    """Two objects holding one external name (the older keeps it): deleting the younger
    has nothing to delete. The pass observes its resource absent (a machine whose guard
    lets only an observed absence delete an unclaimed object agrees), so its finalizer is
    removed and the object goes, while the resource the older object holds is left
    alone."""
    cloud = SimCloud(seed=1, create_polls=0)
    env = Environment([(SEEN_GONE, DatabaseConnector(cloud))])
    env.provider_config()
    env.apply(database_manifest("a", annotations={EXTERNAL_NAME: "shared"}))
    env.run_until_idle()
    assert env.state(KIND, "a") == "ready" and list(cloud.instances()) == ["shared"]
    younger = database_manifest("b", annotations={EXTERNAL_NAME: "shared"})
    younger["metadata"]["finalizers"] = [FINALIZER]
    env.apply(younger)
    env.delete(KIND, "b")
    env.reconcile(KIND, "b")
    assert not env.exists(KIND, "b")
    assert list(cloud.instances()) == ["shared"]
    assert env.state(KIND, "a") == "ready"


def test_deleting_an_object_under_a_name_no_provider_could_hold_removes_its_finalizer() -> None:
    """An object being deleted under an external name no provider could hold (here with a
    zero-width character) has nothing to delete: the pass observes its resource absent
    (a machine whose guard lets only an observed absence delete an unclaimed object
    agrees), its finalizer is removed and it goes, the provider never asked."""
    connector = _Recording()
    env = Environment([(SEEN_GONE, connector)])
    env.provider_config()
    manifest = database_manifest("db", annotations={EXTERNAL_NAME: "bad\u200bname"})
    manifest["metadata"]["finalizers"] = [FINALIZER]
    env.apply(manifest)
    env.delete(KIND, "db")
    env.reconcile(KIND, "db")
    assert not env.exists(KIND, "db")
    assert connector.connected == []


# ---------------------------------------------------------------------------- the claim
def test_a_conflict_message_quotes_at_most_64_characters_of_the_name() -> None:
    """``ExternalNameConflict`` names the holder and quotes only the first 64 characters of
    a long external name (the kind sets no maximum length)."""
    name = "orders-" + "x" * 70
    env, cloud = simulated_environment(cloud=SimCloud(seed=1, create_polls=0))
    env.apply(database_manifest("a", annotations={EXTERNAL_NAME: name}))
    env.reconcile(KIND, "a")
    env.apply(database_manifest("b", annotations={EXTERNAL_NAME: name}))
    env.reconcile(KIND, "b")
    failed = env.condition(KIND, "b", "Failed")
    assert failed is not None and failed.reason == "ExternalNameConflict"
    assert failed.message == (f"external name {name[:64]!r} is held by default/a; "
                              "choose another name")
    assert list(cloud.instances()) == [name]


# ------------------------------------------------------------- the operation annotation
class _AnnotationsRemovedOnFirstWrite:
    """The API server, where another writer removes every annotation of the object just
    before the operator's first object write once ``armed`` (which then conflicts)."""

    def __init__(self, api: Any) -> None:
        self._api, self.armed, self.raced = api, False, False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._api, name)

    def replace(self, body: Any) -> Any:
        if self.armed and not self.raced and body.get("kind") == KIND:
            self.raced = True
            meta = body["metadata"]
            stored = clone(self._api.get(body["apiVersion"], KIND, meta.get("namespace"),
                                         meta["name"]))
            del stored["metadata"]["annotations"]
            self._api.replace(stored)
        return self._api.replace(body)


class _AnnotationsRemovedMeanwhile(_AnnotationsRemovedOnFirstWrite):
    """The API server, where another writer removes every annotation of the object just
    before the operator's first write of it (armed from the start)."""

    def __init__(self, api: Any) -> None:
        super().__init__(api)
        self.armed = True


def test_a_forced_pass_whose_annotations_vanished_meanwhile_goes_on() -> None:
    """The forced pass removes the operation annotation; when its write conflicts and
    the fresh object has no annotations at all (the user removed them), there is
    nothing to remove: the pass goes on and creates the resource."""
    cloud = SimCloud(seed=1, create_polls=0)
    env, _ = simulated_environment(cloud=cloud)
    api = _AnnotationsRemovedMeanwhile(env.operator_api)
    env.reconcilers[KIND] = Reconciler(api, DatabaseInstance, DatabaseConnector(cloud),
                                       clock=env.clock.now)
    env.apply(database_manifest("db", annotations={OPERATION: "reconcile"}))
    env.reconcile(KIND, "db")
    assert api.raced
    assert OPERATION not in (env.get(KIND, "db")["metadata"].get("annotations") or {})
    assert cloud.count("create") == 1


# -------------------------------------------------------------------------- annotations
def test_an_annotation_is_set_on_an_object_without_annotations() -> None:
    """A Ready object's update journals first; when that write conflicts and the fresh
    object has no annotations at all, the entry and its MAC are still written."""
    cloud = SimCloud(seed=1, create_polls=0)
    env, _ = simulated_environment(cloud=cloud)
    api = _AnnotationsRemovedOnFirstWrite(env.operator_api)
    env.reconcilers[KIND] = Reconciler(api, DatabaseInstance, DatabaseConnector(cloud),
                                       clock=env.clock.now)
    obj = ready(env)
    changed = clone(obj)
    forprovider = changed["spec"]["forProvider"]
    forprovider["storageGB"] = int(forprovider.get("storageGB") or 10) + 10
    env.apply(changed)
    api.armed = True
    env.reconcile(KIND, "db")
    assert api.raced
    annotations = env.get(KIND, "db")["metadata"].get("annotations") or {}
    assert Intent.from_dict(json.loads(annotations[INTENT])).operation == "update"
    assert INTENT_MAC in annotations
    assert cloud.count("modify") == 1


# ---------------------------------------------------------------------------- late-init
class _NoWrites:
    """A cluster that refuses every call: nothing may be read or written."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the cluster was called: {name}")


def test_late_init_writes_nothing_into_an_object_without_a_spec() -> None:
    """An object without a spec (or whose spec is not a mapping) has no
    ``spec.forProvider`` to fill: late-initialisation leaves it alone, writing nothing
    and raising nothing."""
    for spec in ({"absent": True}, {"spec": None}, {"spec": ["version"]}):
        obj: dict[str, Any] = {"apiVersion": DatabaseInstance.api_version, "kind": KIND,
                               "metadata": {"name": "db", "namespace": "default",
                                            "uid": "u", "generation": 1}}
        if "spec" in spec:
            obj["spec"] = spec["spec"]
        run = Pass(obj=obj, state="ready", generation=1, secrets=None, api=_NoWrites(),
                   kind=DatabaseInstance)
        run.late_init({"version": "16"})
        assert run.obj is obj
        assert run.observed is None


# --------------------------------------------------------------------------- conclusion
def test_a_standing_note_keeps_its_transition_time_through_a_pass_that_acted_and_saw() -> None:
    """An ``ExternalNameChanged`` note reported before an update that reaches Ready in
    the same pass (ready -> updating -> ready) is still the same note afterwards: its
    ``lastTransitionTime`` is when it was first reported, not the update's time."""
    cloud = SimCloud(seed=1, create_polls=0, modify_polls=0)
    env = Environment([(DatabaseInstance, DatabaseConnector(cloud))])
    env.provider_config()
    env.apply(database_manifest("db", annotations={EXTERNAL_NAME: "orders"}))
    env.run_until_idle()
    assert env.state(KIND, "db") == "ready"
    env.apply(database_manifest("db", annotations={EXTERNAL_NAME: "renamed"}))
    env.reconcile(KIND, "db")
    noted = _config_valid(env)
    assert (noted["status"], noted["reason"]) == ("False", "ExternalNameChanged")
    env.clock.advance(600)
    env.apply(database_manifest("db", annotations={EXTERNAL_NAME: "renamed"}, storage_gb=40))
    env.reconcile(KIND, "db")
    # The pass acted and saw the result: one Event naming both transitions.
    assert [e["message"] for e in env.events("db")][-1].startswith(
        "ready -> updating -> ready: ")
    assert cloud.count("modify") == 1
    after = _config_valid(env)
    assert (after["status"], after["reason"]) == ("False", "ExternalNameChanged")
    assert after["observedGeneration"] == env.get(KIND, "db")["metadata"]["generation"]
    assert after["lastTransitionTime"] == noted["lastTransitionTime"]
