"""The standard machine's vocabulary (lifecycle.core.vocabulary): one place for the names
the event choice, the status writer and the standard machine share."""

from __future__ import annotations

import ast
from pathlib import Path

import attrs
import pytest
from statemachine import State

from lifecycle.core.decide import Facts, choose_event
from lifecycle.core.errors import MachineDefinitionError
from lifecycle.core.kind import Kind
from lifecycle.core.machine import LifecycleMachine
from lifecycle.core.values import Observation, ProviderStatus
from lifecycle.core.vocabulary import ConditionTypes, Events, Reasons, States
from lifecycle.machines.claim import ClaimMachine
from lifecycle.machines.managed import ManagedResourceMachine

ROOT = Path(__file__).resolve().parents[1]


@attrs.frozen
class Params:
    """A parameters class with nothing in it."""


def kind(machine: object) -> Kind:
    return Kind(group="v.example.org", version="v1", kind="Thing", plural="things",
                machine=machine, parameters=Params)  # type: ignore[arg-type]


def test_the_standard_machine_declares_exactly_the_vocabulary() -> None:
    table = ManagedResourceMachine.table()
    assert set(table.states) == States.MANAGED
    assert set(table.events) == set(Events.MANAGED)
    assert len(set(Events.MANAGED)) == len(Events.MANAGED)
    assert set(ManagedResourceMachine.ready_condition) == States.MANAGED
    assert set(ManagedResourceMachine.activity_conditions.values()) <= ConditionTypes.ACTIVITY


class NoOrphan(LifecycleMachine):
    """The standard machine's events but orphan, which the event choice fires."""

    pending = State("Pending", initial=True)
    done = State("Done", final=True)

    create = pending.to.itself()
    update = pending.to.itself()
    wait = pending.to.itself()
    available = pending.to.itself()
    fail = pending.to.itself()
    delete = pending.to.itself()
    gone = pending.to(done)


def test_a_kind_whose_machine_lacks_an_event_the_engine_fires_is_refused() -> None:
    with pytest.raises(MachineDefinitionError, match=r"NoOrphan declares no orphan event;"):
        kind(NoOrphan)


def test_every_missing_event_is_named() -> None:
    class Tiny(LifecycleMachine):
        start = State("Start", initial=True)
        end = State("End", final=True)
        gone = start.to(end)

    with pytest.raises(MachineDefinitionError) as refused:
        kind(Tiny)
    message = str(refused.value)
    assert "declares no create, update, wait, available, fail, delete, orphan events" in message
    assert "gone," not in message.split("declares no")[1].split(";")[0]


def test_a_claim_machine_and_the_standard_one_are_accepted() -> None:
    assert kind(ClaimMachine).machine is ClaimMachine
    assert kind(ManagedResourceMachine).machine is ManagedResourceMachine


def test_a_machine_that_is_not_a_lifecycle_machine_is_refused() -> None:
    with pytest.raises(MachineDefinitionError, match="must be a LifecycleMachine subclass"):
        kind(object)


def facts(**changes: object) -> Facts:
    base: dict[str, object] = {"state": States.READY, "deleting": False, "observation":
                               Observation(exists=True, up_to_date=True,
                                           status=ProviderStatus.AVAILABLE)}
    return Facts(**{**base, **changes})  # type: ignore[arg-type]


@pytest.mark.parametrize("changes", [
    {},
    {"observation": Observation.absent()},
    {"observation": Observation(exists=True, up_to_date=False,
                                status=ProviderStatus.AVAILABLE)},
    {"observation": Observation(exists=True, up_to_date=True, status=ProviderStatus.PENDING)},
    {"observation": Observation(exists=True, up_to_date=True, status=ProviderStatus.FAILED)},
    {"deleting": True},
    {"deleting": True, "observation": Observation.absent()},
])
def test_the_event_choice_fires_only_vocabulary_events(changes: dict[str, object]) -> None:
    choice = choose_event(facts(**changes))
    assert choice.event in Events.MANAGED


#: Condition types and reasons that only the vocabulary spells out.
SPELLED_ONCE = {ConditionTypes.CONFIG_VALID, ConditionTypes.STATUS_VALID, ConditionTypes.STUCK,
                ConditionTypes.SYNCED, Reasons.RECONCILE_ERROR, Reasons.RECONCILE_SUCCESS}


def literals(source: str) -> set[str]:
    """Every string constant in ``source`` (docstrings and f-string parts included)."""
    return {node.value for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Constant) and isinstance(node.value, str)}


def test_no_module_spells_the_vocabulary_itself() -> None:
    spelled = {}
    for folder in ("lifecycle", "machines", "providers"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path.name == "vocabulary.py" and path.parent.name == "core":
                continue
            found = literals(path.read_text()) & SPELLED_ONCE
            if found:
                spelled[str(path.relative_to(ROOT))] = sorted(found)
    assert spelled == {}


def test_the_spelling_check_catches_a_literal() -> None:
    assert literals('x = cond.get(c, "Stuck")\n') & SPELLED_ONCE == {"Stuck"}
    assert literals("x = cond.get(c, ConditionTypes.STUCK)\n") & SPELLED_ONCE == set()
