"""The pure claim model and ownership rules: names, references, the status a pass leaves."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import attrs
import pytest

from lifecycle.core.claims import (
    CLAIM_NAME,
    CLAIM_NAMESPACE,
    CLASS_NAME,
    DEFAULT_CLASS,
    RELEASED,
    ClaimFacts,
    ClassKind,
    ClassSelection,
    ReclaimPolicy,
    ResourceClass,
    ResourceView,
    choose_claim_event,
    claim_reference,
    claim_secret_name,
    class_problem,
    class_ref,
    configure_from_class,
    configure_object_meta,
    dynamic_name,
    resource_ref,
    select_class,
    settle_claim,
)
from lifecycle.core.decide import Choice, Decision
from lifecycle.core.errors import HandledError, Severity, TerminalError
from lifecycle.core.kind import ADOPT
from lifecycle.core.ownership import (
    NotOwnedError,
    Ownership,
    Verdict,
    adoption_requested,
    judge,
)
from lifecycle.core.plan import conclude
from lifecycle.core.status import Outcome
from lifecycle.core.values import Observation, Result
from lifecycle.machines.claim import DATABASE_BINDING, ClaimMachine


def test_dynamic_name_is_namespace_name_and_uid_prefix() -> None:
    claim = {"metadata": {"namespace": "team", "name": "db", "uid": "0123456789"}}
    assert dynamic_name(claim) == "team-db-01234567"
    long = {"metadata": {"namespace": "n", "name": "a" * 300, "uid": "u" * 10}}
    assert dynamic_name(long) == "n-" + "a" * 238 + "-uuuuuuuu"
    trailing = {"metadata": {"namespace": "n", "name": "a" * 237 + "-.x", "uid": "uid"}}
    assert dynamic_name(trailing) == "n-" + "a" * 237 + "-uid"
    assert dynamic_name({"metadata": {"name": "db", "uid": "u"}}) == "-db-u"


def test_claim_secret_name() -> None:
    meta = {"name": "db"}
    assert claim_secret_name({"metadata": meta}) == "db-connection"
    for ref in (None, "x", {}, {"name": ""}, {"name": 5}):
        assert claim_secret_name({"metadata": meta,
                                  "spec": {"writeConnectionSecretToRef": ref}}) == "db-connection"
    assert claim_secret_name({"metadata": meta,
                              "spec": {"writeConnectionSecretToRef": {"name": "s"}}}) == "s"


UID = "claim-uid"
REF = ("ns", "db")


def view(claim_uid: str | None = UID, *, ready: bool = True, deleting: bool = False,
         released: bool = False, policy: ReclaimPolicy = ReclaimPolicy.DELETE) -> ResourceView:
    """A managed resource as the claim reconciler sees it."""
    return ResourceView("ns", "db", "res-uid", claim_uid, "team/other", ready, deleting,
                        released, policy, ("ns", "db-connection"))


@pytest.mark.parametrize(("facts", "choice"), [
    (ClaimFacts("bound", UID, deleting=True, resource_ref=REF, resource=view()),
     Choice('release', 'ClaimDeleted', 'claim deleted; reclaim policy Delete for ns/db')),
    (ClaimFacts("bound", UID, deleting=True, resource_ref=REF,
                resource=view(policy=ReclaimPolicy.RETAIN)),
     Choice('release', 'ClaimDeleted', 'claim deleted; reclaim policy Retain for ns/db')),
    (ClaimFacts("released", UID, deleting=True, resource_ref=REF, resource=view()),
     Choice('wait', 'ReclaimPending', 'waiting for ns/db to be deleted')),
    (ClaimFacts("bound", UID, deleting=True, resource_ref=REF, resource=view("other")),
     Choice('gone', 'NothingToReclaim', 'no managed resource is bound to this claim')),
    (ClaimFacts("unbound", UID, problem=HandledError("broken", reason="InvalidClass")),
     Choice('pending', 'InvalidClass', 'broken')),
    (ClaimFacts("bound", UID, resource_ref=REF,
                problem=HandledError("broken", reason="InvalidClass")),
     Choice(None, 'InvalidClass', 'broken')),
    (ClaimFacts("bound", UID),
     Choice('lose', 'ResourceRefRemoved', 'spec.resourceRef was removed')),
    (ClaimFacts("unbound", UID),
     Choice('pending', 'NotScheduled', 'no class selected yet')),
    (ClaimFacts("unbound", UID,
                selection=ClassSelection("schedule", "gold", "ClassScheduled", "m")),
     Choice('schedule', 'ClassScheduled', 'm')),
    (ClaimFacts("unbound", UID, selection=ClassSelection(None, None, "NoMatchingClass", "m")),
     Choice('pending', 'NoMatchingClass', 'm')),
    (ClaimFacts("unbound", UID, class_ref="gold"),
     Choice('provision', 'ProvisionRequested', 'provisioning a managed resource from class gold')),
    (ClaimFacts("unbound", UID, resource_ref=REF, dynamic=True, class_ref="gold", class_ready=True),
     Choice('provision', 'ProvisionRequested', 'creating ns/db from class gold')),
    (ClaimFacts("binding", UID, resource_ref=REF, dynamic=True, class_ref="gold", class_ready=True),
     Choice('provision', 'ProvisionRequested', 'creating ns/db from class gold')),
    (ClaimFacts("bound", UID, resource_ref=REF, dynamic=True, class_ref="gold", class_ready=True),
     Choice('lose', 'ResourceVanished', 'managed resource ns/db no longer exists')),
    (ClaimFacts("unbound", UID, resource_ref=REF, dynamic=True,
                class_ref="gold", class_ready=False),
     Choice('pending', 'ResourceNotFound', 'managed resource ns/db not found')),
    (ClaimFacts("unbound", UID, resource_ref=REF, dynamic=False,
                class_ref="gold", class_ready=True),
     Choice('pending', 'ResourceNotFound', 'managed resource ns/db not found')),
    (ClaimFacts("binding", UID, resource_ref=REF),
     Choice('lose', 'ResourceVanished', 'managed resource ns/db no longer exists')),
    (ClaimFacts("binding", UID, resource_ref=REF, resource=view(None)),
     Choice('lose', 'ResourceUnbound', 'ns/db no longer points at this claim')),
    (ClaimFacts("unbound", UID, resource_ref=REF,
                resource=view(None, released=True, deleting=True)),
     Choice('pending', 'ResourceReleased',
            'ns/db was released by another claim; an administrator must remove its '
            'lifecycle.dev/released annotation before it can be bound again')),
    (ClaimFacts("unbound", UID, resource_ref=REF, resource=view(None, deleting=True)),
     Choice('pending', 'ResourceDeleting', 'ns/db is being deleted')),
    (ClaimFacts("unbound", UID, resource_ref=REF, resource=view(None)),
     Choice('claim', 'ClaimRequested', 'binding to existing resource ns/db')),
    (ClaimFacts("unbound", UID, resource_ref=REF, resource=view("other")),
     Choice('pending', 'ResourceBoundElsewhere', 'ns/db is bound to claim team/other')),
    (ClaimFacts("binding", UID, resource_ref=REF, resource=view("other")),
     Choice('lose', 'ResourceBoundElsewhere', 'ns/db is now bound to claim team/other')),
    (ClaimFacts("unbound", UID, resource_ref=REF, resource=view(deleting=True)),
     Choice('pending', 'ResourceDeleting', 'ns/db is being deleted')),
    (ClaimFacts("bound", UID, resource_ref=REF, resource=view(deleting=True)),
     Choice('lose', 'ResourceDeleting', 'ns/db is being deleted')),
    (ClaimFacts("unbound", UID, resource_ref=REF, resource=view()),
     Choice('claim', 'ClaimRequested', 'ns/db already points at this claim')),
    (ClaimFacts("binding", UID, resource_ref=REF, resource=view(), secret_ready=True),
     Choice('bind', 'ResourceReady', 'bound to ns/db')),
    (ClaimFacts("binding", UID, resource_ref=REF, resource=view(ready=False), secret_ready=True),
     Choice('wait', 'ResourceNotReady', 'waiting for ns/db to be Ready')),
    (ClaimFacts("lost", UID, resource_ref=REF, resource=view(), secret_ready=False),
     Choice('lose', 'ResourceNotReady', 'ns/db is not Ready')),
    (ClaimFacts("bound", UID, resource_ref=REF, resource=view(), secret_ready=False),
     Choice('wait', 'ResourceNotReady', 'waiting for ns/db to be Ready')),
])
def test_choose_claim_event_is_exact(facts: ClaimFacts, choice: Choice) -> None:
    assert choose_claim_event(facts) == choice


# --------------------------------------------------------------------------- scheduling


def klass(name: str, labels: dict[str, str] | None = None, default: Any = None) -> dict:
    """A class object as listed (only metadata matters for selection)."""
    meta: dict[str, Any] = {"name": name, "labels": labels or {}}
    if default is not None:
        meta["annotations"] = {DEFAULT_CLASS: default}
    return {"metadata": meta}


CLASSES = [klass("zeta", {"tier": "gold"}), klass("alpha", {"tier": "gold", "zone": "a"}),
           klass("mid", {"tier": "silver"}, default="True")]


@pytest.mark.parametrize(("selector", "classes", "selection"), [
    ({"matchLabels": {"tier": "gold"}}, CLASSES,
     ClassSelection("schedule", "alpha", "ClassScheduled",
                    "scheduled to class alpha (first by name of 2 matching)")),
    ({"matchLabels": {"zone": "a", "tier": "gold"}}, CLASSES,
     ClassSelection("schedule", "alpha", "ClassScheduled", "scheduled to class alpha")),
    ({"matchLabels": {}}, CLASSES,
     ClassSelection("schedule", "alpha", "ClassScheduled",
                    "scheduled to class alpha (first by name of 3 matching)")),
    ({"matchLabels": None}, CLASSES[:1],
     ClassSelection("schedule", "zeta", "ClassScheduled", "scheduled to class zeta")),
    ({}, [],
     ClassSelection(None, None, "NoMatchingClass",
                    "no class matches the class selector <everything>")),
    ({"matchLabels": {"zone": "b", "tier": "gold"}}, CLASSES,
     ClassSelection(None, None, "NoMatchingClass",
                    "no class matches the class selector tier=gold,zone=b")),
    (None, CLASSES, ClassSelection("default", "mid", "ClassDefaulted", "defaulted to class mid")),
    (None, [klass("a", default="yes"), klass("b", default=True)],
     ClassSelection("default", "b", "ClassDefaulted", "defaulted to class b")),
    (None, [klass("a", default=None), klass("b", default="false")],
     ClassSelection(None, None, "NoDefaultClass",
                    f"no class is annotated {DEFAULT_CLASS}=true and the claim names no "
                    "class, selector or resource")),
])
def test_select_class_is_exact(selector: Any, classes: list, selection: ClassSelection) -> None:
    assert select_class(selector, classes) == selection
    assert select_class(selector, list(reversed(classes))) == selection


def test_select_class_orders_by_name_whatever_else_the_objects_hold() -> None:
    # Objects that do not compare: sorting must look at the names only.
    first = {"metadata": {"name": "b", "labels": {}}, "x": {1}}
    second = {"metadata": {"name": "a", "labels": {}}, "x": {2}}
    assert select_class({}, [first, second]).class_name == "a"


@pytest.mark.parametrize(("selector", "message"), [
    ("gold", "spec.classSelector must be {matchLabels: {key: value}}"),
    ({"matchLabels": {}, "matchExpressions": []},
     "spec.classSelector must be {matchLabels: {key: value}}"),
    ({"matchLabels": ["tier"]}, "spec.classSelector.matchLabels must map strings to strings"),
    ({"matchLabels": {"tier": 1}}, "spec.classSelector.matchLabels must map strings to strings"),
    ({"matchLabels": {1: "x"}}, "spec.classSelector.matchLabels must map strings to strings"),
])
def test_a_malformed_selector_is_terminal_and_exact(selector: Any, message: str) -> None:
    with pytest.raises(TerminalError) as caught:
        select_class(selector, CLASSES)
    assert caught.value.message == message


def test_two_defaults_name_every_default_in_order() -> None:
    with pytest.raises(HandledError) as caught:
        select_class(None, [klass("c", default="true"), klass("a", default="TRUE"), klass("b")])
    error = caught.value
    assert (error.reason, error.severity) == ("MultipleDefaultClasses", Severity.INFORMATIONAL)
    assert error.message == (f"2 classes are annotated {DEFAULT_CLASS}=true (a, c); "
                             "annotate exactly one")


def test_class_problem_is_informational() -> None:
    problem = class_problem("m", "R")
    assert (problem.message, problem.reason, problem.severity) == (
        "m", "R", Severity.INFORMATIONAL)


# --------------------------------------------------------------------------- classes


def test_a_class_is_parsed_with_every_field() -> None:
    parsed = ResourceClass.from_object({
        "metadata": {"name": "gold", "uid": "cu"},
        "specTemplate": {"forProvider": {"engine": "postgres"},
                         "providerConfigRef": {"name": "aws"}, "reclaimPolicy": "Retain",
                         "resourceNamespace": "dbs", "deletionPolicy": "Orphan"}})
    assert parsed == ResourceClass("gold", "cu", {"engine": "postgres"}, "aws",
                                   ReclaimPolicy.RETAIN, "dbs", "Orphan")
    assert ResourceClass.from_object({"metadata": {}, "specTemplate": None}) == ResourceClass(
        "", "", {}, "default", ReclaimPolicy.DELETE, "lifecycle-system", None)
    assert ResourceClass.from_object({"specTemplate": {"forProvider": None}}).for_provider == {}
    deleting = ResourceClass.from_object({"specTemplate": {"deletionPolicy": "Delete"}})
    assert deleting.deletion_policy == "Delete"


@pytest.mark.parametrize(("template", "problem"), [
    ("x", "specTemplate must be an object"),
    ({"forProvider": []}, "specTemplate.forProvider must be an object"),
    ({"providerConfigRef": "aws"}, "specTemplate.providerConfigRef must be {name: <string>}"),
    ({"providerConfigRef": {"name": 3}}, "specTemplate.providerConfigRef must be {name: <string>}"),
    ({"reclaimPolicy": "Recycle"}, "specTemplate.reclaimPolicy must be Delete or Retain"),
    ({"resourceNamespace": ""}, "specTemplate.resourceNamespace must be a namespace name"),
    ({"resourceNamespace": 5}, "specTemplate.resourceNamespace must be a namespace name"),
    ({"deletionPolicy": "Keep"}, "specTemplate.deletionPolicy must be Delete or Orphan"),
])
def test_a_malformed_class_names_itself_and_the_field(template: Any, problem: str) -> None:
    with pytest.raises(HandledError) as caught:
        ResourceClass.from_object({"metadata": {"name": "gold"}, "specTemplate": template})
    error = caught.value
    assert (error.message, error.reason, error.severity) == (
        f"class 'gold': {problem}", "InvalidClass", Severity.INFORMATIONAL)


def test_a_class_kind_has_its_api_version() -> None:
    assert ClassKind("g.example", "v2", "K", "ks").api_version == "g.example/v2"


# --------------------------------------------------------------------------- managed resources


def test_a_resource_view_reads_every_field() -> None:
    obj = {"metadata": {"name": "db", "namespace": "dbs", "uid": "ru",
                        "deletionTimestamp": "2026-01-01T00:00:00Z",
                        "annotations": {RELEASED: "team/old"}},
           "spec": {"claimRef": {"namespace": "team", "name": "c", "uid": "cu"},
                    "reclaimPolicy": "Delete",
                    "writeConnectionSecretToRef": {"name": "s", "namespace": "dbs"}},
           "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "A"}]}}
    assert ResourceView.from_object(obj) == ResourceView(
        "dbs", "db", "ru", "cu", "team/c", True, True, True, ReclaimPolicy.DELETE, ("dbs", "s"))
    bare = {"metadata": {"name": "db", "uid": "ru"}}
    assert ResourceView.from_object(bare) == ResourceView(
        "", "db", "ru", None, "/", False, False, False, ReclaimPolicy.RETAIN,
        ("default", "db-connection"))
    odd = {"metadata": {"name": "db", "uid": "ru", "namespace": None},
           "spec": {"claimRef": {"uid": ""}, "reclaimPolicy": "Recycle"},
           "status": {"conditions": [{"type": "Ready", "status": "False", "reason": "B"}]}}
    view_ = ResourceView.from_object(odd)
    assert (view_.namespace, view_.claim_uid, view_.ready, view_.reclaim_policy) == (
        "", None, False, ReclaimPolicy.RETAIN)


def test_reclaim_delete_reads_the_named_resource() -> None:
    assert ClaimFacts("bound", UID, resource=view()).reclaim_delete is True
    assert ClaimFacts("bound", UID, resource=view(policy=ReclaimPolicy.RETAIN)).reclaim_delete \
        is False
    assert ClaimFacts("bound", UID).reclaim_delete is False


CLAIM = {"apiVersion": "claims.lifecycle.dev/v1alpha1", "kind": "DatabaseClaim",
         "metadata": {"name": "db", "namespace": "team", "uid": "0123456789"},
         "spec": {"storageGB": 50}}
GOLD = ResourceClass("gold", "cu", {"engine": "postgres", "storageGB": 20}, "aws",
                     ReclaimPolicy.RETAIN, "dbs", "Orphan")


def test_the_provisioned_resource_is_built_exactly() -> None:
    assert DATABASE_BINDING.build_resource(CLAIM, GOLD) == {
        "apiVersion": "db.lifecycle.dev/v1alpha1",
        "kind": "DatabaseInstance",
        "metadata": {"name": "team-db-01234567", "namespace": "dbs",
                     "labels": {CLAIM_NAME: "db", CLAIM_NAMESPACE: "team"},
                     "annotations": {CLASS_NAME: "gold"}},
        "spec": {"claimRef": {"apiVersion": "claims.lifecycle.dev/v1alpha1",
                              "kind": "DatabaseClaim", "namespace": "team", "name": "db",
                              "uid": "0123456789"},
                 "forProvider": {"engine": "postgres", "storageGB": 50},
                 "providerConfigRef": {"name": "aws"},
                 "reclaimPolicy": "Retain",
                 "deletionPolicy": "Orphan",
                 "writeConnectionSecretToRef": {"namespace": "dbs",
                                                "name": "team-db-01234567-connection"}},
    }


def test_a_binding_without_configurators_builds_the_bare_object() -> None:
    bare = attrs.evolve(DATABASE_BINDING, configurators=())
    assert bare.build_resource(CLAIM, GOLD) == {
        "apiVersion": "db.lifecycle.dev/v1alpha1", "kind": "DatabaseInstance",
        "metadata": {}, "spec": {}}


def test_configurators_fill_in_a_resource_without_a_spec_and_keep_earlier_parameters() -> None:
    managed: dict[str, Any] = {"metadata": {"name": "m"}}
    configure_from_class(CLAIM, attrs.evolve(GOLD, deletion_policy=None), managed)
    assert managed["spec"] == {"forProvider": {"engine": "postgres", "storageGB": 20},
                               "providerConfigRef": {"name": "aws"}, "reclaimPolicy": "Retain",
                               "writeConnectionSecretToRef": {"namespace": "dbs",
                                                              "name": "m-connection"}}
    managed = {"metadata": {"name": "m"}, "spec": {"forProvider": {"storageGB": 5, "x": 1}}}
    configure_from_class(CLAIM, attrs.evolve(GOLD, deletion_policy=None), managed)
    assert managed["spec"]["forProvider"] == {"engine": "postgres", "storageGB": 5, "x": 1}
    assert "deletionPolicy" not in managed["spec"]
    bare: dict[str, Any] = {}
    configure_object_meta(CLAIM, GOLD, bare)
    assert bare["spec"] == {"claimRef": claim_reference(CLAIM)}


def test_a_class_that_makes_an_invalid_resource_is_reported_as_the_class_problem() -> None:
    bad = ResourceClass("bad", "u", {"bogus": 1}, "p", ReclaimPolicy.DELETE, "ns")
    with pytest.raises(HandledError) as caught:
        DATABASE_BINDING.build_resource(CLAIM, bad)
    error = caught.value
    assert (error.reason, error.severity) == ("InvalidClass", Severity.INFORMATIONAL)
    assert error.message == ("class 'bad' with this claim makes an invalid DatabaseInstance: "
                             "unknown field(s) in spec.forProvider: bogus")


# --------------------------------------------------------------------------- references


@pytest.mark.parametrize(("spec", "expected"), [
    ({}, None), ({"resourceRef": None}, None),
    ({"resourceRef": {"name": "db"}}, ("team", "db")),
    ({"resourceRef": {"name": "db", "namespace": "dbs"}}, ("dbs", "db")),
])
def test_resource_ref(spec: dict, expected: tuple[str, str] | None) -> None:
    assert resource_ref(spec, "team") == expected


@pytest.mark.parametrize(("ref", "message"), [
    ("db", "spec.resourceRef must be {name: <string>, namespace: <string>}"),
    ({}, "spec.resourceRef must be {name: <string>, namespace: <string>}"),
    ({"name": ""}, "spec.resourceRef must be {name: <string>, namespace: <string>}"),
    ({"name": 3}, "spec.resourceRef must be {name: <string>, namespace: <string>}"),
    ({"name": "db", "namespace": ""}, "spec.resourceRef.namespace must be a namespace name"),
    ({"name": "db", "namespace": 4}, "spec.resourceRef.namespace must be a namespace name"),
])
def test_a_malformed_resource_ref_is_terminal(ref: Any, message: str) -> None:
    with pytest.raises(TerminalError) as caught:
        resource_ref({"resourceRef": ref}, "team")
    assert caught.value.message == message


def test_class_ref() -> None:
    assert class_ref({}) is None
    assert class_ref({"classRef": None}) is None
    assert class_ref({"classRef": {"name": "gold"}}) == "gold"
    for bad in ("gold", {}, {"name": ""}, {"name": 1}):
        with pytest.raises(TerminalError) as caught:
            class_ref({"classRef": bad})
        assert caught.value.message == "spec.classRef must be {name: <string>}"


# --------------------------------------------------------------------------- ownership


def _verdict(observation: Observation, **options: Any) -> Ownership:
    given: dict[str, Any] = {"uid": "u-1", "name": "db", "acted_before": False,
                             "adopt": False, "adoption_allowed": False, "namespace": "team",
                             **options}
    return judge(observation, **given)


def test_every_refusal_has_its_exact_reason_and_message() -> None:
    unmarked = Observation(exists=True, owner="")
    foreign = Observation(exists=True, owner="op/u-2")
    protected = Observation(exists=True, owner="op/u-2", protected="it is a template")
    hint = f"to take it over, annotate {ADOPT}=true (the operator must allow adoption)"
    cases = [
        (_verdict(protected), "ExternalResourceNotOwned",
         "external resource 'db' cannot be managed by this object: it is a template"),
        (_verdict(unmarked), "ExternalResourceNotOwned",
         f"external resource 'db' exists and was not created by this object; {hint}"),
        (_verdict(foreign), "ExternalNameConflict",
         f"external resource 'db' is marked as owned by another object (uid u-2); {hint}"),
        (_verdict(unmarked, adopt=True), "ExternalResourceNotOwned",
         "external resource 'db' exists and was not created by this object; adoption is not "
         "allowed in namespace 'team': the operator must be started with it allowed there"),
        (_verdict(foreign, adopt=True, namespace=None), "ExternalNameConflict",
         "external resource 'db' is marked as owned by another object (uid u-2); adoption of "
         "cluster-scoped resources is not allowed by the operator"),
    ]
    for ownership, reason, message in cases:
        assert ownership.verdict is Verdict.REFUSED
        error = ownership.error
        assert isinstance(error, NotOwnedError)
        assert (error.reason, error.message, error.severity) == (
            reason, message, Severity.RETRYABLE)
    assert _verdict(unmarked, acted_before=True) == Ownership(Verdict.MARK)
    assert _verdict(Observation(exists=True, owner="x/u-1")) == Ownership(Verdict.OWNED)


def test_adoption_is_requested_only_by_a_true_annotation() -> None:
    assert adoption_requested({ADOPT: "true"}) and adoption_requested({ADOPT: "TRUE"})
    assert adoption_requested({ADOPT: True})
    for value in ({}, {ADOPT: "yes"}, {ADOPT: None}, {ADOPT: ""}):
        assert not adoption_requested(value)


# --------------------------------------------------------------------------- the claim's status


NOW = datetime(2026, 1, 1, 12, tzinfo=UTC)
WHEN = "2026-01-01T12:00:00Z"
TABLE = ClaimMachine.table()


def condition(type_: str, status: str, reason: str, message: str, generation: int,
              when: str = WHEN) -> dict[str, Any]:
    """A condition in the API's form."""
    return {"type": type_, "status": status, "reason": reason, "message": message,
            "observedGeneration": generation, "lastTransitionTime": when}


def settle(state: str, old: dict[str, Any], choice: Choice, event: str | None = None,
           error: HandledError | None = None, generation: int = 4) -> Any:
    transition = TABLE.candidates(state, event)[0] if event else None
    facts = ClaimFacts(state, "u", generation=generation, resource_ref=("ns", "db"))
    decision = Decision(state, choice, transition, error)
    return settle_claim(ClaimMachine, old, Outcome(facts, decision, transition), NOW)


def test_binding_records_the_transition_the_history_and_the_resource() -> None:
    old = {"state": "binding", "stateSince": "2026-01-01T11:00:00Z", "custom": 1,
           "conditions": "junk",
           "history": [{"from": "unbound", "to": "binding", "event": "claim",
                        "reason": "ClaimRequested", "time": "t0"}, {"bad": 1}]}
    settled = settle("binding", old, Choice("bind", "ResourceReady", "bound to ns/db"), "bind")
    assert settled.events == (("Normal", "Bind", "binding -> bound: bound to ns/db"),)
    assert settled.status == {
        "state": "bound", "stateSince": WHEN, "custom": 1, "bindingPhase": "Bound",
        "observedGeneration": 4, "phase": "Ready",
        "conditions": [condition("Ready", "True", "Bound", "", 4),
                       condition("Synced", "True", "ReconcileSuccess", "", 4)],
        "history": [old["history"][0],
                    {"from": "binding", "to": "bound", "event": "bind",
                     "reason": "ResourceReady", "time": WHEN}],
        "resourceRef": {"namespace": "ns", "name": "db"},
    }


def test_a_refusal_is_a_warning_and_keeps_the_state_time_and_unchanged_conditions() -> None:
    kept = condition("Synced", "True", "ReconcileSuccess", "", 2, "2026-01-01T09:00:00Z")
    old = {"state": "unbound", "stateSince": "2026-01-01T10:00:00Z", "conditions": [kept]}
    choice = Choice("pending", "ResourceBoundElsewhere", "ns/db is bound to claim a/b")
    settled = settle("unbound", old, choice, "pending", generation=2)
    assert settled.events == (("Warning", "ResourceBoundElsewhere",
                               "ns/db is bound to claim a/b"),)
    assert settled.status == {
        "state": "unbound", "stateSince": "2026-01-01T10:00:00Z", "bindingPhase": "Unbound",
        "observedGeneration": 2, "phase": "Progressing", "history": [],
        "conditions": [kept, condition("Ready", "False", "ResourceBoundElsewhere",
                                       "ns/db is bound to claim a/b", 2)],
    }


def test_an_error_is_reported_on_synced_and_on_ready_unless_ready_is_true() -> None:
    broken = HandledError("broken", reason="InvalidClass")
    bound = settle("bound", {"state": "bound", "stateSince": "garbage"},
                   Choice(None, "InvalidClass", "broken"), error=broken, generation=3)
    assert bound.events == (("Warning", "InvalidClass", "broken"),)
    assert bound.status["conditions"] == [
        condition("Ready", "True", "Bound", "", 3),
        condition("Synced", "False", "ReconcileError", "broken", 3)]
    assert bound.status["stateSince"] == WHEN
    unbound = settle("unbound", {}, Choice(None, "Other", "other"), error=broken)
    assert unbound.status["conditions"][0] == condition(
        "Ready", "False", "InvalidClass", "broken", 4)
    quiet = settle("unbound", {}, Choice(None, "", ""))
    assert quiet.events == ()
    assert quiet.status["conditions"][0] == condition("Ready", "False", "Unbound", "", 4)
    assert "resourceRef" not in quiet.status


def test_a_deleting_claim_held_in_binding_is_terminating_stuck_and_keeps_its_resource() -> None:
    transition = TABLE.candidates("binding", "wait")[0]
    facts = ClaimFacts("binding", "u", generation=4, resource_ref=("ns", "db"), deleting=True)
    choice = Choice("wait", "ResourceNotReady", "w")
    old = {"state": "binding", "stateSince": "2026-01-01T11:00:00Z"}
    settled = settle_claim(ClaimMachine, old,
                           Outcome(facts, Decision("binding", choice, transition), transition),
                           NOW)
    assert settled.status["phase"] == "Terminating"
    assert settled.status["resourceRef"] == {"namespace": "ns", "name": "db"}
    assert settled.status["conditions"][-1] == condition(
        "Stuck", "True", "StuckInBinding", "in binding for 3600s, longer than 1800s", 4)


def test_a_bound_claim_waiting_on_its_resource_is_polled_not_requeued_as_waiting() -> None:
    transition = TABLE.candidates("bound", "wait")[0]
    facts = ClaimFacts("bound", "u", generation=4, resource_ref=("ns", "db"))
    decision = Decision("bound", Choice("wait", "ResourceNotReady", "w"), transition)
    concluded = conclude(ClaimMachine, {"state": "bound"}, facts, decision, now=NOW, key="u",
                         settler=settle_claim, fallback=False, waiting=False)
    assert concluded.result.reason == "Poll"
    waiting = conclude(ClaimMachine, {"state": "bound"}, facts, decision, now=NOW, key="u",
                       settler=settle_claim, fallback=False)
    assert waiting.result == Result.later(ClaimMachine.timing.default_wait, "Waiting")
