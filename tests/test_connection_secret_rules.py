"""Rules of the connection Secrets (:class:`~lifecycle.runtime.secrets.ConnectionSecrets`):

* a Secret outside the object's namespace is refused (``SecretNamespaceNotAllowed``),
  saying the operator writes connection Secrets only in the resource's own namespace;
* a Secret the API server refuses as invalid is a terminal
  ``ConnectionSecretInvalid`` error naming the Secret;
* reading the stored password asks the API server, unless the caller creates the
  Secret when none is found: persisting a new password, or publishing details, to a
  missing Secret answers from the cache's store;
* persisting a password, and the take-over of the Secret, are unforced by default:
  a Secret another writer created first keeps its password and is left as written;
* ``ensure_password`` reuses a stored password: it generates none and writes nothing,
  even for a forced pass;
* by default ``publish`` writes only a Secret that changed;
* the Secret's ownerReference blocks its owner's deletion (``blockOwnerDeletion``): a
  foreground deletion of the owner waits until the Secret is gone.

Each test names the rule and asserts it through the reconciler on the embedded API
server, or through the runtime classes a pass uses.
"""

from __future__ import annotations

from typing import Any

from helpers import KIND, CountingCache, RacedSecretCreate, make, ready

from lifecycle.core.kind import CONNECTION_SECRET_LABEL
from lifecycle.kube.errors import Invalid, NotFound
from lifecycle.machines.database import DatabaseInstance
from lifecycle.providers.simcloud import SimCloud
from lifecycle.providers.simcloud.scenarios.harness import database_manifest, simulated_environment
from lifecycle.runtime.secrets import ConnectionSecrets, decode
from lifecycle.testing import Environment


def _stored(name: str = "db") -> tuple[Environment, dict[str, Any]]:
    """An environment holding the object ``name``, stored and never reconciled."""
    env, _ = simulated_environment(cloud=SimCloud(seed=1, create_polls=0))
    env.apply(database_manifest(name))
    return env, env.get(KIND, name)


# ---------------------------------------------------------------- the connection Secret
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


def test_a_connection_secret_the_api_server_refuses_as_invalid_is_called_so() -> None:
    """A connection Secret the API server refuses as invalid is a terminal error whose
    reason names the Secret (``ConnectionSecretInvalid``), not the object's spec."""
    env, _ = _stored()
    env.faults.fail("create", "Secret", error=Invalid("data: invalid key"))
    env.reconcile(KIND, "db")
    failed = env.condition(KIND, "db", "Failed")
    assert failed is not None and failed.reason == "ConnectionSecretInvalid"
    assert "connection Secret default/db-conn is invalid" in failed.message


def test_reading_a_stored_password_asks_the_api_server_unless_the_caller_creates() -> None:
    """Reading the stored password asks the API server: the cache's store may not hold a
    Secret that exists yet. Only a caller that creates the Secret when none is found
    answers a missing one from the store, since its create tells one the store lacks."""
    env, obj = _stored()
    api = CountingCache(env.api)
    assert ConnectionSecrets(api, DatabaseInstance).stored_password(obj) is None
    assert (api.lookups, api.secret_gets) == (0, 1)
    api = CountingCache(env.api)
    assert ConnectionSecrets(api, DatabaseInstance).stored_password(obj, creating=True) is None
    assert (api.lookups, api.secret_gets) == (1, 0)


def test_persisting_a_password_keeps_a_secret_another_writer_created_first_unforced() -> None:
    """Persisting a password, unless forced, keeps the password of a Secret another writer
    for the same object created just before, and leaves that Secret as it was written:
    nothing changed in its data, so nothing is written."""
    env, obj = _stored()
    secrets = ConnectionSecrets(RacedSecretCreate(env, obj["metadata"]["uid"]), DatabaseInstance,
                                lambda: "second-password")
    assert secrets.ensure_password(obj) == "first-password"
    secret = env.api.get("v1", "Secret", "default", "db-conn")
    assert env.secret("db-conn") == {"password": "first-password"}
    assert CONNECTION_SECRET_LABEL not in (secret["metadata"].get("labels") or {})
    assert not secret["metadata"].get("ownerReferences")


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


def test_ensure_password_reuses_a_stored_password_and_writes_nothing_even_forced() -> None:
    """A password already in the connection Secret is reused as it is: no new one is
    generated and the Secret is not written, even for a forced pass."""
    env, _ = simulated_environment()
    env.apply(database_manifest("db"))
    owner = env.get(KIND, "db")
    ConnectionSecrets(env.api, DatabaseInstance, lambda: "stored-password").ensure_password(
        owner)
    writes = env.api.writes("Secret")
    made: list[str] = []

    def factory() -> str:
        made.append("new-password")
        return "new-password"

    secrets = ConnectionSecrets(env.api, DatabaseInstance, factory)
    assert secrets.ensure_password(owner, forced=True) == "stored-password"
    assert env.api.writes("Secret") == writes
    assert made == []
    assert env.secret("db-conn") == {"password": "stored-password"}


# --------------------------------------------------------------------------- publishing
def test_publishing_unchanged_details_writes_nothing_by_default() -> None:
    """``publish`` without ``forced`` writes the Secret only when the details change it:
    the second publish of the same details writes nothing and leaves the Secret's
    resourceVersion as it was."""
    env, _ = make(create_polls=0)
    owner = ready(env)
    secrets = ConnectionSecrets(env.api, DatabaseInstance)
    secrets.publish(owner, {"region": "eu-west-1"})
    written = env.api.get("v1", "Secret", "default", "db-conn")
    assert decode(written)["region"] == "eu-west-1"
    before = env.api.writes("Secret")
    ConnectionSecrets(env.api, DatabaseInstance).publish(owner, {"region": "eu-west-1"})
    assert env.api.writes("Secret") == before
    again = env.api.get("v1", "Secret", "default", "db-conn")
    assert again["metadata"]["resourceVersion"] == written["metadata"]["resourceVersion"]


# ---------------------------------------------------------------------------- ownership
def test_the_connection_secret_blocks_its_owners_foreground_deletion() -> None:
    """The Secret's controller ownerReference has ``blockOwnerDeletion``: deleted in the
    foreground, the owner (its resource deleted, its finalizer removed) stays while the
    Secret lingers behind another finalizer, and goes once the Secret is gone."""
    env, cloud = make(create_polls=0)
    ready(env)
    secret = env.api.get("v1", "Secret", "default", "db-conn")
    secret["metadata"]["finalizers"] = ["example.com/hold"]
    env.api.replace(secret)
    env.api.delete(DatabaseInstance.api_version, KIND, "default", "db",
                   propagation_policy="Foreground")
    env.enqueue(KIND, "db")
    env.run_until_idle()
    assert cloud.count("delete") == 1
    owner = env.get(KIND, "db")  # raises NotFound if the Secret did not block it
    assert owner["metadata"].get("finalizers") == ["foregroundDeletion"]
    lingering = env.api.get("v1", "Secret", "default", "db-conn")
    assert lingering["metadata"].get("deletionTimestamp")
    lingering["metadata"]["finalizers"] = []
    env.api.replace(lingering)
    for kind, api_version, name in (("Secret", "v1", "db-conn"),
                                    (KIND, DatabaseInstance.api_version, "db")):
        try:
            env.api.get(api_version, kind, "default", name)
        except NotFound:
            continue
        raise AssertionError(f"{kind} {name} is still there")
