"""The field checks a real API server makes on metadata and on the built-in kinds.

Every check returns ``details.causes`` entries in the server's words (ported
from ``k8s.io/apimachinery``'s ``validation/field`` errors, its
``api/validate/content`` formats and ``k8s.io/kubernetes``'s
``pkg/apis/core/validation`` and ``pkg/apis/coordination/validation``), so a
422 carries the same causes and message a real server sends:

* metadata: label keys and values, annotation keys and their total size
  (256 KiB), finalizer names (qualified names);
* ConfigMap: data and binaryData keys, a key in both, 1 MiB in total;
* Secret: data keys, 1 MiB in total, the keys a type requires
  (``kubernetes.io/tls``, ``kubernetes.io/dockerconfigjson``,
  ``kubernetes.io/dockercfg``, ``kubernetes.io/basic-auth``,
  ``kubernetes.io/ssh-auth``), the ServiceAccount annotation of a
  ``kubernetes.io/service-account-token`` Secret, and the type and data an
  update may not change;
* Lease: a positive duration and non-negative transitions.

:func:`refuse` turns causes into the :class:`~lifecycle.kube.errors.Invalid`
the server answers.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping
from typing import Any

from lifecycle.kube.errors import BadRequest, Invalid
from lifecycle.kube.resources import (
    BUILTIN_TYPES,
    CONFIG_MAP,
    EVENT,
    LEASE,
    NAMESPACE,
    SECRET,
    ResourceType,
)

__all__ = [
    "MAX_ANNOTATIONS",
    "MAX_DATA",
    "check_secret_data",
    "content_causes",
    "event_causes",
    "label_key_errors",
    "label_value_errors",
    "list_items",
    "metadata_causes",
    "owner_causes",
    "refuse",
    "typed",
    "update_causes",
]

Cause = dict[str, str]

#: The total size of a object's annotations (keys and values), in bytes.
MAX_ANNOTATIONS = 256 * 1024
#: The total size of a Secret's or ConfigMap's data, in bytes.
MAX_DATA = 1024 * 1024

_KEY_CHAR = "[A-Za-z0-9]"
_KEY_FMT = f"({_KEY_CHAR}[-A-Za-z0-9_.]*)?{_KEY_CHAR}"
_KEY_MSG = ("must consist of alphanumeric characters, '-', '_' or '.', and must start and "
            "end with an alphanumeric character")
_KEY_RE = re.compile(f"^{_KEY_FMT}$")
_VALUE_FMT = f"({_KEY_FMT})?"
_VALUE_MSG = ("a valid label must be an empty string or consist of alphanumeric characters, "
              "'-', '_' or '.', and must start and end with an alphanumeric character")
_VALUE_RE = re.compile(f"^{_VALUE_FMT}$")
_DNS_LABEL = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS_SUBDOMAIN_FMT = f"{_DNS_LABEL}(\\.{_DNS_LABEL})*"
_DNS_SUBDOMAIN_RE = re.compile(f"^{_DNS_SUBDOMAIN_FMT}$")
_DNS_SUBDOMAIN_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                      "characters, '-' or '.', and must start and end with an alphanumeric "
                      "character")
_CONFIG_KEY_FMT = "[-._a-zA-Z0-9]+"
_CONFIG_KEY_RE = re.compile(f"^{_CONFIG_KEY_FMT}$")
_CONFIG_KEY_MSG = "a valid config key must consist of alphanumeric characters, '-', '_' or '.'"
_IMMUTABLE_SET = "field is immutable when `immutable` is set"


def _regex_error(msg: str, fmt: str, *examples: str) -> str:
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    listed = " or ".join(f"'{e}', " for e in examples)
    return f"{msg} (e.g. {listed}regex used for validation is '{fmt}')"


def _max_len(length: int) -> str:
    return f"must be no more than {length} bytes"


# ------------------------------------------------------------------ formats
def dns_subdomain_errors(value: str) -> list[str]:
    errors = []
    if len(value.encode()) > 253:
        errors.append(_max_len(253))
    if not _DNS_SUBDOMAIN_RE.match(value):
        errors.append(_regex_error(_DNS_SUBDOMAIN_MSG, _DNS_SUBDOMAIN_FMT, "example.com"))
    return errors


_DNS_LABEL_RE = re.compile(f"^{_DNS_LABEL}$")
_DNS_LABEL_MSG = ("a lowercase RFC 1123 label must consist of lower case alphanumeric "
                  "characters or '-', and must start and end with an alphanumeric character")


def dns_label_errors(value: str) -> list[str]:
    errors = []
    if len(value.encode()) > 63:
        errors.append(_max_len(63))
    if not _DNS_LABEL_RE.match(value):
        errors.append("must not contain dots" if "." in value else
                      _regex_error(_DNS_LABEL_MSG, _DNS_LABEL, "my-name", "123-abc"))
    return errors


def name_causes(value: str, *, label: bool) -> list[Cause]:
    """``metadata.name``: a DNS-1123 label (Namespaces) or subdomain (everything else)."""
    found = dns_label_errors(value) if label else dns_subdomain_errors(value)
    return [invalid("metadata.name", value, m) for m in found]


def label_key_errors(value: str) -> list[str]:
    """``IsQualifiedName``: an optional DNS subdomain prefix and ``/``, then a name part."""
    errors: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errors.append("prefix part must be non-empty")
        else:
            errors += [f"prefix part {m}" for m in dns_subdomain_errors(prefix)]
    else:
        key = _regex_error(_KEY_MSG, _KEY_FMT, "MyName", "my.name", "123-abc")
        return [f"a valid label key {key} with an optional DNS subdomain prefix and '/' "
                "(e.g. 'example.com/MyName')"]
    if not name:
        errors.append("name part must be non-empty")
    elif len(name.encode()) > 63:
        errors.append(f"name part {_max_len(63)}")
    if not _KEY_RE.match(name):
        errors.append("name part " + _regex_error(_KEY_MSG, _KEY_FMT, "MyName", "my.name",
                                                  "123-abc"))
    return errors


def label_value_errors(value: str) -> list[str]:
    errors = []
    if len(value.encode()) > 63:
        errors.append(_max_len(63))
    if not _VALUE_RE.match(value):
        errors.append(_regex_error(_VALUE_MSG, _VALUE_FMT, "MyValue", "my_value", "12345"))
    return errors


def config_key_errors(value: str) -> list[str]:
    errors = []
    if len(value.encode()) > 253:
        errors.append(_max_len(253))
    if not _CONFIG_KEY_RE.match(value):
        errors.append(_regex_error(_CONFIG_KEY_MSG, _CONFIG_KEY_FMT, "key.name", "KEY_NAME",
                                   "key-name"))
    if value == ".":
        errors.append("must not be '.'")
    elif value == "..":
        errors.append("must not be '..'")
    elif value.startswith(".."):
        errors.append("must not start with '..'")
    return errors


# ------------------------------------------------------------------- causes
def _go(value: Any) -> str:
    """A bad value as ``field.Error`` prints it (``%q`` for strings, JSON otherwise)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def invalid(field: str, value: Any, detail: str) -> Cause:
    return {"reason": "FieldValueInvalid", "message": f"Invalid value: {_go(value)}: {detail}",
            "field": field}


def required(field: str, detail: str = "") -> Cause:
    return {"reason": "FieldValueRequired",
            "message": "Required value" + (f": {detail}" if detail else ""), "field": field}


def forbidden(field: str, detail: str) -> Cause:
    return {"reason": "FieldValueForbidden", "message": f"Forbidden: {detail}", "field": field}


def too_long(field: str, limit: int) -> Cause:
    return {"reason": "FieldValueTooLong",
            "message": f"Too long: may not be more than {limit} bytes", "field": field}


def refuse(rtype: ResourceType, name: str, causes: list[Cause]) -> Invalid:
    """The 422 of a real server: ``Kind[.group] "name" is invalid: <field: message, ...>``."""
    unique: list[Cause] = []
    for cause in causes:  # a real server reports the same error once
        if cause not in unique:
            unique.append(cause)
    causes = unique
    if rtype not in BUILTIN_TYPES:  # a custom resource's, ordered by field as the server does
        causes = sorted(causes, key=lambda c: c.get("field") or "")
    texts = [f"{c['field']}: {c['message']}" if c.get("field") else c["message"]
             for c in causes]
    summary = texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"
    qualified = f"{rtype.kind}.{rtype.group}" if rtype.group else rtype.kind
    return Invalid(f'{qualified} "{name}" is invalid: {summary}', causes=causes, name=name,
                   group=rtype.group, kind=rtype.kind)


#: Finalizer names a core kind may carry without a ``/``.
STANDARD_FINALIZERS = frozenset(("kubernetes", "orphan", "foregroundDeletion"))


def _ref_json(ref: Mapping[str, Any]) -> dict[str, Any]:
    """An owner reference as Go marshals its struct (field order, empty flags omitted)."""
    out = {k: ref.get(k) or "" for k in ("apiVersion", "kind", "name", "uid")}
    out.update({k: ref[k] for k in ("controller", "blockOwnerDeletion") if ref.get(k)
                is not None})
    return out


def owner_causes(meta: Mapping[str, Any]) -> list[Cause]:
    """``metadata.ownerReferences``: apiVersion, kind, name and uid; no Event owners; one
    controller at most."""
    refs = meta.get("ownerReferences") or []
    causes: list[Cause] = []
    path = "metadata.ownerReferences"
    first = ""
    for index, ref in enumerate(refs):
        if not isinstance(ref, Mapping):
            continue
        at = f"{path}[{index}]"
        api_version = ref.get("apiVersion") or ""
        group, _, version = api_version.rpartition("/")
        if not api_version:
            causes.append(required(f"{at}.apiVersion", "must not be empty"))
        elif not version or api_version.count("/") > 1:
            causes.append(invalid(f"{at}.apiVersion", api_version,
                                  "must be <group>/<version> or <version>"))
        for field in ("kind", "name", "uid"):
            if not ref.get(field):
                causes.append(required(f"{at}.{field}", "must not be empty"))
        if group == "" and version == "v1" and ref.get("kind") == "Event":
            causes.append(invalid(at, _ref_json(ref),
                                  "/v1, Kind=Event is disallowed from being an owner"))
        if ref.get("controller") is True:
            current = f"{ref.get('kind') or ''}/{ref.get('name') or ''}"
            if first:
                causes.append(invalid(path, [_ref_json(r) for r in refs],
                                      'Only one reference can have Controller set to true. '
                                      f'Found "true" in references for {first} and {current}'))
            else:
                first = current
    return causes


def metadata_causes(meta: Mapping[str, Any], *, core: bool = False) -> list[Cause]:
    """Labels, annotations and finalizers (their types are checked before, on decoding).

    ``core``: a kind of the core group, whose finalizers must also be standard or
    fully qualified (contain a ``/``).
    """
    causes: list[Cause] = []
    for key, value in (meta.get("labels") or {}).items():
        causes += [invalid("metadata.labels", key, m) for m in label_key_errors(str(key))]
        causes += [invalid("metadata.labels", value, m)
                   for m in label_value_errors(value if isinstance(value, str) else "")]
    annotations = meta.get("annotations") or {}
    for key in annotations:
        causes += [invalid("metadata.annotations", key, m)
                   for m in label_key_errors(str(key).lower())]
    size = sum(len(str(k).encode()) + len(str(v or "").encode())
               for k, v in annotations.items())
    if size > MAX_ANNOTATIONS:
        causes.append(too_long("metadata.annotations", MAX_ANNOTATIONS))
    causes += owner_causes(meta)
    finalizers = meta.get("finalizers") or []
    for finalizer in finalizers:
        if isinstance(finalizer, str):
            causes += [invalid("metadata.finalizers", finalizer, m)
                       for m in label_key_errors(finalizer)]
    if core:
        causes += [invalid(f"metadata.finalizers[{index}]", finalizer,
                           "name is neither a standard finalizer name nor is it fully qualified")
                   for index, finalizer in enumerate(finalizers)
                   if isinstance(finalizer, str) and "/" not in finalizer
                   and finalizer not in STANDARD_FINALIZERS]
    if "orphan" in finalizers and "foregroundDeletion" in finalizers:
        causes.append(invalid("metadata.finalizers", finalizers,
                              "finalizer orphan and foregroundDeletion cannot be both set"))
    return causes


_BASE64 = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")


def check_secret_data(obj: Mapping[str, Any], kind: str = "Secret",
                      field: str = "data") -> None:
    """A Secret's ``data`` (a ConfigMap's ``binaryData``) must decode as base64, or the body
    does not decode (400)."""
    data = obj.get(field)
    if not isinstance(data, dict):
        return
    for value in data.values():
        if not isinstance(value, str):
            continue
        try:
            base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            bad = next((i for i, c in enumerate(value.rstrip("=")) if c not in _BASE64),
                       len(value) - len(value) % 4)
            raise BadRequest(f'{kind} in version "v1" cannot be handled as a {kind}: illegal '
                             f"base64 data at input byte {bad}") from None


def list_items(rtype: ResourceType, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A list's items as a real server sends them: a built-in kind's without apiVersion and
    kind (its list is typed), a custom resource's as stored."""
    if rtype not in BUILTIN_TYPES:
        return items
    return [{k: v for k, v in item.items() if k != "apiVersion" and k != "kind"}
            for item in items]


#: Built-in kinds a PUT may create (``AllowCreateOnUpdate``).
CREATED_BY_PUT = (EVENT, LEASE)
#: Built-in kinds a PUT may update without a resourceVersion (``AllowUnconditionalUpdate``);
#: custom resources may not either.
UNCONDITIONAL = (SECRET, CONFIG_MAP, EVENT, NAMESPACE)


def require_version(rtype: ResourceType, name: str, given: Any) -> None:
    """A PUT of a kind that refuses unconditional updates must carry a resourceVersion."""
    if given or rtype in UNCONDITIONAL:
        return
    cause = invalid("metadata.resourceVersion", 0, "must be specified for an update")
    qualified = f"{rtype.plural}.{rtype.group}" if rtype.group else rtype.plural
    raise Invalid(f'{qualified} "{name}" is invalid: metadata.resourceVersion: '
                  f"{cause['message']}", causes=[cause], name=name, group=rtype.group,
                  kind=rtype.plural)


def list_meta(rtype: ResourceType, meta: dict[str, Any]) -> dict[str, Any]:
    """A list's metadata: a custom resource's list always has ``continue`` (empty at the end)."""
    if rtype not in BUILTIN_TYPES and "continue" not in meta:
        meta["continue"] = ""
    return meta


def _decoded(value: Any) -> bytes:
    try:
        return base64.b64decode(value, validate=True) if isinstance(value, str) else b""
    except (binascii.Error, ValueError):
        return b""


def _secret_data(obj: Mapping[str, Any]) -> dict[str, bytes]:
    data = {k: _decoded(v) for k, v in (obj.get("data") or {}).items()}
    string_data = obj.get("stringData")
    if isinstance(string_data, dict):
        data.update({k: str(v).encode() for k, v in string_data.items()})
    return data


def _json_object(raw: bytes) -> str | None:
    """Why ``raw`` is not a JSON object (Go's ``json.Unmarshal`` into a map), or None."""
    try:
        doc = json.loads(raw)
    except json.JSONDecodeError as exc:  # in the words of Go's encoding/json
        if exc.pos >= len(raw.rstrip()):
            return "unexpected end of JSON input"
        text = raw.decode(errors="replace")
        return f"invalid character {text[exc.pos]!r} looking for beginning of value"
    except ValueError as exc:
        return str(exc)
    if doc is not None and not isinstance(doc, dict):
        return f"json: cannot unmarshal {type(doc).__name__} into Go value of type " \
               "map[string]interface {}"
    return None


def _secret_causes(obj: Mapping[str, Any], meta: Mapping[str, Any]) -> list[Cause]:
    data = _secret_data(obj)
    causes: list[Cause] = []
    for key in data:
        causes += [invalid(f"data[{key}]", key, m) for m in config_key_errors(key)]
    if sum(len(v) for v in data.values()) > MAX_DATA:
        causes.append(too_long("data", MAX_DATA))
    kind = obj.get("type") or "Opaque"
    if kind == "kubernetes.io/service-account-token":
        name = "kubernetes.io/service-account.name"
        if not (meta.get("annotations") or {}).get(name):
            causes.append(required(f"metadata.annotations[{name}]"))
    elif kind in ("kubernetes.io/dockercfg", "kubernetes.io/dockerconfigjson"):
        key = ".dockercfg" if kind == "kubernetes.io/dockercfg" else ".dockerconfigjson"
        if key not in data:
            causes.append(required(f"data[{key}]"))
        else:
            why = _json_object(data[key])
            if why is not None:
                causes.append(invalid(f"data[{key}]", "<secret contents redacted>", why))
    elif kind == "kubernetes.io/basic-auth":
        if "username" not in data and "password" not in data:
            causes += [required("data[username]"), required("data[password]")]
    elif kind == "kubernetes.io/ssh-auth":
        if not data.get("ssh-privatekey"):
            causes.append(required("data[ssh-privatekey]"))
    elif kind == "kubernetes.io/tls":
        causes += [required(f"data[{key}]") for key in ("tls.crt", "tls.key") if key not in data]
    return causes


def _config_map_causes(obj: Mapping[str, Any]) -> list[Cause]:
    data = obj.get("data") or {}
    binary = obj.get("binaryData") or {}
    causes: list[Cause] = []
    size = 0
    for key, value in data.items():
        causes += [invalid(f"data[{key}]", key, m) for m in config_key_errors(key)]
        if key in binary:
            causes.append(invalid(f"data[{key}]", key, "duplicate of key present in binaryData"))
        size += len(str(value).encode())
    for key, value in binary.items():
        causes += [invalid(f"binaryData[{key}]", key, m) for m in config_key_errors(key)]
        size += len(_decoded(value))
    if size > MAX_DATA:
        causes.append(too_long("[]", MAX_DATA))  # field.NewPath("") prints so
    return causes


def _lease_causes(obj: Mapping[str, Any]) -> list[Cause]:
    spec = obj.get("spec") or {}
    causes: list[Cause] = []
    duration = spec.get("leaseDurationSeconds")
    if isinstance(duration, int) and duration <= 0:
        causes.append(invalid("spec.leaseDurationSeconds", duration, "must be greater than 0"))
    transitions = spec.get("leaseTransitions")
    if isinstance(transitions, int) and transitions < 0:
        causes.append(invalid("spec.leaseTransitions", transitions,
                              "must be greater than or equal to 0"))
    return causes


def event_causes(obj: Mapping[str, Any]) -> list[Cause]:
    """A ``v1`` Event's checks (the legacy ones: its metadata is not validated)."""
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace") or ""
    involved = obj.get("involvedObject") or {}
    involved_ns = involved.get("namespace") or "" if isinstance(involved, dict) else ""
    mismatch = invalid("involvedObject.namespace", involved_ns, "does not match event.namespace")
    if not obj.get("eventTime"):
        if (not involved_ns and namespace not in ("", "default")) or (
                involved_ns and involved_ns != namespace):
            return [mismatch]
        return []
    causes: list[Cause] = []
    if not involved_ns and namespace not in ("default", "kube-system"):
        causes.append(mismatch)
    controller = obj.get("reportingComponent") or ""
    if not controller:
        causes.append(required("reportingComponent"))
    causes += [invalid("reportingComponent", controller, m)
               for m in label_key_errors(controller)]
    if not obj.get("reportingInstance"):
        causes.append(required("reportingInstance"))
    if not obj.get("action"):
        causes.append(required("action"))
    if not obj.get("reason"):
        causes.append(required("reason"))
    return causes


def content_causes(rtype: ResourceType, obj: Mapping[str, Any]) -> list[Cause]:
    """The checks of a built-in kind's own fields (none for other kinds)."""
    if rtype is SECRET:
        return _secret_causes(obj, obj.get("metadata") or {})
    if rtype is CONFIG_MAP:
        return _config_map_causes(obj)
    if rtype is LEASE:
        return _lease_causes(obj)
    return []


_EMPTY_OMITTED = ("labels", "annotations", "finalizers", "ownerReferences")
_EVENT_FIELDS = (("involvedObject", dict), ("source", dict), ("firstTimestamp", None),
                 ("lastTimestamp", None), ("eventTime", None), ("reportingComponent", str),
                 ("reportingInstance", str))


def typed(rtype: ResourceType, obj: dict[str, Any]) -> None:
    """Shape an owned object as a real server's typed decoding leaves it, in place.

    Empty metadata maps and lists are omitted (``omitempty``), as are a
    Secret's or ConfigMap's empty data; the fields of a built-in type that
    are always serialised get their zero value (a Lease's ``spec``, an
    Event's timestamps, source and reporting fields).
    """
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        for field in _EMPTY_OMITTED:
            if field in meta and not meta[field]:
                del meta[field]
    if rtype is SECRET or rtype is CONFIG_MAP:
        for field in ("data", "binaryData", "stringData"):
            if field in obj and not obj[field]:
                del obj[field]
    elif rtype is LEASE:
        if obj.get("spec") is None:
            obj["spec"] = {}
    elif rtype is EVENT:
        for field, zero in _EVENT_FIELDS:
            if obj.get(field) is None:
                obj[field] = zero() if zero is not None else None
        for field in ("reason", "message", "type", "action", "count"):
            if field in obj and obj[field] in ("", 0):
                del obj[field]
        for field in ("involvedObject", "source"):
            if isinstance(obj[field], dict) and "" in obj[field].values():
                obj[field] = {k: v for k, v in obj[field].items() if v != ""}


def update_causes(rtype: ResourceType, stored: Mapping[str, Any],
                  new: Mapping[str, Any]) -> list[Cause]:
    """What an update of a Secret or ConfigMap may not change."""
    causes: list[Cause] = []
    if rtype is SECRET and (new.get("type") or "Opaque") != (stored.get("type") or "Opaque"):
        causes.append(invalid("type", new.get("type") or "Opaque", "field is immutable"))
    if rtype in (SECRET, CONFIG_MAP) and stored.get("immutable") is True:
        if new.get("immutable") is not True:
            causes.append(forbidden("immutable", _IMMUTABLE_SET))
        fields = ("data",) if rtype is SECRET else ("data", "binaryData")
        causes += [forbidden(field, _IMMUTABLE_SET) for field in fields
                   if (new.get(field) or {}) != (stored.get(field) or {})]
    return causes
