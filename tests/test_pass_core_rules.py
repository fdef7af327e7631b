"""Rules of the pure parts of a managed pass: the external name as a pass reads it
(:mod:`lifecycle.core.externalname`), running provider code (:mod:`lifecycle.core.guard`)
and a pass's notes and leaving (:mod:`lifecycle.core.conclusion`).

Each reading is checked field by field on objects that differ in one input only, so an
edit of one rule changes one asserted value.
"""

from __future__ import annotations

from typing import Any

import pytest

from lifecycle.core.conclusion import config_note, informational, leaving
from lifecycle.core.errors import ExternalError, HandledError, Severity
from lifecycle.core.externalname import ExternalName, external_name_of, held_name
from lifecycle.core.guard import guarded
from lifecycle.core.kind import EXTERNAL_NAME, FINALIZER
from lifecycle.core.values import Condition, ConditionStatus


def _obj(*, annotation: Any = None, recorded: Any = None, finalizers: Any = None,
         deleted: Any = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "db", "namespace": "default", "uid": "u-1"}
    if annotation is not None:
        meta["annotations"] = {EXTERNAL_NAME: annotation}
    if finalizers is not None:
        meta["finalizers"] = finalizers
    if deleted is not None:
        meta["deletionTimestamp"] = deleted
    obj: dict[str, Any] = {"metadata": meta, "spec": {}}
    if recorded is not None:
        obj["status"] = {"externalName": recorded}
    return obj


# ------------------------------------------------------------- the external name
def test_an_object_without_any_name_reads_empty() -> None:
    assert external_name_of(_obj()) == ExternalName(
        None, None, "", False, current=None, chosen="", holds=False, intended=None,
        held=None, managed="", renamed=False)
    assert held_name(_obj()) is None


def test_an_annotated_object_with_the_finalizer_holds_its_annotation() -> None:
    obj = _obj(annotation="x", finalizers=[FINALIZER])
    assert external_name_of(obj) == ExternalName(
        None, "x", "x", True, current="x", chosen="x", holds=True, intended="x", held="x",
        managed="x", renamed=False)
    assert held_name(obj) == "x"


def test_without_the_finalizer_nothing_is_held() -> None:
    name = external_name_of(_obj(annotation="x", recorded="x"))
    assert (name.finalized, name.holds, name.held) == (False, False, None)
    assert (name.current, name.managed, name.renamed) == ("x", "x", False)
    assert held_name(_obj(annotation="x", recorded="x")) is None


def test_only_the_engines_finalizer_in_a_list_counts() -> None:
    assert not external_name_of(_obj(annotation="x", finalizers=["other/one"])).finalized
    assert not external_name_of(_obj(annotation="x", finalizers=FINALIZER)).finalized
    assert not external_name_of(_obj(annotation="x", finalizers=(FINALIZER,))).finalized
    assert external_name_of(_obj(annotation="x", finalizers=["other/one", FINALIZER])).finalized


def test_the_default_names_an_object_the_user_did_not_name() -> None:
    name = external_name_of(_obj(finalizers=[FINALIZER]), lambda o: "kind-" + o["metadata"]["uid"])
    assert name == ExternalName(
        None, None, "kind-u-1", True, current=None, chosen="kind-u-1", holds=False,
        intended=None, held=None, managed="kind-u-1", renamed=False)


def test_an_annotation_is_chosen_over_the_default_even_when_empty() -> None:
    annotated = external_name_of(_obj(annotation="mine"), lambda o: "dflt")
    assert (annotated.claimed, annotated.chosen, annotated.managed) == ("dflt", "mine", "mine")
    empty = external_name_of(_obj(annotation="", finalizers=[FINALIZER]), lambda o: "dflt")
    assert empty == ExternalName(
        None, "", "dflt", True, current="", chosen="", holds=False, intended=None,
        held=None, managed="", renamed=False)


def test_an_annotation_of_another_type_is_chosen_but_never_intended() -> None:
    name = external_name_of(_obj(annotation=5, finalizers=[FINALIZER]))
    assert name == ExternalName(
        None, 5, "", True, current=5, chosen=5, holds=True, intended=None, held=None,
        managed="5", renamed=False)


def test_the_recorded_name_wins_and_an_edit_after_it_is_a_rename() -> None:
    obj = _obj(annotation="edited", recorded="first", finalizers=[FINALIZER])
    assert external_name_of(obj) == ExternalName(
        "first", "edited", "edited", True, current="first", chosen="edited", holds=True,
        intended="edited", held="first", managed="first", renamed=True)
    assert held_name(obj) == "first"
    same = external_name_of(_obj(recorded="first", finalizers=[FINALIZER]), lambda o: "first")
    assert (same.recorded, same.held, same.managed, same.renamed) == (
        "first", "first", "first", False)
    other = external_name_of(_obj(recorded="first"), lambda o: "dflt")
    assert (other.managed, other.renamed) == ("first", True)


def test_a_recorded_name_must_be_a_non_empty_string() -> None:
    for stored in ("", 7, ["x"]):
        name = external_name_of(_obj(annotation="a", recorded=stored, finalizers=[FINALIZER]))
        assert (name.recorded, name.current, name.held, name.managed, name.renamed) == (
            None, "a", "a", "a", False)


# ----------------------------------------------------------------------- guarded
def test_guarded_returns_what_the_call_returns() -> None:
    assert guarded(lambda: 42) == 42


def test_a_handled_error_stands_as_raised() -> None:
    error = HandledError("refused", reason="Refused", severity=Severity.TERMINAL)

    def call() -> None:
        raise error

    with pytest.raises(HandledError) as caught:
        guarded(call)
    assert caught.value is error


def test_a_passthrough_exception_propagates_unchanged() -> None:
    class Own(Exception):
        pass

    def call() -> None:
        raise Own("secret-in-message")

    with pytest.raises(Own):
        guarded(call, (Own,))
    with pytest.raises(ExternalError):
        guarded(call)


def test_anything_else_becomes_an_external_error_naming_only_the_class() -> None:
    def call() -> None:
        raise ValueError("password=hunter2")

    with pytest.raises(ExternalError) as caught:
        guarded(call)
    assert caught.value.message == "provider client raised ValueError"
    assert caught.value.reason == "ProviderClientError"
    assert caught.value.__cause__ is None and caught.value.__suppress_context__
    assert "hunter2" not in str(caught.value)


# ------------------------------------------------------- notes and leaving
def test_a_config_note_is_config_valid_false_of_its_generation() -> None:
    assert config_note("Why", "what", 4) == Condition(
        "ConfigValid", ConditionStatus.FALSE, "Why", "what", 4)


def test_an_informational_note_carries_the_errors_reason_and_message() -> None:
    note = informational(HandledError("it said so", reason="Told"), 3)
    assert note == Condition("Informational", ConditionStatus.TRUE, "Told", "it said so", 3)


@pytest.mark.parametrize(("deleted", "finalizers", "gone"), [
    ("2026-01-01T00:00:00Z", [FINALIZER], True),
    ("2026-01-01T00:00:00Z", None, True),
    ("2026-01-01T00:00:00Z", [], True),
    ("2026-01-01T00:00:00Z", "not-a-list", True),
    ("2026-01-01T00:00:00Z", [FINALIZER, "other/one"], False),
    ("2026-01-01T00:00:00Z", ["other/one"], False),
    (None, [FINALIZER], False),
    ("", [FINALIZER], False),
])
def test_an_object_leaves_only_when_deleted_and_the_finalizer_is_its_last(
        deleted: Any, finalizers: Any, gone: bool) -> None:
    assert leaving(_obj(deleted=deleted, finalizers=finalizers)) is gone
