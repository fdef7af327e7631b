"""Typed, validated fields shared by the parameters of the three kinds.

Validators raise ``TypeError``/``ValueError`` with the field's name, which
:meth:`lifecycle.core.kind.Kind.parse_parameters` turns into a terminal
``InvalidSpec`` condition.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

import attrs

from lifecycle.core import references

__all__ = ["API_VERSION", "MAX_NAME_BYTES", "check_name_value", "connection_limit",
           "expand_privileges", "flag", "name", "name_problem", "names", "optional_flag",
           "reference", "referenced_name", "role_name", "selector", "text", "timestamp",
           "type_name_problem"]

#: apiVersion of the PostgreSQL kinds, which the references between them name.
API_VERSION = "postgresql.lifecycle.dev/v1alpha1"
#: PostgreSQL truncates identifiers longer than this many bytes (NAMEDATALEN - 1).
MAX_NAME_BYTES = 63
#: What ``validUntil`` may also be besides a date: no expiry, or always expired.
_INFINITIES = frozenset({"infinity", "-infinity"})


def _strict_bool(_: Any, attribute: attrs.Attribute, value: Any) -> None:
    if not isinstance(value, bool):
        raise TypeError(f"'{attribute.name}' must be true or false")


def _connection_limit(_: Any, attribute: attrs.Attribute, value: Any) -> None:
    if value is None:
        return
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"'{attribute.name}' must be an integer")
    if value < -1:
        raise ValueError(f"'{attribute.name}' must be -1 (no limit) or at least 0")


def name_problem(value: Any) -> str:
    """Why ``value`` is not a PostgreSQL name the server would keep as it is ("" if it is):
    not a non-empty string, a NUL in it, or longer than 63 bytes (the server would cut it)."""
    if not isinstance(value, str) or not value:
        return "must be a non-empty string"
    if "\x00" in value:
        return "contains a NUL character"
    if len(value.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
        return f"is longer than {MAX_NAME_BYTES} bytes (PostgreSQL would truncate it)"
    return ""


def check_name_value(label: str, value: Any) -> None:
    """Raise ``TypeError``/``ValueError`` naming ``label`` when ``value`` is no valid name."""
    problem = name_problem(value)
    if problem.startswith("must"):
        raise TypeError(f"{label} {problem}")
    if problem:
        raise ValueError(f"{label} {problem}")


def _name(_: Any, attribute: attrs.Attribute, value: Any) -> None:
    if value is None:
        return
    check_name_value(f"'{attribute.name}'", value)


def _text(_: Any, attribute: attrs.Attribute, value: Any) -> None:
    if value is None:
        return
    if not isinstance(value, str) or not value:
        raise TypeError(f"'{attribute.name}' must be a non-empty string")
    if "\x00" in value or len(value) > 256:
        raise ValueError(f"'{attribute.name}' must be at most 256 characters without NUL")


def _timestamp(_: Any, attribute: attrs.Attribute, value: Any) -> None:
    if value is None:
        return
    if not isinstance(value, str) or not value:
        raise TypeError(f"'{attribute.name}' must be a date and time (ISO 8601) or infinity")
    if value.strip().lower() in _INFINITIES:
        return
    try:
        datetime.fromisoformat(value.strip())
    except ValueError:
        raise ValueError(f"'{attribute.name}' {value[:40]!r} is not a date and time "
                         "(ISO 8601, e.g. 2030-01-01T00:00:00Z) nor infinity") from None


def flag(default: bool, *, alias: str | None = None) -> Any:
    """A boolean field that refuses anything but true or false (spec key ``alias`` if given)."""
    if alias is None:
        return attrs.field(default=default, validator=_strict_bool)
    return attrs.field(default=default, validator=_strict_bool, alias=alias)


def _optional_bool(_: Any, attribute: attrs.Attribute, value: Any) -> None:
    if value is not None and not isinstance(value, bool):
        raise TypeError(f"'{attribute.name}' must be true or false")


def optional_flag(alias: str) -> Any:
    """A boolean field that may be left unset (None: not managed), spec key ``alias``."""
    return attrs.field(default=None, validator=_optional_bool, alias=alias)


def connection_limit(default: int | None) -> Any:
    """A connection limit (spec key ``connectionLimit``): -1 for none, else a count; None
    leaves it to the server."""
    return attrs.field(default=default, validator=_connection_limit, alias="connectionLimit")


def _names(value: Any) -> tuple[str, ...] | None:
    """A list of PostgreSQL names, sorted and without duplicates; None stays None."""
    if value is None:
        return None
    if isinstance(value, str) or not isinstance(value, list | tuple):
        raise TypeError("must be a list of names")
    for item in value:
        if not isinstance(item, str) or not item:
            raise TypeError("must be a list of non-empty names")
        problem = name_problem(item)
        if problem:
            raise ValueError(f"name {item[:64]!r} {problem}")
    return tuple(sorted(set(value)))


def names(alias: str) -> Any:
    """An optional list of PostgreSQL names (spec key ``alias``); None leaves it unmanaged."""
    def convert(value: Any) -> tuple[str, ...] | None:
        try:
            return _names(value)
        except TypeError as exc:
            raise TypeError(f"'{alias}' {exc}") from None
        except ValueError as exc:
            raise ValueError(f"'{alias}': {exc}") from None
    return attrs.field(default=None, converter=convert, alias=alias)


def text(alias: str) -> Any:
    """An optional non-empty string (spec key ``alias``), at most 256 characters, no NUL."""
    return attrs.field(default=None, validator=_text, alias=alias)


def role_name(alias: str) -> Any:
    """An optional PostgreSQL role name (spec key ``alias``)."""
    return attrs.field(default=None, validator=_name, alias=alias)


def timestamp(alias: str) -> Any:
    """An optional date and time (spec key ``alias``): ISO 8601, or ``infinity``."""
    return attrs.field(default=None, validator=_timestamp, alias=alias)


def name(*, required: bool = False) -> Any:
    """A PostgreSQL object name; optional ones default to None (server default)."""
    if required:
        return attrs.field(validator=_name)
    return attrs.field(default=None, validator=_name)


def expand_privileges(privileges: Any, allowed: tuple[str, ...], on: str) -> tuple[str, ...]:
    """``privileges`` with ``ALL`` expanded to ``allowed``, sorted; a ``ValueError`` naming
    any that ``on`` (what they are granted on, for the message) does not have."""
    expanded = set(allowed) if "ALL" in privileges else set(privileges)
    wrong = sorted(expanded - set(allowed))
    if wrong:
        raise ValueError(f"privilege(s) {', '.join(wrong)} do not apply to {on}; "
                         f"use {', '.join(allowed)} or ALL")
    return tuple(sorted(expanded))


#: One piece of a type name: a plain or quoted identifier, a dot, a type modifier such as
#: ``(10, 2)``, or array brackets.
_TYPE_PART = (r'\s*(?:"(?:[^"\x00]|"")+"|[A-Za-z_][A-Za-z0-9_$]*|\.'
              r"|\(\s*-?\d+\s*(?:,\s*-?\d+\s*)?\)|\[\s*\d*\s*\])")
_TYPE_NAME = re.compile(rf"(?:{_TYPE_PART})+\s*")


def type_name_problem(value: str) -> str:
    """Why ``value`` is not a type name as an argument list spells it ("" if it is): words
    (``double precision``), schema-qualified or quoted names, ``(n)``/``(p, s)`` modifiers
    and ``[]``; nothing else (no stray parenthesis, quote or punctuation)."""
    if not value.strip() or len(value) > 200 or not _TYPE_NAME.fullmatch(value):
        return f"{value[:64]!r} is not a type name (such as integer, text, numeric(10,2), int[])"
    return ""


def reference(field: str, kind: str) -> Any:
    """``<field>Ref``: a PostgreSQL ``kind`` object of the same namespace whose external name
    fills ``field`` (:func:`lifecycle.core.references.reference_field`)."""
    return references.reference_field(field, API_VERSION, kind)


def selector(field: str, kind: str) -> Any:
    """``<field>Selector``: labels selecting the one ``kind`` object of the same namespace
    whose external name fills ``field``."""
    return references.selector_field(field, API_VERSION, kind)


def referenced_name(*, kw_only: bool = True) -> Any:
    """A name a reference may fill: unset until given or resolved, checked when given."""
    return attrs.field(default=None, validator=_name, kw_only=kw_only)
