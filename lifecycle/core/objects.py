"""Typed readers of Kubernetes-shaped objects held as JSON-like dicts.

Stored objects are untrusted input: any field may be missing or have the
wrong type. These readers are the one place that tolerates that, so code
reading ``status`` or ``metadata`` never repeats the ``isinstance`` checks.
"""

# No ``from __future__ import annotations`` here: this module defines a reader
# named ``annotations``, and every annotation below is already evaluable.
from collections.abc import Mapping
from typing import Any, TypeGuard

__all__ = [
    "annotations",
    "finalizers",
    "generation",
    "is_mapping",
    "labels",
    "mapping",
    "metadata",
    "nesting_depth",
    "spec",
    "status",
]


def mapping(value: Any) -> Mapping[str, Any]:
    """``value`` if it is a mapping, else an empty one (for reading untrusted objects)."""
    if type(value) is dict:  # the common case, without the ABC check
        return value
    if value is None:  # the next most common (a missing field), without it too
        return {}
    return value if isinstance(value, Mapping) else {}


def is_mapping(value: Any) -> TypeGuard[Mapping[str, Any]]:
    """Whether ``value`` is a mapping; a plain dict or None is told without the ABC check."""
    return type(value) is dict or (value is not None and isinstance(value, Mapping))


# The readers below run dozens of times per reconcile: each tells a plain dict
# itself and calls mapping() only for anything else.


def metadata(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """The object's ``metadata``, or an empty mapping if it is missing or malformed."""
    value = obj.get("metadata")
    return value if type(value) is dict else mapping(value)


def spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """The object's ``spec``, or an empty mapping if it is missing or malformed."""
    value = obj.get("spec")
    return value if type(value) is dict else mapping(value)


def status(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """The object's ``status``, or an empty mapping if it is missing or malformed."""
    value = obj.get("status")
    return value if type(value) is dict else mapping(value)


def annotations(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """The object's annotations, or an empty mapping."""
    meta = obj.get("metadata")
    value = (meta if type(meta) is dict else mapping(meta)).get("annotations")
    return value if type(value) is dict else mapping(value)


def labels(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """The object's labels, or an empty mapping."""
    meta = obj.get("metadata")
    value = (meta if type(meta) is dict else mapping(meta)).get("labels")
    return value if type(value) is dict else mapping(value)


def generation(obj: Mapping[str, Any]) -> int:
    """``metadata.generation`` as a positive int (1 when missing or malformed)."""
    value = metadata(obj).get("generation")
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 1


def finalizers(obj: Mapping[str, Any]) -> list[str]:
    """The object's finalizers (strings only)."""
    meta = obj.get("metadata")
    found = (meta if type(meta) is dict else mapping(meta)).get("finalizers")
    return [f for f in found if isinstance(f, str)] if isinstance(found, list) else []


def nesting_depth(value: Any, limit: int) -> int:
    """How deeply ``value`` nests mappings and lists, counted without recursion.

    Counting stops once it passes ``limit`` (the result is then ``limit + 1``
    or more), so a hostile document of any depth costs at most ``limit`` levels.
    """
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, Mapping):
            children: list[Any] = [*item.keys(), *item.values()]
        elif isinstance(item, list):
            children = item
        else:
            continue
        deepest = max(deepest, level)
        if deepest > limit:
            return deepest
        stack.extend((child, level + 1) for child in children)
    return deepest
