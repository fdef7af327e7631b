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
* a Warning Event ``DeletionBlocked`` naming users while a deletion waits;
* the condition ``Valid`` (:data:`VALID`): True when the config's credentials
  can be read and its spec suits each provider using it, else False with the
  reason (``CredentialsMissing``, ``ProviderConfigInvalid``,
  ``CredentialsUnavailable`` when the operator may not read them) and a message
  naming the field or key at fault, never a credential. A provider checks its
  own fields through the optional ``problem(config)`` of the spec class its
  kinds declare (``Kind.provider_config_spec``): a message, or None when the
  config suits it. The objects using an invalid config say the same on their
  own conditions; this one says it where the config is written.

The decisions are pure (:func:`usage`, :func:`validity`); the reconciler only
reads the objects of the managed kinds and the config's credentials, and
writes the config.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import attrs

from lifecycle.core import conditions as cond
from lifecycle.core import objects
from lifecycle.core.contract import ProviderConfig
from lifecycle.core.errors import CredentialsError
from lifecycle.core.kind import GROUP, PROVIDER_CONFIG_API, PROVIDER_CONFIG_KIND, Kind
from lifecycle.core.values import Condition, ConditionStatus, Result, rfc3339
from lifecycle.core.vocabulary import ConditionTypes, Reasons
from lifecycle.kube.cluster import Cluster
from lifecycle.kube.errors import ApiError, Forbidden, NotFound
from lifecycle.runtime.credentials import credential_secrets, resolve_credentials
from lifecycle.runtime.retry import retry_conflicts

__all__ = ["IN_USE", "SHOWN", "VALID", "ProviderConfigReconciler", "Usage", "config_of",
           "redacted", "usage", "validity"]

#: The finalizer holding a ProviderConfig while objects use it.
IN_USE = f"{GROUP}/in-use"
#: How many users ``status.usedBy`` lists.
SHOWN = 10
#: How often a deletion waiting for its users is checked again (seconds).
RECHECK = 30.0
#: The condition type saying whether a ProviderConfig can be used as written.
VALID = ConditionTypes.VALID


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


def validity(status: Mapping[str, Any], problem: tuple[str, str] | None, generation: int,
             when: str) -> list[dict[str, Any]]:
    """The conditions of a config's ``status`` with :data:`VALID` set (pure): False with
    ``problem`` (reason, message), else True; its transition time kept while it holds."""
    stored = status.get("conditions")
    if problem is None:
        valid = Condition(VALID, ConditionStatus.TRUE, Reasons.PROVIDER_CONFIG_VALID, "",
                          generation)
    else:
        valid = Condition(VALID, ConditionStatus.FALSE, problem[0], problem[1], generation)
    return cond.merge(stored if isinstance(stored, list) else [], [valid], when)


def redacted(message: str, credentials: Mapping[str, str]) -> str:
    """``message`` with every credential value of four characters or more masked."""
    for value in sorted({v for v in credentials.values() if isinstance(v, str)},
                        key=len, reverse=True):
        if len(value) >= 4:
            message = message.replace(value, "***")
    return message


class ProviderConfigReconciler:
    """Keeps the :data:`IN_USE` finalizer and usage status of ProviderConfigs.

    ``kinds`` are the managed kinds whose objects may use a config (those
    naming ProviderConfigs of ``api_version``); ``lister(kind)`` returns every
    object of one of them (an operator passes its informers' caches; default:
    a list call on ``api``); ``clock`` gives the conditions' transition time.
    ``namespace``: the one namespace the operator serves, where its RBAC lets it read
    Secrets; a config whose credentials are elsewhere is not this operator's to judge,
    and its ``Valid`` condition is left as it was.
    """

    def __init__(self, api: Cluster, kinds: Iterable[Kind],
                 lister: Callable[[Kind], Iterable[Mapping[str, Any]]] | None = None, *,
                 api_version: str = PROVIDER_CONFIG_API,
                 clock: Callable[[], datetime] = lambda: datetime.now(UTC),
                 namespace: str | None = None) -> None:
        self.api = api
        self.namespace = namespace
        self.api_version = api_version
        self.kinds = tuple(k for k in kinds if k.provider_config_api == api_version)
        self.lister = lister or (
            lambda kind: api.list(kind.api_version, kind.kind)[0])  # type: ignore[attr-defined]
        self.clock = clock
        #: Each provider's ``problem(config)`` check, once per spec class.
        self.checks = tuple(dict.fromkeys(
            check for k in self.kinds
            if callable(check := getattr(k.provider_config_spec, "problem", None))))

    def problem(self, config: Mapping[str, Any]) -> tuple[str, str] | None:
        """What makes ``config`` unusable, as (reason, message), or None: its credentials
        cannot be read, or a provider's check refuses its spec. Credential values never
        reach the message."""
        name = str(objects.metadata(config).get("name"))
        spec = objects.spec(config)
        try:
            credentials = resolve_credentials(self.api, name, spec)
        except CredentialsError as exc:
            return exc.reason, exc.message
        for check in self.checks:
            found = check(ProviderConfig(name=name, spec=spec, credentials=credentials))
            if found:
                return Reasons.PROVIDER_CONFIG_INVALID, redacted(str(found), credentials)
        return None

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

    def _validate(self, config: Mapping[str, Any], status: dict[str, Any]) -> None:
        """Set :data:`VALID` in ``status`` (the status about to be written). The credentials
        the operator may not read are a problem of the config; any other failed read
        leaves the condition as it was (the next pass checks again), never the usage."""
        name = str(objects.metadata(config).get("name"))
        if self.namespace is not None and any(
                where != self.namespace for where, _ in credential_secrets(config)):
            return
        try:
            found = self.problem(config)
        except Forbidden:
            found = ("CredentialsUnavailable", f"provider config {name!r}: the operator may "
                                               "not read its credentials (forbidden)")
        except ApiError:
            return
        generation = objects.metadata(config).get("generation")
        status["conditions"] = validity(status, found, generation if isinstance(
            generation, int) else 0, rfc3339(self.clock()))

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
            if not objects.metadata(config).get("deletionTimestamp"):
                self._validate(config, decided.status)
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
