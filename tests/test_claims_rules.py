"""The pure claim model and ownership rules: names, references, the status a pass leaves."""

from __future__ import annotations

import pytest

from lifecycle.core.claims import (
    ClaimFacts,
    ClassSelection,
    ReclaimPolicy,
    ResourceView,
    choose_claim_event,
    claim_secret_name,
    dynamic_name,
)
from lifecycle.core.decide import Choice
from lifecycle.core.errors import HandledError


def test_dynamic_name_is_namespace_name_and_uid_prefix() -> None:
    claim = {"metadata": {"namespace": "team", "name": "db", "uid": "0123456789"}}
    assert dynamic_name(claim) == "team-db-01234567"
    long = {"metadata": {"namespace": "n", "name": "a" * 300, "uid": "u" * 10}}
    assert dynamic_name(long) == "n-" + "a" * 238 + "-uuuuuuuu"
    trailing = {"metadata": {"namespace": "n", "name": "a" * 237 + "-.x", "uid": "uid"}}
    assert dynamic_name(trailing) == "n-" + "a" * 237 + "-uid"
    assert dynamic_name({"metadata": {"name": "db", "uid": "u"}}) == "-db-u"


def test_claim_secret_name() -> None:
    meta = {"name": "db"}
    assert claim_secret_name({"metadata": meta}) == "db-connection"
    for ref in (None, "x", {}, {"name": ""}, {"name": 5}):
        assert claim_secret_name({"metadata": meta,
                                  "spec": {"writeConnectionSecretToRef": ref}}) == "db-connection"
    assert claim_secret_name({"metadata": meta,
                              "spec": {"writeConnectionSecretToRef": {"name": "s"}}}) == "s"


UID = "claim-uid"
REF = ("ns", "db")


def view(claim_uid: str | None = UID, *, ready: bool = True, deleting: bool = False,
         released: bool = False, policy: ReclaimPolicy = ReclaimPolicy.DELETE) -> ResourceView:
    """A managed resource as the claim reconciler sees it."""
    return ResourceView("ns", "db", "res-uid", claim_uid, "team/other", ready, deleting,
                        released, policy, ("ns", "db-connection"))


@pytest.mark.parametrize(("facts", "choice"), [
    (ClaimFacts("bound", UID, deleting=True, resource_ref=REF, resource=view()),
     Choice('release', 'ClaimDeleted', 'claim deleted; reclaim policy Delete for ns/db')),
    (ClaimFacts("bound", UID, deleting=True, resource_ref=REF,
                resource=view(policy=ReclaimPolicy.RETAIN)),
     Choice('release', 'ClaimDeleted', 'claim deleted; reclaim policy Retain for ns/db')),
    (ClaimFacts("released", UID, deleting=True, resource_ref=REF, resource=view()),
     Choice('wait', 'ReclaimPending', 'waiting for ns/db to be deleted')),
    (ClaimFacts("bound", UID, deleting=True, resource_ref=REF, resource=view("other")),
     Choice('gone', 'NothingToReclaim', 'no managed resource is bound to this claim')),
    (ClaimFacts("unbound", UID, problem=HandledError("broken", reason="InvalidClass")),
     Choice('pending', 'InvalidClass', 'broken')),
    (ClaimFacts("bound", UID, resource_ref=REF,
                problem=HandledError("broken", reason="InvalidClass")),
     Choice(None, 'InvalidClass', 'broken')),
    (ClaimFacts("bound", UID),
     Choice('lose', 'ResourceRefRemoved', 'spec.resourceRef was removed')),
    (ClaimFacts("unbound", UID),
     Choice('pending', 'NotScheduled', 'no class selected yet')),
    (ClaimFacts("unbound", UID,
                selection=ClassSelection("schedule", "gold", "ClassScheduled", "m")),
     Choice('schedule', 'ClassScheduled', 'm')),
    (ClaimFacts("unbound", UID, selection=ClassSelection(None, None, "NoMatchingClass", "m")),
     Choice('pending', 'NoMatchingClass', 'm')),
    (ClaimFacts("unbound", UID, class_ref="gold"),
     Choice('provision', 'ProvisionRequested', 'provisioning a managed resource from class gold')),
    (ClaimFacts("unbound", UID, resource_ref=REF, dynamic=True, class_ref="gold", class_ready=True),
     Choice('provision', 'ProvisionRequested', 'creating ns/db from class gold')),
    (ClaimFacts("binding", UID, resource_ref=REF, dynamic=True, class_ref="gold", class_ready=True),
     Choice('provision', 'ProvisionRequested', 'creating ns/db from class gold')),
    (ClaimFacts("bound", UID, resource_ref=REF, dynamic=True, class_ref="gold", class_ready=True),
     Choice('lose', 'ResourceVanished', 'managed resource ns/db no longer exists')),
    (ClaimFacts("unbound", UID, resource_ref=REF, dynamic=True,
                class_ref="gold", class_ready=False),
     Choice('pending', 'ResourceNotFound', 'managed resource ns/db not found')),
    (ClaimFacts("unbound", UID, resource_ref=REF, dynamic=False,
                class_ref="gold", class_ready=True),
     Choice('pending', 'ResourceNotFound', 'managed resource ns/db not found')),
    (ClaimFacts("binding", UID, resource_ref=REF),
     Choice('lose', 'ResourceVanished', 'managed resource ns/db no longer exists')),
    (ClaimFacts("binding", UID, resource_ref=REF, resource=view(None)),
     Choice('lose', 'ResourceUnbound', 'ns/db no longer points at this claim')),
    (ClaimFacts("unbound", UID, resource_ref=REF,
                resource=view(None, released=True, deleting=True)),
     Choice('pending', 'ResourceReleased',
            'ns/db was released by another claim; an administrator must remove its '
            'lifecycle.dev/released annotation before it can be bound again')),
    (ClaimFacts("unbound", UID, resource_ref=REF, resource=view(None, deleting=True)),
     Choice('pending', 'ResourceDeleting', 'ns/db is being deleted')),
    (ClaimFacts("unbound", UID, resource_ref=REF, resource=view(None)),
     Choice('claim', 'ClaimRequested', 'binding to existing resource ns/db')),
    (ClaimFacts("unbound", UID, resource_ref=REF, resource=view("other")),
     Choice('pending', 'ResourceBoundElsewhere', 'ns/db is bound to claim team/other')),
    (ClaimFacts("binding", UID, resource_ref=REF, resource=view("other")),
     Choice('lose', 'ResourceBoundElsewhere', 'ns/db is now bound to claim team/other')),
    (ClaimFacts("unbound", UID, resource_ref=REF, resource=view(deleting=True)),
     Choice('pending', 'ResourceDeleting', 'ns/db is being deleted')),
    (ClaimFacts("bound", UID, resource_ref=REF, resource=view(deleting=True)),
     Choice('lose', 'ResourceDeleting', 'ns/db is being deleted')),
    (ClaimFacts("unbound", UID, resource_ref=REF, resource=view()),
     Choice('claim', 'ClaimRequested', 'ns/db already points at this claim')),
    (ClaimFacts("binding", UID, resource_ref=REF, resource=view(), secret_ready=True),
     Choice('bind', 'ResourceReady', 'bound to ns/db')),
    (ClaimFacts("binding", UID, resource_ref=REF, resource=view(ready=False), secret_ready=True),
     Choice('wait', 'ResourceNotReady', 'waiting for ns/db to be Ready')),
    (ClaimFacts("lost", UID, resource_ref=REF, resource=view(), secret_ready=False),
     Choice('lose', 'ResourceNotReady', 'ns/db is not Ready')),
    (ClaimFacts("bound", UID, resource_ref=REF, resource=view(), secret_ready=False),
     Choice('wait', 'ResourceNotReady', 'waiting for ns/db to be Ready')),
])
def test_choose_claim_event_is_exact(facts: ClaimFacts, choice: Choice) -> None:
    assert choose_claim_event(facts) == choice
