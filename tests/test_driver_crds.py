"""``lifecycle crds``: valid YAML, structural schemas (``lifecycle manifests``: test_manifests).

Claim and class kinds get CRDs of their own, which keep every field the claim
reconciler writes.
"""

from __future__ import annotations

import copy
import io
import json
import logging
import sys
from collections.abc import Iterator

import attrs
import pytest
import yaml

from lifecycle import registry
from lifecycle.cli import main
from lifecycle.cli.run import configure_logging
from lifecycle.core.claims import ReclaimPolicy
from lifecycle.machines.claim import DATABASE_BINDING, DatabaseClaim, DatabaseInstanceClass
from lifecycle.machines.database import DatabaseInstance
from lifecycle.providers.simcloud.scenarios.harness import claim_environment
from lifecycle.schema.crds import check_crd, check_structural, crd, schema_for_type
from lifecycle.sim.schema import prune, unknown_fields, validate
from lifecycle.testing.claims import claim_manifest, class_manifest


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_lifecycle_crds_prints_valid_structural_crds(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "crds")
    assert code == 0
    docs = list(yaml.safe_load_all(out))
    assert [d["metadata"]["name"] for d in docs] == [
        "providerconfigs.lifecycle.dev", "databaseinstances.db.lifecycle.dev"]
    for doc in docs:
        assert check_crd(doc) == []
    spec = docs[1]["spec"]
    assert spec["scope"] == "Namespaced" and docs[0]["spec"]["scope"] == "Cluster"
    version = spec["versions"][0]
    assert version["subresources"] == {"status": {}}
    columns = version["additionalPrinterColumns"]
    assert [c["name"] for c in columns if not c.get("priority")] == [
        "Ready", "Synced", "State", "External-Name", "Age"]
    assert [c["name"] for c in columns if c.get("priority")] == ["Phase"]
    assert spec["names"]["shortNames"] == ["dbi"] and "managed" in spec["names"]["categories"]
    schema = version["schema"]["openAPIV3Schema"]
    params = schema["properties"]["spec"]["properties"]["forProvider"]["properties"]
    assert params["storageGB"]["type"] == "integer" and params["version"]["nullable"] is True
    status = schema["properties"]["status"]["properties"]
    assert status["state"]["enum"] == list(DatabaseInstance.machine.table().states)
    assert {"conditions", "observedGeneration", "phase", "history", "externalName",
            "operationSince", "failure", "atProvider", "stateSince"} <= set(status)
    assert status["atProvider"]["x-kubernetes-preserve-unknown-fields"] is True
    assert set(status["failure"]["properties"]) == {"operation", "reason", "severity",
                                                    "generation"}


def test_the_checker_rejects_non_structural_schemas() -> None:
    good = crd(DatabaseInstance)
    assert check_crd(good) == []
    schema = good["spec"]["versions"][0]["schema"]["openAPIV3Schema"]

    untyped = copy.deepcopy(schema)
    del untyped["properties"]["spec"]["properties"]["deletionPolicy"]["type"]
    assert any("type: Required" in p for p in check_structural(untyped))

    junctor = copy.deepcopy(schema)
    junctor["properties"]["spec"]["anyOf"] = [
        {"properties": {"undeclared": {"type": "string"}}}]
    problems = check_structural(junctor)
    assert any("outside the logical junctor" in p for p in problems)
    assert any("type: must not be set inside" in p for p in problems)

    meta = copy.deepcopy(schema)
    meta["properties"]["metadata"] = {"type": "object",
                                      "properties": {"labels": {"type": "object"}}}
    assert any("metadata" in p for p in check_structural(meta))

    both = copy.deepcopy(schema)
    both["properties"]["spec"]["additionalProperties"] = {"type": "string"}
    assert any("mutually exclusive" in p for p in check_structural(both))

    ref = copy.deepcopy(schema)
    ref["properties"]["spec"]["$ref"] = "#/definitions/x"
    assert any("$ref" in p for p in check_structural(ref))

    broken = copy.deepcopy(good)
    broken["metadata"]["name"] = "wrong"
    broken["spec"]["versions"][0]["storage"] = False
    problems = check_crd(broken)
    assert any("metadata.name" in p for p in problems)
    assert any("storage version" in p for p in problems)
    assert check_crd("not a mapping") == ["document: must be a mapping"]


@attrs.define
class Inner:
    name: str


@attrs.define
class Params:
    tags: dict[str, str]
    ports: list[int]
    inner: Inner
    ratio: float = 0.5
    extra: object = None


def test_schemas_follow_python_types() -> None:
    schema = schema_for_type(Params)
    props = schema["properties"]
    assert schema["required"] == ["tags", "ports", "inner"]
    assert props["tags"] == {"type": "object", "additionalProperties": {"type": "string"}}
    assert props["ports"]["items"]["type"] == "integer"
    assert props["inner"]["properties"]["name"] == {"type": "string"}
    assert props["ratio"] == {"type": "number", "default": 0.5}
    assert props["extra"] == {"x-kubernetes-preserve-unknown-fields": True}
    assert check_structural(schema) == []
    with pytest.raises(TypeError):
        schema_for_type(complex)


def test_bad_kind_arguments_are_one_line_errors(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(
        capsys, "crds", "--kinds", "lifecycle.machines.database:DatabaseInstanceMachine")
    assert code == 2 and "is not a kind" in err and "Traceback" not in err
    code, _, err = run_cli(capsys, "run", "--kinds", "no.such.module:X")
    assert code == 2 and "cannot import" in err


# ------------------------------------------------------------ claims and classes
def test_claim_and_class_kinds_get_crds_of_their_own(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "crds", "--kinds", "DatabaseClaim", "DatabaseInstanceClass")
    assert code == 0
    docs = {d["spec"]["names"]["kind"]: d for d in yaml.safe_load_all(out)}
    assert set(docs) == {"ProviderConfig", "DatabaseClaim", "DatabaseInstanceClass"}
    for doc in docs.values():
        assert check_crd(doc) == []

    claim = docs["DatabaseClaim"]["spec"]
    assert claim["scope"] == "Namespaced"
    assert claim["names"]["categories"] == ["claim", "lifecycle"]
    assert claim["names"]["shortNames"] == ["dbc"]
    version = claim["versions"][0]
    assert version["subresources"] == {"status": {}}
    columns = version["additionalPrinterColumns"]
    assert [c["name"] for c in columns if not c.get("priority")] == [
        "Ready", "Synced", "Binding", "Class", "Resource", "Age"]
    schema = version["schema"]["openAPIV3Schema"]
    spec = schema["properties"]["spec"]["properties"]
    # The portable fields under the names the claim reads, beside the references.
    assert set(spec) == {"engineVersion", "storageGB", "classRef", "classSelector",
                         "resourceRef", "writeConnectionSecretToRef"}
    assert spec["storageGB"]["type"] == "integer" and spec["engineVersion"]["type"] == "string"
    assert "forProvider" not in spec and "providerConfigRef" not in spec
    status = schema["properties"]["status"]["properties"]
    assert status["state"]["enum"] == list(DatabaseClaim.machine.table().states)
    assert status["bindingPhase"]["enum"] == sorted(
        s.name for s in DatabaseClaim.machine.table().states.values())
    assert {"conditions", "observedGeneration", "phase", "history", "stateSince",
            "resourceRef"} <= set(status)

    klass = docs["DatabaseInstanceClass"]["spec"]
    assert klass["scope"] == "Cluster"
    assert klass["names"]["categories"] == ["class", "lifecycle"]
    version = klass["versions"][0]
    assert "subresources" not in version  # a class has no status
    schema = version["schema"]["openAPIV3Schema"]
    assert set(schema["properties"]) == {"apiVersion", "kind", "metadata", "specTemplate",
                                         "crossNamespaceBinding"}
    assert set(schema["properties"]["crossNamespaceBinding"]["properties"]) == {
        "resourceNamespaces", "claimNamespaces", "claimNamespaceSelector"}
    template = schema["properties"]["specTemplate"]["properties"]
    assert set(template) == {"forProvider", "providerConfigRef", "reclaimPolicy",
                             "resourceNamespace", "deletionPolicy"}
    assert template["reclaimPolicy"]["enum"] == [p.value for p in ReclaimPolicy]


def test_every_registered_kind_includes_the_class(capsys: pytest.CaptureFixture[str]) -> None:
    names = [r.name for r in registry.registrations()]
    assert "DatabaseInstanceClass" in names
    code, out, _ = run_cli(capsys, "crds", "--kinds", *names)
    assert code == 0
    served = {d["metadata"]["name"] for d in yaml.safe_load_all(out)}
    assert {"databaseinstanceclasses.db.lifecycle.dev",
            "databaseclaims.claims.lifecycle.dev"} <= served
    assert registry.find("databaseinstanceclasses").kind is DatabaseInstanceClass


def test_run_refuses_a_class_kind_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "run", "--kinds", "DatabaseInstanceClass")
    assert code == 2 and out == ""
    assert "DatabaseInstanceClass" in err and "not runnable" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def _schema(kind: object) -> dict:
    return crd(kind)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]  # type: ignore[arg-type]


def test_what_the_claim_reconciler_writes_survives_pruning() -> None:
    """A claim flow stored without pruning keeps every field under the generated CRDs."""
    world = claim_environment(DATABASE_BINDING)
    world.env.namespace("team-a")
    # Stored as written: the generated CRDs are then checked against what was written.
    world.env.serve_lenient("DatabaseClaim")
    world.env.serve_lenient("DatabaseInstance")
    manifest = class_manifest("standard", labels={"tier": "gold"}, reclaim_policy="Retain",
                              resource_namespace="lifecycle-system")
    manifest["specTemplate"]["deletionPolicy"] = "Orphan"
    world.apply_class(manifest)
    world.apply(claim_manifest("orders", "team-a", selector={"tier": "gold"},
                               secret_name="orders-db", engineVersion="16", storageGB=50))
    world.run()
    claim = world.claim("orders", "team-a")
    assert claim["status"]["state"] == "bound"
    resource = world.resource_of("orders", "team-a")
    assert resource is not None
    assert {"claimRef", "reclaimPolicy", "deletionPolicy"} <= set(resource["spec"])
    assert {"classRef", "classSelector", "resourceRef", "writeConnectionSecretToRef",
            "engineVersion", "storageGB"} <= set(claim["spec"])
    assert {"bindingPhase", "resourceRef", "conditions", "history", "state",
            "observedGeneration", "stateSince", "phase"} <= set(claim["status"])
    stored_class = world.api.get(DatabaseInstanceClass.api_version, DatabaseInstanceClass.kind,
                                 None, "standard")
    for obj, kind in ((claim, DatabaseClaim), (resource, DatabaseInstance),
                      (stored_class, DatabaseInstanceClass)):
        schema = _schema(kind)
        assert unknown_fields(obj, schema) == [], kind.kind
        assert prune(obj, schema) == obj
        assert validate(obj, schema) == [], kind.kind
    # The check can fail: a managed resource's field is not a claim's.
    assert unknown_fields({**claim, "spec": {**claim["spec"], "forProvider": {}}},
                          _schema(DatabaseClaim)) == ["spec.forProvider"]


# ------------------------------------------------------------------ run: logging
@pytest.fixture
def root_logging() -> Iterator[logging.Logger]:
    """The root logger, with its handlers and level restored after the test."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield root
    root.handlers[:] = handlers
    root.setLevel(level)


def test_configuring_run_logging_twice_leaks_no_stream(
        root_logging: logging.Logger, monkeypatch: pytest.MonkeyPatch) -> None:
    # Each configuration happens while stderr is a stream that is closed afterwards, as a
    # test runner's capture is; a handler that kept that stream would fail on every record.
    before = list(root_logging.handlers)
    for json_format in (False, True):
        captured = io.StringIO()
        monkeypatch.setattr(sys, "stderr", captured)
        configure_logging("info", json_format)
        logging.getLogger("lifecycle.driver").info("configured", extra={"round": json_format})
        monkeypatch.undo()
        assert captured.getvalue().count("configured") == 1, captured.getvalue()
        captured.close()
    added = [h for h in root_logging.handlers if h not in before]
    assert len(added) == 1, root_logging.handlers  # the second call replaced the first's
    later = io.StringIO()
    monkeypatch.setattr(sys, "stderr", later)
    logging.getLogger("lifecycle.driver").warning("still logging", extra={"key": "value"})
    text = later.getvalue()
    assert "Logging error" not in text and "Traceback" not in text, text
    lines = [json.loads(line) for line in text.splitlines()]
    assert [(d["msg"], d["level"], d["key"]) for d in lines] == [
        ("still logging", "warning", "value")]
    assert root_logging.level == logging.INFO


# ------------------------------------------------------------------- parents
def _app_registration() -> registry.Registration:
    from test_driver_claims_e2e import APP

    return registry.Registration(APP)


#: A parent kind as a package would register it (reached here as MODULE:NAME).
PARENT = _app_registration()


def test_a_parent_kind_gets_a_crd_serving_every_version(
        capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "crds", "--kinds", "test_driver_crds:PARENT")
    assert code == 0, err
    docs = {d["spec"]["names"]["kind"]: d for d in yaml.safe_load_all(out)}
    assert set(docs) == {"ProviderConfig", "DatabaseApp"}
    doc = docs["DatabaseApp"]
    assert check_crd(doc) == []
    assert doc["metadata"]["name"] == "databaseapps.apps.lifecycle.dev"
    assert doc["spec"]["scope"] == "Namespaced"
    versions = doc["spec"]["versions"]
    assert [(v["name"], v["served"], v["storage"]) for v in versions] == [
        ("v1alpha1", True, False), ("v1beta1", True, True)]
    for version in versions:
        assert version["subresources"] == {"status": {}}
        # The parent's own types declare no schema: spec and status are kept as written.
        schema = version["schema"]["openAPIV3Schema"]
        assert set(schema["properties"]) == {"apiVersion", "kind", "metadata", "spec", "status"}
        for part in ("spec", "status"):
            assert schema["properties"][part]["type"] == "object"
            assert schema["properties"][part]["x-kubernetes-preserve-unknown-fields"] is True
            assert "properties" not in schema["properties"][part]
        assert version["additionalPrinterColumns"] == [
            {"name": "Ready", "type": "string",
             "jsonPath": ".status.conditions[?(@.type=='Ready')].status"},
            {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}]
    assert doc["spec"]["names"]["categories"] == ["lifecycle"]
    assert doc["spec"]["names"]["kind"] == "DatabaseApp"


def test_the_checker_refuses_a_parent_crd_with_two_storage_versions() -> None:
    doc = crd(PARENT.kind)
    doc["spec"]["versions"][0]["storage"] = True
    assert "spec.versions: exactly one version must be the storage version" in check_crd(doc)


def test_run_and_manifests_accept_a_parent_kind(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "manifests", "--kinds", "test_driver_crds:PARENT",
                             "DatabaseInstance")
    assert code == 0, err
    docs = list(yaml.safe_load_all(out))
    container = next(d for d in docs if d["kind"] == "Deployment")["spec"]["template"][
        "spec"]["containers"][0]
    assert container["args"][:4] == ["run", "--kinds", "test_driver_crds:PARENT",
                                     "DatabaseInstance"]
    # A parent whose child kind is not served is refused in one line.
    code, out, err = run_cli(capsys, "manifests", "--kinds", "test_driver_crds:PARENT")
    assert code == 2 and "is not among the kinds" in err and len(err.strip().splitlines()) == 1
