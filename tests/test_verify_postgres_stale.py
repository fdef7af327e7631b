"""The crash explorer's stale-cache mode over the PostgreSQL kinds, on the session's server.

Every engine reads through the operator's cached reader over stores one
write behind within an instant, and the concurrent variant lands the user's
next action before each side-effect point (see ``tests/test_verify_stale.py``).
The crash variants under stale reads take four times as long against the
server; they are run by ``lifecycle verify --stale 1`` with a DSN, not here.
"""

from __future__ import annotations

import pytest

from lifecycle import verify

pytestmark = pytest.mark.postgres

KINDS = ("Role", "Database", "Grant", "Schema", "Extension", "DefaultPrivileges")


@pytest.mark.parametrize("kind", KINDS)
def test_postgres_kind_has_no_counterexample_with_stale_reads(kind: str, dsn: str) -> None:
    (target, *_), _ = verify.targets([f"lifecycle.machines.postgres:{kind}"])
    report = verify.explore(target, variants=(verify.CONCURRENT,), stale=1)
    assert report.ok, "\n".join(c.render() for c in report.counterexamples[:2])
    assert len(report.checked) == report.points > 10
    assert {c.phase for c in report.checked} == {"create", "update", "delete"}
