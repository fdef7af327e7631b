"""A shared ProviderConfig CRD on a long-lived server: installs merge, the last does not win.

Kinds of different providers may name one ProviderConfig kind (the engine's
``providerconfigs.lifecycle.dev``). ``lifecycle crds`` of all of them together gives
its spec every field of each, each required only where all require it
(:func:`lifecycle.schema.crds.provider_config_spec_schema`). A server that outlives one
install (the test session's real API server, a developer's ``lifecycle envtest``) gets
the kinds a few at a time; replacing the CRD with each install's own schema would let
the last install decide, so installing the PostgreSQL kinds alone after the simulated
cloud's would make ``host`` required for every ProviderConfig. :func:`merged_crd` unites
an install's ProviderConfig CRD with the one the server serves, the same way.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from lifecycle.core.errors import LifecycleError
from lifecycle.core.kind import PROVIDER_CONFIG_KIND

__all__ = ["MERGED_DESCRIPTION", "CRDMergeError", "merged_crd", "united_spec"]

_FREE = "x-kubernetes-preserve-unknown-fields"
#: The description of a ProviderConfig spec merged from several declarations (as
#: ``lifecycle crds`` writes it for kinds of several providers).
MERGED_DESCRIPTION = "How the operator reaches the provider and with which credentials."


class CRDMergeError(LifecycleError):
    """Two installs declare one ProviderConfig field differently; the message names it."""


def united_spec(served: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """The ProviderConfig ``spec`` schema accepting what ``served`` or ``new`` accepts.

    Every field of each (a field both declare must be declared alike, else
    :class:`CRDMergeError`), each required only where both require it, unknown fields
    kept when either keeps them, and the rules over several fields of one declaration
    left out (the provider checks them when it reads the config). Equal schemas are
    ``new`` itself.
    """
    if served == new:
        return dict(new)
    properties = dict(served.get("properties") or {})
    for name, node in (new.get("properties") or {}).items():
        if properties.setdefault(name, node) != node:
            raise CRDMergeError(f"ProviderConfig spec.{name} is served with another schema "
                                "than this install declares; the two kinds' ProviderConfig "
                                "spec classes must declare it alike")
    required = set(served.get("required") or ()) & set(new.get("required") or ())
    spec: dict[str, Any] = {"type": "object", "properties": properties,
                            "description": MERGED_DESCRIPTION}
    if required:
        spec["required"] = [name for name in properties if name in required]
    if served.get(_FREE) or new.get(_FREE):
        spec[_FREE] = True
    return spec


def merged_crd(served: Mapping[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """``new`` as it should replace ``served``: for a ProviderConfig CRD, each version's
    ``spec`` schema united with the one served (:func:`united_spec`); any other CRD as it
    is (a kind's own CRD is replaced by its latest declaration)."""
    if (new.get("spec") or {}).get("names", {}).get("kind") != PROVIDER_CONFIG_KIND:
        return new
    served_versions = {v.get("name"): v for v in (served.get("spec") or {}).get("versions")
                       or ()}
    merged = copy.deepcopy(new)
    for version in merged["spec"]["versions"]:
        old = _spec_of(served_versions.get(version["name"]))
        if old is None or _spec_of(version) is None:
            continue
        version["schema"]["openAPIV3Schema"]["properties"]["spec"] = united_spec(
            old, version["schema"]["openAPIV3Schema"]["properties"]["spec"])
    return merged


def _spec_of(version: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """A CRD version's ``spec`` schema, or None when it has none."""
    try:
        spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]  # type: ignore[index]
    except (KeyError, TypeError):
        return None
    return spec if isinstance(spec, Mapping) else None
