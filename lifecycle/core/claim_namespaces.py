"""Which claims may bind a managed resource of another namespace: only those a class allows.

Nothing a claim names crosses a namespace on the claim's say-so. A claim's
``spec.resourceRef`` in another namespace binds only when a resource class
(cluster-scoped, written by an administrator) carries a
``crossNamespaceBinding`` that names the claim's namespace (or selects it by
its labels) and the resource's namespace; otherwise the claim gets the
terminal :data:`CROSS_NAMESPACE_REFUSED` and nothing is bound or copied. The
resource a claim provisioned for itself (its dynamic name, bound to its uid)
is the claim's own and needs no permission.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from lifecycle.core.errors import TerminalError

__all__ = ["CROSS_NAMESPACE_REFUSED", "CrossNamespaceBinding", "cross_namespace_refusal",
           "first_grant"]

#: Reason of a claim refused because its ``spec.resourceRef`` names another namespace that
#: no class lets the claim's namespace bind.
CROSS_NAMESPACE_REFUSED = "CrossNamespaceRefNotAllowed"


def _names(value: Any, field: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ValueError(f"{field} must be a list of namespace names")
    return tuple(value)


@attrs.frozen
class CrossNamespaceBinding:
    """A class's permission for claims to bind managed resources of another namespace.

    The only way anything crosses a namespace: claims in ``claim_namespaces``,
    or in a namespace whose labels contain every ``claim_selector`` pair (an
    empty selector matches every namespace), may name in ``spec.resourceRef``
    a managed resource in one of ``resource_namespaces`` (default: the
    class's ``resourceNamespace``). Classes are cluster-scoped: only an
    administrator writes them.
    """

    resource_namespaces: tuple[str, ...]
    claim_namespaces: tuple[str, ...] = ()
    claim_selector: Mapping[str, str] | None = None

    @classmethod
    def parse(cls, value: Any, resource_namespace: str) -> CrossNamespaceBinding | None:
        """Read a class's ``crossNamespaceBinding``; ``ValueError`` with one line if malformed."""
        if value is None:
            return None
        if not isinstance(value, Mapping) or set(value) - {
                "resourceNamespaces", "claimNamespaces", "claimNamespaceSelector"}:
            raise ValueError("must be {resourceNamespaces, claimNamespaces, "
                             "claimNamespaceSelector}")
        resources = _names(value.get("resourceNamespaces"), "resourceNamespaces")
        claims = _names(value.get("claimNamespaces"), "claimNamespaces")
        selector = value.get("claimNamespaceSelector")
        labels: Mapping[str, str] | None = None
        if selector is not None:
            if not isinstance(selector, Mapping) or set(selector) - {"matchLabels"}:
                raise ValueError("claimNamespaceSelector must be {matchLabels: {key: value}}")
            wanted = selector.get("matchLabels") or {}
            if not isinstance(wanted, Mapping) or not all(
                    isinstance(k, str) and isinstance(v, str) for k, v in wanted.items()):
                raise ValueError("claimNamespaceSelector.matchLabels must map strings to strings")
            labels = dict(wanted)
        return cls(resources or (resource_namespace,), claims, labels)

    def allows(self, claim_namespace: str, namespace_labels: Mapping[str, str] | None,
               resource_namespace: str) -> bool:
        """Whether a claim in ``claim_namespace`` (its labels, None if unread) may bind there."""
        if resource_namespace not in self.resource_namespaces:
            return False
        if claim_namespace in self.claim_namespaces:
            return True
        return self.claim_selector is not None and namespace_labels is not None and all(
            namespace_labels.get(k) == v for k, v in self.claim_selector.items())

    @property
    def needs_labels(self) -> bool:
        """Whether :meth:`allows` looks at the claim namespace's labels."""
        return self.claim_selector is not None


def first_grant(claim_namespace: str, resource_namespace: str,
                grants: Sequence[tuple[str, CrossNamespaceBinding]],
                namespace_labels: Callable[[], Mapping[str, str] | None]) -> str | None:
    """The first class (by name) of ``grants`` letting ``claim_namespace`` bind there.

    ``grants`` pairs class names with their parsed ``crossNamespaceBinding``;
    ``namespace_labels`` is called (once) only when a grant selects claim
    namespaces by label, and returns None when they cannot be read.
    """
    labels: list[Mapping[str, str] | None] = []
    for name, grant in sorted(grants, key=lambda pair: pair[0]):
        if grant.needs_labels and not labels:
            labels.append(namespace_labels())
        if grant.allows(claim_namespace, labels[0] if labels else None, resource_namespace):
            return name
    return None


def cross_namespace_refusal(claim_namespace: str, ref: tuple[str, str],
                            class_kind: str) -> TerminalError:
    """The terminal error of a claim naming a resource another namespace holds, unallowed.

    It names neither whether the resource exists nor whom it is bound to.
    """
    return TerminalError(
        f"spec.resourceRef names {ref[0]}/{ref[1]}, outside the claim's namespace "
        f"{claim_namespace}; no {class_kind} lets claims in {claim_namespace} bind resources "
        f"in {ref[0]} (crossNamespaceBinding); nothing was bound or copied",
        reason=CROSS_NAMESPACE_REFUSED)
