"""Ownership marks on PostgreSQL roles and databases, kept as their comments.

A role or database the operator creates gets the comment
``managed by lifecycle: <mark>`` (``COMMENT ON ROLE`` / ``COMMENT ON
DATABASE``); ``observe`` reads it back through ``shobj_description``. Any
other comment, or none, reads as "no mark". Adopting a resource replaces
its comment with the mark.

The comment's next lines record whose it is for the tenancy policy
(:mod:`lifecycle.providers.postgres.tenancy`): ``namespace: <namespace>`` and
``providerConfig: <name>`` of the object that made it. A tenant cannot write
them: commenting on a role takes CREATEROLE, which the policy refuses to
tenants, and on a database, schema or extension takes owning it.

Some objects are never handed to an object that did not create them
(:func:`role_protection`, :func:`database_protection`): superusers and
roles that bypass row security or replicate, the provider's own admin role,
roles reserved by the server (``pg_*``), template databases, the
``postgres`` database and the provider's own database.
"""

from __future__ import annotations

from typing import Any

from psycopg import sql

from lifecycle.core.ownership import NotOwnedError, mark_operator, mark_uid

__all__ = ["PREFIX", "RESERVED_DATABASES", "check_ours", "comment", "database_protection",
           "mark_of", "recorded", "role_protection", "same_owner", "tenant_of"]

#: What a mark comment starts with.
PREFIX = "managed by lifecycle: "

#: Databases no object may adopt, whatever their flags say.
RESERVED_DATABASES = frozenset({"postgres", "template0", "template1"})


def mark_of(comment: Any) -> str:
    """The mark in a role's or database's comment; "" for none (or another comment)."""
    if isinstance(comment, str) and comment.startswith(PREFIX):
        return comment[len(PREFIX):].split("\n", 1)[0]
    return ""


def tenant_of(comment: Any) -> tuple[str, str] | None:
    """(namespace, provider config) the mark comment records, or None when it records none
    (no mark, another comment, or a mark written before the record existed)."""
    if not mark_of(comment):
        return None
    found = dict(line.split(": ", 1) for line in str(comment).split("\n")[1:]
                 if ": " in line)
    namespace, config = found.get("namespace"), found.get("providerConfig")
    return (namespace, config) if namespace and config else None


def recorded(comment: Any, namespace: str, config: str) -> bool:
    """Whether a mark comment records ``namespace`` and ``config`` (the mark's owner's): a
    mark without that record is written again by the next update (no mark: nothing to
    add to)."""
    return not namespace or not mark_of(comment) or tenant_of(comment) == (namespace, config)


def same_owner(found: str, mark: str) -> bool:
    """Whether the mark ``found`` names the object of ``mark``: the same object's uid and the
    same operator, as the engine's rule compares them (:func:`lifecycle.core.ownership.judge`):
    another operator's resource is not this one's, whatever uid its mark carries."""
    return bool(found) and mark_uid(found) == mark_uid(mark) and (
        mark_operator(found) == mark_operator(mark))


def check_ours(subject: str, name: str, note: Any, mark: str) -> None:
    """Raise NotOwnedError when an existing role or database is not marked with ``mark``."""
    if mark and not same_owner(mark_of(note), mark):
        raise NotOwnedError(f"{subject} {name!r} already exists and is not this object's")


def comment(on: str, name: str, mark: str, namespace: str = "",
            config: str = "") -> sql.Composed:
    """``COMMENT ON ROLE|DATABASE|SCHEMA|EXTENSION name IS 'managed by lifecycle: mark'``,
    with the namespace and provider config of its owner on the next lines when given."""
    text = PREFIX + mark
    if namespace:
        text += f"\nnamespace: {namespace}\nproviderConfig: {config}"
    return sql.SQL("COMMENT ON {} {} IS {}").format(
        sql.SQL(on), sql.Identifier(name), sql.Literal(text))


def role_protection(name: str, *, superuser: bool, bypassrls: bool, replication: bool,
                    admin: str) -> str:
    """Why the role ``name`` must never be adopted, or "" when it may be."""
    if name == admin:
        return "it is the provider config's admin role"
    if name.startswith("pg_"):
        return "role names starting with pg_ are reserved by the server"
    if superuser:
        return "it is a superuser"
    if bypassrls or replication:
        return "it has the BYPASSRLS or REPLICATION attribute"
    return ""


def database_protection(name: str, *, template: bool, admin_database: str) -> str:
    """Why the database ``name`` must never be adopted, or "" when it may be."""
    if template:
        return "it is a template database"
    if name in RESERVED_DATABASES:
        return "it is created by the server itself"
    if name == admin_database:
        return "it is the database the provider config connects to"
    return ""
