"""The gate of a pass, event messages and the decided failure, checked field by field.

:func:`lifecycle.core.decide.gate` decides from the stored object alone
whether a pass goes on; these tests call it directly (no API, no reconciler)
and assert every field of the :class:`Gate`, including the ConfigValid and
StatusValid notes and their messages, so a changed annotation name, a swapped
policy level or a lost note fails here.
"""

from __future__ import annotations

from typing import Any

import pytest

from lifecycle.core.decide import (
    Choice,
    DeletionPolicy,
    Facts,
    Gate,
    ReconcilePolicy,
    choose_event,
    decide,
    fail_edge,
    gate,
    restore,
    transit,
)
from lifecycle.core.errors import (
    CredentialsError,
    ExternalError,
    HandledError,
    Severity,
    TerminalError,
)
from lifecycle.core.kind import FINALIZER, OPERATION, OWNER, PAUSED, RECONCILE_POLICY
from lifecycle.core.values import ConditionStatus, Observation, ProviderStatus
from lifecycle.machines.managed import ManagedResourceMachine as M

SKIP, MANAGE, DETACH = (ReconcilePolicy.SKIP, ReconcilePolicy.MANAGE,
                        ReconcilePolicy.DETACH_ON_DELETE)


def obj(*, annotations: dict[str, str] | None = None, status: dict[str, Any] | None = None,
        generation: Any = 3, deleting: bool = False, finalizers: list[str] | None = None,
        spec: dict[str, Any] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "x", "namespace": "team-a", "uid": "u",
                            "generation": generation,
                            "finalizers": [FINALIZER] if finalizers is None else finalizers}
    if annotations is not None:
        meta["annotations"] = annotations
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta, "spec": spec or {}, "status": status or {}}


def notes(g: Gate) -> list[tuple[str, str, str]]:
    """(type, status, reason) of each note, in order."""
    return [(n.type, n.status.value, n.reason) for n in g.notes]


# ------------------------------------------------------------------ defaults
def test_a_plain_object_goes_on_with_every_default() -> None:
    g = gate(M, obj(status={"state": "ready"}), {})
    assert g == Gate("ready", generation=3)
    assert (g.stop, g.forced, g.deleting, g.paused, g.orphan) == (None, False, False, False,
                                                                   False)
    assert g.policy is MANAGE and g.notes == () and g.repaired is None


def test_a_missing_or_malformed_generation_is_one() -> None:
    assert gate(M, obj(generation=None), {}).generation == 1
    assert gate(M, obj(generation="7"), {}).generation == 1
    assert gate(M, obj(generation=9), {}).generation == 9


# ------------------------------------------------------------- stored state
@pytest.mark.parametrize("stored", ["nonsense", "deleted", 42])
def test_a_stored_state_that_is_not_resumable_restarts_from_the_initial_state(
        stored: Any) -> None:
    g = gate(M, obj(status={"state": stored}), {})
    initial = M.table().initial
    assert g.state == initial
    assert g.repaired == str(stored)[:64]
    assert len(g.notes) == 1
    note = g.notes[0]
    assert (note.type, note.status, note.reason) == ("StatusValid", ConditionStatus.FALSE,
                                                     "StateRepaired")
    assert note.observed_generation == 3
    assert repr(str(stored)[:64]) in note.message and initial in note.message


def test_a_long_corrupt_state_is_cut_to_64_characters() -> None:
    g = gate(M, obj(status={"state": "z" * 500}), {})
    assert g.repaired == "z" * 64


def test_a_missing_state_is_the_initial_state_without_a_note() -> None:
    g = gate(M, obj(), {})
    assert g.state == M.table().initial and g.repaired is None and g.notes == ()


def test_restore_reads_only_a_dict_status() -> None:
    assert restore(M, {"state": "ready"}) == "ready"
    assert restore(M, [("state", "ready")]) == M.table().initial
    assert restore(M, None) == M.table().initial


# -------------------------------------------------------------- annotations
def test_the_ignore_annotation_stops_before_anything_else() -> None:
    g = gate(M, obj(annotations={OPERATION: "ignore"}, deleting=True,
                    status={"state": "ready"}), {OWNER: "someone-else"})
    assert (g.stop, g.state, g.generation) == ("Ignored", "ready", 3)
    assert g.deleting is False and g.notes == ()


def test_a_namespace_owned_by_another_operator_stops_the_pass() -> None:
    g = gate(M, obj(), {OWNER: "other"}, operator_id="me")
    assert g.stop == "NotOwned"
    assert g.stop_message == "namespace team-a is owned by operator 'other'; skipped"
    assert g.generation == 3


def test_a_namespace_owned_by_this_operator_goes_on() -> None:
    assert gate(M, obj(), {OWNER: "me"}, operator_id="me").stop is None
    assert gate(M, obj(), {}, operator_id="me").stop is None
    assert gate(M, obj(), {OWNER: "me"}).stop == "NotOwned", "no id: owned by someone else"


def test_the_reconcile_annotation_forces_a_pass() -> None:
    g = gate(M, obj(annotations={OPERATION: "reconcile"}), {})
    assert g.forced is True and g.notes == ()


def test_an_unknown_operation_is_noted_and_ignored() -> None:
    g = gate(M, obj(annotations={OPERATION: "RECONCILE"}), {})
    assert g.forced is False and g.stop is None
    assert notes(g) == [("ConfigValid", "False", "UnknownOperation")]
    assert g.notes[0].message == (
        f"annotation {OPERATION} has unknown value 'RECONCILE'; "
        "expected 'reconcile' or 'ignore'; ignored")
    assert g.notes[0].observed_generation == 3


# ------------------------------------------------------------ reconcile policy
@pytest.mark.parametrize(("on_object", "on_namespace", "default", "policy"), [
    (None, None, MANAGE, MANAGE),
    (None, None, SKIP, SKIP),
    ("skip", None, MANAGE, SKIP),
    (None, "skip", MANAGE, SKIP),
    ("manage", "skip", MANAGE, MANAGE),           # the object wins over the namespace
    ("detach-on-delete", "skip", SKIP, DETACH),
    (None, "detach-on-delete", SKIP, DETACH),     # the namespace wins over the default
])
def test_policy_resolves_object_then_namespace_then_default(
        on_object: str | None, on_namespace: str | None, default: ReconcilePolicy,
        policy: ReconcilePolicy) -> None:
    annotations = {RECONCILE_POLICY: on_object} if on_object else {}
    ns = {RECONCILE_POLICY: on_namespace} if on_namespace else {}
    g = gate(M, obj(annotations=annotations), ns, default_policy=default)
    assert g.policy is policy and g.notes == ()


def test_an_unknown_object_policy_falls_through_to_the_namespace_and_says_so() -> None:
    g = gate(M, obj(annotations={RECONCILE_POLICY: "sometimes"}), {RECONCILE_POLICY: "skip"})
    assert g.policy is SKIP
    assert notes(g) == [("ConfigValid", "False", "UnknownReconcilePolicy")]
    assert g.notes[0].message == (
        f"object annotation {RECONCILE_POLICY} has unknown value 'sometimes'; "
        "using 'skip' from the namespace annotation")


def test_unknown_policies_at_both_levels_fall_through_to_the_default() -> None:
    g = gate(M, obj(annotations={RECONCILE_POLICY: "a"}), {RECONCILE_POLICY: "b"},
             default_policy=SKIP)
    assert g.policy is SKIP
    assert [n.message for n in g.notes] == [
        f"object annotation {RECONCILE_POLICY} has unknown value 'a'; "
        "using 'skip' from the operator default",
        f"namespace annotation {RECONCILE_POLICY} has unknown value 'b'; "
        "using 'skip' from the operator default",
    ]


def test_an_object_policy_found_first_hides_an_unknown_namespace_value() -> None:
    g = gate(M, obj(annotations={RECONCILE_POLICY: "skip"}), {RECONCILE_POLICY: "bogus"})
    assert g.policy is SKIP and g.notes == ()


# ------------------------------------------------------------ deletion policy
@pytest.mark.parametrize("raw", ["Retain", 5, ["Delete"]])
def test_an_unknown_deletion_policy_means_delete_and_is_noted(raw: Any) -> None:
    g = gate(M, obj(spec={"deletionPolicy": raw}, deleting=True), {})
    assert notes(g) == [("ConfigValid", "False", "UnknownDeletionPolicy")]
    assert g.notes[0].message == (
        f"spec.deletionPolicy {str(raw)[:64]!r} is not Delete or Orphan; using Delete")
    assert g.orphan is False and g.deleting is True


@pytest.mark.parametrize(("policy", "deletion", "orphan"), [
    (MANAGE, "Delete", False),
    (MANAGE, "Orphan", True),
    (DETACH, "Delete", True),
    (SKIP, "Delete", True),
    (SKIP, "Orphan", True),
])
def test_orphaning_on_delete(policy: ReconcilePolicy, deletion: str, orphan: bool) -> None:
    g = gate(M, obj(spec={"deletionPolicy": deletion}, deleting=True), {},
             default_policy=policy)
    assert (g.deleting, g.orphan) == (True, orphan)
    assert g.notes == ()
    # Not being deleted, nothing is orphaned whatever the policies say.
    assert gate(M, obj(spec={"deletionPolicy": deletion}), {},
                default_policy=policy).orphan is False


def test_deletion_policy_values_are_the_api_spellings() -> None:
    assert [p.value for p in DeletionPolicy] == ["Delete", "Orphan"]


# ------------------------------------------------------ deletion, pause, terminal
def test_a_deleted_object_without_our_finalizer_was_never_claimed() -> None:
    g = gate(M, obj(deleting=True, finalizers=["someone.else/finalizer"],
                    annotations={OPERATION: "reconcile"}), {})
    assert g.stop == "NotClaimed"
    assert (g.deleting, g.forced, g.generation) == (True, True, 3)


def test_a_paused_object_is_paused_and_keeps_the_other_fields() -> None:
    for value in ("true", "True", "TRUE"):
        g = gate(M, obj(annotations={PAUSED: value, RECONCILE_POLICY: "skip"},
                        status={"state": "ready"}), {})
        assert g.paused is True and g.stop is None
        assert (g.state, g.policy, g.generation) == ("ready", SKIP, 3)
    for value in ("false", "yes", ""):
        assert gate(M, obj(annotations={PAUSED: value}), {}).paused is False


def failed(severity: str, generation: int) -> dict[str, Any]:
    return {"state": "failed", "failure": {"severity": severity, "generation": generation}}


def test_a_terminal_failure_of_this_generation_stops_the_pass() -> None:
    g = gate(M, obj(status=failed(Severity.TERMINAL.value, 3)), {})
    assert (g.stop, g.state, g.generation) == ("TerminalError", "failed", 3)


@pytest.mark.parametrize(("status", "annotations", "deleting"), [
    (failed(Severity.TERMINAL.value, 2), {}, False),         # a new generation: retry
    (failed(Severity.RETRYABLE.value, 3), {}, False),        # not terminal
    (failed(Severity.TERMINAL.value, 3), {OPERATION: "reconcile"}, False),  # forced
    (failed(Severity.TERMINAL.value, 3), {}, True),          # a deletion cannot wait
    ({**failed(Severity.TERMINAL.value, 3), "state": "ready"}, {}, False),
])
def test_a_terminal_failure_does_not_stop_a_pass_otherwise(
        status: dict[str, Any], annotations: dict[str, str], deleting: bool) -> None:
    g = gate(M, obj(status=status, annotations=annotations, deleting=deleting), {})
    assert g.stop is None


# ------------------------------------------------------------------- events
@pytest.mark.parametrize(("facts", "choice"), [
    (Facts("ready", deleting=True, policy=DETACH),
     Choice("orphan", "DeletionOrphaned", "policy leaves the external resource")),
    (Facts("ready", deleting=True),
     Choice("gone", "ExternalResourceDeleted", "external resource is gone")),
    (Facts("deleting", deleting=True, observation=Observation(
        exists=True, status=ProviderStatus.PENDING)),
     Choice("wait", "DeletionPending", "provider is deleting")),
    (Facts("deleting", deleting=True, observation=Observation(
        exists=True, status=ProviderStatus.PENDING, message="draining")),
     Choice("wait", "DeletionPending", "draining")),
    (Facts("ready", deleting=True, observation=Observation(exists=True)),
     Choice("delete", "DeleteRequested", "deleting the external resource")),
    (Facts("unclaimed", observation=Observation.absent(), policy=SKIP),
     Choice(None, "ExternalResourceAbsent", "external resource does not exist and reconcile "
            "policy 'skip' forbids creating it")),
    (Facts("ready", observation=Observation.absent()),
     Choice("create", "ExternalResourceVanished", "external resource vanished")),
    (Facts("unclaimed", observation=Observation.absent()),
     Choice("create", "CreateRequested", "creating the external resource")),
    (Facts("ready", observation=Observation(exists=True, status=ProviderStatus.FAILED)),
     Choice("fail", "ProviderFailed", "provider reports failure")),
    (Facts("creating", observation=Observation(exists=True, status=ProviderStatus.PENDING)),
     Choice("wait", "ProviderPending", "provider operation pending")),
    (Facts("ready", observation=Observation(exists=True), forced=True),
     Choice("update", "ReconcileRequested", "the reconcile annotation asked for a full update")),
    (Facts("ready", observation=Observation(exists=True), forced=True, policy=SKIP),
     Choice("available", "Available", "")),
    (Facts("ready", observation=Observation(exists=True, up_to_date=False)),
     Choice("update", "UpdateRequested", "external resource differs from spec")),
    (Facts("ready", observation=Observation(exists=True, up_to_date=False), policy=SKIP),
     Choice("available", "ReconcileSkipped", "external resource differs from spec; reconcile "
            "policy 'skip' forbids updating it")),
    (Facts("ready", observation=Observation(exists=True, up_to_date=False), forced=True),
     Choice("update", "UpdateRequested", "external resource differs from spec")),
    (Facts("ready", error=ExternalError("boom")), Choice("fail", "ExternalError", "boom")),
])
def test_the_chosen_event_with_its_reason_and_message(facts: Facts, choice: Choice) -> None:
    assert choose_event(facts) == choice


# ----------------------------------------------------------------- decisions
def test_a_provider_failure_remembers_the_operation_under_way() -> None:
    broken = Observation(exists=True, status=ProviderStatus.FAILED, message="disk full")
    for state, operation in (("creating", "create"), ("updating", "update")):
        d = decide(M, Facts(state, observation=broken))
        assert d.transition is not None and d.transition.target == "failed"
        assert d.error is not None
        assert (d.error.reason, d.error.message) == ("ProviderFailed", "disk full")
        assert d.failed_operation == operation
    d = decide(M, Facts("ready", observation=broken, failed_operation="update"))
    assert d.failed_operation == "update", "no operation under way: the one remembered"


def test_errors_from_connect_and_observe_name_their_operation() -> None:
    d = decide(M, Facts("ready", error=CredentialsError("no secret")))
    assert (d.failed_operation, d.error.reason) == ("connect", "CredentialsUnavailable")
    d = decide(M, Facts("creating", error=ExternalError("timeout")))
    assert (d.failed_operation, d.error.reason) == ("observe", "ExternalError")
    assert d.transition is not None and d.transition.target == "failed"
    assert d.hold is False


def test_a_decision_without_an_event_changes_nothing() -> None:
    d = decide(M, Facts("ready"))
    assert (d.source, d.transition, d.error, d.failed_operation, d.actions) == (
        "ready", None, None, None, ())


def test_a_decision_carries_the_transitions_actions() -> None:
    d = decide(M, Facts("unclaimed", observation=Observation.absent()))
    assert d.transition is not None
    assert d.actions == d.transition.actions and d.actions


def test_an_event_not_allowed_keeps_an_error_already_carried() -> None:
    carried = HandledError("earlier", reason="Earlier")
    d = transit(M, "deleting", Choice("create", "X"), Facts("deleting"), error=carried,
                failed_operation="observe")
    assert d.transition is None and d.error is carried and d.failed_operation == "observe"
    d = transit(M, "deleting", Choice("create", "X"), Facts("deleting"))
    assert d.error is not None and d.error.reason == "EventNotAllowed"
    assert d.error.message == (
        f"event 'create' is not allowed in state 'deleting' of {M.table().name}")
    assert d.transition is None and d.failed_operation is None


def test_failing_records_the_error_and_operation_and_keeps_the_rest() -> None:
    d = decide(M, Facts("unclaimed", observation=Observation.absent()))
    err = ExternalError("quota")
    f = d.failing(err, "create")
    assert (f.error, f.failed_operation) == (err, "create")
    assert (f.source, f.choice, f.transition, f.actions) == (
        d.source, d.choice, d.transition, d.actions)


def test_the_fail_edge_of_a_state() -> None:
    for state in ("unclaimed", "creating", "ready", "updating", "deleting", "failed"):
        edge = fail_edge(M, state, Facts(state))
        assert edge is not None, state
        assert (edge.source, edge.event, edge.target) == (state, "fail", "failed")
    # The final state has no way out, so no fail edge either.
    assert fail_edge(M, "deleted", Facts("deleted")) is None


def test_policies_allow_what_they_say() -> None:
    assert [(p.allows_modify, p.allows_delete) for p in (MANAGE, SKIP, DETACH)] == [
        (True, True), (False, False), (True, False)]


# --------------------------------------------------- details the tests above miss
def test_a_stopped_gate_still_reports_the_stored_state() -> None:
    g = gate(M, obj(status={"state": "ready"}), {OWNER: "other"}, operator_id="me")
    assert (g.stop, g.state) == ("NotOwned", "ready")


def test_unknown_annotation_values_are_quoted_to_64_characters() -> None:
    long = "x" * 100
    g = gate(M, obj(annotations={OPERATION: long, RECONCILE_POLICY: long}), {})
    quoted = repr("x" * 64)
    assert [n.reason for n in g.notes] == ["UnknownOperation", "UnknownReconcilePolicy"]
    for note in g.notes:
        assert quoted in note.message and repr("x" * 65) not in note.message
        assert note.observed_generation == 3


def test_guards_read_the_facts_of_the_pass() -> None:
    """From failed, a pending provider operation resumes the operation that failed."""
    pending = Observation(exists=True, status=ProviderStatus.PENDING)
    resumed = {
        op: decide(M, Facts("failed", observation=pending, failed_operation=op))
        for op in ("update", "create")
    }
    assert {op: d.transition.target for op, d in resumed.items() if d.transition} == {
        "update": "updating", "create": "creating"}


def test_a_transit_without_an_event_keeps_source_and_choice() -> None:
    choice = Choice(None, "NotObserved")
    d = transit(M, "ready", choice, Facts("ready"))
    assert (d.source, d.choice, d.transition, d.error) == ("ready", choice, None, None)


def test_a_refused_event_keeps_the_source_state() -> None:
    d = transit(M, "deleting", Choice("create", "X"), Facts("deleting"))
    assert d.source == "deleting"


def test_a_guard_error_keeps_the_source_state() -> None:
    class Touchy(M):
        def failed_during_update(self, facts: Facts) -> bool:
            raise RuntimeError("boom")

    d = transit(Touchy, "failed", Choice("wait", "X"), Facts("failed"))
    assert (d.source, d.failed_operation, d.transition) == ("failed", "guard", None)


def test_an_unreachable_provider_holds_a_state_that_reports_ready() -> None:
    err = ExternalError("timeout")
    d = decide(M, Facts("ready", error=err))
    assert d.hold is True
    assert (d.source, d.transition, d.error, d.failed_operation) == ("ready", None, err,
                                                                     "observe")
    assert d.choice == Choice(None, "ExternalError", "timeout")
    d = decide(M, Facts("ready", error=CredentialsError("no secret")))
    assert (d.hold, d.failed_operation) == (True, "connect")


@pytest.mark.parametrize("facts", [
    Facts("creating", error=ExternalError("timeout")),         # a state not reporting Ready
    Facts("ready", error=TerminalError("bad spec")),           # a terminal error
    Facts("ready", observation=Observation(exists=True)),      # no error at all
])
def test_nothing_else_holds_the_state(facts: Facts) -> None:
    assert decide(M, facts).hold is False


def test_a_provider_failure_keeps_the_source_state() -> None:
    broken = Observation(exists=True, status=ProviderStatus.FAILED, message="disk full")
    assert decide(M, Facts("creating", observation=broken)).source == "creating"


def test_an_unknown_deletion_policy_note_is_of_this_generation_and_quoted_to_64() -> None:
    g = gate(M, obj(spec={"deletionPolicy": "y" * 100}), {})
    (note,) = g.notes
    assert note.observed_generation == 3
    assert repr("y" * 64) in note.message and repr("y" * 65) not in note.message


def test_a_never_claimed_deletion_reports_the_stored_state() -> None:
    g = gate(M, obj(status={"state": "ready"}, deleting=True, finalizers=[]), {})
    assert (g.stop, g.state) == ("NotClaimed", "ready")


def test_a_transit_without_an_event_carries_the_error_it_was_given() -> None:
    carried = ExternalError("down")
    choice = Choice(None, "ExternalError", "down")
    d = transit(M, "creating", choice, Facts("creating"), error=carried,
                failed_operation="observe")
    assert (d.source, d.choice, d.transition, d.error, d.failed_operation) == (
        "creating", choice, None, carried, "observe")


def test_refused_and_guard_failed_decisions_keep_the_choice() -> None:
    choice = Choice("create", "X")
    assert transit(M, "deleting", choice, Facts("deleting")).choice == choice

    class Touchy(M):
        def failed_during_update(self, facts: Facts) -> bool:
            raise RuntimeError("boom")

    wait = Choice("wait", "Y")
    assert transit(Touchy, "failed", wait, Facts("failed")).choice == wait


def test_a_provider_failure_decision_keeps_its_choice() -> None:
    broken = Observation(exists=True, status=ProviderStatus.FAILED, message="disk full")
    d = decide(M, Facts("creating", observation=broken))
    assert d.choice == Choice("fail", "ProviderFailed", "disk full")
