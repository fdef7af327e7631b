"""The deployment options' limits, the operator container and the kustomize writer, exactly."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import pytest
import yaml

from lifecycle.core.parents import OwnedChild, ParentKind, Version
from lifecycle.driver.manifests import (
    RUN_AS_USER,
    ManifestError,
    Options,
    cluster_rules,
    dump,
    manifests,
    write_kustomize,
)
from lifecycle.machines.database import DatabaseInstance

OK = Options(image="example/operator:1", kind_names=("DatabaseInstance",))
RULE = ("(RFC 1123 label: at most 63 lowercase letters, digits and '-', starting and ending "
        "with a letter or digit)")


@pytest.mark.parametrize(("change", "message"), [
    ({"name": ""}, f"--name '' is not a valid name {RULE}"),
    ({"name": "a" * 64}, f"--name '{'a' * 64}' is not a valid name {RULE}"),
    ({"name": "Op"}, f"--name 'Op' is not a valid name {RULE}"),
    ({"namespace": "-x"}, f"--namespace '-x' is not a valid name {RULE}"),
    ({"watch_namespace": "x_y"}, f"--watch-namespace 'x_y' is not a valid name {RULE}"),
    ({"image": ""}, "--image '' is not a container image reference"),
    ({"image": "a b"}, "--image 'a b' is not a container image reference"),
    ({"image": "a\tb"}, "--image 'a\\tb' is not a container image reference"),
    ({"replicas": True}, "--replicas must be between 0 and 1000, got True"),
    ({"replicas": -1}, "--replicas must be between 0 and 1000, got -1"),
    ({"replicas": 1001}, "--replicas must be between 0 and 1000, got 1001"),
    ({"probe_port": 0}, "the probe port must be 1-65535, got 0"),
    ({"probe_port": 65536}, "the probe port must be 1-65535, got 65536"),
    ({"kind_names": ()}, "no kinds to run"),
])
def test_options_out_of_range_are_refused_in_one_line(change: dict, message: str) -> None:
    with pytest.raises(ManifestError) as refused:
        attrs.evolve(OK, **change).check()
    assert str(refused.value) == message


@pytest.mark.parametrize("change", [
    {"name": "a" * 63}, {"name": "a"}, {"name": "a-1"}, {"namespace": "x9"},
    {"watch_namespace": "team-a"}, {"replicas": 0}, {"replicas": 1000},
    {"probe_port": 1}, {"probe_port": 65535},
])
def test_options_at_their_limits_are_accepted(change: dict) -> None:
    attrs.evolve(OK, **change).check()


def test_the_operator_container_runs_the_kinds_with_leader_election() -> None:
    opts = attrs.evolve(OK, connector="pkg.mod:connector", watch_namespace="team",
                        probe_port=9090, name="op", namespace="ops")
    deployment = next(d for d in manifests([DatabaseInstance], opts) if d["kind"] == "Deployment")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["args"] == [
        "run", "--kinds", "DatabaseInstance", "--leader-elect", "--lease-namespace", "ops",
        "--lease-name", "op", "--probe-address", "0.0.0.0:9090", "--log-json",
        "--journal-key-secret", "ops/op-journal-key",
        "--connector", "pkg.mod:connector", "--namespace", "team"]
    assert container["ports"] == [{"name": "probes", "containerPort": 9090, "protocol": "TCP"}]
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "probes"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "probes"}
    assert container["securityContext"]["runAsUser"] == RUN_AS_USER == 65532
    plain = next(d for d in manifests([DatabaseInstance], OK) if d["kind"] == "Deployment")
    args = plain["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--connector" not in args and args[-2:] == ["--namespace", "lifecycle-system"]
    every = next(d for d in manifests([DatabaseInstance], attrs.evolve(
        OK, cluster_wide_secrets=True)) if d["kind"] == "Deployment")
    assert "--namespace" not in every["spec"]["template"]["spec"]["containers"][0]["args"]


def test_dump_keeps_key_order_block_style_and_no_aliases() -> None:
    shared = {"c": [1]}
    text = dump([{"b": 1, "a": shared, "d": shared}])
    assert text == "b: 1\na:\n  c:\n  - 1\nd:\n  c:\n  - 1\n"
    assert dump([{"x": 1}, {"y": 2}]) == "x: 1\n---\ny: 2\n"


def test_kustomize_writes_one_file_per_object_and_an_index(tmp_path: Path) -> None:
    out = tmp_path / "deep" / "base"
    docs = [{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "op"}},
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"}}]
    paths = write_kustomize(out, docs)
    assert [p.name for p in paths] == ["service-account-op.yaml", "config-map-settings.yaml",
                                       "kustomization.yaml"]
    assert yaml.safe_load((out / "kustomization.yaml").read_text()) == {
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
        "resources": ["service-account-op.yaml", "config-map-settings.yaml"]}
    assert yaml.safe_load((out / "config-map-settings.yaml").read_text()) == docs[1]
    # A second run drops what it no longer writes and leaves other files alone.
    (out / "notes.txt").write_text("mine")
    again = write_kustomize(out, docs[:1])
    assert [p.name for p in again] == ["service-account-op.yaml", "kustomization.yaml"]
    assert sorted(p.name for p in out.iterdir()) == [
        "kustomization.yaml", "notes.txt", "service-account-op.yaml"]
    # An index without resources (written by hand) removes nothing.
    (out / "kustomization.yaml").write_text("apiVersion: kustomize.config.k8s.io/v1beta1\n")
    write_kustomize(out, docs[1:])
    assert (out / "service-account-op.yaml").exists()


def test_two_objects_for_one_file_are_refused(tmp_path: Path) -> None:
    doc = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "same"}}
    with pytest.raises(ManifestError) as refused:
        write_kustomize(tmp_path, [doc, dict(doc)])
    assert str(refused.value) == "two objects would be written to config-map-same.yaml"


def test_cluster_rules_cover_secrets_and_the_kinds_provider_config_groups() -> None:
    other = attrs.evolve(DatabaseInstance, provider_config_api="configs.example/v1")
    granted = cluster_rules([other])
    on = {(group, resource) for rule in granted for group in rule["apiGroups"]
          for resource in rule["resources"]}
    assert ("", "secrets") in on  # by default the Secret rule is cluster-wide
    assert ("configs.example", "providerconfigs") in on
    assert ("lifecycle.dev", "providerconfigs") not in on
    assert ("", "secrets") not in {
        (g, r) for rule in cluster_rules([other], secrets=False)
        for g in rule["apiGroups"] for r in rule["resources"]}


@pytest.mark.parametrize(("api_version", "kind"), [("v1", None), (None, "ConfigMap")])
def test_a_child_without_its_type_cannot_get_rbac(api_version: str | None,
                                                  kind: str | None) -> None:
    child = OwnedChild("settings", lambda parent: {}, api_version=api_version, kind=kind)
    app = ParentKind("apps.example", "App", "apps", (Version("v1"),), (child,))
    with pytest.raises(ManifestError) as refused:
        cluster_rules([app])
    assert str(refused.value) == ("App child 'settings' names no api_version and kind, so its "
                                  "RBAC cannot be generated")


def test_a_watched_namespace_gets_a_labelled_secrets_role_and_binding_there() -> None:
    opts = attrs.evolve(OK, name="op", namespace="ops", watch_namespace="team")
    docs = manifests([DatabaseInstance], opts)
    labels = {"app.kubernetes.io/name": "op", "app.kubernetes.io/component": "operator",
              "app.kubernetes.io/managed-by": "lifecycle"}
    role = next(d for d in docs if d["kind"] == "Role" and d["metadata"]["name"] == "op-secrets")
    assert role["metadata"] == {"name": "op-secrets", "labels": labels, "namespace": "team"}
    assert [r["resources"] for r in role["rules"]] == [["secrets"]]
    binding = next(d for d in docs if d["kind"] == "RoleBinding"
                   and d["metadata"]["name"] == "op-secrets")
    assert binding["metadata"] == {"name": "op-secrets", "labels": labels, "namespace": "team"}
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                  "name": "op-secrets"}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "op", "namespace": "ops"}]
    wide = attrs.evolve(opts, watch_namespace=None, cluster_wide_secrets=True)
    assert not any(d["metadata"]["name"] == "op-secrets" for d in manifests([DatabaseInstance],
                                                                             wide))


def _grants(docs: list[dict[str, Any]], namespace: str, verb: str, secret: str) -> list[str]:
    """The roles bound to the operator that let it ``verb`` Secret ``namespace/secret``."""
    found = []
    for d in docs:
        if d["kind"] not in ("Role", "ClusterRole") or (d["kind"] == "Role" and (
                d["metadata"]["namespace"] != namespace)):
            continue
        for rule in d["rules"]:
            names = rule.get("resourceNames")
            if ("" in rule["apiGroups"] and "secrets" in rule["resources"]
                    and verb in rule["verbs"] and (names is None or secret in names)):
                found.append(f"{d['kind']} {d['metadata']['name']}")
    return found


@pytest.mark.parametrize(("watch_namespace", "cluster_wide", "expected"), [
    (None, False, ["Role op-secrets"]),
    ("team", False, ["Role op-journal-key"]),
    (None, True, ["ClusterRole op"]),
])
def test_the_journal_key_is_granted_once_in_the_operators_namespace(
        watch_namespace: str | None, cluster_wide: bool, expected: list[str]) -> None:
    """Exactly one role lets the operator read and create its journal key: its own Role
    only when no Secrets rule covers the operator's namespace already."""
    opts = attrs.evolve(OK, name="op", namespace="ops", watch_namespace=watch_namespace,
                        cluster_wide_secrets=cluster_wide)
    docs = manifests([DatabaseInstance], opts)
    for verb in ("get", "create"):
        assert _grants(docs, "ops", verb, "op-journal-key") == expected, verb
    own = [d for d in docs if d["metadata"]["name"] == "op-journal-key"]
    assert [d["kind"] for d in own] == (["Role", "RoleBinding"] if watch_namespace else [])
