"""Rules of the intent journal and of what a call left that a fourth sampled mutation
run of ``lifecycle/runtime/effects.py`` found unchecked by the runtime's fast selection:

* :func:`~lifecycle.runtime.effects.closed_intent` closes only what it knows to have
  taken effect: a pending entry of an operation other than create, update or delete
  is never closed, whatever the observation shows, and effects holding such an entry
  (sealed by this operator) stage nothing when they observe;
* :meth:`Effects.after <lifecycle.runtime.effects.Effects.after>` asked without
  ``observe_again`` observes nothing after a call whose answer neither describes the
  resource nor says the call finished: what the call left is unknown (None) and the
  next pass observes.

Each test names the rule and asserts it through the runtime classes a pass uses.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from lifecycle.core.contract import ManagedResource
from lifecycle.core.kind import INTENT, INTENT_MAC
from lifecycle.core.values import Completion, Intent, Observation
from lifecycle.runtime.effects import Effects, closed_intent
from lifecycle.runtime.journalkey import Journal, subject_of

AT = datetime(2026, 1, 1, tzinfo=UTC)
RESOURCE = ManagedResource(kind="K", namespace="ns", name="n", uid="u", generation=1,
                           external_name="x", parameters=None)


class _Port:
    """The reconciled object's annotations, recording each one set."""

    def __init__(self, values: dict[str, str] | None = None) -> None:
        self.values: dict[str, str] = dict(values or {})
        self.calls: list[tuple[str, str]] = []

    def annotations(self) -> dict[str, str]:
        """The annotations, staged and deferred ones applied."""
        return dict(self.values)

    def annotate(self, key: str, value: str) -> None:
        """Commit one annotation."""
        self.calls.append(("annotate", key))
        self.values[key] = value

    def stage(self, key: str, value: str) -> None:
        """Set one annotation with the next write."""
        self.calls.append(("stage", key))
        self.values[key] = value

    def defer(self, key: str, value: str) -> None:
        """Set one annotation with the next write, if the pass makes one."""
        self.calls.append(("defer", key))
        self.values[key] = value


class _Client:
    """A provider client: every call answers ``answer``; observe counts and answers that
    the resource exists."""

    def __init__(self, answer: Any = None) -> None:
        self.answer = answer
        self.observed = 0

    def observe(self, resource: ManagedResource) -> Observation:
        """The resource exists (counted)."""
        self.observed += 1
        return Observation(exists=True, message="observed")

    def create(self, resource: ManagedResource) -> Any:
        """Answer ``answer``."""
        return self.answer

    def update(self, resource: ManagedResource) -> Any:
        """Answer ``answer``."""
        return self.answer

    def delete(self, resource: ManagedResource) -> Any:
        """Answer ``answer``."""
        return self.answer


# ------------------------------------------------------------------ closing an entry
def test_a_pending_entry_of_an_operation_the_engine_does_not_know_is_never_closed() -> None:
    """Only a create, an update or a delete has an effect an observation can show: an
    entry of any other operation (written by another version of the operator, say) is
    left pending whether the resource exists, is up to date or is absent; the known
    operations still close (the rule is not "never close")."""
    pending = Intent("resize", "u/resize/1/1", 1, "2026-01-01T00:00:00Z")
    for seen in (Observation(exists=True, up_to_date=True), Observation(exists=True),
                 Observation(exists=False)):
        assert closed_intent(pending, seen) is None
    create = Intent("create", "u/create/1/1", 1, "2026-01-01T00:00:00Z")
    closed = closed_intent(create, Observation(exists=True))
    assert closed is not None and closed.outcome == "succeeded"


def test_effects_holding_a_sealed_entry_of_an_unknown_operation_stage_nothing() -> None:
    """Effects whose object holds a pending entry of an unknown operation, sealed by this
    operator for this object (so trusted), close nothing when they observe the resource:
    ``close_observed`` answers False and no annotation is staged or deferred, so the
    entry on the object stays as it was."""
    journal = Journal()
    entry = Intent("resize", "u/resize/1/1", 1, "2026-01-01T00:00:00Z")
    subject = subject_of(RESOURCE.kind, RESOURCE.namespace, RESOURCE.name, RESOURCE.uid,
                         str(RESOURCE.external_name))
    port = _Port({INTENT: entry.to_json(), INTENT_MAC: journal.mac(entry, subject)})
    effects = Effects(_Client(), RESOURCE, port, lambda: AT, journal)
    assert effects.trusted() == entry  # trusted: the rule is about the operation alone
    assert not effects.close_observed(Observation(exists=True, up_to_date=True))
    assert not effects.close_observed(Observation(exists=False))
    assert port.calls == []
    assert port.values[INTENT] == entry.to_json()


# ------------------------------------------------------------- what a call left
def test_what_a_call_left_is_unknown_without_observing_unless_asked_to_observe_again(
) -> None:
    """After an update whose answer neither describes the resource nor says it finished,
    ``after()`` (``observe_again`` left at its default) answers None without calling
    observe: the next pass observes. Asked to observe again, it does, once."""
    client = _Client(answer=Completion())
    effects = Effects(client, RESOURCE, _Port(), lambda: AT)
    effects.update()
    assert effects.after() is None
    assert client.observed == 0
    seen = effects.after(observe_again=True)
    assert seen is not None and seen.message == "observed" and client.observed == 1
