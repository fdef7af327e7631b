"""Claims, classes and binding: the pure choices, then whole flows on the harness.

Every flow runs the claim reconciler and the managed reconciler side by side
on the embedded API and the simulated cloud (``ClaimEnvironment``).
"""

from __future__ import annotations

import base64
from typing import Any

import pytest
from statemachine import State

from lifecycle.core.claims import (
    DEFAULT_CLASS,
    PROPAGATED_FROM,
    RELEASED,
    ClaimFacts,
    ClassSelection,
    ReclaimPolicy,
    ResourceClass,
    ResourceView,
    choose_claim_event,
    dynamic_name,
    select_class,
)
from lifecycle.core.errors import HandledError, MachineDefinitionError, TerminalError
from lifecycle.core.kind import EXTERNAL_NAME, FINALIZER, connection_secret_ref
from lifecycle.core.machine import validate
from lifecycle.kube.errors import Invalid, ServerError
from lifecycle.machines.claim import DATABASE_BINDING, ClaimMachine
from lifecycle.providers.simcloud.scenarios.harness import claim_environment, database_manifest
from lifecycle.testing.claims import claim_manifest, class_manifest

CREDS = ("AKIDEXAMPLE", "s3cr3t")


def klass(name: str, labels: dict[str, str] | None = None, default: bool = False) -> dict:
    """A class object as listed from the API (only metadata matters for selection)."""
    return class_manifest(name, labels=labels, default=default)


# ---------------------------------------------------------------------------
# Scheduling and defaulting: the pure choice
# ---------------------------------------------------------------------------

CLASSES = [klass("zeta", {"tier": "gold"}), klass("alpha", {"tier": "gold", "region": "eu"}),
           klass("mid", {"tier": "silver"}, default=True)]


@pytest.mark.parametrize(("selector", "classes", "event", "chosen", "reason"), [
    ({"matchLabels": {"tier": "gold"}}, CLASSES, "schedule", "alpha", "ClassScheduled"),
    ({"matchLabels": {"tier": "gold", "region": "eu"}}, CLASSES, "schedule", "alpha",
     "ClassScheduled"),
    ({"matchLabels": {"tier": "silver"}}, CLASSES, "schedule", "mid", "ClassScheduled"),
    ({"matchLabels": {"tier": "bronze"}}, CLASSES, None, None, "NoMatchingClass"),
    ({"matchLabels": {}}, CLASSES, "schedule", "alpha", "ClassScheduled"),
    ({"matchLabels": {"tier": "gold"}}, [], None, None, "NoMatchingClass"),
    (None, CLASSES, "default", "mid", "ClassDefaulted"),
    (None, CLASSES[:2], None, None, "NoDefaultClass"),
    (None, [], None, None, "NoDefaultClass"),
], ids=["first-by-name", "all-labels", "one-match", "no-match", "empty-matches-all",
        "no-classes", "default", "no-default", "nothing"])
def test_select_class(selector: Any, classes: list, event: str | None, chosen: str | None,
                      reason: str) -> None:
    selection = select_class(selector, classes)
    assert (selection.event, selection.class_name, selection.reason) == (event, chosen, reason)


def test_selection_is_independent_of_listing_order() -> None:
    assert select_class({"matchLabels": {"tier": "gold"}}, list(reversed(CLASSES))).class_name \
        == "alpha"


def test_two_default_classes_is_an_error_naming_both() -> None:
    classes = [klass("b", default=True), klass("a", default=True), klass("c")]
    with pytest.raises(HandledError) as caught:
        select_class(None, classes)
    assert caught.value.reason == "MultipleDefaultClasses"
    assert "(a, b)" in caught.value.message


@pytest.mark.parametrize("selector", [
    "tier=gold", {"matchExpressions": []}, {"matchLabels": {"tier": 1}}, {"matchLabels": []},
])
def test_malformed_selector_is_a_terminal_error(selector: Any) -> None:
    with pytest.raises(TerminalError):
        select_class(selector, CLASSES)


@pytest.mark.parametrize(("template", "reason_part"), [
    ({"forProvider": []}, "forProvider"),
    ({"reclaimPolicy": "Recycle"}, "reclaimPolicy"),
    ({"resourceNamespace": ""}, "resourceNamespace"),
    ({"deletionPolicy": "Keep"}, "deletionPolicy"),
    ({"providerConfigRef": "x"}, "providerConfigRef"),
])
def test_malformed_class_is_an_invalid_class_error(template: dict, reason_part: str) -> None:
    with pytest.raises(HandledError) as caught:
        ResourceClass.from_object({"metadata": {"name": "c"}, "specTemplate": template})
    assert caught.value.reason == "InvalidClass"
    assert reason_part in caught.value.message


def test_class_defaults() -> None:
    parsed = ResourceClass.from_object({"metadata": {"name": "c"}})
    assert parsed.reclaim_policy is ReclaimPolicy.DELETE
    assert parsed.resource_namespace == "lifecycle-system"
    assert parsed.provider_config == "default"


# ---------------------------------------------------------------------------
# The event choice
# ---------------------------------------------------------------------------

UID = "claim-uid"


def view(claim_uid: str | None = UID, *, ready: bool = True, deleting: bool = False,
         released: bool = False, policy: ReclaimPolicy = ReclaimPolicy.DELETE) -> ResourceView:
    """A managed resource as the claim reconciler sees it."""
    return ResourceView("lifecycle-system", "db", "res-uid", claim_uid, "team/other", ready,
                        deleting, released, policy, ("lifecycle-system", "db-connection"))


REF = ("lifecycle-system", "db")
SCHEDULED = ClassSelection("schedule", "gold", "ClassScheduled", "")
NO_MATCH = ClassSelection(None, None, "NoMatchingClass", "")


@pytest.mark.parametrize(("facts", "event", "reason"), [
    # class selection
    (ClaimFacts("unbound", UID, selection=SCHEDULED), "schedule", "ClassScheduled"),
    (ClaimFacts("unbound", UID, selection=NO_MATCH), "pending", "NoMatchingClass"),
    (ClaimFacts("unbound", UID, problem=HandledError("x", reason="MultipleDefaultClasses")),
     "pending", "MultipleDefaultClasses"),
    (ClaimFacts("unbound", UID, class_ref="gold", class_ready=True), "provision",
     "ProvisionRequested"),
    # dynamic: named, not created yet (a crash between recording and creating)
    (ClaimFacts("unbound", UID, resource_ref=REF, dynamic=True, class_ref="gold",
                class_ready=True), "provision", "ProvisionRequested"),
    (ClaimFacts("binding", UID, resource_ref=REF, dynamic=True, class_ref="gold",
                class_ready=True), "provision", "ProvisionRequested"),
    # static
    (ClaimFacts("unbound", UID, resource_ref=REF), "pending", "ResourceNotFound"),
    (ClaimFacts("unbound", UID, resource_ref=REF, resource=view(None)), "claim",
     "ClaimRequested"),
    (ClaimFacts("unbound", UID, resource_ref=REF, resource=view("other")), "pending",
     "ResourceBoundElsewhere"),
    (ClaimFacts("unbound", UID, resource_ref=REF, resource=view(None, released=True)),
     "pending", "ResourceReleased"),
    (ClaimFacts("unbound", UID, resource_ref=REF, resource=view(None, deleting=True)),
     "pending", "ResourceDeleting"),
    (ClaimFacts("unbound", UID, resource_ref=REF, resource=view()), "claim", "ClaimRequested"),
    # binding and bound
    (ClaimFacts("binding", UID, resource_ref=REF, resource=view(ready=False)), "wait",
     "ResourceNotReady"),
    (ClaimFacts("binding", UID, resource_ref=REF, resource=view(), secret_ready=False), "wait",
     "ResourceNotReady"),
    (ClaimFacts("binding", UID, resource_ref=REF, resource=view(), secret_ready=True), "bind",
     "ResourceReady"),
    (ClaimFacts("bound", UID, resource_ref=REF, resource=view(), secret_ready=True), "bind",
     "ResourceReady"),
    (ClaimFacts("bound", UID, resource_ref=REF, resource=view(ready=False)), "wait",
     "ResourceNotReady"),
    (ClaimFacts("bound", UID, resource_ref=REF), "lose", "ResourceVanished"),
    (ClaimFacts("bound", UID, resource_ref=REF, resource=view("other")), "lose",
     "ResourceBoundElsewhere"),
    (ClaimFacts("bound", UID, resource_ref=REF, resource=view(None)), "lose", "ResourceUnbound"),
    (ClaimFacts("bound", UID, resource_ref=REF, resource=view(deleting=True)), "lose",
     "ResourceDeleting"),
    (ClaimFacts("bound", UID), "lose", "ResourceRefRemoved"),
    (ClaimFacts("lost", UID, resource_ref=REF, resource=view(), secret_ready=True), "bind",
     "ResourceReady"),
    # deletion
    (ClaimFacts("bound", UID, deleting=True, resource_ref=REF, resource=view()), "release",
     "ClaimDeleted"),
    (ClaimFacts("released", UID, deleting=True, resource_ref=REF, resource=view(deleting=True)),
     "wait", "ReclaimPending"),
    (ClaimFacts("released", UID, deleting=True, resource_ref=REF), "gone", "NothingToReclaim"),
    (ClaimFacts("released", UID, deleting=True, resource_ref=REF, resource=view(None)), "gone",
     "NothingToReclaim"),
    (ClaimFacts("unbound", UID, deleting=True), "gone", "NothingToReclaim"),
    (ClaimFacts("unbound", UID, deleting=True, resource_ref=REF, resource=view("other")),
     "gone", "NothingToReclaim"),
])
def test_choose_claim_event(facts: ClaimFacts, event: str, reason: str) -> None:
    choice = choose_claim_event(facts)
    assert (choice.event, choice.reason) == (event, reason)
    assert ClaimMachine.table().candidates(facts.state, event), (
        f"{event} chosen in {facts.state} but the machine has no such transition")


@pytest.mark.parametrize(("policy", "action"), [
    (ReclaimPolicy.DELETE, "delete_resource"), (ReclaimPolicy.RETAIN, "retain_resource"),
])
def test_reclaim_policy_guard_picks_the_release_action(policy: ReclaimPolicy,
                                                       action: str) -> None:
    facts = ClaimFacts("bound", UID, deleting=True, resource_ref=REF, resource=view(policy=policy))
    host = ClaimMachine.guard_host()
    transition = ClaimMachine.table().fire("bound", "release",
                                           lambda g: bool(getattr(host, g)(facts)))
    assert transition is not None
    assert (transition.target, transition.actions) == ("released", (action,))


def test_claim_machine_is_validated() -> None:
    table = ClaimMachine.table()
    validate(table)
    assert set(table.states) == {"unbound", "binding", "bound", "lost", "released", "deleted"}
    assert table.finals == ("deleted",)
    assert table.initial == "unbound"


def test_a_claim_machine_with_a_trap_state_is_refused() -> None:
    with pytest.raises(MachineDefinitionError, match="no path"):
        class Trapped(ClaimMachine):  # a state with no way to deletion
            stuck = State("Stuck")
            jam = ClaimMachine.bound.to(stuck) | stuck.to.itself()


# ---------------------------------------------------------------------------
# Flows on the harness
# ---------------------------------------------------------------------------


@pytest.fixture
def world() -> Any:
    """Claims, classes, the managed kind and the simulated cloud on one work queue."""
    w = claim_environment(DATABASE_BINDING)
    w.env.namespace("team-a")
    w.env.namespace("team-b")
    return w


def reason(world: Any, name: str, type_: str = "Ready", namespace: str = "team-a") -> str:
    c = world.env.condition("DatabaseClaim", name, type_, namespace)
    return c.reason if c else ""


def state(world: Any, name: str, namespace: str = "team-a") -> str | None:
    return world.env.state("DatabaseClaim", name, namespace)


@pytest.mark.parametrize(("selector", "expected_class", "storage"), [
    ({"tier": "gold"}, "gold-a", 100),
    ({"tier": "gold", "zone": "b"}, "gold-b", 200),
    ({"tier": "silver"}, "silver", 10),
])
def test_scheduling_binds_to_a_class_matching_the_selector(
    world: Any, selector: dict, expected_class: str, storage: int
) -> None:
    world.apply_class(class_manifest("gold-b", labels={"tier": "gold", "zone": "b"},
                                     storageGB=200))
    world.apply_class(class_manifest("gold-a", labels={"tier": "gold"}, storageGB=100))
    world.apply_class(class_manifest("silver", labels={"tier": "silver"}, storageGB=10))
    world.apply(claim_manifest("app", "team-a", selector=selector))
    world.run()
    claim = world.claim("app", "team-a")
    assert claim["spec"]["classRef"] == {"name": expected_class}
    assert state(world, "app") == "bound"
    resource = world.resource_of("app", "team-a")
    assert resource["spec"]["forProvider"]["storageGB"] == storage
    assert [e["reason"] for e in world.env.events("app")][:1] == ["ClassScheduled"]


def test_no_matching_class_leaves_the_claim_unbound_until_one_appears(world: Any) -> None:
    world.apply_class(class_manifest("gold", labels={"tier": "gold"}))
    world.apply(claim_manifest("app", "team-a", selector={"tier": "platinum"}))
    world.run()
    assert state(world, "app") == "unbound"
    assert reason(world, "app") == "NoMatchingClass"
    assert world.resource_of("app", "team-a") is None
    world.apply_class(class_manifest("plat", labels={"tier": "platinum"}))
    world.env.advance(70)  # the unbound claim polls
    world.run()
    assert state(world, "app") == "bound"


@pytest.mark.parametrize(("defaults", "expected_state", "ready_reason", "synced"), [
    (["standard"], "bound", "Bound", "True"),
    ([], "unbound", "NoDefaultClass", "True"),
    (["standard", "premium"], "unbound", "MultipleDefaultClasses", "False"),
])
def test_defaulting(world: Any, defaults: list[str], expected_state: str, ready_reason: str,
                    synced: str) -> None:
    for name in ("premium", "standard"):
        world.apply_class(class_manifest(name, default=name in defaults))
    world.apply(claim_manifest("app", "team-a"))
    world.run()
    assert state(world, "app") == expected_state
    assert reason(world, "app") == ready_reason
    assert world.env.condition("DatabaseClaim", "app", "Synced", "team-a").status.value == synced
    if expected_state == "bound":
        assert world.claim("app", "team-a")["spec"]["classRef"] == {"name": "standard"}
    else:
        assert "classRef" not in world.claim("app", "team-a")["spec"]
        assert world.env.cloud.instances() == {}


def test_two_defaults_is_reported_then_recovers_when_fixed(world: Any) -> None:
    world.apply_class(class_manifest("premium", default=True))
    world.apply_class(class_manifest("standard", default=True))
    world.apply(claim_manifest("app", "team-a"))
    world.run()
    synced = world.env.condition("DatabaseClaim", "app", "Synced", "team-a")
    assert (synced.status.value, synced.reason) == ("False", "ReconcileError")
    assert "premium, standard" in synced.message
    assert any(e["reason"] == "MultipleDefaultClasses" and e["type"] == "Warning"
               for e in world.env.events("app"))
    premium = class_manifest("premium")
    premium["metadata"]["annotations"] = {DEFAULT_CLASS: "false"}
    world.apply_class(premium)
    world.env.advance(120)  # the error backs off, then retries
    world.run()
    assert state(world, "app") == "bound"
    assert world.claim("app", "team-a")["spec"]["classRef"] == {"name": "standard"}


def test_dynamic_provisioning_binds_when_ready_and_propagates_the_secret(world: Any) -> None:
    world.apply_class(class_manifest("standard", default=True, size="medium"))
    world.apply(claim_manifest("orders", "team-a", engineVersion="16", storageGB=50,
                               secret_name="orders-db"))
    steps = world.run()
    claim = world.claim("orders", "team-a")
    assert claim["status"]["state"] == "bound"
    assert claim["status"]["bindingPhase"] == "Bound"
    assert [(h["from"], h["to"], h["event"]) for h in claim["status"]["history"]] == [
        ("unbound", "binding", "provision"), ("binding", "bound", "bind")]
    # The claim waited in Binding until the managed resource was Ready.
    claim_steps = [s for s in steps if s.kind == "DatabaseClaim"]
    assert any(s.after == "binding" and s.before == "binding" for s in claim_steps)
    resource = world.resource_of("orders", "team-a")
    meta = resource["metadata"]
    assert (meta["namespace"], meta["name"]) == ("lifecycle-system", dynamic_name(claim))
    assert resource["spec"]["claimRef"]["uid"] == claim["metadata"]["uid"]
    assert resource["spec"]["forProvider"] == {"engine": "postgres", "storageGB": 50,
                                               "size": "medium", "version": "16"}
    assert resource["status"]["state"] == "ready"
    secret = world.claim_secret("orders", "team-a")
    external = meta["annotations"][EXTERNAL_NAME]
    assert secret["password"] == world.env.cloud.password_of(external)
    assert secret["endpoint"].startswith(external)
    stored = world.api.get("v1", "Secret", "team-a", "orders-db")
    assert stored["metadata"]["ownerReferences"][0]["uid"] == claim["metadata"]["uid"]
    assert stored["metadata"]["annotations"][PROPAGATED_FROM] == "/".join(
        connection_secret_ref(resource))
    assert FINALIZER in claim["metadata"]["finalizers"]
    assert world.env.cloud.creations(external) == 1


def refused(call: Any, *args: Any) -> list[tuple[str, str]]:
    """The (field, reason) causes of the 422 that ``call(*args)`` must raise."""
    with pytest.raises(Invalid) as caught:
        call(*args)
    return [(c["field"], c["reason"]) for c in caught.value.causes]


def serve_class_leniently(world: Any) -> None:
    """Serve the class kind from a CRD whose ``specTemplate`` keeps anything.

    Models classes stored under an older CRD without validation, which the
    current CRD would refuse.
    """
    kind = DATABASE_BINDING.resource_class
    name = f"{kind.plural}.{kind.group}"
    crd = world.api.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", None, name)
    crd["spec"]["versions"][0]["schema"] = {"openAPIV3Schema": {
        "type": "object", "properties": {
            "apiVersion": {"type": "string"}, "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "specTemplate": {"x-kubernetes-preserve-unknown-fields": True}}}}
    world.api.replace(crd)


def test_a_bad_portable_field_is_a_terminal_error_and_creates_nothing(world: Any) -> None:
    world.apply_class(class_manifest("standard", default=True))
    manifest = claim_manifest("app", "team-a", storageGB="lots")
    # The claim's CRD refuses the wrong type ...
    assert refused(world.apply, manifest) == [("spec.storageGB", "FieldValueTypeInvalid")]
    # ... which a claim stored under an older CRD without validation may still have.
    world.env.serve_lenient("DatabaseClaim")
    world.apply(manifest)
    world.run()
    assert state(world, "app") == "unbound"
    assert reason(world, "app") == "InvalidSpec"
    assert "storageGB" in world.env.condition("DatabaseClaim", "app", "Synced", "team-a").message
    assert world.env.cloud.instances() == {}


@pytest.mark.parametrize(("class_ref", "make_class", "expected"), [
    ("missing", None, "ClassNotFound"),
    ("broken", {"reclaimPolicy": "Recycle"}, "InvalidClass"),
    ("badparams", {"forProvider": {"storageGB": "huge"}}, "InvalidClass"),
])
def test_class_problems_leave_the_claim_unbound(world: Any, class_ref: str,
                                                make_class: dict | None, expected: str) -> None:
    if make_class is not None:
        manifest = class_manifest(class_ref)
        manifest["specTemplate"].update(make_class)
        if class_ref == "broken":
            # The class CRD refuses the policy; an older, unvalidated class may hold it.
            assert refused(world.apply_class, manifest) == [
                ("specTemplate.reclaimPolicy", "FieldValueNotSupported")]
            serve_class_leniently(world)
        world.apply_class(manifest)
    world.apply(claim_manifest("app", "team-a", class_name=class_ref))
    world.run()
    assert state(world, "app") == "unbound"
    assert reason(world, "app") == expected
    assert world.env.cloud.instances() == {}


def test_provisioning_records_the_name_first_so_a_failed_create_is_retried_once(
    world: Any,
) -> None:
    world.apply_class(class_manifest("standard", default=True))
    world.api.faults.add("create", "DatabaseInstance", error=ServerError, times=1)
    world.apply(claim_manifest("app", "team-a"))
    world.run()
    claim = world.claim("app", "team-a")
    assert claim["spec"]["resourceRef"]["name"] == dynamic_name(claim)
    assert state(world, "app") == "bound"
    items, _ = world.api.list("db.lifecycle.dev/v1alpha1", "DatabaseInstance")
    assert len(items) == 1
    assert len(world.env.cloud.instances()) == 1


def sharing_class(name: str = "static", **binding: Any) -> dict:
    """A class whose ``crossNamespaceBinding`` lets claims bind resources of other namespaces.

    By default: claims in team-a and team-b may bind resources in lifecycle-system.
    """
    manifest = class_manifest(name)
    manifest["crossNamespaceBinding"] = binding or {"claimNamespaces": ["team-a", "team-b"]}
    return manifest


def static_resource(world: Any, name: str = "shared", policy: str | None = None) -> dict:
    """An administrator's DatabaseInstance, provisioned ahead of any claim, which claims in
    team-a and team-b may bind (an administrator's class says so)."""
    world.apply_class(sharing_class())
    manifest = database_manifest(name, "lifecycle-system")
    if policy is not None:
        manifest["spec"]["reclaimPolicy"] = policy
    world.apply(manifest)
    world.run()
    return world.env.get("DatabaseInstance", name, "lifecycle-system")


def test_static_binding_and_refusal_of_a_resource_bound_to_another_claim(world: Any) -> None:
    resource = static_resource(world)
    world.apply(claim_manifest("first", "team-a", resource=("lifecycle-system", "shared")))
    world.run()
    assert state(world, "first") == "bound"
    first_uid = world.claim("first", "team-a")["metadata"]["uid"]
    bound = world.env.get("DatabaseInstance", "shared", "lifecycle-system")
    assert bound["spec"]["claimRef"]["uid"] == first_uid
    assert world.claim_secret("first", "team-a")["endpoint"] == \
        resource["status"]["atProvider"]["endpoint"]
    world.apply(claim_manifest("second", "team-b", resource=("lifecycle-system", "shared")))
    world.run()
    assert state(world, "second", "team-b") == "unbound"
    assert reason(world, "second", namespace="team-b") == "ResourceBoundElsewhere"
    assert "team-a/first" in world.env.condition("DatabaseClaim", "second", "Ready",
                                                 "team-b").message
    assert world.claim_secret("second", "team-b") is None
    assert any(e["reason"] == "ResourceBoundElsewhere" and e["type"] == "Warning"
               for e in world.env.events("second"))
    after = world.env.get("DatabaseInstance", "shared", "lifecycle-system")
    assert after["spec"]["claimRef"]["uid"] == first_uid


def test_static_claim_for_a_missing_resource_waits(world: Any) -> None:
    world.apply_class(sharing_class())
    world.apply(claim_manifest("app", "team-a", resource=("lifecycle-system", "nothing")))
    world.run()
    assert state(world, "app") == "unbound"
    assert reason(world, "app") == "ResourceNotFound"


def rotate_password(world: Any, resource: dict, password: str) -> None:
    """Rotate the instance's master password and record it in its connection Secret."""
    external = resource["metadata"]["annotations"][EXTERNAL_NAME]
    world.env.cloud.reset_password(CREDS, external, password)
    namespace, name = connection_secret_ref(resource)
    secret = world.api.get("v1", "Secret", namespace, name)
    secret["data"]["password"] = base64.b64encode(password.encode()).decode()
    world.api.replace(secret)


def test_a_rotated_password_reaches_the_bound_claim_and_no_other(world: Any) -> None:
    static_resource(world)
    world.apply(claim_manifest("owner", "team-a", resource=("lifecycle-system", "shared")))
    world.apply(claim_manifest("intruder", "team-b", resource=("lifecycle-system", "shared")))
    world.run()
    assert state(world, "owner") == "bound"
    assert state(world, "intruder", "team-b") == "unbound"
    resource = world.env.get("DatabaseInstance", "shared", "lifecycle-system")
    rotate_password(world, resource, "rotated-Password-0001")
    steps = world.run()
    assert any(s.kind == "DatabaseClaim" and s.name == "owner" for s in steps), \
        "the Secret change did not trigger the bound claim"
    assert world.claim_secret("owner", "team-a")["password"] == "rotated-Password-0001"
    assert world.claim_secret("intruder", "team-b") is None
    # A secret written in advance with the intruder's name is never filled in either.
    assert all(s["metadata"]["namespace"] != "team-b"
               for s in world.api.list("v1", "Secret")[0])


def test_a_claim_never_overwrites_a_secret_it_does_not_own(world: Any) -> None:
    world.apply_class(class_manifest("standard", default=True))
    world.api.create({"apiVersion": "v1", "kind": "Secret",
                      "metadata": {"name": "app-connection", "namespace": "team-a"},
                      "stringData": {"password": "someone-elses"}})
    world.apply(claim_manifest("app", "team-a"))
    world.advance(60)  # retries with backoff; never goes idle
    assert state(world, "app") == "binding"
    synced = world.env.condition("DatabaseClaim", "app", "Synced", "team-a")
    assert synced.reason == "ReconcileError"
    assert "not owned" in synced.message
    assert world.env.secret("app-connection", "team-a") == {"password": "someone-elses"}


def test_a_claim_whose_resource_is_rebound_is_lost_and_its_secret_withdrawn(world: Any) -> None:
    static_resource(world)
    world.apply(claim_manifest("old", "team-a", resource=("lifecycle-system", "shared")))
    world.run()
    assert world.claim_secret("old", "team-a") is not None
    # An administrator hands the resource to another claim.
    world.apply(claim_manifest("new", "team-b", resource=("lifecycle-system", "shared")))
    world.run()
    resource = world.env.get("DatabaseInstance", "shared", "lifecycle-system")
    resource["spec"]["claimRef"] = {**resource["spec"]["claimRef"], "namespace": "team-b",
                                    "name": "new",
                                    "uid": world.claim("new", "team-b")["metadata"]["uid"]}
    world.api.replace(resource)
    world.run()
    assert state(world, "old") == "lost"
    assert reason(world, "old") == "ResourceBoundElsewhere"
    assert world.claim_secret("old", "team-a") is None
    world.env.advance(70)  # the new claim was refused before; it polls and now binds
    world.run()
    assert state(world, "new", "team-b") == "bound"
    assert world.claim_secret("new", "team-b")["username"] == "admin"
    rotate_password(world, resource, "after-rebinding-0002")
    world.run()
    assert world.claim_secret("new", "team-b")["password"] == "after-rebinding-0002"
    assert world.claim_secret("old", "team-a") is None


@pytest.mark.parametrize(("provisioning", "policy", "resource_kept"), [
    ("dynamic", "Delete", False),
    ("dynamic", "Retain", True),
    ("static", None, True),  # a resource without reclaimPolicy is retained
    ("static", "Delete", False),
])
def test_deleting_the_claim_applies_the_reclaim_policy(
    world: Any, provisioning: str, policy: str | None, resource_kept: bool
) -> None:
    if provisioning == "dynamic":
        world.apply_class(class_manifest("standard", default=True, reclaim_policy=policy))
        world.apply(claim_manifest("app", "team-a"))
    else:
        static_resource(world, policy=policy)
        world.apply(claim_manifest("app", "team-a", resource=("lifecycle-system", "shared")))
    world.run()
    assert state(world, "app") == "bound"
    resource = world.resource_of("app", "team-a")
    namespace, name = resource["metadata"]["namespace"], resource["metadata"]["name"]
    external = resource["metadata"]["annotations"][EXTERNAL_NAME]
    world.env.delete("DatabaseClaim", "app", "team-a")
    world.run()
    assert not world.env.exists("DatabaseClaim", "app", "team-a")
    assert world.api.list("v1", "Secret", "team-a")[0] == []
    claim_events = [e["reason"] for e in world.env.events("app")]
    assert "Release" in claim_events and "Gone" in claim_events
    if resource_kept:
        kept = world.env.get("DatabaseInstance", name, namespace)
        assert "claimRef" not in kept["spec"]
        assert kept["metadata"]["annotations"][RELEASED] == "team-a/app"
        assert kept["status"]["state"] == "ready"
        assert external in world.env.cloud.instances()
    else:
        assert not world.env.exists("DatabaseInstance", name, namespace)
        assert external not in world.env.cloud.instances()


def test_a_released_resource_is_not_bound_again(world: Any) -> None:
    static_resource(world, policy="Retain")
    world.apply(claim_manifest("app", "team-a", resource=("lifecycle-system", "shared")))
    world.run()
    world.env.delete("DatabaseClaim", "app", "team-a")
    world.run()
    world.apply(claim_manifest("next", "team-b", resource=("lifecycle-system", "shared")))
    world.run()
    assert state(world, "next", "team-b") == "unbound"
    assert reason(world, "next", namespace="team-b") == "ResourceReleased"
    # The administrator clears the mark; the next poll binds it.
    resource = world.env.get("DatabaseInstance", "shared", "lifecycle-system")
    del resource["metadata"]["annotations"][RELEASED]
    world.api.replace(resource)
    world.env.advance(70)
    world.run()
    assert state(world, "next", "team-b") == "bound"


def test_deleting_an_unbound_claim_touches_nothing(world: Any) -> None:
    static_resource(world)
    world.apply(claim_manifest("owner", "team-a", resource=("lifecycle-system", "shared")))
    world.apply(claim_manifest("refused", "team-b", resource=("lifecycle-system", "shared")))
    world.run()
    world.env.delete("DatabaseClaim", "refused", "team-b")
    world.run()
    assert not world.env.exists("DatabaseClaim", "refused", "team-b")
    assert state(world, "owner") == "bound"
    assert world.env.get("DatabaseInstance", "shared", "lifecycle-system")["spec"]["claimRef"][
        "name"] == "owner"


def test_deleting_the_claim_while_binding_still_reclaims(world: Any) -> None:
    world.apply_class(class_manifest("standard", default=True))
    world.apply(claim_manifest("app", "team-a"))
    world.env.reconcile("DatabaseClaim", "app", "team-a")  # schedule
    world.env.reconcile("DatabaseClaim", "app", "team-a")  # provision
    assert state(world, "app") == "binding"
    world.env.delete("DatabaseClaim", "app", "team-a")
    world.run()
    assert not world.env.exists("DatabaseClaim", "app", "team-a")
    items, _ = world.api.list("db.lifecycle.dev/v1alpha1", "DatabaseInstance")
    assert items == []
    assert world.env.cloud.instances() == {}


def test_secrets_never_appear_in_claim_conditions_or_events(world: Any) -> None:
    world.apply_class(class_manifest("standard", default=True))
    world.apply(claim_manifest("app", "team-a"))
    world.run()
    password = world.claim_secret("app", "team-a")["password"]
    text = repr(world.claim("app", "team-a")["status"]) + repr(world.env.events())
    assert password not in text


def test_claim_demo_runs_clean_and_prints_no_secret() -> None:
    import io

    from lifecycle.providers.simcloud.scenarios.claims_demo import ROTATED, run_claim_demo

    out = io.StringIO()
    assert run_claim_demo(out) is True
    text = out.getvalue()
    assert "8/8 checks passed" in text
    assert "FAILED" not in text
    assert ROTATED not in text


def test_a_claim_waiting_too_long_in_binding_is_reported_stuck(world: Any) -> None:
    world.apply_class(sharing_class())
    manifest = database_manifest("broken", "lifecycle-system")
    manifest["spec"]["providerConfigRef"] = {"name": "missing"}  # never becomes Ready
    world.apply(manifest)
    world.apply(claim_manifest("app", "team-a", resource=("lifecycle-system", "broken")))
    world.advance(600)
    assert state(world, "app") == "binding"
    assert world.env.condition("DatabaseClaim", "app", "Stuck", "team-a") is None
    world.advance(1300)
    stuck = world.env.condition("DatabaseClaim", "app", "Stuck", "team-a")
    assert (stuck.status.value, stuck.reason) == ("True", "StuckInBinding")


@pytest.mark.parametrize("status", [
    {"history": True}, {"conditions": "Ready"}, {"conditions": [1, {"type": 2}]},
    {"state": 5}, {"state": "deleted"}, {"state": "nonsense"}, {"stateSince": 7},
    {"stateSince": "yesterday"},
], ids=repr)
def test_a_corrupt_claim_status_is_repaired(world: Any, status: Any) -> None:
    world.apply_class(class_manifest("standard", default=True))
    claim = world.apply(claim_manifest("app", "team-a"))
    claim["status"] = status
    if status != {"state": "deleted"}:  # a state of the machine, just the wrong one
        # The claim's CRD refuses the rest (a type, an enum or a date-time) ...
        assert refused(world.api.replace_status, claim)
        # ... which a status written under an older CRD without validation may hold.
        world.env.serve_lenient("DatabaseClaim")
    world.api.replace_status(claim)
    world.run()
    assert state(world, "app") == "bound"
    assert world.claim_secret("app", "team-a") is not None


def test_a_status_that_is_not_a_mapping_is_replaced(world: Any) -> None:
    world.apply_class(class_manifest("standard", default=True))
    claim = world.apply(claim_manifest("app", "team-a"))
    claim["status"] = "not a mapping"
    assert refused(world.api.replace_status, claim) == [("status", "FieldValueTypeInvalid")]
    world.env.serve_lenient("DatabaseClaim")
    world.api.replace_status(claim)
    world.reconciler.reconcile("team-a", "app")
    assert world.claim("app", "team-a")["status"]["state"] == "unbound"


def test_a_garbled_state_since_never_breaks_the_stuck_check(world: Any) -> None:
    world.apply_class(sharing_class())
    manifest = database_manifest("broken", "lifecycle-system")
    manifest["spec"]["providerConfigRef"] = {"name": "missing"}
    world.apply(manifest)
    world.apply(claim_manifest("app", "team-a", resource=("lifecycle-system", "broken")))
    world.advance(10)
    claim = world.claim("app", "team-a")
    claim["status"]["stateSince"] = "yesterday"
    assert refused(world.api.replace_status, claim) == [
        ("status.stateSince", "FieldValueInvalid")]
    world.env.serve_lenient("DatabaseClaim")
    world.api.replace_status(claim)
    world.advance(10)
    assert state(world, "app") == "binding"
    assert world.env.condition("DatabaseClaim", "app", "Stuck", "team-a") is None
