"""Rules of the managed pass, the connection Secrets and the external-name index that a
fourth sampled mutation run of ``lifecycle/runtime`` found unchecked in its pass modules:
a deletion whose name another object holds, or no provider could hold, observes its
resource absent and ends by removing the finalizer only; a connector's ``admit`` is
asked only about an object that does not hold its name yet; a pass's inputs read
read-only persist no password, and a resource asked for after the take-over carries the
password the take-over read; the resource of a cluster-scoped object names its
namespace as ""; an edited external-name annotation is
quoted in its note by its first 64 characters; publishing details for a missing Secret
answers from the cache's store; the take-over of the connection Secret is unforced by
default; a cluster that cannot list holds no objects; and the index keeps a name for
its holder whatever the holder's namespace is called.

Each test names the rule and asserts it through the reconciler on the embedded API
server, or through the runtime classes a pass uses.
"""

from __future__ import annotations

from typing import Any

import attrs
from helpers import KIND, CountingCache, RacedSecretCreate, name_holder
from statemachine import State

from lifecycle.core.contract import ManagedResource, ProviderConfig
from lifecycle.core.decide import Facts
from lifecycle.core.externalname import external_name_of
from lifecycle.core.kind import CONNECTION_SECRET_LABEL, EXTERNAL_NAME, FINALIZER
from lifecycle.core.machine import LifecycleMachine
from lifecycle.kube.errors import NotFound
from lifecycle.machines.database import DatabaseInstance
from lifecycle.machines.managed import ManagedResourceMachine
from lifecycle.providers.simcloud import DatabaseConnector, SimCloud
from lifecycle.providers.simcloud.scenarios.harness import database_manifest, simulated_environment
from lifecycle.runtime.names import NameIndex, kind_objects
from lifecycle.runtime.passes import Pass
from lifecycle.runtime.secrets import ConnectionSecrets
from lifecycle.testing import Environment


def _stored(name: str = "db") -> tuple[Environment, dict[str, Any]]:
    """An environment holding the object ``name``, stored and never reconciled."""
    env, _ = simulated_environment(cloud=SimCloud(seed=1, create_polls=0))
    env.apply(database_manifest(name))
    return env, env.get(KIND, name)


def _pass(env: Environment, obj: dict[str, Any], secrets: ConnectionSecrets | None = None
          ) -> Pass:
    """A pass on ``obj`` as the reconciler starts one (no index)."""
    return Pass(obj=obj, state="unclaimed", generation=obj["metadata"]["generation"],
                secrets=secrets or ConnectionSecrets(env.api, DatabaseInstance), api=env.api,
                kind=DatabaseInstance,
                name=external_name_of(obj, DatabaseInstance.external_name))


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


# ------------------------------------------------------------------ deletions
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


# ------------------------------------------------------------------ the take-over
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
    cluster_scoped = attrs.evolve(DatabaseInstance, namespaced=False)
    connector = _Recording()
    env = Environment([(cluster_scoped, connector)])
    env.provider_config()
    manifest = database_manifest("db")
    del manifest["metadata"]["namespace"]
    manifest["spec"]["writeConnectionSecretToRef"]["namespace"] = "default"
    env.apply(manifest)
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


# ------------------------------------------------------------ the connection Secret
def test_publishing_details_to_a_missing_secret_answers_from_the_cache_store() -> None:
    """Publishing connection details creates a missing Secret without reading it from the
    API server when a cache can tell: the store is asked, and the create itself tells a
    Secret the store has not seen yet."""
    env, obj = _stored()
    api = CountingCache(env.api)
    ConnectionSecrets(api, DatabaseInstance).publish(obj, {"endpoint": "db.example"})
    assert (api.lookups, api.secret_gets) == (1, 0)
    assert env.secret("db-conn") == {"endpoint": "db.example"}


def test_taking_over_the_connection_secret_is_unforced_by_default() -> None:
    """The take-over of the connection Secret is unforced unless asked: a Secret another
    writer for the same object created just before is kept with its password and left
    as it was written (no label, no ownerReference), since its data did not change."""
    env, obj = _stored()
    secrets = ConnectionSecrets(RacedSecretCreate(env, obj["metadata"]["uid"]), DatabaseInstance,
                                lambda: "second-password")
    assert secrets.take_over(obj, holds=False, read_only=False) == "first-password"
    secret = env.api.get("v1", "Secret", "default", "db-conn")
    assert env.secret("db-conn") == {"password": "first-password"}
    assert CONNECTION_SECRET_LABEL not in (secret["metadata"].get("labels") or {})
    assert not secret["metadata"].get("ownerReferences")


# ---------------------------------------------------------- the external-name index
def test_a_cluster_that_cannot_list_holds_no_objects() -> None:
    """The objects of a kind listed from a cluster without ``list`` are none (the index
    loads empty from it), not an error."""
    assert kind_objects(object(), DatabaseInstance.api_version, KIND) == []


def test_a_holder_keeps_its_name_whatever_its_namespace_is_called() -> None:
    """A name held by an object is refused to another, whatever the holder's namespace is
    called: a namespace named like the claimant's uid (a UUID is a valid namespace name)
    changes nothing."""
    uid = "6f1c2a9e-3b4d-4e5f-8a7b-9c0d1e2f3a4b"
    holder = name_holder("a", "ua", "2026-01-01T00:00:00Z", held="x")
    holder["metadata"]["namespace"] = uid
    asking = name_holder("c", uid, "2026-01-02T00:00:00Z", annotated="x")
    index = NameIndex(lambda: [holder], lambda _ns, _name: holder)
    assert index.claim(asking, "x") == ("ua", uid, "a", "2026-01-01T00:00:00Z")
