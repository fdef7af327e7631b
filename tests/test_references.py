"""References between objects: the pure rule, the CRD it declares, and the pass.

The pure part (:mod:`lifecycle.core.references`) without fakes; the pass on the harness
against the session's real PostgreSQL server, once per admin kind (``env``): an
unresolved reference is a condition and nothing else, a resolved one is written into
the spec, and what a tenant writes never reaches another namespace.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from lifecycle.core.errors import TerminalError
from lifecycle.core.kind import FINALIZER
from lifecycle.core.references import (
    Declared,
    ReferenceIndex,
    choose,
    declared,
    pending,
)
from lifecycle.driver.references import turned_resolvable
from lifecycle.machines.postgres import GROUP, Grant, kinds
from lifecycle.providers.postgres.fields import API_VERSION
from lifecycle.providers.postgres.grant_spec import GrantParameters
from lifecycle.providers.postgres.scenarios.testing import PostgresServer, manifest
from lifecycle.testing import Environment

ROLE = Declared("role", API_VERSION, "Role", "roleRef", "roleSelector")


def obj(name: str, *, namespace: str = "team-a", ready: bool = True, external: str = "",
        labels: dict[str, str] | None = None, config: str | None = None,
        controller: str | None = None, deleting: bool = False) -> dict[str, Any]:
    """An object of a referenced kind as the API would hold it."""
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "labels": labels or {}}
    if controller:
        meta["ownerReferences"] = [{"controller": True, "uid": controller, "kind": "X",
                                    "name": "x", "apiVersion": "v1"}]
    if deleting:
        meta["deletionTimestamp"] = "2030-01-01T00:00:00Z"
    spec: dict[str, Any] = {"forProvider": {}}
    if config:
        spec["providerConfigRef"] = {"name": config}
    return {"metadata": meta, "spec": spec, "status": {
        "externalName": external or f"{name}_pg",
        "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


# ------------------------------------------------------------------- pure
def test_the_postgres_kinds_declare_what_provider_sql_references() -> None:
    found = {k.kind: [(d.field, d.kind, d.ref_key, d.selector_key)
                      for d in declared(k.parameters)] for k, _ in kinds()}
    assert found == {
        "Role": [], "Database": [],
        "Grant": [("role", "Role", "roleRef", "roleSelector"),
                  ("database", "Database", "databaseRef", "databaseSelector")],
        "Schema": [("database", "Database", "databaseRef", "databaseSelector"),
                   ("role", "Role", "roleRef", "roleSelector")],
        "Extension": [("database", "Database", "databaseRef", "databaseSelector")],
        "DefaultPrivileges": [("role", "Role", "roleRef", "roleSelector"),
                              ("database", "Database", "databaseRef", "databaseSelector"),
                              ("schema", "Schema", "schemaRef", "schemaSelector")]}
    assert f"{GROUP}/v1alpha1" == API_VERSION


def test_a_reference_resolves_to_a_ready_object_of_the_same_config() -> None:
    grant = obj("g")
    assert choose(ROLE, [obj("app")], grant, named="app") == ("app_pg", "app")
    assert choose(ROLE, [], grant, named="app") == (
        "roleRef: Role 'app' not found in namespace 'team-a'")
    assert "is not Ready yet" in str(choose(ROLE, [obj("app", ready=False)], grant,
                                            named="app"))
    assert "is being deleted" in str(choose(ROLE, [obj("app", deleting=True)], grant,
                                            named="app"))
    assert "uses provider config 'other', this object 'default'" in str(
        choose(ROLE, [obj("app", config="other")], grant, named="app"))
    # Another object than the one named never answers for it.
    assert "not found" in str(choose(ROLE, [obj("other")], grant, named="app"))


def test_a_selector_resolves_only_to_exactly_one_match() -> None:
    from lifecycle.core.references import Selector

    grant = obj("g", controller="owner-1")
    team = Selector(matchLabels={"team": "a"})
    one = [obj("app", labels={"team": "a"}), obj("b", labels={"team": "b"})]
    assert choose(ROLE, one, grant, selector=team) == ("app_pg", "app")
    two = [*one, obj("app2", labels={"team": "a"})]
    assert choose(ROLE, two, grant, selector=team) == (
        "roleSelector: 2 Roles in namespace 'team-a' match (app, app2); a selector must "
        "match exactly one")
    assert "no Role" in str(choose(ROLE, [obj("b", labels={"team": "b"})], grant,
                                   selector=team))
    mine = Selector(matchLabels={"team": "a"}, matchControllerRef=True)
    controlled = [obj("app", labels={"team": "a"}, controller="owner-1"),
                  obj("app2", labels={"team": "a"}, controller="owner-2"),
                  obj("app3", labels={"team": "a"})]
    assert choose(ROLE, controlled, grant, selector=mine) == ("app_pg", "app")
    # Without a controller of its own, matchControllerRef matches nothing.
    assert "no Role" in str(choose(ROLE, controlled, obj("g"), selector=mine))


def test_only_empty_fields_with_a_reference_are_pending() -> None:
    spec = {"forProvider": {"roleRef": {"name": "app"}, "database": "db",
                            "databaseRef": {"name": "other"}, "privileges": ["ALL"]}}
    wanted = pending(GrantParameters, spec)
    assert [(d.field, ref.name if ref else None) for d, ref, _ in wanted] == [("role", "app")]
    assert pending(GrantParameters, {"forProvider": {"role": "x", "database": "y"}}) == []


@pytest.mark.parametrize(("value", "said"), [
    ({"name": "app", "namespace": "team-b"}, "same namespace only"),
    ({"name": ""}, "non-empty"),
    ("app", "must be an object"),
    ({"name": "app", "policy": {"resolve": "Always"}}, "unknown field(s) policy"),
])
def test_a_malformed_reference_is_refused_naming_it(value: Any, said: str) -> None:
    with pytest.raises(TerminalError) as caught:
        pending(GrantParameters, {"forProvider": {"roleRef": value}})
    assert caught.value.reason == "InvalidReference"
    assert "'roleRef'" in caught.value.message and said in caught.value.message


@pytest.mark.parametrize("labels", [{"team": "a,name=victim"}, {"team": "a b"},
                                    {"bad key": "a"}, {"team": 3}])
def test_selector_labels_must_be_labels(labels: dict[str, Any]) -> None:
    with pytest.raises(TerminalError) as caught:
        pending(GrantParameters, {"forProvider": {"roleSelector": {"matchLabels": labels}}})
    assert "'roleSelector'" in caught.value.message


def test_the_spec_needs_the_field_or_its_reference() -> None:
    with pytest.raises(TerminalError, match="'role' is required \\(or roleRef or roleSelector"):
        Grant.parse_parameters({"forProvider": {"database": "db", "privileges": ["ALL"]}})
    parsed = Grant.parse_parameters({"forProvider": {
        "roleRef": {"name": "app"}, "databaseSelector": {"matchLabels": {"a": "b"}},
        "privileges": ["CONNECT"]}})
    assert parsed.role is None and parsed.role_ref.name == "app"


def test_the_crd_carries_the_references_and_the_rule() -> None:
    from lifecycle.schema import crds

    doc = crds.crd(Grant)
    schema = doc["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    params = schema["properties"]["spec"]["properties"]["forProvider"]
    assert "role" not in params.get("required", [])
    assert params["properties"]["roleRef"]["required"] == ["name"]
    assert set(params["properties"]["roleSelector"]["properties"]) == {
        "matchLabels", "matchControllerRef"}
    assert {"rule": "has(self.role) || has(self.roleRef) || has(self.roleSelector)",
            "message": "role, roleRef or roleSelector is required"} in params[
        "x-kubernetes-validations"]


def test_the_index_holds_what_waits_until_it_is_resolved() -> None:
    index = ReferenceIndex()
    waiting = {"metadata": {"name": "g", "namespace": "team-a"}, "spec": {"forProvider": {
        "roleRef": {"name": "app"}, "databaseSelector": {"matchLabels": {"tier": "db"}}}}}
    index.update("Grant", GrantParameters, waiting, ("team-a", "g"))
    assert index.waiting_on(API_VERSION, "Role", obj("app")) == {("Grant", ("team-a", "g"))}
    assert index.waiting_on(API_VERSION, "Role", obj("app", namespace="team-b")) == set()
    assert index.waiting_on(API_VERSION, "Role", obj("other")) == set()
    assert index.waiting_on(API_VERSION, "Database", obj("d", labels={"tier": "db"})) == {
        ("Grant", ("team-a", "g"))}
    assert index.waiting_on(API_VERSION, "Database", obj("d", labels={"tier": "x"})) == set()
    resolved = {**waiting, "spec": {"forProvider": {**waiting["spec"]["forProvider"],
                                                    "role": "r", "database": "d"}}}
    index.update("Grant", GrantParameters, resolved, ("team-a", "g"))
    assert index.waiting_on(API_VERSION, "Role", obj("app")) == set() and len(index) == 0
    index.update("Grant", GrantParameters, waiting, ("team-a", "g"))
    index.update("Grant", GrantParameters, None, ("team-a", "g"))
    assert len(index) == 0


def test_a_referenced_object_wakes_its_referrers_when_it_turns_ready() -> None:
    assert turned_resolvable(None, obj("app"))
    assert turned_resolvable(obj("app", ready=False), obj("app"))
    assert not turned_resolvable(obj("app"), obj("app"))
    assert not turned_resolvable(obj("app"), obj("app", ready=False))
    assert turned_resolvable(obj("app"), obj("app", labels={"team": "a"}))
    assert not turned_resolvable(obj("app", ready=False), obj("app", deleting=True))


# -------------------------------------------------------------- the pass
NS = "team-a"


@pytest.fixture
def tenant(env: Environment) -> Environment:
    env.namespace(NS)
    env.namespace("team-b")
    return env


def by_ref(name: str, namespace: str = NS, **forprovider: Any) -> dict[str, Any]:
    doc = manifest("Grant", name, namespace=namespace, privileges=["CONNECT"])
    doc["spec"]["forProvider"].update(forprovider)
    return doc


def synced(env: Environment, name: str, namespace: str = NS) -> Any:
    return env.condition("Grant", name, "Synced", namespace)




@pytest.mark.postgres
def test_an_unresolved_reference_is_a_condition_and_nothing_else(
        tenant: Environment, server: PostgresServer) -> None:
    env = tenant
    env.apply(by_ref("g", roleRef={"name": "app"}, databaseRef={"name": "db"}))
    step = env.reconcile("Grant", "g", NS)

    assert step.result is not None and step.result.reason == "ReferenceUnresolved"
    cond = synced(env, "g")
    assert cond.status.value == "False" and cond.reason == "ReferenceUnresolved"
    assert cond.message == ("unresolved reference(s): roleRef: Role 'app' not found in "
                            "namespace 'team-a'; databaseRef: Database 'db' not found in "
                            "namespace 'team-a'")
    failed = env.condition("Grant", "g", "Failed", NS)
    assert failed is not None and failed.reason == "ReferenceUnresolved"
    meta = env.get("Grant", "g", NS)["metadata"]
    assert FINALIZER not in (meta.get("finalizers") or [])

    env.apply(manifest("Role", "app", namespace=NS))
    env.advance(120)  # the Grant still waits on its Database: backed off, never settled
    cond = synced(env, "g")
    assert cond.message.startswith("unresolved reference(s): databaseRef: Database 'db' not")

    env.apply(manifest("Database", "db", namespace=NS))
    env.run_until_idle()
    grant = env.get("Grant", "g", NS)
    params = grant["spec"]["forProvider"]
    role, database = env.get("Role", "app", NS), env.get("Database", "db", NS)
    assert params["role"] == role["status"]["externalName"]
    assert params["database"] == database["status"]["externalName"]
    assert env.condition("Grant", "g", "Ready", NS).status.value == "True"
    assert grant["status"]["observedGeneration"] == grant["metadata"]["generation"]
    from postgres_helpers import query
    assert query(server, "SELECT has_database_privilege(%s, %s, 'CONNECT')",
                 params["role"], params["database"]) == [(True,)]


@pytest.mark.postgres
def test_a_reference_never_reaches_another_namespace(tenant: Environment) -> None:
    env = tenant
    env.apply(manifest("Role", "app", namespace="team-b"))
    env.apply(manifest("Database", "db", namespace="team-b"))
    env.apply(manifest("Database", "mine", namespace=NS))
    env.apply(by_ref("g", roleRef={"name": "app"}, databaseRef={"name": "mine"}))
    env.apply(by_ref("s", roleSelector={"matchLabels": {}}, databaseRef={"name": "mine"}))
    env.advance(120)

    assert "roleRef: Role 'app' not found in namespace 'team-a'" in synced(env, "g").message
    assert "roleSelector: no Role in namespace 'team-a' matches" in synced(env, "s").message
    for name in ("g", "s"):
        params = env.get("Grant", name, NS)["spec"]["forProvider"]
        assert "role" not in params and "database" not in params, params


@pytest.mark.postgres
def test_a_selector_writes_the_value_and_the_reference_it_chose(tenant: Environment) -> None:
    env = tenant
    for name, team in (("app", "x"), ("app2", "x"), ("solo", "y")):
        doc = manifest("Role", name, namespace=NS)
        doc["metadata"]["labels"] = {"team": team}
        env.apply(doc)
    env.apply(manifest("Database", "db", namespace=NS))
    env.apply(by_ref("two", roleSelector={"matchLabels": {"team": "x"}},
                     databaseRef={"name": "db"}))
    env.apply(by_ref("one", roleSelector={"matchLabels": {"team": "y"}},
                     databaseRef={"name": "db"}))
    env.advance(120)

    assert "roleSelector: 2 Roles in namespace 'team-a' match (app, app2)" in synced(
        env, "two").message
    params = env.get("Grant", "one", NS)["spec"]["forProvider"]
    assert params["roleRef"] == {"name": "solo"}
    assert params["role"] == env.get("Role", "solo", NS)["status"]["externalName"]
    assert env.condition("Grant", "one", "Ready", NS).status.value == "True"


@pytest.mark.postgres
def test_a_field_already_set_is_left_as_it_is(tenant: Environment) -> None:
    env = tenant
    env.apply(manifest("Role", "app", namespace=NS))
    env.apply(manifest("Database", "db", namespace=NS))
    env.run_until_idle()
    role = env.get("Role", "app", NS)["status"]["externalName"]
    env.apply(by_ref("g", role=role, roleRef={"name": "missing"},
                     databaseRef={"name": "db"}))
    env.run_until_idle()
    params = env.get("Grant", "g", NS)["spec"]["forProvider"]
    assert params["role"] == role
    assert env.condition("Grant", "g", "Ready", NS).status.value == "True"


@pytest.mark.postgres
def test_the_api_refuses_a_grant_without_role_or_reference(tenant: Environment) -> None:
    from lifecycle.kube.errors import ApiError

    with pytest.raises(ApiError, match="role, roleRef or roleSelector is required"):
        tenant.apply(by_ref("none", database="db"))
    with pytest.raises(ApiError, match="namespace"):
        tenant.apply(by_ref("elsewhere", roleRef={"name": "app", "namespace": "team-b"},
                            database="db"))


@pytest.mark.postgres
def test_schema_extension_and_default_privileges_resolve_theirs(
        superuser_env: Environment, server: PostgresServer) -> None:
    env = superuser_env
    env.namespace(NS)
    owner = f"owner_{uuid.uuid4().hex[:8]}"
    for name, external in (("app", None), ("owner", owner)):
        env.apply(manifest("Role", name, namespace=NS, external_name=external))
    env.apply(manifest("Database", "db", namespace=NS))
    schema = manifest("Schema", "s", namespace=NS, external_name="refs")
    schema["spec"]["forProvider"] = {"databaseRef": {"name": "db"}, "roleRef": {"name": "owner"}}
    env.apply(schema)
    extension = manifest("Extension", "e", namespace=NS, extension="hstore")
    extension["spec"]["forProvider"]["databaseSelector"] = {"matchLabels": {}}
    env.apply(extension)
    defaults = manifest("DefaultPrivileges", "d", namespace=NS, targetRole=owner,
                        objectType="table", privileges=["SELECT"])
    defaults["spec"]["forProvider"].update(roleRef={"name": "app"}, databaseRef={"name": "db"},
                                           schemaRef={"name": "s"})
    env.apply(defaults)
    env.run_until_idle()

    database = env.get("Database", "db", NS)["status"]["externalName"]
    app = env.get("Role", "app", NS)["status"]["externalName"]
    assert env.get("Schema", "s", NS)["spec"]["forProvider"] == {
        "databaseRef": {"name": "db"}, "roleRef": {"name": "owner"}, "database": database,
        "role": owner, "revokePublicOnSchema": False}
    ext = env.get("Extension", "e", NS)["spec"]["forProvider"]
    assert ext["database"] == database and ext["databaseRef"] == {"name": "db"}
    dp = env.get("DefaultPrivileges", "d", NS)["spec"]["forProvider"]
    assert (dp["role"], dp["database"], dp["schema"]) == (app, database, "refs")
    for kind, name in (("Schema", "s"), ("Extension", "e"), ("DefaultPrivileges", "d")):
        assert env.condition(kind, name, "Ready", NS).status.value == "True", kind


def test_an_operator_of_grants_alone_may_read_and_watch_what_they_reference() -> None:
    from lifecycle.driver.manifests import cluster_rules
    from lifecycle.machines.postgres import Database, Role

    alone = cluster_rules([Grant])
    assert {"apiGroups": [GROUP], "resources": ["databases", "roles"],
            "verbs": ["get", "list", "watch"]} in alone
    # Run together, the referenced kinds get the rules of a kind the operator runs only.
    together = cluster_rules([Grant, Role, Database])
    assert not any(r["verbs"] == ["get", "list", "watch"] and "roles" in r["resources"]
                   for r in together)
    assert any("roles" in r["resources"] and "update" in r["verbs"] for r in together)


class _Controller:
    """Stands for a controller in :func:`follow_references`: its followers and its queue."""

    def __init__(self) -> None:
        self.followers: list[Any] = []
        self.queued: list[tuple[str | None, str]] = []

    def enqueue(self, key: tuple[str | None, str]) -> None:
        self.queued.append(key)


def test_the_operator_queues_waiting_objects_only_when_a_referenced_one_may_resolve_them(
        ) -> None:
    from lifecycle.driver.references import follow_references
    from lifecycle.machines.postgres import Database, Role

    class Manager:
        controllers = {"Grant": _Controller(), "Role": _Controller(),
                       "Database": _Controller()}

    manager = Manager()
    index = follow_references(manager, [Grant, Role, Database])  # type: ignore[arg-type]
    assert index is not None
    grants, roles = manager.controllers["Grant"], manager.controllers["Role"]

    def role_event(old: dict[str, Any] | None, new: dict[str, Any] | None) -> list[Any]:
        grants.queued.clear()
        for follow in roles.followers:
            follow(old, new)
        return grants.queued

    waiting = {"metadata": {"name": "g", "namespace": "team-a"}, "spec": {"forProvider": {
        "roleSelector": {"matchLabels": {"team": "a"}}, "database": "db"}}}
    for follow in grants.followers:
        follow(None, waiting)
    one, two = obj("app", labels={"team": "a"}), obj("app2", labels={"team": "a"})
    assert role_event(None, obj("app", ready=False, labels={"team": "a"})) == []
    assert role_event(obj("app", ready=False, labels={"team": "a"}), one) == [("team-a", "g")]
    assert role_event(None, two) == [("team-a", "g")]
    assert role_event(two, two) == []  # a status write of a Ready object changes nothing
    assert role_event(None, obj("x", labels={"team": "b"})) == []
    assert role_event(None, obj("app", namespace="team-b", labels={"team": "a"})) == []
    # The second match leaving the selector, or going, may leave one match: queued.
    relabelled = obj("app2", labels={"team": "b"})
    assert role_event(two, relabelled) == [("team-a", "g")]
    assert role_event(one, None) == [("team-a", "g")]
    # Resolved: no longer waiting, never queued again.
    resolved = {**waiting, "spec": {"forProvider": {
        **waiting["spec"]["forProvider"], "role": "app_pg", "roleRef": {"name": "app"}}}}
    for follow in grants.followers:
        follow(waiting, resolved)
    assert len(index) == 0 and role_event(None, one) == []
