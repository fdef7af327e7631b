"""``meta.k8s.io/v1`` Table answers, as ``kubectl get`` asks for them.

A custom kind's columns are ``Name`` and its ``additionalPrinterColumns``
(``Age`` alone when it has none), evaluated with the JSONPath subset such
columns use (``.a.b``, ``[0]``, ``[*]`` and filters like
``[?(@.type=="Ready")]``); ``date`` columns render as an age like ``5m``. The
built-in kinds get the columns a real server prints for them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime
from typing import Any

from lifecycle.core.values import now
from lifecycle.kube.errors import BadRequest
from lifecycle.kube.resources import ResourceType

__all__ = ["human_duration", "jsonpath", "partial_metadata", "table"]

_NAME_COLUMN = {"name": "Name", "type": "string", "format": "name", "priority": 0,
                "description": "Name must be unique within a namespace."}


# ------------------------------------------------------------------------- JSONPath

_TOKEN = re.compile(
    r"""\.(?P<field>[A-Za-z0-9_\-/$]+)"""
    r"""|\[(?P<index>-?\d+|\*)\]"""
    r"""|\[\?\(@(?P<fpath>(?:\.[A-Za-z0-9_\-/$]+)+)\s*(?P<op>==|!=)\s*"""
    r"""(?P<fval>'[^']*'|"[^"]*"|-?\d+(?:\.\d+)?|true|false)\s*\)\]"""
    r"""|\.?\[['"](?P<qfield>[^'"]+)['"]\]"""
)


def jsonpath(obj: Any, path: str) -> list[Any]:
    """Every value ``path`` (``.status.conditions[?(@.type=="Ready")].status``) selects."""
    text = path.strip()
    if text.startswith("{") and text.endswith("}"):
        text = text[1:-1].strip()
    if text.startswith("$"):
        text = text[1:]
    nodes = [obj]
    pos = 0
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None:
            raise BadRequest(f"unsupported JSONPath {path!r} at {text[pos:]!r}")
        pos = match.end()
        nodes = _apply(nodes, match)
    return nodes


def _apply(nodes: list[Any], match: re.Match[str]) -> list[Any]:
    field = match.group("field") or match.group("qfield")
    if field is not None:
        return [n[field] for n in nodes if isinstance(n, dict) and field in n]
    index = match.group("index")
    if index == "*":
        out: list[Any] = []
        for n in nodes:
            if isinstance(n, list):
                out.extend(n)
            elif isinstance(n, dict):
                out.extend(n.values())
        return out
    if index is not None:
        i = int(index)
        return [n[i] for n in nodes if isinstance(n, list) and -len(n) <= i < len(n)]
    want = _literal(match.group("fval"))
    steps = match.group("fpath").split(".")[1:]
    equal = match.group("op") == "=="
    out = []
    for n in nodes:
        for item in n if isinstance(n, list) else []:
            value: Any = item
            for step in steps:
                value = value.get(step) if isinstance(value, dict) else None
            if (value == want) == equal:
                out.append(item)
    return out


def _literal(text: str) -> Any:
    if text[0] in "'\"":
        return text[1:-1]
    if text in ("true", "false"):
        return text == "true"
    return float(text) if "." in text else int(text)


# ---------------------------------------------------------------------------- ages


def human_duration(seconds: float) -> str:
    """An age as kubectl prints it: ``45s``, ``3m20s``, ``5h``, ``2d3h``, ``1y``."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        rest = s % 60
        return f"{minutes}m{rest}s" if rest else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        rest = minutes % 60
        return f"{hours}h{rest}m" if rest else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        rest = hours % 24
        return f"{hours // 24}d{rest}h" if rest else f"{hours // 24}d"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        rest = (hours // 24) % 365
        return f"{hours // 24 // 365}y{rest}d" if rest else f"{hours // 24 // 365}y"
    return f"{hours // 24 // 365}y"


def _age(stamp: Any, clock: Callable[[], datetime]) -> str | None:
    if not isinstance(stamp, str) or not stamp:
        return None
    try:
        when = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None
    return human_duration((clock() - when).total_seconds())


# ------------------------------------------------------------------------- columns


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _custom_columns(rtype: ResourceType) -> list[dict[str, Any]]:
    return list(rtype.printer_columns) or [
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}]


def _custom_cell(obj: dict[str, Any], column: dict[str, Any],
                 clock: Callable[[], datetime]) -> Any:
    try:
        found = jsonpath(obj, str(column.get("jsonPath", "")))
    except BadRequest:
        return None
    if not found:
        return None
    if len(found) > 1:
        return " ".join(str(v) for v in found)
    value = found[0]
    kind = column.get("type", "string")
    if kind == "date":
        return _age(value, clock)
    if kind == "integer":
        return value if isinstance(value, int) and not isinstance(value, bool) else None
    if kind == "number":
        return value if isinstance(value, int | float) and not isinstance(value, bool) else None
    if kind == "boolean":
        return value if isinstance(value, bool) else None
    if isinstance(value, bool):
        return str(value).lower()
    return value if isinstance(value, str) else str(value)


def _event_last_seen(obj: dict[str, Any], clock: Callable[[], datetime]) -> str:
    last = obj.get("lastTimestamp") or obj.get("eventTime") or _meta(obj).get(
        "creationTimestamp")
    first = obj.get("firstTimestamp") or last
    count = obj.get("count") or 1
    seen = _age(last, clock) or "<unknown>"
    if isinstance(count, int) and count > 1:
        return f"{seen} (x{count} over {_age(first, clock) or '<unknown>'})"
    return seen


def _event_object(obj: dict[str, Any]) -> str:
    ref = obj.get("involvedObject") or {}
    return f"{str(ref.get('kind', '')).lower()}/{ref.get('name', '')}"


_Column = tuple[dict[str, Any], Callable[[dict[str, Any], Callable[[], datetime]], Any]]


def _col(name: str, kind: str, description: str, priority: int = 0,
         fmt: str = "") -> dict[str, Any]:
    return {"name": name, "type": kind, "format": fmt, "description": description,
            "priority": priority}


def _age_column() -> _Column:
    return (_col("Age", "string", "CreationTimestamp is a timestamp representing the server "
                 "time when this object was created."),
            lambda o, c: _age(_meta(o).get("creationTimestamp"), c) or "<unknown>")


_BUILTIN: dict[tuple[str, str], list[_Column]] = {
    ("v1", "Secret"): [
        (_col("Type", "string", "The type of the secret"), lambda o, c: o.get("type", "")),
        (_col("Data", "string", "The number of keys in the secret data"),
         lambda o, c: len(o.get("data") or {}) + len(o.get("binaryData") or {})),
        _age_column(),
    ],
    ("v1", "ConfigMap"): [
        (_col("Data", "string", "The number of keys in the config map"),
         lambda o, c: len(o.get("data") or {}) + len(o.get("binaryData") or {})),
        _age_column(),
    ],
    ("v1", "Namespace"): [
        (_col("Status", "string", "The status of the namespace"),
         lambda o, c: (o.get("status") or {}).get("phase", "")),
        _age_column(),
    ],
    ("coordination.k8s.io/v1", "Lease"): [
        (_col("Holder", "string", "The holder of the lease"),
         lambda o, c: (o.get("spec") or {}).get("holderIdentity", "")),
        _age_column(),
    ],
    ("v1", "Event"): [
        (_col("Last Seen", "string", "The time of the last occurrence"), _event_last_seen),
        (_col("Type", "string", "The type of the event"), lambda o, c: o.get("type", "")),
        (_col("Reason", "string", "The reason of the event"), lambda o, c: o.get("reason", "")),
        (_col("Object", "string", "The object the event is about"),
         lambda o, c: _event_object(o)),
        (_col("Subobject", "string", "The field of the object", 1),
         lambda o, c: (o.get("involvedObject") or {}).get("fieldPath", "")),
        (_col("Source", "string", "The component reporting the event", 1),
         lambda o, c: ", ".join(v for v in ((o.get("source") or {}).get("component", ""),
                                            (o.get("source") or {}).get("host", "")) if v)),
        (_col("Message", "string", "A human-readable description"),
         lambda o, c: o.get("message", "")),
        (_col("First Seen", "string", "The time of the first occurrence", 1),
         lambda o, c: _age(o.get("firstTimestamp"), c) or "<unknown>"),
        (_col("Count", "string", "How many times the event occurred", 1),
         lambda o, c: o.get("count", 1)),
        (_col("Name", "string", "The name of the event", 1, "name"),
         lambda o, c: _meta(o).get("name", "")),
    ],
    # As a real API server of v1.37 prints them: scope, versions (the storage one
    # marked), creation time.
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition"): [
        (_col("Scope", "string", "Whether the resources are namespaced or cluster-scoped"),
         lambda o, c: (o.get("spec") or {}).get("scope", "")),
        (_col("Versions", "string", "The versions served, the storage version marked"),
         lambda o, c: ",".join(
             f"{v.get('name')}(storage)" if v.get("storage") else str(v.get("name"))
             for v in (o.get("spec") or {}).get("versions") or [])),
        (_col("Created At", "date", "The time the definition was created"),
         lambda o, c: _meta(o).get("creationTimestamp", "")),
    ],
}


def _columns(rtype: ResourceType) -> tuple[list[dict[str, Any]], list[Callable[..., Any]]]:
    builtin = _BUILTIN.get((rtype.api_version, rtype.kind))
    name_column = (dict(_NAME_COLUMN), lambda o, c: _meta(o).get("name", ""))
    if builtin is not None:
        # Events print their name only in the wide output (a priority-1 column).
        columns = builtin if rtype.kind == "Event" else [name_column, *builtin]
        return [dict(c) for c, _ in columns], [f for _, f in columns]
    definitions = [dict(_NAME_COLUMN)]
    cells: list[Callable[..., Any]] = [name_column[1]]
    for column in _custom_columns(rtype):
        definitions.append({"name": column.get("name", ""), "type": column.get("type", "string"),
                            "format": column.get("format", ""),
                            "description": column.get("description", ""),
                            "priority": int(column.get("priority", 0) or 0)})
        cells.append(lambda o, c, col=column: _custom_cell(o, col, c))
    return definitions, cells


def partial_metadata(obj: dict[str, Any], api_version: str = "meta.k8s.io/v1") -> dict[str, Any]:
    """The ``PartialObjectMetadata`` of an object."""
    return {"kind": "PartialObjectMetadata", "apiVersion": api_version,
            "metadata": dict(_meta(obj))}


def table(rtype: ResourceType, items: list[dict[str, Any]], *, list_meta: dict[str, Any],
          include_object: str = "Metadata", headers: bool = True,
          api_version: str = "meta.k8s.io/v1",
          clock: Callable[[], datetime] = now) -> dict[str, Any]:
    """A Table of ``items`` of ``rtype`` (``include_object``: None, Metadata or Object)."""
    definitions, cells = _columns(rtype)
    rows = []
    for obj in items:
        row: dict[str, Any] = {"cells": [cell(obj, clock) for cell in cells]}
        if include_object == "Object":
            row["object"] = obj
        elif include_object == "Metadata":
            row["object"] = partial_metadata(obj, api_version)
        rows.append(row)
    return {"kind": "Table", "apiVersion": api_version, "metadata": list_meta,
            "columnDefinitions": definitions if headers else [], "rows": rows}
