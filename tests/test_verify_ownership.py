"""The crash explorer on the tenancy scenarios: two claimants of one external name, and
an object naming an instance someone else created. No crash point lets either take over
what it does not own, and a reconciler that skips the ownership checks is caught."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from lifecycle.core.decide import Facts
from lifecycle.machines.database import DatabaseInstance
from lifecycle.providers.simcloud.scenarios.verify import adoption_target, shared_name_target
from lifecycle.runtime.reconciler import Pass, Reconciler
from lifecycle.verify import explore


class ClaimsNothing(Pass):
    """A broken pass: the name index is never consulted."""

    def claim(self, deleting: bool) -> Any:
        return None


class SkipsOwnership(Reconciler):
    """A broken engine: no name index, no ownership marks consulted."""

    pass_type = ClaimsNothing

    def _judge(self, run: Pass, facts: Facts) -> Facts:
        return facts


@pytest.mark.parametrize("build", [shared_name_target, adoption_target])
def test_no_crash_point_lets_an_object_take_what_it_does_not_own(build: Any) -> None:
    report = explore(build(DatabaseInstance), variants=("restart", "delete-while-down"))
    assert report.points >= 25
    assert report.ok, "\n".join(c.render() for c in report.counterexamples[:2])


@pytest.mark.parametrize(("build", "expected"), [
    (shared_name_target, "beta called"),
    (adoption_target, "on precious"),
])
def test_an_engine_that_skips_the_ownership_checks_is_caught(build: Any, expected: str) -> None:
    broken = attrs.evolve(build(DatabaseInstance), reconciler=SkipsOwnership)
    report = explore(broken, points=[1], variants=("restart",))
    assert not report.ok
    found = "\n".join(p for c in report.counterexamples for p in c.problems)
    assert expected in found, found
