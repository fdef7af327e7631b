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


def flag(default: bool) -> Any:
    """A boolean field that refuses anything but true or false."""
    return attrs.field(default=default, validator=_strict_bool)


def connection_limit(default: int | None) -> Any:
    """A connection limit (spec key ``connectionLimit``): -1 for none, else a count; None
    leaves it to the server."""
    return attrs.field(default=default, validator=_connection_limit, alias="connectionLimit")


def name(*, required: bool = False) -> Any:
    """A PostgreSQL object name; optional ones default to None (server default)."""
    if required:
        return attrs.field(validator=_name)
    return attrs.field(default=None, validator=_name)
