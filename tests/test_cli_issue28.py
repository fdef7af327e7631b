"""Command-line input mistakes of issue 28: each a one-line error with exit code 2.

``run --lease-name ''`` exited 70 (an internal error) and ``diagrams --root
/nonexistent`` created that tree.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from lifecycle.cli import main


def one_line_error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 2, (code, out, err)
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("argv", [
    ["--lease-name", ""], ["--lease-name", "Bad_Name"], ["--lease-name", "a" * 254],
    ["--lease-namespace", ""], ["--lease-namespace", "a.b"],
])
def test_a_bad_lease_name_is_a_usage_error(capsys: pytest.CaptureFixture[str],
                                           argv: list[str]) -> None:
    err = one_line_error(capsys, ["run", "--leader-elect", "--embedded", *argv])
    assert "--lease-" in err


def test_diagrams_never_create_a_missing_root(capsys: pytest.CaptureFixture[str],
                                             tmp_path: Path) -> None:
    root = tmp_path / "nonexistent" / "tree"
    err = one_line_error(capsys, ["diagrams", "--root", str(root)])
    assert "no such directory" in err
    assert not (tmp_path / "nonexistent").exists()
    afile = tmp_path / "file"
    afile.write_text("x")
    one_line_error(capsys, ["diagrams", "--root", str(afile)])
