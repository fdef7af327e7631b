"""The claim machine's side effects, rule by rule (:class:`lifecycle.runtime.claims.ClaimEffects`).

Selecting a class writes ``spec.classRef`` and says why in an Event; provisioning
records ``spec.resourceRef`` first, then creates the managed resource, adopting one of
that name only when it already points at this claim; retaining a resource clears its
``claimRef`` and marks it released. Each refusal is a handled error with its reason.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from lifecycle.core.claims import RELEASED
from lifecycle.core.errors import HandledError
from lifecycle.kube.errors import AlreadyExists, NotFound
from lifecycle.runtime.claims import ClaimEffects


class Store:
    """What the effects use of a claim store: the claim's spec, the managed resources by
    namespace and name, creates (failing as told) and Events."""

    def __init__(self, create_error: Exception | None = None) -> None:
        self.spec: dict[str, Any] = {}
        self.resources: dict[tuple[str, str], dict[str, Any]] = {}
        self.created: list[dict[str, Any]] = []
        self.events: list[tuple[str, str, str]] = []
        self.create_error = create_error
        self.binding = SimpleNamespace(managed=SimpleNamespace(kind="DatabaseInstance"))
        self.api = SimpleNamespace(create=self.create)

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        if self.create_error is not None:
            raise self.create_error
        self.created.append(obj)
        return obj

    def update_claim(self, run: Any, change: Any) -> None:
        change(self.spec)

    def get_resource(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.resources.get((namespace, name))

    def update_resource(self, ref: tuple[str, str], change: Any) -> None:
        change(self.resources[ref])

    def event(self, obj: Any, type_: str, reason: str, message: str) -> None:
        self.events.append((type_, reason, message))


CLAIM = {"metadata": {"name": "orders", "namespace": "team", "uid": "claim-uid"}}
DESIRED = {"apiVersion": "db.lifecycle.dev/v1alpha1", "kind": "DatabaseInstance",
           "metadata": {"name": "orders-x1", "namespace": "pool"}, "spec": {}}


def effects(store: Store, *, desired: Any = DESIRED, selection: Any = None,
            resource: Any = None) -> ClaimEffects:
    run = SimpleNamespace(obj=CLAIM, desired=desired, selection=selection, dirty=False)
    facts = SimpleNamespace(uid="claim-uid", resource=resource)
    return ClaimEffects(store, run, facts)  # type: ignore[arg-type]


def refusal(call: Any) -> tuple[str, str]:
    with pytest.raises(HandledError) as refused:
        call()
    return refused.value.reason, str(refused.value)


def test_provisioning_records_the_reference_then_creates_and_says_so() -> None:
    store = Store()
    effects(store).provision()
    assert store.spec == {"resourceRef": {"namespace": "pool", "name": "orders-x1"}}
    assert store.created == [DESIRED]
    assert store.events == [("Normal", "Provisioned", "created DatabaseInstance pool/orders-x1")]


def test_provisioning_without_a_class_is_class_not_found() -> None:
    store = Store()
    assert refusal(lambda: effects(store, desired=None).provision()) == (
        "ClassNotFound", "no class to provision from")
    assert store.spec == {} and store.created == []


def test_a_resource_of_that_name_is_adopted_only_when_it_points_at_this_claim() -> None:
    store = Store(create_error=AlreadyExists("exists"))
    store.resources[("pool", "orders-x1")] = {
        "metadata": {"name": "orders-x1", "namespace": "pool", "uid": "r-uid"},
        "spec": {"claimRef": {"namespace": "team", "name": "orders", "uid": "claim-uid"}}}
    effects(store).provision()  # ours, from a pass that died after the create
    assert store.events == [("Normal", "Provisioned", "created DatabaseInstance pool/orders-x1")]
    for other in ({"claimRef": {"uid": "another-claim"}}, {}):
        store.resources[("pool", "orders-x1")]["spec"] = other
        assert refusal(lambda: effects(store).provision()) == (
            "ResourceNameTaken", "pool/orders-x1 exists and is not this claim's")
    del store.resources[("pool", "orders-x1")]  # gone again by the time it is read
    assert refusal(lambda: effects(store).provision()) == (
        "ResourceNameTaken", "pool/orders-x1 exists and is not this claim's")


def test_provisioning_into_a_missing_namespace_says_which() -> None:
    store = Store(create_error=NotFound("namespaces \"pool\" not found"))
    assert refusal(lambda: effects(store).provision()) == (
        "ResourceNamespaceMissing", "namespace pool for provisioned resources does not exist")
    assert store.events == []


def test_selecting_a_class_writes_it_and_says_why() -> None:
    store = Store()
    selection = SimpleNamespace(class_name="gold", reason="ClassSelected",
                                message="selected class gold")
    chosen = effects(store, selection=selection)
    chosen.select_class()
    assert store.spec == {"classRef": {"name": "gold"}}
    assert chosen.run.dirty is True
    assert store.events == [("Normal", "ClassSelected", "selected class gold")]


@pytest.mark.parametrize("selection", [None, SimpleNamespace(class_name=None)])
def test_selecting_without_a_class_is_not_scheduled(selection: Any) -> None:
    store = Store()
    assert refusal(lambda: effects(store, selection=selection).select_class()) == (
        "NotScheduled", "no class was selected")
    assert store.spec == {} and store.events == []


def test_retaining_clears_this_claims_reference_and_marks_the_resource_released() -> None:
    store = Store()
    view = SimpleNamespace(namespace="pool", name="orders-x1")
    store.resources[("pool", "orders-x1")] = {
        "metadata": {"name": "orders-x1", "namespace": "pool", "uid": "r-uid"},
        "spec": {"claimRef": {"uid": "claim-uid"}, "forProvider": {}}}
    effects(store, resource=view).retain_resource()
    kept = store.resources[("pool", "orders-x1")]
    assert kept["spec"] == {"forProvider": {}}
    assert kept["metadata"]["annotations"] == {RELEASED: "team/orders"}
    # A resource another claim holds by now is left as it is.
    taken = {"metadata": {"name": "orders-x1", "uid": "r-uid"},
             "spec": {"claimRef": {"uid": "other"}}}
    store.resources[("pool", "orders-x1")] = {**taken, "spec": dict(taken["spec"])}
    effects(store, resource=view).retain_resource()
    assert store.resources[("pool", "orders-x1")] == taken
