"""Bad input fuzzing: no spec, status, annotation or object shape makes a reconcile blow up.

Hypothesis generates arbitrary specs, corrupt statuses (unknown states,
malformed conditions and history, wrong types), unknown annotation values
and odd metadata. For each, a few reconciles must return normally (only
``UnhandledError`` may escape, and only for an API failure; none is injected
here), leave the object with Ready and Synced conditions that carry a reason
(and a message when something is wrong), and leave a well-formed neighbour
free to converge to Ready. Deleting the fuzzed object then ends it within a
few passes, or leaves it waiting with a requeue (never abandoned).

Each property test counts what became of its examples: refused by the API
(only a 422 is accepted), deleted, or still deleting. It asserts that enough
examples reached the engine for the run to mean something.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lifecycle.core.kind import EXTERNAL_NAME, INTENT, OPERATION, PAUSED, RECONCILE_POLICY
from lifecycle.kube.errors import Invalid, NotFound
from lifecycle.providers.simcloud.scenarios.harness import database_manifest, simulated_environment

KIND = "DatabaseInstance"
API_VERSION = "db.lifecycle.dev/v1alpha1"
STATES = ["unclaimed", "creating", "ready", "updating", "deleting", "failed", "deleted"]

scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**40), 2**40),
                    st.floats(allow_nan=False, allow_infinity=False),
                    st.text(max_size=12))
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(st.text(max_size=8), inner, max_size=3)),
    max_leaves=8,
)

for_provider = st.one_of(
    json_values,
    st.fixed_dictionaries({}, optional={
        "engine": st.one_of(st.sampled_from(["postgres", "mysql", "oracle", ""]), json_values),
        "storageGB": st.one_of(st.integers(-5, 5000), json_values),
        "size": st.one_of(st.sampled_from(["small", "large", "huge"]), json_values),
        "version": st.one_of(st.sampled_from(["15", "8.0", "99"]), json_values),
        "colour": json_values,
    }),
)

specs = st.one_of(
    json_values,
    st.fixed_dictionaries({"forProvider": for_provider}, optional={
        "deletionPolicy": st.one_of(st.sampled_from(["Delete", "Orphan", "Keep"]), json_values),
        "writeConnectionSecretToRef": st.one_of(
            st.fixed_dictionaries({"name": st.sampled_from(["x-conn", "other"])}), json_values),
        "providerConfigRef": st.one_of(
            st.fixed_dictionaries({"name": st.sampled_from(["default", "missing"])}),
            json_values),
    }),
)

annotation_values = st.one_of(
    st.sampled_from(["reconcile", "ignore", "true", "false", "manage", "skip",
                     "detach-on-delete", "", "{}", "null", "[1]"]),
    st.text(max_size=30),
)
annotations = st.dictionaries(
    st.sampled_from([OPERATION, RECONCILE_POLICY, PAUSED, EXTERNAL_NAME, INTENT,
                     "example.com/unrelated"]),
    annotation_values, max_size=4,
)

conditions = st.lists(st.one_of(
    json_values,
    st.fixed_dictionaries({"type": st.one_of(st.sampled_from(["Ready", "Synced", "Failed"]),
                                             json_values)},
                          optional={"status": st.one_of(st.sampled_from(["True", "Maybe"]),
                                                        json_values),
                                    "reason": json_values, "message": json_values,
                                    "lastTransitionTime": st.one_of(
                                        st.just("not-a-time"), json_values),
                                    "observedGeneration": json_values}),
), max_size=4)

statuses = st.one_of(
    json_values,
    st.dictionaries(st.text(max_size=8), json_values, max_size=3),
    st.fixed_dictionaries({}, optional={
        "state": st.one_of(st.sampled_from([*STATES, "Ready", "exploded"]), json_values),
        "conditions": st.one_of(conditions, json_values),
        "history": st.one_of(st.lists(json_values, max_size=3), json_values),
        "observedGeneration": json_values,
        "stateSince": st.one_of(st.just("yesterday"), json_values),
        "failure": st.one_of(json_values, st.dictionaries(
            st.sampled_from(["operation", "reason", "severity", "generation"]), json_values)),
        "atProvider": json_values,
        "phase": json_values,
    }),
)


def _status_ok(obj: dict[str, Any]) -> list[str]:
    """Problems with the object's conditions: Ready and Synced with reasons, explained failures."""
    status = obj.get("status")
    if not isinstance(status, dict):
        return [f"status is {type(status).__name__}"]
    by_type = {c.get("type"): c for c in status.get("conditions") or [] if isinstance(c, dict)}
    problems = []
    for type_ in ("Ready", "Synced"):
        c = by_type.get(type_)
        if c is None:
            problems.append(f"no {type_} condition")
        elif not c.get("reason"):
            problems.append(f"{type_} has no reason")
    synced = by_type.get("Synced") or {}
    if synced.get("reason") == "ReconcilePaused" and synced.get("message"):
        return []  # paused before its first pass: the pause is the clear condition
    if synced.get("status") == "False" and not synced.get("message"):
        problems.append("Synced is False without a message")
    return problems


#: What became of each example of the property test running now.
OUTCOMES: Counter[str] = Counter()


def _fuzz_one(spec: Any, status: Any, notes: dict[str, str], labels: Any, *,
              unchecked_status: bool = False) -> None:
    """Reconcile, check, then delete one fuzzed object next to a well-formed neighbour.

    ``unchecked_status`` stores ``status`` without the CRD's schema check, as
    an object written before its CRD had a status schema would be.
    """
    env, _ = simulated_environment()
    good = database_manifest("neighbour")
    env.apply(good)
    manifest = database_manifest("fuzzed")
    manifest["spec"] = spec
    manifest["metadata"]["annotations"] = dict(notes)
    if labels is not None:
        manifest["metadata"]["labels"] = labels
    try:
        # what the schema keeps reaches the engine: an unknown field is pruned, as for a
        # client that names no fieldValidation
        env.api.create(manifest, field_validation="Ignore")
        if status is not None:
            stored = env.get(KIND, "fuzzed")
            stored["status"] = status
            if unchecked_status:
                with mock.patch("lifecycle.sim.apiserver.admit_schema",
                                lambda rtype, new, **_: new):
                    env.api.replace_status(stored)
                assert env.get(KIND, "fuzzed")["status"] == status
            else:
                env.api.replace_status(stored)
    except Invalid:
        OUTCOMES["refused"] += 1  # the API's schema refused it: it never reaches the engine
        return
    reconciler = env.reconcilers[KIND]
    for _ in range(6):
        # Called directly: any exception, UnhandledError included (no API fault is injected),
        # fails the test.
        result = reconciler.reconcile("default", "fuzzed")
        if result.kind.name == "DONE":
            break
    obj = env.get(KIND, "fuzzed")
    if notes.get(OPERATION) != "ignore":
        problems = _status_ok(obj)
        assert problems == [], (problems, json.dumps(obj.get("status"), default=str)[:800])
    # The neighbour converges regardless.
    for _ in range(6):
        reconciler.reconcile("default", "neighbour")
    assert env.state(KIND, "neighbour") == "ready"
    # Deleting the fuzzed object never raises either, and a bounded number of passes ends it
    # unless its external resource is still being deleted.
    env.delete(KIND, "fuzzed")
    last = None
    for _ in range(6):
        last = reconciler.reconcile("default", "fuzzed")
        if last.kind.name == "DONE":
            break
    try:
        left = env.get(KIND, "fuzzed")
    except NotFound:
        OUTCOMES["deleted"] += 1
        return
    OUTCOMES["still deleting"] += 1
    assert left["metadata"].get("deletionTimestamp")
    assert last is not None and last.kind.name != "DONE", (
        "a deleted object that is still there must stay queued", last,
        json.dumps(left.get("status"), default=str)[:800])


def _counted(run: Callable[[], None], *, least: int) -> Counter[str]:
    """Run a property test; assert at least ``least`` examples reached the engine."""
    OUTCOMES.clear()
    run()
    outcomes = Counter(OUTCOMES)
    reached = outcomes["deleted"] + outcomes["still deleting"]
    assert reached >= least, f"too few examples reached the engine: {dict(outcomes)}"
    assert outcomes["deleted"] >= reached * 0.8, f"most deletions end: {dict(outcomes)}"
    return outcomes


FUZZ = settings(max_examples=150, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@FUZZ
@given(spec=specs)
def _arbitrary_specs(spec: Any) -> None:
    _fuzz_one(spec, None, {}, None)


def test_arbitrary_specs() -> None:
    _counted(_arbitrary_specs, least=15)


@FUZZ
@given(status=statuses)
def _corrupt_statuses(status: Any) -> None:
    _fuzz_one(database_manifest("x")["spec"], status, {}, None)


def test_corrupt_statuses() -> None:
    _counted(_corrupt_statuses, least=40)


@FUZZ
@given(notes=annotations)
def _unknown_annotation_values(notes: dict[str, str]) -> None:
    _fuzz_one(database_manifest("x")["spec"], None, notes, None)


def test_unknown_annotation_values() -> None:
    outcomes = _counted(_unknown_annotation_values, least=100)
    assert outcomes["refused"] == 0, "annotation values are never refused by the API"


@FUZZ
@given(spec=specs, status=statuses, notes=annotations,
       labels=st.one_of(st.none(), st.dictionaries(st.sampled_from(["app", "x/y", "bad key"]),
                                                   st.text(max_size=8), max_size=2)))
def _malformed_objects(spec: Any, status: Any, notes: dict[str, str], labels: Any) -> None:
    _fuzz_one(spec, status, notes, labels)


def test_malformed_objects() -> None:
    _counted(_malformed_objects, least=15)


#: Stored statuses that once made an exception escape the reconcile (regressions).
CORRUPT_STATUSES = [
    pytest.param(True, id="status-true"),
    pytest.param([None], id="status-list"),
    pytest.param("corrupt", id="status-text"),
    pytest.param({"state": "failed", "failure": ["x"]}, id="failure-list"),
    pytest.param({"state": "failed", "failure": "terminal"}, id="failure-text"),
]


@pytest.mark.parametrize("status", CORRUPT_STATUSES)
def test_corrupt_status_shapes_are_tolerated(status: Any) -> None:
    OUTCOMES.clear()
    _fuzz_one(database_manifest("x")["spec"], status, {}, None, unchecked_status=True)
    assert OUTCOMES == {"deleted": 1}, "the engine reconciled and then deleted the object"


@pytest.mark.parametrize("history", [
    True, 1.5, "text", {"a": 1},
    pytest.param([1, None, {"from": 3}, {"from": "a", "to": "b"}], id="malformed-entries"),
])
def test_malformed_history_is_tolerated(history: Any) -> None:
    OUTCOMES.clear()
    _fuzz_one(database_manifest("x")["spec"], {"state": "ready", "history": history}, {}, None,
              unchecked_status=True)
    assert OUTCOMES == {"deleted": 1}, "the engine reconciled and then deleted the object"
