"""The driver's pure helpers: the change filter, sharding, redaction, RBAC rules."""

from __future__ import annotations

from lifecycle.driver.filters import one_line


def test_one_line_collapses_whitespace_and_cuts() -> None:
    assert one_line("  a \n\t b  ") == "a b"
    assert one_line("x" * 300) == "x" * 300
    assert one_line("x" * 301) == "x" * 300 + "..."
    assert one_line("abcdef", limit=3) == "abc..."
    assert one_line(12) == "12"
