"""The resource-claim lifecycle, and the bundled database claim.

A claim is an application team's namespaced request for a service. The
claim reconciler (:mod:`lifecycle.runtime.claims`) observes the claim, its class and
the managed resource it names, picks one event with
:func:`lifecycle.core.claims.choose_claim_event`, and fires it through this
machine's compiled table. Events are named after what was observed:

========= =====================================================================
event     chosen when
========= =====================================================================
schedule  no class, no resource, a class selector matches a class
default   no class, no resource, no selector, one class is annotated default
pending   nothing to bind yet: no class matches, the named resource is
          missing, released or bound to another claim, or the class is broken
provision a class is chosen and no resource is named (or the dynamically
          named one is missing): create a managed resource from the class
claim     the named managed resource exists and is free (static binding),
          or already points back at this claim
wait      the bound resource is not Ready yet (or, when released, is still
          being deleted)
bind      the resource points back at this claim and is Ready: propagate
          its connection Secret
lose      a bound resource vanished, is being deleted, or now points at
          another claim
release   the claim is being deleted and its resource still points at it;
          the reclaim policy picks delete or retain
gone      the claim is being deleted and nothing is left to reclaim
========= =====================================================================
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs
from statemachine import State

from lifecycle.core.claims import (
    ClaimBinding,
    ClaimFacts,
    ClassKind,
    ResourceClass,
    configure_from_class,
    configure_object_meta,
)
from lifecycle.core.errors import TerminalError
from lifecycle.core.kind import Kind
from lifecycle.core.machine import LifecycleMachine, Timing
from lifecycle.machines import database

if TYPE_CHECKING:
    from lifecycle.runtime.claims import ClaimEffects

__all__ = [
    "DATABASE_BINDING", "ClaimMachine", "DatabaseClaim", "DatabaseClaimParameters",
    "DatabaseInstanceClass", "configure_database",
]


class ClaimMachine(LifecycleMachine):
    """Unbound, Binding, Bound, Lost, Released and the final Deleted.

    Scheduling and defaulting are self-transitions of Unbound that write the
    chosen class into the claim; deletion pre-empts every state; the reclaim
    policy (a guard) decides whether releasing deletes or retains the
    managed resource.
    """

    #: Objects of kinds run by this machine are resource claims: the CRD generator
    #: (:mod:`lifecycle.schema.crds`) gives them a claim's spec and status.
    is_claim = True

    unbound = State("Unbound", initial=True)
    binding = State("Binding")
    bound = State("Bound")
    lost = State("Lost")
    released = State("Released")
    deleted = State("Deleted", final=True)

    schedule = unbound.to.itself(on="select_class")
    default = unbound.to.itself(on="select_class")
    pending = unbound.to.itself()
    provision = (
        unbound.to(binding, on="provision_resource")
        | binding.to.itself(on="provision_resource")
    )
    claim = unbound.to(binding, on="claim_resource")
    wait = binding.to.itself() | bound.to.itself() | released.to.itself()
    bind = (
        binding.to(bound, on="propagate_secret")
        | bound.to.itself(on="propagate_secret")
        | lost.to(bound, on="propagate_secret")
    )
    lose = (
        binding.to(lost, on="withdraw_secret")
        | bound.to(lost, on="withdraw_secret")
        | lost.to.itself(on="withdraw_secret")
    )
    release = (
        # From Unbound too: a crash after provisioning but before the Binding status
        # write leaves a resource that is ours while the stored state is Unbound.
        unbound.to(released, cond="reclaim_delete", on="delete_resource")
        | unbound.to(released, on="retain_resource")
        | binding.to(released, cond="reclaim_delete", on="delete_resource")
        | binding.to(released, on="retain_resource")
        | bound.to(released, cond="reclaim_delete", on="delete_resource")
        | bound.to(released, on="retain_resource")
        | lost.to(released, cond="reclaim_delete", on="delete_resource")
        | lost.to(released, on="retain_resource")
    )
    gone = (
        unbound.to(deleted, on="withdraw_secret")
        | binding.to(deleted, on="withdraw_secret")
        | bound.to(deleted, on="withdraw_secret")
        | lost.to(deleted, on="withdraw_secret")
        | released.to(deleted, on="withdraw_secret")
    )

    timing = Timing(
        poll=60.0,
        wait={"binding": 2.0, "released": 1.0},
        max_in_state={"binding": 1800.0, "released": 1800.0},
    )
    ready_condition = {
        "unbound": ("False", "Unbound"),
        "binding": ("False", "Binding"),
        "bound": ("True", "Bound"),
        "lost": ("False", "Lost"),
        "released": ("False", "Released"),
        "deleted": ("False", "Deleted"),
    }
    state_docs = {
        "unbound": "no managed resource chosen yet (scheduling, defaulting, or refused)",
        "binding": "managed resource named and pointing back; waiting for it to be Ready",
        "bound": "managed resource Ready; its connection Secret is propagated",
        "lost": "the bound resource vanished or was bound elsewhere; Secret withdrawn",
        "released": "claim deleted; reclaim policy applied, waiting for the resource to go",
        "deleted": "nothing left to reclaim; claim Secret and finalizer removed",
    }

    def reclaim_delete(self, facts: ClaimFacts) -> bool:
        """Guard: the bound resource's reclaim policy is Delete."""
        return facts.reclaim_delete

    def select_class(self, effects: ClaimEffects) -> None:
        """Action: write the scheduled or defaulted class into ``spec.classRef``."""
        effects.select_class()

    def provision_resource(self, effects: ClaimEffects) -> None:
        """Action: create the managed resource from the class (dynamic provisioning)."""
        effects.provision()

    def claim_resource(self, effects: ClaimEffects) -> None:
        """Action: point the named managed resource back at this claim (static binding)."""
        effects.claim()

    def propagate_secret(self, effects: ClaimEffects) -> None:
        """Action: copy the resource's connection Secret into the claim's namespace."""
        effects.propagate()

    def withdraw_secret(self, effects: ClaimEffects) -> None:
        """Action: delete the claim's copy of the connection Secret."""
        effects.withdraw()

    def delete_resource(self, effects: ClaimEffects) -> None:
        """Action: delete the managed resource (reclaim policy Delete)."""
        effects.delete_resource()

    def retain_resource(self, effects: ClaimEffects) -> None:
        """Action: unbind and mark the managed resource Released (reclaim policy Retain)."""
        effects.retain_resource()


# ---------------------------------------------------------------------------
# The bundled database claim: DatabaseClaim -> DatabaseInstanceClass -> DatabaseInstance
# ---------------------------------------------------------------------------


@attrs.frozen
class DatabaseClaimParameters:
    """The portable fields of a ``DatabaseClaim`` spec (kept small, so claims stay portable).

    ``engineVersion`` and ``storageGB`` override the class's template when set.
    Each field's alias is its name in the claim's spec (and its CRD).
    """

    engine_version: str | None = attrs.field(default=None, alias="engineVersion")
    """The engine version of the database (default: the class's)."""
    storage_gb: int | None = attrs.field(default=None, alias="storageGB")
    """Storage of the database in GiB (default: the class's)."""

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any]) -> DatabaseClaimParameters:
        """Read and type-check the portable fields; :class:`TerminalError` names a bad one."""
        version = spec.get("engineVersion")
        if version is not None and not isinstance(version, str):
            raise TerminalError("spec.engineVersion must be a string")
        storage = spec.get("storageGB")
        if storage is not None and (isinstance(storage, bool) or not isinstance(storage, int)
                                    or storage <= 0):
            raise TerminalError("spec.storageGB must be a positive integer")
        return cls(engineVersion=version, storageGB=storage)


def configure_database(
    claim: Mapping[str, Any], resource_class: ResourceClass, managed: dict[str, Any]
) -> None:
    """Configurator: apply a DatabaseClaim's portable fields to a DatabaseInstance spec."""
    wanted = DatabaseClaimParameters.from_spec(claim.get("spec") or {})
    for_provider = managed["spec"].setdefault("forProvider", {})
    if wanted.engine_version is not None:
        for_provider["version"] = wanted.engine_version
    if wanted.storage_gb is not None:
        for_provider["storageGB"] = wanted.storage_gb


#: The portable, namespaced claim for a database.
DatabaseClaim = Kind(
    group="claims.lifecycle.dev",
    version="v1alpha1",
    kind="DatabaseClaim",
    plural="databaseclaims",
    machine=ClaimMachine,
    parameters=DatabaseClaimParameters,
    short_names=("dbc",),
    description="A request for a database in this namespace: bound to a DatabaseInstance "
                "provisioned from a DatabaseInstanceClass (or named in spec.resourceRef), "
                "whose connection details are copied into a Secret here.",
)

#: The cluster-scoped class templating a DatabaseInstance.
DatabaseInstanceClass = ClassKind(
    group="db.lifecycle.dev",
    version="v1alpha1",
    kind="DatabaseInstanceClass",
    plural="databaseinstanceclasses",
)

#: How DatabaseClaims are satisfied by DatabaseInstances made from DatabaseInstanceClasses.
DATABASE_BINDING = ClaimBinding(
    claim=DatabaseClaim,
    resource_class=DatabaseInstanceClass,
    managed=database.DatabaseInstance,
    configurators=(configure_object_meta, configure_from_class, configure_database),
)
