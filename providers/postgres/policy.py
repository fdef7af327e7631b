"""The tenancy policy of a PostgreSQL ProviderConfig: what a namespace may ask of the server.

The admin credentials of a ProviderConfig can do far more than any one tenant should: make
superusers, join predefined roles such as ``pg_execute_server_program``, set
superuser-only parameters, grant on every database. ``spec.policy`` bounds what the objects
using that ProviderConfig may ask for; every field is optional and the defaults are the safe
ones::

    spec:
      policy:
        allowedRoleAttributes: [createdb]     # of superUser, createrole, replication,
                                              # bypassRls, createdb
        allowedMemberships: []                # roles any namespace may join (memberOf)
        allowedSettingContexts: [user]        # pg_settings.context of configurationParameters
        allowedSettings: []                   # parameters allowed whatever their context
        crossNamespace: false                 # name roles, databases, schemas of others
        sharedDatabases: []                   # databases every namespace may name in a Grant
        allowedExtensions: [citext, pgcrypto, ...]   # see DEFAULT_EXTENSIONS; "*": any
        revokePublicOnDb: owned               # owned (the namespace's databases) or never

:class:`Policy` is the parsed block; :func:`read_policy` reads it (called once, by
:meth:`lifecycle.providers.postgres.config.ServerConfig.from_provider_config`); the checks
against the server's catalog are in :mod:`lifecycle.providers.postgres.tenancy`. A refusal
is a terminal ``PolicyDenied`` error (:func:`denied`) naming the rule.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs

from lifecycle.core.errors import TerminalError

__all__ = [
    "DANGEROUS_EXTENSIONS", "DEFAULT_EXTENSIONS", "DEFAULT_ROLE_ATTRIBUTES", "POLICY_DENIED",
    "REVOKE_PUBLIC", "ROLE_ATTRIBUTES", "SETTING_CONTEXTS", "Policy", "denied", "read_policy",
]

#: The role attributes a policy governs: spec key -> the ``pg_roles`` column.
ROLE_ATTRIBUTES = {"superUser": "rolsuper", "createrole": "rolcreaterole",
                   "replication": "rolreplication", "bypassRls": "rolbypassrls",
                   "createdb": "rolcreatedb"}
#: Allowed unless the policy says otherwise: CREATEDB (a role owning what it creates).
DEFAULT_ROLE_ATTRIBUTES = frozenset({"createdb"})
#: The contrib extensions PostgreSQL 15 marks trusted, none of which reads files, runs
#: programs or opens connections: installable by default.
DEFAULT_EXTENSIONS = frozenset({
    "btree_gin", "btree_gist", "citext", "cube", "dict_int", "fuzzystrmatch", "hstore",
    "intarray", "isn", "lo", "ltree", "pg_trgm", "pgcrypto", "seg", "tablefunc", "tcn",
    "tsm_system_rows", "tsm_system_time", "unaccent", "uuid-ossp"})
#: Extensions that reach files, programs or other servers, or untrusted languages: refused
#: unless ``allowedExtensions`` names them one by one ("*" does not include them).
DANGEROUS_EXTENSIONS = frozenset({
    "adminpack", "amcheck", "dblink", "file_fdw", "old_snapshot", "pageinspect",
    "pg_buffercache", "pg_freespacemap", "pg_surgery", "pg_visibility", "pg_walinspect",
    "pgrowlocks", "pgstattuple", "plperlu", "plpython3u", "plpythonu", "pltclu",
    "postgres_fdw"})
#: ``pg_settings.context`` values a role's own setting may have (the others cannot be set
#: per role at all).
SETTING_CONTEXTS = frozenset({"user", "superuser", "backend", "superuser-backend"})
#: ``revokePublicOnDb``: only on the namespace's own databases, or never.
REVOKE_PUBLIC = ("owned", "never")
#: Reason of every refusal.
POLICY_DENIED = "PolicyDenied"


@attrs.frozen
class Policy:
    """``spec.policy`` of a ProviderConfig, parsed (see the module docstring)."""

    role_attributes: frozenset[str] = DEFAULT_ROLE_ATTRIBUTES
    memberships: frozenset[str] = frozenset()
    setting_contexts: frozenset[str] = frozenset({"user"})
    settings: frozenset[str] = frozenset()
    cross_namespace: bool = False
    shared_databases: frozenset[str] = frozenset()
    extensions: frozenset[str] = DEFAULT_EXTENSIONS
    revoke_public_on_db: str = "owned"

    def extension_allowed(self, name: str) -> bool:
        """Whether ``name`` may be installed: listed, or "*" and not a dangerous one."""
        if name in self.extensions:
            return True
        return "*" in self.extensions and name not in DANGEROUS_EXTENSIONS

    def setting_allowed(self, name: str, context: str | None) -> bool:
        """Whether a role's own setting ``name`` of ``context`` (None: a custom parameter
        the server does not know, which PostgreSQL 15 lets only a superuser set) may be
        set."""
        if name.lower() in self.settings:
            return True
        return context is not None and context in self.setting_contexts


def denied(config: str, rule: str, message: str) -> TerminalError:
    """The terminal ``PolicyDenied`` refusal of ``rule`` of provider config ``config``."""
    return TerminalError(f"refused by the policy of provider config {config!r} "
                         f"(rule {rule}): {message}", reason=POLICY_DENIED)


def _names(value: Any, what: str, invalid: Callable[[str], Exception],
           known: frozenset[str] | None = None) -> frozenset[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise invalid(f"spec.policy.{what} must be a list of names")
    if known is not None and set(value) - known:
        raise invalid(f"spec.policy.{what} must name some of {', '.join(sorted(known))}")
    return frozenset(value)


def read_policy(value: Any, *, allow_superuser: bool,
                invalid: Callable[[str], Exception]) -> Policy:
    """Read ``spec.policy`` (None: every default); ``allowSuperuser: true`` (the older
    switch) adds ``superUser`` to the allowed role attributes. ``invalid(problem)`` builds
    the error raised for a malformed block."""
    if value is None:
        value = {}
    if not isinstance(value, Mapping):
        raise invalid("spec.policy must be an object")
    keys = {"allowedRoleAttributes", "allowedMemberships", "allowedSettingContexts",
            "allowedSettings", "crossNamespace", "sharedDatabases", "allowedExtensions",
            "revokePublicOnDb"}
    unknown = sorted(str(k) for k in value if k not in keys)
    if unknown:
        raise invalid(f"spec.policy has unknown field(s) {', '.join(unknown)}")
    cross = value.get("crossNamespace", False)
    if not isinstance(cross, bool):
        raise invalid("spec.policy.crossNamespace must be true or false")
    revoke = value.get("revokePublicOnDb", "owned")
    if revoke not in REVOKE_PUBLIC:
        raise invalid(f"spec.policy.revokePublicOnDb must be one of {', '.join(REVOKE_PUBLIC)}")
    attributes = _names(value.get("allowedRoleAttributes", sorted(DEFAULT_ROLE_ATTRIBUTES)),
                        "allowedRoleAttributes", invalid, frozenset(ROLE_ATTRIBUTES))
    return Policy(
        role_attributes=attributes | ({"superUser"} if allow_superuser else set()),
        memberships=_names(value.get("allowedMemberships", []), "allowedMemberships",
                           invalid),
        setting_contexts=_names(value.get("allowedSettingContexts", ["user"]),
                                "allowedSettingContexts", invalid, SETTING_CONTEXTS),
        settings=frozenset(n.lower() for n in _names(value.get("allowedSettings", []),
                                                     "allowedSettings", invalid)),
        cross_namespace=cross,
        shared_databases=_names(value.get("sharedDatabases", []), "sharedDatabases",
                                invalid),
        extensions=_names(value.get("allowedExtensions", sorted(DEFAULT_EXTENSIONS)),
                          "allowedExtensions", invalid),
        revoke_public_on_db=revoke)
