"""Parsing the requests of the HTTP face: bodies, query options and content negotiation.

Errors are answered the way a real API server answers them: a malformed query
parameter is a 400 ``BadRequest``; options that parse but are not allowed
(``dryRun=Some``, an unknown ``propagationPolicy``) are a 422 ``Invalid`` of
``CreateOptions``/``UpdateOptions``/``PatchOptions``/``DeleteOptions``/``ListOptions``
of group ``meta.k8s.io``; a body over :data:`MAX_BODY` is a 413.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import attrs
import yaml

from lifecycle.core.objects import nesting_depth
from lifecycle.kube.errors import (
    BadRequest,
    EntityTooLarge,
    Invalid,
    NotAcceptable,
)
from lifecycle.sim.guard import Headers, Reader

__all__ = ["MAX_BODY", "MAX_DEPTH", "Options", "accepts", "decode_body", "parse_options",
           "read_body"]

#: The largest request body accepted (a real server's default limit).
MAX_BODY = 3 * 1024 * 1024
#: The deepest nesting of JSON accepted in a body.
MAX_DEPTH = 500

_TRUE = ("true", "1")
_BOOL_VALUES = ("true", "false", "1", "0", "")
_POLICIES = ("Foreground", "Background", "Orphan")


def read_body(headers: Headers, stream: Reader) -> bytes:
    """Read the body by ``Content-Length`` or chunked transfer coding.

    A malformed length is a 400 and one over :data:`MAX_BODY` a 413; either
    way the rest of the body is left unread.
    """
    if "chunked" in (headers.get("Transfer-Encoding") or "").lower():
        return _read_chunked(stream)
    text = (headers.get("Content-Length") or "").strip()
    if not text:
        return b""
    if not text.isdigit():
        raise BadRequest(f"invalid Content-Length {text!r}")
    length = int(text)
    if length > MAX_BODY:
        raise EntityTooLarge(f"Request entity too large: limit is {MAX_BODY}")
    data = stream.read(length)
    if len(data) < length:
        raise BadRequest("the request body ended before its Content-Length")
    return data


def _read_chunked(stream: Reader) -> bytes:
    data = bytearray()
    while True:
        line = stream.readline(1024).strip().split(b";")[0]
        try:
            size = int(line, 16)
        except ValueError:
            raise BadRequest("malformed chunked request body") from None
        if size < 0:
            raise BadRequest("malformed chunked request body")
        if len(data) + size > MAX_BODY:
            raise EntityTooLarge(f"Request entity too large: limit is {MAX_BODY}")
        if size == 0:
            while stream.readline(1024).strip():
                pass
            return bytes(data)
        data += stream.read(size)
        stream.readline(1024)


def decode_body(raw: bytes, content_type: str) -> Any:
    """The JSON (or YAML) document of a body; ``None`` when empty."""
    if not raw.strip():
        return None
    try:
        if content_type in ("application/yaml", "application/apply-patch+yaml"):
            doc = yaml.safe_load(raw)
        else:
            doc = json.loads(raw)
    except RecursionError:
        raise BadRequest(f"the request body nests deeper than {MAX_DEPTH} levels") from None
    except (ValueError, yaml.YAMLError) as exc:
        raise BadRequest(f"the request body is not valid JSON: {_short(exc)}") from None
    if nesting_depth(doc, MAX_DEPTH) > MAX_DEPTH:
        raise BadRequest(f"the request body nests deeper than {MAX_DEPTH} levels")
    return doc


def _short(exc: Exception) -> str:
    return str(exc).splitlines()[0][:200]


# ---------------------------------------------------------------------------- options


@attrs.define
class Options:
    """The query options of one request (and a DELETE's ``DeleteOptions`` body)."""

    dry_run: bool = False
    label_selector: str | None = None
    field_selector: str | None = None
    limit: int | None = None
    continue_token: str | None = None
    resource_version: str | None = None
    resource_version_match: str | None = None
    watch: bool = False
    allow_bookmarks: bool = False
    timeout: float | None = None
    pretty: bool = False
    field_validation: str = "Warn"
    propagation_policy: str | None = None
    preconditions: dict[str, Any] = attrs.Factory(dict)
    include_object: str = "Metadata"


_OPTION_KINDS = {"POST": "CreateOptions", "PUT": "UpdateOptions", "PATCH": "PatchOptions",
                 "DELETE": "DeleteOptions", "GET": "ListOptions"}


def _options_invalid(method: str, causes: list[dict[str, str]]) -> Invalid:
    kind = _OPTION_KINDS.get(method, "ListOptions")
    summary = ", ".join(f"{c['field']}: {c['message']}" for c in causes)
    if len(causes) > 1:
        summary = f"[{summary}]"
    return Invalid(f'{kind}.meta.k8s.io "" is invalid: {summary}', causes=causes,
                   group="meta.k8s.io", kind=kind)


def _unsupported(field: str, value: str, supported: tuple[str, ...]) -> dict[str, str]:
    allowed = ", ".join(f'"{s}"' for s in supported)
    return {"reason": "FieldValueNotSupported", "field": field,
            "message": f"Unsupported value: {value}: supported values: {allowed}"}


def _bool(query: Mapping[str, list[str]], name: str) -> bool:
    values = query.get(name)
    if not values:
        return False
    value = values[-1].lower()
    if value not in _BOOL_VALUES:
        raise BadRequest(f'strconv.ParseBool: parsing "{values[-1]}": invalid syntax')
    return value in _TRUE or value == ""


def _int(query: Mapping[str, list[str]], name: str) -> int | None:
    values = query.get(name)
    if not values or values[-1] == "":
        return None
    try:
        return int(values[-1])
    except ValueError:
        raise BadRequest(f'strconv.ParseInt: parsing "{values[-1]}": invalid syntax') from None


def _one(query: Mapping[str, list[str]], name: str) -> str | None:
    values = query.get(name)
    return values[-1] if values and values[-1] != "" else None


def parse_options(method: str, query: Mapping[str, list[str]], body: Any,
                  *, collection: bool) -> Options:
    """Parse and check the query (and a DELETE body) the way the API server does."""
    options = Options(
        label_selector=_one(query, "labelSelector"),
        field_selector=_one(query, "fieldSelector"),
        limit=_int(query, "limit"),
        continue_token=_one(query, "continue"),
        resource_version=_one(query, "resourceVersion"),
        resource_version_match=_one(query, "resourceVersionMatch"),
        watch=_bool(query, "watch"),
        allow_bookmarks=_bool(query, "allowWatchBookmarks"),
        pretty=_bool(query, "pretty"),
        propagation_policy=_one(query, "propagationPolicy"),
        include_object=_one(query, "includeObject") or "Metadata",
    )
    timeout = _int(query, "timeoutSeconds")
    options.timeout = float(timeout) if timeout is not None and timeout > 0 else None
    dry_run = [v for v in query.get("dryRun", []) if v != ""]
    causes: list[dict[str, str]] = []
    if method == "DELETE" and isinstance(body, dict) and body:
        # a body's DeleteOptions replace those of the query, as on a real server
        options.propagation_policy = None
        dry_run = []
        _delete_options(body, options, dry_run)
    if dry_run:
        if any(v != "All" for v in dry_run):
            shown = "[]string{" + ", ".join(json.dumps(v) for v in dry_run) + "}"
            causes.append(_unsupported("dryRun", shown, ("All",)))
        options.dry_run = True
    manager = _one(query, "fieldManager")
    if manager is not None and len(manager) > 128:
        causes.append({"reason": "FieldValueTooLong", "field": "fieldManager",
                       "message": "Too long: may not be more than 128 bytes"})
    validation = _one(query, "fieldValidation")
    if validation is not None:
        if validation not in ("Ignore", "Warn", "Strict"):
            raise BadRequest(f'fieldValidation: Invalid value: "{validation}": fieldValidation '
                             f"must be one of Ignore, Warn or Strict")
        options.field_validation = validation
    if options.propagation_policy is not None and options.propagation_policy not in _POLICIES:
        causes.append(_unsupported("propagationPolicy", json.dumps(options.propagation_policy),
                                   (*_POLICIES, "nil")))
    if options.include_object not in ("None", "Metadata", "Object"):
        raise BadRequest(f"includeObject: Unsupported value: {options.include_object!r}")
    if method == "GET" and collection:
        causes += _list_causes(options)
    if causes:
        raise _options_invalid(method, causes)
    return options


def _delete_options(body: dict[str, Any], options: Options, dry_run: list[str]) -> None:
    if body.get("kind") not in (None, "DeleteOptions"):
        raise BadRequest(f"the body of a delete must be DeleteOptions, not {body.get('kind')!r}")
    body_dry_run = body.get("dryRun")
    if body_dry_run is not None:
        if not isinstance(body_dry_run, list) or not all(isinstance(v, str)
                                                         for v in body_dry_run):
            raise BadRequest("DeleteOptions.dryRun must be a list of strings")
        dry_run.extend(body_dry_run)
    policy = body.get("propagationPolicy")
    if policy is not None:
        if not isinstance(policy, str):
            raise BadRequest("DeleteOptions.propagationPolicy must be a string")
        options.propagation_policy = policy
    elif body.get("orphanDependents") is not None:
        options.propagation_policy = "Orphan" if body["orphanDependents"] else "Background"
    pre = body.get("preconditions")
    if pre is not None:
        if not isinstance(pre, dict):
            raise BadRequest("DeleteOptions.preconditions must be an object")
        options.preconditions = {k: v for k, v in pre.items() if v}


def _list_causes(options: Options) -> list[dict[str, str]]:
    causes = []
    match = options.resource_version_match
    if match is not None:
        if match not in ("Exact", "NotOlderThan"):
            causes.append(_unsupported("resourceVersionMatch", json.dumps(match),
                                       ("Exact", "NotOlderThan")))
        elif options.watch:
            causes.append({"reason": "FieldValueForbidden", "field": "resourceVersionMatch",
                           "message": "Forbidden: resourceVersionMatch is forbidden for watch"})
        elif not options.resource_version:
            causes.append({"reason": "FieldValueForbidden", "field": "resourceVersionMatch",
                           "message": "Forbidden: resourceVersionMatch is forbidden unless "
                                      "resourceVersion is provided"})
        elif match == "Exact" and options.resource_version == "0":
            causes.append({"reason": "FieldValueForbidden", "field": "resourceVersionMatch",
                           "message": "Forbidden: resourceVersionMatch \"exact\" is forbidden "
                                      "for resourceVersion \"0\""})
        elif options.continue_token:
            causes.append({"reason": "FieldValueForbidden", "field": "resourceVersionMatch",
                           "message": "Forbidden: resourceVersionMatch is forbidden when "
                                      "continue is provided"})
    return causes


# ------------------------------------------------------------------------ negotiation


def accepts(header: str | None) -> tuple[str, str]:
    """What the client accepts: ``("json"|"yaml"|"table"|"meta", api_version)``.

    ``meta`` is ``PartialObjectMetadata``; ``api_version`` is the ``meta.k8s.io``
    version of a Table or of partial metadata. Raises a 406 when nothing fits.
    """
    if not header or not header.strip():
        return "json", ""
    for entry in header.split(","):
        fields = [f.strip() for f in entry.split(";")]
        media = fields[0].lower()
        params = dict(f.split("=", 1) for f in fields[1:] if "=" in f)
        if media in ("application/json", "*/*", "application/*", "application/json-seq"):
            shape = params.get("as")
            if shape is None:
                return "json", ""
            if params.get("g") != "meta.k8s.io" or params.get("v") not in ("v1", "v1beta1"):
                continue
            if shape == "Table":
                return "table", f"meta.k8s.io/{params['v']}"
            if shape in ("PartialObjectMetadata", "PartialObjectMetadataList"):
                return "meta", f"meta.k8s.io/{params['v']}"
        elif media == "application/yaml" and "as" not in params:
            return "yaml", ""
    raise NotAcceptable("only the following media types are accepted: application/json, "
                        "application/yaml")
