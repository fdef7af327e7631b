"""What the operator logs: reconcile IDs, handled errors, redacted tracebacks, quiet libraries.

Each test configures logging the way ``lifecycle run`` does and reads what
reaches stderr, so the formatters are part of what is checked.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from typing import Any

import pytest

from lifecycle.cli import main
from lifecycle.cli.run import THIRD_PARTY_LOGGERS, configure_logging
from lifecycle.core.errors import UnhandledError
from lifecycle.core.values import Result
from lifecycle.driver.manager import Controller, redacted_traceback
from lifecycle.kube.errors import ServerError

SECRET = "hunter2-Zq8"


class NoSource:
    """A list-watch source that is never started (the tests call ``process`` directly)."""

    def list(self) -> tuple[list[dict[str, Any]], str]:
        raise AssertionError("not started")

    def watch(self, *args: Any, **kwargs: Any) -> Iterator[tuple[str, dict[str, Any]]]:
        raise AssertionError("not started")

    def stop(self) -> None:
        return None


class Scripted:
    """Returns or raises what it is given, one item per reconcile."""

    def __init__(self, *outcomes: Any) -> None:
        self.outcomes = list(outcomes)

    def reconcile(self, namespace: str | None, name: str) -> Result:
        outcome = self.outcomes.pop(0)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome  # type: ignore[no-any-return]


def leaky() -> None:
    """Raises with a secret in the message and in a local variable."""
    password = SECRET  # noqa: F841 - a local value a full traceback would show
    raise RuntimeError(f"connect failed: postgres://admin:{SECRET}@db:5432/x")


class Buggy:
    def reconcile(self, namespace: str | None, name: str) -> Result:
        leaky()
        return Result.done()


@pytest.fixture
def records(capsys: pytest.CaptureFixture[str]) -> Iterator[Any]:
    """Lines logged as JSON at debug, parsed."""
    configure_logging("debug", json_format=True)

    def read() -> list[dict[str, Any]]:
        return [json.loads(line) for line in capsys.readouterr().err.splitlines() if line]

    try:
        yield read
    finally:
        configure_logging("warning")


def run(reconciler: Any, times: int = 1) -> Controller:
    controller = Controller("widget", reconciler, NoSource(), workers=1)
    for _ in range(times):
        controller.process(("default", "w1"))
    return controller


def test_every_reconcile_line_carries_a_fresh_reconcile_id(records: Any) -> None:
    run(Scripted(Result.later(5, "Poll"), Result.now("Dirty"), Result.done("Deleted")), 3)
    lines = [r for r in records() if r["logger"] == "lifecycle.driver.manager"]
    assert [r["msg"] for r in lines] == ["reconciled: requeue-after Poll",
                                         "reconciled: requeue-now Dirty",
                                         "reconciled: done Deleted"]
    assert all(r["level"] == "debug" and r["object"] == "default/w1"
               and r["controller"] == "widget" for r in lines)
    ids = [r["reconcileID"] for r in lines]
    assert all(re.fullmatch(r"[0-9a-f]{8}", i) for i in ids) and len(set(ids)) == 3


def test_a_backoff_is_logged_at_info_with_its_reason(records: Any) -> None:
    run(Scripted(Result.backoff("ProviderThrottled", at_least=3.0)))
    lines = records()
    info = [r for r in lines if r["level"] == "info"]
    assert len(info) == 1
    assert info[0]["msg"].startswith("backing off: ProviderThrottled; retry in 3.")
    assert (info[0]["reason"], info[0]["object"], info[0]["result"]) == (
        "ProviderThrottled", "default/w1", "requeue")
    debug = [r for r in lines if r["msg"].startswith("reconciled:")]
    assert debug[0]["reconcileID"] == info[0]["reconcileID"]  # one reconcile, one ID


def test_a_terminal_error_is_logged_at_info(records: Any) -> None:
    run(Scripted(Result.done("TerminalError"), Result.done("Deleted")), 2)
    info = [r for r in records() if r["level"] == "info"]
    assert [(r["msg"], r["reason"]) for r in info] == [
        ("terminal error: not retried until the object changes", "TerminalError")]


def test_a_handled_api_error_is_logged_at_info_with_the_cause_as_reason(
        records: Any) -> None:
    cause = ServerError("etcdserver: request timed out", status=500)
    error = UnhandledError(f"API error during claim reconcile: {cause}")
    error.__cause__ = cause
    controller = run(Scripted(error))
    [line] = records()
    assert line["level"] == "info" and line["reason"] == "ServerError"
    assert line["msg"].startswith("reconcile error: API error during claim reconcile")
    assert re.fullmatch(r"[0-9a-f]{8}", line["reconcileID"])
    assert controller.queue.rate_limiter.when(("default", "w1")) > 0  # backed off


def test_an_unexpected_exception_logs_a_traceback_without_secrets(
        records: Any, capsys: pytest.CaptureFixture[str]) -> None:
    run(Buggy())
    [line] = records()
    assert line["level"] == "error" and line["reason"] == "RuntimeError"
    assert re.fullmatch(r"RuntimeError at test_logging\.py:\d+ in leaky <- "
                        r"test_logging\.py:\d+ in reconcile <- manager\.py:\d+ in process",
                        line["traceback"]), line["traceback"]
    assert SECRET not in json.dumps(line)
    # The key=value format is as clean.
    configure_logging("debug")
    run(Buggy())
    text = capsys.readouterr().err
    assert "traceback=RuntimeError at test_logging.py:" in text and SECRET not in text


def test_redacted_traceback_names_only_code_locations() -> None:
    try:
        leaky()
    except RuntimeError as exc:
        text = redacted_traceback(exc)
    assert text.startswith("RuntimeError at test_logging.py:") and SECRET not in text
    assert redacted_traceback(ValueError("x")) == "ValueError"  # never raised: no frames


def test_third_party_loggers_are_quiet_unless_asked_for_at_debug() -> None:
    try:
        for level, third_party in (("debug", False), ("info", True), ("info", False)):
            configure_logging(level, third_party=third_party)
            for name in THIRD_PARTY_LOGGERS:
                logger = logging.getLogger(f"{name}.child")
                assert not logger.isEnabledFor(logging.WARNING), (level, name)
                assert logger.isEnabledFor(logging.ERROR)
        configure_logging("debug", third_party=True)
        for name in THIRD_PARTY_LOGGERS:
            assert logging.getLogger(f"{name}.child").isEnabledFor(logging.DEBUG)
    finally:
        configure_logging("warning")
    assert set(THIRD_PARTY_LOGGERS) == {"urllib3", "kubernetes", "statemachine"}


def test_log_third_party_needs_debug(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["run", "--embedded", "--log-third-party"])
    err = capsys.readouterr().err
    assert code == 2 and "--log-third-party needs --log-level debug" in err
    assert len(err.strip().splitlines()) == 1
