"""The PostgreSQL kinds in ``postgresql.lifecycle.dev``: Role, Database, Grant, Schema,
Extension and DefaultPrivileges.

Each kind is the standard managed lifecycle with PostgreSQL's timing: every
statement completes before it returns, and the clients say so per call
(``Completion.finished``), so the pass that creates, updates or deletes an
object observes the result and moves on at once (Ready, or gone),
a pending state is re-observed after a second, and a Ready object is polled
every minute. Roles, Databases and Grants are also swept for drift every ten
seconds (``Timing.sweep``): one catalogue read per ProviderConfig finds the
objects whose role, database or database privileges changed behind the
operator's back, and only those are reconciled
(:mod:`lifecycle.providers.postgres.sweep`). Schemas, Extensions and
DefaultPrivileges live inside a database, so sweeping them would take a
session per database: their drift is found at the poll. A schema's or an
extension's name is unique within its database only, so their names are claimed
per database (``Kind.name_scope``). The clients live in
:mod:`lifecycle.providers.postgres`.
"""

from __future__ import annotations

import attrs

from lifecycle.core.kind import Kind
from lifecycle.core.machine import Timing
from lifecycle.machines.managed import ManagedResourceMachine
from lifecycle.providers.postgres.connector import PostgresConnector
from lifecycle.providers.postgres.database import DatabaseClient, DatabaseParameters
from lifecycle.providers.postgres.default_privileges import (
    DefaultPrivilegesClient,
    DefaultPrivilegesParameters,
)
from lifecycle.providers.postgres.extension import ExtensionClient, ExtensionParameters
from lifecycle.providers.postgres.grant import GrantClient
from lifecycle.providers.postgres.grant_spec import GrantParameters
from lifecycle.providers.postgres.providerconfig import PostgresProviderConfigSpec as CONFIG
from lifecycle.providers.postgres.role import RoleClient, RoleParameters
from lifecycle.providers.postgres.schema import SchemaClient, SchemaParameters

__all__ = [
    "GROUP", "IN_DATABASE_TIMING", "SQL_TIMING", "Database", "DatabaseMachine", "DefaultPrivileges",
    "DefaultPrivilegesMachine", "Extension", "ExtensionMachine", "Grant", "GrantMachine", "Role",
    "RoleMachine", "Schema", "SchemaMachine", "kinds",
]

#: API group of the PostgreSQL kinds.
GROUP = "postgresql.lifecycle.dev"
#: Synchronous SQL: re-observe a second after acting, poll Ready objects every minute,
#: sweep the catalogue for drift every ten seconds (Role, Database, Grant).
SQL_TIMING = Timing(poll=60.0, wait={"creating": 1.0, "updating": 1.0, "deleting": 1.0},
                    max_in_state={"creating": 600.0, "updating": 600.0, "deleting": 600.0},
                    sweep=10.0)
#: The same without the sweep, for the kinds inside a database (Schema, Extension,
#: DefaultPrivileges): their drift is found at the poll.
IN_DATABASE_TIMING = attrs.evolve(SQL_TIMING, sweep=None)


def _in_database(parameters: SchemaParameters | ExtensionParameters) -> tuple[str, ...]:
    """Where a schema's or an extension's name must be unique: its database."""
    return (parameters.database,)


class RoleMachine(ManagedResourceMachine):
    """The lifecycle of a PostgreSQL role."""

    timing = SQL_TIMING


class DatabaseMachine(ManagedResourceMachine):
    """The lifecycle of a PostgreSQL database."""

    timing = SQL_TIMING


class GrantMachine(ManagedResourceMachine):
    """The lifecycle of a role's privileges on a database, a schema or objects in a schema."""

    timing = SQL_TIMING


Role = Kind(group=GROUP, version="v1alpha1", kind="Role", plural="roles",
            machine=RoleMachine, parameters=RoleParameters, password=True,
            short_names=("pgrole",), external_name_max=63,
            provider_config_spec=CONFIG,
            description="A PostgreSQL role (a user or a group) on the server of its "
                        "ProviderConfig: its attributes, memberships and password, which is "
                        "generated and written to the connection Secret.")
Database = Kind(group=GROUP, version="v1alpha1", kind="Database", plural="databases",
                machine=DatabaseMachine, parameters=DatabaseParameters,
                short_names=("pgdb",), external_name_max=63,
                provider_config_spec=CONFIG,
                description="A PostgreSQL database on the server of its ProviderConfig: its "
                            "owner, encoding, locale, template and connection settings.")
class SchemaMachine(ManagedResourceMachine):
    """The lifecycle of a schema in a PostgreSQL database."""

    timing = IN_DATABASE_TIMING


class ExtensionMachine(ManagedResourceMachine):
    """The lifecycle of an extension installed in a PostgreSQL database."""

    timing = IN_DATABASE_TIMING


class DefaultPrivilegesMachine(ManagedResourceMachine):
    """The lifecycle of the privileges a role gets on objects another role creates later."""

    timing = IN_DATABASE_TIMING


Grant = Kind(group=GROUP, version="v1alpha1", kind="Grant", plural="grants",
             machine=GrantMachine, parameters=GrantParameters, short_names=("pggrant",),
             provider_config_spec=CONFIG,
             description="Privileges of a PostgreSQL role on a database, a schema, or "
                         "tables, sequences, routines or columns in a schema.")
Schema = Kind(group=GROUP, version="v1alpha1", kind="Schema", plural="schemas",
              machine=SchemaMachine, parameters=SchemaParameters, short_names=("pgschema",),
              external_name_max=63, name_scope=_in_database,
              provider_config_spec=CONFIG,
              description="A schema in a PostgreSQL database: its owner and whether PUBLIC "
                          "keeps its default privileges on it.")
Extension = Kind(group=GROUP, version="v1alpha1", kind="Extension", plural="extensions",
                 machine=ExtensionMachine, parameters=ExtensionParameters,
                 short_names=("pgext",), name_scope=_in_database,
                 provider_config_spec=CONFIG,
                 description="An extension installed in a PostgreSQL database, at a version "
                             "and in a schema.")
DefaultPrivileges = Kind(group=GROUP, version="v1alpha1", kind="DefaultPrivileges",
                         plural="defaultprivileges", machine=DefaultPrivilegesMachine,
                         parameters=DefaultPrivilegesParameters, short_names=("pgdefpriv",),
                         provider_config_spec=CONFIG,
                         description="The privileges a PostgreSQL role gets on the objects "
                                     "another role creates later in a database or schema "
                                     "(ALTER DEFAULT PRIVILEGES).")


def kinds() -> list[tuple[Kind, PostgresConnector]]:
    """The kinds paired with their connectors, as an Environment or operator takes them."""
    return [(Role, PostgresConnector(RoleClient)),
            (Database, PostgresConnector(DatabaseClient)),
            (Grant, PostgresConnector(GrantClient)),
            (Schema, PostgresConnector(SchemaClient)),
            (Extension, PostgresConnector(ExtensionClient)),
            (DefaultPrivileges, PostgresConnector(DefaultPrivilegesClient))]
