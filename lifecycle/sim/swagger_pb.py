"""``/openapi/v2`` as protobuf, the form kubectl downloads (``OpenAPIv2.Document``).

kubectl reads the v2 document to learn whether a kind's ``PATCH`` accepts the
``fieldValidation`` query parameter when the v3 documents do not name the kind
(an object whose CRD is not installed yet), so the server then validates and
answers the real error. The encoding carries what that check reads: each
path's operations with their ``operationId``, query parameters and the
``x-kubernetes-group-version-kind`` extension. Schemas (``definitions``) are
left out: kubectl validates against the v3 documents.
"""

from __future__ import annotations

from typing import Any

import yaml

__all__ = ["ANSWER_TYPE", "MEDIA_TYPE", "encode_v2"]

#: The media type kubectl asks for, and the one the answer carries.
MEDIA_TYPE = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
ANSWER_TYPE = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"

# Field numbers of the OpenAPIv2 protobuf messages used here.
_DOC_SWAGGER, _DOC_INFO, _DOC_PATHS = 1, 2, 8
_INFO_TITLE, _INFO_VERSION = 1, 2
_PATHS_PATH = 2
_NAMED_NAME, _NAMED_VALUE = 1, 2
_PATH_OPERATIONS = {"get": 2, "put": 3, "post": 4, "delete": 5, "patch": 8}
_OP_ID, _OP_PARAMETERS, _OP_EXTENSIONS = 5, 8, 13
_ITEM_PARAMETER = 1
_PARAMETER_NON_BODY = 2
_NON_BODY_QUERY = 3
_QUERY_IN, _QUERY_NAME, _QUERY_TYPE = 2, 4, 6
_ANY_YAML = 2


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field(number: int, payload: bytes | str) -> bytes:
    data = payload.encode() if isinstance(payload, str) else payload
    return _varint(number << 3 | 2) + _varint(len(data)) + data


def _operation(op: dict[str, Any]) -> bytes:
    out = _field(_OP_ID, op["operationId"])
    for param in op.get("parameters", []):
        if param.get("in") != "query":
            continue
        query = (_field(_QUERY_IN, "query") + _field(_QUERY_NAME, param["name"])
                 + _field(_QUERY_TYPE, "string"))
        item = _field(_ITEM_PARAMETER, _field(_PARAMETER_NON_BODY,
                                              _field(_NON_BODY_QUERY, query)))
        out += _field(_OP_PARAMETERS, item)
    gvk = op.get("x-kubernetes-group-version-kind")
    if gvk is not None:
        text = yaml.safe_dump(gvk, default_flow_style=False)
        extension = (_field(_NAMED_NAME, "x-kubernetes-group-version-kind")
                     + _field(_NAMED_VALUE, _field(_ANY_YAML, text)))
        out += _field(_OP_EXTENSIONS, extension)
    return out


def encode_v2(document: dict[str, Any]) -> bytes:
    """The protobuf encoding of a Swagger 2.0 document's paths and operations."""
    info = _field(_INFO_TITLE, document["info"]["title"]) + _field(
        _INFO_VERSION, document["info"]["version"])
    paths = b""
    for name, item in document["paths"].items():
        body = b"".join(_field(_PATH_OPERATIONS[verb], _operation(op))
                        for verb, op in item.items() if verb in _PATH_OPERATIONS)
        paths += _field(_PATHS_PATH, _field(_NAMED_NAME, name) + _field(_NAMED_VALUE, body))
    return (_field(_DOC_SWAGGER, document["swagger"]) + _field(_DOC_INFO, info)
            + _field(_DOC_PATHS, paths))
