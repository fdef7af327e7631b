"""The claim reconciler's pass, rule by rule (:class:`lifecycle.runtime.claims.ClaimReconciler`).

What a pass gathers (the reference, the resource, whether its Secret is
ready, the class to provision from, a refused reference to another
namespace), the result it returns (a missing claim, an unclaimed one being
deleted, the poll of a bound claim whose resource is not Ready), what it
reports (a repaired state, an event the state does not allow, an action's
informational error, the generation its own writes left), which errors
pass through to the work queue, and how the static-binding action claims a
resource, all on the harness's embedded API.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import attrs
import pytest
from statemachine import State

from lifecycle.core.claims import RELEASED, ClaimFacts, ResourceView, dynamic_name
from lifecycle.core.errors import HandledError, Severity, UnhandledError
from lifecycle.core.values import Result, ResultKind
from lifecycle.kube.errors import Conflict
from lifecycle.kube.objects import owner_reference
from lifecycle.machines.claim import DATABASE_BINDING, ClaimMachine
from lifecycle.providers.simcloud.scenarios.harness import claim_environment, database_manifest
from lifecycle.runtime.claims import ClaimEffects, ClaimPass, ClaimReconciler, ClaimStore
from lifecycle.testing.claims import claim_manifest, class_manifest

POOL = "lifecycle-system"
MANAGED = "db.lifecycle.dev/v1alpha1"


@pytest.fixture
def world() -> Any:
    w = claim_environment(DATABASE_BINDING)
    w.env.namespace("team-a")
    w.env.namespace("team-b")
    return w


def claim_of(world: Any, name: str = "app", namespace: str = "team-a",
             **options: Any) -> dict[str, Any]:
    return world.api.create(claim_manifest(name, namespace, **options))


def resource(world: Any, name: str = "db", namespace: str = POOL,
             claim: dict[str, Any] | None = None, *, with_secret: bool = True) -> dict[str, Any]:
    """A managed resource (pointing at ``claim`` when given) and, by default, its connection
    Secret, controlled by it."""
    manifest = database_manifest(name, namespace)
    if claim is not None:
        meta = claim["metadata"]
        manifest["spec"]["claimRef"] = {"namespace": meta["namespace"], "name": meta["name"],
                                        "uid": meta["uid"]}
    obj = world.api.create(manifest)
    if with_secret:
        world.api.create({"apiVersion": "v1", "kind": "Secret",
                          "metadata": {"name": f"{name}-conn", "namespace": namespace,
                                       "ownerReferences": [owner_reference(obj)]},
                          "data": {}})
    return obj


def share(world: Any) -> None:
    """A class letting claims in team-a and team-b bind resources of the pool."""
    world.apply_class({**class_manifest("static"),
                       "crossNamespaceBinding": {"claimNamespaces": ["team-a", "team-b"]}})


def with_spec(claim: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {**claim, "spec": {**claim.get("spec", {}), **spec}}


def gather(world: Any, claim: dict[str, Any], state: str = "unbound",
           deleting: bool = False) -> tuple[ClaimPass, ClaimFacts]:
    run = ClaimPass(obj=claim, state=state)
    return run, world.reconciler.gather(run, deleting)


def conditions(world: Any, name: str = "app", namespace: str = "team-a") -> dict[str, tuple]:
    status = world.claim(name, namespace)["status"]
    return {c["type"]: (c["status"], c["reason"], c["message"]) for c in status["conditions"]}


def events(world: Any, name: str = "app") -> list[tuple[str, str, str]]:
    return [(e["type"], e["reason"], e["message"]) for e in world.env.events(name)]


# ----------------------------------------------------------------- gathering
def test_gathering_reports_the_claims_generation(world: Any) -> None:
    claim = claim_of(world, selector={"tier": "gold"})
    world.api.replace(with_spec(claim, classSelector={"matchLabels": {"tier": "silver"}}))
    stored = world.claim("app", "team-a")
    assert stored["metadata"]["generation"] == 2
    assert gather(world, stored)[1].generation == 2


def test_a_resource_ref_without_a_namespace_names_the_claims_own(world: Any) -> None:
    claim = with_spec(claim_of(world), resourceRef={"name": "db"})
    assert gather(world, claim)[1].resource_ref == ("team-a", "db")


def test_a_malformed_resource_ref_is_the_problem_of_the_pass(world: Any) -> None:
    _, facts = gather(world, with_spec(claim_of(world), resourceRef={"name": ""}))
    assert isinstance(facts.problem, HandledError)
    assert (facts.problem.reason, facts.problem.severity, str(facts.problem)) == (
        "InvalidSpec", Severity.TERMINAL,
        "spec.resourceRef must be {name: <string>, namespace: <string>}")


def test_a_claim_naming_no_resource_has_no_secret_ready(world: Any) -> None:
    world.apply_class(class_manifest("standard", default=True))
    _, facts = gather(world, claim_of(world))
    assert facts.secret_ready is False
    assert facts.resource is None and facts.resource_ref is None


def test_the_secret_is_ready_only_for_a_resource_pointing_at_this_claim(world: Any) -> None:
    share(world)
    claim = claim_of(world, resource=(POOL, "db"))
    other = claim_of(world, "other", resource=(POOL, "db"))
    obj = resource(world, claim=other)
    _, facts = gather(world, claim)
    assert facts.resource is not None and facts.secret_ready is False
    obj["spec"]["claimRef"]["uid"] = claim["metadata"]["uid"]
    world.api.replace(obj)
    assert gather(world, claim)[1].secret_ready is True
    world.api.delete("v1", "Secret", POOL, "db-conn")
    assert gather(world, claim)[1].secret_ready is False


def test_a_refused_reference_to_another_namespace_sees_no_resource_and_no_secret(
        world: Any) -> None:
    claim = claim_of(world, "steal", "team-b", resource=("team-a", "a-db"))
    resource(world, "a-db", "team-a", claim=claim)  # even one pointing back at the claim
    _, facts = gather(world, claim)
    assert facts.resource is None and facts.secret_ready is False
    assert isinstance(facts.problem, HandledError)
    assert (facts.problem.reason, str(facts.problem)) == (
        "CrossNamespaceRefNotAllowed",
        "spec.resourceRef names team-a/a-db, outside the claim's namespace team-b; no "
        "DatabaseInstanceClass lets claims in team-b bind resources in team-a "
        "(crossNamespaceBinding); nothing was bound or copied")
    # The same resource in the claim's own namespace is seen, Secret and all.
    own = claim_of(world, "mine", "team-a", resource=("team-a", "a-db"))
    obj = world.env.get("DatabaseInstance", "a-db", "team-a")
    obj["spec"]["claimRef"]["uid"] = own["metadata"]["uid"]
    world.api.replace(obj)
    _, facts = gather(world, own)
    assert facts.resource is not None and facts.secret_ready is True and facts.problem is None


def test_a_dynamic_name_without_a_class_builds_nothing(world: Any) -> None:
    claim = claim_of(world)
    claim = with_spec(claim, resourceRef={"namespace": POOL, "name": dynamic_name(claim)})
    run, facts = gather(world, claim)
    assert facts.dynamic is True and facts.problem is None
    assert facts.class_ready is False and run.desired is None


def test_a_class_is_built_from_only_for_a_claim_without_a_resource_of_its_own(
        world: Any) -> None:
    world.apply_class(class_manifest("gold"))
    share(world)
    # Static: a class named beside a resource that does not exist builds nothing.
    static = claim_of(world, class_name="gold", resource=(POOL, "missing"))
    run, facts = gather(world, static)
    assert (facts.class_ready, run.desired, facts.problem) == (False, None, None)
    # Dynamic, the resource already there: nothing to build either.
    claim = claim_of(world, "dyn", class_name="gold")
    claim = with_spec(claim, resourceRef={"namespace": POOL, "name": dynamic_name(claim)})
    resource(world, dynamic_name(claim), claim=claim)
    run, facts = gather(world, claim)
    assert (facts.class_ready, run.desired) == (False, None)
    # Dynamic and missing: the class is built from.
    world.api.delete(MANAGED, "DatabaseInstance", POOL, dynamic_name(claim))
    run, facts = gather(world, claim)
    assert facts.class_ready is True and run.desired is not None
    assert run.desired["metadata"]["name"] == dynamic_name(claim)


def test_a_static_claim_with_a_class_for_a_missing_resource_provisions_nothing(
        world: Any) -> None:
    world.apply_class(class_manifest("gold"))
    share(world)
    world.apply(claim_manifest("app", "team-a", class_name="gold", resource=(POOL, "missing")))
    world.run()
    assert world.env.state("DatabaseClaim", "app", "team-a") == "unbound"
    assert world.api.list(MANAGED, "DatabaseInstance")[0] == []


# ----------------------------------------------------------------- results
def test_a_missing_claim_is_done_not_found(world: Any) -> None:
    assert world.reconciler.reconcile("team-a", "nobody") == Result.done("NotFound")


def test_a_claim_being_deleted_that_this_operator_never_claimed_is_left_alone(
        world: Any) -> None:
    claim = claim_of(world)
    claim["metadata"]["finalizers"] = ["example.com/hold"]
    world.api.replace(claim)
    world.api.delete("claims.lifecycle.dev/v1alpha1", "DatabaseClaim", "team-a", "app")
    before = world.claim("app", "team-a")
    assert before["metadata"].get("deletionTimestamp")
    assert world.reconciler.reconcile("team-a", "app") == Result.done("NotClaimed")
    assert world.claim("app", "team-a") == before


def test_a_bound_claim_whose_resource_is_not_ready_polls(world: Any) -> None:
    world.apply_class(class_manifest("standard", default=True))
    world.apply(claim_manifest("app", "team-a"))
    world.run()
    obj = world.resource_of("app", "team-a")
    status = {**obj["status"], "conditions": [
        {**c, "status": "False", "reason": "Unavailable"} if c["type"] == "Ready" else c
        for c in obj["status"]["conditions"]]}
    world.api.replace_status({**obj, "status": status})
    result = world.reconciler.reconcile("team-a", "app")
    assert (result.kind, result.reason) == (ResultKind.REQUEUE_AFTER, "Poll")
    assert result.after >= 60.0
    assert conditions(world)["Ready"][1] == "Bound"


# ----------------------------------------------------------------- what a pass reports
def test_a_stored_state_the_machine_does_not_know_is_repaired_and_said_so(world: Any) -> None:
    claim = claim_of(world)
    world.env.serve_lenient("DatabaseClaim")  # as under an older CRD without validation
    world.api.replace_status({**claim, "status": {"state": "x" * 100}})
    world.reconciler.reconcile("team-a", "app")
    assert events(world)[0] == (
        "Warning", "StateRepaired",
        f"stored state {'x' * 64!r} is not a state of ClaimMachine; restarting from unbound")
    assert world.claim("app", "team-a")["status"]["state"] == "unbound"


def test_a_known_stored_state_is_not_reported_repaired(world: Any) -> None:
    claim = claim_of(world)
    world.api.replace_status({**claim, "status": {"state": "unbound"}})
    world.reconciler.reconcile("team-a", "app")
    assert all(reason != "StateRepaired" for _, reason, _ in events(world))


def test_an_event_the_stored_state_does_not_allow_is_reported_and_backs_off(
        world: Any) -> None:
    claim = claim_of(world)
    world.api.replace_status({**claim, "status": {"state": "released"}})
    result = world.reconciler.reconcile("team-a", "app")
    assert result == Result.backoff("EventNotAllowed")
    message = "event 'lose' is not allowed in state 'released' of ClaimMachine"
    assert conditions(world)["Synced"] == ("False", "ReconcileError", message)
    assert world.claim("app", "team-a")["status"]["state"] == "released"


class Pausing(ClaimMachine):
    """A kind's own claim machine with a Paused state that allows neither pending nor lose."""

    paused = State("Paused")
    pause = ClaimMachine.bound.to(paused)
    resume = paused.to(ClaimMachine.bound)
    stop = paused.to(ClaimMachine.deleted, on="withdraw_secret")
    ready_condition = {**ClaimMachine.ready_condition, "paused": ("False", "Paused")}


def test_an_event_the_state_does_not_allow_is_reported_before_a_problem_of_the_pass(
        world: Any) -> None:
    binding = attrs.evolve(DATABASE_BINDING,
                           claim=attrs.evolve(DATABASE_BINDING.claim, machine=Pausing))
    reconciler = ClaimReconciler(world.env.operator_api, binding, clock=world.env.clock.now)
    claim = claim_of(world, "app", "team-b", resource=("team-a", "a-db"))  # refused: lose
    world.env.serve_lenient("DatabaseClaim")  # the bundled CRD knows no Paused state
    world.api.replace_status({**claim, "status": {"state": "paused"}})
    assert reconciler.reconcile("team-b", "app") == Result.backoff("EventNotAllowed")
    message = "event 'lose' is not allowed in state 'paused' of Pausing"
    assert conditions(world, "app", "team-b")["Synced"] == ("False", "ReconcileError", message)
    assert world.claim("app", "team-b")["status"]["state"] == "paused"


class InformingStore(ClaimStore):
    """A store whose propagation reports an informational problem."""

    def propagate(self, run: ClaimPass, facts: ClaimFacts) -> None:
        raise HandledError("the copy waits for an administrator", reason="CopyPaused",
                           severity=Severity.INFORMATIONAL)


def test_an_informational_error_of_an_action_keeps_the_state_and_is_reported(
        world: Any) -> None:
    world.apply_class(class_manifest("standard", default=True))
    world.reconciler.store = InformingStore(world.reconciler.api, DATABASE_BINDING)
    world.apply(claim_manifest("app", "team-a"))
    world.advance(30)  # binding waits and retries; it never goes idle
    assert world.env.state("DatabaseClaim", "app", "team-a") == "binding"
    assert conditions(world)["Synced"] == ("False", "ReconcileError",
                                          "the copy waits for an administrator")
    assert conditions(world)["Ready"][1] == "CopyPaused"
    assert ("Warning", "CopyPaused", "the copy waits for an administrator") in events(world)


def test_the_status_reports_the_generation_the_pass_own_writes_left(world: Any) -> None:
    world.apply_class(class_manifest("standard", default=True))
    claim_of(world)
    world.reconciler.reconcile("team-a", "app")  # writes spec.classRef: a new generation
    stored = world.claim("app", "team-a")
    assert stored["metadata"]["generation"] == 2
    assert stored["status"]["observedGeneration"] == 2
    assert {c["observedGeneration"] for c in stored["status"]["conditions"]} == {2}


def test_a_transition_is_recorded_as_an_event_saying_from_where_to_where(world: Any) -> None:
    world.apply_class(class_manifest("standard", default=True))
    world.apply(claim_manifest("app", "team-a"))
    world.run()
    assert ("Normal", "Provision", "unbound -> binding: provisioning a managed resource from "
            "class standard") in events(world)


# ----------------------------------------------------------------- errors for the queue
def test_an_api_error_is_unhandled_and_says_it_came_from_the_api(world: Any) -> None:
    claim_of(world)
    world.env.faults.fail("get", "DatabaseClaim")
    with pytest.raises(UnhandledError) as raised:
        world.reconciler.reconcile("team-a", "app")
    assert str(raised.value) == ("API error during claim reconcile: injected fault: "
                                 "get DatabaseClaim app")


def test_an_api_error_inside_an_action_passes_through_to_the_queue(world: Any) -> None:
    world.apply_class(class_manifest("standard", default=True))
    claim_of(world)
    world.reconciler.reconcile("team-a", "app")  # selects the class
    world.env.faults.fail("create", "DatabaseInstance")
    with pytest.raises(UnhandledError) as raised:
        world.reconciler.reconcile("team-a", "app")
    name = dynamic_name(world.claim("app", "team-a"))
    assert str(raised.value) == ("API error during claim reconcile: injected fault: "
                                 f"create DatabaseInstance {name}")


@pytest.mark.parametrize(("verb", "kind", "what"), [
    ("update", "DatabaseClaim", "claim write"),
    ("status", "DatabaseClaim", "claim status write"),
    ("update", "DatabaseInstance", "managed resource write"),
])
def test_writes_that_keep_conflicting_are_unhandled_naming_the_write(
        world: Any, verb: str, kind: str, what: str) -> None:
    resource(world)
    share(world)
    claim_of(world, resource=(POOL, "db"))
    world.env.faults.fail(verb, kind, error=Conflict)
    with pytest.raises(UnhandledError) as raised:
        world.reconciler.reconcile("team-a", "app")
    assert str(raised.value) == f"{what} kept conflicting (5 attempts)"


# ----------------------------------------------------------------- claiming a resource
class Writes:
    """The embedded API, counting replaces."""

    def __init__(self, api: Any) -> None:
        self.inner = api
        self.replaced: list[str] = []

    def replace(self, obj: dict[str, Any], **kwargs: Any) -> Any:
        self.replaced.append(obj["metadata"]["name"])
        return self.inner.replace(obj, **kwargs)

    def __getattr__(self, attribute: str) -> Any:
        return getattr(self.inner, attribute)


def claim_effects(world: Any, claim: dict[str, Any], obj: dict[str, Any],
                  state: str = "unbound") -> tuple[ClaimEffects, Writes]:
    api = Writes(world.api)
    store = ClaimStore(api, DATABASE_BINDING)  # type: ignore[arg-type]
    meta = obj["metadata"]
    facts = ClaimFacts(state, claim["metadata"]["uid"],
                       resource_ref=(meta["namespace"], meta["name"]),
                       resource=ResourceView.from_object(obj))
    return ClaimEffects(store, ClaimPass(obj=claim, state=state), facts), api


def refusal(call: Any) -> tuple[str, str]:
    with pytest.raises(HandledError) as refused:
        call()
    return refused.value.reason, str(refused.value)


def test_claiming_a_free_resource_points_it_at_the_claim_once(world: Any) -> None:
    claim = claim_of(world)
    obj = resource(world)
    effects, api = claim_effects(world, claim, obj)
    effects.claim()
    ref = world.env.get("DatabaseInstance", "db", POOL)["spec"]["claimRef"]
    assert ref["uid"] == claim["metadata"]["uid"]
    assert (ref["namespace"], ref["name"]) == ("team-a", "app")
    effects.claim()  # already ours: nothing to write
    assert api.replaced == ["db"]


def test_claiming_a_resource_bound_elsewhere_is_resource_bound_elsewhere(world: Any) -> None:
    other = claim_of(world, "other", "team-b")
    obj = resource(world, claim=other)
    effects, api = claim_effects(world, claim_of(world), obj)
    assert refusal(effects.claim) == ("ResourceBoundElsewhere", "bound to claim team-b/other")
    assert api.replaced == []


def test_claiming_a_released_or_deleting_resource_is_resource_unavailable(world: Any) -> None:
    claim = claim_of(world)
    released = database_manifest("old", POOL, annotations={RELEASED: "team-b/gone"})
    obj = world.api.create(released)
    effects, api = claim_effects(world, claim, obj)
    assert refusal(effects.claim) == ("ResourceUnavailable", "released or being deleted")
    held = database_manifest("going", POOL)
    held["metadata"]["finalizers"] = ["example.com/hold"]
    world.api.create(held)
    world.api.delete(MANAGED, "DatabaseInstance", POOL, "going")
    effects, api = claim_effects(world, claim, world.env.get("DatabaseInstance", "going", POOL))
    assert refusal(effects.claim) == ("ResourceUnavailable", "released or being deleted")
    assert api.replaced == []


def test_claiming_a_resource_without_a_spec_gives_it_one() -> None:
    obj: dict[str, Any] = {"metadata": {"name": "db", "namespace": POOL, "uid": "r"}}
    store = SimpleNamespace(update_resource=lambda ref, change: change(obj))
    claim = {"apiVersion": "claims.lifecycle.dev/v1alpha1", "kind": "DatabaseClaim",
             "metadata": {"name": "app", "namespace": "team-a", "uid": "c"}}
    facts = ClaimFacts("unbound", "c", resource_ref=(POOL, "db"))
    ClaimEffects(store, ClaimPass(obj=claim, state="unbound"), facts).claim()  # type: ignore
    assert obj["spec"]["claimRef"]["uid"] == "c"


def test_retaining_a_resource_another_claim_holds_writes_nothing(world: Any) -> None:
    other = claim_of(world, "other", "team-b")
    obj = resource(world, claim=other)
    effects, api = claim_effects(world, claim_of(world), obj)
    effects.retain_resource()
    assert api.replaced == []
    assert world.env.get("DatabaseInstance", "db", POOL)["spec"]["claimRef"]["uid"] == \
        other["metadata"]["uid"]
