"""Typed, validated fields shared by the parameters of the three kinds.

Validators raise ``TypeError``/``ValueError`` with the field's name, which
:meth:`lifecycle.core.kind.Kind.parse_parameters` turns into a terminal
``InvalidSpec`` condition.
"""

from __future__ import annotations

from typing import Any

import attrs


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


def _name(_: Any, attribute: attrs.Attribute, value: Any) -> None:
    if value is None:
        return
    if not isinstance(value, str) or not value:
        raise TypeError(f"'{attribute.name}' must be a non-empty string")


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
    return tuple(sorted(set(value)))


def names(alias: str) -> Any:
    """An optional list of PostgreSQL names (spec key ``alias``); None leaves it unmanaged."""
    def convert(value: Any) -> tuple[str, ...] | None:
        try:
            return _names(value)
        except TypeError as exc:
            raise TypeError(f"'{alias}' {exc}") from None
    return attrs.field(default=None, converter=convert, alias=alias)


def text(alias: str) -> Any:
    """An optional non-empty string (spec key ``alias``)."""
    return attrs.field(default=None, validator=_name, alias=alias)


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
