"""Condition bookkeeping, checked on the pure functions that keep it.

:func:`lifecycle.core.conditions.merge` owns the timestamp rule: a
condition's ``lastTransitionTime`` moves when it is new or its status flips,
and never for a reason, message or generation change. :func:`settle` owns
``stateSince`` (fixed while the state is unchanged) and ``operationSince``.
Each rule is checked with a clock that moves between passes, so a rule that
only holds when every pass happens at the same instant cannot pass.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from lifecycle.core import conditions as cond
from lifecycle.core.decide import Choice, Decision, Facts
from lifecycle.core.status import (
    ENGINE_KEYS,
    Outcome,
    kept_history,
    paused,
    settle,
    stuck,
    valid_timestamp,
)
from lifecycle.core.values import (
    Condition,
    ConditionStatus,
    Observation,
    ProviderStatus,
    rfc3339,
)
from lifecycle.machines.managed import ManagedResourceMachine as M

T, F, U = ConditionStatus.TRUE, ConditionStatus.FALSE, ConditionStatus.UNKNOWN
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def stamp(seconds: float) -> str:
    return rfc3339(at(seconds))


def by_type(entries: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    found = {e["type"]: e for e in entries}
    assert len(found) == len(entries), "one entry per type"
    return found


# ------------------------------------------------------------------- merge
def test_a_new_condition_is_stamped_with_now() -> None:
    merged = cond.merge([], [Condition("Ready", F, "Creating", "m", 2)], stamp(5))
    assert merged == [{"type": "Ready", "status": "False", "reason": "Creating",
                       "message": "m", "observedGeneration": 2,
                       "lastTransitionTime": stamp(5)}]


def test_a_status_flip_moves_last_transition_time() -> None:
    first = cond.merge([], [Condition("Ready", F, "Creating")], stamp(0))
    for status, seconds in ((T, 10), (U, 20), (F, 30), (T, 40)):
        first = cond.merge(first, [Condition("Ready", status, "R")], stamp(seconds))
        assert first[0]["status"] == status.value
        assert first[0]["lastTransitionTime"] == stamp(seconds)


@pytest.mark.parametrize("change", [
    {"reason": "SomethingElse"},
    {"message": "a different message"},
    {"observed_generation": 7},
    {"reason": "Other", "message": "other", "observed_generation": 9},
])
def test_a_change_without_a_flip_keeps_last_transition_time(change: dict[str, Any]) -> None:
    base = {"type": "Synced", "status": F, "reason": "ReconcileError", "message": "first",
            "observed_generation": 1}
    first = cond.merge([], [Condition(**base)], stamp(0))
    second = cond.merge(first, [Condition(**(base | change))], stamp(60))
    entry = second[0]
    assert entry["lastTransitionTime"] == stamp(0)
    # The other fields do take the new values.
    expected = Condition(**(base | change)).to_dict()
    assert {k: entry[k] for k in ("reason", "message", "observedGeneration")} == {
        k: expected[k] for k in ("reason", "message", "observedGeneration")}


def test_a_stored_entry_without_a_time_is_stamped_even_without_a_flip() -> None:
    stored = [{"type": "Ready", "status": "True", "reason": "Available", "message": "",
               "observedGeneration": 1, "lastTransitionTime": ""}]
    merged = cond.merge(stored, [Condition("Ready", T, "Available", "", 1)], stamp(3))
    assert merged[0]["lastTransitionTime"] == stamp(3)


def test_merge_keeps_unrelated_entries_and_their_order() -> None:
    stored = cond.merge([], [Condition("A", T, "X"), Condition("B", F, "Y"),
                             Condition("C", U, "Z")], stamp(0))
    merged = cond.merge(stored, [Condition("B", T, "Y2"), Condition("D", T, "W")], stamp(9))
    assert [e["type"] for e in merged] == ["A", "B", "C", "D"]
    entries = by_type(merged)
    assert entries["A"] == stored[0] and entries["C"] == stored[2]
    assert (entries["B"]["status"], entries["B"]["lastTransitionTime"]) == ("True", stamp(9))
    assert entries["D"]["lastTransitionTime"] == stamp(9)


def test_merge_repairs_a_corrupt_stored_list() -> None:
    stored: list[Any] = [
        "not a mapping",
        {"status": "True"},                      # no type: dropped
        {"type": "", "status": "True"},          # empty type: dropped
        {"type": 5, "status": "True"},           # non-string type: dropped
        {"type": "Ready", "status": "Maybe", "reason": 3, "observedGeneration": "x",
         "lastTransitionTime": stamp(1)},        # repaired field by field
        {"type": "Synced", "status": "True", "reason": "ReconcileSuccess", "message": "",
         "observedGeneration": 1, "lastTransitionTime": stamp(2)},  # already normal
    ]
    merged = cond.merge(stored, [], stamp(9))
    assert merged == [
        {"type": "Ready", "status": "Unknown", "reason": "3", "message": "",
         "observedGeneration": 0, "lastTransitionTime": stamp(1)},
        {"type": "Synced", "status": "True", "reason": "ReconcileSuccess", "message": "",
         "observedGeneration": 1, "lastTransitionTime": stamp(2)},
    ]


def test_merge_never_mutates_the_stored_list() -> None:
    stored = cond.merge([], [Condition("Ready", F, "Creating")], stamp(0))
    snapshot = [dict(e) for e in stored]
    cond.merge(stored, [Condition("Ready", T, "Available")], stamp(5))
    assert stored == snapshot


def test_a_later_update_of_the_same_type_in_one_merge_wins() -> None:
    merged = cond.merge([], [Condition("Ready", F, "A"), Condition("Ready", T, "B")], stamp(1))
    assert len(merged) == 1 and (merged[0]["status"], merged[0]["reason"]) == ("True", "B")


def test_merge_makes_every_reason_valid() -> None:
    merged = cond.merge([], [Condition("Ready", F, "quota exceeded")], stamp(0))
    assert merged[0]["reason"] == "QuotaExceeded"


# ------------------------------------------------------------ camel_reason
@pytest.mark.parametrize(("reason", "valid"), [
    ("Available", "Available"),
    ("quota exceeded", "QuotaExceeded"),
    ("already_Valid_1", "already_Valid_1"),
    ("a,b:c", "a,b:c"),
    ("x", "x"),
    ("ends with,", "EndsWith"),
    ("42 is the answer", "IsTheAnswer"),
    ("9lives", "lives"),
    ("", "ReconcileError"),
    ("!!!", "ReconcileError"),
    ("1234", "ReconcileError"),
    ("don't-stop me", "DonTStopMe"),
])
def test_camel_reason(reason: str, valid: str) -> None:
    assert cond.camel_reason(reason) == valid


def test_camel_reason_with_its_own_default_and_a_length_cap() -> None:
    assert cond.camel_reason("...", default="Fallback") == "Fallback"
    assert cond.camel_reason(" ".join(["word"] * 400)) == ("Word" * 400)[:1024]
    assert len(cond.camel_reason(" ".join(["word"] * 400))) == 1024


# ------------------------------------------------------------- get / phase
def test_get_reads_the_first_entry_of_a_type_from_any_mapping() -> None:
    from types import MappingProxyType
    stored: list[Any] = ["junk", MappingProxyType({"type": "Ready", "status": "True",
                                                   "reason": "Available"}),
                         {"type": "Ready", "status": "False", "reason": "Later"}]
    found = cond.get(stored, "Ready")
    assert found is not None and (found.status, found.reason) == (T, "Available")
    assert cond.get(stored, "Synced") is None
    assert cond.get([], "Ready") is None


@pytest.mark.parametrize(("statuses", "deleting", "phase"), [
    ({"Ready": "True", "Synced": "True"}, False, "Ready"),
    ({"Ready": "True", "Synced": "True"}, True, "Terminating"),
    ({"Ready": "True", "Synced": "False"}, False, "Progressing"),
    ({"Ready": "Unknown", "Synced": "True"}, False, "Progressing"),
    ({"Ready": "True", "Synced": "True", "Creating": "False", "Failed": "False",
      "Stuck": "False", "Updating": "False", "Deleting": "False", "Informational": "False"},
     False, "Ready"),
    ({"Ready": "True", "ConfigValid": "False"}, False, "Progressing"),
    ({"Creating": "True"}, False, "Progressing"),   # only activity types: nothing relevant
    ({}, False, "Progressing"),
    ({}, True, "Terminating"),
])
def test_phase(statuses: dict[str, str], deleting: bool, phase: str) -> None:
    entries = [{"type": t, "status": s} for t, s in statuses.items()]
    assert cond.phase(entries, deleting) == phase


def test_activity_types_and_initial_conditions() -> None:
    assert frozenset({"Creating", "Updating", "Deleting", "Failed", "Stuck",
                      "Informational"}) == cond.ACTIVITY_TYPES
    assert [c.to_dict() for c in cond.initial(4)] == [
        {"type": "Ready", "status": "Unknown", "reason": "Reconciling", "message": "",
         "observedGeneration": 4, "lastTransitionTime": ""},
        {"type": "Synced", "status": "Unknown", "reason": "Reconciling", "message": "",
         "observedGeneration": 4, "lastTransitionTime": ""},
    ]


# --------------------------------------------------------------- settle
def outcome(state: str, target: str | None, *, event: str | None = None,
            observation: Observation | None = None, generation: int = 1,
            reason: str = "R") -> Outcome:
    table = M.table()
    transition = table.fire(state, event, lambda _name: True) if event else None
    assert (transition.target if transition else None) == target
    facts = Facts(state, observation=observation, generation=generation)
    return Outcome(facts, Decision(state, Choice(event, reason, "msg"), transition), transition)


def test_state_since_is_fixed_within_a_state_and_moves_on_a_change() -> None:
    status: dict[str, Any] = {}
    s1 = settle(M, status, outcome("unclaimed", "creating", event="create"), at(0)).status
    assert s1["stateSince"] == stamp(0)
    for seconds in (5, 50, 500):
        same = settle(M, s1, outcome("creating", None, observation=Observation(exists=True)),
                      at(seconds)).status
        assert same["state"] == "creating" and same["stateSince"] == stamp(0)
        assert by_type(same["conditions"])["Ready"]["lastTransitionTime"] == stamp(0)
    up = settle(M, s1, outcome("creating", "ready", event="available"), at(70)).status
    assert up["stateSince"] == stamp(70)
    ready = by_type(up["conditions"])["Ready"]
    assert (ready["status"], ready["lastTransitionTime"]) == ("True", stamp(70))


@pytest.mark.parametrize("corrupt", [None, "yesterday", 17, ""])
def test_a_missing_or_corrupt_state_since_is_timed_from_now(corrupt: Any) -> None:
    old = {"state": "ready", "stateSince": corrupt}
    s = settle(M, old, outcome("ready", None), at(30)).status
    assert s["stateSince"] == stamp(30)


def test_a_self_transition_keeps_state_since_but_records_no_history() -> None:
    s1 = settle(M, {}, outcome("unclaimed", "creating", event="create"), at(0)).status
    again = settle(M, s1, outcome("creating", "creating", event="create"), at(40))
    assert again.status["stateSince"] == stamp(0)
    assert len(again.status["history"]) == len(s1["history"]) == 1
    assert [e for e in again.events if e[1] == "Create"] == []


def test_settle_keeps_keys_it_does_not_own_and_drops_stale_owned_ones() -> None:
    old = {"state": "ready", "custom": {"kept": True}, "phase": "Bogus", "failure": {"x": 1}}
    s = settle(M, old, outcome("ready", None, observation=Observation(exists=True)),
               at(0)).status
    assert s["custom"] == {"kept": True}
    assert s["phase"] != "Bogus" and "failure" not in s
    assert set(s) - {"custom"} <= ENGINE_KEYS


def test_operation_since_survives_a_detour_through_failed() -> None:
    from lifecycle.core.errors import ExternalError
    s1 = settle(M, {}, outcome("unclaimed", "creating", event="create"), at(0)).status
    assert s1["operationSince"] == stamp(0)
    fail = M.table().fire("creating", "fail", lambda _n: True)
    error = ExternalError("down")
    d = Decision("creating", Choice("fail", "ExternalError", "down"), fail, error, "create")
    s2 = settle(M, s1, Outcome(Facts("creating", error=error), d, fail), at(100)).status
    assert (s2["state"], s2["operationSince"], s2["stateSince"]) == (
        "failed", stamp(0), stamp(100))
    s3 = settle(M, s2, outcome("failed", "creating", event="create"), at(200)).status
    assert (s3["state"], s3["operationSince"], s3["stateSince"]) == (
        "creating", stamp(0), stamp(200))
    s4 = settle(M, s3, outcome("creating", "ready", event="available"), at(300)).status
    assert "operationSince" not in s4


# ----------------------------------------------------------------- stuck
def test_stuck_turns_true_past_the_limit_and_false_once_recorded() -> None:
    since = stamp(0)
    limit = M.timing.max_in_state["creating"]
    assert stuck(M, "creating", since, [], 1, at(limit)) is None, "not past the limit yet"
    held = stuck(M, "creating", since, [], 1, at(limit + 1))
    assert held is not None and held.status is T
    assert held.reason == "StuckInCreating"
    assert held.message == f"in creating for {int(limit + 1)}s, longer than {int(limit)}s"
    recorded = [held.to_dict()]
    cleared = stuck(M, "ready", since, recorded, 2, at(limit + 50))
    assert cleared is not None and (cleared.status, cleared.reason, cleared.observed_generation
                                    ) == (F, "NotStuck", 2)
    assert stuck(M, "creating", "not a time", [], 1, at(10**6)) is None


# ---------------------------------------------------------- small helpers
def test_valid_timestamp() -> None:
    assert valid_timestamp(stamp(0)) == stamp(0)
    assert valid_timestamp("2026-01-01T00:00:00+00:00") == "2026-01-01T00:00:00+00:00"
    for bad in (None, 5, "", "soon", "2026-13-01T00:00:00Z"):
        assert valid_timestamp(bad) is None


def test_kept_history_drops_malformed_entries() -> None:
    good = {"from": "a", "to": "b", "event": "e", "reason": "r", "time": stamp(0)}
    stored = [good, {**good, "extra": 1}, {**good, "to": 5}, "junk", {"from": "a"}]
    assert kept_history(stored) == [good, good]
    assert kept_history("not a list") == [] and kept_history(None) == []


def test_paused_sets_synced_false_and_ready_unknown_only_for_a_new_generation() -> None:
    base = settle(M, {}, outcome("creating", "ready", event="available"), at(0)).status
    same = paused(base, "ready", 1, "paused by annotation", at(10))
    entries = by_type(same["conditions"])
    assert (entries["Synced"]["status"], entries["Synced"]["reason"]) == ("False",
                                                                          "ReconcilePaused")
    assert entries["Synced"]["lastTransitionTime"] == stamp(10)
    assert entries["Ready"]["status"] == "True", "this generation was observed: Ready kept"
    assert same["state"] == "ready" and same["observedGeneration"] == 1
    newer = paused(base, "ready", 2, "paused by annotation", at(20))
    ready = by_type(newer["conditions"])["Ready"]
    assert (ready["status"], ready["reason"], ready["lastTransitionTime"]) == (
        "Unknown", "ReconcilePaused", stamp(20))
    assert newer["phase"] == "Progressing"


# ------------------------------------------------- Ready and Synced in settle
from lifecycle.core.decide import ReconcilePolicy, decide  # noqa: E402
from lifecycle.core.errors import ExternalError  # noqa: E402
from lifecycle.core.status import STALE, held_ready, unreachable_since  # noqa: E402


def conditions_of(status: dict[str, Any]) -> dict[str, tuple[str, str, str, int]]:
    """type -> (status, reason, message, observedGeneration)."""
    return {c["type"]: (c["status"], c["reason"], c["message"], c["observedGeneration"])
            for c in status["conditions"]}


def pass_of(old: dict[str, Any], facts: Facts, seconds: float) -> dict[str, Any]:
    d = decide(M, facts)
    return settle(M, old, Outcome(facts, d, d.transition), at(seconds)).status


def ready_status(generation: int = 1) -> dict[str, Any]:
    created = pass_of({}, Facts("unclaimed", observation=Observation.absent(),
                                generation=generation), 0)
    return pass_of(created, Facts("creating", observation=Observation(exists=True),
                                  generation=generation), 10)


def test_synced_reports_success_skip_and_error_with_message_and_generation() -> None:
    ok = ready_status(generation=2)
    assert conditions_of(ok)["Synced"] == ("True", "ReconcileSuccess", "", 2)
    assert conditions_of(ok)["Ready"] == ("True", "Available", "", 2)
    skipped = pass_of(ok, Facts("ready", observation=Observation(exists=True),
                                policy=ReconcilePolicy.SKIP, generation=2), 20)
    assert conditions_of(skipped)["Synced"] == ("True", "ReconcileSkipped", "", 2)
    drifted = pass_of(ok, Facts("ready", observation=Observation(exists=True, up_to_date=False),
                                policy=ReconcilePolicy.SKIP, generation=2), 30)
    assert conditions_of(drifted)["Synced"][:2] == ("True", "ReconcileSkipped")
    assert "forbids updating" in conditions_of(drifted)["Synced"][2]
    failing = pass_of({}, Facts("creating", error=ExternalError("quota"), generation=2), 40)
    assert conditions_of(failing)["Synced"] == ("False", "ReconcileError", "quota", 2)
    assert conditions_of(failing)["Ready"][2] == "quota", "the error is Ready's message"


def test_ready_carries_the_choice_message_only_when_a_transition_is_taken() -> None:
    created = pass_of({}, Facts("unclaimed", observation=Observation.absent()), 0)
    assert conditions_of(created)["Ready"][2] == "creating the external resource"
    waiting = pass_of(created, Facts("creating", observation=Observation(
        exists=True, status=ProviderStatus.PENDING, message="provisioning")), 5)
    assert waiting["state"] == "creating"
    assert conditions_of(waiting)["Ready"][2] == "provisioning"
    skipped = pass_of({}, Facts("unclaimed", observation=Observation.absent(),
                                policy=ReconcilePolicy.SKIP), 0)
    assert skipped["state"] == "unclaimed"
    assert conditions_of(skipped)["Ready"][2] == "", "no transition: no message"


def test_a_new_generation_that_cannot_be_observed_is_unknown_until_observed() -> None:
    ok = ready_status(generation=1)
    err = ExternalError("unreachable")
    unseen = pass_of(ok, Facts("ready", error=err, generation=2), 20)
    assert conditions_of(unseen)["Ready"] == ("Unknown", "GenerationNotObserved",
                                              "unreachable", 2)
    # Same generation now, but still never observed: it stays Unknown.
    again = pass_of(unseen, Facts("ready", error=err, generation=2), 30)
    assert conditions_of(again)["Ready"][:2] == ("Unknown", "GenerationNotObserved")
    seen = pass_of(again, Facts("ready", observation=Observation(exists=True), generation=2), 40)
    assert conditions_of(seen)["Ready"] == ("True", "Available", "", 2)


def test_a_held_pass_keeps_ready_and_unsyncs_naming_the_operation() -> None:
    ok = ready_status(generation=3)
    held = pass_of(ok, Facts("ready", error=ExternalError("timeout"), generation=3), 20)
    assert held["state"] == "ready"
    assert conditions_of(held)["Ready"] == ("True", "Available", "", 3)
    assert conditions_of(held)["Synced"] == (
        "False", "ReconcileError", "observe failed (ExternalError): timeout", 3)
    assert held["operationSince"] == stamp(20)
    grace = M.timing.grace()
    later = pass_of(held, Facts("ready", error=ExternalError("timeout"), generation=3),
                    20 + grace + 1)
    assert later["operationSince"] == stamp(20), "counted from the first failing pass"
    assert conditions_of(later)["Ready"] == (
        "Unknown", STALE, f"the external resource has not been observed for longer than "
        f"{int(grace)}s: timeout", 3)


def test_held_ready_within_and_past_the_grace() -> None:
    stored = [Condition("Ready", F, "Creating", "old", 1).to_dict()]
    kept = held_ready(stored, ("True", "Available"), "m", 4, at(50), stamp(0), 60.0)
    assert (kept.status, kept.reason, kept.message, kept.observed_generation) == (
        F, "Creating", "old", 4)
    declared = held_ready([], ("True", "Available"), "m", 4, at(50), stamp(0), 60.0)
    assert (declared.status, declared.reason, declared.message) == (T, "Available", "")
    edge = held_ready(stored, ("True", "Available"), "m", 4, at(60), stamp(0), 60.0)
    assert edge.status is F, "exactly at the grace: still kept"
    stale = held_ready(stored, ("True", "Available"), "m", 4, at(61), stamp(0), 60.0)
    assert (stale.status, stale.reason, stale.observed_generation) == (U, STALE, 4)
    assert stale.message.endswith("longer than 60s: m")
    corrupt = held_ready(stored, ("True", "Available"), "m", 4, at(10**6), "bad", 60.0)
    assert corrupt.status is F, "an unreadable start counts as just begun"


def test_unreachable_since_continues_only_a_failing_synced() -> None:
    failing = [Condition("Synced", F, "ReconcileError").to_dict()]
    assert unreachable_since({"operationSince": stamp(5)}, failing, stamp(9)) == stamp(5)
    assert unreachable_since({"operationSince": "junk"}, failing, stamp(9)) == stamp(9)
    assert unreachable_since({}, failing, stamp(9)) == stamp(9)
    for other in (Condition("Synced", T, "ReconcileSuccess"),
                  Condition("Synced", F, "ReconcilePaused")):
        assert unreachable_since({"operationSince": stamp(5)}, [other.to_dict()],
                                 stamp(9)) == stamp(9)
    assert unreachable_since({"operationSince": stamp(5)}, [], stamp(9)) == stamp(9)


def test_paused_keeps_everything_else_and_is_terminating_when_deleting() -> None:
    base = {**ready_status(), "custom": 1}
    p = paused(base, "ready", 1, "paused", at(99), deleting=True)
    assert p["phase"] == "Terminating" and p["custom"] == 1
    assert conditions_of(p)["Synced"] == ("False", "ReconcilePaused", "paused", 1)
    assert paused(base, "ready", 1, "paused", at(99))["phase"] == "Progressing"


@pytest.mark.parametrize(("field", "bad", "repaired"), [
    ("type", 5, None),                 # not a string: dropped
    ("type", "", None),                # empty: dropped
    ("status", "Maybe", "Unknown"),
    ("status", True, "True"),          # read as its text
    ("reason", 7, "7"),
    ("message", None, "None"),
    ("observedGeneration", "3", 0),
    ("observedGeneration", 2.0, 0),
    ("lastTransitionTime", 0, "0"),
])
def test_a_stored_entry_in_the_api_field_order_is_still_checked_field_by_field(
        field: str, bad: Any, repaired: Any) -> None:
    """Entries exactly as the API returns them take a shortcut; a bad field must not."""
    good = Condition("Ready", T, "Available", "m", 1, stamp(0)).to_dict()
    stored = [{**good, field: bad}]
    assert tuple(stored[0]) == tuple(good), "same keys in the same order"
    merged = cond.merge(stored, [], stamp(9))
    if repaired is None:
        assert merged == []
    else:
        assert merged == [{**good, field: repaired}]
    assert cond.merge([good], [], stamp(9)) == [good]


# ------------------------------------------------ events, notes and kept fields
def settled_pass(old: dict[str, Any], facts: Facts, seconds: float) -> Any:
    d = decide(M, facts)
    return settle(M, old, Outcome(facts, d, d.transition), at(seconds))


def test_transition_events_name_the_event_and_carry_the_detail() -> None:
    created = settled_pass({}, Facts("unclaimed", observation=Observation.absent()), 0)
    assert created.events == (("Normal", "Create",
                               "unclaimed -> creating: creating the external resource"),)
    up = settled_pass(created.status, Facts("creating", observation=Observation(exists=True)), 5)
    assert up.events == (("Normal", "Available", "creating -> ready: Available"),)
    failed = settled_pass(created.status, Facts("creating", error=ExternalError("quota")), 9)
    assert failed.events == (("Warning", "Fail", "creating -> failed: quota"),)
    assert failed.status["history"][-1]["reason"] == "ExternalError"
    assert failed.status["failure"] == {"operation": "observe", "reason": "ExternalError",
                                        "severity": "Retryable", "generation": 1}


def test_the_failed_activity_condition_carries_the_error() -> None:
    created = settled_pass({}, Facts("unclaimed", observation=Observation.absent()), 0)
    failed = settled_pass(created.status, Facts("creating", error=ExternalError("quota")), 9)
    c = conditions_of(failed.status)
    assert c["Failed"] == ("True", "ExternalError", "quota", 1)
    assert c["Creating"] == ("False", "Unavailable", "", 1)
    back = settled_pass(failed.status, Facts("failed", observation=Observation.absent()), 20)
    c = conditions_of(back.status)
    assert c["Creating"] == ("True", "CreateRequested", "creating the external resource", 1)
    assert c["Failed"][:3] == ("False", "Creating", "")


def test_a_failure_without_an_operation_is_a_reconcile_failure() -> None:
    error = ExternalError("x")
    d = Decision("ready", Choice(None, "X"), None, error, None)
    s = settle(M, {}, Outcome(Facts("ready", error=error), d, None), at(0)).status
    assert s["failure"]["operation"] == "reconcile"


def test_notes_that_cleared_turn_valid() -> None:
    note = Condition("ConfigValid", F, "UnknownOperation", "bad", 1)
    facts = Facts("ready", observation=Observation(exists=True), generation=2)
    d = decide(M, facts)
    noted = settle(M, ready_status(), Outcome(facts, d, d.transition, notes=(note,)), at(1))
    assert conditions_of(noted.status)["ConfigValid"] == ("False", "UnknownOperation", "bad", 1)
    cleared = settle(M, noted.status, Outcome(facts, d, d.transition), at(2)).status
    assert conditions_of(cleared)["ConfigValid"] == ("True", "Valid", "", 2)
    assert "StatusValid" not in conditions_of(cleared), "never recorded: not added"


def test_stuck_raises_one_warning_event_and_clears_to_not_stuck() -> None:
    limit = M.timing.max_in_state["creating"]
    created = settled_pass({}, Facts("unclaimed", observation=Observation.absent()), 0)
    pending = Observation(exists=True, status=ProviderStatus.PENDING)
    late = settled_pass(created.status, Facts("creating", observation=pending), limit + 10)
    stuck_events = [e for e in late.events if e[1] == "Stuck"]
    assert stuck_events == [("Warning", "Stuck",
                             f"in creating for {int(limit + 10)}s, longer than {int(limit)}s")]
    assert conditions_of(late.status)["Stuck"][:2] == ("True", "StuckInCreating")
    later = settled_pass(late.status, Facts("creating", observation=pending), limit + 20)
    assert [e for e in later.events if e[1] == "Stuck"] == [], "warned once"
    done = settled_pass(later.status, Facts("creating", observation=Observation(exists=True)),
                        limit + 30)
    assert conditions_of(done.status)["Stuck"] == ("False", "NotStuck", "", 1)


def test_external_name_and_at_provider_are_kept_when_not_reported_again() -> None:
    old = {**ready_status(), "externalName": "db-1", "atProvider": {"endpoint": "h:5432"}}
    s = settled_pass(old, Facts("ready", observation=Observation(exists=True)), 30).status
    assert (s["externalName"], s["atProvider"]) == ("db-1", {"endpoint": "h:5432"})
    fresh = settled_pass(old, Facts("ready", observation=Observation(
        exists=True, observed={"endpoint": "new:1"})), 40).status
    assert fresh["atProvider"] == {"endpoint": "new:1"}


def test_paused_for_a_new_generation_records_it() -> None:
    p = paused(ready_status(), "ready", 2, "paused", at(5))
    assert conditions_of(p)["Ready"] == ("Unknown", "ReconcilePaused", "paused", 2)
    assert (p["observedGeneration"], p["state"]) == (2, "ready")


def test_an_action_that_fails_reports_its_error_not_the_choice() -> None:
    """The create call fails after the create event was chosen: the fail edge is taken
    and every report names the error, not the choice."""
    from lifecycle.core.decide import fail_edge
    facts = Facts("unclaimed", observation=Observation.absent())
    chosen = decide(M, facts)
    failing = chosen.failing(ExternalError("quota exceeded"), "create")
    edge = fail_edge(M, "unclaimed", facts)
    assert edge is not None
    settled = settle(M, {}, Outcome(facts, failing, edge), at(0))
    c = conditions_of(settled.status)
    assert c["Failed"] == ("True", "ExternalError", "quota exceeded", 1)
    assert c["Ready"][2] == "quota exceeded"
    assert settled.status["history"][-1]["reason"] == "ExternalError"
    assert settled.events[-1] == ("Warning", "Fail", "unclaimed -> failed: quota exceeded")
    assert settled.status["failure"]["operation"] == "create"


def test_generation_not_observed_sticks_while_errors_go_on_outside_ready() -> None:
    old = {"state": "creating", "observedGeneration": 2, "stateSince": stamp(0),
           "conditions": [Condition("Ready", U, "GenerationNotObserved", "x", 2,
                                    stamp(0)).to_dict()]}
    s = pass_of(old, Facts("creating", error=ExternalError("down"), generation=2), 10)
    assert conditions_of(s)["Ready"][:2] == ("Unknown", "GenerationNotObserved")


def test_a_held_pass_without_a_stored_ready_reports_the_states_declared_ready() -> None:
    old = {"state": "ready", "observedGeneration": 4, "stateSince": stamp(0), "conditions": []}
    s = pass_of(old, Facts("ready", error=ExternalError("down"), generation=4), 10)
    assert conditions_of(s)["Ready"] == ("True", "Available", "", 4)


def test_stuck_counts_from_the_start_of_the_operation_across_a_detour() -> None:
    limit = M.timing.max_in_state["creating"]
    pending = Observation(exists=True, status=ProviderStatus.PENDING)
    s = pass_of({}, Facts("unclaimed", observation=Observation.absent(), generation=3), 0)
    s = pass_of(s, Facts("creating", error=ExternalError("blip"), generation=3), 100)
    s = pass_of(s, Facts("failed", observation=Observation.absent(), generation=3), 200)
    s = pass_of(s, Facts("creating", observation=pending, generation=3), 300)
    assert (s["operationSince"], s["stateSince"]) == (stamp(0), stamp(200))
    s = pass_of(s, Facts("creating", observation=pending, generation=3), limit + 50)
    assert s["stateSince"] == stamp(200)
    assert conditions_of(s)["Stuck"] == (
        "True", "StuckInCreating", f"in creating for {int(limit + 50)}s, longer than "
        f"{int(limit)}s", 3)


def test_paused_writes_the_state_it_is_given() -> None:
    p = paused({"state": "creating"}, "ready", 1, "paused", at(0))
    assert p["state"] == "ready"
