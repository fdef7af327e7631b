"""Discovery documents of the HTTP face: ``/api``, ``/api/v1``, ``/apis``, ``/apis/G[/V]``.

The resource lists carry what kubectl resolves names with: ``singularName``,
``shortNames``, ``categories`` (``kubectl get managed``), the verbs and the
``<plural>/status`` subresource. Only the legacy (unaggregated) discovery
format is served; clients asking for aggregated discovery get the legacy
document with ``Content-Type: application/json`` and fall back to it.
"""

from __future__ import annotations

import re
from typing import Any

from lifecycle.kube.errors import NotFound
from lifecycle.kube.resources import ResourceType
from lifecycle.sim.reviews import REVIEWS

__all__ = ["VERSION", "discovery", "verbs"]

#: What ``/version`` answers.
VERSION = {"major": "1", "minor": "30", "gitVersion": "v1.30.0-lifecycle-embedded",
           "gitCommit": "", "gitTreeState": "clean", "buildDate": "1970-01-01T00:00:00Z",
           "goVersion": "none", "compiler": "none", "platform": "linux/amd64"}

_ALL_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
_STATUS_VERBS = ["get", "patch", "update"]


def verbs(rtype: ResourceType) -> list[str]:
    """The verbs served on ``rtype``'s collection and objects."""
    if rtype in REVIEWS:
        return ["create"]
    if (rtype.api_version, rtype.kind) == ("v1", "Namespace"):
        return [v for v in _ALL_VERBS if v != "deletecollection"]
    return list(_ALL_VERBS)


def _resources(types: list[ResourceType]) -> list[dict[str, Any]]:
    resources: list[dict[str, Any]] = []
    for t in types:
        entry: dict[str, Any] = {"name": t.plural, "singularName": t.kind.lower(),
                                 "namespaced": t.namespaced, "kind": t.kind, "verbs": verbs(t)}
        if t.short_names:
            entry["shortNames"] = list(t.short_names)
        if t.categories:
            entry["categories"] = list(t.categories)
        resources.append(entry)
        if t.status_subresource:
            resources.append({"name": f"{t.plural}/status", "singularName": "",
                              "namespaced": t.namespaced, "kind": t.kind,
                              "verbs": list(_STATUS_VERBS)})
    return resources


def _groups(types: list[ResourceType]) -> list[str]:
    seen: dict[str, None] = {}
    for t in types:
        if t.group:
            seen.setdefault(t.group, None)
    return list(seen)


def _group(name: str, types: list[ResourceType]) -> dict[str, Any]:
    versions = sorted({t.version for t in types if t.group == name}, key=_version_priority)
    entries = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
    return {"name": name, "versions": entries, "preferredVersion": entries[0]}


def _version_priority(version: str) -> tuple[int, int, int, str]:
    """Kubernetes version order: GA before beta before alpha, higher numbers first."""
    match = re.fullmatch(r"v(\d+)(?:(alpha|beta)(\d+))?", version)
    if match is None:
        return (3, 0, 0, version)
    level = {"": 0, "beta": 1, "alpha": 2}[match.group(2) or ""]
    return (level, -int(match.group(1)), -int(match.group(3) or 0), version)


def discovery(parts: list[str], types: list[ResourceType], address: str) -> dict[str, Any] | None:
    """The discovery document for a path split into parts, or ``None`` if it is not one."""
    types = [*types, *REVIEWS]
    if parts == ["api"]:
        return {"kind": "APIVersions", "apiVersion": "v1", "versions": ["v1"],
                "serverAddressByClientCIDRs": [
                    {"clientCIDR": "0.0.0.0/0", "serverAddress": address}]}
    if parts == ["apis"]:
        return {"kind": "APIGroupList", "apiVersion": "v1",
                "groups": [_group(g, types) for g in _groups(types)]}
    if len(parts) == 2 and parts[0] == "apis":
        if parts[1] not in _groups(types):
            raise NotFound("the server could not find the requested resource")
        return {"kind": "APIGroup", "apiVersion": "v1", **_group(parts[1], types)}
    if parts == ["api", "v1"] or (len(parts) == 3 and parts[0] == "apis"):
        group_version = "v1" if parts[0] == "api" else f"{parts[1]}/{parts[2]}"
        served = [t for t in types if t.api_version == group_version]
        if not served:
            raise NotFound("the server could not find the requested resource")
        return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version,
                "resources": _resources(served)}
    if parts == ["version"]:
        return dict(VERSION)
    return None
