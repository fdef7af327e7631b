"""End to end: claims, classes, parents and managed resources in one operator, official client.

The embedded API serves DatabaseInstance, DatabaseClaim and
DatabaseInstanceClass from their generated CRDs over HTTP on loopback. One
manager runs the managed reconciler and the claim reconciler (with its
watches on the instances and the classes); every object is created, read and
deleted with the official kubernetes client, as a user would.
"""

from __future__ import annotations

import base64
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

from lifecycle.cli.run import configure_logging
from lifecycle.core.claims import (
    CLAIM_NAME,
    CLAIM_NAMESPACE,
    DEFAULT_RESOURCE_NAMESPACE,
    RELEASED,
)
from lifecycle.core.parents import OwnedChild, ParentKind, Version
from lifecycle.driver.cache import cached_manager
from lifecycle.driver.cluster import KubeCluster, api_client
from lifecycle.driver.informer import InformerOptions
from lifecycle.driver.kinds import controller_spec
from lifecycle.driver.manager import Manager, ManagerOptions
from lifecycle.kube.errors import NotFound
from lifecycle.machines.claim import DATABASE_BINDING, DatabaseClaim, DatabaseInstanceClass
from lifecycle.machines.database import DatabaseInstance
from lifecycle.providers.simcloud import DatabaseConnector, SimCloud
from lifecycle.sim.embedded import embedded_cluster
from lifecycle.sim.http import APIServerHTTP
from lifecycle.testing.claims import claim_manifest, class_manifest

FAST = InformerOptions(resync=600.0, watch_timeout=10.0, inactivity_timeout=3.0,
                       backoff_base=0.05, backoff_cap=0.5)
CLAIMS = ("claims.lifecycle.dev", "v1alpha1", "databaseclaims")
CLASSES = ("db.lifecycle.dev", "v1alpha1", "databaseinstanceclasses")
INSTANCES = ("db.lifecycle.dev", "v1alpha1", "databaseinstances")


@pytest.fixture
def server() -> Iterator[APIServerHTTP]:
    srv = embedded_cluster([DatabaseInstance, DatabaseClaim, DatabaseInstanceClass],
                           bookmark_interval=0.5)
    srv.api.create({"apiVersion": "v1", "kind": "Namespace",
                    "metadata": {"name": DEFAULT_RESOURCE_NAMESPACE}})
    yield srv
    srv.stop()
    srv.api.close()


@pytest.fixture
def logs(capsys: pytest.CaptureFixture[str]) -> Iterator[Callable[[], str]]:
    """Everything the operator logs at debug, through the run command's own configuration."""
    configure_logging("debug")
    try:
        yield lambda: capsys.readouterr().err
    finally:
        configure_logging("warning")


def operator(server: APIServerHTTP, cloud: SimCloud) -> Manager:
    cluster = KubeCluster(api_client(host=server.url), [DatabaseInstance, DatabaseClaim])
    opts = ManagerOptions(informer=FAST, backoff_base=0.05, backoff_cap=1.0, qps=200,
                          burst=200)
    return cached_manager(cluster, [(DatabaseInstance, DatabaseConnector(cloud)),
                                    (DATABASE_BINDING, None)], opts, secrets=True)


def custom(server: APIServerHTTP) -> k8s.CustomObjectsApi:
    return k8s.CustomObjectsApi(api_client(host=server.url))


def eventually(check: Callable[[], Any], timeout: float = 30.0, what: str = "") -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what or check}: last {last!r}")


def claim_of(server: APIServerHTTP, name: str) -> dict[str, Any] | None:
    try:
        return custom(server).get_namespaced_custom_object(*CLAIMS[:2], "team-a", CLAIMS[2],
                                                           name)
    except k8s.ApiException as exc:
        if exc.status == 404:
            return None
        raise


def ready(obj: dict[str, Any] | None) -> bool:
    conditions = ((obj or {}).get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def instance(server: APIServerHTTP, ref: dict[str, str]) -> dict[str, Any] | None:
    try:
        return server.api.get(DatabaseInstance.api_version, "DatabaseInstance",
                              ref["namespace"], ref["name"])
    except NotFound:
        return None


def decoded(secret: k8s.V1Secret) -> dict[str, str]:
    return {k: base64.b64decode(v).decode() for k, v in (secret.data or {}).items()}


def bind(server: APIServerHTTP, name: str, reclaim: str) -> tuple[dict[str, Any], dict]:
    """Create a class and a claim naming it; wait for the claim to be Bound and Ready."""
    api = custom(server)
    api.create_cluster_custom_object(*CLASSES, class_manifest(f"standard-{name}",
                                                              reclaim_policy=reclaim))
    server.api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}}
                      ) if not _exists(server, "team-a") else None
    api.create_namespaced_custom_object(*CLAIMS[:2], "team-a", CLAIMS[2], claim_manifest(
        name, "team-a", class_name=f"standard-{name}", storageGB=30))
    claim = eventually(lambda: (c := claim_of(server, name)) and ready(c)
                       and c["status"].get("bindingPhase") == "Bound" and c, 40,
                       f"claim {name} Bound and Ready")
    ref = claim["spec"]["resourceRef"]
    return claim, ref


def _exists(server: APIServerHTTP, namespace: str) -> bool:
    try:
        server.api.get("v1", "Namespace", None, namespace)
    except NotFound:
        return False
    return True


def test_a_claim_binds_gets_its_secret_and_its_deletion_deletes_the_instance(
        server: APIServerHTTP, logs: Callable[[], str]) -> None:
    cloud = SimCloud(seed=11, create_polls=1)
    manager = operator(server, cloud).start()
    try:
        assert manager.wait_synced(10)
        assert sorted(i.name for i in manager.controllers["DatabaseClaim"].informers) == [
            "databaseclaim", "databaseclaim/databaseinstance",
            "databaseclaim/databaseinstanceclass"]
        claim, ref = bind(server, "orders", "Delete")
        assert ref["namespace"] == DEFAULT_RESOURCE_NAMESPACE
        resource = instance(server, ref)
        assert resource is not None
        assert resource["spec"]["claimRef"]["uid"] == claim["metadata"]["uid"]
        assert resource["spec"]["forProvider"]["storageGB"] == 30  # the claim's portable field
        core = k8s.CoreV1Api(api_client(host=server.url))
        source = core.read_namespaced_secret(resource["spec"]["writeConnectionSecretToRef"][
            "name"], ref["namespace"])
        copied = eventually(lambda: _read(core, "orders-connection", "team-a"), 10,
                            "the claim's connection Secret")
        assert decoded(copied) == decoded(source) and "password" in decoded(copied)
        assert copied.metadata.owner_references[0].uid == claim["metadata"]["uid"]
        password = decoded(copied)["password"]
        assert len(cloud.instances()) == 1

        custom(server).delete_namespaced_custom_object(*CLAIMS[:2], "team-a", CLAIMS[2],
                                                       "orders")
        eventually(lambda: claim_of(server, "orders") is None, 40, "the claim to be gone")
        eventually(lambda: instance(server, ref) is None, 40, "the instance to be deleted")
        eventually(lambda: not cloud.instances(), 20, "the cloud database to be deleted")
        assert _read(core, "orders-connection", "team-a") is None
    finally:
        manager.stop()
    text = logs()
    ids = re.findall(r"reconcileID=([0-9a-f]{8})", text)
    assert "controller=databaseclaim" in text and len(set(ids)) > 5
    assert password not in text and "s3cr3t" not in text  # no secret reaches the logs


def test_a_retained_claim_releases_its_instance_and_a_class_change_reaches_waiting_claims(
        server: APIServerHTTP) -> None:
    cloud = SimCloud(seed=12, create_polls=1)
    manager = operator(server, cloud).start()
    try:
        _, ref = bind(server, "ledger", "Retain")
        custom(server).delete_namespaced_custom_object(*CLAIMS[:2], "team-a", CLAIMS[2],
                                                       "ledger")
        eventually(lambda: claim_of(server, "ledger") is None, 40, "the claim to be gone")
        kept = instance(server, ref)
        assert kept is not None and "claimRef" not in kept["spec"]
        assert kept["metadata"]["annotations"][RELEASED] == "team-a/ledger"
        assert len(cloud.instances()) == 1  # the external database is kept

        # A claim naming a class that does not exist yet binds once the class appears:
        # the class watch queues it (its own poll interval is far longer).
        custom(server).create_namespaced_custom_object(*CLAIMS[:2], "team-a", CLAIMS[2],
                                                       claim_manifest("late", "team-a",
                                                                      class_name="later"))
        eventually(lambda: (c := claim_of(server, "late")) and (c.get("status") or {}).get(
            "conditions"), 20, "the late claim's first status")
        assert not ready(claim_of(server, "late"))
        custom(server).create_cluster_custom_object(*CLASSES, class_manifest("later"))
        # Far sooner than the claim's 60 s poll (and no resync within the test).
        eventually(lambda: ready(claim_of(server, "late")), 15, "the late claim Ready")
    finally:
        manager.stop()


def _read(core: k8s.CoreV1Api, name: str, namespace: str) -> k8s.V1Secret | None:
    try:
        return core.read_namespaced_secret(name, namespace)
    except k8s.ApiException as exc:
        if exc.status == 404:
            return None
        raise


def test_lifecycle_run_serves_and_runs_a_claim_kind(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    # The debug log goes to a file: a pipe nobody reads until the end would fill and
    # block the operator (and the embedded API in its process) on a log write.
    log_file = (tmp_path / "operator.log").open("w+")
    proc = subprocess.Popen(
        [sys.executable, "-m", "lifecycle.cli", "run", "--embedded", "--kinds",
         "DatabaseClaim", "DatabaseInstance", "--resync", "5", "--log-level", "debug"],
        stdout=subprocess.PIPE, stderr=log_file, text=True, env=env)
    try:
        assert proc.stdout is not None
        match = re.search(r"(http://127\.0\.0\.1:\d+)", proc.stdout.readline())
        assert match
        host = match.group(1)
        api = k8s.CustomObjectsApi(api_client(host=host))
        core = k8s.CoreV1Api(api_client(host=host))
        # Every kind the claim needs is served from its CRD, the class kind included.
        core.create_namespace({"apiVersion": "v1", "kind": "Namespace",
                              "metadata": {"name": DEFAULT_RESOURCE_NAMESPACE}})
        api.create_cluster_custom_object(*CLASSES, class_manifest("std", default=True))
        api.create_namespaced_custom_object(*CLAIMS[:2], "default", CLAIMS[2],
                                            claim_manifest("web"))
        deadline = time.monotonic() + 40
        claim: dict[str, Any] = {}
        while time.monotonic() < deadline and not ready(claim):
            claim = api.get_namespaced_custom_object(*CLAIMS[:2], "default", CLAIMS[2], "web")
            time.sleep(0.2)
        assert ready(claim), claim.get("status")
        assert claim["spec"]["classRef"] == {"name": "std"}  # defaulted to the class
        assert core.read_namespaced_secret("web-connection", "default").data
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
        log_file.seek(0)
        logs = log_file.read()
        assert "operator started" in logs and "operator stopped" in logs
        assert re.search(r"reconciled: .* controller=databaseclaim object=default/web "
                         r".*reconcileID=[0-9a-f]{8}", logs), logs[-2000:]
        assert "s3cr3t" not in logs
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log_file.close()


# ---------------------------------------------------------------------------
# A parent kind owning a ConfigMap and a DatabaseInstance
# ---------------------------------------------------------------------------


def _settings(app: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": f"{app['metadata']['name']}-settings"},
            "data": {"logLevel": str(app["spec"].get("logLevel", "info"))}}


def _database(app: dict[str, Any]) -> dict[str, Any]:
    name = f"{app['metadata']['name']}-db"
    return {"apiVersion": DatabaseInstance.api_version, "kind": "DatabaseInstance",
            "metadata": {"name": name},
            "spec": {"forProvider": {"engine": "postgres",
                                     "storageGB": app["spec"]["database"]["storageGB"]},
                     "writeConnectionSecretToRef": {"name": f"{name}-conn"}}}


def _up(obj: dict[str, Any]) -> dict[str, Any]:
    spec = dict(obj.get("spec") or {})
    spec["database"] = {"storageGB": spec.pop("dbSize", 20)}
    return {**obj, "spec": spec}


APP = ParentKind(
    group="apps.lifecycle.dev", kind="DatabaseApp", plural="databaseapps",
    versions=(Version("v1alpha1", up=_up), Version("v1beta1")),
    children=(OwnedChild("settings", _settings, compare=("data",), api_version="v1",
                         kind="ConfigMap"),
              OwnedChild("database", _database, api_version=DatabaseInstance.api_version,
                         kind="DatabaseInstance")),
    defaults={"database": {"storageGB": 20}})


def test_a_parent_kind_runs_with_a_watch_on_its_children() -> None:
    srv = embedded_cluster([DatabaseInstance, APP], bookmark_interval=0.5)  # type: ignore[list-item]
    cloud = SimCloud(seed=13, create_polls=1)
    cluster = KubeCluster(api_client(host=srv.url), [DatabaseInstance])
    manager = Manager(cluster, [(DatabaseInstance, DatabaseConnector(cloud)), (APP, None)],
                      ManagerOptions(informer=FAST, backoff_base=0.05, backoff_cap=1.0))
    api = custom(srv)
    try:
        # Only the custom child type is watched; ConfigMaps are polled.
        assert [i.name for i in manager.controllers["DatabaseApp"].informers] == [
            "databaseapp", "databaseapp/databaseinstance"]
        manager.start()
        api.create_namespaced_custom_object(
            "apps.lifecycle.dev", "v1beta1", "default", "databaseapps",
            {"apiVersion": "apps.lifecycle.dev/v1beta1", "kind": "DatabaseApp",
             "metadata": {"name": "shop"}, "spec": {"database": {"storageGB": 40}}})

        def app() -> dict[str, Any]:
            return srv.api.get("apps.lifecycle.dev/v1beta1", "DatabaseApp", "default", "shop")

        eventually(lambda: ready(app()), 30, "the parent Ready")
        first = srv.api.get(DatabaseInstance.api_version, "DatabaseInstance", "default",
                            "shop-db")
        assert first["spec"]["forProvider"]["storageGB"] == 40
        assert first["metadata"]["ownerReferences"][0]["name"] == "shop"
        # Ready polls every 60 s; deleting the child reaches the parent through the watch.
        api.delete_namespaced_custom_object(*INSTANCES[:2], "default", INSTANCES[2], "shop-db")

        def recreated() -> bool:
            try:
                again = srv.api.get(DatabaseInstance.api_version, "DatabaseInstance",
                                    "default", "shop-db")
            except NotFound:
                return False
            return again["metadata"]["uid"] != first["metadata"]["uid"]

        eventually(recreated, 15, "the deleted child to be created again")
    finally:
        manager.stop()
        srv.stop()
        srv.api.close()


# ---------------------------------------------------------------------------
# The key maps of the extra watches
# ---------------------------------------------------------------------------


def test_the_extra_watches_map_changes_to_the_right_keys() -> None:
    spec = controller_spec(None, DATABASE_BINDING, None, ManagerOptions())
    assert (spec.kind, spec.name) == ("DatabaseClaim", "databaseclaim")
    on_instances, on_classes = spec.watches
    assert (on_instances.kind, on_classes.kind) == ("DatabaseInstance", "DatabaseInstanceClass")
    bound = {"metadata": {"name": "i", "namespace": DEFAULT_RESOURCE_NAMESPACE},
             "spec": {"claimRef": {"kind": "DatabaseClaim", "namespace": "team-a",
                                   "name": "orders", "uid": "u"}}}
    provisioning = {"metadata": {"name": "j", "labels": {CLAIM_NAME: "web",
                                                         CLAIM_NAMESPACE: "team-b"}}}
    other_kind = {"metadata": {"name": "k"},
                  "spec": {"claimRef": {"kind": "CacheClaim", "namespace": "x", "name": "y"}}}
    assert list(on_instances.keys(bound, list)) == [("team-a", "orders")]
    assert list(on_instances.keys(provisioning, list)) == [("team-b", "web")]
    assert list(on_instances.keys(other_kind, list)) == []
    claims = [claim_manifest("named", "a", class_name="gold"),
              claim_manifest("other", "a", class_name="silver"),
              claim_manifest("unscheduled", "b", selector={"tier": "gold"}),
              claim_manifest("static", "b", resource=("ns", "db"))]
    assert list(on_classes.keys({"metadata": {"name": "gold"}}, lambda: claims)) == [
        ("a", "named"), ("b", "unscheduled")]

    parent = controller_spec(None, APP, None, ManagerOptions())
    [children] = parent.watches
    child = {"metadata": {"name": "shop-db", "namespace": "default", "ownerReferences": [
        {"apiVersion": "apps.lifecycle.dev/v1beta1", "kind": "DatabaseApp", "name": "shop",
         "uid": "u", "controller": True},
        {"apiVersion": "apps.lifecycle.dev/v1beta1", "kind": "DatabaseApp", "name": "x",
         "uid": "v"}]}}  # not the controller
    assert list(children.keys(child, list)) == [("default", "shop")]
    with pytest.raises(TypeError, match="runs through its ClaimBinding"):
        controller_spec(None, DatabaseClaim, None, ManagerOptions())


def test_one_operator_serves_every_registered_kind_together() -> None:
    """PostgreSQL Role, Database and Grant, DatabaseInstance and DatabaseClaim in one manager."""
    from lifecycle import registry
    from lifecycle.core.claims import ClassKind
    from lifecycle.driver.kinds import served_kinds

    found = [r for r in registry.registrations() if not isinstance(r.kind, ClassKind)]
    targets = [(r.binding, None) if r.binding is not None else (r.kind, r.connector())
               for r in found]
    served = served_kinds([t for t, _ in targets])
    assert {k.kind for k in served} >= {"Role", "Database", "Grant", "DatabaseInstance",
                                        "DatabaseClaim", "DatabaseInstanceClass"}
    srv = embedded_cluster(served, bookmark_interval=0.5)  # type: ignore[arg-type]
    cluster = KubeCluster(api_client(host=srv.url), [])
    manager = Manager(cluster, targets, ManagerOptions(informer=FAST))
    try:
        manager.start()
        assert manager.wait_synced(20) and manager.ready()
        running = {name: [i.name for i in c.informers]
                   for name, c in manager.controllers.items()}
        expected = {
            "DatabaseInstance": ["databaseinstance"],
            "DatabaseClaim": ["databaseclaim", "databaseclaim/databaseinstance",
                              "databaseclaim/databaseinstanceclass"],
            "Role": ["role"], "Database": ["database"], "Grant": ["grant"]}
        # The manager may run controllers of its own besides (the ProviderConfig's).
        assert {name: running.get(name) for name in expected} == expected
    finally:
        manager.stop()
        srv.stop()
        srv.api.close()
