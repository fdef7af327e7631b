"""List and watch parameters of the embedded API: field selectors and continue tokens.

A field selector is a comma-joined list of ``field=value``, ``field==value``
or ``field!=value`` terms; every term must hold. Values may escape ``\\``,
``,`` and ``=`` with a backslash. Every kind supports ``metadata.name`` and
``metadata.namespace``; a few built-in kinds add their own fields (Events
their ``involvedObject``, ``reason``, ``type`` ...; Secrets ``type``;
Namespaces ``status.phase``). Any other field, and any malformed selector, is
refused with :class:`~lifecycle.kube.errors.BadRequest` as a real API server
refuses it.

A continue token carries the resourceVersion of a paginated list's first
page and the key of the last object served, in the server's encoding
(unpadded URL-safe base64 of ``{"v": "meta.k8s.io/v1", "rv": ..., "start":
...}``).
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
import posixpath
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from lifecycle.kube.errors import BadRequest

__all__ = [
    "FieldSelector",
    "FieldTerm",
    "decode_continue",
    "encode_continue",
    "field_set",
    "parse_field_selector",
    "supported_fields",
]

_OPERATORS = ("!=", "==", "=")


@attrs.frozen
class FieldTerm:
    """One term of a field selector: ``field`` compared with ``value`` by ``=`` or ``!=``."""

    field: str
    operator: str
    value: str

    def matches(self, fields: Mapping[str, str]) -> bool:
        """Whether the object's ``fields`` satisfy the term (a missing field reads as ``""``)."""
        actual = fields.get(self.field, "")
        return actual == self.value if self.operator == "=" else actual != self.value


@attrs.frozen
class FieldSelector:
    """A parsed field selector: every term must hold (an empty one matches everything)."""

    terms: tuple[FieldTerm, ...] = ()

    @property
    def empty(self) -> bool:
        """Whether the selector selects everything."""
        return not self.terms

    def matches(self, fields: Mapping[str, str]) -> bool:
        """Whether an object with these ``fields`` (from :func:`field_set`) is selected."""
        return all(term.matches(fields) for term in self.terms)


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _path(*keys: str) -> Callable[[Mapping[str, Any]], str]:
    def read(obj: Mapping[str, Any]) -> str:
        value: Any = obj
        for key in keys:
            if not isinstance(value, Mapping):
                return ""
            value = value.get(key)
        return _text(value)

    return read


_COMMON: dict[str, Callable[[Mapping[str, Any]], str]] = {
    "metadata.name": _path("metadata", "name"),
    "metadata.namespace": _path("metadata", "namespace"),
}
_EVENT: dict[str, Callable[[Mapping[str, Any]], str]] = {
    **{
        f"involvedObject.{key}": _path("involvedObject", key)
        for key in ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion",
                    "fieldPath")
    },
    "reason": _path("reason"),
    "reportingComponent": _path("reportingComponent"),
    "source": _path("source", "component"),
    "type": _path("type"),
}
#: Extra selectable fields of built-in kinds, by ``(apiVersion, kind)``.
_EXTRA: dict[tuple[str, str], dict[str, Callable[[Mapping[str, Any]], str]]] = {
    ("v1", "Event"): _EVENT,
    ("v1", "Secret"): {"type": _path("type")},
    ("v1", "Namespace"): {"status.phase": _path("status", "phase")},
}


def supported_fields(api_version: str, kind: str) -> tuple[str, ...]:
    """The fields a selector may name for this kind, in a stable order."""
    return (*_COMMON, *_EXTRA.get((api_version, kind), {}))


def field_set(api_version: str, kind: str, obj: Mapping[str, Any]) -> dict[str, str]:
    """The selectable fields of a stored object, as strings (absent ones as ``""``)."""
    readers = {**_COMMON, **_EXTRA.get((api_version, kind), {})}
    return {name: read(obj) for name, read in readers.items()}


def _split_terms(text: str) -> list[str]:
    """Split on commas that are not escaped with a backslash."""
    terms: list[str] = []
    start = 0
    escaped = False
    for index, char in enumerate(text):
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == ",":
            terms.append(text[start:index])
            start = index + 1
    terms.append(text[start:])
    return terms


def _split_term(term: str) -> tuple[str, str, str] | None:
    """``(field, operator, value)`` at the first operator, or ``None``."""
    for index in range(len(term)):
        for operator in _OPERATORS:
            if term.startswith(operator, index):
                return term[:index], operator, term[index + len(operator):]
    return None


def _unescape(value: str) -> str:
    out: list[str] = []
    escaped = False
    for char in value:
        if escaped:
            if char not in "\\,=":
                raise BadRequest(f"invalid field selector: invalid escape sequence: \\{char}")
            out.append(char)
            escaped = False
        elif char == "\\":
            escaped = True
        elif char in ",=":
            raise BadRequest(f"invalid field selector: unescaped character in value: {char}")
        else:
            out.append(char)
    if escaped:
        raise BadRequest("invalid field selector: invalid escape sequence: \\")
    return "".join(out)


@functools.lru_cache(maxsize=256)
def _parse(text: str) -> FieldSelector:
    terms: list[FieldTerm] = []
    for part in sorted(_split_terms(text)):
        if part == "":
            continue
        split = _split_term(part)
        if split is None:
            raise BadRequest(f"invalid selector: '{text}'; can't understand '{part}'")
        field, operator, value = split
        terms.append(FieldTerm(field, "!=" if operator == "!=" else "=", _unescape(value)))
    return FieldSelector(tuple(terms))


#: Kinds a real server selects by name and namespace only, with the default conversion's
#: message for anything else.
_DEFAULT_ONLY = frozenset((("v1", "ConfigMap"), ("coordination.k8s.io/v1", "Lease")))


def parse_field_selector(
    text: str | None, api_version: str | None = None, kind: str | None = None
) -> FieldSelector:
    """Parse a field selector as the API server does, for ``kind`` if given.

    ``None`` or ``""`` selects everything. With ``api_version`` and ``kind``,
    every field must be one the kind supports (``field label not supported:
    <field>`` otherwise). Raises :class:`BadRequest`.
    """
    if text is None or text == "":
        return FieldSelector()
    if not isinstance(text, str):
        raise BadRequest(f"invalid field selector: {text!r} is not a string")
    selector = _parse(text)
    if kind is not None:
        allowed = supported_fields(api_version or "", kind)
        for term in selector.terms:
            if term.field not in allowed:
                if (api_version, kind) in _DEFAULT_ONLY:
                    raise BadRequest(f'"{term.field}" is not a known field selector: only '
                                     f'"metadata.name", "metadata.namespace"')
                raise BadRequest(f"field label not supported: {term.field}")
    return selector


_CONTINUE_VERSION = "meta.k8s.io/v1"


def encode_continue(resource_version: int, namespace: str | None, name: str) -> str:
    """The continue token of a page served at ``resource_version`` ending at this object."""
    start = f"{namespace}/{name}" if namespace is not None else name
    raw = json.dumps({"v": _CONTINUE_VERSION, "rv": resource_version, "start": start + "\x00"},
                     separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode("ascii").rstrip("=")


def _invalid_token(why: str) -> BadRequest:
    return BadRequest(f"invalid continue token: continue key is not valid: {why}")


def decode_continue(token: str) -> tuple[int, tuple[str | None, str]]:
    """``(resourceVersion, (namespace, name))`` of a continue token; :class:`BadRequest` if bad.

    The namespace is ``None`` for a cluster-scoped kind's token.
    """
    if not isinstance(token, str):
        raise _invalid_token("not a string")
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        data = json.loads(raw.decode())
    except (binascii.Error, ValueError) as error:
        raise _invalid_token(str(error)) from None
    if not isinstance(data, dict) or data.get("v") != _CONTINUE_VERSION:
        raise BadRequest("invalid continue token: continue key is not valid: server does not "
                         "recognize this encoded version")
    rv, start = data.get("rv"), data.get("start")
    if not isinstance(rv, int) or isinstance(rv, bool) or rv <= 0:
        raise _invalid_token(f"incorrect encoded start resourceVersion (version "
                             f"{_CONTINUE_VERSION})")
    if not isinstance(start, str) or not start.strip("\x00"):
        raise _invalid_token("encoded start key empty")
    key = start[:-1] if start.endswith("\x00") else start
    rooted = "/" + key
    if posixpath.normpath(rooted) != rooted or "\x00" in key:
        raise _invalid_token(start)
    namespace, slash, name = key.partition("/")
    if not slash:
        return rv, (None, key)
    if not namespace or not name or "/" in name:
        raise _invalid_token(start)
    return rv, (namespace, name)
