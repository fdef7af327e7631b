"""The embedded API's checks of incoming objects, as a real API server makes them.

Names must be lowercase RFC 1123 names; labels, annotations and finalizers
must be well formed; Secret data must be base64 (``stringData`` is folded
into it); immutable Secrets and ConfigMaps keep their data; writes guarded by
``resourceVersion`` or uid answer 409 when the guard does not hold. Every
check raises the :mod:`lifecycle.kube.errors` class the API server answers
with.
"""

from __future__ import annotations

import base64
import binascii
import functools
import re
from collections.abc import Mapping
from typing import Any, cast

from lifecycle.kube.errors import BadRequest, Conflict, Invalid
from lifecycle.kube.resources import (
    BUILTIN_TYPES,
    CONFIG_MAP,
    EVENT,
    NAMESPACE,
    SECRET,
    ResourceType,
)
from lifecycle.kube.selectors import valid_label_key, valid_label_value
from lifecycle.sim import builtins

__all__ = [
    "admit_new",
    "check_event_type",
    "check_immutable",
    "check_list_options",
    "check_meta_types",
    "check_name",
    "check_resource_version",
    "check_uid",
    "keep_namespace_spec",
    "object_key",
    "prepare_secret",
    "type_key",
    "validate_metadata",
    "validate_owner_references",
]

_DNS_LABEL_PART = r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?"
_DNS_SUBDOMAIN = re.compile(rf"^{_DNS_LABEL_PART}(?:\.{_DNS_LABEL_PART})*$")
_DNS_LABEL = re.compile(rf"^{_DNS_LABEL_PART}$")


def type_key(obj: Any) -> tuple[str, str]:
    """The ``(apiVersion, kind)`` an incoming object names; both are required."""
    if obj.__class__ is not dict and not isinstance(obj, Mapping):
        raise Invalid("the object must be a JSON object")
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    if not isinstance(api_version, str) or not api_version:
        raise Invalid("apiVersion: Required value")
    if not isinstance(kind, str) or not kind:
        raise Invalid("kind: Required value")
    return api_version, kind


def object_key(rtype: ResourceType, namespace: str | None, name: Any) -> tuple[str | None, str]:
    """The store key ``(namespace, name)`` (namespace ``None`` for cluster-scoped types)."""
    if not name or not isinstance(name, str):
        raise Invalid(f"{rtype.kind}: metadata.name: Required value")
    if not rtype.namespaced:
        return (None, name)
    if not namespace:
        raise Invalid(f"{rtype.kind} {name!r}: metadata.namespace: Required value")
    return (namespace, name)


def check_name(rtype: ResourceType, name: Any) -> None:
    """A name must be a lowercase RFC 1123 subdomain (a label for Namespaces): 422 with the
    real server's cause otherwise."""
    pattern = _DNS_LABEL if rtype is NAMESPACE else _DNS_SUBDOMAIN
    if isinstance(name, str) and len(name) <= 253 and pattern.match(name):
        return
    causes = builtins.name_causes(str(name), label=rtype is NAMESPACE)
    if not causes:  # not a string at all
        causes = [builtins.invalid("metadata.name", str(name), "must be a string")]
    raise builtins.refuse(rtype, str(name), causes)


def check_resource_version(rtype: ResourceType, stored: dict[str, Any], given: Any) -> None:
    """A given ``resourceVersion`` must be an integer string equal to the stored one."""
    if given is None or given == "":
        return
    if not isinstance(given, str) or not given.isdigit():
        raise Invalid(
            f"metadata.resourceVersion: Invalid value: {given!r}: "
            f"resourceVersion must be an integer string"
        )
    if given != stored["metadata"]["resourceVersion"]:
        name = stored["metadata"]["name"]
        raise Conflict(
            f'Operation cannot be fulfilled on {rtype.resource} "{name}": '
            f"the object has been modified; please apply your changes to the "
            f"latest version and try again"
        )


def check_uid(stored: dict[str, Any], given: Any) -> None:
    """A given uid must be the stored object's uid."""
    if given and given != stored["metadata"]["uid"]:
        raise Conflict(
            f"Precondition failed: UID in precondition: {given}, "
            f"UID in object meta: {stored['metadata']['uid']}"
        )


@functools.lru_cache(maxsize=4096)  # keys and values repeat across objects
def _good_key_text(key: str) -> bool:
    return valid_label_key(key)


@functools.lru_cache(maxsize=4096)
def _good_value_text(value: str) -> bool:
    return valid_label_value(value)


# Only strings short enough to be valid are memoised, so the memo stays small.
_KEY_MAX = 253 + 1 + 63
_VALUE_MAX = 63


def _good_key(key: Any) -> bool:
    if key.__class__ is str and len(key) <= _KEY_MAX:
        return _good_key_text(key)
    return valid_label_key(key)


def _good_value(value: Any) -> bool:
    if value.__class__ is str and len(value) <= _VALUE_MAX:
        return _good_value_text(value)
    return valid_label_value(value)


def validate_metadata(rtype: ResourceType, name: str, meta: dict[str, Any],
                      obj: Mapping[str, Any] | None = None,
                      stored: Mapping[str, Any] | None = None) -> None:
    """Labels, annotations and finalizers, and with ``obj`` the built-in kind's own fields
    (and with ``stored`` what an update may not change), as one 422 with every cause.

    An accepted ``obj`` (owned by the caller) is then shaped as the server's typed
    decoding leaves it (:func:`lifecycle.sim.builtins.typed`).
    """
    labels = meta.get("labels")
    if labels is not None and not isinstance(labels, dict):
        raise Invalid(f'{rtype.kind} "{name}" is invalid: metadata.labels: must be an object')
    annotations = meta.get("annotations")
    if annotations is not None and not isinstance(annotations, dict):
        raise Invalid(
            f'{rtype.kind} "{name}" is invalid: metadata.annotations: must be an object')
    finalizers = meta.get("finalizers")
    if finalizers is not None and (not isinstance(finalizers, list) or not all(
            isinstance(f, str) for f in finalizers)):
        raise Invalid(
            f'{rtype.kind} "{name}" is invalid: metadata.finalizers: must be a list of strings')
    if rtype is EVENT and obj is not None:
        # the Event's own checks first; its metadata only when they pass (rest.BeforeCreate)
        # on create the Event's own checks come first and its metadata is checked only
        # when they pass (rest.BeforeCreate); an update checks both (rest.BeforeUpdate)
        causes = builtins.event_causes(obj)
        if stored is not None or not causes:
            causes += builtins.metadata_causes(meta)
    elif labels or annotations or finalizers or obj is not None:
        core = rtype in BUILTIN_TYPES and not rtype.group
        causes = [] if _plain(meta, core) else builtins.metadata_causes(meta, core=core)
        if obj is not None:
            causes += builtins.content_causes(rtype, obj)
            if stored is not None:
                causes += builtins.update_causes(rtype, stored, obj)
    else:
        return
    if causes and obj is not None and rtype.schema is not None:
        # a custom resource's metadata and schema are validated together: one 422 for both
        from lifecycle.kube.objects import clone
        from lifecycle.sim.schema import admit

        blocked = any(c.get("reason") in _BLOCKING for c in causes)
        try:
            admit(rtype, clone(dict(obj)), old=None if stored is None else dict(stored),
                  blocked=blocked)
        except Invalid as exc:
            causes += exc.causes
    if causes:
        raise builtins.refuse(rtype, name, causes)
    if obj is not None and obj.__class__ is dict:
        builtins.typed(rtype, obj)


#: Errors after which a real server does not evaluate a custom resource's CEL rules.
_BLOCKING = frozenset(("FieldValueNotSupported", "FieldValueRequired", "FieldValueTooLong",
                       "FieldValueTooMany", "FieldValueTypeInvalid"))


def _plain(meta: Mapping[str, Any], core: bool) -> bool:
    """Whether labels, annotations and finalizers are certainly valid (the common case)."""
    for key, value in (meta.get("labels") or {}).items():
        if not (_good_key(key) and _good_value(value)):
            return False
    annotations = meta.get("annotations") or {}
    for key in annotations:
        if not _good_key(key.lower() if isinstance(key, str) else key):
            return False
    if sum(len(k) + len(v or "") for k, v in annotations.items()) * 4 > builtins.MAX_ANNOTATIONS:
        return False
    if meta.get("ownerReferences"):
        return False
    return all(_good_key(f) and (not core or "/" in f or f in builtins.STANDARD_FINALIZERS)
               for f in meta.get("finalizers") or ())


def prepare_secret(obj: dict[str, Any], name: str) -> None:
    """Fold ``stringData`` into ``data`` and check ``data`` is base64 (in place, owned obj)."""
    data = obj.get("data")
    if data is not None and not isinstance(data, dict):
        raise Invalid(f'Secret "{name}" is invalid: data: must be an object')
    data = dict(data or {})
    for key, value in data.items():
        try:
            if not isinstance(value, str):
                raise TypeError(value)
            base64.b64decode(value, validate=True)
        except (TypeError, binascii.Error):
            raise Invalid(
                f'Secret "{name}" is invalid: data[{key}]: must be a base64 encoded string'
            ) from None
    string_data = obj.pop("stringData", None)
    if string_data:
        if not isinstance(string_data, dict) or not all(
            isinstance(v, str) for v in string_data.values()
        ):
            raise Invalid(f'Secret "{name}" is invalid: stringData: must map to strings')
        for key, value in string_data.items():
            data[key] = base64.b64encode(value.encode()).decode("ascii")
    if data or "data" in obj:
        obj["data"] = data


def check_event_type(name: str, event: dict[str, Any]) -> None:
    """An Event's ``type`` must be ``Normal`` (the default) or ``Warning``."""
    if event.get("type", "Normal") not in ("Normal", "Warning"):
        raise Invalid(
            f'Event "{name}" is invalid: type: Unsupported value: '
            f'{event.get("type")!r}: supported values: "Normal", "Warning"'
        )


def admit_new(rtype: ResourceType, name: str, new: dict[str, Any]) -> None:
    """The per-type rules of a create, applied in place to an owned object.

    Types with a status subresource drop an incoming ``status``; a Namespace
    starts ``Active`` with the ``kubernetes`` finalizer in ``spec.finalizers``
    and the ``kubernetes.io/metadata.name`` label; a Secret gets base64
    ``data`` and type ``Opaque`` by default; an Event's type is checked.
    """
    if rtype.status_subresource:
        new.pop("status", None)
    if rtype is NAMESPACE:
        new["status"] = {"phase": "Active"}
        found = new.get("spec")
        spec: dict[str, Any] = found if isinstance(found, dict) else {}
        finalizers = [f for f in spec.get("finalizers") or [] if isinstance(f, str)]
        new["spec"] = dict(spec, finalizers=[*finalizers, "kubernetes"]
                           if "kubernetes" not in finalizers else finalizers)
        meta = new["metadata"]
        meta["labels"] = dict(meta.get("labels") or {}, **{"kubernetes.io/metadata.name": name})
    elif rtype is SECRET:
        prepare_secret(new, name)
        new.setdefault("type", "Opaque")


def check_immutable(
    rtype: ResourceType, name: str, stored: dict[str, Any], new: dict[str, Any]
) -> None:
    """A Secret keeps its type; an immutable Secret or ConfigMap keeps its data."""
    if rtype is SECRET and stored.get("type") != new.get("type"):
        raise Invalid(f'Secret "{name}" is invalid: type: field is immutable')
    if stored.get("immutable") is True and rtype in (SECRET, CONFIG_MAP):
        for field in ("data", "binaryData", "immutable"):
            if new.get(field) != stored.get(field):
                raise Invalid(
                    f'{rtype.kind} "{name}" is invalid: {field}: Forbidden: '
                    f"field is immutable when `immutable` is set"
                )



def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


#: The Go types of the ObjectMeta fields a client may send, as a decode error names them.
_META_TYPES: dict[str, tuple[type, str]] = {
    "name": (str, "string"),
    "generateName": (str, "string"),
    "namespace": (str, "string"),
    "uid": (str, "string"),
    "resourceVersion": (str, "string"),
    "generation": (int, "int64"),
    "deletionGracePeriodSeconds": (int, "int64"),
    "labels": (dict, "map[string]string"),
    "annotations": (dict, "map[string]string"),
    "ownerReferences": (list, "[]v1.OwnerReference"),
    "finalizers": (list, "[]string"),
    "managedFields": (list, "[]v1.ManagedFieldsEntry"),
}
_REF_TYPES: dict[str, tuple[type, str]] = {
    "apiVersion": (str, "string"),
    "kind": (str, "string"),
    "name": (str, "string"),
    "uid": (str, "string"),
    "controller": (bool, "bool"),
    "blockOwnerDeletion": (bool, "bool"),
}


def _fits(value: Any, expected: type) -> bool:
    if value is None:
        return True
    if expected is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, expected)


#: The exact classes of the ObjectMeta fields in the common, well-typed case.
_META_CLASSES: dict[str, type] = {field: expected for field, (expected, _) in _META_TYPES.items()}
_REF_CLASSES: tuple[tuple[str, type], ...] = tuple(
    (field, expected) for field, (expected, _) in _REF_TYPES.items())


def _decodes(meta: dict[str, Any]) -> bool:
    """Whether ``meta`` certainly decodes: every typed field of exactly its class.

    A quick sufficient test (no subclasses, no bools for integers): False
    only sends the metadata through the complete check, which decides.
    """
    for field, value in meta.items():
        expected = _META_CLASSES.get(field)
        if expected is None or value is None:
            continue
        if value.__class__ is not expected:
            return False
        value = cast(Any, value)  # of the expected class: a dict or a list
        if expected is dict:  # labels, annotations: strings (or null)
            for item in value.values():
                if item.__class__ is not str and item is not None:
                    return False
        elif field == "finalizers":
            for item in value:
                if item.__class__ is not str:
                    return False
        elif field == "ownerReferences":
            for ref in value:
                if ref.__class__ is not dict:
                    return False
                for name, cls in _REF_CLASSES:
                    item = ref.get(name)
                    if item is not None and item.__class__ is not cls:
                        return False
    return True


def check_meta_types(rtype: ResourceType, obj: Mapping[str, Any]) -> None:
    """Refuse an object whose metadata does not decode, with the server's 400 message.

    A real server decodes the body into typed metadata first; a field of the
    wrong JSON type (``ownerReferences: "x"``, a numeric finalizer, labels
    that are not strings) fails that decode with :class:`BadRequest`.
    """
    if rtype is SECRET:
        builtins.check_secret_data(obj)
    elif rtype is CONFIG_MAP:
        builtins.check_secret_data(obj, "ConfigMap", "binaryData")
    meta = obj.get("metadata")
    if meta is None or (meta.__class__ is dict and _decodes(meta)):
        return
    kind = rtype.kind

    def refuse(value: Any, struct: str, path: str, go_type: str) -> BadRequest:
        return BadRequest(
            f'{kind} in version "{rtype.version}" cannot be handled as a {kind}: json: '
            f"cannot unmarshal {_json_type(value)} into Go struct field {struct}.{path} "
            f"of type {go_type}"
        )

    if not isinstance(meta, dict):
        raise refuse(meta, kind, "metadata", "v1.ObjectMeta")
    for field, (expected, go_type) in _META_TYPES.items():
        value = meta.get(field)
        if not _fits(value, expected):
            raise refuse(value, "ObjectMeta", f"metadata.{field}", go_type)
    for field in ("labels", "annotations"):
        for value in (meta.get(field) or {}).values():
            if not _fits(value, str):
                raise refuse(value, "ObjectMeta", f"metadata.{field}", "string")
    for value in meta.get("finalizers") or ():
        if not isinstance(value, str):
            raise refuse(value, "ObjectMeta", "metadata.finalizers", "string")
    for ref in meta.get("ownerReferences") or ():
        if not isinstance(ref, dict):
            raise refuse(ref, "ObjectMeta", "metadata.ownerReferences", "v1.OwnerReference")
        for field, (expected, go_type) in _REF_TYPES.items():
            if not _fits(ref.get(field), expected):
                raise refuse(
                    ref.get(field), "OwnerReference", f"metadata.ownerReferences.{field}", go_type
                )


def validate_owner_references(rtype: ResourceType, name: str, meta: Mapping[str, Any]) -> None:
    """Owner references need apiVersion (with a version), kind, name and uid; no Event
    owners; one controller at most. Raises :class:`Invalid` with the real server's causes."""
    if meta.get("ownerReferences"):
        causes = builtins.owner_causes(meta)
        if causes:
            raise builtins.refuse(rtype, name, causes)


def _invalid(field: str, value: str, why: str) -> dict[str, str]:
    return {"reason": "FieldValueInvalid", "field": field,
            "message": f'Invalid value: "{value}": {why}'}


def check_list_options(
    resource_version: Any, resource_version_match: Any, continue_token: Any
) -> None:
    """The list options must fit together as a real server requires.

    ``resourceVersionMatch`` needs a ``resourceVersion``, no continue token,
    one of ``Exact`` and ``NotOlderThan``, and not ``Exact`` with ``"0"``
    (:class:`Invalid` of ``ListOptions``); a continue token cannot come with a
    ``resourceVersion`` other than ``"0"`` (:class:`BadRequest`).
    """
    causes: list[dict[str, str]] = []
    field = "resourceVersionMatch"
    if resource_version_match:
        if not resource_version:
            causes.append({"reason": "FieldValueForbidden", "field": field,
                           "message": "Forbidden: resourceVersionMatch is forbidden unless "
                                      "resourceVersion is provided"})
        if continue_token:
            causes.append({"reason": "FieldValueForbidden", "field": field,
                           "message": "Forbidden: resourceVersionMatch is forbidden when "
                                      "continue is provided"})
        if resource_version_match not in ("Exact", "NotOlderThan"):
            causes.append({"reason": "FieldValueNotSupported", "field": field,
                           "message": f'Unsupported value: "{resource_version_match}": '
                                      f'supported values: "Exact", "NotOlderThan", ""'})
        if resource_version_match == "Exact" and resource_version == "0":
            causes.append({"reason": "FieldValueForbidden", "field": field,
                           "message": 'Forbidden: resourceVersionMatch "exact" is forbidden '
                                      'for resourceVersion "0"'})
    if causes:
        detail = ", ".join(f"{c['field']}: {c['message']}" for c in causes)
        raise Invalid(
            'ListOptions.meta.k8s.io "" is invalid: '
            + (f"[{detail}]" if len(causes) > 1 else detail),
            causes=causes, group="meta.k8s.io", kind="ListOptions",
        )
    if continue_token and resource_version not in (None, "", "0"):
        raise BadRequest("specifying resource version is not allowed when using continue")


def keep_namespace_spec(new: dict[str, Any], stored: Mapping[str, Any], name: str) -> None:
    """An update of a Namespace keeps its ``spec`` (finalizers) and its name label, in place."""
    if "spec" in stored:
        new["spec"] = stored["spec"]
    else:
        new.pop("spec", None)
    meta = new["metadata"]
    meta["labels"] = dict(meta.get("labels") or {}, **{"kubernetes.io/metadata.name": name})
