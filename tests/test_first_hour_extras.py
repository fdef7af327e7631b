"""Without the ``postgres`` extra (psycopg not importable) every command that is asked for a
PostgreSQL kind says in one line which extra to install, instead of "no registered kind" alone
or an internal error; the missing import is simulated in a fresh interpreter."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from lifecycle.cli import POSTGRES_KIND_NAMES, extra_hint

HINT = "pip install 'kube-lifecycle[postgres]'"

#: Runs the CLI with psycopg unimportable, as when the extra is not installed.
_WITHOUT_PSYCOPG = ("import sys; sys.modules['psycopg'] = None; "
                    "from lifecycle.cli import main; sys.exit(main(sys.argv[1:]))")


def run_without_psycopg(*argv: str) -> subprocess.CompletedProcess[str]:
    """``lifecycle ARGV`` in a new interpreter where ``import psycopg`` fails."""
    env = {**os.environ, "PGPASSWORD": "unused", "NO_COLOR": "1"}
    return subprocess.run([sys.executable, "-c", _WITHOUT_PSYCOPG, *argv], env=env,
                          capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.parametrize("argv", [
    ["crds", "--kinds", "Role"],
    ["crds", "--kinds", "databases.postgresql.lifecycle.dev"],
    ["run", "--embedded", "--kinds", "Grant"],
    ["run", "--embedded", "--kinds", "lifecycle.machines.postgres:Role"],
    ["serve", "--kinds", "Schema", "--port", "1"],
    ["diagram", "Extension"],
    ["demo", "--provider", "postgres", "--fast"],
], ids=lambda argv: " ".join(argv[:2]))
def test_a_postgres_kind_without_psycopg_names_the_extra(argv: list[str]) -> None:
    done = run_without_psycopg(*argv)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert HINT in lines[0] and "internal error" not in lines[0]


def test_another_unknown_kind_gets_no_postgres_hint() -> None:
    done = run_without_psycopg("crds", "--kinds", "Topic")
    assert done.returncode == 2
    assert "no registered kind 'Topic'" in done.stderr and "kube-lifecycle[" not in done.stderr


def test_no_hint_when_the_module_is_installed() -> None:
    pytest.importorskip("psycopg")
    assert extra_hint("no registered kind 'Role' (registered: ...)") == ""
    assert extra_hint("anything", "psycopg").endswith(HINT)  # a missing import always hints
    assert extra_hint("no module named 'foo'", "foo") == ""


def test_the_names_cover_every_postgres_kind() -> None:
    pytest.importorskip("psycopg")
    from lifecycle.machines.postgres import kinds

    for kind, _connector in kinds():
        assert {kind.kind.lower(), kind.plural.lower()} <= POSTGRES_KIND_NAMES, kind.kind
