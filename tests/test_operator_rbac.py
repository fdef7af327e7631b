"""The operator as its own ServiceAccount on the real API server, with the generated RBAC.

``lifecycle manifests`` for every registered kind is applied to the real
server (the envtest tier) except its Deployment; the operator then runs as
the Deployment would run it (its arguments, with a kubeconfig holding the
ServiceAccount's token instead of the in-cluster one) and converges an
object of every bundled kind, claims included, then deletes them all. The
server's audit log records every request the ServiceAccount made.

Some code paths need a verb only on a cache miss or a repeat, which a plain
converge-and-delete cycle may never take; the fixture takes each on purpose,
the operator process itself wherever a request from outside can make it:

* a queued key its namespaced store does not hold is read from the server: a
  managed resource labelled for a claim that does not exist queues that claim,
  whose reconcile reads it (``get`` on the claim kind, answered 404);
* a write answered 409 sends the next read to the server: a burst of spec
  changes to a PostgreSQL Role races the operator's status writes (``get`` on the
  PostgreSQL kinds);
* a repeated Event is patched, not created again: a ProviderConfig deleted while
  in use is told DeletionBlocked on every pass, and an ``operation: reconcile``
  annotation asks for a second pass (``patch`` on Events);
* a read before the informer's first list goes to the server: the ProviderConfig
  usage reconciler runs once in process, as the ServiceAccount, on a cache whose
  store has not synced yet (``get`` on ProviderConfigs; the operator reaches this
  when a key is queued before that informer's list completes, a matter of timing).

Least privilege is measured, not assumed: every verb of every rule the
manifests grant is removed in turn, and the real server's RBAC authorizer is
asked (SubjectAccessReview) whether the operator's recorded requests would
still be allowed (every request it made that RBAC let through, whatever the
answer: a 404 or a 409 was authorized first). Each verb must be the only grant
of some request the operator made. ``update`` on ``<kind>/finalizers`` is
checked by the OwnerReferencesPermissionEnforcement admission plugin when an
owner reference blocks deletion, never sent as a request, so the audit log
cannot show it.
"""

from __future__ import annotations

import copy
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s
from serve_helpers import eventually, free_port, kubectl_binary

from lifecycle import registry
from lifecycle.driver.permissions import FINALIZERS_VERB

pytestmark = pytest.mark.postgres

RBAC_KINDS = {"ClusterRole", "Role"}
BINDINGS = {"ClusterRoleBinding", "RoleBinding"}


def all_kinds() -> list[str]:
    """Every registered kind's name."""
    return [r.name for r in registry.registrations()]


def manifests(namespace: str) -> list[dict[str, Any]]:
    """``lifecycle manifests`` for every registered kind, operator in ``namespace``."""
    done = subprocess.run([sys.executable, "-m", "lifecycle", "manifests", "--kinds",
                           *all_kinds(), "--namespace", namespace],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return [d for d in yaml.safe_load_all(done.stdout) if d]


def kubectl(config: Path, *args: str, input: str | None = None,
            check: bool = True) -> subprocess.CompletedProcess[str]:
    """``kubectl --kubeconfig CONFIG ARGS``."""
    done = subprocess.run([kubectl_binary(), "--kubeconfig", str(config), *args], input=input,
                          capture_output=True, text=True, timeout=120, check=False)
    if check:
        assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}"
    return done


def ready(obj: dict[str, Any]) -> bool:
    """Whether ``obj`` has condition Ready True."""
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (obj.get("status") or {}).get("conditions") or [])


def objects(namespace: str, pg: Any, admin: Any) -> list[dict[str, Any]]:
    """One object of every bundled kind (and what they need), all in ``namespace``."""
    sim_config, pg_config = f"{namespace}-sim", f"{namespace}-pg"
    role_name = f"rbac_{namespace.replace('-', '_')}"

    def secret(name: str, data: dict[str, str]) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": name, "namespace": namespace}, "stringData": data}

    def config(name: str, api_version: str, spec: dict[str, Any]) -> dict[str, Any]:
        return {"apiVersion": api_version, "kind": "ProviderConfig",
                "metadata": {"name": name}, "spec": spec}

    pg_api = registry.find("Role").kind.provider_config_api
    sim_api = registry.find("DatabaseInstance").kind.provider_config_api
    ref = {"providerConfigRef": {"name": pg_config}}
    return [
        secret("sim-credentials", {"accessKeyId": "AKIDEXAMPLE", "secretAccessKey": "s3cr3t"}),
        secret("pg-admin", {"username": admin.user, "password": admin.password}),
        config(sim_config, sim_api, {"credentials": {"secretRef": {
            "name": "sim-credentials", "namespace": namespace}}}),
        config(pg_config, pg_api, {"host": pg.host, "port": pg.port, "sslmode": "disable",
                                   "credentials": {"secretRef": {
                                       "name": "pg-admin", "namespace": namespace}}}),
        {"apiVersion": "db.lifecycle.dev/v1alpha1", "kind": "DatabaseInstance",
         "metadata": {"name": "instance", "namespace": namespace},
         "spec": {"forProvider": {"engine": "postgres", "storageGB": 20},
                  "providerConfigRef": {"name": sim_config},
                  "writeConnectionSecretToRef": {"name": "instance-conn"}}},
        {"apiVersion": "db.lifecycle.dev/v1alpha1", "kind": "DatabaseInstanceClass",
         "metadata": {"name": f"{namespace}-class"},
         "specTemplate": {"forProvider": {"engine": "postgres", "storageGB": 20},
                          "providerConfigRef": {"name": sim_config},
                          "reclaimPolicy": "Delete", "resourceNamespace": namespace}},
        {"apiVersion": "claims.lifecycle.dev/v1alpha1", "kind": "DatabaseClaim",
         "metadata": {"name": "claim", "namespace": namespace},
         "spec": {"classRef": {"name": f"{namespace}-class"},
                  "writeConnectionSecretToRef": {"name": "claim-conn"}}},
        {"apiVersion": "postgresql.lifecycle.dev/v1alpha1", "kind": "Role",
         "metadata": {"name": "role", "namespace": namespace,
                      "annotations": {"lifecycle.dev/external-name": role_name}},
         "spec": {"forProvider": {"login": True}, **ref,
                  "writeConnectionSecretToRef": {"name": "role-conn"}}},
        {"apiVersion": "postgresql.lifecycle.dev/v1alpha1", "kind": "Role",
         "metadata": {"name": "reader", "namespace": namespace,
                      "annotations": {"lifecycle.dev/external-name": f"{role_name}_r"}},
         "spec": {"forProvider": {"login": False}, **ref}},
        {"apiVersion": "postgresql.lifecycle.dev/v1alpha1", "kind": "Database",
         "metadata": {"name": "database", "namespace": namespace,
                      "annotations": {"lifecycle.dev/external-name": f"{role_name}_db"}},
         "spec": {"forProvider": {}, **ref}},
        {"apiVersion": "postgresql.lifecycle.dev/v1alpha1", "kind": "Grant",
         "metadata": {"name": "grant", "namespace": namespace},
         "spec": {"forProvider": {"role": role_name, "database": f"{role_name}_db",
                                  "privileges": ["CONNECT"]}, **ref}},
        {"apiVersion": "postgresql.lifecycle.dev/v1alpha1", "kind": "Schema",
         "metadata": {"name": "schema", "namespace": namespace,
                      "annotations": {"lifecycle.dev/external-name": "app"}},
         "spec": {"forProvider": {"database": f"{role_name}_db", "role": role_name}, **ref}},
        {"apiVersion": "postgresql.lifecycle.dev/v1alpha1", "kind": "Extension",
         "metadata": {"name": "extension", "namespace": namespace},
         "spec": {"forProvider": {"extension": "pgcrypto", "database": f"{role_name}_db"},
                  **ref}},
        {"apiVersion": "postgresql.lifecycle.dev/v1alpha1", "kind": "DefaultPrivileges",
         "metadata": {"name": "defaults", "namespace": namespace},
         "spec": {"forProvider": {"role": f"{role_name}_r", "targetRole": role_name,
                                  "database": f"{role_name}_db", "schema": "app",
                                  "objectType": "table", "privileges": ["SELECT"]}, **ref}},
    ]


MANAGED = ("DatabaseInstance", "DatabaseClaim", "Role", "Database", "Grant", "Schema",
           "Extension", "DefaultPrivileges")


@pytest.fixture(scope="module")
def operator_run(real_cluster: Any, postgres_server: Any, postgres_admins: Any,
                 tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The manifests applied, the operator run as its ServiceAccount through create,
    Ready and delete of every bundled kind; what it recorded."""
    namespace = f"ops-{uuid.uuid4().hex[:6]}"
    work = tmp_path_factory.mktemp("rbac")
    admin_config = real_cluster.kubeconfig
    docs = manifests(namespace)
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    applied = [d for d in docs if d["kind"] != "Deployment"]
    kubectl(admin_config, "apply", "-f", "-", input=yaml.safe_dump_all(applied))
    kubectl(admin_config, "wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
    account = deployment["spec"]["template"]["spec"]["serviceAccountName"]
    sa_config = real_cluster.service_account_kubeconfig(work / "sa.kc", namespace, account)
    args = list(deployment["spec"]["template"]["spec"]["containers"][0]["args"])
    probe = args.index("--probe-address")
    port = free_port()
    args[probe + 1] = f"127.0.0.1:{port}"
    _, offset = real_cluster.audit_events()
    log = (work / "operator.log").open("w")
    process = subprocess.Popen([sys.executable, "-m", "lifecycle", *args,
                                "--kubeconfig", str(sa_config), "--backoff-base", "0.2",
                                "--backoff-cap", "5"], stdout=log, stderr=subprocess.STDOUT,
                               env={**os.environ, "POD_NAME": "operator-0"})
    made = objects(namespace, postgres_server, postgres_admins["superuser"])
    result: dict[str, Any] = {"namespace": namespace, "docs": docs, "account": account,
                              "log": work / "operator.log"}
    try:
        kubectl(admin_config, "apply", "-f", "-", input=yaml.safe_dump_all(made))

        seen: dict[str, Any] = {}

        def converged() -> dict[str, bool] | None:
            listed = json.loads(kubectl(admin_config, "get", ",".join(
                _resource(k) for k in MANAGED), "-n", namespace,
                "-o", "json").stdout)["items"]
            state = {f"{i['kind']}/{i['metadata']['name']}": ready(i) for i in listed}
            seen.update({f"{i['kind']}/{i['metadata']['name']}": [
                (c.get("type"), c.get("status"), c.get("reason"), c.get("message"))
                for c in (i.get("status") or {}).get("conditions") or []] for i in listed})
            return state if len(state) >= len(MANAGED) and all(state.values()) else None

        try:
            result["ready"] = eventually(converged, timeout=180, what="every bundled kind "
                                         "Ready under the operator's own ServiceAccount")
        except AssertionError as exc:
            log.flush()
            tail = (work / "operator.log").read_text()[-4000:]
            raise AssertionError(f"{exc}\n{json.dumps(seen, indent=1)}\n--- operator log\n"
                                 f"{tail}") from None
        # A spec change, so update paths are exercised too.
        kubectl(admin_config, "patch", "databaseinstances.db.lifecycle.dev", "instance", "-n",
                namespace, "--type=merge", "-p", '{"spec":{"forProvider":{"storageGB":30}}}')
        user = f"system:serviceaccount:{namespace}:{account}"
        rare_paths(real_cluster, namespace, user, offset, sa_config)
        blocked_twice(real_cluster, f"{namespace}-pg")
        for kind in reversed(MANAGED):
            kubectl(admin_config, "delete", _resource(kind), "--all", "-n",
                    namespace, "--wait=false")

        def emptied() -> bool:
            left = kubectl(admin_config, "get", ",".join(
                _resource(k) for k in MANAGED), "-n", namespace, "-o", "name")
            return not left.stdout.strip()

        eventually(emptied, timeout=180, what="every object deleted by the operator")
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()
    user = f"system:serviceaccount:{namespace}:{account}"
    events, _ = real_cluster.audit_events(since=offset)
    result["requests"] = [e for e in events if e.get("user", {}).get("username") == user]
    yield result


def requested(real_cluster: Any, since: int, user: str, verb: str, group: str,
              resource: str) -> bool:
    """Whether ``user`` sent ``verb`` on ``group``'s ``resource`` (the object, not a
    subresource) since audit log offset ``since``."""
    events, _ = real_cluster.audit_events(since=since)
    for event in events:
        ref = event.get("objectRef") or {}
        if (event.get("user", {}).get("username") == user and event.get("verb") == verb
                and ref.get("apiGroup", "") == group and ref.get("resource") == resource
                and not ref.get("subresource")):
            return True
    return False


class _Quiet:
    """An informer handler that does nothing (the store is all that is used)."""

    def on_add(self, obj: dict[str, Any]) -> None:
        """Ignored."""

    def on_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        """Ignored."""

    def on_delete(self, obj: dict[str, Any]) -> None:
        """Ignored."""

    def on_resync(self, obj: dict[str, Any]) -> None:
        """Ignored."""


def rare_paths(real_cluster: Any, namespace: str, user: str, since: int,
               sa_config: Path) -> None:
    """Take the paths a converge-and-delete cycle may miss (see the module docstring),
    each until the audit log shows the request it needs."""
    from lifecycle.core.claims import CLAIM_NAME, CLAIM_NAMESPACE
    from lifecycle.driver.cache import CachedCluster
    from lifecycle.driver.cluster import KubeCluster, api_client
    from lifecycle.driver.informer import Informer, InformerOptions
    from lifecycle.runtime.providerconfigs import ProviderConfigReconciler
    from lifecycle.schema.crds import is_claim

    admin = real_cluster.kubeconfig
    # A queued claim key the namespaced store does not hold: read from the server (404).
    kubectl(admin, "label", "databaseinstances.db.lifecycle.dev", "instance", "-n", namespace,
            f"{CLAIM_NAME}=ghost", f"{CLAIM_NAMESPACE}={namespace}")
    eventually(lambda: requested(real_cluster, since, user, "get", "claims.lifecycle.dev",
                                 "databaseclaims"),
               timeout=60, what="the claim a managed resource names read from the server")
    # A write answered 409: spec changes race the operator's writes; the retry re-reads.
    custom = k8s.CustomObjectsApi(real_cluster.api_client())

    def race() -> bool:
        for limit in (5, 6) * 10:
            custom.patch_namespaced_custom_object(
                "postgresql.lifecycle.dev", "v1alpha1", namespace, "roles", "reader",
                {"spec": {"forProvider": {"connectionLimit": limit}}})
            time.sleep(0.005)
        return requested(real_cluster, since, user, "get", "postgresql.lifecycle.dev",
                         "roles")

    eventually(race, timeout=120, interval=0.5,
               what="a Role re-read from the server after a write answered 409")
    # A read before the informer's first list: the usage reconciler on a cold cache.
    api_version = registry.find("Role").kind.provider_config_api
    users = [r.kind for r in registry.registrations() if hasattr(r.kind, "machine")
             and not is_claim(r.kind) and r.kind.provider_config_api == api_version]
    inner = KubeCluster(api_client(kubeconfig=str(sa_config)), users)
    cold = CachedCluster(inner)
    unsynced = Informer("providerconfigs", inner.list_watcher(api_version, "ProviderConfig"),
                        _Quiet(), InformerOptions())
    cold.serve_from(api_version, "ProviderConfig", unsynced, complete=True)
    assert not unsynced.synced.is_set()
    result = ProviderConfigReconciler(cold, users, api_version=api_version).reconcile(
        None, f"{namespace}-pg")
    assert result.reason == "InUse", result
    assert requested(real_cluster, since, user, "get", "lifecycle.dev", "providerconfigs")


def blocked_twice(real_cluster: Any, config: str) -> None:
    """Delete ProviderConfig ``config`` while in use and ask for a second pass: the
    operator's DeletionBlocked Event is recorded, then patched (its count) on the repeat."""
    from lifecycle.core.kind import OPERATION

    admin = real_cluster.kubeconfig
    core = k8s.CoreV1Api(real_cluster.api_client())

    def event() -> Any:
        found = core.list_namespaced_event("default", field_selector=(
            f"involvedObject.name={config},reason=DeletionBlocked")).items
        return found[0] if found else None

    kubectl(admin, "delete", "providerconfigs.lifecycle.dev", config, "--wait=false")
    eventually(event, timeout=60, what=f"DeletionBlocked recorded for {config}")
    kubectl(admin, "annotate", "providerconfigs.lifecycle.dev", config,
            f"{OPERATION}=reconcile")
    repeated = eventually(lambda: (e := event()) is not None and (e.count or 0) >= 2 and e,
                          timeout=60, what=f"DeletionBlocked repeated for {config}")
    assert repeated.type == "Warning"


def _resource(kind: str) -> str:
    found = registry.find(kind).kind
    return f"{found.plural}.{found.group}"


def _attributes(event: dict[str, Any]) -> dict[str, Any]:
    ref = event.get("objectRef") or {}
    attributes = {"verb": event["verb"], "group": ref.get("apiGroup", ""),
                  "resource": ref.get("resource", ""), "subresource": ref.get("subresource"),
                  "namespace": ref.get("namespace"), "name": ref.get("name")}
    return {k: v for k, v in attributes.items() if v is not None}


def allowed(client: Any, user: str, groups: list[str], attributes: dict[str, Any]) -> bool:
    """The real server's RBAC answer for ``user`` doing ``attributes`` (SubjectAccessReview)."""
    review = k8s.AuthorizationV1Api(client).create_subject_access_review({
        "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": user, "groups": groups, "resourceAttributes": attributes}})
    return bool(review.status.allowed)


def test_the_operator_converges_every_bundled_kind_as_its_own_service_account(
        operator_run: dict[str, Any]) -> None:
    """Every bundled kind went Ready and was deleted with only the generated RBAC, and
    the server refused none of the operator's requests."""
    assert set(k.split("/")[0] for k in operator_run["ready"]) == set(MANAGED)
    refused = [_attributes(e) for e in operator_run["requests"]
               if (e.get("responseStatus") or {}).get("code") == 403]
    assert not refused, f"requests the generated RBAC refused: {refused}"
    assert operator_run["requests"], "the audit log recorded nothing for the ServiceAccount"
    log = Path(operator_run["log"]).read_text()
    assert "Traceback" not in log, log[-3000:]


def test_every_granted_verb_is_needed(real_cluster: Any,
                                      operator_run: dict[str, Any]) -> None:
    """Removing any one verb of any rule makes some request the operator made fail."""
    client = real_cluster.api_client()
    rbac = k8s.RbacAuthorizationV1Api(client)
    namespace, account = operator_run["namespace"], operator_run["account"]
    user = f"system:serviceaccount:{namespace}:{account}"
    groups = ["system:serviceaccounts", f"system:serviceaccounts:{namespace}",
              "system:authenticated"]
    # Every request RBAC let through counts, whatever the answer (a 404 or a 409 comes
    # after authorization): without the grant it would have been refused.
    seen = {json.dumps(_attributes(e), sort_keys=True) for e in operator_run["requests"]
            if (e.get("responseStatus") or {}).get("code") not in (401, 403)}
    requests = [json.loads(s) for s in sorted(seen)]
    assert _denied_within(client, user, groups, requests, 0.0) == []
    unneeded = []
    for doc in (d for d in operator_run["docs"] if d["kind"] in RBAC_KINDS):
        for index, rule in enumerate(doc["rules"]):
            for verb in rule["verbs"]:
                failing: list[dict[str, Any]] = []
                # Only a request of this verb on this rule's resources can lose its grant.
                affected = [r for r in requests if _matches(rule, verb, [r])]
                if affected:
                    trimmed = copy.deepcopy(doc)
                    remaining = [v for v in rule["verbs"] if v != verb]
                    if remaining:
                        trimmed["rules"][index]["verbs"] = remaining
                    else:
                        del trimmed["rules"][index]
                    _replace(rbac, trimmed)
                    try:
                        failing = _denied_within(client, user, groups, affected, 5.0)
                    finally:
                        _replace(rbac, doc)
                        _denied_within(client, user, groups, affected, 0.0, until_none=True)
                if not failing:
                    unneeded.append(f"{doc['kind']} {doc['metadata']['name']}: {verb} on "
                                    f"{rule.get('apiGroups')} {rule.get('resources')}")
    admission_only = [u for u in unneeded if "/finalizers" in u]
    assert all(u.split(":")[1].strip().startswith(FINALIZERS_VERB) for u in admission_only)
    measured = sorted(set(unneeded) - set(admission_only))
    assert not measured, ("granted but never needed (over-grants to remove from the "
                          "manifests, or paths to exercise):\n" + "\n".join(measured))


def _denied_within(client: Any, user: str, groups: list[str], requests: list[dict[str, Any]],
                   seconds: float, *, until_none: bool = False) -> list[dict[str, Any]]:
    """The requests the server denies, asked until some are (or, with ``until_none``, until
    none are: the restored role is in force) or ``seconds`` pass (the authorizer's cache
    takes a moment to see a changed role)."""
    from concurrent.futures import ThreadPoolExecutor

    deadline = time.monotonic() + max(seconds, 10.0 if until_none else seconds)
    with ThreadPoolExecutor(max_workers=8) as pool:  # the reviews are independent
        while True:
            answers = pool.map(lambda r: allowed(client, user, groups, r), requests)
            denied = [r for r, ok in zip(requests, answers, strict=True) if not ok]
            if (not denied if until_none else denied) or time.monotonic() >= deadline:
                return denied
            time.sleep(0.05)


def _matches(rule: dict[str, Any], verb: str, requests: list[dict[str, Any]]) -> bool:
    """Whether some recorded request is of ``verb`` on one of ``rule``'s resources (only
    those can fail without it; the server's answer decides whether they do)."""
    for r in requests:
        resource = r["resource"] + (f"/{r['subresource']}" if r.get("subresource") else "")
        if r["verb"] == verb and r["group"] in rule.get("apiGroups", []) and (
                resource in rule.get("resources", []) or "*" in rule.get("resources", [])):
            return True
    return False


def _replace(rbac: Any, doc: dict[str, Any]) -> None:
    if doc["kind"] == "ClusterRole":
        rbac.replace_cluster_role(doc["metadata"]["name"], doc)
    else:
        rbac.replace_namespaced_role(doc["metadata"]["name"], doc["metadata"]["namespace"], doc)
