"""The claim store's rules (:class:`lifecycle.runtime.claims.ClaimStore`), on the embedded API.

Propagation copies the bound resource's connection Secret into the claim's
namespace: it refuses, each with its own reason and message, a resource not
bound to this claim, a source Secret the resource does not control, and a
target Secret this claim does not control; it names the source in an
annotation and writes only when the data changed. Every write of the claim,
its status or the managed resource is rebuilt on a fresh read after a 409,
and one that keeps conflicting names what kept conflicting.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest

from lifecycle.core.claims import PROPAGATED_FROM, ClaimFacts, ReclaimPolicy, ResourceView
from lifecycle.core.errors import HandledError, Severity
from lifecycle.kube.conflict import ConflictsExhausted
from lifecycle.kube.errors import Conflict
from lifecycle.kube.objects import owner_reference
from lifecycle.machines.claim import DATABASE_BINDING
from lifecycle.providers.simcloud.scenarios.harness import claim_environment, database_manifest
from lifecycle.runtime.claims import ClaimPass, ClaimStore
from lifecycle.testing.claims import claim_manifest, class_manifest

POOL = "lifecycle-system"


class Recording:
    """The embedded API, recording every write and running ``before_write`` hooks first
    (a concurrent writer, for instance)."""

    def __init__(self, api: Any) -> None:
        self.inner = api
        self.writes: list[tuple[str, str, str]] = []
        self.before_write: list[Callable[[str, dict[str, Any]], None]] = []

    def _write(self, verb: str, obj: dict[str, Any]) -> None:
        for hook in list(self.before_write):
            hook(verb, obj)
        self.writes.append((verb, obj["kind"], obj["metadata"]["name"]))

    def create(self, obj: dict[str, Any], **kwargs: Any) -> Any:
        self._write("create", obj)
        return self.inner.create(obj, **kwargs)

    def replace(self, obj: dict[str, Any], **kwargs: Any) -> Any:
        self._write("replace", obj)
        return self.inner.replace(obj, **kwargs)

    def replace_status(self, obj: dict[str, Any], **kwargs: Any) -> Any:
        self._write("replace_status", obj)
        return self.inner.replace_status(obj, **kwargs)

    def __getattr__(self, attribute: str) -> Any:
        return getattr(self.inner, attribute)


@pytest.fixture
def world() -> Any:
    w = claim_environment(DATABASE_BINDING)
    w.env.namespace("team-a")
    return w


@pytest.fixture
def api(world: Any) -> Recording:
    return Recording(world.api)


@pytest.fixture
def store(api: Recording) -> ClaimStore:
    return ClaimStore(api, DATABASE_BINDING)  # type: ignore[arg-type]


def stored_claim(world: Any, name: str = "app", **options: Any) -> dict[str, Any]:
    return world.api.create(claim_manifest(name, "team-a", **options))


def bound_resource(world: Any, claim: dict[str, Any] | None) -> dict[str, Any]:
    """A managed resource in the pool whose claimRef names ``claim`` (when given)."""
    manifest = database_manifest("db", POOL)
    if claim is not None:
        meta = claim["metadata"]
        manifest["spec"]["claimRef"] = {"namespace": meta["namespace"], "name": meta["name"],
                                        "uid": meta["uid"]}
    return world.api.create(manifest)


def view(resource: dict[str, Any]) -> ResourceView:
    return ResourceView.from_object(resource)


def secret(world: Any, namespace: str, name: str, data: dict[str, str],
           owner: dict[str, Any] | None = None, controller: bool = True,
           annotations: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if owner is not None:
        meta["ownerReferences"] = [owner_reference(owner, controller=controller)]
    if annotations is not None:
        meta["annotations"] = annotations
    encoded = {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}
    return world.api.create({"apiVersion": "v1", "kind": "Secret", "metadata": meta,
                             "data": encoded})


def source(world: Any, resource: dict[str, Any], password: str = "pw-1") -> dict[str, Any]:
    """The resource's connection Secret, controlled by the resource."""
    return secret(world, POOL, "db-conn", {"password": password}, owner=resource)


def refusal(call: Callable[[], Any]) -> tuple[str, str]:
    with pytest.raises(HandledError) as refused:
        call()
    return refused.value.reason, str(refused.value)


def facts_for(claim: dict[str, Any], resource: dict[str, Any] | None) -> ClaimFacts:
    return ClaimFacts("binding", claim["metadata"]["uid"],
                      resource=None if resource is None else view(resource))


# ----------------------------------------------------------------- propagation refusals
def test_propagating_without_a_resource_bound_to_this_claim_is_not_bound(
        world: Any, store: ClaimStore, api: Recording) -> None:
    claim = stored_claim(world)
    run = ClaimPass(obj=claim, state="binding")
    assert refusal(lambda: store.propagate(run, facts_for(claim, None))) == (
        "NotBound", "the resource is not bound to this claim")
    other = stored_claim(world, "other")
    resource = bound_resource(world, other)
    source(world, resource)
    assert refusal(lambda: store.propagate(run, facts_for(claim, resource))) == (
        "NotBound", "the resource is not bound to this claim")
    assert api.writes == []


def test_propagating_from_a_missing_or_foreign_source_secret_is_source_secret_not_owned(
        world: Any, store: ClaimStore, api: Recording) -> None:
    claim = stored_claim(world)
    resource = bound_resource(world, claim)
    run = ClaimPass(obj=claim, state="binding")
    expected = ("SourceSecretNotOwned", f"connection Secret {POOL}/db-conn is missing or not "
                "controlled by the resource")
    assert refusal(lambda: store.propagate(run, facts_for(claim, resource))) == expected
    stranger = world.api.create(database_manifest("stranger", POOL))
    secret(world, POOL, "db-conn", {"password": "planted"}, owner=stranger)
    assert refusal(lambda: store.propagate(run, facts_for(claim, resource))) == expected
    world.api.delete("v1", "Secret", POOL, "db-conn")
    secret(world, POOL, "db-conn", {"password": "planted"}, owner=resource, controller=False)
    assert refusal(lambda: store.propagate(run, facts_for(claim, resource))) == expected
    assert api.writes == []


def test_propagating_over_a_secret_this_claim_does_not_control_is_secret_not_owned(
        world: Any, store: ClaimStore, api: Recording) -> None:
    claim = stored_claim(world)
    resource = bound_resource(world, claim)
    source(world, resource)
    theirs = secret(world, "team-a", "app-connection", {"password": "someone-elses"})
    run = ClaimPass(obj=claim, state="binding")
    assert refusal(lambda: store.propagate(run, facts_for(claim, resource))) == (
        "SecretNotOwned", "Secret team-a/app-connection exists and is not owned by this claim; "
        "not overwritten")
    assert world.api.get("v1", "Secret", "team-a", "app-connection") == theirs
    assert api.writes == []


# ----------------------------------------------------------------- propagation writes
def test_the_first_copy_is_an_opaque_secret_owned_by_the_claim_naming_its_source(
        world: Any, store: ClaimStore, api: Recording) -> None:
    claim = stored_claim(world, secret_name="app-db")
    resource = bound_resource(world, claim)
    original = source(world, resource)
    store.propagate(ClaimPass(obj=claim, state="binding"), facts_for(claim, resource))
    copy = world.api.get("v1", "Secret", "team-a", "app-db")
    assert copy["type"] == "Opaque"
    assert copy["data"] == original["data"]
    assert copy["metadata"]["annotations"] == {PROPAGATED_FROM: f"{POOL}/db-conn"}
    assert copy["metadata"]["ownerReferences"] == [owner_reference(claim)]
    assert api.writes == [("create", "Secret", "app-db")]


def test_an_unchanged_copy_is_not_written_again(
        world: Any, store: ClaimStore, api: Recording) -> None:
    claim = stored_claim(world)
    resource = bound_resource(world, claim)
    source(world, resource)
    run = ClaimPass(obj=claim, state="bound")
    store.propagate(run, facts_for(claim, resource))
    assert len(api.writes) == 1
    store.propagate(run, facts_for(claim, resource))
    store.propagate(run, facts_for(claim, resource))
    assert len(api.writes) == 1


def test_a_changed_source_rewrites_the_copy_keeping_its_other_annotations(
        world: Any, store: ClaimStore, api: Recording) -> None:
    claim = stored_claim(world)
    resource = bound_resource(world, claim)
    source(world, resource, "pw-2")
    secret(world, "team-a", "app-connection", {"password": "pw-1"}, owner=claim,
           annotations={"team.example/keep": "yes", PROPAGATED_FROM: "old/place"})
    store.propagate(ClaimPass(obj=claim, state="bound"), facts_for(claim, resource))
    copy = world.api.get("v1", "Secret", "team-a", "app-connection")
    assert base64.b64decode(copy["data"]["password"]) == b"pw-2"
    assert copy["metadata"]["annotations"] == {"team.example/keep": "yes",
                                               PROPAGATED_FROM: f"{POOL}/db-conn"}
    assert api.writes == [("replace", "Secret", "app-connection")]


def test_a_rewritten_copy_without_annotations_gains_the_source_annotation(
        world: Any, store: ClaimStore) -> None:
    claim = stored_claim(world)
    resource = bound_resource(world, claim)
    source(world, resource, "pw-2")
    secret(world, "team-a", "app-connection", {"password": "pw-1"}, owner=claim)
    store.propagate(ClaimPass(obj=claim, state="bound"), facts_for(claim, resource))
    copy = world.api.get("v1", "Secret", "team-a", "app-connection")
    assert copy["metadata"]["annotations"] == {PROPAGATED_FROM: f"{POOL}/db-conn"}
    assert base64.b64decode(copy["data"]["password"]) == b"pw-2"


# ----------------------------------------------------------------- reads
def test_a_cluster_scoped_managed_kind_is_read_without_a_namespace() -> None:
    reads: list[tuple[Any, ...]] = []
    fake = SimpleNamespace(get=lambda *args: reads.append(args) or {"metadata": {}})
    for namespaced, expected in ((False, None), (True, "pool")):
        binding = SimpleNamespace(managed=SimpleNamespace(
            api_version="x.example/v1", kind="Thing", namespaced=namespaced))
        ClaimStore(fake, binding).get_resource("pool", "db")  # type: ignore[arg-type]
        assert reads.pop() == ("x.example/v1", "Thing", expected, "db")


def test_a_missing_class_is_class_not_found_naming_it(store: ClaimStore) -> None:
    with pytest.raises(HandledError) as missing:
        store.get_class("gold")
    assert (missing.value.reason, str(missing.value)) == (
        "ClassNotFound", "DatabaseInstanceClass 'gold' not found")
    assert missing.value.severity is Severity.INFORMATIONAL


def test_a_malformed_class_grants_nothing_and_hides_no_later_grant() -> None:
    grant = {"claimNamespaces": ["team-b"]}
    classes = [{"metadata": {"name": "a-broken"}, "crossNamespaceBinding": "everyone"},
               {"metadata": {"name": "b-plain"}},
               {"metadata": {"name": "c-sharing"}, "crossNamespaceBinding": grant}]
    fake = SimpleNamespace(list=lambda *args, **kwargs: (classes, "1"))
    grants = ClaimStore(fake, DATABASE_BINDING).cross_namespace_grants()  # type: ignore[arg-type]
    assert [name for name, _ in grants] == ["c-sharing"]
    assert grants[0][1].claim_namespaces == ("team-b",)


def test_an_event_carries_its_type_reason_and_message(world: Any, store: ClaimStore) -> None:
    claim = stored_claim(world)
    store.event(claim, "Warning", "Something", "what happened")
    assert [(e["type"], e["reason"], e["message"]) for e in world.env.events("app")] == [
        ("Warning", "Something", "what happened")]


# ----------------------------------------------------------------- guarded writes
def concurrent_label(world: Any, kind: str, name: str, namespace: str) -> Callable[..., None]:
    """A hook that, before the first write of ``name``, lets another writer label it."""
    done: list[bool] = []

    def hook(verb: str, obj: dict[str, Any]) -> None:
        if done or obj["kind"] != kind or obj["metadata"]["name"] != name:
            return
        done.append(True)
        current = world.env.get(kind, name, namespace)
        current["metadata"].setdefault("labels", {})["other"] = "writer"
        world.api.replace(current)

    return hook


def test_a_claim_write_that_meets_a_concurrent_change_is_rebuilt_on_a_fresh_read(
        world: Any, store: ClaimStore, api: Recording) -> None:
    run = ClaimPass(obj=stored_claim(world), state="unbound")
    api.before_write.append(concurrent_label(world, "DatabaseClaim", "app", "team-a"))
    store.update_claim(run, lambda spec: spec.__setitem__("classRef", {"name": "gold"}))
    stored = world.claim("app", "team-a")
    assert stored["spec"]["classRef"] == {"name": "gold"}
    assert stored["metadata"]["labels"] == {"other": "writer"}
    assert run.obj == stored
    store.update_claim_meta(run, lambda meta: meta.setdefault("labels", {}).update(mine="1"))
    assert world.claim("app", "team-a")["metadata"]["labels"] == {"other": "writer", "mine": "1"}


def test_a_status_write_that_meets_a_concurrent_change_is_rebuilt_on_a_fresh_read(
        world: Any, store: ClaimStore, api: Recording) -> None:
    run = ClaimPass(obj=stored_claim(world), state="unbound")
    api.before_write.append(concurrent_label(world, "DatabaseClaim", "app", "team-a"))
    seen: list[dict[str, Any]] = []

    def build(old: Any) -> dict[str, Any]:
        seen.append(dict(old))
        return {**old, "state": "unbound"}

    store.write_status(run, build)
    stored = world.claim("app", "team-a")
    assert stored["status"]["state"] == "unbound"
    assert stored["metadata"]["labels"] == {"other": "writer"}
    assert run.obj == stored
    assert len(seen) == 2  # built again on the fresh read
    store.write_status(run, lambda old: dict(old))  # unchanged: not written
    assert [w for w in api.writes if w[0] == "replace_status"] == [
        ("replace_status", "DatabaseClaim", "app")] * 2


def test_a_resource_write_that_meets_a_conflict_is_retried_on_a_fresh_read(
        world: Any, store: ClaimStore, api: Recording) -> None:
    resource = bound_resource(world, None)
    api.before_write.append(concurrent_label(world, "DatabaseInstance", "db", POOL))

    def change(obj: dict[str, Any]) -> bool:
        obj["spec"]["reclaimPolicy"] = "Retain"
        return True

    store.update_resource((POOL, "db"), change)
    stored = world.env.get("DatabaseInstance", "db", POOL)
    assert stored["spec"]["reclaimPolicy"] == "Retain"
    assert stored["metadata"]["labels"] == {"other": "writer"}
    assert stored["metadata"]["uid"] == resource["metadata"]["uid"]


def test_a_resource_write_of_a_missing_resource_is_resource_not_found(
        store: ClaimStore, api: Recording) -> None:
    assert refusal(lambda: store.update_resource((POOL, "gone"), lambda obj: True)) == (
        "ResourceNotFound", f"managed resource {POOL}/gone not found")
    assert api.writes == []


class Conflicting(Recording):
    """Every write of ``kind`` answers 409."""

    def __init__(self, api: Any, kind: str) -> None:
        super().__init__(api)
        self.kind = kind

    def _write(self, verb: str, obj: dict[str, Any]) -> None:
        super()._write(verb, obj)
        if obj["kind"] == self.kind:
            raise Conflict("the object has been modified")


@pytest.mark.parametrize(("kind", "write", "what"), [
    ("DatabaseClaim", lambda store, run: store.update_claim(
        run, lambda spec: spec.__setitem__("classRef", {"name": "gold"})), "claim write"),
    ("DatabaseClaim", lambda store, run: store.write_status(
        run, lambda old: {**old, "state": "unbound"}), "claim status write"),
    ("DatabaseInstance", lambda store, run: store.update_resource(
        (POOL, "db"), lambda obj: True), "managed resource write"),
], ids=["claim", "status", "resource"])
def test_a_write_that_keeps_conflicting_names_what_kept_conflicting(
        world: Any, kind: str, write: Any, what: str) -> None:
    bound_resource(world, None)
    store = ClaimStore(Conflicting(world.api, kind), DATABASE_BINDING)  # type: ignore[arg-type]
    run = ClaimPass(obj=stored_claim(world), state="unbound")
    with pytest.raises(ConflictsExhausted) as exhausted:
        write(store, run)
    assert str(exhausted.value) == f"{what} kept conflicting (5 attempts)"


def test_a_class_listed_from_the_api_is_read_by_name(world: Any, store: ClaimStore) -> None:
    world.apply_class(class_manifest("gold", reclaim_policy="Retain"))
    assert store.get_class("gold").reclaim_policy is ReclaimPolicy.RETAIN
