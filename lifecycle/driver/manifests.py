"""Everything needed to run the operator in a cluster, as Kubernetes objects.

:func:`manifests` returns a complete set: the operator's Namespace and
ServiceAccount; least-privilege RBAC generated from
:mod:`lifecycle.driver.permissions` (the kinds, their ``status`` and ``finalizers``,
resource classes, ProviderConfigs, Namespaces and Events cluster-wide; Secrets only
in the namespace the operator watches, a Role and RoleBinding there: its own
namespace unless ``watch_namespace`` names another, and cluster-wide only when
``cluster_wide_secrets`` asks for an operator of every namespace; the journal key's
Secret in the operator's own namespace, a Role of its own only when the Secrets
rules do not cover that namespace; Leases in the operator's own namespace only); a
Deployment (probes, resources, a restricted securityContext with a numeric user,
leader election); a Service for ``/metrics``; and the CRDs. :func:`dump` renders
YAML without anchors and :func:`write_kustomize` writes a kustomize base.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import yaml

from lifecycle.core.claims import ClaimBinding, ClassKind
from lifecycle.core.errors import LifecycleError
from lifecycle.core.kind import Kind
from lifecycle.core.parents import ParentKind
from lifecycle.core.references import referenced_resources
from lifecycle.driver.permissions import lease_rules, rules, secret_rules
from lifecycle.schema.crds import crds, is_claim, provider_config_apis

__all__ = ["RUN_AS_USER", "ManifestError", "Options", "cluster_rules", "dump", "manifests",
           "registered_bindings",
           "write_kustomize"]

#: The numeric user (and group) the operator runs as; the image's user too.
RUN_AS_USER = 65532

_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


class ManifestError(LifecycleError):
    """An option the manifests cannot be generated with."""


def _dns_label(value: str, what: str) -> str:
    if not value or len(value) > 63 or not _LABEL.match(value):
        raise ManifestError(f"{what} {value!r} is not a valid name (RFC 1123 label: at most "
                            f"63 lowercase letters, digits and '-', starting and ending "
                            f"with a letter or digit)")
    return value


@attrs.frozen
class Options:
    """How the operator is deployed.

    ``kind_names`` are the names ``lifecycle run --kinds`` is given (registered
    names); ``connector`` is passed as ``--connector`` only when set.
    """

    image: str
    kind_names: tuple[str, ...]
    name: str = "lifecycle-operator"
    namespace: str = "lifecycle-system"
    replicas: int = 2
    connector: str | None = None
    watch_namespace: str | None = None
    probe_port: int = 8080
    cluster_wide_secrets: bool = False

    @property
    def watched(self) -> str | None:
        """The one namespace the operator watches (and holds Secrets in); None: every one."""
        if self.cluster_wide_secrets:
            return None
        return self.watch_namespace or self.namespace

    def check(self) -> None:
        """Raise :class:`ManifestError` (one line) for an option out of range."""
        _dns_label(self.name, "--name")
        _dns_label(self.namespace, "--namespace")
        if self.watch_namespace is not None:
            _dns_label(self.watch_namespace, "--watch-namespace")
            if self.cluster_wide_secrets:
                raise ManifestError("--watch-namespace and --cluster-wide-secrets exclude each "
                                    "other: an operator of one namespace needs its Secrets "
                                    "only")
        if not self.image or any(c.isspace() for c in self.image):
            raise ManifestError(f"--image {self.image!r} is not a container image reference")
        if isinstance(self.replicas, bool) or not 0 <= self.replicas <= 1000:
            raise ManifestError(f"--replicas must be between 0 and 1000, got {self.replicas}")
        if not 1 <= self.probe_port <= 65535:
            raise ManifestError(f"the probe port must be 1-65535, got {self.probe_port}")
        if not self.kind_names:
            raise ManifestError("no kinds to run")


def _child_types(kinds: Sequence[Kind | ClassKind | ParentKind]) -> list[tuple[str, str]]:
    """``(group, plural)`` of every child type the parent kinds among ``kinds`` name.

    The plural comes from a kind in ``kinds`` of the same group and name; a
    core-group child's is its lowercased kind plus ``s`` (ConfigMap:
    ``configmaps``). Any other child type must be listed too.
    """
    known = {(k.group, k.kind): k.plural for k in kinds}
    found = []
    for parent in (k for k in kinds if isinstance(k, ParentKind)):
        for child in parent.children:
            if not child.api_version or not child.kind:
                raise ManifestError(f"{parent.kind} child {child.name!r} names no api_version "
                                    f"and kind, so its RBAC cannot be generated")
            group = child.api_version.rpartition("/")[0]
            plural = known.get((group, child.kind)) or (
                child.kind.lower() + "s" if not group else None)
            if plural is None:
                raise ManifestError(f"{parent.kind} child {child.kind} ({child.api_version}) "
                                    f"is not among the kinds; list it too")
            found.append((group, plural))
    return found


def registered_bindings() -> list[ClaimBinding]:
    """The :class:`~lifecycle.core.claims.ClaimBinding` of every registered claim kind."""
    from lifecycle import registry

    try:
        found = registry.registrations()
    except registry.RegistryError:
        return []
    return [r.binding for r in found if isinstance(r.binding, ClaimBinding)]


def _provisioned(kinds: Sequence[Kind | ClassKind | ParentKind],
                 bindings: Sequence[ClaimBinding] | None) -> list[tuple[str, str]]:
    """``(group, plural)`` of the kinds the claim kinds among ``kinds`` provision.

    Each claim kind needs its binding (what it provisions decides who may create
    and delete that kind; None: the registered ones); a binding must name a
    managed kind among ``kinds``.
    """
    if bindings is None:
        bindings = registered_bindings()
    found = []
    for claim in (k for k in kinds if is_claim(k)):
        binding = next((b for b in bindings if (b.claim.group, b.claim.kind)
                        == (claim.group, claim.kind)), None)
        if binding is None:
            raise ManifestError(f"claim kind {claim.kind} comes without the ClaimBinding "
                                f"that says what it provisions, so its RBAC cannot be "
                                f"generated")
        managed = binding.managed
        if not any((k.group, k.plural) == (managed.group, managed.plural) for k in kinds):
            raise ManifestError(f"{claim.kind} provisions {managed.kind}, which is not among "
                                f"the kinds; list it too")
        found.append((managed.group, managed.plural))
    return found


def cluster_rules(kinds: Sequence[Kind | ClassKind | ParentKind], *, secrets: bool = True,
                  bindings: Sequence[ClaimBinding] | None = None) -> list[dict[str, Any]]:
    """The ClusterRole rules for an operator of ``kinds`` (classes are only read).

    A kind the operator runs is read, listed, watched and written (object and
    status), never created or deleted, unless a claim kind among ``kinds``
    provisions it (its binding in ``bindings``, by default the registered ones:
    claims create, bind and delete it) or a parent among ``kinds`` owns it
    (parents create and correct their children; the garbage collector deletes
    them).
    """
    run = [(k.group, k.plural) for k in kinds if not isinstance(k, ClassKind)]
    classes = [(k.group, k.plural) for k in kinds if isinstance(k, ClassKind)]
    classes += referenced_resources(kinds)  # read like classes: get, list, watch
    groups = [api.partition("/")[0] for api in provider_config_apis(kinds)]
    return rules(run, classes, secrets=secrets, children=_child_types(kinds),
                 provisioned=_provisioned(kinds, bindings), provider_config_groups=groups)


def _binding(kind: str, name: str, namespace: str | None, role_kind: str,
             subject: list[dict[str, str]], labels: dict[str, str]) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": labels}
    if namespace is not None:
        meta["namespace"] = namespace
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": meta,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind,
                        "name": name}, "subjects": subject}


def _role(kind: str, name: str, namespace: str | None, rule_list: list[dict[str, Any]],
          labels: dict[str, str]) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": labels}
    if namespace is not None:
        meta["namespace"] = namespace
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": meta,
            "rules": rule_list}


def journal_key_rules(secret: str) -> list[dict[str, Any]]:
    """Rules on the journal key's Secret in the operator's namespace: read it, create it once
    (a create cannot be limited to one name)."""
    return [{"apiGroups": [""], "resources": ["secrets"], "resourceNames": [secret],
             "verbs": ["get"]},
            {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]}]


def _container(opts: Options) -> dict[str, Any]:
    args = ["run", "--kinds", *opts.kind_names,
            "--leader-elect", "--lease-namespace", opts.namespace, "--lease-name", opts.name,
            "--probe-address", f"0.0.0.0:{opts.probe_port}", "--log-json",
            "--journal-key-secret", f"{opts.namespace}/{opts.name}-journal-key"]
    if opts.connector:
        args += ["--connector", opts.connector]
    if opts.watched is not None:
        args += ["--namespace", opts.watched]
    probe = {"path": "/healthz", "port": "probes"}
    return {
        "name": "operator", "image": opts.image, "args": args,
        "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                {"name": "HOME", "value": "/tmp"}],
        "ports": [{"name": "probes", "containerPort": opts.probe_port, "protocol": "TCP"}],
        "livenessProbe": {"httpGet": probe, "initialDelaySeconds": 5, "periodSeconds": 10,
                          "failureThreshold": 3},
        "readinessProbe": {"httpGet": {**probe, "path": "/readyz"}, "periodSeconds": 5},
        "resources": {"requests": {"cpu": "50m", "memory": "96Mi"},
                      "limits": {"cpu": "1", "memory": "384Mi"}},
        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                            "runAsNonRoot": True, "runAsUser": RUN_AS_USER,
                            "runAsGroup": RUN_AS_USER, "capabilities": {"drop": ["ALL"]},
                            "seccompProfile": {"type": "RuntimeDefault"}},
        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
    }


def manifests(kinds: Sequence[Kind | ClassKind | ParentKind], opts: Options, *,
              bindings: Sequence[ClaimBinding] | None = None) -> list[dict[str, Any]]:
    """The Namespace, ServiceAccount, RBAC, Deployment, Service and CRDs, in apply order.

    ``kinds`` are all the kinds the operator serves or reads (resource classes
    included: they get a CRD and read-only rules); ``opts.kind_names`` are the
    ones it runs; ``bindings`` say what each claim kind among ``kinds``
    provisions (default: the registered claim kinds' bindings). Raises
    :class:`ManifestError` for an invalid option.
    """
    opts.check()
    name, namespace = opts.name, opts.namespace
    labels = {"app.kubernetes.io/name": name, "app.kubernetes.io/component": "operator",
              "app.kubernetes.io/managed-by": "lifecycle"}
    subject = [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]
    watched = opts.watched
    rbac = [_role("ClusterRole", name, None,
                  cluster_rules(kinds, secrets=watched is None, bindings=bindings), labels),
            _binding("ClusterRoleBinding", name, None, "ClusterRole", subject, labels)]
    election = f"{name}-leader-election"
    rbac += [_role("Role", election, namespace, lease_rules(), labels),
             _binding("RoleBinding", election, namespace, "Role", subject, labels)]
    if watched is not None:  # Secrets in the watched namespace only
        secrets = f"{name}-secrets"
        rbac += [_role("Role", secrets, watched, secret_rules(), labels),
                 _binding("RoleBinding", secrets, watched, "Role", subject, labels)]
    # The intent journal's key, in the operator's own namespace (docs/reliability.md):
    # its own Role only when no Secrets rule covers that namespace already.
    key = f"{name}-journal-key"
    if watched is not None and watched != namespace:
        rbac += [_role("Role", key, namespace, journal_key_rules(key), labels),
                 _binding("RoleBinding", key, namespace, "Role", subject, labels)]
    deployment = {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {"replicas": opts.replicas, "selector": {"matchLabels": labels},
                 "template": {"metadata": {"labels": labels}, "spec": {
                     "serviceAccountName": name, "terminationGracePeriodSeconds": 60,
                     "securityContext": {"runAsNonRoot": True, "runAsUser": RUN_AS_USER,
                                         "runAsGroup": RUN_AS_USER, "fsGroup": RUN_AS_USER,
                                         "seccompProfile": {"type": "RuntimeDefault"}},
                     "containers": [_container(opts)],
                     "volumes": [{"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}}]}}},
    }
    service = {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": f"{name}-metrics", "namespace": namespace, "labels": labels},
        "spec": {"selector": labels, "ports": [{"name": "metrics", "port": opts.probe_port,
                                                "targetPort": "probes", "protocol": "TCP"}]},
    }
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
        *crds(list(kinds)),
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": {"name": name, "namespace": namespace, "labels": labels}},
        *rbac, deployment, service,
    ]


class _NoAliasDumper(yaml.SafeDumper):
    """A safe dumper that writes repeated objects out in full (no ``&id001`` anchors)."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def dump(docs: Sequence[dict[str, Any]]) -> str:
    """YAML documents, keys in insertion order, without anchors or aliases."""
    return yaml.dump_all(docs, Dumper=_NoAliasDumper, sort_keys=False,
                         default_flow_style=False)


def _file_name(doc: dict[str, Any]) -> str:
    kind = re.sub(r"(?<!^)(?=[A-Z])", "-", doc["kind"]).lower()
    return f"{kind}-{doc['metadata']['name']}.yaml"


def write_kustomize(directory: Path, docs: Sequence[dict[str, Any]]) -> list[Path]:
    """Write ``docs`` one object a file plus a ``kustomization.yaml`` listing them.

    Files this function wrote before and no longer produces are removed; other
    files are left alone. Returns the paths written.
    """
    directory.mkdir(parents=True, exist_ok=True)
    names = []
    written = []
    for doc in docs:
        file_name = _file_name(doc)
        if file_name in names:
            raise ManifestError(f"two objects would be written to {file_name}")
        names.append(file_name)
        path = directory / file_name
        path.write_text(dump([doc]), encoding="utf-8")
        written.append(path)
    kustomization = {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
                     "resources": names}
    index = directory / "kustomization.yaml"
    previous = yaml.safe_load(index.read_text(encoding="utf-8")) if index.exists() else None
    for old in (previous or {}).get("resources", []):
        if old not in names and (directory / old).is_file():
            (directory / old).unlink()
    index.write_text(dump([kustomization]), encoding="utf-8")
    return [*written, index]
