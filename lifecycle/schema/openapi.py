"""OpenAPI v3 (structural) schemas of the Python types a kind's parameters declare.

:func:`schema_for_type` maps a type as an attrs field declares it to the
schema a CustomResourceDefinition carries, so that ``kubectl explain`` shows
each field and the API server refuses a bad value with a 422 naming it:

================================  =============================================
Python                            schema
================================  =============================================
``str``, ``int``, ``float``,      ``string``, ``integer`` (int64), ``number``,
``bool``                          ``boolean``
``Literal["a", "b"]``             ``enum`` of the values (all of one JSON type)
an ``enum.Enum``                  ``enum`` of its members' values
``X | None``                      ``X``, ``nullable``
``list[X]``, ``tuple[X, ...]``    ``array`` of ``X``
``set[X]``, ``frozenset[X]``      ``array`` of ``X``, ``x-kubernetes-list-type: set``
``dict[str, X]``                  ``object`` with ``additionalProperties`` ``X``
an attrs class                    ``object`` with its fields (by alias)
``Any``, ``object``, a union      ``x-kubernetes-preserve-unknown-fields``
``Annotated[X, ...]``             ``X``
================================  =============================================

Each field of an attrs class is described by its ``metadata`` (see
:func:`lifecycle.core.kind.spec_field`: ``description``, bounds, lengths,
patterns, ``immutable``, CEL ``validations``) or, without a description
there, by the docstring under it (or a ``#:`` comment above it). Rules over
several fields of a class go in its ``__schema_validations__`` class variable
(a sequence of ``{"rule": ..., "message": ...}``), checked on the object. Descriptions
are written as plain text: reStructuredText markup is taken out. A type
outside the table is refused with a :class:`SchemaError` naming the field.
"""

from __future__ import annotations

import ast
import enum
import functools
import inspect
import re
import textwrap
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from lifecycle.core.errors import LifecycleError
from lifecycle.core.kind import SCHEMA_METADATA

__all__ = ["SUPPORTED", "SchemaError", "plain_text", "schema_for_type"]

#: The types :func:`schema_for_type` maps, as its error messages list them.
SUPPORTED = ("str, int, float, bool, Literal[...], an enum.Enum, X | None, list[X], "
             "tuple[X, ...], set[X], dict[str, X], an attrs class, Any")

_PRIMITIVES: dict[type, dict[str, Any]] = {
    str: {"type": "string"},
    bool: {"type": "boolean"},
    int: {"type": "integer", "format": "int64"},
    float: {"type": "number"},
}
#: Metadata keys copied into the schema as they are, with the types they apply to.
_CONSTRAINTS: dict[str, tuple[str, ...]] = {
    "minimum": ("integer", "number"), "maximum": ("integer", "number"),
    "exclusiveMinimum": ("integer", "number"), "exclusiveMaximum": ("integer", "number"),
    "multipleOf": ("integer", "number"), "minLength": ("string",), "maxLength": ("string",),
    "pattern": ("string",), "minItems": ("array",), "maxItems": ("array",),
    "format": ("string", "integer", "number"),
}
assert set(_CONSTRAINTS) | {"description", "immutable", "validations"} == SCHEMA_METADATA


class SchemaError(LifecycleError, TypeError):
    """A parameters type the CRD generator cannot describe; the message names the field."""


def schema_for_type(tp: Any, default: Any = attrs.NOTHING, *, where: str = "") -> dict[str, Any]:
    """The OpenAPI v3 (structural) schema of a Python type as attrs fields declare it.

    ``default`` (a JSON scalar or an enum member) becomes the schema's
    ``default``; ``where`` names the place in the object (``spec.forProvider``)
    in error messages. See the module's table for the supported types.
    """
    schema = _schema(tp, where)
    factory: Any = attrs.Factory  # a class at run time, a function to the type checker
    if default is not attrs.NOTHING and not isinstance(default, factory) and (
        default is not None and _json_value(default)
    ):
        schema["default"] = default.value if isinstance(default, enum.Enum) else default
    return schema


def _json_value(value: Any) -> bool:
    return isinstance(value, str | int | float | bool | enum.Enum)


def _refuse(tp: Any, where: str, why: str = "") -> SchemaError:
    name = repr(tp)
    if isinstance(tp, type):
        name = tp.__qualname__ if tp.__module__ == "builtins" else (
            f"{tp.__module__}.{tp.__qualname__}")
    place = f"{where}: " if where else ""
    return SchemaError(f"{place}no OpenAPI schema for type {name}{why} (supported: {SUPPORTED})")


def _schema(tp: Any, where: str) -> dict[str, Any]:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Annotated:
        return _schema(args[0], where)
    if tp is Any or tp is object:
        return {"x-kubernetes-preserve-unknown-fields": True}
    if origin is typing.Literal:
        return _enum(tp, list(args), where)
    if origin in (typing.Union, types.UnionType):
        rest = [a for a in args if a is not type(None)]
        if len(rest) == 1:
            return {**_schema(rest[0], where), "nullable": True}
        return {"x-kubernetes-preserve-unknown-fields": True}
    if origin in (list, tuple, Sequence) or tp in (list, tuple):
        item = args[0] if args else Any
        return {"type": "array", "items": _schema(item, f"{where}[]")}
    if origin in (set, frozenset) or tp in (set, frozenset):
        items = _schema(args[0] if args else str, f"{where}[]")
        if items.get("type") not in ("string", "integer", "number", "boolean"):
            raise _refuse(tp, where, ": a set holds scalars")
        return {"type": "array", "items": items, "x-kubernetes-list-type": "set"}
    if origin in (dict, Mapping) or tp is dict:
        if len(args) == 2 and args[0] is not str:
            raise _refuse(tp, where, ": object keys are strings")
        value = args[1] if len(args) == 2 else Any
        return {"type": "object", "additionalProperties": _schema(value, f"{where}{{}}")}
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return _enum(tp, [member.value for member in tp], where)
    if isinstance(tp, type) and tp in _PRIMITIVES:
        return dict(_PRIMITIVES[tp])
    if isinstance(tp, type) and attrs.has(tp):
        return _attrs_schema(tp, where)
    raise _refuse(tp, where)


def _enum(tp: Any, values: list[Any], where: str) -> dict[str, Any]:
    """``enum`` of ``values`` (enum members stand for their values), all of one JSON type."""
    values = [v.value if isinstance(v, enum.Enum) else v for v in values]
    nullable = None in values
    values = [v for v in values if v is not None]
    kinds = {"boolean" if isinstance(v, bool) else "integer" if isinstance(v, int)
             else "number" if isinstance(v, float) else "string" if isinstance(v, str)
             else "?" for v in values}
    if len(kinds) != 1 or "?" in kinds:
        raise _refuse(tp, where, ": its values must all be strings, all integers, all "
                                 "numbers or all booleans")
    schema: dict[str, Any] = {"type": kinds.pop(), "enum": values}
    if nullable:
        schema["nullable"] = True
    return schema


def _attrs_schema(cls: type, where: str) -> dict[str, Any]:
    try:
        hints = typing.get_type_hints(cls, include_extras=True)
    except Exception as exc:  # a forward reference that does not resolve
        raise SchemaError(f"{where or cls.__qualname__}: the annotations of {cls.__qualname__} "
                          f"do not resolve: {type(exc).__name__}: {exc}") from None
    docs = field_docs(cls)
    properties: dict[str, Any] = {}
    required: list[str] = []
    parent_rules: list[dict[str, str]] = []
    for field in attrs.fields(cls):
        if not field.init:
            continue  # cannot be set from the spec
        name = field.alias or field.name
        path = f"{where}.{name}" if where else name
        label = f"{path} ({cls.__qualname__}.{field.name})"
        try:
            node = schema_for_type(hints.get(field.name, Any), field.default, where=path)
        except SchemaError as exc:  # name the Python field too when the error is at this one
            text = str(exc)
            if not text.startswith(f"{path}: "):
                raise
            raise SchemaError(f"{label}: {text[len(path) + 2:]}") from None
        meta = field.metadata or {}
        described = meta.get("description") or docs.get(field.name)
        if described:
            node["description"] = plain_text(str(described))
        _constrain(node, meta, label)
        rules = list(meta.get("validations") or ())
        if meta.get("immutable"):
            rules.insert(0, {"rule": "self == oldSelf", "message": f"{name} is immutable"})
            if field.default is None:  # may be absent: setting or removing it is a change too
                parent_rules.append({"rule": f"has(self.{name}) == has(oldSelf.{name})",
                                     "message": f"{name} is immutable"})
        if rules:
            node["x-kubernetes-validations"] = [_rule(rule, label) for rule in rules]
            if "[]" in path and any(_OLD_SELF.search(r["rule"]) for r in
                                    node["x-kubernetes-validations"]):
                raise SchemaError(f"{label}: an immutable field (or a rule using oldSelf) "
                                  f"cannot be inside a list: the API server cannot pair an "
                                  f"item with the one it replaces")
        properties[name] = node
        if field.default is attrs.NOTHING:
            required.append(name)
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    summary = _summary(cls.__doc__)
    if summary:
        schema["description"] = summary
    if required:
        schema["required"] = required
    for rule in getattr(cls, "__schema_validations__", ()) or ():
        parent_rules.append(_rule(rule, where or cls.__qualname__))
    if parent_rules:
        schema["x-kubernetes-validations"] = parent_rules
    return schema


def _constrain(node: dict[str, Any], meta: Mapping[str, Any], label: str) -> None:
    """Copy the bounds, lengths and patterns of ``meta`` into ``node``, each where it applies."""
    for key, applies in _CONSTRAINTS.items():
        if key not in meta:
            continue
        if node.get("type") not in applies:
            raise SchemaError(f"{label}: {key} applies to {' or '.join(applies)} fields, not "
                              f"to {node.get('type') or 'untyped'} ones")
        value = meta[key]
        if key == "pattern":
            try:
                re.compile(value)
            except (re.error, TypeError) as exc:
                raise SchemaError(f"{label}: pattern {value!r} is not a regular expression: "
                                  f"{exc}") from None
        node[key] = value


_OLD_SELF = re.compile(r"\boldSelf\b")


def _rule(rule: Any, label: str) -> dict[str, str]:
    if isinstance(rule, str):
        rule = {"rule": rule}
    if not isinstance(rule, Mapping) or not isinstance(rule.get("rule"), str) or not rule[
            "rule"].strip():
        raise SchemaError(f"{label}: a validation is a {{'rule': ..., 'message': ...}} "
                          f"mapping with a CEL rule, not {rule!r}")
    return {k: str(v) for k, v in rule.items() if k in ("rule", "message", "reason",
                                                        "fieldPath", "messageExpression")}


# ------------------------------------------------------------------ descriptions
_ROLE = re.compile(r":[\w:.+-]+:`(~?)([^`<]*?)\s*(?:<([^>]*)>)?`")
_LITERAL = re.compile(r"``(.+?)``")
_INTERPRETED = re.compile(r"(?<![\w`])`([^`]+)`(?!`)")
_EMPHASIS = re.compile(r"(?<![\w*])\*{1,2}(\S(?:[^*]*?\S)?)\*{1,2}(?![\w*])")


def plain_text(text: str) -> str:
    """``text`` (a docstring) as plain text: reStructuredText roles, literals and emphasis
    reduced to their words, lines of a paragraph joined, paragraphs kept."""

    def role(match: re.Match[str]) -> str:
        tilde, shown, target = match.groups()
        if target and shown:
            return shown
        name = shown or target or ""
        return name.rsplit(".", 1)[-1] if tilde else name

    text = _ROLE.sub(role, inspect.cleandoc(text))
    text = _LITERAL.sub(r"\1", text)
    text = _INTERPRETED.sub(r"\1", text)
    text = _EMPHASIS.sub(r"\1", text)
    paragraphs = [" ".join(part.split()) for part in re.split(r"\n\s*\n", text)]
    joined = "\n\n".join(p for p in paragraphs if p)
    return re.sub(r"::(\s|$)", r":\1", joined).strip()


def _summary(doc: str | None) -> str:
    """The first paragraph of a docstring, as plain text."""
    if not doc:
        return ""
    return plain_text(re.split(r"\n\s*\n", inspect.cleandoc(doc), maxsplit=1)[0])


@functools.lru_cache(maxsize=256)
def field_docs(cls: type) -> Mapping[str, str]:
    """The attribute docstrings of a class: the string under an annotated assignment, or the
    ``#:`` comment lines above it. Empty when the source cannot be read."""
    try:
        source = textwrap.dedent(inspect.getsource(cls))
        tree = ast.parse(source)
    except (OSError, TypeError, SyntaxError):
        return {}
    body = next((node.body for node in tree.body if isinstance(node, ast.ClassDef)), [])
    lines = source.splitlines()
    found: dict[str, str] = {}
    for index, node in enumerate(body):
        target = node.target if isinstance(node, ast.AnnAssign) else (
            node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None)
        if not isinstance(target, ast.Name):
            continue
        after = body[index + 1] if index + 1 < len(body) else None
        if isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant) and isinstance(
                after.value.value, str):
            found[target.id] = after.value.value
            continue
        comments: list[str] = []
        row = node.lineno - 2
        while row >= 0 and lines[row].strip().startswith("#:"):
            comments.insert(0, lines[row].strip()[2:].strip())
            row -= 1
        if comments:
            found[target.id] = "\n".join(comments)
    return found
