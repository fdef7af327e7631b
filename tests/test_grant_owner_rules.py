"""The one-owner rule of the Grant-like kinds, on listed objects alone (no server).

:class:`~lifecycle.providers.postgres.tenancy.Claims` decides which of several
objects naming one (role, target) pair acts on it: the oldest holding the engine's
finalizer (``creationTimestamp``, then uid). These cases drive it with a list of
objects as the engine hands it over, and show the answer does not depend on which
object asks first or on what a previous process remembered.
"""

from __future__ import annotations

from typing import Any

import pytest

from lifecycle.core.contract import ManagedResource
from lifecycle.core.errors import TerminalError
from lifecycle.core.kind import FINALIZER
from lifecycle.machines.postgres import Grant
from lifecycle.providers.postgres.scenarios.testing import manifest
from lifecycle.providers.postgres.tenancy import TARGET_CONFLICT, Claims


def grant(name: str, uid: str, created: str, *, held: bool, database: str = "db") -> dict[str, Any]:
    """A stored Grant of role ``r`` on ``database`` (CONNECT), holding the finalizer or not."""
    obj = manifest("Grant", name, role="r", database=database, privileges=["CONNECT"])
    obj["metadata"].update(uid=uid, creationTimestamp=created,
                           finalizers=[FINALIZER] if held else [])
    return obj


def resource(obj: dict[str, Any]) -> ManagedResource:
    """The engine's view of a stored Grant, as a connector gets it."""
    meta = obj["metadata"]
    return ManagedResource(kind="Grant", namespace=meta["namespace"], name=meta["name"],
                           uid=meta["uid"], generation=1, external_name="r.db",
                           parameters=Grant.parse_parameters(obj["spec"]))


def bound(stored: list[dict[str, Any]]) -> Claims:
    """A fresh record (a new operator process) reading ``stored``."""
    claims = Claims()
    claims.bind(Grant, lambda: list(stored))
    return claims


def refused_by(claims: Claims, obj: dict[str, Any], *, take: bool) -> str | None:
    """The holder named by the refusal of ``obj``, or None when it may act."""
    try:
        claims.claim("default", resource(obj), take=take)
    except TerminalError as exc:
        assert exc.reason == TARGET_CONFLICT
        return str(exc).split(" (uid")[0].split()[-1]
    return None


OLD = "2026-01-01T00:00:00Z"
NEW = "2026-01-01T00:00:05Z"


def test_a_newcomer_is_refused_while_an_object_holds_the_pair_whoever_asks_first() -> None:
    g = grant("g", "u-g", OLD, held=True)
    h = grant("h", "u-h", NEW, held=False)
    for order in ((h, g), (g, h)):
        claims = bound([g, h])
        answers = {o["metadata"]["name"]: refused_by(claims, o, take=o is g) for o in order}
        assert answers == {"g": None, "h": "default/g"}


def test_when_two_hold_the_pair_the_older_keeps_it_and_uid_breaks_a_tie() -> None:
    older = grant("z-older", "u-2", OLD, held=True)
    younger = grant("a-younger", "u-1", NEW, held=True)
    for first in (younger, older):
        claims = bound([older, younger])
        refused_by(claims, first, take=True)
        assert refused_by(claims, younger, take=True) == "default/z-older"
        assert refused_by(claims, older, take=True) is None
    same_a, same_b = (grant("b", "u-a", OLD, held=True), grant("a", "u-b", OLD, held=True))
    claims = bound([same_b, same_a])
    assert refused_by(claims, same_b, take=True) == "default/b"  # the smaller uid
    assert refused_by(claims, same_a, take=True) is None


def test_an_object_holding_another_target_or_no_finalizer_holds_nothing_here() -> None:
    elsewhere = grant("e", "u-e", OLD, held=True, database="other")
    pending = grant("p", "u-p", OLD, held=False)
    newcomer = grant("n", "u-n", NEW, held=False)
    claims = bound([elsewhere, pending, newcomer])
    assert refused_by(claims, newcomer, take=False) is None
    assert refused_by(claims, elsewhere, take=True) is None


def test_a_holder_that_is_gone_or_moved_frees_the_pair_at_the_next_claim() -> None:
    g = grant("g", "u-g", OLD, held=True)
    h = grant("h", "u-h", NEW, held=False)
    stored = [g, h]
    claims = Claims()
    claims.bind(Grant, lambda: list(stored))
    assert refused_by(claims, h, take=False) == "default/g"
    stored.remove(g)  # deleted (its finalizer removed by hand: no release was seen)
    assert refused_by(claims, h, take=False) is None
    assert refused_by(claims, h, take=True) is None
    stored.append(grant("g", "u-g", OLD, held=True, database="other"))
    assert refused_by(claims, h, take=True) is None


def test_release_frees_the_pair_for_the_next_object_in_the_same_process() -> None:
    g = grant("g", "u-g", OLD, held=True)
    h = grant("h", "u-h", NEW, held=False)
    stored = [g, h]
    claims = bound(stored)
    assert refused_by(claims, h, take=False) == "default/g"
    claims.release("default", resource(g))
    stored.remove(g)
    h["metadata"]["finalizers"] = [FINALIZER]  # taken over, then it acts
    assert refused_by(claims, h, take=True) is None
    again = grant("g2", "u-g2", NEW, held=False)
    assert refused_by(claims, again, take=False) == "default/h"


@pytest.mark.parametrize("first", ["g", "h"])
def test_without_a_list_the_record_is_the_first_claimant_of_this_process(first: str) -> None:
    g = grant("g", "u-g", OLD, held=True)
    h = grant("h", "u-h", NEW, held=True)
    objs = {"g": g, "h": h}
    claims = Claims()  # never bound: what one process sees, nothing more
    assert refused_by(claims, objs[first], take=True) is None
    other = "h" if first == "g" else "g"
    assert refused_by(claims, objs[other], take=True) == f"default/{first}"
