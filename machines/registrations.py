"""What the bundled kinds offer to operators, the command line and the crash explorer.

Each tuple below is named by an entry point of the ``lifecycle.kinds`` group
in ``pyproject.toml``, which is how lifecycle finds them: the library never
imports this package. Kinds, connectors and verification targets meet here,
so the kind modules stay free of provider test code.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lifecycle.core.kind import Kind
from lifecycle.machines.claim import DATABASE_BINDING, DatabaseClaim, DatabaseInstanceClass
from lifecycle.machines.database import DatabaseInstance
from lifecycle.registry import Registration

__all__ = ["CLAIMS", "DATABASE", "POSTGRES", "simulated_connector"]


def _postgres_kinds() -> list[tuple[Kind, Any]]:
    """The PostgreSQL kinds with their connectors; none without psycopg (the optional
    ``postgres`` extra)."""
    try:
        from lifecycle.machines.postgres import kinds
    except ModuleNotFoundError as missing:
        if missing.name != "psycopg":
            raise
        return []
    return kinds()


def _constant(connector: Any) -> Callable[[], Any]:
    """A factory that returns ``connector`` itself (a PostgreSQL connector is shared)."""
    return lambda: connector


def simulated_connector() -> object:
    """DatabaseInstance's connector on a fresh simulated cloud (the operator's default)."""
    from lifecycle.providers.simcloud import DatabaseConnector, SimCloud

    return DatabaseConnector(SimCloud(seed=0, create_polls=1))


def _database_target(kind: Kind) -> object:
    """The kind's own scenario, then the tenancy scenarios (shared name, adoption, forged
    journal)."""
    from lifecycle.providers.simcloud.scenarios.verify import (
        adoption_target,
        forged_journal_target,
        shared_name_target,
        simcloud_target,
    )

    return [simcloud_target(kind), shared_name_target(kind), adoption_target(kind),
            forged_journal_target(kind)]


def _claim_target(kind: Kind) -> object:
    from lifecycle.providers.simcloud.scenarios.verify import claim_target

    return claim_target(kind, DATABASE_BINDING)


def _postgres_target(kind: Kind) -> object:
    """The targets on the server of ``LIFECYCLE_POSTGRES_DSN`` (unavailable without it): the
    kind's own, and for a Role also an object the policy refuses (``Role/policy-denied``)."""
    from lifecycle.providers.postgres.scenarios.verify import verify_targets

    return verify_targets(kind)


#: DatabaseInstance on the simulated cloud.
DATABASE = (Registration(DatabaseInstance, connector=simulated_connector,
                         verify_target=_database_target),)

#: The PostgreSQL kinds, each with its connector (none without psycopg, the ``postgres``
#: extra); the crash explorer covers every one of them.
POSTGRES = tuple(
    Registration(kind, connector=_constant(connector), verify_target=_postgres_target)
    for kind, connector in _postgres_kinds())

#: The DatabaseClaim, bound to DatabaseInstances made from DatabaseInstanceClasses, and
#: the class kind itself (no connector: ``lifecycle crds`` serves it, ``run`` refuses it).
CLAIMS = (Registration(DatabaseClaim, verify_target=_claim_target, binding=DATABASE_BINDING),
          Registration(DatabaseInstanceClass))
