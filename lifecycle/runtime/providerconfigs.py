"""ProviderConfig usage: who uses a provider config, and no deletion while anyone does.

A managed object names its provider config in ``spec.providerConfigRef``
(``default`` when it names none). Deleting a config its objects still use
would leave them unable to observe, update or even delete their external
resources. :class:`ProviderConfigReconciler` therefore keeps, on every
ProviderConfig:

* the finalizer :data:`IN_USE` while the config exists, removed only once it
  is being deleted and no object uses it any more;
* ``status.users`` (how many objects use it) and ``status.usedBy`` (the
  first :data:`SHOWN` of them, ``Kind namespace/name``), written only when
  they change;
* a Warning Event ``DeletionBlocked`` naming users while a deletion waits.

The decision is pure (:func:`usage`); the reconciler only reads the objects
of the managed kinds and writes the config.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import attrs

from lifecycle.core import objects
from lifecycle.core.kind import GROUP, PROVIDER_CONFIG_API, PROVIDER_CONFIG_KIND, Kind
from lifecycle.core.values import Result
from lifecycle.kube.cluster import Cluster
from lifecycle.kube.errors import NotFound
from lifecycle.runtime.retry import retry_conflicts

__all__ = ["IN_USE", "SHOWN", "ProviderConfigReconciler", "Usage", "config_of", "usage"]

#: The finalizer holding a ProviderConfig while objects use it.
IN_USE = f"{GROUP}/in-use"
#: How many users ``status.usedBy`` lists.
SHOWN = 10
#: How often a deletion waiting for its users is checked again (seconds).
RECHECK = 30.0


def config_of(obj: Mapping[str, Any]) -> str:
    """The name of the provider config a managed object uses."""
    ref = objects.mapping(objects.spec(obj).get("providerConfigRef"))
    name = ref.get("name")
    return name if isinstance(name, str) and name else "default"


@attrs.frozen
class Usage:
    """What a ProviderConfig should carry: its finalizer, its status, an Event."""

    finalizer: bool
    status: dict[str, Any]
    blocked: str | None = None


def usage(config: Mapping[str, Any], users: Sequence[str]) -> Usage:
    """Decide a config's finalizer and status from its ``users`` (pure).

    A live config keeps the finalizer; a deleting one keeps it while it has
    users (``blocked`` is then the Event message) and loses it once it has none.
    """
    deleting = bool(objects.metadata(config).get("deletionTimestamp"))
    ordered = sorted(users)
    status = {**objects.status(config), "users": len(ordered), "usedBy": ordered[:SHOWN]}
    if not deleting:
        return Usage(True, status)
    if ordered:
        shown = ", ".join(ordered[:3]) + (f" and {len(ordered) - 3} more"
                                          if len(ordered) > 3 else "")
        return Usage(True, status, f"deletion waits until no object uses this provider "
                                   f"config: {shown}")
    return Usage(False, status)


class ProviderConfigReconciler:
    """Keeps the :data:`IN_USE` finalizer and usage status of ProviderConfigs.

    ``kinds`` are the managed kinds whose objects may use a config (those
    naming ProviderConfigs of ``api_version``); ``lister(kind)`` returns every
    object of one of them (an operator passes its informers' caches; default:
    a list call on ``api``).
    """

    def __init__(self, api: Cluster, kinds: Iterable[Kind],
                 lister: Callable[[Kind], Iterable[Mapping[str, Any]]] | None = None, *,
                 api_version: str = PROVIDER_CONFIG_API) -> None:
        self.api = api
        self.api_version = api_version
        self.kinds = tuple(k for k in kinds if k.provider_config_api == api_version)
        self.lister = lister or (
            lambda kind: api.list(kind.api_version, kind.kind)[0])  # type: ignore[attr-defined]

    def users(self, name: str) -> list[str]:
        """``Kind namespace/name`` of every live object naming the config ``name``."""
        found = []
        for kind in self.kinds:
            for obj in self.lister(kind):
                meta = objects.metadata(obj)
                if config_of(obj) != name:
                    continue
                if meta.get("deletionTimestamp") and not meta.get("finalizers"):
                    continue  # on its way out
                where = f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else (
                    str(meta.get("name")))
                found.append(f"{kind.kind} {where}")
        return found

    def reconcile(self, namespace: str | None, name: str) -> Result:
        """Bring one ProviderConfig's finalizer and status in line with its users."""
        state: dict[str, Any] = {}

        def attempt() -> None:
            try:
                config = self.api.get(self.api_version, PROVIDER_CONFIG_KIND, None, name)
            except NotFound:
                state["gone"] = True
                return
            decided = usage(config, self.users(name))
            state["decided"] = decided
            finalizers = list(objects.finalizers(config))
            if decided.finalizer != (IN_USE in finalizers):
                body = dict(config)
                body["metadata"] = {**config["metadata"], "finalizers": (
                    [*finalizers, IN_USE] if decided.finalizer
                    else [f for f in finalizers if f != IN_USE])}
                config = self.api.replace(body)
                if not decided.finalizer:
                    return  # released: the config is deleted now
            if objects.status(config) != decided.status:
                self.api.replace_status({**config, "status": decided.status})
            if decided.blocked:
                self.api.record_event(config, "Warning", "DeletionBlocked", decided.blocked)

        retry_conflicts(attempt, lambda: None, what="provider config write")
        if state.get("gone"):
            return Result.done("NotFound")
        decided = state.get("decided")
        if decided is not None and decided.blocked:
            return Result.later(RECHECK, "DeletionBlocked")
        return Result.done("InUse" if decided is not None and decided.status["users"]
                           else "Unused")
