"""An object changes only the external resource it owns.

Ownership marks (the simulated cloud stores them as a tag), explicit and
permitted adoption, and one owner per external name across namespaces. The
victim's resource stays exactly as it was, nothing that changes it is
called, and every object stays deletable.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
import pytest

from lifecycle.core.contract import ManagedResource, ProviderConfig
from lifecycle.core.kind import ADOPT, EXTERNAL_NAME, INTENT
from lifecycle.core.ownership import NotOwnedError, Verdict, judge, mark_uid, owner_mark
from lifecycle.core.values import Observation
from lifecycle.providers.simcloud import OWNER_TAG, DatabaseConnector, SimCloud
from lifecycle.providers.simcloud.scenarios.harness import database_manifest, simulated_environment
from lifecycle.runtime.names import NameIndex
from lifecycle.testing import Environment

KIND = "DatabaseInstance"
CREDS = ("AKIDEXAMPLE", "s3cr3t")
PARAMS = {"engine": "postgres", "storage_gb": 20}


# ------------------------------------------------------------------ the pure rule
def _judge(observation: Observation | None, **options: Any) -> Verdict:
    given: dict[str, Any] = {"uid": "u-1", "name": "n", "acted_before": False,
                             "adopt": False, "adoption_allowed": False,
                             "namespace": "default", **options}
    return judge(observation, **given).verdict


def test_judge_owns_what_is_absent_unmarked_by_a_provider_without_marks_or_marked_ours() -> None:
    assert _judge(None) is Verdict.OWNED
    assert _judge(Observation.absent()) is Verdict.OWNED
    assert _judge(Observation(exists=True)) is Verdict.OWNED  # owner None: no marks kept
    assert _judge(Observation(exists=True, owner=owner_mark("op", "u-1"))) is Verdict.OWNED
    assert _judge(Observation(exists=True, owner=owner_mark("op", "u-1")),
                  operator="op") is Verdict.OWNED
    # Without an operator id only the uid is compared; with one, both must match.
    assert _judge(Observation(exists=True, owner=owner_mark("renamed", "u-1"))) is Verdict.OWNED
    other = judge(Observation(exists=True, owner=owner_mark("other-op", "u-1")), uid="u-1",
                  name="n", acted_before=True, adopt=False, adoption_allowed=False,
                  namespace="t", operator="op")
    assert other.verdict is Verdict.REFUSED and other.error is not None
    assert other.error.reason == "ExternalNameConflict"
    assert "another operator ('other-op', not 'op')" in other.error.message


def test_judge_refuses_unmarked_and_foreign_resources_unless_adoption_is_permitted() -> None:
    unmarked = Observation(exists=True, owner="")
    foreign = Observation(exists=True, owner=owner_mark("op", "u-2"))
    refused = judge(unmarked, uid="u-1", name="precious", acted_before=False, adopt=False,
                    adoption_allowed=True, namespace="t")
    assert refused.verdict is Verdict.REFUSED and isinstance(refused.error, NotOwnedError)
    assert refused.error.reason == "ExternalResourceNotOwned"
    assert ADOPT in refused.error.message
    conflict = judge(foreign, uid="u-1", name="x", acted_before=False, adopt=False,
                     adoption_allowed=False, namespace="t")
    assert conflict.error is not None and conflict.error.reason == "ExternalNameConflict"
    assert "u-2" in conflict.error.message
    not_allowed = judge(unmarked, uid="u-1", name="x", acted_before=False, adopt=True,
                        adoption_allowed=False, namespace="t")
    assert not_allowed.verdict is Verdict.REFUSED and "not allowed" in str(not_allowed.error)
    assert _judge(unmarked, adopt=True, adoption_allowed=True) is Verdict.MARK
    assert _judge(foreign, adopt=True, adoption_allowed=True) is Verdict.MARK


def test_judge_marks_an_unmarked_resource_this_object_already_acted_on() -> None:
    assert _judge(Observation(exists=True, owner=""), acted_before=True) is Verdict.MARK
    # ...but never one marked by someone else, nor one the provider protects.
    foreign = Observation(exists=True, owner=owner_mark("op", "u-2"))
    assert _judge(foreign, acted_before=True) is Verdict.REFUSED
    protected = Observation(exists=True, owner="", protected="role is a superuser")
    assert _judge(protected, acted_before=True) is Verdict.REFUSED
    assert _judge(protected, adopt=True, adoption_allowed=True) is Verdict.REFUSED
    assert "superuser" in str(judge(protected, uid="u", name="r", acted_before=True,
                                    adopt=True, adoption_allowed=True,
                                    namespace=None).error)


def test_mark_round_trip() -> None:
    assert mark_uid(owner_mark("lifecycle", "1234-abcd")) == "1234-abcd"
    assert mark_uid(owner_mark("team/a", "uid")) == "uid"


# ------------------------------------------------------------------ the name index
def _obj(name: str, namespace: str, uid: str, created: str, *, held: str | None = None,
         annotated: str | None = None, config: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": uid,
                            "creationTimestamp": created, "annotations": {}}
    if held is not None:
        meta["finalizers"] = ["lifecycle.dev/finalizer"]
        meta["annotations"][EXTERNAL_NAME] = held
    if annotated is not None:
        meta["annotations"][EXTERNAL_NAME] = annotated
    spec = {"providerConfigRef": {"name": config}} if config else {}
    return {"metadata": meta, "spec": spec, "status": {}}


class Store:
    def __init__(self, *objs: dict[str, Any]) -> None:
        self.objs = {(o["metadata"]["namespace"], o["metadata"]["name"]): o for o in objs}
        self.lists = 0

    def list(self) -> list[dict[str, Any]]:
        self.lists += 1
        return list(self.objs.values())

    def get(self, namespace: str | None, name: str) -> Mapping[str, Any] | None:
        return self.objs.get((namespace or "", name))


def test_the_index_gives_a_name_to_one_object_across_namespaces() -> None:
    a = _obj("a", "default", "ua", "2026-01-01T00:00:00Z", held="shared")
    store = Store(a)
    index = NameIndex(store.list, store.get)
    b = _obj("b", "team-b", "ub", "2026-01-02T00:00:00Z", annotated="shared")
    store.objs[("team-b", "b")] = b
    assert index.claim(b, "shared") == ("ua", "default", "a", "2026-01-01T00:00:00Z")
    assert index.claim(a, "shared") is None
    # Another provider config is another namespace of names.
    other = _obj("c", "team-c", "uc", "2026-01-03T00:00:00Z", annotated="shared",
                 config="eu")
    assert index.claim(other, "shared") is None
    # The holder lets go: the next claimant gets it.
    index.release(a, "shared")
    assert index.claim(b, "shared") is None
    assert index.claim(a, "shared") is not None
    assert store.lists == 1  # loaded once, then kept by claims and releases


def test_the_index_forgets_a_holder_that_is_gone_or_renamed_and_the_older_holder_wins() -> None:
    a = _obj("a", "default", "ua", "2026-01-01T00:00:00Z", held="shared")
    b = _obj("b", "team-b", "ub", "2026-01-02T00:00:00Z", held="shared")
    store = Store(a, b)
    index = NameIndex(store.list, store.get)
    # Both hold it (written before the index existed): the older object keeps it.
    assert index.claim(b, "shared") is not None
    assert index.claim(a, "shared") is None
    # The holder vanished without us removing its finalizer.
    del store.objs[("default", "a")]
    assert index.claim(b, "shared") is None
    # A holder that now names another resource no longer holds this one.
    c = _obj("c", "team-c", "uc", "2026-01-03T00:00:00Z", annotated="shared")
    store.objs[("team-b", "b")] = _obj("b", "team-b", "ub", "2026-01-02T00:00:00Z",
                                      held="elsewhere")
    assert index.claim(c, "shared") is None


# ------------------------------------------------------------------ on the cloud
def _env(**options: Any) -> tuple[Environment, SimCloud]:
    env, cloud = simulated_environment(cloud=SimCloud(seed=3, create_polls=0), **options)
    for ns in ("team-a", "team-b"):
        env.namespace(ns)
    return env, cloud


def _named(name: str, namespace: str, external: str, storage_gb: int = 20,
           **annotations: str) -> dict[str, Any]:
    return database_manifest(name, namespace, storage_gb=storage_gb,
                             annotations={EXTERNAL_NAME: external, **annotations})


def _reason(env: Environment, name: str, namespace: str = "default") -> str | None:
    """The reason of the Failed condition, checking Synced is False with the same message."""
    synced = env.condition(KIND, name, "Synced", namespace)
    failed = env.condition(KIND, name, "Failed", namespace)
    assert synced is not None and synced.status.value == "False"
    assert failed is not None and failed.status.value == "True"
    assert failed.message == synced.message
    return failed.reason


def _changes(cloud: SimCloud, name: str) -> int:
    return sum(cloud.count(op, name) for op in ("create", "modify", "delete",
                                                   "reset_password"))


def _deletable(env: Environment, name: str, namespace: str = "default") -> None:
    env.delete(KIND, name, namespace)
    env.advance(120)
    assert not env.exists(KIND, name, namespace)


def test_an_instance_created_outside_the_operator_is_never_adopted_silently() -> None:
    env, cloud = _env()
    cloud.create_instance(CREDS, "precious", PARAMS, password="owners-password-1")
    before = cloud.instances()["precious"], cloud.password_of("precious")
    env.apply(_named("db", "team-a", "precious"))
    env.advance(600)
    assert _reason(env, "db", "team-a") == "ExternalResourceNotOwned"
    assert any(e["type"] == "Warning" and "precious" in e["message"]
               for e in env.events("db"))
    assert _changes(cloud, "precious") == 1  # its own creation, nothing since
    assert (cloud.instances()["precious"], cloud.password_of("precious")) == before
    _deletable(env, "db", "team-a")
    assert (cloud.instances()["precious"], cloud.password_of("precious")) == before


def test_adoption_needs_the_annotation_and_the_operators_permission() -> None:
    env, cloud = _env()
    cloud.create_instance(CREDS, "legacy", {**PARAMS, "size": "large"})
    env.apply(_named("db", "team-a", "legacy", **{ADOPT: "true"}))
    env.advance(300)
    synced = env.condition(KIND, "db", "Synced", "team-a")
    assert synced is not None and "not allowed in namespace 'team-a'" in synced.message
    assert _changes(cloud, "legacy") == 1
    # The operator allows adoption in team-a (as `lifecycle run --allow-adoption team-a`).
    allowed, _ = simulated_environment(cloud=cloud, api=env.api, clock=env.clock,
                                       allow_adoption=["team-a"])
    env.reconcilers[KIND] = allowed.reconcilers[KIND]
    env.advance(300)
    assert env.state(KIND, "db", "team-a") == "ready"
    uid = env.get(KIND, "db", "team-a")["metadata"]["uid"]
    assert mark_uid(cloud.instances()["legacy"]["tags"][OWNER_TAG]) == uid
    assert cloud.instances()["legacy"]["size"] == "small"  # now managed by the spec
    _deletable(env, "db", "team-a")
    assert "legacy" not in cloud.instances()  # adopted: deleted with its object


def test_two_objects_one_external_name_the_second_is_refused_without_a_call() -> None:
    env, cloud = _env()
    env.apply(_named("a", "team-a", "shared"))
    env.advance(60)
    assert env.state(KIND, "a", "team-a") == "ready"
    calls_for_shared = sum(cloud.count(op, "shared") for op in ("create", "describe",
                                                                "modify", "delete"))
    env.reconcilers[KIND].allow_adoption = frozenset({"*"})  # adoption cannot take a held name
    env.apply(database_manifest("b", "team-b", storage_gb=50,
                                annotations={EXTERNAL_NAME: "shared", ADOPT: "true"}))
    for _ in range(20):
        env.advance(30)
        env.reconcile(KIND, "a", "team-a")
    assert _reason(env, "b", "team-b") == "ExternalNameConflict"
    assert "team-a/a" in env.condition(KIND, "b", "Synced", "team-b").message
    assert env.state(KIND, "a", "team-a") == "ready"
    assert cloud.instances()["shared"]["storage_gb"] == 20
    # b never reached the provider: only a's polls touched "shared".
    assert cloud.count("create", "shared") == 1 and cloud.count("modify", "shared") == 0
    assert sum(cloud.count(op, "shared") for op in ("create", "describe", "modify",
                                                     "delete")) > calls_for_shared
    assert "lifecycle.dev/finalizer" not in (
        env.get(KIND, "b", "team-b")["metadata"].get("finalizers") or [])
    _deletable(env, "b", "team-b")
    assert "shared" in cloud.instances() and env.state(KIND, "a", "team-a") == "ready"


def test_when_the_holder_goes_the_waiting_claimant_gets_the_name() -> None:
    env, cloud = _env()
    env.apply(_named("a", "team-a", "shared"))
    env.advance(60)
    env.apply(_named("b", "team-b", "shared"))
    env.advance(60)
    assert _reason(env, "b", "team-b") == "ExternalNameConflict"
    env.delete(KIND, "a", "team-a")
    env.advance(900)
    assert not env.exists(KIND, "a", "team-a")
    assert env.state(KIND, "b", "team-b") == "ready"
    uid = env.get(KIND, "b", "team-b")["metadata"]["uid"]
    assert mark_uid(cloud.instances()["shared"]["tags"][OWNER_TAG]) == uid
    assert cloud.creations("shared") == 2  # a fresh instance, not a's


def test_a_resource_marked_by_another_object_is_refused_and_left_on_deletion() -> None:
    env, cloud = _env()
    cloud.create_instance(CREDS, "theirs", PARAMS,
                          tags={OWNER_TAG: owner_mark("other-operator", "uid-elsewhere")})
    env.apply(_named("db", "default", "theirs"))
    env.advance(300)
    assert _reason(env, "db") == "ExternalNameConflict"
    assert _changes(cloud, "theirs") == 1
    _deletable(env, "db")
    assert "theirs" in cloud.instances()


def test_a_resource_marked_by_another_operator_with_this_uid_is_not_ours() -> None:
    """Issue 28: the mark's operator id was ignored, only the uid compared."""
    env, cloud = _env()
    obj = env.apply(_named("db", "default", "theirs"))
    cloud.create_instance(CREDS, "theirs", PARAMS, password="their-password-1",
                          tags={OWNER_TAG: owner_mark("other-operator", obj["metadata"]["uid"])})
    before = cloud.instances()["theirs"], cloud.password_of("theirs")
    env.advance(300)
    assert _reason(env, "db") == "ExternalNameConflict"
    assert _changes(cloud, "theirs") == 1
    _deletable(env, "db")
    assert (cloud.instances()["theirs"], cloud.password_of("theirs")) == before


def test_an_unmarked_instance_this_object_created_gets_its_mark() -> None:
    """A create interrupted before the mark was stored, or made before marks existed:
    the object's intent journal shows it acted on the name, so it is its own."""
    env, cloud = _env()
    env.apply(_named("db", "default", "mine"))
    env.advance(60)
    assert env.state(KIND, "db") == "ready"
    assert INTENT in env.get(KIND, "db")["metadata"]["annotations"]
    with cloud._lock:  # strip the tag, as an old operator version would have left it
        cloud._instances["mine"].tags.clear()
    env.enqueue(KIND, "db")
    env.advance(120)
    assert env.state(KIND, "db") == "ready"
    uid = env.get(KIND, "db")["metadata"]["uid"]
    assert mark_uid(cloud.instances()["mine"]["tags"][OWNER_TAG]) == uid
    assert cloud.creations("mine") == 1


class Unmarked:
    """A connector whose clients report no marks (a provider that cannot store them)."""

    def __init__(self, inner: DatabaseConnector) -> None:
        self.inner = inner

    def connect(self, resource: ManagedResource, config: ProviderConfig) -> Any:
        client = self.inner.connect(resource, config)
        observe = client.observe

        def unmarked(r: ManagedResource) -> Observation:
            return attrs.evolve(observe(r), owner=None)

        client.observe = unmarked
        return client


def test_the_index_alone_protects_a_provider_without_marks() -> None:
    cloud = SimCloud(seed=3, create_polls=0)
    env, _ = simulated_environment(cloud=cloud)
    env.reconcilers[KIND].connector = Unmarked(DatabaseConnector(cloud))
    env.namespace("team-b")
    env.apply(_named("a", "default", "shared"))
    env.advance(60)
    env.apply(database_manifest("b", "team-b", annotations={EXTERNAL_NAME: "shared"},
                                storage_gb=50))
    env.advance(600)
    assert _reason(env, "b", "team-b") == "ExternalNameConflict"
    assert cloud.count("modify", "shared") == 0
    assert cloud.instances()["shared"]["storage_gb"] == 20


@pytest.mark.parametrize("broken", ["skip_index", "skip_marks"])
def test_each_protection_is_needed_a_variant_without_it_is_caught(broken: str) -> None:
    """Check the checks: with either protection switched off the victim is changed."""
    env, cloud = _env()
    reconciler = env.reconcilers[KIND]
    if broken == "skip_index":
        reconciler.names.claim = lambda obj, name: None  # type: ignore[method-assign]
        reconciler.connector = Unmarked(DatabaseConnector(cloud))
        env.apply(_named("a", "team-a", "shared"))
        env.advance(60)
        env.apply(database_manifest("b", "team-b", annotations={EXTERNAL_NAME: "shared"},
                                    storage_gb=50))
        env.advance(300)
        assert cloud.count("modify", "shared") > 0  # the fight the index prevents
    else:
        reconciler._judge = lambda run, facts: facts  # type: ignore[method-assign]
        cloud.create_instance(CREDS, "precious", PARAMS)
        env.apply(_named("db", "team-a", "precious"))
        env.advance(300)
        env.delete(KIND, "db", "team-a")
        env.advance(300)
        assert "precious" not in cloud.instances()  # adopted and dropped


def test_acted_on_counts_every_journal_entry_but_a_failed_create() -> None:
    from lifecycle.core.ownership import acted_on
    from lifecycle.core.values import Intent
    assert not acted_on(None)
    assert acted_on(Intent("create", "u/create/1/1", 1, "t"))  # pending: may have made it
    assert acted_on(Intent("create", "u/create/1/1", 1, "t", "succeeded"))
    assert not acted_on(Intent("create", "u/create/1/1", 1, "t", "failed"))
    assert acted_on(Intent("update", "u/update/1/2", 1, "t", "failed"))


class Racing:
    """A connector whose create finds that someone else created the name just before."""

    def __init__(self, cloud: SimCloud) -> None:
        self.cloud = cloud
        self.inner = DatabaseConnector(cloud)

    def connect(self, resource: ManagedResource, config: ProviderConfig) -> Any:
        client = self.inner.connect(resource, config)
        create = client.create

        def racing(r: ManagedResource) -> Any:
            if r.external_name not in self.cloud.instances():
                self.cloud.create_instance(CREDS, r.external_name, PARAMS,
                                           password="the-racers-password")
            return create(r)

        client.create = racing
        return client


def test_an_instance_created_by_someone_else_during_our_create_is_not_adopted() -> None:
    cloud = SimCloud(seed=3, create_polls=0)
    env, _ = simulated_environment(cloud=cloud)
    env.reconcilers[KIND].connector = Racing(cloud)
    env.apply(_named("db", "default", "raced", storage_gb=40))
    env.advance(600)
    assert _reason(env, "db") == "ExternalResourceNotOwned"
    raced = cloud.instances()["raced"]
    assert raced["storage_gb"] == 20 and raced["tags"] == {}
    assert cloud.password_of("raced") == "the-racers-password"
    assert cloud.count("modify", "raced") == 0
    _deletable(env, "db")
    assert "raced" in cloud.instances()


def test_run_checks_the_adoption_namespaces(capsys: pytest.CaptureFixture[str]) -> None:
    from lifecycle.cli import main

    assert main(["run", "--embedded", "--allow-adoption", "Bad_NS!!"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--allow-adoption 'Bad_NS!!'" in err
