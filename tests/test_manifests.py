"""``lifecycle manifests``, the kustomize base in config/, the Dockerfile and packaging.

The manifests are checked by a structural checker (every object the Deployment
needs exists and is wired to it), their RBAC against the requests the operator
really sends to the embedded API's HTTP face, and the objects the embedded API
serves with ``kubectl apply --dry-run=server``.
"""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import pytest
import yaml
from serve_helpers import REPO, serving

import lifecycle
from lifecycle import registry
from lifecycle.cli import main
from lifecycle.driver import permissions
from lifecycle.driver.cache import cached_manager
from lifecycle.driver.cluster import KubeCluster, api_client
from lifecycle.driver.informer import InformerOptions
from lifecycle.driver.manager import ManagerOptions
from lifecycle.driver.manifests import ManifestError, Options, cluster_rules, dump, manifests
from lifecycle.kube.errors import NotFound
from lifecycle.machines.database import DatabaseInstance
from lifecycle.providers.simcloud import DatabaseConnector, SimCloud
from lifecycle.providers.simcloud.scenarios.harness import database_manifest
from lifecycle.sim import http as sim_http
from lifecycle.sim.embedded import embedded_cluster
from lifecycle.sim.http import APIServerHTTP

#: The command that generates config/ (also in docs/driver.md).
CONFIG_ARGS = ("manifests", "--kinds", "DatabaseInstance")


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def render(capsys: pytest.CaptureFixture[str], *argv: str) -> list[dict[str, Any]]:
    code, out, err = run_cli(capsys, "manifests", *argv)
    assert code == 0, err
    return [d for d in yaml.safe_load_all(out) if d]


# ------------------------------------------------------------ the checker
def _allows(rules: list[dict[str, Any]], group: str, resource: str, verb: str) -> bool:
    return any(group in r["apiGroups"] and resource in r["resources"] and verb in r["verbs"]
               for r in rules)


def check_manifests(docs: list[dict[str, Any]]) -> list[str]:
    """Problems with a manifest set: what the Deployment needs and how it is wired."""
    problems: list[str] = []
    index = {(d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"]): d
             for d in docs}
    deployments = [d for d in docs if d["kind"] == "Deployment"]
    if len(deployments) != 1:
        return [f"expected one Deployment, found {len(deployments)}"]
    deployment = deployments[0]
    ns = deployment["metadata"]["namespace"]
    pod = deployment["spec"]["template"]
    spec = pod["spec"]
    if ("Namespace", None, ns) not in index:
        problems.append(f"no Namespace {ns}")
    sa = spec.get("serviceAccountName")
    if ("ServiceAccount", ns, sa) not in index:
        problems.append(f"no ServiceAccount {ns}/{sa}")
    selector = deployment["spec"]["selector"]["matchLabels"]
    if any(pod["metadata"]["labels"].get(k) != v for k, v in selector.items()):
        problems.append("the Deployment's selector does not select its pods")
    # RBAC: every binding names an existing role and the operator's ServiceAccount.
    bound: dict[str | None, list[dict[str, Any]]] = {}
    for d in docs:
        if d["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        role_kind = d["roleRef"]["kind"]
        where = d["metadata"].get("namespace") if role_kind == "Role" else None
        role = index.get((role_kind, where, d["roleRef"]["name"]))
        if role is None:
            problems.append(f"{d['kind']} {d['metadata']['name']} names a missing role")
            continue
        if {"kind": "ServiceAccount", "name": sa, "namespace": ns} not in d["subjects"]:
            problems.append(f"{d['kind']} {d['metadata']['name']} is not bound to {sa}")
        bound.setdefault(d["metadata"].get("namespace"), []).extend(role["rules"])
    for d in docs:
        for rule in d.get("rules", []):
            for field in ("apiGroups", "resources", "verbs"):
                if "*" in rule[field]:
                    problems.append(f"{d['kind']} {d['metadata']['name']}: wildcard {field}")
    cluster = bound.get(None, [])
    for crd in (d for d in docs if d["kind"] == "CustomResourceDefinition"):
        group, plural = crd["spec"]["group"], crd["spec"]["names"]["plural"]
        if crd["spec"]["names"]["kind"] in ("ProviderConfig",):
            continue
        if not _allows(cluster, group, plural, "get"):
            problems.append(f"no access to {plural}.{group}")
        has_status = "status" in (crd["spec"]["versions"][0].get("subresources") or {})
        if not _allows(cluster, group, plural, "watch"):
            problems.append(f"no watch on {plural}.{group}")
        if has_status:  # a kind the operator writes (a resource class has no status)
            for sub in ("status", "finalizers"):
                if not _allows(cluster, group, f"{plural}/{sub}", "update"):
                    problems.append(f"no update on {plural}/{sub}")
    # Probes on the probe port; the Service selects the pods and targets that port.
    container = spec["containers"][0]
    ports = {p["name"]: p["containerPort"] for p in container.get("ports", [])}
    args = container["args"]
    probe_port = int(args[args.index("--probe-address") + 1].rpartition(":")[2])
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        get = container.get(probe, {}).get("httpGet", {})
        port = ports.get(get.get("port"), get.get("port"))
        if get.get("path") != path or port != probe_port:
            problems.append(f"{probe} is not {path} on port {probe_port}")
    services = [d for d in docs if d["kind"] == "Service" and d["metadata"]["namespace"] == ns]
    if not any(all(pod["metadata"]["labels"].get(k) == v
                   for k, v in s["spec"]["selector"].items())
               and any(ports.get(p["targetPort"], p["targetPort"]) == probe_port
                       for p in s["spec"]["ports"]) for s in services):
        problems.append("no Service selects the pods on the metrics port")
    # Security context: numeric non-root user, read-only root, no capabilities.
    sc = {**spec.get("securityContext", {}), **container.get("securityContext", {})}
    if not isinstance(sc.get("runAsUser"), int) or sc["runAsUser"] == 0:
        problems.append("runAsUser is not a numeric non-root user")
    if sc.get("runAsNonRoot") is not True or sc.get("readOnlyRootFilesystem") is not True:
        problems.append("runAsNonRoot and readOnlyRootFilesystem must be true")
    if sc.get("capabilities", {}).get("drop") != ["ALL"] or sc.get(
            "seccompProfile", {}).get("type") != "RuntimeDefault":
        problems.append("capabilities must drop ALL with the RuntimeDefault seccomp profile")
    # The container's arguments resolve: kinds by registry, the connector by import.
    if args[0] != "run" or "--leader-elect" not in args:
        problems.append("the container does not run a leader-elected operator")
    lease_ns = args[args.index("--lease-namespace") + 1] if "--lease-namespace" in args else ""
    if not _allows(bound.get(lease_ns, []), "coordination.k8s.io", "leases", "update"):
        problems.append(f"no Lease access in the lease namespace {lease_ns!r}")
    kinds = args[args.index("--kinds") + 1:]
    kinds = kinds[:next((i for i, a in enumerate(kinds) if a.startswith("--")), len(kinds))]
    for name in kinds:
        try:
            found = registry.find(name)
        except registry.RegistryError as exc:
            problems.append(f"kind {name} does not resolve: {exc}")
            continue
        if found.connector is None and found.binding is None and "--connector" not in args:
            problems.append(f"kind {name} has no connector and none is passed")
    if "--connector" in args:
        try:
            registry.load(args[args.index("--connector") + 1])
        except registry.RegistryError as exc:
            problems.append(f"the connector does not resolve: {exc}")
    return problems


# ------------------------------------------------------------------ tests
def test_the_generated_set_is_complete_and_passes_the_checker(
        capsys: pytest.CaptureFixture[str]) -> None:
    docs = render(capsys, "--kinds", "DatabaseInstance", "Role", "Database", "Grant",
                  "--name", "pg-operator", "--namespace", "ops", "--image", "example/op:1",
                  "--replicas", "3")
    assert check_manifests(docs) == []
    kinds = [d["kind"] for d in docs]
    assert kinds[0] == "Namespace"
    assert {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
            "Deployment", "Service", "CustomResourceDefinition"} <= set(kinds)
    crd_names = {d["spec"]["names"]["kind"] for d in docs
                 if d["kind"] == "CustomResourceDefinition"}
    assert crd_names == {"ProviderConfig", "DatabaseInstance", "Role", "Database", "Grant"}
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    assert deployment["spec"]["replicas"] == 3
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "example/op:1"
    assert container["args"][:6] == ["run", "--kinds", "DatabaseInstance", "Role", "Database",
                                     "Grant"]
    assert "--connector" not in container["args"]  # each kind brings its own
    assert "0.0.0.0:8080" in container["args"]
    assert container["resources"]["limits"] and container["resources"]["requests"]
    rules = next(d for d in docs if d["kind"] == "ClusterRole")["rules"]
    # By default the operator watches its own namespace and holds Secrets there only.
    assert not any("secrets" in r["resources"] for r in rules)
    assert container["args"][container["args"].index("--namespace") + 1] == "ops"
    secrets = next(d for d in docs if d["kind"] == "Role"
                   and d["metadata"]["name"] == "pg-operator-secrets")
    assert secrets["metadata"]["namespace"] == "ops"
    assert _allows(secrets["rules"], "", "secrets", "create")
    assert not any(r["resources"] == ["leases"] for r in rules)  # own namespace only


def test_the_checker_finds_what_is_missing(capsys: pytest.CaptureFixture[str]) -> None:
    good = render(capsys)
    assert check_manifests(good) == []

    def broken(change: Any) -> list[str]:
        docs = yaml.safe_load_all(dump(good))
        docs = [d for d in docs if d]
        change(docs)
        return check_manifests(docs)

    def deployment(docs: list[dict[str, Any]]) -> dict[str, Any]:
        return next(d for d in docs if d["kind"] == "Deployment")

    def container(docs: list[dict[str, Any]]) -> dict[str, Any]:
        return deployment(docs)["spec"]["template"]["spec"]["containers"][0]

    def drop(kind: str) -> Any:
        return lambda docs: docs.remove(next(d for d in docs if d["kind"] == kind))

    def no_finalizers(docs: list[dict[str, Any]]) -> None:
        role = next(d for d in docs if d["kind"] == "ClusterRole")
        role["rules"] = [r for r in role["rules"]
                         if not r["resources"][0].endswith("/finalizers")]

    def wildcard(docs: list[dict[str, Any]]) -> None:
        next(d for d in docs if d["kind"] == "ClusterRole")["rules"][0]["verbs"] = ["*"]

    cases = {
        "ServiceAccount": drop("ServiceAccount"),
        "Service": drop("Service"),
        "a missing role": drop("ClusterRole"),
        "Lease": drop("Role"),
        "finalizers": no_finalizers,
        "wildcard": wildcard,
        "runAsUser": lambda docs: [c.pop("runAsUser", None) for c in (
            container(docs)["securityContext"],
            deployment(docs)["spec"]["template"]["spec"]["securityContext"])],
        "readinessProbe": lambda docs: container(docs)["readinessProbe"]["httpGet"].update(
            port=9999),
        "does not resolve": lambda docs: container(docs)["args"].insert(2, "NoSuchKind"),
        "connector does not resolve": lambda docs: container(docs)["args"].extend(
            ["--connector", "no.such.module:x"]),
    }
    for expected, change in cases.items():
        problems = broken(change)
        assert any(expected in p for p in problems), (expected, problems)


def test_a_watched_namespace_gets_secrets_there_only(capsys: pytest.CaptureFixture[str]) -> None:
    docs = render(capsys, "--watch-namespace", "apps", "--kinds", "DatabaseInstance",
                  "DatabaseInstanceClass")
    assert check_manifests(docs) == []
    cluster = next(d for d in docs if d["kind"] == "ClusterRole")["rules"]
    assert not any("secrets" in r["resources"] for r in cluster)
    role = next(d for d in docs if d["kind"] == "Role" and d["metadata"]["namespace"] == "apps")
    assert role["rules"] == [{"apiGroups": [""], "resources": ["secrets"],
                              "verbs": ["create", "delete", "get", "list", "update", "watch"]}]
    # The class is read, never written, and is not run.
    assert _allows(cluster, "db.lifecycle.dev", "databaseinstanceclasses", "list")
    assert not _allows(cluster, "db.lifecycle.dev", "databaseinstanceclasses", "update")
    container = next(d for d in docs if d["kind"] == "Deployment")[
        "spec"]["template"]["spec"]["containers"][0]
    assert "DatabaseInstanceClass" not in container["args"]
    assert container["args"][-2:] == ["--namespace", "apps"]


def test_secrets_are_never_cluster_wide_unless_asked_for(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 28: the default RBAC granted Secrets in every namespace."""
    for argv in ((), ("--watch-namespace", "apps")):
        docs = render(capsys, "--kinds", "DatabaseInstance", *argv)
        assert check_manifests(docs) == []
        for doc in docs:
            if doc["kind"] == "ClusterRole":
                assert not any("secrets" in r["resources"] for r in doc["rules"]), argv
        watched = argv[1] if argv else "lifecycle-system"
        roles = [d for d in docs if d["kind"] == "Role" and d["metadata"]["name"] ==
                 "lifecycle-operator-secrets"]
        assert [r["metadata"]["namespace"] for r in roles] == [watched]
        bindings = [d for d in docs if d["kind"] == "RoleBinding" and d["metadata"]["name"] ==
                    "lifecycle-operator-secrets"]
        assert [b["metadata"]["namespace"] for b in bindings] == [watched]
        container = next(d for d in docs if d["kind"] == "Deployment")[
            "spec"]["template"]["spec"]["containers"][0]
        assert container["args"][-2:] == ["--namespace", watched]
    docs = render(capsys, "--kinds", "DatabaseInstance", "--cluster-wide-secrets")
    assert check_manifests(docs) == []
    cluster = next(d for d in docs if d["kind"] == "ClusterRole")["rules"]
    assert _allows(cluster, "", "secrets", "create")
    assert not any(d["metadata"]["name"] == "lifecycle-operator-secrets" for d in docs)
    container = next(d for d in docs if d["kind"] == "Deployment")[
        "spec"]["template"]["spec"]["containers"][0]
    assert "--namespace" not in container["args"]
    code, out, err = run_cli(capsys, "manifests", "--kinds", "DatabaseInstance",
                             "--cluster-wide-secrets", "--watch-namespace", "apps")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, err
    assert "exclude each other" in err


def test_yaml_has_no_anchors_and_options_are_range_checked(
        capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "manifests", "--kinds", "DatabaseInstance", "Role")
    assert code == 0 and not re.search(r"[&*]id\d", out)
    for argv, message in [
        (("--replicas", "-1"), "--replicas must be between 0 and 1000"),
        (("--name", "Op_1"), "--name 'Op_1' is not a valid name"),
        (("--namespace", "x" * 64), "is not a valid name"),
        (("--watch-namespace=apps-",), "--watch-namespace 'apps-' is not a valid name"),
        (("--image", "a b"), "is not a container image reference"),
        (("--connector", "no.such.module:x"), "cannot import"),
        (("--kinds", "DatabaseInstance", "DatabaseInstance"), "listed twice"),
    ]:
        code, out, err = run_cli(capsys, "manifests", *argv)
        assert code == 2 and message in err and "Traceback" not in err, (argv, err)
        assert err.count("\n") == 1 and out == ""


def test_config_is_the_generated_kustomize_base(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, *CONFIG_ARGS, "--kustomize", str(tmp_path))
    assert code == 0, err
    fresh = {p.name: p.read_text() for p in tmp_path.iterdir()}
    committed = {p.name: p.read_text() for p in (REPO / "config").iterdir()}
    assert committed == fresh, ("config/ is out of date: run `lifecycle "
                                f"{' '.join(CONFIG_ARGS)} --kustomize config/`")
    listed = yaml.safe_load(fresh["kustomization.yaml"])["resources"]
    assert sorted(listed) == sorted(set(fresh) - {"kustomization.yaml"})
    docs = [yaml.safe_load(fresh[name]) for name in listed]
    assert check_manifests(docs) == []
    # A second run with fewer kinds removes the files it no longer writes.
    stale = next(n for n in fresh if n.startswith("custom-resource-definition-databaseinst"))
    assert main(["manifests", "--kinds", "Role", "--kustomize", str(tmp_path)]) == 0
    assert not (tmp_path / stale).exists()


def test_manifests_apply_with_server_side_dry_run(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    docs = render(capsys, "--kinds", "DatabaseInstance", "Role", "Database", "Grant")
    with serving(tmp_path, operator=False) as server:
        served = set()
        for line in server.kubectl("api-resources", "--no-headers").stdout.splitlines():
            fields = line.split()
            served.add((fields[-3], fields[-1]))  # APIVERSION, KIND
        # The embedded API serves no RBAC, apps, ServiceAccount or Service: those are
        # covered by the structural checker only.
        applied = [d for d in docs if (d["apiVersion"], d["kind"]) in served]
        assert {d["kind"] for d in applied} == {"Namespace", "CustomResourceDefinition"}
        result = server.kubectl("apply", "--dry-run=server", "-f", "-", input=dump(applied))
        assert result.stdout.count("(server dry run)") == len(applied), result
        # Nothing was written: the postgresql kinds are still unknown.
        assert server.kubectl("get", "roles.postgresql.lifecycle.dev",
                              check=False).returncode != 0


# ------------------------------------------------------- RBAC from the code
class Recorder:
    """Records (namespace, group, resource, RBAC verb) of each request the HTTP face serves."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seen: list[tuple[str | None, str, str, str]] = []

    def record(self, method: str, path: str) -> None:
        url = urlsplit(path)
        parts = [unquote(p) for p in url.path.split("/") if p]
        query = parse_qs(url.query)
        if parts[:1] == ["api"] and len(parts) >= 3:
            group, rest = "", parts[2:]
        elif parts[:1] == ["apis"] and len(parts) >= 4:
            group, rest = parts[1], parts[3:]
        else:
            return  # discovery, version, OpenAPI: no resource
        namespace = None
        if rest[0] == "namespaces" and len(rest) >= 3:
            namespace, rest = rest[1], rest[2:]
        resource = rest[0] + (f"/{rest[2]}" if len(rest) > 2 else "")
        watch = (query.get("watch") or [""])[-1] in ("true", "1")
        verb = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(
            method, "watch" if watch else ("get" if len(rest) > 1 else "list"))
        with self.lock:
            self.seen.append((namespace, group, resource, verb))

    def verbs(self) -> set[tuple[str, str, str]]:
        with self.lock:
            return {(g, r, v) for _, g, r, v in self.seen}


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> Recorder:
    found = Recorder()
    original = sim_http._Handler._dispatch

    def dispatch(handler: Any, method: str) -> None:
        found.record(method, handler.path)
        original(handler, method)

    monkeypatch.setattr(sim_http._Handler, "_dispatch", dispatch)
    return found


@pytest.fixture
def server() -> Iterator[APIServerHTTP]:
    srv = embedded_cluster([DatabaseInstance], bookmark_interval=0.5)
    yield srv
    srv.stop()
    srv.api.close()


def test_each_client_call_sends_the_verbs_the_table_declares(
        server: APIServerHTTP, recorder: Recorder) -> None:
    cluster = KubeCluster(api_client(host=server.url), [DatabaseInstance])
    api, kind = DatabaseInstance.api_version, DatabaseInstance.kind
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s",
                                                                 "namespace": "default"}}
    created: dict[str, Any] = {}

    def watch_once() -> None:
        watcher = cluster.list_watcher(api, kind, "default")
        _, version = watcher.list()
        for _ in watcher.watch(version, timeout=1, inactivity=2):
            pass

    calls = {
        "create": lambda: created.update(
            obj=cluster.create(database_manifest("one", "default"))),
        "get": lambda: cluster.get(api, kind, "default", "one"),
        "replace": lambda: created.update(obj=cluster.replace(created["obj"])),
        "replace_status": lambda: cluster.replace_status(
            {**created["obj"], "status": {"state": "unclaimed"}}),
        "list": lambda: cluster.list(api, kind),
        "list_watcher": watch_once,
        "delete": lambda: cluster.delete(api, kind, "default", "one"),
        "record_event": lambda: [cluster.record_event(involved, "Normal", "Seen", "again")
                                 for _ in range(2)],  # the repeat is a patch
    }
    involved = cluster.create(secret)
    assert set(calls) == set(permissions.CALL_VERBS)
    for method, call in calls.items():
        before = len(recorder.seen)
        call()
        sent = {(v, r.partition("/")[2]) for _, _, r, v in recorder.seen[before:]
                if r in ("databaseinstances", "databaseinstances/status", "events")}
        declared = {(verb, sub) for sub, verb in permissions.CALL_VERBS[method]}
        assert sent == declared, (method, sent, declared)


def test_the_operator_sends_only_requests_its_rbac_allows(
        server: APIServerHTTP, recorder: Recorder) -> None:
    docs = manifests([DatabaseInstance], Options(image="x", kind_names=("DatabaseInstance",),
                                                 namespace="ops", cluster_wide_secrets=True))
    cluster_wide = next(d for d in docs if d["kind"] == "ClusterRole")["rules"]
    in_ops = [rule for d in docs if d["kind"] == "Role" and d["metadata"]["namespace"] == "ops"
              for rule in d["rules"]]
    cloud = SimCloud(seed=5, create_polls=1)
    options = ManagerOptions(
        informer=InformerOptions(resync=5.0, watch_timeout=5.0, inactivity_timeout=3.0,
                                 backoff_base=0.05, backoff_cap=0.5),
        backoff_base=0.05, backoff_cap=0.5, leader_election=True, lease_namespace="ops",
        lease_name="lifecycle-operator", lease_duration=2.0, renew_deadline=1.5,
        retry_period=0.25)
    server.api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ops"}})
    # The operator as `lifecycle run` builds it: reads through its informers.
    manager = cached_manager(KubeCluster(api_client(host=server.url), [DatabaseInstance]),
                             [(DatabaseInstance, DatabaseConnector(cloud))], options,
                             secrets=True).start()
    try:
        # The test's own writes go in process: only the operator's requests are recorded.
        server.api.create(database_manifest("orders", "default"))
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            obj = server.api.get(DatabaseInstance.api_version, "DatabaseInstance", "default",
                                 "orders")
            if (obj.get("status") or {}).get("state") == "ready":
                break
            time.sleep(0.1)
        assert (obj.get("status") or {}).get("state") == "ready", obj.get("status")
        server.api.delete(DatabaseInstance.api_version, "DatabaseInstance", "default",
                          "orders")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                server.api.get(DatabaseInstance.api_version, "DatabaseInstance", "default",
                               "orders")
            except NotFound:
                break
            time.sleep(0.1)
        else:
            raise AssertionError("the resource was not deleted")
    finally:
        manager.stop()
    sent = set(recorder.seen)
    verbs = {v for _, _, _, v in sent}
    assert {"get", "list", "watch", "create", "update"} <= verbs  # the cycle really ran
    # It never creates or deletes the kind it runs (only claims and parents would).
    assert not any(r == DatabaseInstance.plural and v in ("create", "delete")
                   for _, _, r, v in sent)
    assert ("ops", "coordination.k8s.io", "leases", "update") in sent
    for namespace, group_, resource, verb in sent:
        allowed = _allows(cluster_wide, group_, resource, verb) or (
            namespace == "ops" and _allows(in_ops, group_, resource, verb))
        assert allowed, (namespace, group_, resource, verb)


def test_rules_follow_the_declared_table() -> None:
    rules = cluster_rules([DatabaseInstance])
    kind_verbs = permissions.verbs_for("kind")
    # A kind the operator only runs is never created or deleted by it.
    assert kind_verbs[""] == ["get", "list", "update", "watch"]
    assert {"apiGroups": ["db.lifecycle.dev"], "resources": ["databaseinstances"],
            "verbs": kind_verbs[""]} in rules
    assert {"apiGroups": ["db.lifecycle.dev"], "resources": ["databaseinstances/status"],
            "verbs": kind_verbs["status"]} in rules
    assert {"apiGroups": ["db.lifecycle.dev"], "resources": ["databaseinstances/finalizers"],
            "verbs": ["update"]} in rules
    # Every verb granted anywhere comes from a method the table says is called.
    for use in permissions.USES:
        for method in permissions.USES[use]:
            assert method in permissions.CALL_VERBS


# ------------------------------------------------------- image, packaging
def test_the_dockerfile_builds_a_non_root_read_only_image() -> None:
    lines = [line.strip() for line in (REPO / "Dockerfile").read_text().splitlines()
             if line.strip() and not line.strip().startswith("#")]
    instructions = [line.split()[0] for line in lines]
    assert instructions[0] == "FROM" and re.match(r"FROM python:3\.11-slim", lines[0])
    users = [line.split()[1] for line in lines if line.startswith("USER")]
    assert users and re.fullmatch(r"[1-9]\d*(:[1-9]\d*)?", users[-1]), users
    assert instructions.index("USER") > instructions.index("RUN")  # installed, then dropped
    assert any("pip install ." in line for line in lines)
    assert 'ENTRYPOINT ["lifecycle"]' in lines and 'CMD ["run"]' in lines
    text = "\n".join(lines)
    assert "PYTHONDONTWRITEBYTECODE=1" in text and "HOME=/tmp" in text
    assert f"USER {65532}:{65532}" in lines
    ignored = (REPO / ".dockerignore").read_text().splitlines()
    assert "*" in ignored  # everything else stays out of the build context
    for needed in ("pyproject.toml", "lifecycle/", "machines/", "providers/"):
        assert f"!{needed}" in ignored


def test_version_and_typing_marker(capsys: pytest.CaptureFixture[str]) -> None:
    from importlib.metadata import version

    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip() == f"lifecycle {version('kube-lifecycle')}"
    assert lifecycle.__version__ == version("kube-lifecycle")
    assert (Path(lifecycle.__file__).parent / "py.typed").is_file()
    done = subprocess.run([sys.executable, "-m", "lifecycle", "--version"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == f"lifecycle {version('kube-lifecycle')}"


# ------------------------------------------------- claims, classes, parents
def test_a_claim_kind_brings_its_class_and_managed_kinds(
        capsys: pytest.CaptureFixture[str]) -> None:
    docs = render(capsys, "--kinds", "DatabaseClaim")
    assert check_manifests(docs) == []
    crd_names = {d["spec"]["names"]["kind"] for d in docs
                 if d["kind"] == "CustomResourceDefinition"}
    assert crd_names == {"ProviderConfig", "DatabaseClaim", "DatabaseInstanceClass",
                         "DatabaseInstance"}
    rules = next(d for d in docs if d["kind"] == "ClusterRole")["rules"]
    # Classes are read and watched, never written.
    assert {"apiGroups": ["db.lifecycle.dev"], "resources": ["databaseinstanceclasses"],
            "verbs": ["get", "list", "watch"]} in rules
    # The claim reconciler creates, binds and deletes the managed kind; nothing creates
    # or deletes the claims it runs.
    for verb in ("create", "update", "delete", "watch"):
        assert _allows(rules, "db.lifecycle.dev", "databaseinstances", verb)
    for verb in ("create", "delete"):
        assert not _allows(rules, "claims.lifecycle.dev", "databaseclaims", verb)
    assert _allows(rules, "claims.lifecycle.dev", "databaseclaims", "update")
    container = next(d for d in docs if d["kind"] == "Deployment")["spec"]["template"][
        "spec"]["containers"][0]
    assert container["args"][:3] == ["run", "--kinds", "DatabaseClaim"]


def test_the_checker_wants_a_watch_on_every_kind(capsys: pytest.CaptureFixture[str]) -> None:
    docs = render(capsys, "--kinds", "DatabaseClaim")
    role = next(d for d in docs if d["kind"] == "ClusterRole")
    for rule in role["rules"]:
        if rule["resources"] == ["databaseinstanceclasses"]:
            rule["verbs"] = ["get", "list"]
    assert check_manifests(docs) == ["no watch on databaseinstanceclasses.db.lifecycle.dev"]


def test_a_parent_kind_gets_rules_on_its_children() -> None:
    from test_driver_claims_e2e import APP

    rules = cluster_rules([APP, DatabaseInstance])
    assert {"apiGroups": [""], "resources": ["configmaps"],
            "verbs": ["create", "get", "list", "update", "watch"]} in rules
    # A child kind the operator runs gets the rules of a run kind and what its parent
    # does to it (create); nothing deletes it but the garbage collector.
    assert {"apiGroups": ["db.lifecycle.dev"], "resources": ["databaseinstances"],
            "verbs": ["create", "get", "list", "update", "watch"]} in rules
    for sub in ("status", "finalizers"):
        assert _allows(rules, "apps.lifecycle.dev", f"databaseapps/{sub}", "update")
    with pytest.raises(ManifestError, match=r"DatabaseInstance .* is not among the kinds"):
        cluster_rules([APP])


def test_what_claims_provision_comes_from_their_binding() -> None:
    from lifecycle.machines.claim import DATABASE_BINDING, DatabaseClaim, DatabaseInstanceClass

    kinds = [DatabaseClaim, DatabaseInstanceClass, DatabaseInstance]
    assert cluster_rules(kinds) == cluster_rules(kinds, bindings=[DATABASE_BINDING])
    with pytest.raises(ManifestError, match=r"^claim kind DatabaseClaim comes without the "
                                            r"ClaimBinding"):
        cluster_rules(kinds, bindings=[])
    with pytest.raises(ManifestError, match=r"DatabaseClaim provisions DatabaseInstance, "
                                            r"which is not among the kinds"):
        cluster_rules([DatabaseClaim, DatabaseInstanceClass])


def test_a_claims_operator_sends_only_requests_its_rbac_allows(recorder: Recorder) -> None:
    from test_driver_claims_e2e import claim_of, eventually, operator, ready

    from lifecycle.core.claims import DEFAULT_RESOURCE_NAMESPACE
    from lifecycle.machines.claim import DatabaseClaim, DatabaseInstanceClass
    from lifecycle.testing.claims import claim_manifest, class_manifest

    docs = manifests([DatabaseClaim, DatabaseInstanceClass, DatabaseInstance],
                     Options(image="x", kind_names=("DatabaseClaim", "DatabaseInstance"),
                             cluster_wide_secrets=True))
    cluster_wide = next(d for d in docs if d["kind"] == "ClusterRole")["rules"]
    srv = embedded_cluster([DatabaseInstance, DatabaseClaim, DatabaseInstanceClass],
                           bookmark_interval=0.5)
    srv.api.create({"apiVersion": "v1", "kind": "Namespace",
                    "metadata": {"name": DEFAULT_RESOURCE_NAMESPACE}})
    manager = operator(srv, SimCloud(seed=6, create_polls=1)).start()
    try:
        # The test's own writes go in process: only the operator's requests are recorded.
        srv.api.create(class_manifest("standard-audit", reclaim_policy="Delete"))
        srv.api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}})
        srv.api.create(claim_manifest("audit", "team-a", class_name="standard-audit",
                                      storageGB=30))
        eventually(lambda: (c := claim_of(srv, "audit")) and ready(c)
                   and c["status"].get("bindingPhase") == "Bound", 40, "claim audit Bound")
        before = len(recorder.seen)
        srv.api.delete(DatabaseClaim.api_version, DatabaseClaim.kind, "team-a", "audit")
        eventually(lambda: claim_of(srv, "audit") is None, 40, "the claim to be gone")
    finally:
        manager.stop()
        srv.stop()
        srv.api.close()
    sent = set(recorder.seen)
    assert len(recorder.seen) > before
    # The claim cycle really ran: classes watched, the instance created and deleted.
    assert ("db.lifecycle.dev", "databaseinstanceclasses", "watch") in recorder.verbs()
    assert {("db.lifecycle.dev", "databaseinstances", v) for v in ("create", "delete")} <= (
        recorder.verbs())
    for namespace, group_, resource, verb in sent:
        assert _allows(cluster_wide, group_, resource, verb), (namespace, group_, resource,
                                                               verb)
