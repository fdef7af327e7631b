"""The API requests the operator can issue, as RBAC rules.

:data:`CALL_VERBS` says which RBAC verb each :class:`~lifecycle.driver.cluster.KubeCluster`
method sends, on the object itself or on a subresource. :data:`USES` says which of
those methods the engine (reconciler, connection Secrets, claims, owned children,
shared reads) and the driver (informers, leader election) call on each kind of
resource. :func:`rules` turns the two into RBAC rules, so the granted verbs follow
the code: tests drive every method against the embedded API's HTTP face and check
the verbs it really sends against :data:`CALL_VERBS`, and run the operator there to
check that nothing it sends falls outside the rules.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from lifecycle.core.kind import GROUP

__all__ = ["CALL_VERBS", "FINALIZERS_VERB", "USES", "Rule", "lease_rules", "rules",
           "secret_rules", "verbs_for"]

#: (subresource, RBAC verb) pairs each ``KubeCluster`` method sends ("" = the object).
CALL_VERBS: Mapping[str, tuple[tuple[str, str], ...]] = {
    "get": (("", "get"),),
    "create": (("", "create"),),
    "replace": (("", "update"),),
    "replace_status": (("status", "update"),),
    "delete": (("", "delete"),),
    "list": (("", "list"),),
    "list_watcher": (("", "list"), ("", "watch")),
    # A first event is created; a repeat of a recent one is patched (its count).
    "record_event": (("", "create"), ("", "patch")),
}

#: Which ``KubeCluster`` methods are called on what. ``kind`` is every kind the
#: operator runs: its informer lists and watches it, its reconciler writes the object
#: and its status, and reads it one by one when the cache cannot answer (after a 409,
#: or a queued key its namespaced store does not hold). ``provisioned`` is a kind claims
#: provision: the claim reconciler creates it, binds it (an update), reads it and
#: deletes it, and watches it to requeue claims. ``class`` is a resource class (claims
#: read one by name or list them to select, and the operator watches them to requeue
#: the claims a change concerns); ``children`` is a kind a parent owns (the parent
#: reads, creates and corrects it, and watches it to requeue its owner; the garbage
#: collector deletes it). Nothing creates or deletes a kind that is only run.
USES: Mapping[str, tuple[str, ...]] = {
    "kind": ("get", "list_watcher", "replace", "replace_status"),
    "provisioned": ("get", "list_watcher", "create", "replace", "delete"),
    "class": ("get", "list", "list_watcher"),
    "children": ("get", "create", "replace", "list_watcher"),
    # list and watch: the operator caches the connection Secrets it writes.
    "secrets": ("get", "list_watcher", "create", "replace", "delete"),
    # list and watch: the operator (as `lifecycle run` builds it, cached_manager) caches
    # the Namespaces it serves and answers every read from that informer, so no get. A
    # Manager built without the cache reads each one: grant it get on namespaces too.
    "namespaces": ("list_watcher",),
    # get: a read the cache cannot answer (before the first list, after a 409).
    "providerconfigs": ("get", "list_watcher", "replace", "replace_status"),
    "events": ("record_event",),
    "leases": ("get", "create", "replace"),
}

#: The verb on ``<plural>/finalizers`` the API server checks (with the
#: OwnerReferencesPermissionEnforcement admission plugin) before it accepts an
#: ownerReference with ``blockOwnerDeletion: true``, as on connection Secrets and
#: owned children. No request is sent to it.
FINALIZERS_VERB = "update"

#: One RBAC rule: apiGroups, resources and verbs.
Rule = dict[str, Any]


def verbs_for(use: str) -> dict[str, list[str]]:
    """Subresource ("" for the object) to sorted verbs, for one entry of :data:`USES`."""
    found: dict[str, set[str]] = {}
    for method in USES[use]:
        for sub, verb in CALL_VERBS[method]:
            found.setdefault(sub, set()).add(verb)
    return {sub: sorted(verbs) for sub, verbs in sorted(found.items())}


def _rule(group: str, resources: Iterable[str], verbs: Sequence[str]) -> Rule:
    return {"apiGroups": [group], "resources": sorted(resources), "verbs": list(verbs)}


def _rules_on(group: str, plurals: Sequence[str], use: str, *,
              finalizers: bool = False) -> list[Rule]:
    out = []
    for sub, verbs in verbs_for(use).items():
        names = [f"{p}/{sub}" if sub else p for p in plurals]
        out.append(_rule(group, names, verbs))
    if finalizers:
        out.append(_rule(group, [f"{p}/finalizers" for p in plurals], [FINALIZERS_VERB]))
    return out


def _merged(uses: Mapping[tuple[str, str], set[str]], *, finalizers: Iterable[tuple[str, str]]
            ) -> list[Rule]:
    """Rules for ``(group, plural)`` -> the :data:`USES` entries that apply to it: the
    union of their verbs, one rule per group, subresource and set of verbs."""
    grouped: dict[tuple[str, str, tuple[str, ...]], list[str]] = {}
    for (group, plural), names in sorted(uses.items()):
        found: dict[str, set[str]] = {}
        for use in names:
            for sub, use_verbs in verbs_for(use).items():
                found.setdefault(sub, set()).update(use_verbs)
        for sub, all_verbs in found.items():
            grouped.setdefault((group, sub, tuple(sorted(all_verbs))), []).append(plural)
    out = []
    for group in sorted({g for g, _, _ in grouped}):
        for (g, sub, verbs), plurals in sorted(grouped.items(),
                                               key=lambda item: (item[0][1], item[1])):
            if g == group:
                out.append(_rule(group, [f"{p}/{sub}" if sub else p for p in plurals], verbs))
        owners = sorted(p for g, p in finalizers if g == group)
        if owners:
            out.append(_rule(group, [f"{p}/finalizers" for p in owners], [FINALIZERS_VERB]))
    return out


def rules(kinds: Sequence[tuple[str, str]], classes: Sequence[tuple[str, str]] = (), *,
          secrets: bool = True, children: Sequence[tuple[str, str]] = (),
          provisioned: Sequence[tuple[str, str]] = (),
          provider_config_groups: Sequence[str] = (GROUP,)) -> list[Rule]:
    """Cluster-wide rules for ``kinds`` (run), ``classes``, ``children`` and
    ``provisioned`` (by claims), all ``(group, plural)``, and the ProviderConfigs of
    ``provider_config_groups``.

    A resource in several roles gets the union of their verbs (a child or a
    provisioned kind the operator also runs). With ``secrets`` false the Secret rule
    is left out (the operator then gets it from a namespaced Role, see
    :func:`secret_rules`). Leases are never here: they belong in a Role in the
    operator's own namespace (:func:`lease_rules`).
    """
    uses: dict[tuple[str, str], set[str]] = {}
    for use, found in (("kind", kinds), ("provisioned", provisioned),
                       ("children", children)):
        for resource in found:
            if resource != ("", "secrets"):  # Secrets: their own rule (and Role)
                uses.setdefault(resource, set()).add(use)
    out = _merged(uses, finalizers=set(kinds))
    for group in sorted({g for g, _ in classes}):
        out += _rules_on(group, sorted(p for g, p in classes if g == group), "class")
    for group in sorted(set(provider_config_groups)):
        out += _rules_on(group, ["providerconfigs"], "providerconfigs")
    out += _rules_on("", ["namespaces"], "namespaces")
    out += _rules_on("", ["events"], "events")
    if secrets:
        out += secret_rules()
    return out


def secret_rules() -> list[Rule]:
    """Rules on Secrets: connection details written, credentials read."""
    return _rules_on("", ["secrets"], "secrets")


def lease_rules() -> list[Rule]:
    """Rules on Leases, for leader election."""
    return _rules_on("coordination.k8s.io", ["leases"], "leases")
