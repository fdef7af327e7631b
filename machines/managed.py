"""The standard managed-resource lifecycle: claim, create, stay ready, update, delete.

Events are named after what the reconciler *observed*, never after where the
resource should go; the machine alone decides the target. The reconciler's
pure :func:`lifecycle.core.decide.choose_event` picks one event per reconcile:

======== =====================================================================
event    chosen when
======== =====================================================================
create   the external resource is absent and creating it is allowed
update   it exists, is available, differs from the spec, and modify is allowed
wait     the provider reports an operation still pending
available it exists, is available and matches the spec
fail     connect / observe / an action raised a handled error, or the
         provider reports the resource failed
delete   deletion was requested and the external resource still exists
gone     deletion was requested and the external resource no longer exists
orphan   deletion was requested and policy forbids deleting it externally
======== =====================================================================

The state and event names are those of :mod:`lifecycle.core.vocabulary`, which the
event choice and the status writer use; a kind whose machine lacks one of the events
is refused when it is declared.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from statemachine import State

from lifecycle.core.machine import LifecycleMachine
from lifecycle.core.vocabulary import ConditionTypes, Reasons, States

if TYPE_CHECKING:
    from lifecycle.core.decide import Facts
    from lifecycle.runtime.effects import Effects

__all__ = ["ManagedResourceMachine"]


class ManagedResourceMachine(LifecycleMachine):
    """Unclaimed, Creating, Ready, Updating, Deleting, Failed and the final Deleted.

    Deletion pre-empts every state; Deleting is terminal (spec changes are
    ignored once entered); Failed remembers the failed operation and the next
    observation retries it; a resource that vanished while Ready is re-created.
    """

    unclaimed = State("Unclaimed", initial=True)
    creating = State("Creating")
    ready = State("Ready")
    updating = State("Updating")
    deleting = State("Deleting")
    failed = State("Failed")
    deleted = State("Deleted", final=True)

    create = (
        unclaimed.to(creating, on="create_external")
        | creating.to.itself(on="create_external")
        | ready.to(creating, on="create_external")
        | updating.to(creating, on="create_external")
        | failed.to(creating, on="create_external")
    )
    update = (
        unclaimed.to(updating, on="update_external")
        | creating.to(updating, on="update_external")
        | ready.to(updating, on="update_external")
        | updating.to.itself(on="update_external")
        | failed.to(updating, on="update_external")
    )
    wait = (
        creating.to.itself()
        | updating.to.itself()
        | deleting.to.itself()
        | unclaimed.to(creating)
        | ready.to(updating)
        | failed.to(updating, cond="failed_during_update")
        | failed.to(creating)
    )
    available = (
        unclaimed.to(ready)
        | creating.to(ready)
        | ready.to.itself()
        | updating.to(ready)
        | failed.to(ready)
    )
    fail = (
        unclaimed.to(failed)
        | creating.to(failed)
        | ready.to(failed)
        | updating.to(failed)
        | deleting.to(failed)
        | failed.to.itself()
    )
    delete = (
        unclaimed.to(deleting, on="delete_external")
        | creating.to(deleting, on="delete_external")
        | ready.to(deleting, on="delete_external")
        | updating.to(deleting, on="delete_external")
        | failed.to(deleting, on="delete_external")
        | deleting.to.itself(on="delete_external")
    )
    gone = (
        deleting.to(deleted)
        | unclaimed.to(deleted)
        | creating.to(deleted)
        | ready.to(deleted)
        | updating.to(deleted)
        | failed.to(deleted)
    )
    orphan = (
        unclaimed.to(deleted)
        | creating.to(deleted)
        | ready.to(deleted)
        | updating.to(deleted)
        | deleting.to(deleted)
        | failed.to(deleted)
    )

    ready_condition = {
        States.UNCLAIMED: ("Unknown", "Unclaimed"),
        States.CREATING: ("False", "Creating"),
        States.READY: ("True", Reasons.AVAILABLE),
        States.UPDATING: ("False", "Updating"),
        States.DELETING: ("False", "Deleting"),
        States.FAILED: ("False", "Unavailable"),
        States.DELETED: ("False", "Deleted"),
    }
    activity_conditions = {
        States.CREATING: ConditionTypes.CREATING,
        States.UPDATING: ConditionTypes.UPDATING,
        States.DELETING: ConditionTypes.DELETING,
        States.FAILED: ConditionTypes.FAILED,
    }
    state_docs = {
        States.UNCLAIMED: "seen, finalizer not yet committed",
        States.CREATING: "external create requested, not yet usable",
        States.READY: "exists, usable, matches spec",
        States.UPDATING: "differs from spec; update requested",
        States.DELETING: "external delete requested (terminal)",
        States.FAILED: "a handled error; the failed operation is retried",
        States.DELETED: "external resource gone or orphaned; finalizer removed",
    }

    def failed_during_update(self, facts: Facts) -> bool:
        """Guard: the operation that failed was an update."""
        return facts.failed_operation == "update"

    def create_external(self, effects: Effects) -> None:
        """Action: ask the provider to create the external resource."""
        effects.create()

    def update_external(self, effects: Effects) -> None:
        """Action: ask the provider to bring the external resource to the spec."""
        effects.update()

    def delete_external(self, effects: Effects) -> None:
        """Action: ask the provider to delete the external resource."""
        effects.delete()
