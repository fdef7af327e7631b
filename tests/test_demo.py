"""``lifecycle demo`` runs the whole scenario and judges its own outcome."""

from __future__ import annotations

import io

from lifecycle.cli import main
from lifecycle.providers.simcloud.scenarios.demo import run_demo


def test_demo_scenario_succeeds_and_reports() -> None:
    out = io.StringIO()
    assert run_demo(out, pace=0.0, live=False) is True
    text = out.getvalue()
    assert "users          ready -> failed" in text
    assert "orders         ready -> updating" in text
    assert "left in the cloud: 0" in text
    assert text.rstrip().endswith("demo succeeded")


def test_demo_live_table_redraws() -> None:
    out = io.StringIO()
    assert run_demo(out, pace=0.0, live=True) is True
    assert "\x1b[" in out.getvalue()  # cursor movement: the table is redrawn in place


def test_demo_command_exit_code(capsys) -> None:
    assert main(["demo", "--fast", "--plain"]) == 0
    assert "demo succeeded" in capsys.readouterr().out


def test_demo_reports_failure_when_a_resource_does_not_end_as_expected(monkeypatch) -> None:
    from lifecycle.providers.simcloud import SimCloud

    monkeypatch.setattr(SimCloud, "delete_instance", lambda self, creds, name: None)
    out = io.StringIO()
    assert run_demo(out, pace=0.0, live=False) is False
    assert "demo FAILED" in out.getvalue()


def test_claims_scenario_command(capsys) -> None:
    assert main(["demo", "--scenario", "claims"]) == 0
    out = capsys.readouterr().out
    for step in ("unbound -> binding", "binding -> bound", "creating -> ready",
                 "bound -> released", "deleting -> deleted", "released -> deleted"):
        assert step in out, step
    checks = [line.strip() for line in out.splitlines() if line.strip().startswith("[")]
    assert len(checks) == 8 and all(line.startswith("[ok]") for line in checks), checks
    assert out.rstrip().endswith("== 8/8 checks passed")
