"""Least-privilege RBAC and a Deployment for running the operator in a cluster.

The ClusterRole grants exactly what the reconciler and the driver use: on each
managed kind ``get``/``list``/``watch``/``update`` (finalizers, annotations,
late-initialised spec) and ``update`` on its ``status``; ``get``/``list``/``watch`` on
ProviderConfigs; ``get``/``create``/``update`` on Secrets (connection details, and
reading credentials); ``get`` on Namespaces (ownership and policy
annotations); ``create``/``patch`` on Events. Leases for leader election are
granted by a Role in the operator's own namespace only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lifecycle.core.kind import GROUP, Kind

__all__ = ["manifests"]


def _rule(groups: Sequence[str], resources: Sequence[str], verbs: Sequence[str]) -> dict[str, Any]:
    return {"apiGroups": list(groups), "resources": list(resources), "verbs": list(verbs)}


def cluster_rules(kinds: Sequence[Kind]) -> list[dict[str, Any]]:
    """The ClusterRole rules for managing ``kinds``."""
    by_group: dict[str, list[str]] = {}
    for kind in kinds:
        by_group.setdefault(kind.group, []).append(kind.plural)
    rules = []
    for group, plurals in sorted(by_group.items()):
        rules.append(_rule([group], sorted(plurals), ["get", "list", "watch", "update"]))
        rules.append(_rule([group], sorted(f"{p}/status" for p in plurals), ["get", "update"]))
    rules += [
        _rule([GROUP], ["providerconfigs"], ["get", "list", "watch"]),
        _rule([""], ["secrets"], ["get", "create", "update"]),
        _rule([""], ["namespaces"], ["get"]),
        _rule([""], ["events"], ["create", "patch"]),
    ]
    return rules


def manifests(kinds: Sequence[Kind], kind_specs: Sequence[str], *, image: str,
              namespace: str = "lifecycle-system",
              name: str = "lifecycle-operator", replicas: int = 2,
              connector: str | None = None, metrics_port: int = 8080) -> list[dict[str, Any]]:
    """ServiceAccount, ClusterRole(+Binding), lease Role(+Binding) and a Deployment.

    ``kind_specs`` are the ``MODULE:NAME`` strings the operator is run with.
    """
    labels = {"app.kubernetes.io/name": name, "app.kubernetes.io/component": "operator"}
    subject = [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]
    args = ["run", "--kinds", *kind_specs,
            "--leader-elect", "--lease-namespace", namespace, "--lease-name", name,
            "--probe-address", f"0.0.0.0:{metrics_port}", "--log-json"]
    if connector:
        args += ["--connector", connector]
    container = {
        "name": "operator", "image": image, "args": args,
        "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
        "ports": [{"name": "metrics", "containerPort": metrics_port}],
        "livenessProbe": {"httpGet": {"path": "/healthz", "port": "metrics"},
                          "periodSeconds": 10, "failureThreshold": 3},
        "readinessProbe": {"httpGet": {"path": "/readyz", "port": "metrics"},
                           "periodSeconds": 5},
        "resources": {"requests": {"cpu": "50m", "memory": "64Mi"},
                      "limits": {"memory": "256Mi"}},
        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                            "runAsNonRoot": True, "capabilities": {"drop": ["ALL"]}},
    }
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": {"name": name, "namespace": namespace, "labels": labels}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
         "metadata": {"name": name, "labels": labels}, "rules": cluster_rules(kinds)},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": name, "labels": labels},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                     "name": name}, "subjects": subject},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
         "metadata": {"name": f"{name}-leader-election", "namespace": namespace,
                      "labels": labels},
         "rules": [_rule(["coordination.k8s.io"], ["leases"], ["get", "create", "update"])]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": {"name": f"{name}-leader-election", "namespace": namespace,
                      "labels": labels},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                     "name": f"{name}-leader-election"}, "subjects": subject},
        {"apiVersion": "apps/v1", "kind": "Deployment",
         "metadata": {"name": name, "namespace": namespace, "labels": labels},
         "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                  "template": {"metadata": {"labels": labels}, "spec": {
                      "serviceAccountName": name, "terminationGracePeriodSeconds": 60,
                      "securityContext": {"runAsNonRoot": True,
                                          "seccompProfile": {"type": "RuntimeDefault"}},
                      "containers": [container]}}}},
    ]

