"""Structural-schema semantics of custom resources: pruning, defaulting and validation.

Pure functions over the ``openAPIV3Schema`` of a CustomResourceDefinition
version, applied the way an API server applies them to a custom resource:

* :func:`prune` drops every field the schema does not declare, in ``spec``,
  ``status`` and any nested object or array item, except under
  ``x-kubernetes-preserve-unknown-fields: true``. ``apiVersion``, ``kind`` and
  ``metadata`` of the object (and of ``x-kubernetes-embedded-resource``
  objects) are kept; the store validates metadata itself.
* :func:`default` removes ``null`` values of non-nullable properties without a
  default, then fills in missing (or non-nullable ``null``) properties from
  their ``default``, recursing into the objects it fills in, into array items
  and into ``additionalProperties`` values.
* :func:`validate` checks types (``integer`` is a whole number, ``number``
  any number, never a boolean), ``nullable``, ``required``, ``enum``,
  ``minimum``/``maximum`` (and exclusive), ``minLength``/``maxLength``,
  ``pattern``, ``minItems``/``maxItems``, ``minProperties``/``maxProperties``,
  ``additionalProperties`` and the formats ``int32``, ``int64``,
  ``date-time`` and ``date``. It returns every problem at once as causes
  shaped like a real server's (``reason``, ``message``, ``field``).
* the CEL rules of ``x-kubernetes-validations`` (immutable fields among
  them) are evaluated by :mod:`lifecycle.sim.celrules`;
* :func:`admit` runs all of them for a write of the store and raises
  :class:`~lifecycle.kube.errors.Invalid` (422) naming every cause.

Updates are ratcheted as on a current server: a problem at a field whose
value the update leaves unchanged is not reported.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from lifecycle.kube.errors import Invalid
from lifecycle.kube.objects import clone
from lifecycle.kube.resources import ResourceType
from lifecycle.sim import celrules

__all__ = ["Cause", "admit", "default", "invalid", "prune", "unknown_fields", "validate"]

#: One problem: ``{"reason": ..., "message": ..., "field": ...}`` as in ``details.causes``.
Cause = dict[str, str]

_OBJECT_META_FIELDS = frozenset({
    "name", "generateName", "namespace", "selfLink", "uid", "resourceVersion", "generation",
    "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "labels",
    "annotations", "ownerReferences", "finalizers", "managedFields",
})
_RESOURCE_FIELDS = ("apiVersion", "kind", "metadata")
_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)
_PATTERNS: dict[str, re.Pattern[str]] = {}


# ---------------------------------------------------------------------- pruning
def prune(obj: Any, schema: Mapping[str, Any] | None, *, root: bool = True,
          removed: list[str] | None = None) -> Any:
    """``obj`` without the fields ``schema`` does not declare (a new value; ``obj`` is kept).

    ``root`` keeps ``apiVersion``, ``kind`` and ``metadata`` at the top level.
    The paths of the dropped fields are appended to ``removed`` when given.
    """
    return _prune(obj, schema, "", root, removed)


def _prune(value: Any, schema: Mapping[str, Any] | None, path: str, resource: bool,
           removed: list[str] | None) -> Any:
    if schema is None:
        return value
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        keep = schema.get("x-kubernetes-preserve-unknown-fields") is True
        embedded = resource or schema.get("x-kubernetes-embedded-resource") is True
        out: dict[str, Any] = {}
        for key, item in value.items():
            where = _join(path, key)
            if embedded and key in _RESOURCE_FIELDS:
                out[key] = _prune_meta(item, where, keep, removed) if key == "metadata" else item
            elif key in props:
                out[key] = _prune(item, props[key], where, False, removed)
            elif isinstance(extra, Mapping):
                out[key] = _prune(item, extra, where, False, removed)
            elif keep or extra is False:
                out[key] = item
            elif removed is not None:
                removed.append(where)
        return out
    if isinstance(value, list):
        items = schema.get("items")
        if not isinstance(items, Mapping):
            return value
        return [_prune(item, items, f"{path}[{i}]", False, removed)
                for i, item in enumerate(value)]
    return value


def _prune_meta(meta: Any, path: str, keep: bool, removed: list[str] | None) -> Any:
    """An embedded object's metadata keeps only ObjectMeta's fields."""
    if keep or not isinstance(meta, dict) or not path.count("."):
        return meta  # the object's own metadata is the store's to check
    out = {}
    for key, item in meta.items():
        if key in _OBJECT_META_FIELDS:
            out[key] = item
        elif removed is not None:
            removed.append(_join(path, key))
    return out


def unknown_fields(obj: Any, schema: Mapping[str, Any] | None) -> list[str]:
    """The paths of the fields :func:`prune` would drop from ``obj`` (``spec.foo``)."""
    removed: list[str] = []
    _prune(obj, schema, "", True, removed)
    return removed


# -------------------------------------------------------------------- defaulting
def default(obj: Any, schema: Mapping[str, Any] | None) -> Any:
    """``obj`` with the schema's defaults applied (a new value; ``obj`` is kept)."""
    if schema is None:
        return obj
    return _default(obj, schema, resource=True)


def _default(value: Any, schema: Mapping[str, Any], *, resource: bool = False) -> Any:
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        if resource:  # the object's apiVersion, kind and metadata are the store's
            props = {k: v for k, v in props.items() if k not in _RESOURCE_FIELDS}
        extra = schema.get("additionalProperties")
        out = dict(value)
        for key, prop in props.items():
            if not isinstance(prop, Mapping):
                continue
            nullable = prop.get("nullable") is True
            if key in out and out[key] is None and not nullable and "default" not in prop:
                del out[key]
            elif "default" in prop and (key not in out or (out[key] is None and not nullable)):
                out[key] = clone(prop["default"])
        for key, item in out.items():
            if key in props and isinstance(props[key], Mapping):
                out[key] = _default(item, props[key])
            elif isinstance(extra, Mapping):
                out[key] = _default(item, extra)
        return out
    if isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        return [_default(item, schema["items"]) for item in value]
    return value


# -------------------------------------------------------------------- validation
def validate(obj: Any, schema: Mapping[str, Any] | None, path: str = "") -> list[Cause]:
    """Every problem of ``obj`` against ``schema``; ``path`` names ``obj`` in the causes."""
    causes: list[Cause] = []
    if schema is not None:
        _validate(obj, schema, path, causes, resource=not path)
    return causes


def _validate(value: Any, schema: Mapping[str, Any], path: str, causes: list[Cause],
              *, resource: bool = False) -> None:
    if value is None:
        if schema.get("nullable") is not True and _typed(schema):
            causes.append(_type_invalid(path, schema, "null"))
        return
    int_or_string = schema.get("x-kubernetes-int-or-string") is True
    if int_or_string:
        if not (_is_integer(value) or isinstance(value, str)):
            causes.append(_type_invalid(path, {"type": "integer,string"}, _json_type(value)))
            return
    elif schema.get("type") and not _has_type(value, schema["type"]):
        causes.append(_type_invalid(path, schema, _json_type(value)))
        return
    if "enum" in schema and isinstance(schema["enum"], list) and value not in schema["enum"]:
        causes.append(_not_supported(path, value, schema["enum"]))
    if isinstance(value, bool):
        return
    if isinstance(value, int | float):
        _validate_number(value, schema, path, causes)
    elif isinstance(value, str):
        _validate_string(value, schema, path, causes)
    elif isinstance(value, list):
        _validate_array(value, schema, path, causes)
    elif isinstance(value, dict):
        _validate_object(value, schema, path, causes, resource)


def _validate_number(value: float, schema: Mapping[str, Any], path: str,
                     causes: list[Cause]) -> None:
    fmt = schema.get("format")
    if fmt in ("int32", "int64") and _is_integer(value):
        low, high = _INT32 if fmt == "int32" else _INT64
        if not low <= value <= high:
            causes.append(_invalid(path, value, f"{_name(path)} in body must be of type {fmt}: "
                                                f"{json.dumps(_text(value))}"))
    minimum = schema.get("minimum")
    if isinstance(minimum, int | float):
        if schema.get("exclusiveMinimum") is True and not value > minimum:
            causes.append(_invalid(path, value, f"{_name(path)} in body should be greater "
                                                f"than {_text(minimum)}"))
        elif not value >= minimum:
            causes.append(_invalid(path, value, f"{_name(path)} in body should be greater "
                                                f"than or equal to {_text(minimum)}"))
    maximum = schema.get("maximum")
    if isinstance(maximum, int | float):
        if schema.get("exclusiveMaximum") is True and not value < maximum:
            causes.append(_invalid(path, value, f"{_name(path)} in body should be less "
                                                f"than {_text(maximum)}"))
        elif not value <= maximum:
            causes.append(_invalid(path, value, f"{_name(path)} in body should be less "
                                                f"than or equal to {_text(maximum)}"))
    step = schema.get("multipleOf")
    if isinstance(step, int | float) and step > 0:
        ratio = value / step
        if not math.isclose(ratio, round(ratio), rel_tol=0, abs_tol=1e-9):
            causes.append(_invalid(path, value, f"{_name(path)} in body should be a multiple "
                                                f"of {_text(step)}"))


def _validate_string(value: str, schema: Mapping[str, Any], path: str,
                     causes: list[Cause]) -> None:
    # as kube-openapi's string validator: the first of maxLength, minLength, pattern that
    # fails is the only one reported
    longest = schema.get("maxLength")
    shortest = schema.get("minLength")
    pattern = schema.get("pattern")
    if isinstance(longest, int) and len(value) > longest:
        causes.append({"reason": "FieldValueTooLong", "field": path,
                       "message": f"Too long: may not be more than {longest} bytes"})
    elif isinstance(shortest, int) and len(value) < shortest:
        causes.append(_invalid(path, value, f"{_name(path)} in body should be at least "
                                            f"{shortest} chars long"))
    elif isinstance(pattern, str) and _compiled(pattern).search(value) is None:
        causes.append(_invalid(path, value, f"{_name(path)} in body should match '{pattern}'"))
    fmt = schema.get("format")
    if fmt in ("date-time", "date") and not _valid_time(value, fmt):
        causes.append(_invalid(path, value, f"{_name(path)} in body must be of type {fmt}: "
                                            f"{json.dumps(value)}"))


def _validate_array(value: list[Any], schema: Mapping[str, Any], path: str,
                    causes: list[Cause]) -> None:
    most = schema.get("maxItems")
    if isinstance(most, int) and len(value) > most:
        causes.append({"reason": "FieldValueTooMany", "field": path,
                       "message": f"Too many: {len(value)}: must have at most {most} items"})
    least = schema.get("minItems")
    if isinstance(least, int) and len(value) < least:
        causes.append(_invalid(path, len(value), f"{_name(path)} in body should have at "
                                                 f"least {least} items"))  # the count, as kube
    if schema.get("uniqueItems") is True:
        seen: list[Any] = []
        for item in value:
            if item in seen:
                causes.append({"reason": "FieldValueDuplicate", "field": path,
                               "message": f"Duplicate value: {_render(item)}"})
                break
            seen.append(item)
    items = schema.get("items")
    if isinstance(items, Mapping):
        for index, item in enumerate(value):
            _validate(item, items, f"{path}[{index}]", causes)


def _validate_object(value: dict[str, Any], schema: Mapping[str, Any], path: str,
                     causes: list[Cause], resource: bool) -> None:
    embedded = resource or schema.get("x-kubernetes-embedded-resource") is True
    for key in schema.get("required") or ():
        if key not in value:
            causes.append({"reason": "FieldValueRequired", "field": _join(path, key),
                           "message": "Required value"})
    most, least = schema.get("maxProperties"), schema.get("minProperties")
    if isinstance(most, int) and len(value) > most:
        causes.append(_invalid(path, value, f"{_name(path)} in body should have at most "
                                            f"{most} properties"))
    if isinstance(least, int) and len(value) < least:
        causes.append(_invalid(path, value, f"{_name(path)} in body should have at least "
                                            f"{least} properties"))
    props = schema.get("properties") or {}
    extra = schema.get("additionalProperties")
    for key, item in value.items():
        where = _join(path, key)
        if embedded and key == "metadata":
            continue  # ObjectMeta: the store's checks
        if key in props and isinstance(props[key], Mapping):
            _validate(item, props[key], where, causes)
        elif isinstance(extra, Mapping):
            _validate(item, extra, where, causes)
        elif extra is False and not (embedded and key in _RESOURCE_FIELDS):
            causes.append({"reason": "FieldValueForbidden", "field": where,
                           "message": f"Forbidden: {where} in body is a forbidden property"})


# ------------------------------------------------------------------------ admission
def admit(rtype: ResourceType, obj: dict[str, Any], *, old: dict[str, Any] | None = None,
          subresource: str | None = None, blocked: bool = False) -> dict[str, Any]:
    """Prune, default and validate a write of ``obj`` as the API server does.

    Returns the object to store (``obj`` itself when ``rtype`` has no
    schema). ``old`` is the stored object of an update (problems at fields
    the update leaves unchanged are not reported). A write of the ``status``
    subresource validates ``status`` only; a main-resource write of a kind
    with a status subresource does not validate the (stored) status. Raises
    :class:`Invalid` naming the object and listing every cause.
    """
    schema = rtype.schema
    if schema is None or not isinstance(schema, Mapping):
        return obj
    result = default(prune(obj, schema), schema)
    stored = None if old is None else default(prune(old, schema), schema)

    def ratchet(found: list[Cause]) -> list[Cause]:
        """An update reports no problem at a field it leaves unchanged."""
        if stored is None or not found:
            return found
        return [c for c in found if _changed(result, stored, c)]

    if subresource == "status":
        status_schema = (schema.get("properties") or {}).get("status")
        # validated from status down, as the server's status validator does: "count in
        # body", at field status.count
        causes = ratchet([{**c, "field": _join("status", c["field"]) if c.get("field")
                           else "status"} for c in validate(result.get("status"),
                                                            status_schema, "")]) if isinstance(
            status_schema, Mapping) and "status" in result else []
        if isinstance(status_schema, Mapping) and "status" in result:
            # the rules of the whole schema count: the server runs them on the whole object
            causes += _unless_invalid(causes, schema, lambda: ratchet(celrules.evaluate(
                result["status"], None if old is None else old.get("status"), status_schema,
                "status")))
    else:
        checked = result
        if rtype.status_subresource and "status" in result:
            checked = {k: v for k, v in result.items() if k != "status"}
        causes = ratchet(validate(checked, schema))
        # ``blocked``: the metadata already has a blocking error (the CEL rules do not run)
        causes += _unless_invalid([*causes, *([_BLOCKED] if blocked else [])], schema,
                                  lambda: ratchet(celrules.evaluate(checked, old, schema)))
    if causes:
        name = str((result.get("metadata") or {}).get("name") or "")
        raise invalid(rtype, name, causes)
    return result


#: What a real server reports instead of evaluating CEL rules on an object the schema refused.
NOT_CHECKED: Cause = {"reason": "FieldValueInvalid", "field": "<nil>", "message": (
    "Invalid value: null: some validation rules were not checked because the object was "
    "invalid; correct the existing errors to complete validation")}


_BLOCKED: Cause = {"reason": "FieldValueRequired"}
_BLOCKING = frozenset(("FieldValueNotSupported", "FieldValueRequired", "FieldValueTooLong",
                       "FieldValueTooMany", "FieldValueTypeInvalid"))


def _unless_invalid(causes: list[Cause], schema: Mapping[str, Any],
                    rules: Any) -> list[Cause]:
    """The causes of the CEL rules, which do not run after a blocking schema error (a wrong
    type, a missing required field, a value not in its enum, too long, too many)."""
    if not any(c.get("reason") in _BLOCKING for c in causes):
        return list(rules())
    return [dict(NOT_CHECKED)] if celrules._has_rules(schema) else []


def invalid(rtype: ResourceType, name: str, causes: list[Cause]) -> Invalid:
    """The 422 a real server answers: ``Kind.group "name" is invalid: <causes>``, the causes
    of a custom resource ordered by field as kube-apiserver orders them."""
    causes = sorted(causes, key=lambda c: c.get("field") or "")
    texts: list[str] = []
    for cause in causes:
        text = f"{cause['field']}: {cause['message']}" if cause.get("field") else cause["message"]
        if text not in texts:
            texts.append(text)
    summary = texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"
    qualified = f"{rtype.kind}.{rtype.group}" if rtype.group else rtype.kind
    return Invalid(f'{qualified} "{name}" is invalid: {summary}', causes=causes, name=name,
                   group=rtype.group, kind=rtype.kind)


def _changed(new: Any, old: Any, cause: Cause) -> bool:
    """Whether the field a cause names differs between the update and the stored object."""
    path = cause.get("field", "")
    if cause.get("reason") == "FieldValueRequired":
        path = path.rpartition(".")[0]
    missing = object()
    return _lookup(new, path, missing) != _lookup(old, path, missing)


def _lookup(value: Any, path: str, missing: Any) -> Any:
    for part in re.findall(r"[^.\[\]]+|\[\d+\]", path):
        if part.startswith("[") and isinstance(value, list):
            index = int(part[1:-1])
            if index >= len(value):
                return missing
            value = value[index]
        elif isinstance(value, dict) and part in value:
            value = value[part]
        else:
            return missing
    return value


# -------------------------------------------------------------------------- helpers
def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _name(path: str) -> str:
    return path or "body"


def _typed(schema: Mapping[str, Any]) -> bool:
    return bool(schema.get("type")) or schema.get("x-kubernetes-int-or-string") is True


def _is_integer(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and value.is_integer())


def _has_type(value: Any, expected: str) -> bool:
    if expected == "integer":
        return _is_integer(value)
    if expected == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    return _json_type(value) == expected


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _text(value: Any) -> str:
    """A number as Go's ``%v`` prints it (whole floats without ``.0``)."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e21:
        return str(int(value))
    return str(value)


def _render(value: Any) -> str:
    """A bad value as a real server's field errors print it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return _text(value)
    if value is None:
        return '"null"'
    return json.dumps(value, separators=(",", ":"))


def _invalid(path: str, value: Any, detail: str) -> Cause:
    return {"reason": "FieldValueInvalid", "field": path,
            "message": f"Invalid value: {_render(value)}: {detail}"}


def _type_invalid(path: str, schema: Mapping[str, Any], actual: str) -> Cause:
    expected = schema.get("type", "")
    return {"reason": "FieldValueTypeInvalid", "field": path,
            "message": f'Invalid value: "{actual}": {_name(path)} in body must be of type '
                       f'{expected}: "{actual}"'}


def _not_supported(path: str, value: Any, allowed: list[Any]) -> Cause:
    listed = ", ".join(json.dumps(a if isinstance(a, str) else json.dumps(a)) for a in allowed)
    return {"reason": "FieldValueNotSupported", "field": path,
            "message": f"Unsupported value: {_render(value)}: supported values: {listed}"}


def _compiled(pattern: str) -> re.Pattern[str]:
    found = _PATTERNS.get(pattern)
    if found is None:
        try:
            found = re.compile(pattern)
        except re.error:
            found = re.compile(re.escape(pattern))
        _PATTERNS[pattern] = found
    return found


_DATE_TIME = re.compile(
    r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def _valid_time(value: str, fmt: str) -> bool:
    if not (_DATE_TIME if fmt == "date-time" else _DATE).match(value):
        return False
    try:
        text = value[:10] if fmt == "date" else re.sub(r"\.\d+", "", value[:10] + "T"
                                                        + value[11:]).upper()
        datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return False
    return True
