"""Crash-explorer targets on the simulated cloud: the database kind and the claim kind.

:func:`simcloud_target` exercises a kind whose parameters are the simulated
cloud's database parameters; :func:`claim_target` exercises a claim kind
whose managed resources are such a kind, running the claim reconciler beside
the managed-resource reconciler. The kinds register them as their
``verify_target``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from lifecycle.core import objects
from lifecycle.core.claims import ClaimBinding
from lifecycle.core.conditions import get as get_condition
from lifecycle.core.kind import EXTERNAL_NAME, INTENT, INTENT_MAC, Kind
from lifecycle.core.vocabulary import ConditionTypes
from lifecycle.kube.errors import NotFound
from lifecycle.providers.simcloud import DatabaseConnector, SimCloud
from lifecycle.providers.simcloud.scenarios.harness import database_manifest
from lifecycle.testing import Environment
from lifecycle.testing.claims import (
    CLAIM_NAME,
    CLAIM_NAMESPACE,
    ClaimEnvironment,
    claim_manifest,
    class_manifest,
)
from lifecycle.verify import ExternalSystem, Recorder, Target, TracedReconciler
from lifecycle.verify.explorer import converged_objects

__all__ = [
    "FORGED_INTENT", "OTHER_NAMESPACE", "adoption_target", "claim_target", "forged_journal_target",
    "shared_name_target", "simcloud_target",
]


def _cloud() -> SimCloud:
    """A fresh simulated cloud whose every operation stays pending for a poll or two."""
    return SimCloud(seed=0, create_polls=2, modify_polls=1, delete_polls=1)


def _more_storage(data: dict[str, Any]) -> dict[str, Any]:
    """The manifest with 20 GB more storage: a spec change that needs an external update."""
    changed = json.loads(json.dumps(data))
    params = changed["spec"]["forProvider"]
    params["storageGB"] = int(params.get("storageGB", 20)) + 20
    return changed


def simcloud_target(kind: Kind, label: str = "") -> Target:
    """Exercise a kind backed by the simulated cloud, with asynchronous operations.

    Creating takes two polls, modifying and deleting one each, so every
    phase passes through a pending provider operation.
    """
    def system() -> ExternalSystem:
        cloud = _cloud()
        return ExternalSystem(DatabaseConnector(cloud), lambda: set(cloud.instances()),
                              cloud.creations, password=cloud.password_of)

    def manifest(name: str) -> dict[str, Any]:
        data = database_manifest(name)
        data["apiVersion"], data["kind"] = kind.api_version, kind.kind
        return data


    return Target(kind, system, manifest, _more_storage, label=label)


def claim_target(kind: Kind, binding: ClaimBinding, label: str = "") -> Target:
    """Exercise a claim kind whose managed resources live on the simulated cloud.

    ``binding`` pairs the claim kind with its class kind and managed kind
    (the bundled DatabaseClaim's binding provisions DatabaseInstances).

    One default DatabaseInstanceClass (reclaim policy Delete); the claim
    names no class, so it is defaulted, provisions a DatabaseInstance,
    binds when that is Ready and propagates its connection Secret. The
    update changes the claim's ``storageGB`` (a portable field, applied only
    when provisioning, so the binding must simply survive the new
    generation); the delete releases and deletes the managed resource. Both
    reconcilers, the claim's and the managed resource's, write through the
    crashing API, so every point of either is explored; a restarted engine
    lists and queues claims and managed resources.

    Converged means: after create and update, the claim is Bound with its
    generation observed, exactly one managed resource carries the claim's
    labels, it is the one ``spec.resourceRef`` names, its ``spec.claimRef``
    has the claim's uid, it is Ready, and the claim's Secret exists; after
    delete, the claim and every managed resource provisioned for it are
    gone. External resources are tracked by the managed resources.
    """
    if kind is not binding.claim:
        raise ValueError(f"{kind.kind} is not the claim kind of this binding")
    managed = binding.managed
    base = simcloud_target(managed)

    def extend(env: Environment, api: Any, recorder: Recorder) -> None:
        claims = ClaimEnvironment(env, binding)
        claims.reconciler.api = api
        informed = env.reconcilers[kind.kind]
        informed.inner = TracedReconciler(claims.reconciler, recorder)

    def setup(env: Environment, system: ExternalSystem) -> None:
        env.api.create(class_manifest("standard", default=True, class_kind=binding.resource_class))

    def manifest(name: str) -> dict[str, Any]:
        return claim_manifest(name, secret_name=f"{name}-db", claim_kind=kind, storageGB=30)

    def update(data: dict[str, Any]) -> dict[str, Any]:
        changed = json.loads(json.dumps(data))
        changed["spec"]["storageGB"] = 50
        return changed

    def apply(env: Environment, data: dict[str, Any]) -> None:
        """Change only the fields the user wrote; keep classRef and resourceRef."""
        meta = data["metadata"]
        stored = env.api.get(kind.api_version, kind.kind, meta["namespace"], meta["name"])
        stored["spec"] = {**objects.spec(stored), **data["spec"]}
        env.api.replace(stored)
        env.enqueue(kind.kind, meta["name"], meta["namespace"])

    def converged(env: Environment, manifests: Mapping[str, dict[str, Any]],
                  expect: str) -> list[str]:
        problems: list[str] = []
        resources, _ = env.api.list(managed.api_version, managed.kind)
        for name, data in manifests.items():
            ns = data["metadata"]["namespace"]
            mine = sorted(
                f"{o['metadata']['namespace']}/{o['metadata']['name']}" for o in resources
                if objects.labels(o).get(CLAIM_NAME) == name
                and objects.labels(o).get(CLAIM_NAMESPACE) == ns)
            try:
                claim = env.api.get(kind.api_version, kind.kind, ns, name)
            except NotFound:
                claim = None
            if expect == "gone":
                if claim is not None:
                    problems.append(f"claim {name} was not deleted (state="
                                    f"{(claim.get('status') or {}).get('state')}, finalizers="
                                    f"{claim['metadata'].get('finalizers')})")
                if mine:
                    problems.append(f"managed resource(s) {', '.join(mine)} of claim {name} "
                                    "left behind (reclaim policy Delete)")
                continue
            if claim is None:
                problems.append(f"claim {name} vanished")
                continue
            if len(mine) != 1:
                problems.append(f"{len(mine)} managed resources provisioned for claim {name}: "
                                f"{', '.join(mine) or 'none'}")
            status = objects.status(claim)
            ready = get_condition(status.get("conditions") or [], ConditionTypes.READY)
            if status.get("state") != "bound" or ready is None or ready.status.value != "True":
                problems.append(f"claim {name} did not bind (state={status.get('state')}, "
                                f"Ready={ready.status.value if ready else None} "
                                f"{ready.reason if ready else ''})")
            elif status.get("observedGeneration") != claim["metadata"].get("generation"):
                problems.append(f"claim {name} is Bound but observedGeneration "
                                f"{status.get('observedGeneration')} != generation "
                                f"{claim['metadata'].get('generation')}")
            ref = objects.mapping(objects.spec(claim).get("resourceRef"))
            try:
                resource = env.api.get(managed.api_version, managed.kind,
                                       ref.get("namespace"), ref.get("name", ""))
            except NotFound:
                resource = None
            if resource is None:
                problems.append(f"claim {name} names no existing managed resource ({ref})")
            else:
                claim_ref = objects.mapping(objects.spec(resource).get("claimRef"))
                if claim_ref.get("uid") != claim["metadata"]["uid"]:
                    problems.append(f"managed resource {ref.get('name')} does not point back "
                                    f"at claim {name} (claimRef={claim_ref})")
                if objects.status(resource).get("state") != "ready":
                    problems.append(f"managed resource {ref.get('name')} is not Ready")
            try:
                env.api.get("v1", "Secret", ns, data["spec"]["writeConnectionSecretToRef"]["name"])
            except NotFound:
                problems.append(f"claim {name} has no propagated connection Secret")
        return problems

    return Target(kind, base.system, manifest, update, label=label, objects=("app",),
                  setup=setup, extend=extend, listed=(kind, managed), tracking=managed,
                  apply=apply, converged=converged)


# ---------------------------------------------------------------- tenancy scenarios
#: Where the second claimant of a shared name lives.
OTHER_NAMESPACE = "team-b"


class _CallLog:
    """The mutating calls each object's clients made, for the tenancy targets' checks."""

    def __init__(self, connector: Any) -> None:
        self.connector = connector
        self.calls: list[tuple[str, str, str]] = []  # (namespace/name, operation, external)

    def connect(self, resource: Any, config: Any) -> Any:
        client = self.connector.connect(resource, config)
        for operation in ("create", "update", "delete"):
            setattr(client, operation, self._logged(getattr(client, operation), operation))
        return client

    def _logged(self, call: Any, operation: str) -> Any:
        def logged(resource: Any) -> Any:
            self.calls.append((f"{resource.namespace}/{resource.name}", operation,
                               resource.external_name))
            return call(resource)
        return logged


def _refused(env: Environment, kind: Kind, namespace: str, name: str,
             reasons: tuple[str, ...]) -> list[str]:
    try:
        obj = env.api.get(kind.api_version, kind.kind, namespace, name)
    except NotFound:
        return [f"{name} vanished"]
    failed = get_condition(objects.status(obj).get("conditions") or [], "Failed")
    if failed is None or failed.reason not in reasons:
        return [f"{name} was not refused with {' or '.join(reasons)} "
                f"(state={objects.status(obj).get('state')}, "
                f"Failed={failed.reason if failed else None})"]
    return []


def shared_name_target(kind: Kind, label: str = "") -> Target:
    """Two objects in two namespaces claim one external name; only the first may act.

    ``alpha`` (namespace default) and ``beta`` (namespace team-b) both set the
    external-name annotation ``shared``; beta asks for another size. After
    create and update alpha is Ready and beta refused (``ExternalNameConflict``,
    no finalizer); beta never creates, updates or deletes anything; after the
    delete both objects are gone, with the resource deleted by alpha alone.
    """
    current: dict[str, _CallLog] = {}

    def system() -> ExternalSystem:
        cloud = _cloud()
        current["log"] = _CallLog(DatabaseConnector(cloud))
        return ExternalSystem(current["log"], lambda: set(cloud.instances()), cloud.creations,
                              password=cloud.password_of)

    def setup(env: Environment, system: ExternalSystem) -> None:
        env.namespace(OTHER_NAMESPACE)

    def manifest(name: str) -> dict[str, Any]:
        namespace = "default" if name == "alpha" else OTHER_NAMESPACE
        data = database_manifest(name, namespace, annotations={EXTERNAL_NAME: "shared"},
                                 storageGB=20 if name == "alpha" else 60)
        data["apiVersion"], data["kind"] = kind.api_version, kind.kind
        return data

    def converged(env: Environment, manifests: Mapping[str, dict[str, Any]],
                  expect: str) -> list[str]:
        problems = [f"beta called {op} on {external}" for who, op, external
                    in current["log"].calls if who == f"{OTHER_NAMESPACE}/beta"]
        if expect == "gone":
            return problems + converged_objects(env, kind, manifests, expect)
        problems += converged_objects(env, kind, {"alpha": manifests["alpha"]}, expect)
        problems += _refused(env, kind, OTHER_NAMESPACE, "beta", ("ExternalNameConflict",))
        return problems

    return Target(kind, system, manifest, _more_storage,
                  label=label or f"{kind.kind}/shared-name",
                  objects=("alpha", "beta"), setup=setup, converged=converged,
                  waiting=("beta",))


def adoption_target(kind: Kind, label: str = "") -> Target:
    """An object names an instance someone else created; it must never change it.

    The instance ``precious`` exists before the scenario, unmarked, with its
    own password. ``alpha`` sets the external-name annotation ``precious``
    (without asking to adopt). After create and update alpha is refused
    (``ExternalResourceNotOwned``) and precious is exactly as it was; after
    the delete alpha is gone and precious still exists. No client call that
    changes anything ever names precious.
    """
    current: dict[str, Any] = {}
    password = "their-password-9f2c"

    def system() -> ExternalSystem:
        return _precious(current, password)

    def manifest(name: str) -> dict[str, Any]:
        data = database_manifest(name, annotations={EXTERNAL_NAME: "precious"}, storageGB=40)
        data["apiVersion"], data["kind"] = kind.api_version, kind.kind
        return data

    def converged(env: Environment, manifests: Mapping[str, dict[str, Any]],
                  expect: str) -> list[str]:
        problems = _untouched(current, password)
        if expect == "gone":
            return problems + converged_objects(env, kind, manifests, expect)
        return problems + _refused(env, kind, "default", "alpha", ("ExternalResourceNotOwned",))

    return Target(kind, system, manifest, _more_storage,
                  label=label or f"{kind.kind}/adoption",
                  converged=converged, waiting=("alpha",))


#: The journal entry of the report (issue 28), as a tenant types it.
FORGED_INTENT = ('{"operation":"update","key":"x/update/1/1","generation":1,'
                 '"started":"2020-01-01T00:00:00Z","outcome":"succeeded"}')


def forged_journal_target(kind: Kind, label: str = "") -> Target:
    """A tenant forges the intent journal to take over an instance someone else created.

    ``precious`` exists before the scenario, unmarked, with its own password.
    ``alpha`` is the tenant's legitimate object (its own instance). ``beta``
    names ``precious`` (without asking to adopt) and carries a forged journal
    entry: the report's entry with a made-up MAC. On the update the tenant
    copies alpha's sealed entry and MAC, as stored at that moment, onto beta.
    After create and update alpha is Ready and beta refused
    (``ExternalResourceNotOwned``) with precious exactly as it was; after the
    delete both are gone and precious still exists, untouched. No client call
    that changes anything ever names precious.
    """
    current: dict[str, Any] = {}
    password = "their-password-7d1e"

    def system() -> ExternalSystem:
        return _precious(current, password, with_password=True)

    def manifest(name: str) -> dict[str, Any]:
        annotations = {EXTERNAL_NAME: f"{name}-db"}
        if name == "beta":
            annotations = {EXTERNAL_NAME: "precious", INTENT: FORGED_INTENT,
                           INTENT_MAC: "5a" * 32}
        data = database_manifest(name, annotations=annotations)
        data["apiVersion"], data["kind"] = kind.api_version, kind.kind
        return data

    def apply(env: Environment, data: dict[str, Any]) -> None:
        """Apply; on beta, first copy alpha's entry and MAC as they are stored now."""
        if data["metadata"]["name"] == "beta":
            alpha = env.api.get(kind.api_version, kind.kind, "default", "alpha")
            stored = objects.annotations(alpha)
            copied = {k: stored[k] for k in (INTENT, INTENT_MAC) if k in stored}
            data["metadata"]["annotations"] = {**data["metadata"]["annotations"], **copied}
        env.apply(data)

    def converged(env: Environment, manifests: Mapping[str, dict[str, Any]],
                  expect: str) -> list[str]:
        problems = _untouched(current, password)
        if expect == "gone":
            return problems + converged_objects(env, kind, manifests, expect)
        problems += converged_objects(env, kind, {"alpha": manifests["alpha"]}, expect)
        return problems + _refused(env, kind, "default", "beta", ("ExternalResourceNotOwned",))

    return Target(kind, system, manifest, _more_storage,
                  label=label or f"{kind.kind}/forged-journal", objects=("alpha", "beta"),
                  apply=apply, converged=converged, waiting=("beta",))


def _precious(current: dict[str, Any], password: str, *,
              with_password: bool = False) -> ExternalSystem:
    """A fresh cloud holding ``precious``, an available instance someone else created
    outside the operator; ``current`` gets the cloud, the call log and its description."""
    cloud = _cloud()
    owner = ("AKIDVERIFY", "verify-secret-key")  # whoever created it outside the operator
    cloud.create_instance(owner, "precious", {"engine": "postgres", "storage_gb": 20},
                          password=password)
    for _ in range(2):  # its two creation polls: available
        cloud.describe_instance(owner, "precious")
    current["cloud"], current["log"] = cloud, _CallLog(DatabaseConnector(cloud))
    current["before"] = cloud.instances()["precious"]
    return ExternalSystem(current["log"], lambda: set(cloud.instances()) - {"precious"},
                          cloud.creations, password=cloud.password_of if with_password else None)


def _untouched(current: dict[str, Any], password: str) -> list[str]:
    """What the engine did to ``precious`` (a changing call, a changed description or
    password): nothing, when it kept its hands off someone else's instance."""
    cloud: SimCloud = current["cloud"]
    problems = [f"{who} called {op} on precious" for who, op, external
                in current["log"].calls if external == "precious" and op != "create"]
    now = cloud.instances().get("precious")
    if now != current["before"] or cloud.password_of("precious") != password:
        problems.append(f"precious was changed: {current['before']} -> {now}")
    return problems
