"""OpenAPI documents of the HTTP face, and strict field validation against them.

``/openapi/v3`` lists one document per group-version (``/openapi/v3/apis/G/V``),
built from the registered types' schemas (a custom kind's CRD schema; a
compact schema of the fields of each built-in kind). Every operation carries
``x-kubernetes-group-version-kind`` and the ``PATCH`` operations declare the
``fieldValidation`` query parameter, so kubectl leaves validation to the
server (``fieldValidation=Strict``), which :func:`unknown_fields` implements;
``kubectl explain`` reads the component schemas. ``/openapi/v2`` serves the
same definitions as a JSON Swagger 2.0 document (and its operations in
protobuf, :mod:`lifecycle.sim.swagger_pb`).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from lifecycle.kube.errors import BadRequest
from lifecycle.kube.resources import ResourceType

__all__ = ["FIELD_VALIDATION", "check_fields", "is_builtin", "schema_name", "type_schema",
           "unknown_fields", "v2_document", "v3_document", "v3_index"]

_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
_STR = {"type": "string"}
_INT = {"type": "integer", "format": "int64"}
_BOOL = {"type": "boolean"}
_TIME = {"type": "string", "format": "date-time"}
_STR_MAP = {"type": "object", "additionalProperties": {"type": "string"}}
_BYTES_MAP = {"type": "object", "additionalProperties": {"type": "string", "format": "byte"}}
_FREE = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}

OBJECT_META: dict[str, Any] = {
    "type": "object",
    "description": "Standard object's metadata.",
    "properties": {
        "name": _STR, "generateName": _STR, "namespace": _STR, "uid": _STR,
        "resourceVersion": _STR, "generation": _INT, "selfLink": _STR,
        "creationTimestamp": _TIME, "deletionTimestamp": _TIME,
        "deletionGracePeriodSeconds": _INT, "labels": _STR_MAP, "annotations": _STR_MAP,
        "finalizers": {"type": "array", "items": _STR,
                       "x-kubernetes-patch-strategy": "merge", "x-kubernetes-list-type": "set"},
        "ownerReferences": {"type": "array", "x-kubernetes-patch-strategy": "merge",
                            "x-kubernetes-patch-merge-key": "uid",
                            "items": {"type": "object",
                                      "required": ["apiVersion", "kind", "name", "uid"],
                                      "properties": {
                                          "apiVersion": _STR, "kind": _STR, "name": _STR,
                                          "uid": _STR, "controller": _BOOL,
                                          "blockOwnerDeletion": _BOOL}}},
        "managedFields": {"type": "array", "items": _FREE},
    },
}


def _obj(description: str, **properties: Any) -> dict[str, Any]:
    return {"type": "object", "description": description,
            "properties": {"apiVersion": _STR, "kind": _STR, "metadata": {}, **properties}}


_BUILTIN: dict[tuple[str, str], tuple[str, dict[str, Any]]] = {
    ("v1", "Secret"): ("io.k8s.api.core.v1.Secret", _obj(
        "Secret holds secret data of a certain type.", data=_BYTES_MAP, stringData=_STR_MAP,
        type=_STR, immutable=_BOOL)),
    ("v1", "ConfigMap"): ("io.k8s.api.core.v1.ConfigMap", _obj(
        "ConfigMap holds configuration data for pods to consume.", data=_STR_MAP,
        binaryData=_BYTES_MAP, immutable=_BOOL)),
    ("v1", "Namespace"): ("io.k8s.api.core.v1.Namespace", _obj(
        "Namespace provides a scope for Names.",
        spec={"type": "object", "properties": {"finalizers": {"type": "array", "items": _STR}}},
        status={"type": "object", "properties": {
            "phase": _STR, "conditions": {"type": "array", "items": _FREE}}})),
    ("v1", "Event"): ("io.k8s.api.core.v1.Event", _obj(
        "Event is a report of an event somewhere in the cluster.",
        involvedObject={"type": "object", "properties": {
            k: _STR for k in ("apiVersion", "kind", "name", "namespace", "uid",
                              "resourceVersion", "fieldPath")}},
        reason=_STR, message=_STR, type=_STR, action=_STR, count={"type": "integer"},
        firstTimestamp=_TIME, lastTimestamp=_TIME, eventTime=_TIME,
        source={"type": "object", "properties": {"component": _STR, "host": _STR}},
        series=_FREE, related=_FREE, reportingComponent=_STR, reportingInstance=_STR)),
    ("coordination.k8s.io/v1", "Lease"): ("io.k8s.api.coordination.v1.Lease", _obj(
        "Lease defines a lease concept.",
        spec={"type": "object", "properties": {
            "holderIdentity": _STR, "leaseDurationSeconds": {"type": "integer"},
            "acquireTime": _TIME, "renewTime": _TIME, "leaseTransitions": {"type": "integer"},
            "strategy": _STR, "preferredHolder": _STR}})),
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition"): (
        "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition",
        _obj("CustomResourceDefinition represents a resource that should be exposed on the "
             "API server.", spec=_FREE, status=_FREE)),
}


def is_builtin(rtype: ResourceType) -> bool:
    """Whether ``rtype`` is a built-in kind (strategic merge patch applies to it)."""
    return (rtype.api_version, rtype.kind) in _BUILTIN


def schema_name(rtype: ResourceType) -> str:
    """The component name of ``rtype``'s schema (``com.example.v1.Widget``)."""
    builtin = _BUILTIN.get((rtype.api_version, rtype.kind))
    if builtin is not None:
        return builtin[0]
    group = ".".join(reversed(rtype.group.split("."))) if rtype.group else "io.k8s.api.core"
    return f"{group}.{rtype.version}.{rtype.kind}"


def type_schema(rtype: ResourceType) -> dict[str, Any]:
    """The whole-object schema of ``rtype``, its metadata given as ObjectMeta."""
    builtin = _BUILTIN.get((rtype.api_version, rtype.kind))
    if builtin is not None:
        schema = json.loads(json.dumps(builtin[1]))
    elif isinstance(rtype.schema, dict):
        schema = json.loads(json.dumps(rtype.schema))
    else:
        schema = {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                  "properties": {"apiVersion": _STR, "kind": _STR, "metadata": {}}}
    properties = schema.setdefault("properties", {})
    properties.setdefault("apiVersion", dict(_STR))
    properties.setdefault("kind", dict(_STR))
    properties["metadata"] = {"description": "Standard object's metadata.",
                              "allOf": [{"$ref": f"#/components/schemas/{_META}"}]}
    schema["x-kubernetes-group-version-kind"] = [
        {"group": rtype.group, "version": rtype.version, "kind": rtype.kind}]
    return schema


# ------------------------------------------------------------- strict validation


def unknown_fields(obj: Any, rtype: ResourceType, *, skip_status: bool = False) -> list[str]:
    """The paths (``spec.foo``) of fields of ``obj`` its type's schema does not declare.

    Strategic merge patch directives (keys starting with ``$``) are not fields.
    """
    builtin = _BUILTIN.get((rtype.api_version, rtype.kind))
    schema = builtin[1] if builtin is not None else rtype.schema
    found: list[str] = []
    if not isinstance(obj, dict) or not isinstance(schema, dict):
        return found
    properties = schema.get("properties") or {}
    for key, value in obj.items():
        if key in ("apiVersion", "kind") or key.startswith("$"):
            continue
        if key == "metadata":
            _walk(value, OBJECT_META, "metadata", found)
        elif key == "status" and skip_status:
            continue
        elif key in properties:
            _walk(value, properties[key], key, found)
        elif not schema.get("x-kubernetes-preserve-unknown-fields"):
            found.append(key)
    return found


#: What a write does with a field its schema does not declare, as the API server's
#: ``fieldValidation``: refuse the write (``Strict``), keep going with a warning (``Warn``),
#: or prune the field silently (``Ignore``).
FIELD_VALIDATION = ("Strict", "Warn", "Ignore")


def check_fields(obj: Any, rtype: ResourceType, mode: str, *, skip_status: bool,
                 hint: str = "") -> list[str]:
    """Apply ``fieldValidation`` ``mode`` to a write of ``obj``: the unknown fields' paths
    under ``Warn``, none under ``Ignore``; under ``Strict`` a
    :class:`~lifecycle.kube.errors.BadRequest` naming each one (``hint`` appended), as a
    real server's strict decoding error. An unknown ``mode`` is a :class:`ValueError`."""
    if mode not in FIELD_VALIDATION:
        raise ValueError(f"field_validation must be one of {', '.join(FIELD_VALIDATION)}, "
                         f"not {mode!r}")
    if mode == "Ignore":
        return []
    unknown = unknown_fields(obj, rtype, skip_status=skip_status)
    if unknown and mode == "Strict":
        listed = ", ".join(f'unknown field "{path}"' for path in unknown)
        raise BadRequest(f'{rtype.kind} in version "{rtype.version}" cannot be handled as '
                         f"a {rtype.kind}: strict decoding error: {listed}{hint}")
    return unknown


def _walk(value: Any, schema: Any, path: str, found: list[str]) -> None:
    if not isinstance(schema, dict):
        return
    if isinstance(value, dict):
        properties = schema.get("properties")
        additional = schema.get("additionalProperties")
        preserve = schema.get("x-kubernetes-preserve-unknown-fields") is True
        for key, sub in value.items():
            if key.startswith("$"):
                continue
            where = f"{path}.{key}"
            if isinstance(properties, dict) and key in properties:
                _walk(sub, properties[key], where, found)
            elif isinstance(additional, dict):
                _walk(sub, additional, where, found)
            elif properties is not None and not preserve and additional is not True:
                found.append(where)
            elif properties is None and not preserve and additional is None and \
                    schema.get("type") == "object" and "allOf" not in schema:
                # a structural object schema without properties declares no fields
                found.append(where)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            _walk(item, schema["items"], f"{path}[{i}]", found)


# ------------------------------------------------------------------------- documents

_FIELD_VALIDATION = {"name": "fieldValidation", "in": "query", "schema": {"type": "string"},
                     "description": "Ignore, Warn or Strict: how to treat unknown fields."}
_DRY_RUN = {"name": "dryRun", "in": "query", "schema": {"type": "string"},
            "description": "All: validate the request without persisting it."}
_FIELD_MANAGER = {"name": "fieldManager", "in": "query", "schema": {"type": "string"}}
_PATCH_TYPES = ("application/json-patch+json", "application/merge-patch+json",
                "application/strategic-merge-patch+json")


def _operations(rtype: ResourceType, ref: str) -> dict[str, Any]:
    gvk = {"group": rtype.group, "version": rtype.version, "kind": rtype.kind}
    prefix = f"/api/{rtype.version}" if not rtype.group else (
        f"/apis/{rtype.group}/{rtype.version}")
    scope = "/namespaces/{namespace}" if rtype.namespaced else ""
    collection = f"{prefix}{scope}/{rtype.plural}"
    item = f"{collection}/{{name}}"
    body = {"content": {"application/json": {"schema": {"$ref": ref}}}, "required": True}
    answer = {"200": {"description": "OK", "content": {
        "application/json": {"schema": {"$ref": ref}}}}}
    patch_types = _PATCH_TYPES if is_builtin(rtype) else _PATCH_TYPES[:2]

    def op(action: str, operation_id: str, params: list[dict[str, Any]],
           request: dict[str, Any] | None = None) -> dict[str, Any]:
        entry: dict[str, Any] = {"operationId": f"{operation_id}{rtype.kind}",
                                 "x-kubernetes-action": action,
                                 "x-kubernetes-group-version-kind": gvk,
                                 "parameters": params, "responses": answer}
        if request is not None:
            entry["requestBody"] = request
        return entry

    writes = [_DRY_RUN, _FIELD_MANAGER, _FIELD_VALIDATION]
    patch_body = {"content": {t: {"schema": {"type": "object"}} for t in patch_types},
                  "required": True}
    paths = {
        collection: {"get": op("list", "list", []), "post": op("post", "create", writes, body),
                     "delete": op("deletecollection", "deleteCollection", [_DRY_RUN])},
        item: {"get": op("get", "read", []), "put": op("put", "replace", writes, body),
               "patch": op("patch", "patch", writes, patch_body),
               "delete": op("delete", "delete", [_DRY_RUN])},
    }
    if rtype.status_subresource:
        paths[f"{item}/status"] = {
            "get": op("get", "readStatus", []), "put": op("put", "replaceStatus", writes, body),
            "patch": op("patch", "patchStatus", writes, patch_body)}
    return paths


def v3_document(types: list[ResourceType], group_version: str) -> dict[str, Any] | None:
    """The OpenAPI v3 document of one group-version, or ``None`` if nothing is served there."""
    served = [t for t in types if t.api_version == group_version]
    if not served:
        return None
    schemas: dict[str, Any] = {_META: OBJECT_META}
    paths: dict[str, Any] = {}
    for rtype in served:
        name = schema_name(rtype)
        schemas[name] = type_schema(rtype)
        paths.update(_operations(rtype, f"#/components/schemas/{name}"))
    return {"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": "v1.30.0"},
            "paths": paths, "components": {"schemas": schemas}}


def v3_index(types: list[ResourceType]) -> dict[str, Any]:
    """The ``/openapi/v3`` index: a path and a content-hashed URL per group-version."""
    paths = {}
    for group_version in dict.fromkeys(t.api_version for t in types):
        key = f"api/{group_version}" if "/" not in group_version else f"apis/{group_version}"
        doc = v3_document(types, group_version)
        digest = hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest().upper()
        paths[key] = {"serverRelativeURL": f"/openapi/v3/{key}?hash={digest}"}
    return {"paths": paths}


def v2_document(types: list[ResourceType]) -> dict[str, Any]:
    """A Swagger 2.0 document with every type's definition and operations."""
    definitions: dict[str, Any] = {_META: OBJECT_META}
    paths: dict[str, Any] = {}
    for rtype in types:
        name = schema_name(rtype)
        definitions[name] = type_schema(rtype)
        for path, ops in _operations(rtype, f"#/definitions/{name}").items():
            paths[path] = {verb: _v2_operation(op) for verb, op in ops.items()}
    text = json.dumps({"swagger": "2.0", "info": {"title": "Kubernetes", "version": "v1.30.0"},
                       "paths": paths, "definitions": definitions})
    return json.loads(text.replace("#/components/schemas/", "#/definitions/"))


def _v2_operation(op: dict[str, Any]) -> dict[str, Any]:
    params = [{"name": p["name"], "in": p["in"], "type": "string", "uniqueItems": True}
              for p in op["parameters"]]
    body = op.get("requestBody")
    if body is not None:
        schema = next(iter(body["content"].values()))["schema"]
        params.append({"name": "body", "in": "body", "required": True, "schema": schema})
    return {"operationId": op["operationId"], "parameters": params,
            "x-kubernetes-action": op["x-kubernetes-action"],
            "x-kubernetes-group-version-kind": op["x-kubernetes-group-version-kind"],
            "responses": {"200": {"description": "OK"}}}
