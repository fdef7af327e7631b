"""Objects waiting on a reference: Synced names the wait, and the harness wakes them.

While a reference is unresolved, Synced is False with reason ``ReferenceUnresolved``
(checked on the pure path, then on the harness). The harness has no informers; it keeps
the operator's own index (:class:`~lifecycle.core.references.ReferenceIndex`) and asks it
the same question (``woken``), so a Grant waiting on its Role and Database is reconciled
at the virtual moment they turn Ready, not at its backoff. The same run with the wake-up
switched off shows the Grant waiting out its backoff: the check can fail.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest

from lifecycle.core.decide import decide, gate
from lifecycle.core.errors import ExternalError
from lifecycle.core.kind import FINALIZER
from lifecycle.core.plan import conclude, gather
from lifecycle.core.references import ReferenceIndex, UnresolvedReference
from lifecycle.core.vocabulary import Reasons
from lifecycle.machines.managed import ManagedResourceMachine as M
from lifecycle.providers.postgres.fields import API_VERSION
from lifecycle.providers.postgres.grant_spec import GrantParameters
from lifecycle.providers.postgres.scenarios.testing import manifest
from lifecycle.testing import Environment
from lifecycle.testing.wakeups import ReferenceWakeups

NS = "team-a"


def synced_after(error: Any) -> dict[str, Any]:
    """Synced after one pure pass of a new object whose take-over check raised ``error``
    (as the reconciler hands an unresolved reference to the status step)."""
    o = {"metadata": {"name": "g", "uid": "u", "generation": 1, "finalizers": [FINALIZER]},
         "status": {}}
    g = gate(M, o, {})
    facts = gather(g, {}, error=error)
    plan = conclude(M, {}, facts, decide(M, facts), now=datetime(2026, 1, 1), key="u",
                    notes=g.notes)
    return next(c for c in plan.settled.status["conditions"] if c["type"] == "Synced")


def test_synced_names_an_unresolved_reference() -> None:
    waiting = synced_after(UnresolvedReference("unresolved reference(s): roleRef: Role 'app' "
                                               "not found in namespace 'team-a'"))
    assert waiting["status"] == "False"
    assert waiting["reason"] == Reasons.REFERENCE_UNRESOLVED == "ReferenceUnresolved"
    assert waiting["message"].startswith("unresolved reference(s): roleRef")
    other = synced_after(ExternalError("connection refused", reason="ProviderUnavailable"))
    assert other["reason"] == Reasons.RECONCILE_ERROR


def ready(name: str, labels: dict[str, str] | None = None, *, is_ready: bool = True
          ) -> dict[str, Any]:
    """A Role as stored, Ready or not."""
    return {"metadata": {"name": name, "namespace": NS, "labels": labels or {}},
            "spec": {"forProvider": {}},
            "status": {"externalName": f"{name}_pg", "conditions": [
                {"type": "Ready", "status": "True" if is_ready else "False"}]}}


def grant(name: str, **forprovider: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": NS},
            "spec": {"forProvider": {"privileges": ["CONNECT"], **forprovider}}}


def test_the_index_wakes_on_ready_on_a_selector_match_and_when_a_match_goes() -> None:
    index = ReferenceIndex()
    index.update("Grant", GrantParameters, grant("g", roleRef={"name": "app"},
                                                 database="db"), (NS, "g"))
    index.update("Grant", GrantParameters, grant("s", roleSelector={
        "matchLabels": {"team": "x"}}, database="db"), (NS, "s"))
    assert index.woken(API_VERSION, "Role", None, ready("app", is_ready=False)) == []
    assert index.woken(API_VERSION, "Role", ready("app", is_ready=False), ready("app")) == [
        ("Grant", (NS, "g"))]
    assert index.woken(API_VERSION, "Role", ready("app"), ready("app")) == []
    assert index.woken(API_VERSION, "Role", None, ready("x1", {"team": "x"})) == [
        ("Grant", (NS, "s"))]
    # A matching Role goes: the one left may now be the only match.
    assert index.woken(API_VERSION, "Role", ready("x2", {"team": "x"}), None) == [
        ("Grant", (NS, "s"))]
    index.update("Grant", GrantParameters, None, (NS, "g"))
    assert index.woken(API_VERSION, "Role", None, ready("app")) == []


def test_the_harness_follows_only_kinds_that_reference_or_are_referenced() -> None:
    from lifecycle.machines.postgres import kinds

    found = {kind.kind: kind for kind, _ in kinds()}
    wakeups = ReferenceWakeups(found)
    assert set(wakeups.referrers) == {k for k in found if k not in ("Role", "Database")}
    assert (API_VERSION, "Role") in wakeups.targets
    assert all(wakeups.follows(kind) for kind in found.values())


def converge(env: Environment) -> tuple[float, float, float]:
    """A Grant by reference backs off; then its Role and Database are applied. Returns
    (when the Grant's next pass was due by its backoff, when the later dependency turned
    Ready, when the Grant's next pass ran), in virtual seconds since the start."""
    env.namespace(NS)
    doc = manifest("Grant", "g", namespace=NS, privileges=["CONNECT"])
    doc["spec"]["forProvider"].update(roleRef={"name": "app"}, databaseRef={"name": "db"})
    env.apply(doc)
    start = env.clock.now()
    env.advance(100)  # five failed passes: the next is due in tens of seconds
    queued = env.queued("Grant", "g", NS)
    assert queued is not None and queued.reason == "Backoff" and queued.delay > 10, queued
    synced = env.condition("Grant", "g", "Synced", NS)
    assert synced is not None and synced.reason == "ReferenceUnresolved", synced
    backoff_due = 100 + queued.delay
    seen = env.steps.total
    env.apply(manifest("Role", "app", namespace=NS))
    env.apply(manifest("Database", "db", namespace=NS))
    env.run_until_idle()
    steps = list(env.steps)[-(env.steps.total - seen):]
    deps = max(s.time for s in steps if s.kind in ("Role", "Database") and s.after == "ready"
               and s.before != "ready")
    first = next(s for s in steps if s.kind == "Grant")
    assert env.condition("Grant", "g", "Ready", NS).status.value == "True"

    def since(moment: datetime) -> float:
        return (moment - start).total_seconds()

    return backoff_due, since(deps), since(first.time)


@pytest.mark.postgres
def test_a_grant_is_reconciled_as_soon_as_its_references_turn_ready(env: Environment) -> None:
    backoff_due, deps, grant_pass = converge(env)
    assert deps < backoff_due
    assert grant_pass == deps, (backoff_due, deps, grant_pass)


@pytest.mark.postgres
def test_without_the_wake_up_the_grant_waits_out_its_backoff(
        env: Environment, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ReferenceWakeups, "changed", lambda self, kind, old, new: [])
    backoff_due, deps, grant_pass = converge(env)
    assert deps < backoff_due
    assert grant_pass == pytest.approx(backoff_due)


def test_a_for_provider_with_reference_rules_gets_no_empty_default() -> None:
    """kube-apiserver checks a default against the schema's CEL rules: ``{}`` under
    ``database, databaseRef or databaseSelector is required`` makes the CRD invalid."""
    from lifecycle.machines.postgres import kinds
    from lifecycle.schema.crds import crds, empty_default

    rule = {"rule": "has(self.a)", "message": "a is required"}
    assert "default" not in empty_default({"type": "object", "x-kubernetes-validations": [rule]})
    assert empty_default({"type": "object"})["default"] == {}
    for doc in crds([kind for kind, _ in kinds()]):
        spec = doc["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
        found = spec["properties"].get("forProvider") or {}
        if found.get("x-kubernetes-validations"):
            assert "default" not in found, doc["metadata"]["name"]
