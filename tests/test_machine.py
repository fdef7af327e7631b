"""Machine declaration, validation at class definition, and the compiled table."""

from __future__ import annotations

import attrs
import pytest
from statemachine import State

from lifecycle.core.decide import Facts
from lifecycle.core.errors import MachineDefinitionError
from lifecycle.core.machine import LifecycleMachine, MachineTable, Timing, compile_table, validate
from lifecycle.machines.managed import ManagedResourceMachine

STANDARD = ManagedResourceMachine.table()
NON_FINAL = ["unclaimed", "creating", "ready", "updating", "deleting", "failed"]


def test_standard_machine_states_and_initial() -> None:
    assert list(STANDARD.states) == [*NON_FINAL, "deleted"]
    assert STANDARD.initial == "unclaimed"
    assert STANDARD.finals == ("deleted",)


@pytest.mark.parametrize("state", NON_FINAL)
def test_deletion_preempts_every_state(state: str) -> None:
    targets = {t.target for t in STANDARD.candidates(state, "delete")}
    assert targets == {"deleting"}
    assert {t.target for t in STANDARD.candidates(state, "orphan")} == {"deleted"}


def test_deleting_is_terminal() -> None:
    leaving = {t.target for t in STANDARD.transitions if t.source == "deleting"}
    assert leaving <= {"deleting", "deleted", "failed"}
    # Failed reached from Deleting can only go on deleting: the reconciler never
    # chooses create/update/available while the deletion timestamp is set.


@pytest.mark.parametrize(
    ("failed_operation", "target"),
    [("update", "updating"), ("create", "creating"), (None, "creating")],
)
def test_failed_remembers_operation_when_waiting(failed_operation: str | None, target: str) -> None:
    host = ManagedResourceMachine.guard_host()
    facts = Facts(state="failed", failed_operation=failed_operation)
    chosen = STANDARD.fire("failed", "wait", lambda g: getattr(host, g)(facts))
    assert chosen is not None and chosen.target == target


def test_vanished_while_ready_is_recreated() -> None:
    chosen = STANDARD.fire("ready", "create", lambda g: True)
    assert chosen is not None
    assert chosen.target == "creating"
    assert chosen.actions == ("create_external",)


def test_event_not_allowed_returns_none() -> None:
    assert STANDARD.fire("deleted", "create", lambda g: True) is None
    assert STANDARD.fire("ready", "no-such-event", lambda g: True) is None


def test_table_is_immutable() -> None:
    with pytest.raises(TypeError):
        STANDARD.states["x"] = None  # type: ignore[index]
    with pytest.raises(AttributeError):
        STANDARD.initial = "ready"  # type: ignore[misc]


def test_declared_class_still_runs_as_python_statemachine() -> None:
    machine = ManagedResourceMachine()

    class Recorder:
        calls: list[str] = []

        def create(self) -> None:
            self.calls.append("create")

    machine.send("create", effects=Recorder(), facts=Facts(state="unclaimed"))
    assert machine.configuration_values == {"creating"} or machine.current_state_value == "creating"
    assert Recorder.calls == ["create"]


def test_subclass_adds_state_and_base_table_is_untouched() -> None:
    class Suspendable(ManagedResourceMachine):
        suspended = State("Suspended")
        suspend = ManagedResourceMachine.ready.to(suspended)
        resume = suspended.to(ManagedResourceMachine.ready)
        retire = suspended.to(ManagedResourceMachine.deleting, on="delete_external")
        timing = Timing(poll=5.0, wait={"creating": 1.0})

    table = Suspendable.table()
    assert "suspended" in table.states
    assert table.fire("ready", "suspend", lambda g: True).target == "suspended"
    assert table.states["suspended"].ready == ("False", "Suspended")
    assert Suspendable.timing.poll == 5.0
    # The base class keeps its own compiled table.
    assert "suspended" not in ManagedResourceMachine.table().states
    assert ManagedResourceMachine.table().candidates("ready", "suspend") == ()
    assert compile_table(ManagedResourceMachine).candidates("ready", "suspend") == ()


def test_refuses_two_initial_states() -> None:
    with pytest.raises(MachineDefinitionError, match="initial"):

        class TwoInitial(LifecycleMachine):
            a = State(initial=True)
            b = State(initial=True)
            done = State(final=True)
            go = a.to(done) | b.to(done)


def test_refuses_unreachable_state() -> None:
    with pytest.raises(MachineDefinitionError, match=r"[Uu]nreachable|reached"):

        class Unreachable(LifecycleMachine):
            a = State(initial=True)
            island = State()
            done = State(final=True)
            go = a.to(done)
            stay = island.to(done)


def test_refuses_trap_state_without_outgoing_transition() -> None:
    with pytest.raises(MachineDefinitionError, match="outgoing"):

        class Trap(LifecycleMachine):
            a = State(initial=True)
            trap = State()
            done = State(final=True)
            go = a.to(trap) | a.to(done)


def test_refuses_loop_with_no_path_to_deleted() -> None:
    with pytest.raises(MachineDefinitionError, match=r"final state.*\['loop_a', 'loop_b'\]"):

        class Loop(LifecycleMachine):
            start = State(initial=True)
            loop_a = State()
            loop_b = State()
            done = State(final=True)
            go = start.to(loop_a) | start.to(done)
            spin = loop_a.to(loop_b) | loop_b.to(loop_a)


def test_refuses_machine_without_final_state() -> None:
    with pytest.raises(MachineDefinitionError):

        class NoFinal(LifecycleMachine):
            a = State(initial=True)
            b = State()
            go = a.to(b) | b.to(a)


def test_refuses_boolean_expression_guard() -> None:
    with pytest.raises(MachineDefinitionError, match="guard"):

        class ExprGuard(LifecycleMachine):
            a = State(initial=True)
            done = State(final=True)
            go = a.to(done, cond="x and y")

            def x(self, facts: Facts) -> bool:
                return True

            def y(self, facts: Facts) -> bool:
                return True


def test_timing_wait_lookup() -> None:
    timing = Timing(default_wait=7.0, wait={"creating": 3.0})
    assert timing.wait_for("creating") == 3.0
    assert timing.wait_for("provisioning") == 7.0


def _table(transitions: list[tuple[str, str, str]], finals: set[str]) -> MachineTable:
    from types import MappingProxyType

    from lifecycle.core.machine import StateSpec, TransitionSpec

    names = sorted({s for t in transitions for s in (t[0], t[2])} | finals)
    states = {n: StateSpec(n, n, n == "start", n in finals, ("False", n), None) for n in names}
    specs = tuple(TransitionSpec(a, e, b) for a, e, b in transitions)
    index: dict = {}
    for t in specs:
        index[(t.source, t.event)] = (*index.get((t.source, t.event), ()), t)
    return MachineTable(
        "Hand", MappingProxyType(states), "start", (), specs, MappingProxyType(index)
    )


@pytest.mark.parametrize(
    ("transitions", "finals", "message"),
    [
        (
            [
                ("start", "go", "a"),
                ("a", "spin", "b"),
                ("b", "spin", "a"),
                ("start", "end", "done"),
            ],
            {"done"},
            r"no path from \['a', 'b'\]",
        ),
        ([("start", "go", "done"), ("island", "go", "done")], {"done"}, r"cannot be reached"),
        ([("start", "go", "done"), ("done", "again", "start")], {"done"}, r"have transitions"),
        ([("start", "go", "a"), ("a", "back", "start")], set(), r"needs a final state"),
    ],
)
def test_validate_catches_broken_tables(transitions, finals, message) -> None:
    with pytest.raises(MachineDefinitionError, match=message):
        validate(_table(transitions, finals))


def test_validate_accepts_the_standard_table() -> None:
    assert validate(STANDARD) is None
    # Not because it accepts anything: the same table without the edges into updating
    # is refused.
    cut = attrs.evolve(STANDARD, transitions=tuple(
        t for t in STANDARD.transitions if t.target != "updating"))
    with pytest.raises(MachineDefinitionError, match=(
            r"^ManagedResourceMachine: states \['updating'\] cannot be reached "
            r"from 'unclaimed'$")):
        validate(cut)


def test_sibling_subclass_events_do_not_leak() -> None:
    class WithSuspend(ManagedResourceMachine):
        paused = State("Paused")
        hold = ManagedResourceMachine.ready.to(paused)
        release = paused.to(ManagedResourceMachine.ready)
        drop = paused.to(ManagedResourceMachine.deleting, on="delete_external")

    class Sibling(ManagedResourceMachine):
        pass

    assert "hold" in WithSuspend.table().events
    assert "hold" not in Sibling.table().events
    assert "hold" not in ManagedResourceMachine.table().events
