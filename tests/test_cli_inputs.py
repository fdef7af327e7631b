"""Malformed command-line input: one line on stderr naming the command, exit code 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from lifecycle.cli import main

HEAD = "apiVersion: db.lifecycle.dev/v1alpha1\nkind: DatabaseInstance\n"

#: Object dumps with a bad shape, and the words the error must contain.
DUMPS: dict[str, tuple[bytes, str]] = {
    "metadata-string": ((HEAD + 'metadata: "x"\n').encode(), "metadata is a string"),
    "annotations-string": ((HEAD + 'metadata: {name: a, annotations: "bad"}\n').encode(),
                           "metadata.annotations is a string"),
    "labels-not-strings": ((HEAD + "metadata: {name: a, labels: {a: [1]}}\n").encode(),
                           "metadata.labels must map strings to strings"),
    "not-utf8": (b"\xff\xfe\x00apiVersion: v1\n", "not UTF-8"),
    "deep-json": (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
    "deep-yaml": (("a:\n" + "".join(" " * i + "b:\n" for i in range(1, 200))).encode(),
                  "nested more than"),
    "state-list": ((HEAD + "metadata: {name: a}\nstatus: {state: [1]}\n").encode(),
                   "status.state is a list"),
    "status-string": ((HEAD + "metadata: {name: a}\nstatus: ready\n").encode(),
                      "status is a string"),
}

CASES = [
    *[pytest.param(["plan", "--object", name], words, id=f"plan-{name}")
      for name, (_, words) in DUMPS.items()],
    *[pytest.param(["diagram", "--object", name], words, id=f"diagram-{name}")
      for name, (_, words) in DUMPS.items()],
    pytest.param(["run", "--embedded", "--probe-address", "127.0.0.1:99999"],
                 "between 0 and 65535", id="run-port-out-of-range"),
    pytest.param(["run", "--embedded", "--probe-address", "nowhere"], "HOST:PORT",
                 id="run-address-without-port"),
    *[pytest.param(["run", "--embedded", option, "-1"], option, id=f"run{option}-negative")
      for option in ("--backoff-base", "--backoff-cap", "--resync", "--drain-timeout",
                     "--reads-ttl")],
    pytest.param(["run", "--embedded", "--resync", "nan"], "--resync", id="run-resync-nan"),
    pytest.param(["run", "--embedded", "--backoff-base", "10", "--backoff-cap", "5"],
                 "--backoff-cap", id="run-cap-below-base"),
    pytest.param(["run", "--embedded", "--workers", "0"], "--workers", id="run-workers-0"),
    pytest.param(["verify", "DatabaseInstance", "--point", "99999"], "valid points are 0..",
                 id="verify-point-out-of-range"),
    pytest.param(["verify", "DatabaseInstance", "--point", "-1"], "--point",
                 id="verify-point-negative"),
    pytest.param(["run", "--embedded", "--connector", "test_user_kind:Half"],
                 "connect() returns NoDelete, which has no delete() method",
                 id="run-connector-client-without-delete"),
    pytest.param(["run", "--embedded", "--connector", "test_user_kind:NoDelete"],
                 "returned NoDelete, which has no connect() method",
                 id="run-connector-is-a-client"),
    pytest.param(["run", "--embedded", "--connector", "lifecycle.core.kind:GROUP"],
                 "neither a connector nor a factory", id="run-connector-is-a-string"),
    pytest.param(["diagram", "lifecycle.machines.database:DatabaseInstanceMachine.timing"],
                 "is not a LifecycleMachine class with states, nor a kind",
                 id="diagram-not-a-machine-or-kind"),
    pytest.param(["diagram", "NoSuchKind"], "no registered kind 'NoSuchKind'",
                 id="diagram-unknown-kind"),
]


@pytest.mark.parametrize(("argv", "words"), CASES)
def test_bad_input_is_one_line_and_exit_2(argv: list[str], words: str, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    """Each malformed input is refused with ``lifecycle COMMAND: message`` alone."""
    if "--object" in argv:
        at = argv.index("--object") + 1
        content, _ = DUMPS[argv[at]]
        dump = tmp_path / f"{argv[at]}.yaml"
        dump.write_bytes(content)
        argv = [*argv[:at], str(dump), *argv[at + 1:]]
    assert main(argv) == 2
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"lifecycle {argv[0]}: ")
    assert words in lines[0]
    assert "Traceback" not in err


def test_well_formed_dump_still_plans(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The shape checks accept an ordinary dump, annotations and status included."""
    dump = tmp_path / "ok.yaml"
    dump.write_text(HEAD + "metadata: {name: a, uid: u-1, annotations: {x: y}, "
                           "finalizers: [lifecycle.dev/finalizer]}\n"
                           "spec: {forProvider: {engine: postgres}}\n"
                           "status: {state: ready, conditions: [], history: []}\n")
    assert main(["plan", "--object", str(dump)]) == 0
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("debug", [False, True])
def test_unexpected_failure_is_one_internal_error_line(
        debug: bool, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A bug inside a command is exit 70 with one line; the traceback only when debugging."""
    import lifecycle.cli.plan as plan_cli

    def broken(_args: object) -> int:
        raise ValueError("no such thing\nsecond line")

    monkeypatch.setattr(plan_cli, "_main", broken)
    if debug:
        monkeypatch.setenv("LIFECYCLE_DEBUG", "1")
    else:
        monkeypatch.delenv("LIFECYCLE_DEBUG", raising=False)
    assert main(["plan", "--object", "unused.yaml"]) == 70
    err = capsys.readouterr().err
    last = "lifecycle plan: internal error: ValueError: no such thing"
    assert err.splitlines()[-1] == last
    assert ("Traceback" in err) is debug
    if not debug:
        assert err == last + "\n"
