"""Nothing a claim names crosses a namespace unless a cluster-scoped class says so (issue 28).

The attack: a DatabaseClaim in ``team-b`` with ``resourceRef: team-a/a-db``
bound team A's instance and copied its password into ``team-b``. Now such a
reference is a terminal ``CrossNamespaceRefNotAllowed`` (nothing bound,
nothing copied, team A's instance byte for byte as it was, and the message
does not tell whether it exists), unless a ``DatabaseInstanceClass``'s
``crossNamespaceBinding`` names the claim's namespace (or selects it by
label) and the resource's.
"""

from __future__ import annotations

from typing import Any

import pytest

from lifecycle.core.claim_namespaces import (
    CROSS_NAMESPACE_REFUSED,
    CrossNamespaceBinding,
    first_grant,
)
from lifecycle.core.claims import ClaimFacts, ResourceClass, choose_claim_event
from lifecycle.core.errors import HandledError, TerminalError
from lifecycle.machines.claim import DATABASE_BINDING
from lifecycle.providers.simcloud.scenarios.harness import claim_environment, database_manifest
from lifecycle.testing.claims import claim_manifest, class_manifest

CLASS = ("db.lifecycle.dev/v1alpha1", "DatabaseInstanceClass")


@pytest.fixture
def world() -> Any:
    w = claim_environment(DATABASE_BINDING)
    for namespace in ("team-a", "team-b", "team-c"):
        w.env.namespace(namespace)
    return w


def team_a_instance(world: Any, claimed: bool = False) -> dict[str, Any]:
    """Team A's own DatabaseInstance ``team-a/a-db``, Ready (and bound to A's claim)."""
    world.apply(database_manifest("a-db", "team-a"))
    world.run()
    if claimed:
        world.apply(claim_manifest("mine", "team-a", resource=("team-a", "a-db")))
        world.run()
        assert world.env.state("DatabaseClaim", "mine", "team-a") == "bound"
    return world.env.get("DatabaseInstance", "a-db", "team-a")


def sharing(name: str = "share-a", **binding: Any) -> dict[str, Any]:
    manifest = class_manifest(name)
    manifest["crossNamespaceBinding"] = binding
    return manifest


def ready(world: Any, name: str, namespace: str) -> Any:
    return world.env.condition("DatabaseClaim", name, "Ready", namespace)


@pytest.mark.parametrize("claimed", [False, True], ids=["free", "bound-to-team-a"])
def test_a_claim_cannot_bind_another_namespaces_instance(world: Any, claimed: bool) -> None:
    victim = team_a_instance(world, claimed)
    secret_before = world.api.get("v1", "Secret", "team-a", "a-db-conn")
    world.apply(claim_manifest("steal", "team-b", resource=("team-a", "a-db")))
    world.run()
    assert world.env.state("DatabaseClaim", "steal", "team-b") == "unbound"
    cond = ready(world, "steal", "team-b")
    assert cond.reason == CROSS_NAMESPACE_REFUSED
    assert "crossNamespaceBinding" in cond.message and "team-a/mine" not in cond.message
    synced = world.env.condition("DatabaseClaim", "steal", "Synced", "team-b")
    assert (synced.status.value, synced.reason) == ("False", "ReconcileError")
    assert any(e["reason"] == CROSS_NAMESPACE_REFUSED and e["type"] == "Warning"
               for e in world.env.events("steal"))
    # Nothing copied into team-b, team A's instance and Secret byte for byte as they were.
    assert world.claim_secret("steal", "team-b") is None
    assert all(s["metadata"]["namespace"] != "team-b"
               for s in world.api.list("v1", "Secret")[0])
    assert world.env.get("DatabaseInstance", "a-db", "team-a") == victim
    assert world.api.get("v1", "Secret", "team-a", "a-db-conn") == secret_before
    # The refusal is terminal: later passes do not retry it.
    steps = world.advance(600)
    assert not [s for s in steps if s.kind == "DatabaseClaim" and s.name == "steal"]


def test_a_missing_resource_elsewhere_gets_the_same_refusal(world: Any) -> None:
    """The answer does not tell team B whether team A has such an instance."""
    world.apply(claim_manifest("probe", "team-b", resource=("team-a", "no-such-db")))
    world.run()
    assert ready(world, "probe", "team-b").reason == CROSS_NAMESPACE_REFUSED


def test_a_claim_binds_its_own_namespaces_instance_without_any_class(world: Any) -> None:
    team_a_instance(world)
    world.apply(claim_manifest("mine", "team-a", resource=("team-a", "a-db")))
    world.run()
    assert world.env.state("DatabaseClaim", "mine", "team-a") == "bound"
    assert world.claim_secret("mine", "team-a") is not None


@pytest.mark.parametrize("binding", [
    {"resourceNamespaces": ["team-a"], "claimNamespaces": ["team-b"]},
    {"resourceNamespaces": ["team-a"], "claimNamespaceSelector": {
        "matchLabels": {"shares/team-a": "yes"}}},
], ids=["by-name", "by-namespace-label"])
def test_a_class_allows_it_explicitly(world: Any, binding: dict[str, Any]) -> None:
    team_a_instance(world)
    namespace = world.api.get("v1", "Namespace", None, "team-b")
    namespace["metadata"]["labels"] = {"shares/team-a": "yes"}
    world.api.replace(namespace)
    world.apply_class(sharing(**binding))
    world.apply(claim_manifest("granted", "team-b", resource=("team-a", "a-db")))
    world.apply(claim_manifest("other", "team-c", resource=("team-a", "a-db")))
    world.run()
    assert world.env.state("DatabaseClaim", "granted", "team-b") == "bound"
    assert world.claim_secret("granted", "team-b") is not None
    assert ready(world, "other", "team-c").reason == CROSS_NAMESPACE_REFUSED


def test_a_grant_for_other_resource_namespaces_does_not_apply(world: Any) -> None:
    team_a_instance(world)
    world.apply_class(sharing(claimNamespaces=["team-b"]))  # resources of lifecycle-system
    world.apply(claim_manifest("steal", "team-b", resource=("team-a", "a-db")))
    world.run()
    assert ready(world, "steal", "team-b").reason == CROSS_NAMESPACE_REFUSED


def test_withdrawing_the_grant_withdraws_the_copy(world: Any) -> None:
    team_a_instance(world)
    world.apply_class(sharing(resourceNamespaces=["team-a"], claimNamespaces=["team-b"]))
    world.apply(claim_manifest("granted", "team-b", resource=("team-a", "a-db")))
    world.run()
    assert world.claim_secret("granted", "team-b") is not None
    world.api.delete(*CLASS, None, "share-a")
    world.advance(120)  # a bound claim looks again at its poll interval
    assert world.env.state("DatabaseClaim", "granted", "team-b") == "lost"
    assert ready(world, "granted", "team-b").reason == CROSS_NAMESPACE_REFUSED
    assert world.claim_secret("granted", "team-b") is None
    # Deleting the claim still releases what it held.
    world.env.delete("DatabaseClaim", "granted", "team-b")
    world.run()
    assert world.env.get("DatabaseInstance", "a-db", "team-a") is not None


def test_dynamic_provisioning_across_namespaces_needs_no_grant(world: Any) -> None:
    world.apply_class(class_manifest("standard", default=True))
    world.apply(claim_manifest("app", "team-b"))
    world.run()
    assert world.env.state("DatabaseClaim", "app", "team-b") == "bound"
    ref = world.claim("app", "team-b")["spec"]["resourceRef"]
    assert ref["namespace"] == "lifecycle-system"


# ------------------------------------------------------------------ the pure parts
@pytest.mark.parametrize(("value", "part"), [
    ("team-b", "must be"), ({"claimNamespaces": "team-b"}, "claimNamespaces"),
    ({"claimNamespaces": [""]}, "claimNamespaces"), ({"resourceNamespaces": [3]},
                                                     "resourceNamespaces"),
    ({"claimNamespaceSelector": {"matchExpressions": []}}, "claimNamespaceSelector"),
    ({"claimNamespaceSelector": {"matchLabels": {"a": 1}}}, "matchLabels"),
    ({"everyone": True}, "must be"),
])
def test_a_malformed_grant_is_an_invalid_class(value: Any, part: str) -> None:
    with pytest.raises(HandledError) as caught:
        ResourceClass.from_object({"metadata": {"name": "c"}, "crossNamespaceBinding": value})
    assert caught.value.reason == "InvalidClass" and part in caught.value.message


def test_grants() -> None:
    parsed = ResourceClass.from_object({"metadata": {"name": "c"}, "crossNamespaceBinding": {
        "claimNamespaces": ["team-b"]}})
    assert parsed.cross_namespace == CrossNamespaceBinding(("lifecycle-system",), ("team-b",))
    everyone = CrossNamespaceBinding(("team-a",), (), {})
    assert everyone.allows("anyone", {}, "team-a") and not everyone.allows("x", {}, "team-z")
    assert not everyone.allows("anyone", None, "team-a")  # labels unreadable: refused
    calls: list[int] = []

    def labels() -> dict[str, str]:
        calls.append(1)
        return {}

    assert first_grant("team-b", "team-a", [("z", everyone), ("a", everyone)], labels) == "a"
    assert calls == [1]
    assert first_grant("team-b", "team-a", [], labels) is None


def test_a_refusal_withdraws_a_bound_claims_copy_and_keeps_an_unbound_one_pending() -> None:
    refusal = TerminalError("no", reason=CROSS_NAMESPACE_REFUSED)
    assert choose_claim_event(ClaimFacts("unbound", "u", problem=refusal)).event == "pending"
    for state in ("binding", "bound", "lost"):
        assert choose_claim_event(ClaimFacts(state, "u", problem=refusal)).event == "lose"
