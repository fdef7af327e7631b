"""The small values and readers of the core: objects, timestamps, conditions, results, errors."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from lifecycle.core import objects
from lifecycle.core.errors import (
    CredentialsError,
    ExternalError,
    HandledError,
    Severity,
    TerminalError,
    Throttled,
)
from lifecycle.core.values import (
    Condition,
    ConditionStatus,
    Creation,
    HistoryEntry,
    Intent,
    Observation,
    ProviderStatus,
    Result,
    ResultKind,
    now,
    rfc3339,
)

# --------------------------------------------------------------------------- objects


@pytest.mark.parametrize("value", [None, [], "x", 3, [("a", 1)]])
def test_mapping_of_anything_else_is_empty(value: Any) -> None:
    assert objects.mapping(value) == {}


def test_readers_return_the_parts_or_empty_mappings() -> None:
    obj = {"metadata": {"annotations": {"a": "1"}, "labels": {"l": "2"}},
           "spec": {"s": 1}, "status": {"t": 2}}
    assert objects.metadata(obj) == obj["metadata"]
    assert objects.spec(obj) == {"s": 1}
    assert objects.status(obj) == {"t": 2}
    assert objects.annotations(obj) == {"a": "1"}
    assert objects.labels(obj) == {"l": "2"}
    broken = {"metadata": {"annotations": ["a"], "labels": "l"}, "spec": 1, "status": []}
    for reader in (objects.spec, objects.status, objects.annotations, objects.labels):
        assert reader(broken) == {}
    assert objects.metadata({"metadata": "m"}) == {}


@pytest.mark.parametrize(("value", "expected"), [
    (None, 1), (0, 1), (-3, 1), (True, 1), ("4", 1), (4.0, 1), (1, 1), (7, 7)])
def test_generation(value: Any, expected: int) -> None:
    assert objects.generation({"metadata": {"generation": value}}) == expected


@pytest.mark.parametrize(("value", "expected"), [
    (None, []), ("a", []), ({"a": 1}, []), (["a", 1, None, "b"], ["a", "b"])])
def test_finalizers(value: Any, expected: list[str]) -> None:
    assert objects.finalizers({"metadata": {"finalizers": value}}) == expected


@pytest.mark.parametrize(("value", "depth"), [
    (1, 0), ("s", 0), ({}, 1), ([], 1), ([1, 2], 1), ({"a": [1]}, 2),
    ({"a": {"b": {"c": 1}}}, 3), ([[[[]]]], 4), ({("k",): 1}, 1),
    ([{"a": 1}, [[1]]], 3),
    # A scalar met before a deeper sibling does not end the count.
    ([[[1]], 1], 3), ({"k": {"x": {"y": 1}}, "z": 1}, 3),
])
def test_nesting_depth(value: Any, depth: int) -> None:
    assert objects.nesting_depth(value, 10) == depth


def test_nesting_depth_stops_just_past_the_limit() -> None:
    deep: Any = 1
    for _ in range(10_000):
        deep = [deep]
    assert objects.nesting_depth(deep, 5) == 6
    assert objects.nesting_depth([[1]], 2) == 2
    assert objects.nesting_depth([[[1]]], 2) == 3
    # A mapping's keys count as children too.
    assert objects.nesting_depth({"a": 1, "b": {"c": {"d": 1}}}, 1) == 2


# --------------------------------------------------------------------------- times


def test_rfc3339_formats_whole_seconds_with_z() -> None:
    assert rfc3339(datetime(2026, 1, 2, 3, 4, 5, 999, tzinfo=UTC)) == "2026-01-02T03:04:05Z"
    assert rfc3339(datetime(2026, 11, 12, 13, 14, 15, tzinfo=UTC)) == "2026-11-12T13:14:15Z"


def test_rfc3339_converts_other_zones() -> None:
    plus_two = timezone(timedelta(hours=2))
    assert rfc3339(datetime(2026, 1, 1, 1, 0, 0, tzinfo=plus_two)) == "2025-12-31T23:00:00Z"
    assert rfc3339(datetime(1000, 1, 2, 3, 4, 5, tzinfo=UTC)) == "1000-01-02T03:04:05Z"


def test_now_is_utc_in_whole_seconds() -> None:
    moment = now()
    assert moment.tzinfo is UTC and moment.microsecond == 0
    assert abs((datetime.now(UTC) - moment).total_seconds()) < 5


# --------------------------------------------------------------------------- conditions


def test_condition_round_trip_in_api_form() -> None:
    c = Condition("Ready", ConditionStatus.FALSE, "Creating", "m", 3, "2026-01-01T00:00:00Z")
    data = c.to_dict()
    assert data == {"type": "Ready", "status": "False", "reason": "Creating", "message": "m",
                    "observedGeneration": 3, "lastTransitionTime": "2026-01-01T00:00:00Z"}
    assert Condition.from_dict(data) == c


def test_condition_defaults() -> None:
    c = Condition("Ready", ConditionStatus.TRUE, "Available")
    assert (c.message, c.observed_generation, c.last_transition_time) == ("", 0, "")


@pytest.mark.parametrize(("data", "expected"), [
    ({}, Condition("", ConditionStatus.UNKNOWN, "", "", 0, "")),
    ({"status": "Maybe", "observedGeneration": "2", "type": 1, "reason": None},
     Condition("1", ConditionStatus.UNKNOWN, "None", "", 0, "")),
    ({"status": "True", "observedGeneration": 2, "message": 5, "lastTransitionTime": 7},
     Condition("", ConditionStatus.TRUE, "", "5", 2, "7")),
    ({"status": "False"}, Condition("", ConditionStatus.FALSE, "", "", 0, "")),
])
def test_condition_from_untrusted_dicts(data: dict, expected: Condition) -> None:
    assert Condition.from_dict(data) == expected


# --------------------------------------------------------------------------- results


def test_result_constructors() -> None:
    assert Result.done() == Result(ResultKind.DONE, 0.0, "")
    assert Result.done("r") == Result(ResultKind.DONE, 0.0, "r")
    assert Result.now("r") == Result(ResultKind.REQUEUE_NOW, 0.0, "r")
    assert Result.now() == Result(ResultKind.REQUEUE_NOW, 0.0, "")
    later = Result.later(3, "r")
    assert later == Result(ResultKind.REQUEUE_AFTER, 3.0, "r") and type(later.after) is float
    assert Result.later(2).reason == ""
    back = Result.backoff("r", 4)
    assert back == Result(ResultKind.BACKOFF, 4.0, "r") and type(back.after) is float
    assert Result.backoff() == Result(ResultKind.BACKOFF, 0.0, "")
    assert (Result(ResultKind.DONE).after, Result(ResultKind.DONE).reason) == (0.0, "")
    assert [k.value for k in ResultKind] == ["done", "requeue-now", "requeue-after", "backoff"]


def test_observation_defaults_and_absent() -> None:
    seen = Observation(exists=True)
    assert (seen.up_to_date, seen.status, seen.message, seen.owner, seen.protected) == (
        True, ProviderStatus.AVAILABLE, "", None, "")
    assert (seen.late_init, seen.connection, seen.observed) == ({}, {}, {})
    assert Observation.absent() == Observation(exists=False, up_to_date=False)
    assert Creation() == Creation({}, None)


def test_history_entry_and_intent_serialise() -> None:
    assert HistoryEntry("a", "b", "e", "r", "t").to_dict() == {
        "from": "a", "to": "b", "event": "e", "reason": "r", "time": "t"}
    intent = Intent("create", "k", 2, "t")
    assert intent.outcome == "pending"
    data = intent.to_dict()
    assert data == {"operation": "create", "key": "k", "generation": 2, "started": "t",
                    "outcome": "pending"}
    assert Intent.from_dict(data) == intent
    assert Intent.from_dict({**data, "outcome": "done", "generation": "3"}) == Intent(
        "create", "k", 3, "t", "done")
    del data["outcome"]
    assert Intent.from_dict(data) == intent


@pytest.mark.parametrize("missing", ["operation", "key", "generation", "started"])
def test_a_malformed_intent_reads_as_none(missing: str) -> None:
    data = {"operation": "create", "key": "k", "generation": 2, "started": "t"}
    del data[missing]
    assert Intent.from_dict(data) is None
    assert Intent.from_dict({**data, missing: None, "generation": "x"}) is None
    assert Intent.from_dict({**data, missing: None, "generation": [1]}) is None


# --------------------------------------------------------------------------- errors


def test_error_reasons_and_severities() -> None:
    cases = [
        (HandledError("m"), "ReconcileError", Severity.RETRYABLE),
        (ExternalError("m"), "ExternalError", Severity.RETRYABLE),
        (Throttled("m", retry_after=2), "Throttled", Severity.RETRYABLE),
        (TerminalError("m"), "InvalidSpec", Severity.TERMINAL),
        (CredentialsError("m"), "CredentialsUnavailable", Severity.RETRYABLE),
    ]
    for error, reason, severity in cases:
        assert (error.message, str(error), error.reason, error.severity) == (
            "m", "m", reason, severity)
    assert [s.value for s in Severity] == ["Terminal", "Retryable", "Informational"]


def test_error_overrides_apply_to_the_instance_only() -> None:
    error = HandledError("m", reason="Other", severity=Severity.INFORMATIONAL)
    assert (error.reason, error.severity) == ("Other", Severity.INFORMATIONAL)
    assert (HandledError.reason, HandledError.severity) == ("ReconcileError", Severity.RETRYABLE)
    throttled = Throttled("slow", retry_after=3, reason="RateLimited")
    assert (throttled.reason, throttled.retry_after, throttled.message) == (
        "RateLimited", 3.0, "slow")
    assert type(throttled.retry_after) is float
    assert Throttled("slow", retry_after=1).reason == "Throttled"


@pytest.mark.parametrize("intent", [
    Intent("create", "uid/create/1/1", 1, "2026-01-01T00:00:00Z"),
    Intent("delete", 'quote " backslash \\ newline \n é \u2028', 2**40, "s", "failed"),
    Intent("update", "k", True, "s", "succeeded"),  # not an int: the plain encoder's text
])
def test_the_journal_text_is_json_dumps_with_sorted_keys(intent: Intent) -> None:
    assert intent.to_json() == json.dumps(intent.to_dict(), sort_keys=True)
    assert Intent.from_dict(json.loads(intent.to_json())) == Intent.from_dict(intent.to_dict())


def test_rfc3339_answers_each_moment_whatever_it_formatted_before() -> None:
    current = now()
    assert rfc3339(current) == rfc3339(current) == current.strftime("%Y-%m-%dT%H:%M:%SZ")
    other = datetime(2020, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert rfc3339(other) == "2020-01-02T03:04:05Z"
    assert rfc3339(current) == current.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert rfc3339(datetime(2020, 1, 2, 3, 4, 5, tzinfo=timezone(timedelta(hours=2)))) == (
        "2020-01-02T01:04:05Z")
    assert now() == now().replace(microsecond=0)
