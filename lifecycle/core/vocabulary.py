"""The standard managed-resource machine's vocabulary: its states, events, conditions, reasons.

:func:`lifecycle.core.decide.choose_event` picks one of :data:`Events.MANAGED`
from what a pass observed, and the gate, the requeue matrix and the status
writer read the stored state by the names in :class:`States`. A machine that
runs managed resources (``lifecycle.machines.managed.ManagedResourceMachine``
and every kind derived from it) declares those events and states by these
names; :class:`~lifecycle.core.kind.Kind` refuses a machine that lacks one of the
events. Condition types and reasons the engine writes are here too, so that
no module spells them on its own.

The names are plain strings (``States.READY == "ready"``): they go into
stored status, events and YAML as they are.
"""

from __future__ import annotations

from typing import Final

__all__ = ["ConditionTypes", "Events", "Reasons", "States"]


class States:
    """State ids of the standard machine (the attribute names of its states)."""

    UNCLAIMED: Final = "unclaimed"
    CREATING: Final = "creating"
    READY: Final = "ready"
    UPDATING: Final = "updating"
    DELETING: Final = "deleting"
    FAILED: Final = "failed"
    DELETED: Final = "deleted"

    #: Every state of the standard machine.
    MANAGED: Final = frozenset({UNCLAIMED, CREATING, READY, UPDATING, DELETING, FAILED, DELETED})


class Events:
    """Event ids the event choice fires, each named after what a pass observed."""

    CREATE: Final = "create"
    UPDATE: Final = "update"
    WAIT: Final = "wait"
    AVAILABLE: Final = "available"
    FAIL: Final = "fail"
    DELETE: Final = "delete"
    GONE: Final = "gone"
    ORPHAN: Final = "orphan"

    #: Every event :func:`~lifecycle.core.decide.choose_event` may fire: a managed
    #: resource's machine declares each one.
    MANAGED: Final = (CREATE, UPDATE, WAIT, AVAILABLE, FAIL, DELETE, GONE, ORPHAN)


class ConditionTypes:
    """Condition types the engine writes."""

    READY: Final = "Ready"
    SYNCED: Final = "Synced"
    #: The object's engine annotations or policies are not understood (a note).
    CONFIG_VALID: Final = "ConfigValid"
    #: The stored status could not be read as written (a note).
    STATUS_VALID: Final = "StatusValid"
    #: The object has stayed in one state longer than its machine allows.
    STUCK: Final = "Stuck"
    CREATING: Final = "Creating"
    UPDATING: Final = "Updating"
    DELETING: Final = "Deleting"
    FAILED: Final = "Failed"
    INFORMATIONAL: Final = "Informational"
    #: Whether a ProviderConfig can be used as written (on the ProviderConfig itself).
    VALID: Final = "Valid"

    #: Types set True while their state or situation holds and False after it.
    ACTIVITY: Final = frozenset({CREATING, UPDATING, DELETING, FAILED, STUCK, INFORMATIONAL})
    #: Types that report a problem with the object itself, not with the resource.
    NOTES: Final = frozenset({CONFIG_VALID, STATUS_VALID})


class Reasons:
    """Condition and event reasons the engine writes."""

    AVAILABLE: Final = "Available"
    RECONCILE_SUCCESS: Final = "ReconcileSuccess"
    RECONCILE_ERROR: Final = "ReconcileError"
    #: Synced's reason while a reference or selector names no usable object yet.
    REFERENCE_UNRESOLVED: Final = "ReferenceUnresolved"
    #: A ProviderConfig's Valid reason when its spec can be used (and when it cannot).
    PROVIDER_CONFIG_VALID: Final = "ProviderConfigValid"
    PROVIDER_CONFIG_INVALID: Final = "ProviderConfigInvalid"
    PAUSED: Final = "Paused"
    NOT_STUCK: Final = "NotStuck"
    UNKNOWN_OPERATION: Final = "UnknownOperation"
    UNKNOWN_RECONCILE_POLICY: Final = "UnknownReconcilePolicy"
    UNKNOWN_DELETION_POLICY: Final = "UnknownDeletionPolicy"
    DELETION_ORPHANED: Final = "DeletionOrphaned"
    EXTERNAL_RESOURCE_DELETED: Final = "ExternalResourceDeleted"
    DELETION_PENDING: Final = "DeletionPending"
    DELETE_REQUESTED: Final = "DeleteRequested"
    EXTERNAL_RESOURCE_VANISHED: Final = "ExternalResourceVanished"
    CREATE_REQUESTED: Final = "CreateRequested"
    PROVIDER_FAILED: Final = "ProviderFailed"
    PROVIDER_PENDING: Final = "ProviderPending"
    RECONCILE_REQUESTED: Final = "ReconcileRequested"
    UPDATE_REQUESTED: Final = "UpdateRequested"
