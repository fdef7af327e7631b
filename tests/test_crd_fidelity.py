"""The generated CRDs declare every field the engine writes.

A bundled kind runs create -> update -> fail -> recover -> delete in the
harness, served from its generated CRD (pruning, defaulting and validation
on). Every body the engine sends to the store is recorded, and no field of
it may be one the CRD's schema would prune. The same run against a CRD with
one status field removed must be caught.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable
from typing import Any

import pytest

from lifecycle.machines.database import DatabaseInstance
from lifecycle.providers.postgres.scenarios.testing import postgres_server  # noqa: F401 (fixture)
from lifecycle.providers.simcloud.scenarios.harness import database_manifest, simulated_environment
from lifecycle.schema.crds import crd
from lifecycle.sim.crds import apply_crd
from lifecycle.sim.schema import unknown_fields

KIND = "DatabaseInstance"
WRITES = ("create", "replace", "replace_status")


def record_pruned(env: Any) -> list[str]:
    """Wrap the store's writes; return the list every would-be-pruned field is added to."""
    pruned: list[str] = []
    api = env.api

    def wrap(verb: str) -> Callable[..., Any]:
        original = getattr(api, verb)

        def recorded(obj: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
            rtype = api.resource_type(obj["apiVersion"], obj["kind"])
            body = obj if verb != "replace_status" else {"status": obj.get("status")}
            if rtype.status_subresource and verb == "replace":
                body = {k: v for k, v in obj.items() if k != "status"}
            pruned.extend(f"{rtype.kind} {verb}: {path}"
                          for path in unknown_fields(body, rtype.schema))
            return original(obj, *args, **kwargs)
        return recorded

    for verb in WRITES:
        setattr(api, verb, wrap(verb))
    original_patch = api.patch

    def patch(api_version: str, kind: str, namespace: Any, name: str, body: dict,
              **kwargs: Any) -> Any:
        rtype = api.resource_type(api_version, kind)
        pruned.extend(f"{kind} patch: {p}" for p in unknown_fields(body, rtype.schema)
                      if p != "metadata" and not p.startswith("metadata."))
        return original_patch(api_version, kind, namespace, name, body, **kwargs)

    api.patch = patch
    return pruned


def lifecycle_run(env: Any, cloud: Any) -> None:
    """create -> update -> fail -> recover -> delete of one DatabaseInstance."""
    env.apply(database_manifest("db"))
    env.run_until_idle()
    assert env.state(KIND, "db") == "ready"
    obj = env.get(KIND, "db")
    obj["spec"]["forProvider"]["storageGB"] = 40
    env.api.replace(obj)
    env.run_until_idle()
    assert env.get(KIND, "db")["status"]["observedGeneration"] == 2
    external = env.get(KIND, "db")["status"]["externalName"]
    cloud.fail_instance(external, "storage exhausted")
    env.reconcile(KIND, "db")
    assert env.state(KIND, "db") == "failed"
    cloud.recover_instance(external)
    env.run_until_idle()
    assert env.state(KIND, "db") == "ready"
    env.delete(KIND, "db")
    env.run_until_idle()
    assert not env.exists(KIND, "db")


def test_nothing_the_engine_writes_is_pruned_by_the_generated_crd() -> None:
    env, cloud = simulated_environment()
    pruned = record_pruned(env)
    stored: list[dict[str, Any]] = []
    original = env.api.replace_status

    def keep(obj: dict[str, Any]) -> Any:
        result = original(obj)
        stored.append(result)
        return result

    env.api.replace_status = keep
    lifecycle_run(env, cloud)
    assert pruned == []
    written = set().union(*(s.get("status", {}) for s in stored))
    # the fields whose loss would break a cluster are among those written and kept
    assert {"externalName", "operationSince", "failure", "conditions", "history",
            "stateSince", "observedGeneration", "state", "phase"} <= written


@pytest.mark.parametrize("field", ["externalName", "operationSince", "failure"])
def test_the_check_catches_a_status_field_missing_from_the_schema(field: str) -> None:
    env, cloud = simulated_environment()
    broken = copy.deepcopy(crd(DatabaseInstance))
    status = broken["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]
    del status["properties"][field]
    apply_crd(env.api, broken)
    assert field not in env.api.resource_type(
        DatabaseInstance.api_version, KIND).schema["properties"]["status"]["properties"]
    pruned = record_pruned(env)
    # a pruned field may also break the run itself; the record is what counts
    with contextlib.suppress(AssertionError, KeyError):
        lifecycle_run(env, cloud)
    assert f"{KIND} replace_status: status.{field}" in pruned


@pytest.mark.postgres
def test_nothing_the_postgres_kinds_write_is_pruned(postgres_server: Any) -> None:  # noqa: F811
    """Role, Database and Grant on the real server: create, update, fail, recover, delete."""
    import uuid

    from lifecycle.providers.postgres.scenarios.testing import manifest, postgres_environment

    server = postgres_server
    server.start()
    env = postgres_environment(server.host, server.port, server.user, server.password,
                               "disable")
    pruned = record_pruned(env)
    tag = uuid.uuid4().hex[:8]
    role, database = f"fid_role_{tag}", f"fid_db_{tag}"
    env.apply(manifest("Role", "r", external_name=role, login=True, connection_limit=3))
    env.apply(manifest("Database", "d", external_name=database))
    env.apply(manifest("Grant", "g", role=role, database=database, privileges=["CONNECT"]))
    env.run_until_idle()
    assert [env.state(k, n) for k, n in (("Role", "r"), ("Database", "d"), ("Grant", "g"))] \
        == ["ready"] * 3
    obj = env.get("Role", "r")
    obj["spec"]["forProvider"]["connectionLimit"] = 5
    env.api.replace(obj)
    env.run_until_idle()
    server.stop()
    try:
        env.enqueue("Role", "r")
        env.advance(5.0)
        # Ready is held through an outage; the failure is written all the same.
        status = env.get("Role", "r")["status"]
        assert status["failure"]["reason"] == "ServerUnavailable" and status["operationSince"]
        assert env.condition("Role", "r", "Synced").status == "False"
    finally:
        server.start()
    env.advance(120.0)
    assert env.state("Role", "r") == "ready"
    for kind, name in (("Grant", "g"), ("Database", "d"), ("Role", "r")):
        env.delete(kind, name)
    env.run_until_idle()
    assert not any(env.exists(k, n) for k, n in (("Role", "r"), ("Database", "d"),
                                                   ("Grant", "g")))
    assert pruned == []
