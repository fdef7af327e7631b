"""One INFO line per transition: kind, object, from, to and the reason, and nothing else."""

from __future__ import annotations

import logging

import pytest
from helpers import KIND, make, ready

LOGGER = "lifecycle.runtime.reconciler"


def transitions(caplog: pytest.LogCaptureFixture) -> list[tuple[str, str, str, str]]:
    """The (object, from, to, reason) of each transition line logged."""
    return [(r.object, getattr(r, "from"), r.to, r.reason)  # type: ignore[attr-defined]
            for r in caplog.records
            if r.name == LOGGER and r.levelno == logging.INFO and hasattr(r, "to")]


def test_each_transition_of_a_lifecycle_is_one_info_line(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    env, _ = make(create_polls=1)
    ready(env)
    lines = transitions(caplog)
    states = [(source, target) for _, source, target, _ in lines]
    assert states[0][0] == "unclaimed" and states[-1][1] == "ready", lines
    assert all(source != target for source, target in states)
    assert {obj for obj, *_ in lines} == {"default/db"}
    messages = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    assert f"{KIND} default/db: {states[-1][0]} -> ready ({lines[-1][3]})" in messages


def test_a_pass_that_stays_in_its_state_logs_no_transition(
        caplog: pytest.LogCaptureFixture) -> None:
    env, _ = make()
    ready(env)
    caplog.set_level(logging.INFO, logger=LOGGER)
    caplog.clear()
    env.reconcile(KIND, "db")  # a poll of a Ready object: nothing moves
    assert transitions(caplog) == []


def test_deletion_is_logged_down_to_the_final_state(caplog: pytest.LogCaptureFixture) -> None:
    env, _ = make()
    ready(env)
    caplog.set_level(logging.INFO, logger=LOGGER)
    caplog.clear()
    env.delete(KIND, "db")
    env.run_until_idle()
    lines = transitions(caplog)
    assert lines and lines[0][1] == "ready", lines
    assert not env.exists(KIND, "db")
