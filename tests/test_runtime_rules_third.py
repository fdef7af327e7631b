"""Rules of the managed pass, the connection Secrets and the external-name index that a
third sampled mutation run of ``lifecycle/runtime`` found unchecked: what a connector's
``admit`` and a deletion are handed, when connection details are published, what a forced
pass writes over a Secret another writer created first, how a missing Secret is looked
up, what a refused Secret namespace is told, that a label change is written from a copy,
how the index reports a failed load and how it ranks a holder whose creation time is
unknown.

Each test names the rule and asserts it through the reconciler on the embedded API
server, or through the runtime classes a pass uses.
"""

from __future__ import annotations

from typing import Any

import pytest
from helpers import KIND, CountingCache, RacedSecretCreate, name_holder

from lifecycle.core.contract import ManagedResource, ProviderConfig
from lifecycle.core.decide import Choice, Decision, Facts
from lifecycle.core.errors import TerminalError
from lifecycle.core.externalname import external_name_of
from lifecycle.core.kind import CONNECTION_SECRET_LABEL, EXTERNAL_NAME
from lifecycle.core.machine import TransitionSpec
from lifecycle.kube.errors import NotFound
from lifecycle.machines.database import DatabaseInstance
from lifecycle.providers.simcloud import DatabaseConnector, SimCloud
from lifecycle.providers.simcloud.scenarios.harness import database_manifest, simulated_environment
from lifecycle.runtime.names import NameIndex
from lifecycle.runtime.passes import Pass, staged_meta
from lifecycle.runtime.secrets import ConnectionSecrets
from lifecycle.testing import Environment


def _stored(name: str = "db") -> tuple[Environment, dict[str, Any]]:
    """An environment holding the object ``name``, stored and never reconciled."""
    env, _ = simulated_environment()
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


# ------------------------------------------------------------------ the take-over
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


# ------------------------------------------------------------ the connection Secret
def test_a_password_for_a_missing_secret_is_persisted_without_reading_the_api_server() -> None:
    """Persisting a new password creates the connection Secret when the cache's store does
    not hold it, without a read from the API server: the create itself tells a Secret
    the store has not seen yet."""
    env, obj = _stored()
    api = CountingCache(env.api)
    secrets = ConnectionSecrets(api, DatabaseInstance, lambda: "new-password")
    assert secrets.take_over(obj, holds=True, read_only=False) == "new-password"
    assert (api.lookups, api.secret_gets) == (1, 0)
    assert env.secret("db-conn") == {"password": "new-password"}


def test_a_secret_outside_the_objects_namespace_is_refused_saying_where_it_may_be() -> None:
    """A connection Secret named in another namespace is refused, and the condition says
    where the operator writes connection Secrets: only in the resource's own namespace."""
    env, _ = simulated_environment(cloud=SimCloud(seed=1, create_polls=0))
    manifest = database_manifest("db")
    manifest["spec"]["writeConnectionSecretToRef"] = {"name": "db-conn", "namespace": "other"}
    env.apply(manifest)
    env.reconcile(KIND, "db")
    failed = env.condition(KIND, "db", "Failed")
    assert failed is not None and failed.reason == "SecretNamespaceNotAllowed"
    assert failed.message == (
        "connection Secret other/db-conn is outside the resource's namespace default; "
        "the operator writes connection Secrets only in the resource's own namespace")


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


# ---------------------------------------------------------------- object writes
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


# ------------------------------------------------------------------ deletion
def test_deleting_an_object_whose_spec_does_not_parse_hands_the_provider_no_parameters() -> None:
    """A spec that no longer parses must not block deletion: the resource to delete
    carries no parameters (None), while any other pass is refused with the spec's error."""
    env, obj = _stored()
    obj["spec"]["forProvider"]["noSuchField"] = 1
    run = _pass(env, obj)
    assert run.managed_resource(deleting=True, read_only=False).parameters is None
    with pytest.raises(TerminalError):
        _pass(env, obj).managed_resource(deleting=False, read_only=False)


# ---------------------------------------------------------- the external-name index
def test_loading_the_index_reports_a_list_that_failed_and_the_first_claim_lists_again() -> None:
    """Loading the index ahead of the workers answers False when the list failed; nothing
    is loaded, and the first claim lists the objects again and finds the holder."""
    holder = name_holder("a", "ua", "2026-01-01T00:00:00Z", held="x")
    asking = name_holder("b", "ub", "2026-01-02T00:00:00Z", annotated="x")
    objs = {"a": holder, "b": asking}
    lists: list[int] = []

    def lister() -> list[Any]:
        lists.append(1)
        if len(lists) == 1:
            raise ConnectionError("the API server is unreachable")
        return list(objs.values())

    index = NameIndex(lister, lambda _ns, name: objs.get(name))
    assert index.load() is False
    assert index.claim(asking, "x") == ("ua", "default", "a", "2026-01-01T00:00:00Z")
    assert len(lists) == 2
    assert index.load() is True
    assert len(lists) == 2  # loaded once: a later load lists nothing again


def test_a_holder_whose_creation_time_is_unknown_counts_as_the_older() -> None:
    """Of two objects holding one name, the older keeps it; an object whose creation time
    is unknown cannot be shown to be newer, so it counts as the older and a dated object
    never takes the name from it."""
    undated = name_holder("z", "uz", "", held="x")
    del undated["metadata"]["creationTimestamp"]
    dated = name_holder("a", "ua", "2026-01-01T00:00:00Z", held="x")
    objs = {"z": undated, "a": dated}
    index = NameIndex(lambda: [dated, undated], lambda _ns, name: objs.get(name))
    assert index.claim(dated, "x") == ("uz", "default", "z", "")
    assert index.claim(undated, "x") is None


def test_a_deletion_claims_the_name_the_object_holds_not_the_one_it_would_take() -> None:
    """A deleting object is checked against the name it holds (recorded in its status),
    never against the name it would take now: with its annotation removed and its
    default name annotated on another object, deleting it still deletes its own
    resource and leaves the other's alone."""
    env, cloud = simulated_environment(cloud=SimCloud(seed=3, create_polls=0))
    env.apply(database_manifest("a", annotations={EXTERNAL_NAME: "custom"}))
    env.run_until_idle()
    a = env.get(KIND, "a")
    assert a["status"]["externalName"] == "custom" and env.state(KIND, "a") == "ready"
    bare = {**a, "metadata": {**a["metadata"], "annotations": {}}}
    default = DatabaseInstance.external_name(bare)  # the name it takes without the annotation
    assert default != "custom"
    env.apply(database_manifest("b", annotations={EXTERNAL_NAME: default}))
    env.reconcile(KIND, "b")
    assert cloud.instances()[default]["state"] == "available"
    env.apply(database_manifest("a", annotations={EXTERNAL_NAME: None}))  # annotation removed
    env.delete(KIND, "a")
    env.run_until_idle()
    assert not env.exists(KIND, "a")
    assert cloud.count("delete", "custom") == 1
    assert cloud.count("delete", default) == 0
    assert cloud.instances()[default]["state"] == "available"
