"""The requeue matrix, input by input and for every pair of competing inputs.

:func:`lifecycle.core.decide.requeue` turns the outcome of one reconcile into
what the work queue does next. Several inputs can be true at once (a final
state, a changed object, a handled error of some severity, a pending provider
operation, a deletion, a state with its own wait interval); the matrix says
which one wins. Here each input is checked alone, then every pair of inputs is
checked against the precedence written out in :func:`expected`, so swapping
two branches of the matrix, or dropping one, fails a named row.
"""

from __future__ import annotations

import itertools
import zlib
from typing import Any

import pytest

from lifecycle.core.decide import poll_interval, requeue
from lifecycle.core.errors import (
    CredentialsError,
    ExternalError,
    HandledError,
    Severity,
    TerminalError,
    Throttled,
)
from lifecycle.core.machine import Timing
from lifecycle.core.values import ResultKind

#: Waits that differ per state, so a row that picks the wrong state's wait fails.
TIMING = Timing(poll=60.0, jitter=0.1, default_wait=4.0,
                wait={"creating": 5.0, "updating": 6.0, "deleting": 2.0})
KEY = "uid-1"

#: The errors, one per severity (and a throttle with a retry-after).
ERRORS: dict[str, HandledError] = {
    "retryable": ExternalError("the service is down"),
    "throttled": Throttled("slow down", retry_after=7.5),
    "terminal": TerminalError("the spec is invalid"),
    "informational": HandledError("for your information", reason="Notice",
                                  severity=Severity.INFORMATIONAL),
    "credentials": CredentialsError("no credentials"),
}

#: The inputs that compete for the result, each as the keyword arguments it sets.
INPUTS: dict[str, dict[str, Any]] = {
    "final": {"final": True},
    "dirty": {"dirty": True},
    "waiting": {"waiting": True},
    "deleting": {"deleting": True},
    "wait-state": {"state": "creating"},
    **{f"error:{name}": {"error": error} for name, error in ERRORS.items()},
}


def expected(state: str = "ready", final: bool = False, dirty: bool = False,
             error: HandledError | None = None, waiting: bool = False,
             deleting: bool = False) -> tuple[ResultKind, float, str]:
    """The documented precedence, written out as a list of rules, first match wins."""
    rules = [
        (final, (ResultKind.DONE, 0.0, "Deleted")),
        (dirty, (ResultKind.REQUEUE_NOW, 0.0, "ObjectChanged")),
        (error is not None and error.severity is Severity.TERMINAL and not deleting,
         (ResultKind.DONE, 0.0, "TerminalError")),
        (error is not None and error.severity is not Severity.INFORMATIONAL,
         (ResultKind.BACKOFF, getattr(error, "retry_after", 0.0),
          error.reason if error is not None else "")),
        (waiting or state in TIMING.wait,
         (ResultKind.REQUEUE_AFTER, TIMING.wait.get(state, TIMING.default_wait), "Waiting")),
    ]
    for applies, outcome in rules:
        if applies:
            return outcome
    return ResultKind.REQUEUE_AFTER, poll_interval(TIMING, KEY), "Poll"


def run(**inputs: Any) -> tuple[ResultKind, float, str]:
    args = {"state": "ready", "final": False, **inputs}
    r = requeue(timing=TIMING, key=KEY, **args)
    return r.kind, r.after, r.reason


# ------------------------------------------------------------- one input alone
@pytest.mark.parametrize(("inputs", "outcome"), [
    ({}, (ResultKind.REQUEUE_AFTER, poll_interval(TIMING, KEY), "Poll")),
    ({"final": True}, (ResultKind.DONE, 0.0, "Deleted")),
    ({"dirty": True}, (ResultKind.REQUEUE_NOW, 0.0, "ObjectChanged")),
    ({"waiting": True}, (ResultKind.REQUEUE_AFTER, 4.0, "Waiting")),  # default wait
    ({"deleting": True}, (ResultKind.REQUEUE_AFTER, poll_interval(TIMING, KEY), "Poll")),
    ({"state": "creating"}, (ResultKind.REQUEUE_AFTER, 5.0, "Waiting")),
    ({"state": "updating"}, (ResultKind.REQUEUE_AFTER, 6.0, "Waiting")),
    ({"state": "deleting"}, (ResultKind.REQUEUE_AFTER, 2.0, "Waiting")),
    ({"error": ERRORS["retryable"]}, (ResultKind.BACKOFF, 0.0, "ExternalError")),
    ({"error": ERRORS["throttled"]}, (ResultKind.BACKOFF, 7.5, "Throttled")),
    ({"error": ERRORS["terminal"]}, (ResultKind.DONE, 0.0, "TerminalError")),
    ({"error": ERRORS["credentials"]}, (ResultKind.BACKOFF, 0.0, "CredentialsUnavailable")),
    ({"error": ERRORS["informational"]},
     (ResultKind.REQUEUE_AFTER, poll_interval(TIMING, KEY), "Poll")),
], ids=lambda v: repr(v)[:60])
def test_each_input_alone(inputs: dict[str, Any], outcome: tuple[ResultKind, float, str]) -> None:
    assert run(**inputs) == outcome


def test_the_written_out_precedence_agrees_with_the_rows_above() -> None:
    """The oracle itself is checked against hand-written rows, so it cannot drift silently."""
    assert expected() == (ResultKind.REQUEUE_AFTER, poll_interval(TIMING, KEY), "Poll")
    assert expected(error=ERRORS["terminal"], deleting=True) == (
        ResultKind.BACKOFF, 0.0, "InvalidSpec")
    assert expected(final=True, dirty=True) == (ResultKind.DONE, 0.0, "Deleted")


# --------------------------------------------------------- every pair of inputs
def _combine(a: str, b: str) -> dict[str, Any] | None:
    if a.startswith("error:") and b.startswith("error:"):
        return None  # one pass carries at most one error
    return {**INPUTS[a], **INPUTS[b]}


PAIRS = [(a, b) for a, b in itertools.combinations(INPUTS, 2) if _combine(a, b) is not None]


@pytest.mark.parametrize(("first", "second"), PAIRS, ids=[f"{a}+{b}" for a, b in PAIRS])
def test_every_pair_of_competing_inputs(first: str, second: str) -> None:
    inputs = _combine(first, second)
    assert inputs is not None
    assert run(**inputs) == expected(**inputs)


# Rows of the matrix people ask about, spelled out rather than computed.
@pytest.mark.parametrize(("inputs", "outcome"), [
    # A final state is done, even when the object changed or a call failed.
    ({"final": True, "dirty": True}, (ResultKind.DONE, 0.0, "Deleted")),
    ({"final": True, "error": ERRORS["retryable"]}, (ResultKind.DONE, 0.0, "Deleted")),
    # A changed object runs now, ahead of any backoff or terminal stop.
    ({"dirty": True, "error": ERRORS["terminal"]}, (ResultKind.REQUEUE_NOW, 0.0, "ObjectChanged")),
    ({"dirty": True, "error": ERRORS["throttled"]},
     (ResultKind.REQUEUE_NOW, 0.0, "ObjectChanged")),
    # A terminal error stops retries, except while deleting: a deletion backs off.
    ({"error": ERRORS["terminal"], "deleting": True}, (ResultKind.BACKOFF, 0.0, "InvalidSpec")),
    ({"error": ERRORS["terminal"], "waiting": True}, (ResultKind.DONE, 0.0, "TerminalError")),
    # A handled error backs off rather than waiting on the provider.
    ({"error": ERRORS["retryable"], "state": "creating"},
     (ResultKind.BACKOFF, 0.0, "ExternalError")),
    ({"error": ERRORS["throttled"], "waiting": True}, (ResultKind.BACKOFF, 7.5, "Throttled")),
    # An informational error changes nothing: waiting goes on.
    ({"error": ERRORS["informational"], "state": "deleting"},
     (ResultKind.REQUEUE_AFTER, 2.0, "Waiting")),
    # Waiting in a state with its own wait uses that state's interval.
    ({"waiting": True, "state": "updating"}, (ResultKind.REQUEUE_AFTER, 6.0, "Waiting")),
])
def test_named_rows(inputs: dict[str, Any], outcome: tuple[ResultKind, float, str]) -> None:
    assert run(**inputs) == outcome


def test_every_combination_of_all_inputs_follows_the_precedence() -> None:
    states = ["ready", "creating", "deleting", "failed"]
    errors: list[HandledError | None] = [None, *ERRORS.values()]
    checked = 0
    for state, final, dirty, error, waiting, deleting in itertools.product(
            states, [False, True], [False, True], errors, [False, True], [False, True]):
        inputs = {"state": state, "final": final, "dirty": dirty, "error": error,
                  "waiting": waiting, "deleting": deleting}
        assert run(**inputs) == expected(**inputs), inputs
        checked += 1
    assert checked == 4 * 2 * 2 * 6 * 2 * 2


# -------------------------------------------------------------- poll jitter
def test_poll_interval_is_stable_per_key_and_spread_over_the_whole_jitter_band() -> None:
    keys = [f"uid-{i}" for i in range(20_000)]
    values = [poll_interval(TIMING, k) for k in keys]
    assert values == [poll_interval(TIMING, k) for k in keys], "stable per key"
    assert min(values) >= 54.0 and max(values) <= 66.0, "within 10 % either side"
    # The band is used to its ends (a spread of -1 .. +1 in thousandths).
    assert min(values) == pytest.approx(54.0) and max(values) == pytest.approx(66.0)
    assert len(set(values)) == 2001, "every thousandth of the band is reachable"


def test_poll_interval_of_one_key_is_the_crc_spread_of_that_key() -> None:
    for key in ("a", "uid-1", "0b6f1a-ns/name"):
        spread = (zlib.crc32(key.encode()) % 2001 - 1000) / 1000.0
        assert poll_interval(TIMING, key) == pytest.approx(60.0 * (1 + 0.1 * spread))


def test_poll_interval_without_jitter_is_the_poll_and_never_negative() -> None:
    assert poll_interval(Timing(poll=30.0, jitter=0.0), "anything") == 30.0
    wide = Timing(poll=10.0, jitter=5.0)  # a jitter wider than the poll itself
    values = [poll_interval(wide, f"k{i}") for i in range(3000)]
    assert min(values) == 0.0, "clamped at zero, never negative"
    assert max(values) > 10.0
