"""The crash explorer on the forged-journal scenario (issue 28, item 1).

A tenant names an instance someone else created and forges the intent journal
(the report's entry with a made-up MAC, then an entry and MAC copied from its
own legitimate object). No crash point lets the engine take the instance
over; an engine that trusts the journal annotation as written is caught.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from lifecycle.core.kind import INTENT, INTENT_MAC
from lifecycle.core.seal import Subject
from lifecycle.core.values import Intent
from lifecycle.machines.database import DatabaseInstance
from lifecycle.providers.simcloud.scenarios.verify import FORGED_INTENT, forged_journal_target
from lifecycle.runtime.effects import stored_intent
from lifecycle.runtime.journalkey import Journal
from lifecycle.runtime.reconciler import Reconciler
from lifecycle.verify import explore, run_scenario


@attrs.frozen
class TrustingJournal(Journal):
    """A broken journal: the annotation is taken as written, MAC or not."""

    def read(self, annotations: Mapping[str, Any], subject: Subject) -> Intent | None:
        return stored_intent(annotations)


class TrustsTheAnnotation(Reconciler):
    """A broken engine: ownership decided by whatever the journal annotation says."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.journal = TrustingJournal()


@attrs.frozen
class UnboundJournal(Journal):
    """A broken journal: entries are sealed, but bound to no object or external name."""

    def read(self, annotations: Mapping[str, Any], subject: Subject) -> Intent | None:
        return super().read(annotations, NOWHERE)

    def mac(self, intent: Intent, subject: Subject) -> str:
        return super().mac(intent, NOWHERE)


NOWHERE = Subject("", "", "", "", "")


class TrustsAnyEntryItSealed(Reconciler):
    """A broken engine: an entry sealed for one object is trusted on any other."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.journal = UnboundJournal()


def test_the_scenario_carries_a_forged_entry_and_a_made_up_mac() -> None:
    beta = forged_journal_target(DatabaseInstance).manifest("beta")["metadata"]["annotations"]
    assert beta[INTENT] == FORGED_INTENT and len(beta[INTENT_MAC]) == 64


def test_no_crash_point_lets_a_forged_journal_take_an_instance_over() -> None:
    report = explore(forged_journal_target(DatabaseInstance),
                     variants=("restart", "delete-while-down"))
    assert report.points >= 40
    assert report.ok, "\n".join(c.render() for c in report.counterexamples[:2])


def test_an_engine_that_trusts_the_journal_annotation_is_caught() -> None:
    broken = attrs.evolve(forged_journal_target(DatabaseInstance),
                          reconciler=TrustsTheAnnotation)
    report = explore(broken, points=[1], variants=("restart",))
    assert not report.ok
    found = "\n".join(p for c in report.counterexamples for p in c.problems)
    assert "beta called update on precious" in found, found
    assert "precious was changed" in found, found


def test_an_engine_whose_entries_are_bound_to_no_object_is_caught_by_the_copy() -> None:
    """The made-up MAC is refused, but alpha's entry copied onto beta on the update
    passes a MAC bound to nothing: beta takes precious over."""
    broken = attrs.evolve(forged_journal_target(DatabaseInstance),
                          reconciler=TrustsAnyEntryItSealed)
    run = run_scenario(broken)
    found = "\n".join(run.problems)
    assert "after update" in found and "precious was changed" in found, found
    assert not any("after create" in p for p in run.problems), found
