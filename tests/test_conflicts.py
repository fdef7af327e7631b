"""409 Conflicts on the engine's writes: absorbed within one pass, up to the retry limit.

Each write of a reconcile (the finalizer, the intent journal, the status) is
retried from a fresh read when the API answers 409 Conflict, up to
:data:`lifecycle.kube.conflict.CONFLICT_ATTEMPTS` attempts. Fewer conflicts
than that are absorbed: the write lands in the same pass, with no error and
no backoff. As many as that end the pass with an error the work queue backs
off on, leaving the object as it was. A conflict caused by a real concurrent
writer is retried from that writer's version, so its change is kept.
"""

from __future__ import annotations

from typing import Any

import pytest
from helpers import KIND, make

from lifecycle.core.kind import FINALIZER
from lifecycle.core.values import ResultKind
from lifecycle.kube.conflict import CONFLICT_ATTEMPTS, ConflictsExhausted, on_conflict
from lifecycle.kube.errors import Conflict
from lifecycle.providers.simcloud.scenarios.harness import database_manifest
from lifecycle.runtime.retry import retry_conflicts

ABSORBED = CONFLICT_ATTEMPTS - 1


def test_the_retry_limit_is_small_and_positive() -> None:
    assert 2 <= CONFLICT_ATTEMPTS <= 10


# ------------------------------------------------------------ the helpers
def conflicting(times: int) -> tuple[list[str], Any]:
    calls: list[str] = []

    def attempt() -> str:
        calls.append("attempt")
        if calls.count("attempt") <= times:
            raise Conflict("the object has been modified")
        return "written"

    return calls, attempt


def test_on_conflict_absorbs_fewer_conflicts_than_the_limit() -> None:
    calls, attempt = conflicting(ABSORBED)
    assert on_conflict(attempt, lambda: calls.append("refresh"), what="w") == "written"
    # Every conflict is followed by a fresh read before the next attempt.
    assert calls == ["attempt", "refresh"] * ABSORBED + ["attempt"]


def test_on_conflict_gives_up_at_the_limit_naming_the_write() -> None:
    calls, attempt = conflicting(CONFLICT_ATTEMPTS)
    with pytest.raises(ConflictsExhausted, match=rf"finalizer kept conflicting "
                                                 rf"\({CONFLICT_ATTEMPTS} attempts\)"):
        on_conflict(attempt, lambda: calls.append("refresh"), what="finalizer")
    assert calls.count("attempt") == CONFLICT_ATTEMPTS


def test_on_conflict_refuses_a_limit_below_one() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        on_conflict(lambda: None, lambda: None, attempts=0)


def test_other_errors_are_not_retried() -> None:
    calls: list[str] = []

    def attempt() -> None:
        calls.append("attempt")
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        on_conflict(attempt, lambda: calls.append("refresh"))
    assert calls == ["attempt"]


def test_retry_conflicts_ends_the_pass_with_an_unhandled_error() -> None:
    from lifecycle.core.errors import UnhandledError
    _, attempt = conflicting(CONFLICT_ATTEMPTS)
    with pytest.raises(UnhandledError, match=r"^status kept conflicting$"):
        retry_conflicts(attempt, lambda: None, what="status")
    _, attempt = conflicting(ABSORBED)
    assert retry_conflicts(attempt, lambda: None, what="status") == "written"


# ----------------------------------------------------------- one reconcile
@pytest.mark.parametrize("verb", ["update", "update_status"])
def test_fewer_conflicts_than_the_limit_are_absorbed_and_the_write_lands_in_the_same_pass(
        verb: str) -> None:
    env, cloud = make()
    env.provider_config()
    env.apply(database_manifest("db"))
    fault = env.faults.fail(verb, KIND, error=Conflict, times=ABSORBED)
    step = env.reconcile(KIND, "db")
    assert fault.fired == ABSORBED, "every injected conflict was met in this one pass"
    assert step.error is None
    assert step.result is not None and step.result.kind is not ResultKind.BACKOFF
    obj = env.get(KIND, "db")
    assert FINALIZER in obj["metadata"]["finalizers"]
    assert obj.get("status", {}).get("state") == "creating", "the status landed too"
    assert len(cloud.instances()) == 1, "the create was made once"


@pytest.mark.parametrize("verb", ["update", "update_status"])
def test_conflicts_up_to_the_limit_end_the_pass_with_backoff(verb: str) -> None:
    env, _ = make()
    env.provider_config()
    env.apply(database_manifest("db"))
    before = env.get(KIND, "db")
    env.faults.fail(verb, KIND, error=Conflict, times=CONFLICT_ATTEMPTS)
    step = env.reconcile(KIND, "db")
    assert step.error is not None and "kept conflicting" in step.error
    queued = env.queued(KIND, "db")
    assert queued is not None and queued.attempts == 1, "retried later with backoff"
    if verb == "update":
        after = env.get(KIND, "db")
        assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    # The next pass, with no more conflicts, gets on with it.
    env.run_until_idle()
    assert env.state(KIND, "db") == "ready"


def test_a_conflict_from_a_real_concurrent_writer_keeps_that_writers_change() -> None:
    env, _ = make()
    env.provider_config()
    env.apply(database_manifest("db"))
    api = env.api
    original = api.replace
    bumped: list[str] = []

    def racing_replace(obj: dict[str, Any], **kwargs: Any) -> Any:
        # Another client labels the object just before each of the engine's first
        # ABSORBED writes, so each of those writes meets a genuine 409.
        if obj.get("kind") == KIND and len(bumped) < ABSORBED:
            current = api.get(obj["apiVersion"], KIND, "default", "db")
            labels = dict(current["metadata"].get("labels") or {})
            labels[f"team-{len(bumped)}"] = "x"
            current["metadata"]["labels"] = labels
            original(current)
            bumped.append(current["metadata"]["resourceVersion"])
        return original(obj, **kwargs)

    env.operator_api.api.replace = racing_replace  # type: ignore[method-assign]
    try:
        step = env.reconcile(KIND, "db")
    finally:
        env.operator_api.api.replace = original  # type: ignore[method-assign]
    assert len(bumped) == ABSORBED
    assert step.error is None
    obj = env.get(KIND, "db")
    assert FINALIZER in obj["metadata"]["finalizers"]
    assert {f"team-{i}" for i in range(ABSORBED)} <= set(obj["metadata"].get("labels") or {}), \
        "the retried write was rebuilt from the fresh read: no concurrent change was lost"
