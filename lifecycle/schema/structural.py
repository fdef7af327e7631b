"""The structural-schema checks a real API server applies to a CustomResourceDefinition.

:func:`check_crd` reports, one line each, what would make the API server
refuse a CRD: a schema that is not structural (every node typed, junctors
only restating what is specified outside them, ``metadata`` limited to
``name`` and ``generateName``), defaults that do not match their schema, and
names that are not DNS subdomains. The generated CRDs are checked by it in
the tests, and the embedded API refuses a CRD it finds a problem in.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from lifecycle.core.objects import metadata

__all__ = ["check_crd", "check_structural"]


# ------------------------------------------------------------------ checker
_ALLOWED_KEYS = frozenset({
    "type", "format", "title", "description", "default", "maximum", "exclusiveMaximum",
    "minimum", "exclusiveMinimum", "maxLength", "minLength", "pattern", "maxItems",
    "minItems", "uniqueItems", "multipleOf", "enum", "maxProperties", "minProperties",
    "required", "items", "allOf", "oneOf", "anyOf", "not", "properties",
    "additionalProperties", "nullable", "example", "externalDocs",
    "x-kubernetes-preserve-unknown-fields", "x-kubernetes-embedded-resource",
    "x-kubernetes-int-or-string", "x-kubernetes-list-map-keys", "x-kubernetes-list-type",
    "x-kubernetes-map-type", "x-kubernetes-validations",
})
_TYPES = frozenset({"object", "array", "string", "integer", "number", "boolean"})
_JUNCTORS = ("allOf", "anyOf", "oneOf", "not")
_FORBIDDEN_IN_JUNCTORS = ("description", "type", "default", "additionalProperties", "nullable")
_DNS1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def check_structural(schema: Any, path: str = "openAPIV3Schema") -> list[str]:
    """Problems that make ``schema`` non-structural (empty list: structural).

    The rules of ``apiextensions.k8s.io/v1``: every node has a non-empty
    ``type`` (unless it sets ``x-kubernetes-int-or-string`` or
    ``x-kubernetes-preserve-unknown-fields``); a field or item mentioned
    inside ``allOf``/``anyOf``/``oneOf``/``not`` is also specified outside
    them; no ``description``, ``type``, ``default``, ``additionalProperties``
    or ``nullable`` inside those junctors; ``metadata`` restricts at most
    ``name`` and ``generateName``; ``properties`` and ``additionalProperties``
    are exclusive; only the keys v1 schemas allow.
    """
    problems: list[str] = []
    _check_node(schema, path, problems, root=True)
    return problems


def _check_node(node: Any, path: str, problems: list[str], *, root: bool = False,
                in_junctor: bool = False) -> None:
    if not isinstance(node, dict):
        problems.append(f"{path}: must be an object")
        return
    for key in node:
        if key not in _ALLOWED_KEYS:
            problems.append(f"{path}.{key}: not allowed in apiextensions.k8s.io/v1 schemas")
    if in_junctor:
        for key in _FORBIDDEN_IN_JUNCTORS:
            if key in node:
                problems.append(f"{path}.{key}: must not be set inside allOf/anyOf/oneOf/not")
    else:
        typ = node.get("type")
        exempt = node.get("x-kubernetes-int-or-string") is True or node.get(
            "x-kubernetes-preserve-unknown-fields") is True
        if typ in (None, "") and not exempt:
            problems.append(f"{path}.type: Required value: must not be empty for specified "
                            f"{'root' if root else 'field'}")
        elif typ not in (None, "") and typ not in _TYPES:
            problems.append(f"{path}.type: Unsupported value {typ!r}")
        if root and typ not in (None, "object"):
            problems.append(f"{path}.type: must be object at the root")
    if "x-kubernetes-validations" in node:
        _check_rules(node["x-kubernetes-validations"], f"{path}.x-kubernetes-validations",
                     problems)
    if "properties" in node and "additionalProperties" in node:
        problems.append(f"{path}: properties and additionalProperties are mutually exclusive")
    props = node.get("properties")
    if props is not None:
        if not isinstance(props, dict):
            problems.append(f"{path}.properties: must be an object")
            props = {}
        for name, child in props.items():
            _check_node(child, f"{path}.properties[{name}]", problems, in_junctor=in_junctor)
        if root and "metadata" in props:
            _check_metadata(props["metadata"], f"{path}.properties[metadata]", problems)
    extra = node.get("additionalProperties")
    if isinstance(extra, dict):
        _check_node(extra, f"{path}.additionalProperties", problems, in_junctor=in_junctor)
    if "items" in node:
        _check_node(node["items"], f"{path}.items", problems, in_junctor=in_junctor)
    for junctor in _JUNCTORS:
        if junctor not in node:
            continue
        branches = node[junctor] if junctor != "not" else [node[junctor]]
        if not isinstance(branches, list):
            problems.append(f"{path}.{junctor}: must be a list")
            continue
        for index, branch in enumerate(branches):
            where = f"{path}.{junctor}[{index}]"
            _check_node(branch, where, problems, in_junctor=True)
            _check_covered(branch, node, where, problems)


_RULE_KEYS = frozenset({"rule", "message", "messageExpression", "reason", "fieldPath",
                        "optionalOldSelf"})
_RULE_REASONS = frozenset({"FieldValueInvalid", "FieldValueForbidden", "FieldValueRequired",
                           "FieldValueDuplicate"})


def _check_rules(rules: Any, path: str, problems: list[str]) -> None:
    """``x-kubernetes-validations``: a list of ``{rule, message...}`` with a non-empty rule
    (the CEL itself is compiled by the API server, see :mod:`lifecycle.sim.celrules`)."""
    if not isinstance(rules, list):
        problems.append(f"{path}: must be a list")
        return
    for index, rule in enumerate(rules):
        where = f"{path}[{index}]"
        if not isinstance(rule, dict):
            problems.append(f"{where}: must be an object")
            continue
        if not isinstance(rule.get("rule"), str) or not rule["rule"].strip():
            problems.append(f"{where}.rule: Required value")
        for key in rule:
            if key not in _RULE_KEYS:
                problems.append(f"{where}.{key}: not allowed in a validation rule")
        if "reason" in rule and rule["reason"] not in _RULE_REASONS:
            problems.append(f"{where}.reason: Unsupported value {rule['reason']!r}")


def _check_covered(branch: Any, outside: dict[str, Any], where: str,
                   problems: list[str]) -> None:
    """Fields and items named in a junctor branch must be specified outside it too."""
    if not isinstance(branch, dict):
        return
    outer_props = outside.get("properties") or {}
    for name, child in (branch.get("properties") or {}).items():
        if name not in outer_props:
            problems.append(f"{where}.properties[{name}]: must be specified outside "
                            f"the logical junctor too")
        else:
            _check_covered(child, outer_props[name], f"{where}.properties[{name}]", problems)
    if "items" in branch:
        if "items" not in outside:
            problems.append(f"{where}.items: must be specified outside the logical junctor too")
        else:
            _check_covered(branch["items"], outside["items"], f"{where}.items", problems)


def _check_metadata(node: Any, path: str, problems: list[str]) -> None:
    if not isinstance(node, dict):
        return
    for key in node:
        if key not in ("type", "properties"):  # the API server refuses a description too
            problems.append(f"{path}.{key}: only restrictions on name and generateName "
                            f"are allowed in metadata")
    for name in node.get("properties") or {}:
        if name not in ("name", "generateName"):
            problems.append(f"{path}.properties[{name}]: only name and generateName may be "
                            f"restricted in metadata")


def _walk_defaults(node: Any, path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    if isinstance(node, dict):
        yield path, node
        for name, child in (node.get("properties") or {}).items():
            yield from _walk_defaults(child, f"{path}.properties[{name}]")
        if isinstance(node.get("items"), dict):
            yield from _walk_defaults(node["items"], f"{path}.items")
        if isinstance(node.get("additionalProperties"), dict):
            yield from _walk_defaults(node["additionalProperties"],
                                      f"{path}.additionalProperties")


def check_crd(doc: Any) -> list[str]:
    """Problems with a CustomResourceDefinition document (empty list: valid)."""
    if not isinstance(doc, dict):
        return ["document: must be a mapping"]
    problems: list[str] = []
    if doc.get("apiVersion") != "apiextensions.k8s.io/v1":
        problems.append("apiVersion: must be apiextensions.k8s.io/v1")
    if doc.get("kind") != "CustomResourceDefinition":
        problems.append("kind: must be CustomResourceDefinition")
    spec = doc.get("spec")
    if not isinstance(spec, dict):
        return [*problems, "spec: Required value"]
    group = spec.get("group", "")
    names = spec.get("names") or {}
    plural = names.get("plural", "")
    if not isinstance(group, str) or "." not in group or not _DNS1123.match(group):
        problems.append(f"spec.group: Invalid value {group!r}: a DNS subdomain with a dot")
    for field in ("plural", "kind"):
        if not names.get(field):
            problems.append(f"spec.names.{field}: Required value")
    if plural and not _DNS1123.match(plural):
        problems.append(f"spec.names.plural: Invalid value {plural!r}")
    name = metadata(doc).get("name")
    if name != f"{plural}.{group}":
        problems.append(f"metadata.name: must be spec.names.plural+'.'+spec.group "
                        f"({plural}.{group}), got {name!r}")
    if spec.get("scope") not in ("Namespaced", "Cluster"):
        problems.append("spec.scope: must be Namespaced or Cluster")
    versions = spec.get("versions")
    if not isinstance(versions, list) or not versions:
        return [*problems, "spec.versions: must have at least one version"]
    if sum(1 for v in versions if isinstance(v, dict) and v.get("storage")) != 1:
        problems.append("spec.versions: exactly one version must be the storage version")
    for index, version in enumerate(versions):
        where = f"spec.versions[{index}]"
        if not isinstance(version, dict):
            problems.append(f"{where}: must be a mapping")
            continue
        if not version.get("name"):
            problems.append(f"{where}.name: Required value")
        schema = (version.get("schema") or {}).get("openAPIV3Schema")
        if schema is None:
            problems.append(f"{where}.schema.openAPIV3Schema: Required value")
            continue
        problems.extend(check_structural(schema, f"{where}.schema.openAPIV3Schema"))
        for node_path, node in _walk_defaults(schema, f"{where}.schema.openAPIV3Schema"):
            if "default" in node and node.get("nullable") is not True and node[
                    "default"] is None:
                problems.append(f"{node_path}.default: null default needs nullable: true")
        subresources = version.get("subresources") or {}
        if not isinstance(subresources, dict) or set(subresources) - {"status", "scale"}:
            problems.append(f"{where}.subresources: only status and scale are allowed")
        for column in version.get("additionalPrinterColumns") or []:
            if not column.get("name") or not column.get("jsonPath") or column.get(
                    "type") not in ("string", "integer", "number", "boolean", "date"):
                problems.append(f"{where}.additionalPrinterColumns: invalid column {column!r}")
    return problems
