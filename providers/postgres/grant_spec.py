"""The Grant kind's spec: ``spec.forProvider`` parsed and checked (privileges, targets,
routines and columns), and the record of what a Grant holds.

Every field is checked when the spec is parsed, before the object gets a finalizer: names
are PostgreSQL identifiers of at most 63 bytes, a routine's argument types are type names,
privileges apply to the target. :mod:`lifecycle.providers.postgres.grant` holds the client.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from lifecycle.core import references
from lifecycle.providers.postgres import fields

__all__ = ["COLUMN_PRIVILEGES", "DATABASE_PRIVILEGES", "EVERY", "HELD", "HELD_WITH_OPTION",
           "PRIVILEGES_OF", "ROUTINE_PRIVILEGES", "SCHEMA_PRIVILEGES", "SEQUENCE_PRIVILEGES",
           "TABLE_PRIVILEGES", "GrantParameters", "Routine", "privilege_list", "recorded",
           "required_name", "with_grant_option"]

#: The privileges a database has, as ``aclexplode`` names them.
DATABASE_PRIVILEGES = ("CONNECT", "CREATE", "TEMPORARY")
#: The privileges a schema has.
SCHEMA_PRIVILEGES = ("CREATE", "USAGE")
#: The privileges a table (or view, materialized view, foreign or partitioned table) has.
TABLE_PRIVILEGES = ("DELETE", "INSERT", "REFERENCES", "SELECT", "TRIGGER", "TRUNCATE",
                    "UPDATE")
#: The privileges a sequence has.
SEQUENCE_PRIVILEGES = ("SELECT", "UPDATE", "USAGE")
#: The privileges a routine (function, procedure, aggregate) has.
ROUTINE_PRIVILEGES = ("EXECUTE",)
#: The privileges a column of a table has.
COLUMN_PRIVILEGES = ("INSERT", "REFERENCES", "SELECT", "UPDATE")
#: Per target keyword, the privileges it has.
PRIVILEGES_OF = {"DATABASE": DATABASE_PRIVILEGES, "SCHEMA": SCHEMA_PRIVILEGES,
                 "TABLE": TABLE_PRIVILEGES, "SEQUENCE": SEQUENCE_PRIVILEGES,
                 "ROUTINE": ROUTINE_PRIVILEGES, "COLUMN": COLUMN_PRIVILEGES}
_KNOWN = frozenset(p for privileges in PRIVILEGES_OF.values() for p in privileges)
_ALIASES = {"TEMP": "TEMPORARY", "ALL PRIVILEGES": "ALL"}
#: The value of ``tables``, ``sequences`` or a routine's ``name`` that means every one.
EVERY = "*"


def privilege_list(value: Any, known: frozenset[str] = _KNOWN) -> tuple[str, ...]:
    """Normalise a privilege list: upper case, TEMP and ALL PRIVILEGES spelled out, sorted,
    no duplicates (``ALL`` is expanded once the target is known)."""
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise TypeError("'privileges' must be a list of privilege names")
    out: set[str] = set()
    for item in value:
        if not isinstance(item, str):
            raise TypeError("'privileges' must be a list of privilege names")
        key = " ".join(item.upper().split())
        key = _ALIASES.get(key, key)
        if key not in known and key != "ALL":
            raise ValueError(f"unknown privilege {item!r}; use ALL or one of "
                             f"{', '.join(sorted(known))}")
        out.add(key)
    if not out:
        raise ValueError("'privileges' must name at least one privilege")
    return tuple(sorted(out))


#: The keys of a record listing the privileges held, and those still to revoke.
HELD = ("privileges", "revoking")
#: The keys of a Grant's record listing the privileges it holds with the grant option, and
#: those whose grant option is still to revoke.
HELD_WITH_OPTION = ("grantOption", "revokingGrantOption")


def recorded(observed: Mapping[str, Any], scope: Mapping[str, str],
             keys: tuple[str, ...] = HELD) -> frozenset[str]:
    """The privileges an earlier observation recorded under ``keys`` (by default: held by
    this resource, ``privileges``, or still to revoke, ``revoking``), when it recorded them
    for the same ``scope``; empty for a first observation, a lost status or another
    scope."""
    if observed.get("scope") != dict(scope):
        return frozenset()
    out: set[str] = set()
    for key in keys:
        value = observed.get(key)
        if isinstance(value, list):
            out.update(v for v in value if isinstance(v, str) and v in _KNOWN)
    return frozenset(out)


def with_grant_option(_: Any, attribute: attrs.Attribute, value: Any) -> None:
    """Validator of ``withOption``: unset or ``GRANT``."""
    if value is not None and value != "GRANT":
        raise ValueError("'withOption' must be GRANT (ADMIN applies to role memberships, "
                         "which a Role's memberOf declares)")


def required_name(_: Any, attribute: attrs.Attribute, value: Any) -> None:
    """Validator of a name field without a default: any value but None must be a valid
    PostgreSQL name (written as ``attrs.field`` in the class, so the field has no default)."""
    if value is not None:
        fields.check_name_value(f"'{attribute.name}'", value)


def _object_names(alias: str) -> Any:
    """An optional list of object names in the schema, or ``["*"]`` for every one."""
    def convert(value: Any) -> tuple[str, ...] | None:
        if value is None:
            return None
        if isinstance(value, str) or not isinstance(value, list | tuple):
            raise TypeError(f"'{alias}' must be a list of names, or [\"*\"]")
        if not value or not all(isinstance(v, str) and v for v in value):
            raise TypeError(f"'{alias}' must be a non-empty list of non-empty names")
        for item in value:
            if item != EVERY:
                fields.check_name_value(f"'{alias}' name {item[:64]!r}", item)
        if EVERY in value and len(set(value)) > 1:
            raise ValueError(f"'{alias}': \"*\" (every one in the schema) stands alone")
        return tuple(sorted(set(value)))
    return attrs.field(default=None, converter=convert, alias=alias)


def _columns(value: Any) -> tuple[str, ...] | None:
    """An optional list of column names, sorted and without duplicates."""
    if value is None:
        return None
    if isinstance(value, str) or not isinstance(value, list | tuple):
        raise TypeError("'columns' must be a list of column names")
    if not value or not all(isinstance(v, str) and v for v in value):
        raise TypeError("'columns' must be a non-empty list of non-empty names")
    if EVERY in value:
        raise ValueError("'columns' names columns; for every column, grant on the table "
                         "(leave 'columns' out)")
    for item in value:
        fields.check_name_value(f"'columns' name {item[:64]!r}", item)
    return tuple(sorted(set(value)))


def _arguments(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str) or not isinstance(value, list | tuple) or not all(
            isinstance(v, str) and v.strip() for v in value):
        raise TypeError("a routine's 'arguments' must be a list of type names")
    for item in value:
        problem = fields.type_name_problem(item)
        if problem:
            raise ValueError(f"a routine's 'arguments': {problem}")
    return tuple(v.strip() for v in value)


@attrs.frozen
class Routine:
    """A function, procedure or aggregate of the Grant's schema: its name and argument types
    (``name: "*"`` without arguments means every routine of the schema)."""

    name: str = fields.name(required=True)
    """The routine's name in the Grant's schema, or * (without arguments) for every routine of the
    schema."""
    arguments: tuple[str, ...] = attrs.field(factory=tuple, converter=_arguments)
    """The routine's argument types in order, such as integer or text, which pick one overloaded
    routine (default: none)."""

    @property
    def label(self) -> str:
        """``name(type, ...)`` as shown in messages."""
        return f"{self.name}({', '.join(self.arguments)})"


def _routines(value: Any) -> tuple[Routine, ...] | None:
    if value is None:
        return None
    if isinstance(value, str) or not isinstance(value, list | tuple) or not value:
        raise TypeError("'routines' must be a non-empty list of {name, arguments}")
    out: list[Routine] = []
    for item in value:
        if isinstance(item, Routine):
            out.append(item)
            continue
        if not isinstance(item, dict) or set(item) - {"name", "arguments"}:
            raise TypeError("'routines' must be a list of {name, arguments}")
        try:
            out.append(Routine(**item))
        except TypeError as exc:
            raise TypeError(f"'routines': {exc}") from None
    if any(r.name == EVERY for r in out) and (len(out) > 1 or out[0].arguments):
        raise ValueError("'routines': {name: \"*\"} (every routine of the schema) stands "
                         "alone, without arguments")
    return tuple(sorted(set(out), key=lambda r: (r.name, r.arguments)))


@attrs.frozen
class GrantParameters:
    """``spec.forProvider`` of a Grant: which role gets which privileges on which database,
    schema, or tables, sequences, routines or columns of a table of a schema.

    ``columns`` (with ``tables`` naming exactly one table) puts the privileges on
    those columns of it. ``withOption: GRANT`` also gives the right to grant them
    on. ``exclusive:
    true`` makes the list exact: privileges the role holds on the target
    beyond it are revoked (never from the owner). ``revokePublicOnDb: true``
    keeps PUBLIC without privileges on the database.
    """

    __schema_validations__ = references.required_rules("role", "database")

    privileges: tuple[str, ...] = attrs.field(converter=privilege_list)
    """The privileges to grant, such as CONNECT, CREATE, SELECT, USAGE, or ALL for every privilege
    the target has."""
    role: str = fields.referenced_name()
    """The PostgreSQL role that receives the privileges (or roleRef, roleSelector)."""
    role_ref: references.Reference | None = fields.reference("role", "Role")  # noqa: RUF009
    role_selector: references.Selector | None = fields.selector("role", "Role")  # noqa: RUF009
    database: str = fields.referenced_name()
    """The database the privileges are on, or in which the schema or its objects live (or
    databaseRef, databaseSelector)."""
    database_ref: references.Reference | None = fields.reference("database", "Database")  # noqa: RUF009
    database_selector: references.Selector | None = fields.selector("database", "Database")  # noqa: RUF009
    with_option: str | None = attrs.field(default=None, validator=with_grant_option,
                                          alias="withOption")
    """GRANT also gives the role the right to grant these privileges on to others (WITH GRANT
    OPTION); unset, it does not."""
    exclusive: bool = fields.flag(False)
    """Make the privilege list exact: privileges the role holds on the target beyond it are
    revoked (never from the owner). Default false."""
    schema: str | None = fields.name()
    """A schema of the database: the privileges are on it, or on the objects named by tables,
    sequences or routines in it."""
    tables: tuple[str, ...] | None = _object_names("tables")
    """Tables (and views) of the schema the privileges are on, or ["*"] for every table of the
    schema."""
    sequences: tuple[str, ...] | None = _object_names("sequences")
    """Sequences of the schema the privileges are on, or ["*"] for every sequence of the schema."""
    routines: tuple[Routine, ...] | None = attrs.field(default=None, converter=_routines)
    """Functions, procedures or aggregates of the schema the privileges are on, each a name with
    its argument types."""
    columns: tuple[str, ...] | None = attrs.field(default=None, converter=_columns)
    """Columns of the one table named in tables that the privileges are on."""
    revoke_public_on_db: bool = fields.flag(False, alias="revokePublicOnDb")
    """Keep PUBLIC without privileges on the database (REVOKE ALL ... FROM PUBLIC). Default false.
    """

    def __attrs_post_init__(self) -> None:
        """Check the role and database are given (or referenced), the target is one kind of
        object in a schema at most (columns of one named table), expand ALL and check each
        privilege against the target."""
        references.check_given(self, "role", "database")
        given = [key for key, value in (("tables", self.tables), ("sequences", self.sequences),
                                        ("routines", self.routines)) if value is not None]
        if len(given) > 1:
            raise ValueError(f"set one of 'tables', 'sequences' and 'routines', not "
                             f"{' and '.join(repr(g) for g in given)}; use one Grant each")
        if given and self.schema is None:
            raise ValueError(f"'{given[0]}' needs 'schema': the schema the objects are in")
        if self.columns is not None and (self.tables is None or len(self.tables) != 1
                                         or self.tables == (EVERY,)):
            raise ValueError("'columns' needs 'tables' naming exactly one table (not \"*\"): "
                             "the table the columns are of; use one Grant per table")
        object.__setattr__(self, "privileges", fields.expand_privileges(
            self.privileges, self.allowed, f"a {self.keyword.lower()}"))

    @property
    def keyword(self) -> str:
        """What the privileges are on: ``DATABASE``, ``SCHEMA``, ``TABLE``, ``SEQUENCE``,
        ``ROUTINE`` or ``COLUMN``."""
        if self.columns is not None:
            return "COLUMN"
        if self.tables is not None:
            return "TABLE"
        if self.sequences is not None:
            return "SEQUENCE"
        if self.routines is not None:
            return "ROUTINE"
        return "DATABASE" if self.schema is None else "SCHEMA"

    @property
    def on_objects(self) -> bool:
        """Whether the privileges are on tables, sequences, routines or columns of the
        schema."""
        return self.keyword in ("TABLE", "SEQUENCE", "ROUTINE", "COLUMN")

    @property
    def every(self) -> bool:
        """Whether the Grant covers every object of its kind in the schema (``"*"``)."""
        if self.routines is not None:
            return self.routines[0].name == EVERY
        return (self.tables or self.sequences) == (EVERY,)

    @property
    def allowed(self) -> tuple[str, ...]:
        """The privileges the target has."""
        return PRIVILEGES_OF[self.keyword]

    @property
    def target(self) -> str:
        """The name of the database or schema, as shown in messages."""
        return self.database if self.schema is None else f"{self.database}.{self.schema}"

    @property
    def table(self) -> str | None:
        """The table whose columns the Grant is on; None unless ``columns`` is set."""
        return self.tables[0] if self.columns is not None and self.tables else None

    @property
    def scope(self) -> dict[str, str]:
        """Whose privileges on what the Grant's record in ``status.atProvider`` is about:
        role, database, schema (when set), the kind of object and, for columns, their
        table."""
        scope = {"role": self.role, "on": self.keyword, "database": self.database}
        if self.schema is not None:
            scope["schema"] = self.schema
        if self.table is not None:
            scope["table"] = self.table
        return scope
