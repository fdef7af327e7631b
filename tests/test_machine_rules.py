"""A machine's compiled table, its timing, and the pure plan of one pass: exact figures."""

from __future__ import annotations

from datetime import UTC, datetime

import attrs
import pytest
from statemachine import State

from lifecycle.core.decide import Choice, Decision, Facts, ReconcilePolicy, decide, gate, requeue
from lifecycle.core.errors import ExternalError, MachineDefinitionError, TerminalError
from lifecycle.core.kind import FINALIZER, OPERATION, OWNER, PAUSED
from lifecycle.core.machine import (
    LifecycleMachine,
    MachineTable,
    StateSpec,
    Timing,
    TransitionSpec,
    camel,
    compile_table,
    validate,
)
from lifecycle.core.plan import (
    OBSERVATIONS,
    PAUSED_MESSAGE,
    Plan,
    after_create,
    conclude,
    created,
    describe,
    gather,
    plan,
)
from lifecycle.core.status import Settled
from lifecycle.core.values import Observation, ProviderStatus, Result, ResultKind
from lifecycle.machines.managed import ManagedResourceMachine as M


def test_timing_defaults_grace_and_waits() -> None:
    timing = Timing()
    assert (timing.poll, timing.jitter, timing.default_wait, timing.ready_grace) == (
        60.0, 0.1, 5.0, None)
    assert dict(timing.wait) == {"creating": 5.0, "updating": 5.0, "deleting": 2.0}
    assert dict(timing.max_in_state) == {"creating": 1800.0, "updating": 1800.0,
                                         "deleting": 1800.0}
    assert timing.grace() == 180.0
    assert Timing(poll=10.0).grace() == 30.0
    assert Timing(poll=10.0, ready_grace=7.0).grace() == 7.0
    assert Timing(ready_grace=0.0).grace() == 0.0
    assert Timing(default_wait=9.0).wait_for("ready") == 9.0
    assert Timing().wait_for("deleting") == 2.0


def test_camel() -> None:
    assert camel("stuck_in") == "StuckIn"
    assert camel("ready") == "Ready"
    assert camel("a_b_c") == "ABC"


# --------------------------------------------------------------------------- the compiled table


def test_the_compiled_table_keeps_names_conditions_docs_and_actions() -> None:
    table = compile_table(M)
    assert table.name == "ManagedResourceMachine"
    assert table.initial == "unclaimed" and table.finals == ("deleted",)
    creating = table.states["creating"]
    assert (creating.name, creating.ready, creating.activity) == (
        "Creating", ("False", "Creating"), "Creating")
    assert creating.doc == "external create requested, not yet usable"
    assert table.states["ready"].activity is None
    assert table.states["deleted"].doc.startswith("external resource gone")
    update = table.candidates("ready", "update")
    assert [(t.target, t.actions) for t in update] == [("updating", ("update_external",))]
    assert table.candidates("ready", "available")[0].actions == ()


def documented() -> type[LifecycleMachine]:
    """A fresh machine class, defined (and so compiled) while the calling test runs."""

    class Documented(LifecycleMachine):
        """A machine with an undocumented state, a negated guard and a state without conditions."""

        ready_condition = {"start": ("Unknown", "Starting")}
        state_docs = {"start": "first"}
        start = State(initial=True)
        middle = State()
        done = State(final=True)
        go = start.to(middle, unless="blocked", on="act") | start.to(done, cond="allowed")
        finish = middle.to(done)

        def blocked(self, facts: object) -> bool:
            """Never blocked."""
            return False

        def allowed(self, facts: object) -> bool:
            """Always allowed."""
            return True

        def act(self, effects: object) -> None:
            """Does nothing."""

    return Documented


def test_guards_unless_and_defaults_compile_as_declared() -> None:
    table = documented().table()
    first, second = table.candidates("start", "go")
    assert (first.target, first.guards, first.unless, first.actions) == (
        "middle", (), ("blocked",), ("act",))
    assert (second.target, second.guards, second.unless, second.actions) == (
        "done", ("allowed",), (), ())
    middle = table.states["middle"]
    assert (middle.name, middle.ready, middle.activity, middle.doc) == (
        "Middle", ("False", "Middle"), None, "")
    assert table.states["start"].ready == ("Unknown", "Starting")
    assert table.states["start"].doc == "first"
    # ``unless`` is honoured by ``fire``: a blocking guard skips to the next candidate.
    assert table.fire("start", "go", lambda name: name in ("blocked", "allowed")).target == "done"
    assert table.fire("start", "go", lambda name: False).target == "middle"


def _refusal(build: object) -> str:
    with pytest.raises(MachineDefinitionError) as caught:
        build()  # type: ignore[operator]
    return str(caught.value)


def test_a_guard_that_is_not_a_method_name_is_refused_with_its_name() -> None:
    def expression() -> None:
        class Expr(LifecycleMachine):
            a = State(initial=True)
            done = State(final=True)
            go = a.to(done, cond="x and y")

            def x(self, facts: object) -> bool:
                return True

            def y(self, facts: object) -> bool:
                return True

    def attribute() -> None:
        class Attribute(LifecycleMachine):
            a = State(initial=True)
            done = State(final=True)
            go = a.to(done, cond="flag")
            flag = True

    def missing() -> None:
        class Missing(LifecycleMachine):
            a = State(initial=True)
            done = State(final=True)
            go = a.to(done, cond="nowhere")

    assert _refusal(missing) == "Missing: guard 'nowhere' is not a method"
    expected = ("guard 'x and y' must be the name of a method taking (self, facts); "
                "boolean expressions and callables are not supported")
    assert _refusal(expression) == f"Expr: {expected}"
    assert _refusal(attribute) == "Attribute: guard 'flag' is not a method"


def test_validate_messages_name_the_machine_and_the_states() -> None:
    def table(transitions: list[tuple[str, str]], initials: set[str], finals: set[str],
              states: tuple[str, ...] = ("a", "b", "done")) -> MachineTable:
        specs = {s: StateSpec(s, s, s in initials, s in finals, ("False", s), None)
                 for s in states}
        ts = tuple(TransitionSpec(src, "go", dst) for src, dst in transitions)
        return MachineTable("T", specs, "a", ("go",), ts, {})

    def message(t: MachineTable) -> str:
        return _refusal(lambda: validate(t))

    assert message(table([("a", "done")], {"a", "b"}, {"done"})) == (
        "T: needs exactly one initial state, has ['a', 'b']")
    assert message(table([("a", "done")], set(), {"done"})) == (
        "T: needs exactly one initial state, has []")
    assert message(table([("a", "done")], {"a"}, set())) == (
        "T: needs a final state (such as 'deleted')")
    assert message(table([("a", "done"), ("done", "a")], {"a"}, {"done"})) == (
        "T: final states ['done'] have transitions")
    assert message(table([("a", "done"), ("b", "done")], {"a"}, {"done"})) == (
        "T: states ['b'] cannot be reached from 'a'")
    assert message(table([("a", "b"), ("a", "done"), ("b", "b")], {"a"}, {"done"})) == (
        "T: no path from ['b'] to a final state ['done']; "
        "a resource entering them could never be deleted")
    validate(table([("a", "b"), ("b", "done")], {"a"}, {"done"}))


def test_a_machine_python_statemachine_refuses_is_refused_under_its_name() -> None:
    def no_transitions() -> None:
        class Empty(LifecycleMachine):
            a = State(initial=True)
            done = State(final=True)

    assert _refusal(no_transitions).startswith("Empty: ")


def test_a_class_without_states_has_no_table() -> None:
    assert _refusal(LifecycleMachine.table) == "LifecycleMachine declares no states"
    machine = documented()
    host = machine.guard_host()
    assert isinstance(host, machine) and machine.guard_host() is host


# --------------------------------------------------------------------------- the plan


NOW = datetime(2026, 1, 1, tzinfo=UTC)


def stored(state: str | None = "ready", *, generation: int = 2, finalizers: bool = True,
           deleting: bool = False, status: dict | None = None, **annotations: str) -> dict:
    """An object as read from the API."""
    meta: dict = {"name": "x", "uid": "u", "generation": generation,
                  "finalizers": [FINALIZER] if finalizers else [], "annotations": annotations}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    body = dict(status or {})
    if state is not None:
        body["state"] = state
    return {"metadata": meta, "status": body}


def test_a_stopped_pass_keeps_the_state_and_the_stop_message() -> None:
    p = plan(M, stored("creating", **{}), namespace_annotations={OWNER: "other"},
             operator_id="me", now=NOW)
    assert (p.source, p.target, p.transition) == ("creating", "creating", None)
    assert p.choice == Choice(None, "NotOwned", "namespace None is owned by operator 'other'; "
                                                "skipped")
    assert p.result == Result.done("NotOwned")
    assert p.settled.status == {"state": "creating"} and p.settled.events == ()


def test_a_held_pass_writes_the_paused_status_of_its_own_state_and_generation() -> None:
    p = plan(M, stored("creating", generation=3, deleting=True, **{PAUSED: "True"}), now=NOW)
    assert (p.source, p.target, p.transition) == ("creating", "creating", None)
    assert p.choice == Choice(None, "ReconcilePaused")
    assert p.result == Result.done("Paused")
    status = p.settled.status
    assert (status["state"], status["observedGeneration"], status["phase"]) == (
        "creating", 3, "Terminating")
    synced = {c["type"]: c for c in status["conditions"]}["Synced"]
    assert (synced["reason"], synced["message"], synced["observedGeneration"]) == (
        "ReconcilePaused", PAUSED_MESSAGE, 3)
    assert PAUSED_MESSAGE == "annotation lifecycle.dev/paused is 'true'"


@pytest.mark.parametrize(("obj", "options", "text"), [
    (stored(), {"observation": OBSERVATIONS["drifted"]},
     "state:      ready\n"
     "event:      update (UpdateRequested: external resource differs from spec)\n"
     "transition: ready -> updating (guards: none; actions: update_external)\n"
     "Ready:      False (Updating)\n"
     "Synced:     True (ReconcileSuccess)\n"
     "phase:      Progressing\n"
     "result:     requeue-after after 5s (Waiting)"),
    (stored("failed", status={"failure": {"operation": "update"}}),
     {"observation": OBSERVATIONS["pending"]},
     "state:      failed\n"
     "event:      wait (ProviderPending: provider operation pending)\n"
     "transition: failed -> updating (guards: failed_during_update; actions: none)\n"
     "Ready:      False (Updating)\n"
     "Synced:     True (ReconcileSuccess)\n"
     "phase:      Progressing\n"
     "result:     requeue-after after 5s (Waiting)"),
    (stored(**{PAUSED: "true"}), {},
     "state:      ready\n"
     "event:      none (ReconcilePaused)\n"
     "Ready:      Unknown (ReconcilePaused)\n"
     "Synced:     False (ReconcilePaused)\n"
     "phase:      Progressing\n"
     "result:     done (Paused)"),
    (stored(**{OPERATION: "ignore"}), {},
     "state:      ready\n"
     "event:      none (Ignored)\n"
     "phase:      -\n"
     "result:     done (Ignored)"),
    (stored(), {"error": ExternalError("down")},
     "state:      ready\n"
     "event:      none (ExternalError: down)\n"
     "Ready:      Unknown (GenerationNotObserved)\n"
     "Synced:     False (ReconcileError)\n"
     "phase:      Progressing\n"
     "result:     backoff (ExternalError)"),
])
def test_describe_is_exact(obj: dict, options: dict, text: str) -> None:
    assert describe(plan(M, obj, now=NOW, **options)) == text


def test_describe_prints_a_multi_action_transition_and_skips_malformed_conditions() -> None:
    transition = TransitionSpec("a", "go", "b", guards=("g1", "g2"), actions=("x", "y"))
    p = Plan("a", Choice("go", "Went", ""), transition,
             Settled({"conditions": ["junk", {"type": "Ready", "status": "True",
                                              "reason": "Available"}], "phase": "Ready"}),
             Result.later(1.5, "Poll"))
    assert describe(p) == ("state:      a\n"
                           "event:      go (Went)\n"
                           "transition: a -> b (guards: g1, g2; actions: x, y)\n"
                           "Ready:      True (Available)\n"
                           "phase:      Ready\n"
                           "result:     requeue-after after 1.5s (Poll)")
    assert p.target == "b"


def test_the_observations_the_plan_command_can_pretend() -> None:
    assert OBSERVATIONS["absent"] == Observation.absent()
    assert OBSERVATIONS["available"] == Observation(exists=True)
    assert OBSERVATIONS["drifted"] == Observation(exists=True, up_to_date=False)
    assert OBSERVATIONS["pending"] == Observation(
        exists=True, status=ProviderStatus.PENDING, message="provider operation pending")
    assert OBSERVATIONS["failed"] == Observation(
        exists=True, status=ProviderStatus.FAILED, message="provider reports the resource failed")


def test_plan_passes_the_operator_policy_the_notes_and_the_uid_to_the_pass() -> None:
    drifted = OBSERVATIONS["drifted"]
    assert plan(M, stored(), observation=drifted, now=NOW).choice.event == "update"
    skipped = plan(M, stored(), observation=drifted, policy=ReconcilePolicy.SKIP, now=NOW)
    assert skipped.choice.event != "update" and skipped.target == "ready"
    noted = plan(M, stored(**{OPERATION: "bogus"}), observation=drifted, now=NOW)
    config = {c["type"]: c for c in noted.settled.status["conditions"]}["ConfigValid"]
    assert (config["status"], config["reason"]) == ("False", "UnknownOperation")
    # The poll jitter is spread by the object's uid ("" when it has none).
    for uid in ("u", "another-uid", None):
        obj = stored()
        if uid is None:
            del obj["metadata"]["uid"]
        else:
            obj["metadata"]["uid"] = uid
        p = plan(M, obj, observation=OBSERVATIONS["available"], now=NOW)
        expected = requeue(state="ready", final=False, timing=M.timing, key=uid or "")
        assert p.result == expected


def _pass(obj: dict, observation: Observation) -> tuple[dict, Facts, Decision]:
    g = gate(M, obj, {})
    old = dict(obj["status"])
    facts = gather(g, old, observation=observation)
    return old, facts, decide(M, facts)


def test_a_failed_action_takes_the_fail_edge_unless_fallback_is_off() -> None:
    old, facts, decision = _pass(stored(), OBSERVATIONS["drifted"])
    assert decision.transition is not None and decision.transition.event == "update"
    failing = decision.failing(ExternalError("update refused"), "update")
    fell = conclude(M, old, facts, failing, now=NOW, key="u")
    assert fell.transition is not None
    assert (fell.transition.event, fell.target) == ("fail", "failed")
    assert fell.result.kind is ResultKind.BACKOFF
    kept = conclude(M, old, facts, failing, now=NOW, key="u", fallback=False)
    assert kept.transition is decision.transition and kept.target == "updating"
    # A pass without an error, or one that holds its state, never falls back.
    assert conclude(M, old, facts, decision, now=NOW, key="u").target == "updating"
    held = attrs.evolve(failing, transition=None, hold=True)
    assert conclude(M, old, facts, held, now=NOW, key="u").transition is None
    # A decided fail edge is kept as it is.
    fail = M.table().candidates("ready", "fail")[0]
    decided = attrs.evolve(failing, transition=fail)
    assert conclude(M, old, facts, decided, now=NOW, key="u").transition is fail
    # No external name is recorded unless one is given.
    assert "externalName" not in fell.settled.status
    named = conclude(M, old, facts, decision, now=NOW, key="u", external_name="db-1")
    assert named.settled.status["externalName"] == "db-1"


def test_the_reconcile_annotation_forces_an_update_of_an_up_to_date_resource() -> None:
    forced = plan(M, stored(**{OPERATION: "reconcile"}), observation=OBSERVATIONS["available"],
                  now=NOW)
    assert forced.choice == Choice("update", "ReconcileRequested",
                                   "the reconcile annotation asked for a full update")
    _, facts, _ = _pass(stored(**{OPERATION: "reconcile"}), OBSERVATIONS["available"])
    assert facts.forced is True
    assert plan(M, stored(), observation=OBSERVATIONS["available"], now=NOW).choice.event \
        == "available"


def test_a_namespace_owned_by_this_operator_is_reconciled() -> None:
    mine = plan(M, stored(), namespace_annotations={OWNER: "me"}, operator_id="me",
                observation=OBSERVATIONS["available"], now=NOW)
    assert mine.choice.event == "available"
    theirs = plan(M, stored(), namespace_annotations={OWNER: "me"}, operator_id="other",
                  observation=OBSERVATIONS["available"], now=NOW)
    assert theirs.choice.reason == "NotOwned"


def test_created_and_after_create_follow_only_a_create_that_moves_the_resource_on() -> None:
    obj = stored(None)
    _, facts, decision = _pass(obj, OBSERVATIONS["absent"])
    assert decision.choice.event == "create" and created(decision, facts)
    assert not created(decision.failing(ExternalError("x"), "create"), facts)
    assert not created(attrs.evolve(decision, transition=None), facts)
    assert not created(attrs.evolve(decision, choice=Choice("update", "U")), facts)
    plain = attrs.evolve(decision.transition, actions=())
    assert not created(attrs.evolve(decision, transition=plain), facts)
    assert not created(decision, attrs.evolve(facts, deleting=True))
    seen = OBSERVATIONS["available"]
    followed = after_create(M, facts, decision, seen)
    assert followed is not None
    after, following = followed
    assert after == attrs.evolve(facts, state="creating", observation=seen, error=None,
                                 failed_operation=None)
    assert following.choice == Choice("available", "Available", "")
    assert following.transition is not None
    assert (following.transition.source, following.transition.target) == ("creating", "ready")
    for name in ("absent", "drifted", "pending", "failed"):
        assert after_create(M, facts, decision, OBSERVATIONS[name]) is None, name
    assert after_create(M, facts, decision, {"exists": True}) is None
    assert after_create(M, facts, attrs.evolve(decision, transition=None), seen) is None
    errored = attrs.evolve(facts, error=ExternalError("stale"), failed_operation="observe")
    again = after_create(M, errored, decision, seen)
    assert again is not None and again[0].error is None and again[0].failed_operation is None


def test_an_orphaning_deletion_and_a_terminal_error_while_deleting() -> None:
    orphaned = stored(deleting=True)
    orphaned["spec"] = {"deletionPolicy": "Orphan"}
    p = plan(M, orphaned, observation=OBSERVATIONS["available"], now=NOW)
    assert (p.choice.event, p.target) == ("orphan", "deleted")
    # A terminal error while deleting backs off: a deletion cannot wait for a spec change.
    deleting = plan(M, stored("deleting", deleting=True), error=TerminalError("bad"), now=NOW)
    assert deleting.result.kind is ResultKind.BACKOFF
    assert plan(M, stored("creating"), error=TerminalError("bad"), now=NOW).result == \
        Result.done("TerminalError")


def test_an_error_with_no_transition_falls_back_to_the_fail_edge() -> None:
    old, facts, decision = _pass(stored(), OBSERVATIONS["drifted"])
    failing = attrs.evolve(decision.failing(ExternalError("x"), "update"), transition=None)
    fell = conclude(M, old, facts, failing, now=NOW, key="u")
    assert fell.transition is not None and fell.transition.event == "fail"
