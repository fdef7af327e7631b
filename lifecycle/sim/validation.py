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
import re
from collections.abc import Mapping
from typing import Any

from lifecycle.kube.errors import Conflict, Invalid
from lifecycle.kube.resources import CONFIG_MAP, EVENT, NAMESPACE, SECRET, ResourceType
from lifecycle.kube.selectors import valid_label_key, valid_label_value

__all__ = [
    "admit_new",
    "check_event_type",
    "check_immutable",
    "check_name",
    "check_resource_version",
    "check_uid",
    "object_key",
    "prepare_secret",
    "type_key",
    "validate_metadata",
]

_DNS_LABEL_PART = r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?"
_DNS_SUBDOMAIN = re.compile(rf"^{_DNS_LABEL_PART}(?:\.{_DNS_LABEL_PART})*$")
_DNS_LABEL = re.compile(rf"^{_DNS_LABEL_PART}$")


def type_key(obj: Any) -> tuple[str, str]:
    """The ``(apiVersion, kind)`` an incoming object names; both are required."""
    if not isinstance(obj, Mapping):
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
    """A name must be a lowercase RFC 1123 subdomain (a label for Namespaces)."""
    pattern = _DNS_LABEL if rtype is NAMESPACE else _DNS_SUBDOMAIN
    if not isinstance(name, str) or len(name) > 253 or not pattern.match(name):
        raise Invalid(
            f'{rtype.kind} "{name}" is invalid: metadata.name: Invalid value: '
            f"{name!r}: must be a lowercase RFC 1123 name"
        )


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


def validate_metadata(rtype: ResourceType, name: str, meta: dict[str, Any]) -> None:
    """Labels and annotations must be well-formed maps; finalizers a list of strings."""
    where = f'{rtype.kind} "{name}" is invalid'
    labels = meta.get("labels")
    if labels is not None:
        if not isinstance(labels, dict):
            raise Invalid(f"{where}: metadata.labels: must be an object")
        for key, value in labels.items():
            if not valid_label_key(key):
                raise Invalid(f"{where}: metadata.labels: Invalid value: {key!r}")
            if not valid_label_value(value):
                raise Invalid(f"{where}: metadata.labels: Invalid value: {value!r}")
    annotations = meta.get("annotations")
    if annotations is not None:
        if not isinstance(annotations, dict):
            raise Invalid(f"{where}: metadata.annotations: must be an object")
        for key, value in annotations.items():
            if not valid_label_key(key) or not isinstance(value, str):
                raise Invalid(f"{where}: metadata.annotations: Invalid value: {key!r}")
    finalizers = meta.get("finalizers")
    if finalizers is not None and (
        not isinstance(finalizers, list) or not all(isinstance(f, str) for f in finalizers)
    ):
        raise Invalid(f"{where}: metadata.finalizers: must be a list of strings")


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
    starts ``Active``; a Secret gets base64 ``data`` and type ``Opaque`` by
    default; an Event's type is checked.
    """
    if rtype.status_subresource:
        new.pop("status", None)
    if rtype is NAMESPACE:
        new["status"] = {"phase": "Active"}
    elif rtype is SECRET:
        prepare_secret(new, name)
        new.setdefault("type", "Opaque")
    elif rtype is EVENT:
        check_event_type(name, new)


def check_immutable(
    rtype: ResourceType, name: str, stored: dict[str, Any], new: dict[str, Any]
) -> None:
    """A Secret keeps its type; an immutable Secret or ConfigMap keeps its data."""
    if rtype is SECRET and stored.get("type") != new.get("type"):
        raise Invalid(f'Secret "{name}" is invalid: type: field is immutable')
    if rtype in (SECRET, CONFIG_MAP) and stored.get("immutable") is True:
        for field in ("data", "binaryData", "immutable"):
            if new.get(field) != stored.get(field):
                raise Invalid(
                    f'{rtype.kind} "{name}" is invalid: {field}: Forbidden: '
                    f"field is immutable when `immutable` is set"
                )

