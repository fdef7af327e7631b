"""``x-kubernetes-validations``: the CEL rules of a CRD schema, evaluated as the API server does.

A schema node may carry rules (``{"rule": "self.replicas <= 10", "message":
...}``); each is a CEL expression over ``self``, the node's value, and, in a
*transition rule*, ``oldSelf``, the value the update replaces. The API
server evaluates them on create and update and refuses a write whose rule
is false with a 422 cause at the node (``reason`` of the rule, by default
``FieldValueInvalid``; ``message``, or ``failed rule: <rule>``). This module
does the same for the embedded API, with `cel-python
<https://pypi.org/project/cel-python/>`_ (``celpy``):

* a transition rule is evaluated only on an update, where the old object has
  the node too: inside a list only of type ``map``, whose items pair by key;
* on an update, a node whose value the update leaves unchanged is not
  evaluated (validation ratcheting: the write would keep what was stored);
* ``self == oldSelf`` (an immutable field, as ``lifecycle crds`` declares
  it) is compared directly, so the bundled kinds never load the CEL
  library; any other rule is compiled once per process;
* a rule that does not compile makes its CRD invalid (:func:`crd_problems`),
  as the API server refuses it; an error while evaluating (a missing field,
  a division by zero) is a cause naming the rule.

Kubernetes' CEL extension libraries (``quantity()``, ``url()``,
``isSorted()``...) and cost limits are not implemented; standard CEL is.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["crd_problems", "evaluate"]

#: The rule ``lifecycle crds`` writes for an immutable field (compared without CEL).
_IMMUTABLE = re.compile(r"^\s*self\s*==\s*oldSelf\s*$")
_OLD_SELF = re.compile(r"\boldSelf\b")
_MISSING = object()


def evaluate(new: Any, old: Any, schema: Mapping[str, Any] | None,
             path: str = "") -> list[dict[str, str]]:
    """Causes for the rules ``new`` breaks under ``schema``; ``old`` is the stored object of
    an update (``None`` on create). ``path`` names ``new`` in the causes."""
    if not isinstance(schema, Mapping) or not _has_rules(schema):
        return []
    causes: list[dict[str, str]] = []
    _walk(new, _MISSING if old is None else old, schema, path, causes, paired=True)
    return causes


def _walk(value: Any, old: Any, schema: Mapping[str, Any], path: str,
          causes: list[dict[str, str]], *, paired: bool) -> None:
    if old is not _MISSING and value == old:
        return  # ratcheting: an unchanged value is not validated again
    if value is None:
        return
    for rule in schema.get("x-kubernetes-validations") or ():
        if isinstance(rule, Mapping):
            _check(rule, value, old if paired else _MISSING, path, causes)
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            child = props.get(key) if key in props else extra
            if isinstance(child, Mapping) and _has_rules(child):
                before = old.get(key, _MISSING) if isinstance(old, dict) else _MISSING
                _walk(item, before, child, _join(path, key), causes, paired=paired)
    elif isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, Mapping) and _has_rules(items):
            olds = old if isinstance(old, list) else []
            keys = schema.get("x-kubernetes-list-map-keys")
            by_key = {_key(o, keys): o for o in olds} if (
                schema.get("x-kubernetes-list-type") == "map" and keys and paired) else None
            for index, item in enumerate(value):
                if by_key is not None:  # a map list: an item pairs with the old one of its key
                    before = by_key.get(_key(item, keys), _MISSING)
                    _walk(item, before, items, f"{path}[{index}]", causes, paired=True)
                    continue
                # other lists are not paired; an unchanged item is skipped (ratcheting)
                before = olds[index] if index < len(olds) and olds[index] == item else _MISSING
                _walk(item, before, items, f"{path}[{index}]", causes, paired=False)


def _check(rule: Mapping[str, Any], value: Any, old: Any, path: str,
           causes: list[dict[str, str]]) -> None:
    text = rule.get("rule")
    if not isinstance(text, str):
        return
    transition = bool(_OLD_SELF.search(text))
    if transition and old is _MISSING:
        return  # a transition rule needs the old value
    field = _join(path, str(rule["fieldPath"]).lstrip(".")) if rule.get("fieldPath") else path
    if _IMMUTABLE.match(text):
        passed: Any = value == old
    else:
        try:
            passed = _run(text, value, old)
        except Exception as exc:  # a CEL error while evaluating: the write is refused
            causes.append({"reason": "FieldValueInvalid", "field": field,
                           "message": f"Invalid value: {_type_name(value)}: rule {text!r} "
                                      f"could not be evaluated: {_short(exc)}"})
            return
    if passed is True:
        return
    message = rule.get("message") or f"failed rule: {text}"
    reason = rule.get("reason") or "FieldValueInvalid"
    if reason == "FieldValueInvalid":  # an object's or a list's value is not shown
        shown = "" if isinstance(value, dict | list) else f"{_type_name(value)}: "
        message = f"Invalid value: {shown}{message}"
    elif reason == "FieldValueForbidden":
        message = f"Forbidden: {message}"
    elif reason == "FieldValueRequired":
        message = f"Required value: {message}"
    causes.append({"reason": str(reason), "field": field, "message": str(message)})


def _run(text: str, value: Any, old: Any) -> bool:
    import celpy

    activation = {"self": celpy.json_to_cel(value)}
    if old is not _MISSING:
        activation["oldSelf"] = celpy.json_to_cel(old)
    result = _program(text).evaluate(activation)
    if isinstance(result, Exception):
        raise result
    return bool(result) if isinstance(result, celpy.celtypes.BoolType) else result


@functools.lru_cache(maxsize=1)
def _environment() -> Any:
    import celpy

    return celpy.Environment()


@functools.lru_cache(maxsize=512)
def _program(text: str) -> Any:
    """The compiled rule (compiled once per process; raises on a syntax error)."""
    environment = _environment()
    return environment.program(environment.compile(text))


def crd_problems(crd: Mapping[str, Any]) -> list[dict[str, str]]:
    """Causes for the rules of a CRD's schemas that do not compile, or that use ``oldSelf``
    inside a list the server cannot pair items of (the API server's checks)."""
    causes: list[dict[str, str]] = []
    spec = crd.get("spec")
    versions = spec.get("versions") if isinstance(spec, Mapping) else None
    for index, version in enumerate(versions if isinstance(versions, list) else ()):
        schema = ((version.get("schema") or {}) if isinstance(version, Mapping) else {}).get(
            "openAPIV3Schema")
        where = f"spec.versions[{index}].schema.openAPIV3Schema"
        for path, rule_index, text, paired in _rules(schema, where):
            field = f"{path}.x-kubernetes-validations[{rule_index}].rule"
            if _OLD_SELF.search(text) and not paired:
                causes.append({"reason": "FieldValueInvalid", "field": field,
                               "message": f"Invalid value: {text!r}: oldSelf cannot be used "
                                          f"on the uncorrelatable portion of the schema"})
                continue
            if _IMMUTABLE.match(text):
                continue
            try:
                _program(text)
            except Exception as exc:
                causes.append({"reason": "FieldValueInvalid", "field": field,
                               "message": f"Invalid value: {text!r}: compilation failed: "
                                          f"{_short(exc)}"})
    return causes



def _rules(schema: Any, path: str, paired: bool = True) -> Iterator[tuple[str, int, str, bool]]:
    """Every rule: (schema path, index, rule, whether old and new values can be paired there:
    not under the items of a list, unless it is a map list, whose items pair by key)."""
    if not isinstance(schema, Mapping):
        return
    for index, rule in enumerate(schema.get("x-kubernetes-validations") or ()):
        if isinstance(rule, Mapping) and isinstance(rule.get("rule"), str):
            yield path, index, rule["rule"], paired
    for name, child in (schema.get("properties") or {}).items():
        yield from _rules(child, f"{path}.properties[{name}]", paired)
    yield from _rules(schema.get("additionalProperties"), f"{path}.additionalProperties", paired)
    yield from _rules(schema.get("items"), f"{path}.items",
                      paired and schema.get("x-kubernetes-list-type") == "map")


_SEEN: dict[int, tuple[Mapping[str, Any], bool]] = {}


def _has_rules(schema: Mapping[str, Any]) -> bool:
    """Whether ``schema`` or a node under it has rules (remembered per schema node)."""
    known = _SEEN.get(id(schema))
    if known is not None and known[0] is schema:
        return known[1]
    found = bool(schema.get("x-kubernetes-validations")) or any(
        isinstance(child, Mapping) and _has_rules(child)
        for child in [*(schema.get("properties") or {}).values(), schema.get("items"),
                      schema.get("additionalProperties")])
    if len(_SEEN) > 50_000:
        _SEEN.clear()
    _SEEN[id(schema)] = (schema, found)
    return found


def _key(item: Any, keys: Any) -> Any:
    """The map key of a list item (its values of the list's map keys)."""
    if not isinstance(item, dict):
        return repr(item)
    return repr([item.get(k) for k in keys])


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _type_name(value: Any) -> str:
    if isinstance(value, bool):
        return '"boolean"'
    if isinstance(value, int | float):
        return '"number"' if isinstance(value, float) else '"integer"'
    if isinstance(value, str):
        return '"string"'
    return '"array"' if isinstance(value, list) else '"object"'


def _short(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text[:200] or type(exc).__name__
