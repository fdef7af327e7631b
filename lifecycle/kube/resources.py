"""Resource types: a kind's group, version, plural and scope, and the built-in ones."""

from __future__ import annotations

from typing import Any

import attrs

__all__ = ["BUILTIN_TYPES", "CONFIG_MAP", "EVENT", "LEASE", "NAMESPACE", "SECRET", "ResourceType"]


@attrs.frozen
class ResourceType:
    """A registered kind: its group, version, kind, plural and scope.

    ``status_subresource`` says whether ``status`` is written only through the
    status subresource (true for custom kinds); for a type without it, the
    main resource writes ``status`` like any other field.
    """

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool
    status_subresource: bool = True
    #: The OpenAPI v3 structural schema of a whole object of this version (``None``:
    #: a built-in kind, or a custom kind registered without a schema).
    schema: Any = attrs.field(default=None, eq=False, repr=False)
    #: Short names and categories, as discovery reports them (``kubectl get dbi``).
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    #: ``additionalPrinterColumns`` of the version: dicts with name, type, jsonPath...
    printer_columns: tuple[Any, ...] = attrs.field(default=(), eq=False, repr=False)
    #: ``group/version``, or just the version for the core group (``v1``); computed once,
    #: since every call of the API server looks its type up by it.
    api_version: str = attrs.field(init=False, eq=False, repr=False)

    @api_version.default
    def _api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def resource(self) -> str:
        """``plural.group`` as the API server names the resource in messages."""
        return f"{self.plural}.{self.group}" if self.group else self.plural


NAMESPACE = ResourceType("", "v1", "Namespace", "namespaces", namespaced=False,
                         short_names=("ns",))
SECRET = ResourceType("", "v1", "Secret", "secrets", True, status_subresource=False)
EVENT = ResourceType("", "v1", "Event", "events", True, status_subresource=False,
                     short_names=("ev",))
CONFIG_MAP = ResourceType("", "v1", "ConfigMap", "configmaps", True,
                          status_subresource=False, short_names=("cm",))
LEASE = ResourceType("coordination.k8s.io", "v1", "Lease", "leases", True, status_subresource=False)
BUILTIN_TYPES = (NAMESPACE, SECRET, EVENT, CONFIG_MAP, LEASE)
