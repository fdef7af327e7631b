"""Runtime rules that once survived the whole suite when broken (issue 31).

Each test is named after the rule it pins down and fails on a one-line
breakage of ``lifecycle/runtime`` that no other test noticed:

- the intent journal resumes a pending key only at the generation it was
  minted for (``effects.next_intent``);
- a late-initialisation write the schema pruned is reported as
  ``ConfigValid False LateInitNotPersisted``, never taken as persisted
  (``ObjectWrites.late_init``);
- the external-name index never releases a name held by another object
  (``NameIndex.release``).

They run in mutmut's fast selection (``pyproject.toml``) and stand as
canaries in ``tests/test_mutation_canaries.py``.
"""

from __future__ import annotations

import json
import re
from contextlib import suppress
from datetime import UTC, datetime
from typing import Any

import attrs
import pytest
from helpers import KIND, Crash, external, make, name_holder, ready

from lifecycle.core.contract import ManagedResource, ProviderConfig
from lifecycle.core.errors import HandledError, Severity
from lifecycle.core.kind import EXTERNAL_NAME, FINALIZER, INTENT
from lifecycle.core.values import Intent, Observation, ResultKind
from lifecycle.machines.database import DatabaseInstance
from lifecycle.providers.simcloud import DatabaseConnector, SimCloud
from lifecycle.providers.simcloud.scenarios.harness import database_manifest
from lifecycle.runtime.effects import next_intent
from lifecycle.runtime.names import NameIndex, _older
from lifecycle.testing import Environment

AT = datetime(2026, 1, 1, tzinfo=UTC)


def _intent(env: Environment, name: str = "db") -> dict[str, Any]:
    return json.loads(env.get(KIND, name)["metadata"]["annotations"][INTENT])


# ------------------------------------------------- the journal and the generation
def test_a_pending_intent_is_resumed_only_at_its_own_generation() -> None:
    pending = Intent("update", "u/update/2/4", 2, "2025-12-31T00:00:00Z")
    # Same operation, same generation: the interrupted call, resumed with its key.
    assert next_intent(pending, "update", "u", 2, AT) is pending
    # A new generation is a new intent: a new key of that generation, the next sequence.
    retried = next_intent(pending, "update", "u", 3, AT)
    assert retried == Intent("update", "u/update/3/5", 3, "2026-01-01T00:00:00Z")
    # Also for a create pending at an older generation.
    created = Intent("create", "u/create/1/1", 1, "2025-12-31T00:00:00Z")
    assert next_intent(created, "create", "u", 2, AT) == Intent(
        "create", "u/create/2/2", 2, "2026-01-01T00:00:00Z")


def test_an_update_lost_at_one_generation_is_retried_under_a_key_of_the_next() -> None:
    env, cloud = make()
    ready(env, version="15")
    uid = env.get(KIND, "db")["metadata"]["uid"]
    real_modify = cloud.modify_instance

    def lost(*args: Any, **kwargs: Any) -> Any:
        raise Crash

    cloud.modify_instance = lost  # type: ignore[method-assign]
    env.apply(database_manifest("db", version="15", storage_gb=30))  # generation 2
    with suppress(Crash):
        env.reconcile(KIND, "db")
    cloud.modify_instance = real_modify  # type: ignore[method-assign]
    pending = _intent(env)
    assert pending == {**pending, "operation": "update", "outcome": "pending",
                       "key": f"{uid}/update/2/2", "generation": 2}

    env.apply(database_manifest("db", version="15", storage_gb=40))  # generation 3
    env.run_until_idle()
    assert env.state(KIND, "db") == "ready"
    assert cloud.instances()[external(env)]["storage_gb"] == 40
    done = _intent(env)
    assert done == {**done, "operation": "update",
                    "key": f"{uid}/update/3/3", "generation": 3}


# ------------------------------------------------ late initialisation, pruned
def test_a_late_init_write_the_schema_pruned_is_reported_not_taken_as_persisted() -> None:
    env, _ = make(create_polls=1)
    real_replace = env.api.replace

    def pruning(obj: dict[str, Any]) -> dict[str, Any]:
        params = (obj.get("spec") or {}).get("forProvider")
        if isinstance(params, dict):
            params.pop("version", None)  # as a structural schema without the field would
        return real_replace(obj)

    env.api.replace = pruning  # type: ignore[method-assign]
    env.apply(database_manifest("db"))
    env.reconcile(KIND, "db")  # creates
    env.reconcile(KIND, "db")  # observes the provider's default version, tries to write it
    obj = env.get(KIND, "db")
    assert "version" not in obj["spec"]["forProvider"]
    generation = obj["metadata"]["generation"]
    config = env.condition(KIND, "db", "ConfigValid")
    assert config is not None
    assert (config.status.value, config.reason) == ("False", "LateInitNotPersisted")
    assert config.message == ("provider defaults for version could not be written to "
                              "spec.forProvider (pruned by the schema?)")
    assert config.observed_generation == generation


def test_a_late_init_write_after_a_concurrent_spec_change_leaves_the_pass_dirty() -> None:
    """The user changes storage between the pass's read and its late-init write: the write
    conflicts, is retried on a fresh read and lands, but the pass observed generation 1
    only. It must requeue at once, not claim the user's generation as observed."""
    env, cloud = make(create_polls=1)
    env.apply(database_manifest("db"))
    env.reconcile(KIND, "db")  # creates
    real_replace = env.api.replace
    raced: list[bool] = []

    def replace(obj: dict[str, Any]) -> dict[str, Any]:
        params = (obj.get("spec") or {}).get("forProvider") or {}
        if obj["kind"] == KIND and params.get("version") == "15" and not raced:
            raced.append(True)
            user = env.get(KIND, "db")
            user["spec"]["forProvider"]["storageGB"] = 30
            real_replace(user)  # generation 2, between our read and our write
        return real_replace(obj)

    env.api.replace = replace  # type: ignore[method-assign]
    step = env.reconcile(KIND, "db")
    env.api.replace = real_replace  # type: ignore[method-assign]
    assert raced and step.error is None
    assert (step.result.kind, step.result.reason) == (ResultKind.REQUEUE_NOW, "ObjectChanged")
    obj = env.get(KIND, "db")
    assert obj["metadata"]["generation"] == 3  # the user's edit, then the late-init write
    assert obj["spec"]["forProvider"] == {"engine": "postgres", "storageGB": 30,
                                          "size": "small", "version": "15"}
    assert obj["status"]["observedGeneration"] == 1
    assert {c["type"]: c["observedGeneration"] for c in obj["status"]["conditions"]} == {
        "Ready": 1, "Synced": 1, "Creating": 1}
    env.run_until_idle()
    assert env.get(KIND, "db")["status"]["observedGeneration"] == 3
    assert cloud.instances()[external(env)]["storage_gb"] == 30


def test_a_late_init_write_that_persisted_only_in_part_is_reported() -> None:
    """Two provider defaults, one for a field the CRD does not declare: the schema prunes
    it, the other is written and the generation moves, but the write did not persist
    whole: it is reported, not taken as persisted."""

    class Undeclared(_ReportsEverything):
        late_init = {"version": "15", "maintenance_window": "sun"}

    env = Environment([(DatabaseInstance, Undeclared(SimCloud(seed=1, create_polls=1)))])
    env.provider_config()
    env.apply(database_manifest("db", size="small"))
    env.reconcile(KIND, "db")  # creates
    env.reconcile(KIND, "db")  # writes both; the schema keeps the version only
    obj = env.get(KIND, "db")
    assert obj["spec"]["forProvider"]["version"] == "15"
    assert "maintenance_window" not in obj["spec"]["forProvider"]
    assert obj["metadata"]["generation"] == 2
    config = env.condition(KIND, "db", "ConfigValid")
    assert config is not None
    assert (config.status.value, config.reason, config.message) == (
        "False", "LateInitNotPersisted", "provider defaults for maintenance_window, version "
        "could not be written to spec.forProvider (pruned by the schema?)")


def test_a_late_init_write_that_keeps_conflicting_ends_the_pass_with_its_name() -> None:
    from lifecycle.kube.errors import Conflict

    env, _ = make(create_polls=1)
    env.apply(database_manifest("db"))
    env.reconcile(KIND, "db")  # creates; the next pass late-initialises the version
    env.api.faults.add("replace", KIND, error=Conflict)
    step = env.reconcile(KIND, "db")
    assert step.result is None
    assert step.error is not None and "late-init write kept conflicting" in step.error


def test_a_late_init_write_that_persisted_reports_no_problem() -> None:
    env, _ = make(create_polls=1)
    env.apply(database_manifest("db"))
    env.run_until_idle()
    obj = env.get(KIND, "db")
    assert obj["spec"]["forProvider"]["version"] == "15"
    config = env.condition(KIND, "db", "ConfigValid")
    assert config is None or config.reason != "LateInitNotPersisted"


class _ReportsEverything:
    """A SimCloud connector whose observation reports ``late_init`` for late-init."""

    late_init: dict[str, Any] = {"size": "large", "version": "15"}

    def __init__(self, cloud: SimCloud) -> None:
        self.inner = DatabaseConnector(cloud)

    def connect(self, resource: ManagedResource, config: ProviderConfig) -> Any:
        client = self.inner.connect(resource, config)
        reported = self.late_init

        class Client:
            def __getattr__(self, name: str) -> Any:
                return getattr(client, name)

            def observe(self, res: ManagedResource) -> Observation:
                seen = client.observe(res)
                if not seen.exists:
                    return seen
                return attrs.evolve(seen, late_init={**seen.late_init, **reported})

        return Client()


def test_late_init_never_overwrites_a_value_the_user_set() -> None:
    cloud = SimCloud(seed=1, create_polls=0)
    env = Environment([(DatabaseInstance, _ReportsEverything(cloud))])
    env.provider_config()
    env.apply(database_manifest("db", size="small"))
    env.run_until_idle()
    assert env.state(KIND, "db") == "ready"
    params = env.get(KIND, "db")["spec"]["forProvider"]
    assert params["size"] == "small"  # the user's value, kept
    assert params["version"] == "15"  # the unset one, filled in
    assert cloud.instances()[external(env)]["size"] == "small"


class _NoticeOnUpdate:
    """A SimCloud connector whose update succeeds and then raises an informational notice."""

    def __init__(self, cloud: SimCloud) -> None:
        self.inner = DatabaseConnector(cloud)

    def connect(self, resource: ManagedResource, config: ProviderConfig) -> Any:
        client = self.inner.connect(resource, config)

        class Client:
            def __getattr__(self, name: str) -> Any:
                return getattr(client, name)

            def update(self, res: ManagedResource) -> None:
                client.update(res)
                raise HandledError("maintenance window starts in 1h",
                                   reason="MaintenanceScheduled",
                                   severity=Severity.INFORMATIONAL)

        return Client()


def test_an_informational_error_is_recorded_as_an_informational_condition() -> None:
    env = Environment([(DatabaseInstance, _NoticeOnUpdate(SimCloud(seed=1, create_polls=0)))])
    env.provider_config()
    ready(env, version="15")
    env.apply(database_manifest("db", version="15", storage_gb=40))  # generation 2
    env.reconcile(KIND, "db")
    notice = env.condition(KIND, "db", "Informational")
    assert notice is not None
    assert (notice.status.value, notice.reason, notice.message, notice.observed_generation) == (
        "True", "MaintenanceScheduled", "maintenance window starts in 1h", 2)


# -------------------------------------------------------- the external-name index
def test_the_name_index_never_releases_a_name_another_object_holds() -> None:
    a = name_holder("a", "ua", "2026-01-01T00:00:00Z", held="x")
    b = name_holder("b", "ub", "2026-01-02T00:00:00Z", annotated="x")
    objs = {"a": a, "b": b}
    index = NameIndex(lambda: list(objs.values()), lambda _ns, name: objs.get(name))
    holder_a = ("ua", "default", "a", "2026-01-01T00:00:00Z")
    assert index.claim(b, "x") == holder_a  # b lost x to a
    del objs["b"]
    index.release(b, "x")  # b is deleted: it held nothing to give up
    c = name_holder("c", "uc", "2026-01-03T00:00:00Z", annotated="x")
    objs["c"] = c
    assert index.claim(c, "x") == holder_a  # a still holds x
    index.release(a, "x")  # the holder gives it up: the next claimant gets it
    assert index.claim(c, "x") is None


def test_deleting_an_object_that_lost_a_name_leaves_the_name_with_its_holder() -> None:
    env, cloud = make(create_polls=0)
    # Both hold "shared" (finalizer and name committed, as restored from a backup taken
    # before the index existed): the older object, a, keeps it and b loses it.
    for name, storage in (("a", 20), ("b", 50)):
        manifest = database_manifest(name, storage_gb=storage,
                                     annotations={EXTERNAL_NAME: "shared"})
        manifest["metadata"]["finalizers"] = [FINALIZER]
        env.apply(manifest)
        env.advance(1)
    env.advance(60)
    assert env.state(KIND, "a") == "ready"
    assert env.condition(KIND, "b", "Failed").reason == "ExternalNameConflict"
    env.delete(KIND, "b")  # b's deletion leaves a's resource alone and releases nothing
    env.reconcile(KIND, "b")
    assert not env.exists(KIND, "b")
    assert "shared" in cloud.instances()

    # c comes before a's next poll (which would claim the name for a again).
    env.apply(database_manifest("c", storage_gb=60, annotations={EXTERNAL_NAME: "shared"}))
    env.reconcile(KIND, "c")
    failed = env.condition(KIND, "c", "Failed")
    assert failed is not None and failed.reason == "ExternalNameConflict"
    assert failed.message == "external name 'shared' is held by default/a; choose another name"
    assert FINALIZER not in (env.get(KIND, "c")["metadata"].get("finalizers") or [])
    assert env.state(KIND, "a") == "ready"
    assert cloud.instances()["shared"]["storage_gb"] == 20
    assert cloud.count("modify", "shared") == 0


def test_of_two_holders_of_one_name_the_older_object_keeps_it() -> None:
    # (uid, namespace, name, creationTimestamp): the earlier creation first, then the
    # namespace, then the name, then the uid decide; never the uid alone.
    early = ("u9", "team-z", "z", "2026-01-01T00:00:00Z")
    late = ("u1", "team-a", "a", "2026-01-02T00:00:00Z")
    assert _older(late, early) == early == _older(early, late)
    by_namespace = ("u9", "team-a", "z", "2026-01-01T00:00:00Z")
    assert _older(early, by_namespace) == by_namespace == _older(by_namespace, early)
    by_name = ("u9", "team-z", "a", "2026-01-01T00:00:00Z")
    assert _older(early, by_name) == by_name == _older(by_name, early)
    cluster_scoped = [("u9", None, "z", "2026-01-01T00:00:00Z"),
                      ("u1", None, "y", "2026-01-01T00:00:00Z")]
    assert _older(*cluster_scoped) == cluster_scoped[1] == _older(*reversed(cluster_scoped))


# ------------------------------------- a provider that names what it creates
def test_a_deletion_while_down_learns_the_assigned_name_and_deletes_it_in_one_pass() -> None:
    """A create the provider named, crashed before the name was recorded; the object is
    deleted while the operator is down. The first deleting pass resumes the create with
    its journalled key, commits the assigned name, keeps the journal sealed for it (the
    delete intent continues its sequence) and deletes the resource, with no error."""
    from test_verify_keys import Keyed, KeyedAPI, KeyedConnector

    api = KeyedAPI()
    env = Environment([(Keyed, KeyedConnector(api))])
    env.provider_config()
    env.apply({"apiVersion": Keyed.api_version, "kind": Keyed.kind,
               "metadata": {"name": "t", "namespace": "default"},
               "spec": {"forProvider": {"size": 1}}})
    real_create = api.create

    def crash_after(token: str, params: dict[str, Any]) -> str:
        real_create(token, params)
        raise Crash

    api.create = crash_after  # type: ignore[method-assign]
    with suppress(Crash):
        env.reconcile(Keyed.kind, "t")
    api.create = real_create  # type: ignore[method-assign]
    uid = env.get(Keyed.kind, "t")["metadata"]["uid"]
    assert api.names() == {"kr-0001"}
    assert env.get(Keyed.kind, "t")["metadata"]["annotations"][EXTERNAL_NAME] != "kr-0001"

    env.delete(Keyed.kind, "t")
    step = env.reconcile(Keyed.kind, "t")
    assert step.error is None and step.after == "deleting"
    obj = env.get(Keyed.kind, "t")
    assert obj["metadata"]["annotations"][EXTERNAL_NAME] == "kr-0001"
    assert obj["status"]["externalName"] == "kr-0001"
    # The deletion's start bumped the generation (as on a real server).
    assert json.loads(obj["metadata"]["annotations"][INTENT]) == {
        "generation": 2, "key": f"{uid}/delete/2/2", "operation": "delete",
        "outcome": "pending", "started": "2026-01-01T00:00:00Z"}
    assert api.names() == set() and api.creates == 2  # the resumed create made nothing new
    env.run_until_idle()
    assert not env.exists(Keyed.kind, "t")
    # The pass that removes the last finalizer records no Normal Event: the object goes.
    assert [e["reason"] for e in env.events("t")] == ["Delete"]


# ----------------------------------------------------- provider config usage
def test_an_object_uses_the_provider_config_it_names_else_the_default() -> None:
    from lifecycle.runtime.providerconfigs import ProviderConfigReconciler, config_of

    def managed(name: str, ref: Any = None, **meta: Any) -> dict[str, Any]:
        spec = {} if ref is None else {"providerConfigRef": ref}
        return {"metadata": {"name": name, "namespace": "team", **meta}, "spec": spec}

    assert config_of(managed("a", {"name": "eu"})) == "eu"
    for unnamed in (None, {}, {"name": ""}, {"name": 5}, "eu"):
        assert config_of(managed("a", unnamed)) == "default", unnamed
    objs = [managed("a", {"name": "eu"}), managed("b"), managed("c", {"name": ""}),
            managed("d", {"name": "eu"}, deletionTimestamp="2026-01-01T00:00:00Z"),
            managed("e", {"name": "eu"}, deletionTimestamp="2026-01-01T00:00:00Z",
                    finalizers=["lifecycle.dev/finalizer"]),
            {"metadata": {"name": "f"}, "spec": {"providerConfigRef": {"name": "eu"}}}]
    usage = ProviderConfigReconciler(None, [DatabaseInstance],  # type: ignore[arg-type]
                                     lister=lambda kind: objs)
    # d is on its way out; f is cluster-scoped.
    assert usage.users("eu") == [f"{KIND} team/a", f"{KIND} team/e", f"{KIND} f"]
    assert usage.users("default") == [f"{KIND} team/b", f"{KIND} team/c"]
    assert usage.users("us") == []


def test_a_provider_config_write_retries_conflicts_then_ends_the_pass() -> None:
    from lifecycle.core.errors import UnhandledError
    from lifecycle.core.kind import PROVIDER_CONFIG_API, PROVIDER_CONFIG_KIND
    from lifecycle.kube.errors import Conflict
    from lifecycle.runtime.providerconfigs import IN_USE, ProviderConfigReconciler

    env, _ = make()
    usage = ProviderConfigReconciler(env.api, [DatabaseInstance])
    env.api.faults.add("replace", PROVIDER_CONFIG_KIND, error=Conflict, times=2)
    assert usage.reconcile(None, "default").reason == "Unused"  # two 409s absorbed
    config = env.api.get(PROVIDER_CONFIG_API, PROVIDER_CONFIG_KIND, None, "default")
    assert IN_USE in config["metadata"]["finalizers"]
    env.api.delete(PROVIDER_CONFIG_API, PROVIDER_CONFIG_KIND, None, "default")
    env.api.faults.add("replace", PROVIDER_CONFIG_KIND, error=Conflict)
    with pytest.raises(UnhandledError, match=r"^provider config write kept conflicting$"):
        usage.reconcile(None, "default")


def test_a_scoped_name_is_released_in_its_scope() -> None:
    """For a kind whose names live in a scope (a database's roles), the holder's release
    frees the name in that scope at once, while the holder is still being removed."""
    def scoped(name: str, uid: str, created: str, scope: str, **kw: Any) -> dict[str, Any]:
        obj = name_holder(name, uid, created, **kw)
        obj["spec"] = {"database": scope}
        return obj

    a = scoped("a", "ua", "2026-01-01T00:00:00Z", "db1", held="x")
    objs = {"a": a}
    index = NameIndex(lambda: list(objs.values()), lambda _ns, name: objs.get(name),
                      scope=lambda o: (o["spec"]["database"],))
    other_scope = scoped("b", "ub", "2026-01-02T00:00:00Z", "db2", annotated="x")
    assert index.claim(other_scope, "x") is None  # another scope: another name
    index.release(a, "x")  # a's finalizer is being removed; a is still stored, holding x
    c = scoped("c", "uc", "2026-01-03T00:00:00Z", "db1", annotated="x")
    objs["c"] = c
    assert index.claim(c, "x") is None


def test_a_deletion_removes_only_the_engines_finalizer() -> None:
    env, cloud = make(create_polls=0, delete_polls=0)
    manifest = database_manifest("db")
    manifest["metadata"]["finalizers"] = ["example.com/keep"]
    env.apply(manifest)
    env.run_until_idle()
    assert env.get(KIND, "db")["metadata"]["finalizers"] == ["example.com/keep", FINALIZER]
    env.delete(KIND, "db")
    env.run_until_idle()
    assert not cloud.instances()
    assert env.get(KIND, "db")["metadata"]["finalizers"] == ["example.com/keep"]


# ---------------------------------------------------------- connection Secrets
def test_a_secret_belongs_to_the_uid_its_annotation_or_controller_reference_names() -> None:
    from lifecycle.core.kind import OWNER_UID
    from lifecycle.runtime.secrets import secret_owner

    controller = {"uid": "u1", "controller": True}
    assert secret_owner({"metadata": {"ownerReferences": [controller]}}) == "u1"
    assert secret_owner({"metadata": {"ownerReferences": [{"uid": "u2"}, controller]}}) == "u1"
    assert secret_owner({"metadata": {"ownerReferences": [{"uid": "u2"}]}}) is None
    marked = {"annotations": {OWNER_UID: "u3"}, "ownerReferences": [controller]}
    assert secret_owner({"metadata": marked}) == "u3"
    assert secret_owner({"metadata": {}}) is None


def test_publishing_writes_changed_details_and_leaves_an_unchanged_secret_alone() -> None:
    from lifecycle.runtime.secrets import ConnectionSecrets

    env, _ = make(create_polls=0)
    owner = ready(env)
    secrets = ConnectionSecrets(env.api, DatabaseInstance)
    stored = env.api.get("v1", "Secret", "default", "db-conn")
    assert stored["type"] == "Opaque"
    secrets.publish(owner, {"endpoint": "moved.example"})
    moved = env.api.get("v1", "Secret", "default", "db-conn")
    assert moved["data"]["endpoint"] == "bW92ZWQuZXhhbXBsZQ=="  # base64 of the new value
    assert moved["data"]["password"] == stored["data"]["password"]
    ConnectionSecrets(env.api, DatabaseInstance).publish(owner, {"endpoint": "moved.example"})
    again = env.api.get("v1", "Secret", "default", "db-conn")
    assert again["metadata"]["resourceVersion"] == moved["metadata"]["resourceVersion"]


def test_a_generated_password_is_32_url_safe_characters_and_never_repeats() -> None:
    from lifecycle.runtime.secrets import generate_password

    made = {generate_password() for _ in range(20)}
    assert len(made) == 20
    assert all(re.fullmatch(r"[A-Za-z0-9_-]{32}", p) for p in made)


def test_a_blocked_deletion_names_the_first_three_users_and_counts_the_rest() -> None:
    from lifecycle.runtime.providerconfigs import usage

    deleting = {"metadata": {"name": "eu", "deletionTimestamp": "2026-01-01T00:00:00Z"}}
    users = [f"{KIND} ns/db{i}" for i in (3, 1, 2, 4)]
    waits = "deletion waits until no object uses this provider config: "
    assert usage(deleting, users[:1]).blocked == waits + f"{KIND} ns/db3"
    assert usage(deleting, users[:3]).blocked == (
        waits + f"{KIND} ns/db1, {KIND} ns/db2, {KIND} ns/db3")
    assert usage(deleting, users).blocked == (
        waits + f"{KIND} ns/db1, {KIND} ns/db2, {KIND} ns/db3 and 1 more")
    released = usage(deleting, [])
    assert released.finalizer is False and released.blocked is None
    assert released.status == {"users": 0, "usedBy": []}


def test_the_first_write_of_a_connection_secret_carries_the_label_and_the_owner() -> None:
    from lifecycle.core.kind import CONNECTION_SECRET_LABEL, OWNER_UID

    env, _ = make()
    real_create = env.api.create
    created: list[dict[str, Any]] = []

    def create(obj: dict[str, Any], **options: Any) -> dict[str, Any]:
        made = real_create(obj, **options)
        if obj["kind"] == "Secret":
            created.append(made)
        return made

    env.api.create = create  # type: ignore[method-assign]
    env.apply(database_manifest("db"))
    env.reconcile(KIND, "db")  # persists the password before the create call
    (secret,) = created
    uid = env.get(KIND, "db")["metadata"]["uid"]
    assert secret["type"] == "Opaque"
    assert secret["metadata"]["labels"] == {CONNECTION_SECRET_LABEL: "true"}
    assert secret["metadata"]["annotations"] == {OWNER_UID: uid}
    assert [(r["kind"], r["uid"], r["controller"]) for r in
            secret["metadata"]["ownerReferences"]] == [(KIND, uid, True)]
    assert set(secret["data"]) == {"password"}


# ------------------------------------------------------------- failed calls
def test_an_action_failing_before_naming_an_operation_is_recorded_as_action() -> None:
    from lifecycle.core.decide import Facts, decide
    from lifecycle.machines.managed import ManagedResourceMachine
    from lifecycle.runtime.effects import run_actions

    decision = decide(ManagedResourceMachine, Facts("unclaimed",
                                                    observation=Observation.absent()))
    assert decision.actions
    refused = HandledError("no quota left", reason="QuotaExceeded")

    class Host:
        def __getattr__(self, name: str) -> Any:
            def action(effects: Any) -> None:
                raise refused
            return action

    failed, notices = run_actions(decision, Host(), None)
    assert (failed.error, failed.failed_operation, notices) == (refused, "action", ())
    named, _ = run_actions(decision, Host(), None, lambda: "create")
    assert named.failed_operation == "create"


class _FailingUpdate(_NoticeOnUpdate):
    """A SimCloud connector whose update is refused."""

    def connect(self, resource: ManagedResource, config: ProviderConfig) -> Any:
        client = self.inner.connect(resource, config)

        class Client:
            def __getattr__(self, name: str) -> Any:
                return getattr(client, name)

            def update(self, res: ManagedResource) -> None:
                raise HandledError("no quota left", reason="QuotaExceeded")

        return Client()


def test_a_refused_call_closes_its_journal_entry_as_failed() -> None:
    env = Environment([(DatabaseInstance, _FailingUpdate(SimCloud(seed=1, create_polls=0)))])
    env.provider_config()
    ready(env, version="15")
    uid = env.get(KIND, "db")["metadata"]["uid"]
    env.apply(database_manifest("db", version="15", storage_gb=40))
    env.reconcile(KIND, "db")
    entry = _intent(env)
    assert entry == {**entry, "operation": "update", "key": f"{uid}/update/2/2",
                     "outcome": "failed"}
