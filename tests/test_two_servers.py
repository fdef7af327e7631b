"""The operator end to end on both servers: the embedded API and a real kube-apiserver.

Every test here runs twice, on ``embedded`` (the embedded API behind its HTTP
face) and on ``real`` (the session's kube-apiserver and etcd, the envtest
tier), and talks to either only through the official client: the operator's
managed lifecycle with its connection Secrets and garbage collection, claims
bound to classes, ProviderConfig usage, leader election on a Lease, and the
informer's list and watch. On the real server each test works in a namespace
of its own and deletes what it made, since the server outlives the test.
"""

from __future__ import annotations

import base64
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import attrs
import pytest
from kubernetes import client as k8s
from serve_helpers import eventually as wait

from lifecycle.core.claims import DEFAULT_RESOURCE_NAMESPACE
from lifecycle.core.kind import PROVIDER_CONFIG_API
from lifecycle.driver.cache import cached_manager
from lifecycle.driver.cluster import KubeCluster, api_client
from lifecycle.driver.informer import Informer, InformerOptions
from lifecycle.driver.manager import Manager, ManagerOptions
from lifecycle.machines.claim import DATABASE_BINDING, DatabaseClaim, DatabaseInstanceClass
from lifecycle.machines.database import DatabaseInstance
from lifecycle.providers.simcloud import DatabaseConnector, SimCloud
from lifecycle.providers.simcloud.scenarios.harness import database_manifest
from lifecycle.runtime.providerconfigs import IN_USE
from lifecycle.testing.claims import claim_manifest, class_manifest

FAST = InformerOptions(resync=600.0, watch_timeout=10.0, inactivity_timeout=3.0,
                       backoff_base=0.05, backoff_cap=0.5)
GROUP, VERSION = DatabaseInstance.api_version.split("/")
KINDS = [DatabaseInstance, DatabaseClaim, DatabaseInstanceClass]


@attrs.define
class Target:
    """One server under test: its admin client and a fresh namespace of the test's own."""

    name: str
    url: str
    client: Any
    namespace: str
    #: Compacts the server's history (etcd's compaction; the embedded API's own).
    compact: Callable[[], int]
    closers: list[Callable[[], None]] = attrs.field(factory=list)

    def custom(self) -> k8s.CustomObjectsApi:
        """The official client's custom objects API."""
        return k8s.CustomObjectsApi(self.client)

    def core(self) -> k8s.CoreV1Api:
        """The official client's core API."""
        return k8s.CoreV1Api(self.client)

    def cluster(self, kinds: list[Any]) -> KubeCluster:
        """A :class:`KubeCluster` on a client of its own (as the operator would have)."""
        return KubeCluster(k8s.ApiClient(self.client.configuration), kinds)

    def instance(self, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        """A DatabaseInstance, or None."""
        try:
            return self.custom().get_namespaced_custom_object(  # type: ignore[no-any-return]
                GROUP, VERSION, namespace or self.namespace, DatabaseInstance.plural, name)
        except k8s.ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def secret(self, name: str, namespace: str | None = None) -> k8s.V1Secret | None:
        """A Secret, or None."""
        try:
            return self.core().read_namespaced_secret(name, namespace or self.namespace)
        except k8s.ApiException as exc:
            if exc.status == 404:
                return None
            raise


def eventually(check: Callable[[], Any], what: str, timeout: float = 60.0) -> Any:
    """:func:`serve_helpers.eventually` with ``what`` second and a short interval."""
    return wait(check, timeout=timeout, what=what, interval=0.1)


def ready(obj: dict[str, Any] | None) -> bool:
    """Whether ``obj`` has condition Ready True."""
    conditions = ((obj or {}).get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def _namespace(client: Any, name: str) -> None:
    try:
        k8s.CoreV1Api(client).create_namespace({"metadata": {"name": name}})
    except k8s.ApiException as exc:
        if exc.status != 409:
            raise


@pytest.fixture(params=["embedded", "real"])
def target(request: pytest.FixtureRequest) -> Iterator[Target]:
    """The server a test runs on, with the CRDs of KINDS and a default ProviderConfig."""
    namespace = f"t-{uuid.uuid4().hex[:8]}"
    if request.param == "embedded":
        from lifecycle.sim.embedded import embedded_cluster

        server = embedded_cluster(KINDS, bookmark_interval=0.5)
        client = api_client(host=server.url)
        found = Target("embedded", server.url, client, namespace, server.api.compact)
        found.closers += [server.stop, server.api.close]
    else:
        from lifecycle.cli.envtest import seed

        real = request.getfixturevalue("real_cluster")
        client = real.api_client()
        seed(client, KINDS)
        found = Target("real", real.url, client, namespace, real.compact)
    _namespace(client, namespace)
    _namespace(client, DEFAULT_RESOURCE_NAMESPACE)
    try:
        yield found
    finally:
        for close in reversed(found.closers):
            close()


def operator(target: Target, cloud: SimCloud, *, claims: bool = False,
             **options: Any) -> Manager:
    """The operator for DatabaseInstance (and the claim binding), as ``lifecycle run`` wires it."""
    kinds = [DatabaseInstance, DatabaseClaim] if claims else [DatabaseInstance]
    pairs: list[tuple[Any, Any]] = [(DatabaseInstance, DatabaseConnector(cloud))]
    if claims:
        pairs.append((DATABASE_BINDING, None))
    opts = ManagerOptions(informer=FAST, backoff_base=0.05, backoff_cap=1.0, qps=200,
                          burst=200, **options)
    return cached_manager(target.cluster(kinds), pairs, opts, secrets=True)


def delete_all(target: Target, manager: Manager, namespace: str | None = None) -> None:
    """Delete every DatabaseInstance of the namespace and wait until the operator let go."""
    where = namespace or target.namespace
    custom = target.custom()
    for item in custom.list_namespaced_custom_object(GROUP, VERSION, where,
                                                     DatabaseInstance.plural)["items"]:
        custom.delete_namespaced_custom_object(GROUP, VERSION, where, DatabaseInstance.plural,
                                               item["metadata"]["name"])
    eventually(lambda: not custom.list_namespaced_custom_object(
        GROUP, VERSION, where, DatabaseInstance.plural)["items"],
        f"every DatabaseInstance in {where} deleted by {target.name}")


# ------------------------------------------------------------- managed lifecycle
def test_instances_converge_change_and_go_with_their_connection_secrets(target: Target) -> None:
    """Six instances reach Ready with their Secrets; a spec change reaches the cloud; deleting
    them deletes the cloud databases, and the garbage collector takes the Secrets."""
    cloud = SimCloud(seed=11, create_polls=1)
    manager = operator(target, cloud, namespace=target.namespace).start()
    custom = target.custom()
    names = [f"db-{i}" for i in range(6)]
    try:
        for name in names:
            custom.create_namespaced_custom_object(GROUP, VERSION, target.namespace,
                                                   DatabaseInstance.plural,
                                                   database_manifest(name, target.namespace))
        eventually(lambda: all(ready(target.instance(n)) for n in names), "all six Ready")
        for name in names:
            secret = target.secret(f"{name}-conn")
            assert secret is not None, name
            assert {"endpoint", "port", "username", "password"} <= set(secret.data or {})
            owners = [o.uid for o in secret.metadata.owner_references or []]
            assert target.instance(name)["metadata"]["uid"] in owners
        custom.patch_namespaced_custom_object(GROUP, VERSION, target.namespace,
                                              DatabaseInstance.plural, "db-0",
                                              {"spec": {"forProvider": {"storageGB": 50}}})
        def resized() -> bool:
            return any(i.get("storage_gb") == 50 for i in cloud.instances().values())

        eventually(resized, "the cloud database resized to 50 GB")
        delete_all(target, manager)
        assert not cloud.instances(), "cloud databases left after deletion"
        eventually(lambda: all(target.secret(f"{n}-conn") is None for n in names),
                   "the connection Secrets collected")
    finally:
        manager.stop()


# ----------------------------------------------------------------------- claims
def test_a_claim_binds_an_instance_of_its_class_and_deleting_it_deletes_the_instance(
        target: Target) -> None:
    """A DatabaseClaim naming a class is bound to a new instance and gets its Secret; with the
    Delete reclaim policy, deleting the claim deletes the instance."""
    cloud = SimCloud(seed=12, create_polls=0)
    manager = operator(target, cloud, claims=True, namespace=target.namespace).start()
    custom = target.custom()
    klass = f"standard-{target.namespace}"
    try:
        custom.create_cluster_custom_object("db.lifecycle.dev", "v1alpha1",
                                            "databaseinstanceclasses",
                                            class_manifest(klass, reclaim_policy="Delete",
                                                           resource_namespace=target.namespace))
        custom.create_namespaced_custom_object(
            "claims.lifecycle.dev", "v1alpha1", target.namespace, "databaseclaims",
            claim_manifest("app", target.namespace, class_name=klass, secret_name="app-db",
                           storageGB=30))

        def bound() -> dict[str, Any] | None:
            claim = custom.get_namespaced_custom_object(
                "claims.lifecycle.dev", "v1alpha1", target.namespace, "databaseclaims", "app")
            status = claim.get("status") or {}
            return claim if ready(claim) and status.get("bindingPhase") == "Bound" else None

        claim = eventually(bound, "the claim Bound and Ready")
        ref = claim["spec"]["resourceRef"]
        assert ready(target.instance(ref["name"], ref["namespace"]))
        secret = eventually(lambda: target.secret("app-db"), "the claim's Secret")
        data = {k: base64.b64decode(v).decode() for k, v in (secret.data or {}).items()}
        assert data.get("password"), "the claim's Secret has no password"
        custom.delete_namespaced_custom_object("claims.lifecycle.dev", "v1alpha1",
                                               target.namespace, "databaseclaims", "app")
        eventually(lambda: target.instance(ref["name"], ref["namespace"]) is None,
                   "the claimed instance deleted with its claim")
        assert not cloud.instances()
    finally:
        try:
            custom.delete_cluster_custom_object("db.lifecycle.dev", "v1alpha1",
                                                "databaseinstanceclasses", klass)
        finally:
            manager.stop()


# ------------------------------------------------------ provider config usage
def test_a_provider_config_in_use_is_held_until_its_users_are_gone(target: Target) -> None:
    """The usage controller counts a config's users and keeps its finalizer while they live;
    the config is deleted once the last user is."""
    cloud = SimCloud(seed=13, create_polls=0)
    config = f"pc-{target.namespace}"
    custom = target.custom()
    group, version = PROVIDER_CONFIG_API.split("/")
    custom.create_cluster_custom_object(group, version, "providerconfigs", {
        "apiVersion": PROVIDER_CONFIG_API, "kind": "ProviderConfig",
        "metadata": {"name": config},
        "spec": {"credentials": {"secretRef": {"name": "default-credentials",
                                               "namespace": "default"}}}})
    options = ManagerOptions(informer=FAST, backoff_base=0.05, backoff_cap=1.0,
                             namespace=target.namespace)
    manager = Manager(target.cluster([DatabaseInstance]),
                      [(DatabaseInstance, DatabaseConnector(cloud))], options).start()

    def read() -> dict[str, Any] | None:
        try:
            return custom.get_cluster_custom_object(  # type: ignore[no-any-return]
                group, version, "providerconfigs", config)
        except k8s.ApiException as exc:
            if exc.status == 404:
                return None
            raise

    try:
        for name in ("a", "b"):
            doc = database_manifest(name, target.namespace)
            doc["spec"]["providerConfigRef"] = {"name": config}
            custom.create_namespaced_custom_object(GROUP, VERSION, target.namespace,
                                                   DatabaseInstance.plural, doc)
        eventually(lambda: ((read() or {}).get("status") or {}).get("users") == 2,
                   "two users counted")
        assert IN_USE in read()["metadata"]["finalizers"]
        custom.delete_cluster_custom_object(group, version, "providerconfigs", config)
        held = eventually(lambda: (c := read()) and c["metadata"].get("deletionTimestamp")
                          and c, "the deletion recorded")
        assert IN_USE in held["metadata"]["finalizers"]
        delete_all(target, manager)
        eventually(lambda: read() is None, "the config deleted after its last user")
    finally:
        manager.stop()


# --------------------------------------------------------------- leader election
def test_a_graceful_stop_hands_the_lease_over_at_once(target: Target) -> None:
    """Two replicas campaign for one Lease; one leads; a graceful stop releases the Lease
    and the other leads far sooner than the lease duration."""
    cloud = SimCloud(seed=14, create_polls=0)
    lease = {"leader_election": True, "lease_duration": 5.0, "renew_deadline": 4.0,
             "retry_period": 0.2, "lease_namespace": target.namespace,
             "namespace": target.namespace}
    first = operator(target, cloud, identity="a", **lease).start()
    second = None
    try:
        assert first.elector is not None and first.elector.wait_leading(10)
        second = operator(target, cloud, identity="b", **lease).start()
        assert second.elector is not None
        held = k8s.CoordinationV1Api(target.client).read_namespaced_lease(
            "lifecycle-operator", target.namespace)
        assert held.spec.holder_identity == "a"
        assert not second.elector.is_leader
        stopped = time.monotonic()
        first.stop()
        assert second.elector.wait_leading(5)
        assert time.monotonic() - stopped < 3.0
        lease_now = k8s.CoordinationV1Api(target.client).read_namespaced_lease(
            "lifecycle-operator", target.namespace)
        assert lease_now.spec.holder_identity == "b"
        assert (lease_now.spec.lease_transitions or 0) >= 1
    finally:
        if second is not None:
            second.stop()
        first.stop()


# --------------------------------------------------------------------- informer
class Recorder:
    """An informer handler recording what it was told."""

    def __init__(self) -> None:
        self.log: list[tuple[str, str]] = []

    def on_add(self, obj: dict[str, Any]) -> None:
        self.log.append(("add", obj["metadata"]["name"]))

    def on_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        self.log.append(("update", new["metadata"]["name"]))

    def on_delete(self, obj: dict[str, Any]) -> None:
        self.log.append(("delete", obj["metadata"]["name"]))

    def on_resync(self, obj: dict[str, Any]) -> None:
        self.log.append(("resync", obj["metadata"]["name"]))


def test_the_informer_lists_then_follows_the_watch(target: Target) -> None:
    """An informer lists what exists, then sees adds, updates and deletes through its watch,
    and its cache ends equal to the server's list."""
    core = target.core()
    core.create_namespaced_config_map(target.namespace, {"metadata": {"name": "before"}})
    source = target.cluster([]).list_watcher("v1", "ConfigMap", namespace=target.namespace)
    recorder = Recorder()
    informer = Informer("configmaps", source, recorder, FAST).start()
    try:
        assert informer.wait_synced(10)
        assert ("add", "before") in recorder.log
        core.create_namespaced_config_map(target.namespace, {"metadata": {"name": "after"}})
        core.patch_namespaced_config_map("before", target.namespace, {"data": {"k": "v"}})
        core.delete_namespaced_config_map("after", target.namespace)
        eventually(lambda: ("delete", "after") in recorder.log, "the delete seen")
        assert ("add", "after") in recorder.log and ("update", "before") in recorder.log

        def same() -> bool:
            listed = core.list_namespaced_config_map(target.namespace).items
            server = {c.metadata.name: c.metadata.resource_version for c in listed}
            cached = {o["metadata"]["name"]: o["metadata"]["resourceVersion"]
                      for o in informer.items()}
            return server == cached

        eventually(same, "the cache equal to the server's list")
    finally:
        informer.stop()


class Gated:
    """A list-watch source that can be cut off: while closed, the open watch ends at its next
    event (which is lost) and new watches fail, as when the network between operator and
    server goes away."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.closed = False
        self.watch_rvs: list[str] = []

    def list(self) -> tuple[list[dict[str, Any]], str]:
        if self.closed:
            raise ConnectionError("cut off")
        return self.inner.list()

    def watch(self, resource_version: str, *, timeout: float,
              inactivity: float) -> Iterator[tuple[str, dict[str, Any]]]:
        if self.closed:
            raise ConnectionError("cut off")
        self.watch_rvs.append(resource_version)
        for event in self.inner.watch(resource_version, timeout=timeout,
                                      inactivity=inactivity):
            if self.closed:
                raise ConnectionError("cut off")
            yield event

    def stop(self) -> None:
        self.inner.stop()


def test_an_informer_cut_off_past_a_compaction_relists_and_misses_nothing(
        target: Target) -> None:
    """An informer cut off from its server while ConfigMaps change and the history is
    compacted comes back to 410 Gone on its old resourceVersion, relists, and ends with the
    server's objects: the change, the addition and the deletion made in the gap included."""
    core = target.core()
    ns = target.namespace
    for name in ("kept", "changed", "gone"):
        core.create_namespaced_config_map(ns, {"metadata": {"name": name}})
    source = Gated(target.cluster([]).list_watcher("v1", "ConfigMap", namespace=ns))
    recorder = Recorder()
    # Only a 410 relists (not a run of errors), so the relist below is the one under test.
    options = attrs.evolve(FAST, relist_after_errors=0)
    informer = Informer("configmaps", source, recorder, options).start()
    try:
        assert informer.wait_synced(10)
        core.create_namespaced_config_map(ns, {"metadata": {"name": "seen"}})
        eventually(lambda: ("add", "seen") in recorder.log, "the watch open")
        source.closed = True
        core.patch_namespaced_config_map("changed", ns, {"data": {"k": "v"}})
        core.delete_namespaced_config_map("gone", ns)
        core.create_namespaced_config_map(ns, {"metadata": {"name": "new"}})
        # The open watch ends at the patch's event, dropped: the informer is cut off.
        eventually(lambda: informer.stats.errors >= 1, "the informer cut off")
        assert ("update", "changed") not in recorder.log
        target.compact()
        source.closed = False
        eventually(lambda: informer.stats.relists_after_gone >= 1, "a relist after 410 Gone")

        def same() -> bool:
            listed = core.list_namespaced_config_map(ns).items
            server = {c.metadata.name: c.metadata.resource_version for c in listed}
            cached = {o["metadata"]["name"]: o["metadata"]["resourceVersion"]
                      for o in informer.items()}
            return server == cached

        eventually(same, "the cache equal to the server's list")
        assert ("delete", "gone") in recorder.log and ("add", "new") in recorder.log
        assert ("update", "changed") in recorder.log
    finally:
        informer.stop()


# ------------------------------------------------------------------ PostgreSQL
@pytest.mark.postgres
def test_a_postgres_role_database_and_grant_converge_and_go(
        target: Target, postgres_server: Any, postgres_admins: Any) -> None:
    """A Role, a Database and a Grant of the role on it reach Ready through the operator with
    the connectors their registrations declare, exist in PostgreSQL, and are dropped when
    deleted."""
    from lifecycle import registry
    from lifecycle.cli import check_connector
    from lifecycle.schema.crds import crds
    from lifecycle.testing.envtest import install

    names = ("Role", "Database", "Grant")
    found = [registry.find(n) for n in names]
    install(target.client, crds([r.kind for r in found]))
    admin = postgres_admins["superuser"]
    config = f"pg-{target.namespace}"
    core, custom = target.core(), target.custom()
    core.create_namespaced_secret(target.namespace, {
        "metadata": {"name": "pg-admin"},
        "stringData": {"username": admin.user, "password": admin.password}})
    pc_group, pc_version = found[0].kind.provider_config_api.split("/")
    custom.create_cluster_custom_object(pc_group, pc_version, "providerconfigs", {
        "apiVersion": found[0].kind.provider_config_api, "kind": "ProviderConfig",
        "metadata": {"name": config},
        "spec": {"host": postgres_server.host, "port": postgres_server.port,
                 "sslmode": "disable", "credentials": {"secretRef": {
                     "name": "pg-admin", "namespace": target.namespace}}}})
    pairs = [(r.kind, check_connector(r.connector, r.name)) for r in found]
    options = ManagerOptions(informer=FAST, backoff_base=0.05, backoff_cap=1.0,
                             namespace=target.namespace)
    manager = cached_manager(target.cluster([r.kind for r in found]), pairs, options,
                             secrets=True).start()
    role = f"two_{target.name}_{uuid.uuid4().hex[:6]}"
    group = found[0].kind.group
    ref = {"providerConfigRef": {"name": config}}
    docs = {
        "roles": {"kind": "Role", "metadata": {
            "name": "app", "annotations": {"lifecycle.dev/external-name": role}},
            "spec": {"forProvider": {"login": True}, **ref,
                     "writeConnectionSecretToRef": {"name": "app-role"}}},
        "databases": {"kind": "Database", "metadata": {
            "name": "appdb", "annotations": {"lifecycle.dev/external-name": f"{role}_db"}},
            "spec": {"forProvider": {}, **ref}},
        "grants": {"kind": "Grant", "metadata": {"name": "connect"},
                   "spec": {"forProvider": {"role": role, "database": f"{role}_db",
                                            "privileges": ["CONNECT"]}, **ref}},
    }

    def get(plural: str, name: str) -> dict[str, Any] | None:
        try:
            return custom.get_namespaced_custom_object(  # type: ignore[no-any-return]
                group, "v1alpha1", target.namespace, plural, name)
        except k8s.ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def exists(sql: str) -> bool:
        with postgres_server.connect() as conn:
            return bool(conn.execute(sql, (role,)).fetchone())

    try:
        for plural, doc in docs.items():
            custom.create_namespaced_custom_object(group, "v1alpha1", target.namespace, plural,
                                                   {"apiVersion": f"{group}/v1alpha1", **doc})
        seen: dict[str, Any] = {}

        def all_ready() -> bool:
            found = {p: get(p, d["metadata"]["name"]) for p, d in docs.items()}
            seen.update({p: ((o or {}).get("status") or {}).get("conditions")
                         for p, o in found.items()})
            return all(ready(o) for o in found.values())

        try:
            eventually(all_ready, "Role, Database and Grant Ready", timeout=90)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\nconditions: {seen}") from None
        assert exists("SELECT 1 FROM pg_roles WHERE rolname = %s")
        assert exists("SELECT 1 FROM pg_database WHERE datname = %s || '_db'")
        assert target.secret("app-role") is not None
        for plural, doc in reversed(list(docs.items())):
            custom.delete_namespaced_custom_object(group, "v1alpha1", target.namespace, plural,
                                                   doc["metadata"]["name"])
        eventually(lambda: all(get(p, d["metadata"]["name"]) is None for p, d in docs.items()),
                   "all three deleted", timeout=90)
        assert not exists("SELECT 1 FROM pg_roles WHERE rolname = %s")
        assert not exists("SELECT 1 FROM pg_database WHERE datname = %s || '_db'")
    finally:
        manager.stop()
        custom.delete_cluster_custom_object(pc_group, pc_version, "providerconfigs", config)
