"""Every status key the engine and the claim reconciler write is declared by the CRD.

A key the generated CRD does not declare is pruned by a real API server on
every write, silently. Two checks: statically, every key the engine owns
(:data:`lifecycle.core.status.ENGINE_KEYS`) is in the status schema of every
registered managed kind; dynamically, a claim is bound, used and released in
the harness, served from the generated CRDs, and every status body the claim
and managed reconcilers send is checked against the schema. Both are shown to
catch a key missing from the schema.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable
from typing import Any

import pytest

from lifecycle import registry
from lifecycle.core.kind import Kind
from lifecycle.core.status import ENGINE_KEYS
from lifecycle.machines.claim import DATABASE_BINDING, ClaimMachine
from lifecycle.providers.simcloud.scenarios.harness import claim_environment
from lifecycle.schema.crds import crd
from lifecycle.sim.crds import apply_crd
from lifecycle.sim.schema import unknown_fields
from lifecycle.testing.claims import ClaimEnvironment, claim_manifest, class_manifest

CLAIM = DATABASE_BINDING.claim.kind


def status_properties(doc: dict[str, Any]) -> dict[str, Any]:
    schema = doc["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema["properties"]["status"].get("properties", {})


def managed_kinds() -> list[Kind]:
    """Registered kinds whose status the engine's settle step writes (claims have their own)."""
    found = [r.kind for r in registry.registrations() if isinstance(r.kind, Kind)
             and not issubclass(r.kind.machine, ClaimMachine)]
    assert {k.kind for k in found} >= {"DatabaseInstance", "Role", "Database", "Grant"}
    return found


@pytest.mark.parametrize("kind", managed_kinds(), ids=lambda k: k.kind)
def test_every_engine_status_key_is_declared_by_every_managed_kind(kind: Kind) -> None:
    declared = set(status_properties(crd(kind)))
    assert declared >= ENGINE_KEYS, sorted(ENGINE_KEYS - declared)


def missing_engine_keys(doc: dict[str, Any]) -> set[str]:
    return set(ENGINE_KEYS) - set(status_properties(doc))


def test_the_static_check_catches_a_key_missing_from_the_schema() -> None:
    doc = copy.deepcopy(crd(managed_kinds()[0]))
    del status_properties(doc)["operationSince"]
    assert missing_engine_keys(doc) == {"operationSince"}


# ------------------------------------------------------------------ claims
def record_status_writes(world: ClaimEnvironment) -> tuple[list[str], set[tuple[str, str]]]:
    """Wrap the store's status writes; return (pruned paths, (kind, key) pairs written)."""
    api = world.api
    pruned: list[str] = []
    written: set[tuple[str, str]] = set()

    def wrap(verb: str) -> Callable[..., Any]:
        original = getattr(api, verb)

        def recorded(obj: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
            rtype = api.resource_type(obj["apiVersion"], obj["kind"])
            status = obj.get("status")
            if isinstance(status, dict) and rtype.kind in (CLAIM, "DatabaseInstance"):
                written.update((rtype.kind, key) for key in status)
                pruned.extend(f"{rtype.kind} {verb}: {path}"
                              for path in unknown_fields({"status": status}, rtype.schema))
            return original(obj, *args, **kwargs)
        return recorded

    for verb in ("replace_status", "create", "replace"):
        setattr(api, verb, wrap(verb))
    return pruned, written


def claim_lifecycle(world: ClaimEnvironment) -> None:
    """Bind a claim through a class, change it, then delete it."""
    world.env.namespace("team-a")
    world.apply_class(class_manifest("gold", labels={"tier": "gold"}, default=True))
    world.apply(claim_manifest("app", "team-a"))
    world.run()
    assert world.env.state(CLAIM, "app", "team-a") == "bound"
    world.env.delete(CLAIM, "app", "team-a")
    world.run()
    assert not world.env.exists(CLAIM, "app", "team-a")


def test_nothing_the_claim_and_managed_reconcilers_write_in_status_is_pruned() -> None:
    world = claim_environment(DATABASE_BINDING)
    pruned, written = record_status_writes(world)
    claim_lifecycle(world)
    assert pruned == []
    claim_keys = {key for kind, key in written if kind == CLAIM}
    assert {"state", "conditions", "phase", "observedGeneration"} <= claim_keys, claim_keys
    assert {key for kind, key in written if kind == "DatabaseInstance"}, "managed writes seen"


def test_the_claim_check_catches_a_status_key_missing_from_the_claim_schema() -> None:
    world = claim_environment(DATABASE_BINDING)
    broken = copy.deepcopy(crd(DATABASE_BINDING.claim))
    del status_properties(broken)["phase"]
    apply_crd(world.api, broken)
    pruned, _ = record_status_writes(world)
    with contextlib.suppress(AssertionError):  # a pruned key may break the run itself
        claim_lifecycle(world)
    assert any(p.endswith("status.phase") and p.startswith(CLAIM) for p in pruned), pruned
