"""A database instance on the simulated cloud: the smallest complete kind.

The whole kind: a machine subclass tuning its intervals, a Kind binding the
machine to its parameters, and the registration through which operators, the
command line and the crash explorer find it (the ``lifecycle.kinds`` entry
point ``database``). The client lives in :mod:`lifecycle.providers.simcloud`.
"""

from __future__ import annotations

from lifecycle.core.kind import Kind
from lifecycle.core.machine import Timing
from lifecycle.machines.managed import ManagedResourceMachine
from lifecycle.providers.simcloud import DatabaseParameters

__all__ = ["DatabaseInstance", "DatabaseInstanceMachine"]


class DatabaseInstanceMachine(ManagedResourceMachine):
    """The standard lifecycle, polling every 30 s and waiting 2 s on pending operations."""

    timing = Timing(poll=30.0, wait={"creating": 2.0, "updating": 2.0, "deleting": 1.0})


DatabaseInstance = Kind(
    group="db.lifecycle.dev",
    version="v1alpha1",
    kind="DatabaseInstance",
    plural="databaseinstances",
    machine=DatabaseInstanceMachine,
    parameters=DatabaseParameters,
    password=True,
    short_names=("dbi",),
    description="A database instance on the simulated cloud. The operator creates it, keeps "
                "its storage, size and version as spec.forProvider says, writes its endpoint "
                "and credentials to the connection Secret and deletes it with the object.",
)
