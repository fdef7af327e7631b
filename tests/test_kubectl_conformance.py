"""kubectl against ``lifecycle serve``, the way a user drives a cluster.

Everything goes through the ``kubectl`` binary on the PATH with client-side
validation on (never ``--validate=false``): the bundled CRDs from
``lifecycle crds`` are applied and become Established, the example manifests
in ``docs/examples`` are accepted, invalid objects are refused with 422
naming the field, ``get`` prints the printer columns for short names and
categories, ``wait`` tells a Ready object from a Failed one beside it,
server-side dry runs and ``diff`` change nothing, ``describe`` shows only the
object's own events, garbage collection removes a deleted object's
connection Secret, and a restarted server keeps every object and converges
new ones. The first test checks the examples against the generated CRDs
without a server.
"""

from __future__ import annotations

import functools
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from envtest_helpers import SERVERS, cleanup, served
from serve_helpers import EXAMPLES, Serve, eventually, load_docs, serving

from lifecycle import registry

READY_TIMEOUT = 90.0
COLUMNS = ["READY", "SYNCED", "STATE", "EXTERNAL-NAME", "AGE"]
DBI = "databaseinstances.db.lifecycle.dev"
GROUP, VERSION, PLURAL = "db.lifecycle.dev", "v1alpha1", "databaseinstances"
#: Every example file and the kinds it holds.
EXAMPLE_FILES = {
    "providerconfig.yaml": {"Secret", "ProviderConfig"},
    "databaseinstance.yaml": {"DatabaseInstance"},
    "databaseclaim.yaml": {"DatabaseInstanceClass", "DatabaseClaim"},
    "postgres-providerconfig.yaml": {"Secret", "ProviderConfig"},
    "postgres-role.yaml": {"Role"},
    "postgres-database.yaml": {"Database"},
    "postgres-grant.yaml": {"Grant"},
}


# ------------------------------------------------------------------ helpers
def all_kind_names() -> list[str]:
    """The names of every registered kind."""
    return [r.name for r in registry.registrations()]


@functools.cache
def crds_yaml() -> str:
    """``lifecycle crds`` for every registered kind, as a user would pipe it to kubectl
    (run once per module: the same command prints the same CRDs)."""
    done = subprocess.run([sys.executable, "-m", "lifecycle", "crds", "--kinds",
                           *all_kind_names()], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, f"lifecycle crds failed: {done.stderr}"
    return done.stdout


def crd_documents() -> list[dict[str, Any]]:
    """The CRDs ``lifecycle crds`` prints for every registered kind."""
    return [doc for doc in yaml.safe_load_all(crds_yaml()) if doc]


def install_crds(server: Serve) -> list[str]:
    """Apply the generated CRDs with kubectl and wait until each is Established."""
    text = crds_yaml()
    names = [doc["metadata"]["name"] for doc in yaml.safe_load_all(text) if doc]
    server.kubectl("apply", "-f", "-", input=text)
    server.kubectl("wait", "--for=condition=Established", "--timeout=30s",
                   *(f"crd/{name}" for name in names), timeout=45)
    return names


def database(name: str, *, version: str = "16", storage_gb: Any = 20,
             **spec: Any) -> dict[str, Any]:
    """A DatabaseInstance manifest (no namespace: kubectl's -n chooses it)."""
    return {"apiVersion": "db.lifecycle.dev/v1alpha1", "kind": "DatabaseInstance",
            "metadata": {"name": name},
            "spec": {"forProvider": {"engine": "postgres", "version": version,
                                     "storageGB": storage_gb, "size": "small"},
                     "writeConnectionSecretToRef": {"name": f"{name}-conn"}, **spec}}


def apply(server: Serve, namespace: str, doc: dict[str, Any], *extra: str,
          check: bool = True) -> Any:
    """``kubectl apply -n NAMESPACE -f -`` of one document."""
    return server.kubectl("apply", "-n", namespace, "-f", "-", *extra,
                          input=yaml.safe_dump(doc), check=check)


def new_namespace(server: Serve) -> str:
    """A fresh namespace, created with kubectl."""
    name = f"t-{uuid.uuid4().hex[:8]}"
    server.kubectl("create", "namespace", name)
    return name


def condition(obj: dict[str, Any], kind: str) -> str | None:
    """The status of condition ``kind`` of ``obj``, or None."""
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind:
            return str(cond.get("status"))
    return None


def wait_ready(server: Serve, namespace: str, name: str) -> dict[str, Any]:
    """Wait with ``kubectl wait`` until dbi/NAME is Ready; return it."""
    server.kubectl("wait", "-n", namespace, "--for=condition=Ready",
                   f"--timeout={int(READY_TIMEOUT)}s", f"dbi/{name}",
                   timeout=READY_TIMEOUT + 15)
    return server.get_json("-n", namespace, f"dbi/{name}")


def wait_failed(server: Serve, namespace: str, name: str) -> dict[str, Any]:
    """Wait until dbi/NAME reports state failed; return it."""
    def failed() -> dict[str, Any] | None:
        obj = server.get_json("-n", namespace, f"dbi/{name}")
        return obj if (obj.get("status") or {}).get("state") == "failed" else None

    return eventually(failed, timeout=READY_TIMEOUT, what=f"dbi/{name} to fail")


def events_of(server: Serve, namespace: str, uid: str) -> list[dict[str, Any]]:
    """The Events of the namespace whose involvedObject has ``uid`` (filtered here)."""
    items = server.get_json("events", "-n", namespace)["items"]
    return [e for e in items if (e.get("involvedObject") or {}).get("uid") == uid]


def header(table: str) -> list[str]:
    """The column names of the first header line kubectl printed."""
    for line in table.splitlines():
        if line.startswith("NAME"):
            return line.split()
    raise AssertionError(f"no header line in:\n{table}")


def in_order(wanted: list[str], columns: list[str]) -> bool:
    """Whether every name of ``wanted`` is in ``columns``, in that order."""
    positions = [columns.index(c) for c in wanted if c in columns]
    return len(positions) == len(wanted) and positions == sorted(positions)


def status_of_failure(result: Any) -> str:
    """kubectl's stderr, for assertions about a refused request."""
    return str(result.stderr)


# ------------------------------------------------------------------ fixtures
def _real(request: pytest.FixtureRequest) -> Any:
    return request.getfixturevalue("real_cluster") if request.param == "envtest" else None


@pytest.fixture(scope="module", params=SERVERS)
def cluster(request: pytest.FixtureRequest,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    """One API server with the operator, CRDs applied by kubectl and Established: ``serve``
    (the embedded API and its operator) or ``envtest`` (the real API server, with
    ``lifecycle run --kubeconfig`` beside it)."""
    with served(request.param, _real(request), tmp_path_factory.mktemp(request.param)) as server:
        install_crds(server)
        yield server
        cleanup(server)


@pytest.fixture
def namespace(cluster: Serve) -> str:
    """A fresh namespace of the shared server."""
    return new_namespace(cluster)


# ------------------------------------------------ examples (no server needed)
def _schema_problems(value: Any, schema: dict[str, Any], path: str) -> list[str]:
    """What a structural schema would refuse or prune in ``value`` (empty: nothing)."""
    if value is None:
        return [] if schema.get("nullable") else [f"{path}: null is not allowed"]
    if schema.get("x-kubernetes-preserve-unknown-fields") and "type" not in schema:
        return []
    kind = schema.get("type")
    types = {"object": dict, "array": list, "string": str, "boolean": bool,
             "number": (int, float), "integer": int}
    if kind in types and (not isinstance(value, types[kind]) or (
            kind in ("integer", "number") and isinstance(value, bool))):
        return [f"{path}: must be of type {kind}, got {value!r}"]
    if "enum" in schema and value not in schema["enum"]:
        return [f"{path}: {value!r} is not one of {schema['enum']}"]
    problems: list[str] = []
    if kind == "object":
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        for name in schema.get("required") or []:
            if name not in value:
                problems.append(f"{path}.{name}: Required value")
        for name, item in value.items():
            where = f"{path}.{name}" if path else name
            if name in props:
                problems.extend(_schema_problems(item, props[name], where))
            elif isinstance(extra, dict):
                problems.extend(_schema_problems(item, extra, where))
            elif not schema.get("x-kubernetes-preserve-unknown-fields"):
                problems.append(f"{where}: unknown field (a server prunes or refuses it)")
    if kind == "array" and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            problems.extend(_schema_problems(item, schema["items"], f"{path}[{index}]"))
    return problems


def test_every_example_is_valid_against_the_generated_crds() -> None:
    """Each example's custom resources satisfy their CRD's schema, unpruned, and parse."""
    crds = {(d["spec"]["group"], d["spec"]["names"]["kind"]): d for d in crd_documents()}
    assert sorted(p.name for p in EXAMPLES.glob("*.yaml")) == sorted(EXAMPLE_FILES)
    kinds = {r.kind.kind: r.kind for r in registry.registrations()}
    problems: list[str] = []
    for file, expected in EXAMPLE_FILES.items():
        docs = load_docs(EXAMPLES / file)
        assert {d["kind"] for d in docs} == expected, file
        for doc in docs:
            group, _, version = doc["apiVersion"].rpartition("/")
            if not group:
                continue  # a core kind (the credentials Secret)
            crd = crds.get((group, doc["kind"]))
            if crd is None:
                problems.append(f"{file}: no generated CRD serves {doc['apiVersion']} "
                                f"{doc['kind']}")
                continue
            served = {v["name"]: v for v in crd["spec"]["versions"]}
            assert version in served, f"{file}: {doc['kind']} version {version} not served"
            schema = served[version]["schema"]["openAPIV3Schema"]
            body = {k: v for k, v in doc.items() if k != "metadata"}
            problems.extend(f"{file}: {doc['kind']} {p}"
                            for p in _schema_problems(body, schema, ""))
            if doc["kind"] in kinds and "forProvider" in (doc.get("spec") or {}):
                kinds[doc["kind"]].parse_parameters(doc["spec"])
    assert not problems, "\n".join(problems)


def test_the_schema_check_of_the_examples_can_fail() -> None:
    """The example check above refuses a wrong type, a bad enum and an unknown field."""
    schema = next(d for d in crd_documents() if d["metadata"]["name"] == DBI)[
        "spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    bad = database("x", storage_gb="twenty", deletionPolicy="Maybe")
    bad["spec"]["forProvider"]["colour"] = "red"
    found = "\n".join(_schema_problems({k: v for k, v in bad.items() if k != "metadata"},
                                       schema, ""))
    assert "spec.forProvider.storageGB" in found
    assert "spec.deletionPolicy" in found
    assert "spec.forProvider.colour" in found


# ---------------------------------------------------------- CRDs and examples
def test_applied_crds_are_established_with_their_names_accepted(cluster: Serve) -> None:
    """kubectl applied every generated CRD; each reports Established and NamesAccepted True."""
    names = {doc["metadata"]["name"] for doc in crd_documents()}
    items = {c["metadata"]["name"]: c for c in cluster.get_json("crd")["items"]}
    assert names <= set(items), f"CRDs missing: {sorted(names - set(items))}"
    for name in names:
        conditions = {c["type"]: c["status"]
                      for c in (items[name].get("status") or {}).get("conditions") or []}
        assert conditions.get("Established") == "True", (name, conditions)
        assert conditions.get("NamesAccepted") == "True", (name, conditions)
        accepted = (items[name].get("status") or {}).get("acceptedNames") or {}
        assert accepted.get("kind") == items[name]["spec"]["names"]["kind"], (name, accepted)


def test_kubectl_get_crd_lists_them(cluster: Serve) -> None:
    """``kubectl get crd`` (a short name of the built-in CRD kind) prints the CRDs with the
    columns a v1.37 server gives them: scope, versions (storage marked), creation time."""
    table = cluster.kubectl("get", "crd").stdout
    assert header(table)[:5] == ["NAME", "SCOPE", "VERSIONS", "CREATED", "AT"], table
    row = next(line.split() for line in table.splitlines() if line.startswith(DBI))
    assert row[1:3] == ["Namespaced", "v1alpha1(storage)"], row
    assert DBI in table


@pytest.mark.parametrize("file", sorted(EXAMPLE_FILES))
def test_example_manifest_is_accepted_with_validation_on(cluster: Serve, namespace: str,
                                                         file: str) -> None:
    """``kubectl apply -f docs/examples/FILE`` succeeds and stores every object unpruned."""
    path = EXAMPLES / file
    # Files naming their namespaces (the credentials Secrets) are applied as they are.
    where = [] if any(d["metadata"].get("namespace") for d in load_docs(path)) else [
        "-n", namespace]
    cluster.kubectl("apply", *where, "-f", str(path))
    stored = cluster.kubectl("get", *where, "-f", str(path), "-o", "json").json()
    items = stored.get("items", [stored])
    assert {i["kind"] for i in items} == EXAMPLE_FILES[file]
    for doc, obj in zip(load_docs(path), items, strict=True):
        for key in ("spec", "specTemplate"):
            if key in doc:
                for field, value in doc[key].items():
                    stored_value = obj[key].get(field)
                    if isinstance(value, dict) and isinstance(stored_value, dict):
                        # Schema defaults may fill fields the file leaves out; nothing
                        # the file sets may be pruned or changed.
                        stored_value = {k: stored_value.get(k) for k in value}
                    assert stored_value == value, (
                        f"{file}: {doc['kind']} {key}.{field} stored as "
                        f"{obj[key].get(field)!r}, applied {value!r}")


def test_the_example_database_becomes_ready(cluster: Serve, namespace: str) -> None:
    """The DatabaseInstance example is provisioned by the operator behind ``serve``."""
    cluster.kubectl("apply", "-n", namespace, "-f", str(EXAMPLES / "databaseinstance.yaml"))
    obj = wait_ready(cluster, namespace, "example-db")
    assert obj["status"]["state"] == "ready"
    secret = cluster.get_json("secret", "-n", namespace, "example-db-connection")
    assert {"endpoint", "port", "username", "password"} <= set(secret["data"])


# ---------------------------------------------------------------- validation
def test_wrong_type_in_for_provider_is_refused_with_422_naming_the_field(
        cluster: Serve, namespace: str) -> None:
    """A string where the schema says integer: 422 Invalid naming spec.forProvider.storageGB."""
    result = apply(cluster, namespace, database("bad-type", storage_gb="twenty"), "-v=6",
                   check=False)
    err = status_of_failure(result)
    assert not result.ok, f"an invalid object was accepted\n{result}"
    assert "422" in err, f"expected a 422 response\n{result}"
    assert 'The DatabaseInstance "bad-type" is invalid' in err, result
    assert "spec.forProvider.storageGB" in err, result
    assert "must be of type integer" in err, result
    missing = cluster.kubectl("get", "-n", namespace, "dbi/bad-type", check=False)
    assert not missing.ok and "NotFound" in missing.stderr, missing


def test_value_outside_an_enum_is_refused_with_422(cluster: Serve, namespace: str) -> None:
    """deletionPolicy outside its enum: 422 with the supported values."""
    result = apply(cluster, namespace, database("bad-enum", deletionPolicy="Maybe"),
                   check=False)
    assert not result.ok, f"an invalid object was accepted\n{result}"
    assert 'spec.deletionPolicy: Unsupported value: "Maybe"' in result.stderr, result
    assert '"Delete"' in result.stderr and '"Orphan"' in result.stderr, result


def test_unknown_field_is_refused_by_strict_field_validation(cluster: Serve,
                                                             namespace: str) -> None:
    """kubectl's default (strict) validation refuses a field the schema does not declare."""
    doc = database("bad-field")
    doc["spec"]["forProvider"]["colour"] = "red"
    result = apply(cluster, namespace, doc, check=False)
    assert not result.ok, f"an unknown field was accepted\n{result}"
    assert 'unknown field "spec.forProvider.colour"' in result.stderr, result


def test_official_client_sees_the_422_status_with_field_causes(cluster: Serve,
                                                               namespace: str) -> None:
    """The Status body of a refused create: code, reason, kind details and a cause per field."""
    from kubernetes import client as k8s

    api = k8s.CustomObjectsApi(cluster.client())
    body = database("bad-client", storage_gb="twenty")
    body["metadata"]["namespace"] = namespace
    with pytest.raises(k8s.ApiException) as info:
        api.create_namespaced_custom_object("db.lifecycle.dev", "v1alpha1", namespace,
                                            "databaseinstances", body)
    assert info.value.status == 422
    status = yaml.safe_load(info.value.body)
    assert status["kind"] == "Status" and status["status"] == "Failure"
    assert status["reason"] == "Invalid" and status["code"] == 422
    assert status["message"].startswith(
        'DatabaseInstance.db.lifecycle.dev "bad-client" is invalid: '), status["message"]
    # with the CRD's CEL rules, a "rules not checked" cause (field <nil>) comes first
    assert "spec.forProvider.storageGB: Invalid value" in status["message"], status["message"]
    details = status["details"]
    assert (details["name"], details["group"], details["kind"]) == (
        "bad-client", "db.lifecycle.dev", "DatabaseInstance")
    fields = {c["field"]: c["reason"] for c in details["causes"]}
    assert fields.get("spec.forProvider.storageGB") == "FieldValueTypeInvalid", details


# ---------------------------------------------------------- get and printing
def test_get_by_short_name_and_category_prints_the_printer_columns(
        cluster: Serve, namespace: str) -> None:
    """``get dbi`` and ``get managed`` print READY, SYNCED, STATE, EXTERNAL-NAME and AGE."""
    apply(cluster, namespace, database("shown"))
    wait_ready(cluster, namespace, "shown")
    table = cluster.kubectl("get", "dbi", "-n", namespace).stdout
    columns = header(table)
    assert columns[0] == "NAME" and in_order(COLUMNS, columns), table
    row = next(line.split() for line in table.splitlines() if line.startswith("shown "))
    values = dict(zip(columns, row, strict=False))
    assert values["READY"] == "True" and values["STATE"] == "ready", table
    obj = cluster.get_json("-n", namespace, "dbi/shown")
    external = obj["metadata"]["annotations"]["lifecycle.dev/external-name"]
    assert values["EXTERNAL-NAME"] == external, table

    managed = cluster.kubectl("get", "managed", "-n", namespace).stdout
    # kubectl prefixes the type only when the category spans several installed types.
    names = {line.split()[0] for line in managed.splitlines()[1:] if line.strip()}
    assert names & {"shown", "databaseinstance.db.lifecycle.dev/shown"}, managed
    assert in_order(COLUMNS, header(managed)), managed

    wide = cluster.kubectl("get", "dbi", "shown", "-n", namespace, "-o", "wide").stdout
    assert in_order(COLUMNS, header(wide)), wide
    named = cluster.kubectl("get", "databaseinstances.db.lifecycle.dev", "shown",
                            "-n", namespace, "-o", "name").stdout
    assert named.strip() == "databaseinstance.db.lifecycle.dev/shown"


def test_get_with_a_field_selector_lists_only_the_named_object(cluster: Serve,
                                                               namespace: str) -> None:
    """``--field-selector metadata.name=X`` returns X alone."""
    apply(cluster, namespace, database("one"))
    apply(cluster, namespace, database("two"))
    listed = cluster.get_json("dbi", "-n", namespace, "--field-selector", "metadata.name=one")
    assert [i["metadata"]["name"] for i in listed["items"]] == ["one"]


# ------------------------------------------------------------------- waiting
def test_wait_for_ready_tells_a_failed_object_from_a_ready_one(cluster: Serve,
                                                               namespace: str) -> None:
    """wait succeeds for the Ready object and times out on the Failed one beside it."""
    apply(cluster, namespace, database("good"))
    apply(cluster, namespace, database("broken", version="9.6"))  # the cloud refuses it
    wait_ready(cluster, namespace, "good")
    failed = wait_failed(cluster, namespace, "broken")
    assert condition(failed, "Ready") == "False", failed.get("status")
    result = cluster.kubectl("wait", "-n", namespace, "--for=condition=Ready",
                             "--timeout=5s", "dbi/broken", check=False, timeout=40)
    assert not result.ok, f"kubectl wait said a Failed object is Ready\n{result}"
    assert "timed out waiting for the condition" in result.stderr, result


# ----------------------------------------------------------------- dry runs
def test_server_side_dry_run_delete_changes_nothing(cluster: Serve, namespace: str) -> None:
    """``kubectl delete --dry-run=server``: the object stays, unchanged, and stays Ready."""
    apply(cluster, namespace, database("kept"))
    before = wait_ready(cluster, namespace, "kept")
    result = cluster.kubectl("delete", "-n", namespace, "dbi/kept", "--dry-run=server")
    assert "(server dry run)" in result.stdout, result
    after = cluster.get_json("-n", namespace, "dbi/kept")
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    assert "deletionTimestamp" not in after["metadata"], after["metadata"]
    # Give the operator time to act on a deletion, had there been one.
    cluster.kubectl("wait", "-n", namespace, "--for=condition=Ready", "--timeout=5s",
                    "dbi/kept")
    later = cluster.get_json("-n", namespace, "dbi/kept")
    assert later["status"]["state"] == "ready", later["status"]
    assert later["metadata"]["uid"] == before["metadata"]["uid"]
    reasons = {e.get("reason") for e in events_of(cluster, namespace,
                                                  before["metadata"]["uid"])}
    assert not {r for r in reasons if r and "delet" in r.lower()}, reasons


def test_server_side_dry_run_apply_changes_nothing(cluster: Serve, namespace: str) -> None:
    """``kubectl apply --dry-run=server`` neither changes an object nor creates a new one."""
    apply(cluster, namespace, database("steady"))
    before = wait_ready(cluster, namespace, "steady")
    result = apply(cluster, namespace, database("steady", storage_gb=40), "--dry-run=server")
    assert "(server dry run)" in result.stdout, result
    result = apply(cluster, namespace, database("ghost"), "--dry-run=server")
    assert "created (server dry run)" in result.stdout, result
    # Time for the operator to provision a ghost, had one been stored.
    cluster.kubectl("wait", "-n", namespace, "--for=condition=Ready", "--timeout=5s",
                    "dbi/steady")
    after = cluster.get_json("-n", namespace, "dbi/steady")
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    assert after["spec"]["forProvider"]["storageGB"] == 20
    missing = cluster.kubectl("get", "-n", namespace, "dbi/ghost", check=False)
    assert not missing.ok and "NotFound" in missing.stderr, missing
    ghosts = [e for e in cluster.get_json("events", "-n", namespace)["items"]
              if (e.get("involvedObject") or {}).get("name") == "ghost"]
    assert ghosts == [], "the operator acted on a dry-run object"
    secret = cluster.kubectl("get", "-n", namespace, "secret", "ghost-conn", check=False)
    assert not secret.ok, "a dry-run object got a connection Secret"


def test_kubectl_diff_changes_nothing(cluster: Serve, namespace: str) -> None:
    """``kubectl diff`` shows the change (exit 1), none for the same manifest (exit 0)."""
    apply(cluster, namespace, database("diffed"))
    before = wait_ready(cluster, namespace, "diffed")
    changed = cluster.kubectl("diff", "-n", namespace, "-f", "-",
                              input=yaml.safe_dump(database("diffed", storage_gb=40)),
                              check=False)
    assert changed.returncode == 1, f"kubectl diff should report a difference\n{changed}"
    assert re.search(r"^-\s+storageGB: 20$", changed.stdout, re.M), changed
    assert re.search(r"^\+\s+storageGB: 40$", changed.stdout, re.M), changed
    after = cluster.get_json("-n", namespace, "dbi/diffed")
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    assert after["spec"]["forProvider"]["storageGB"] == 20
    same = cluster.kubectl("diff", "-n", namespace, "-f", "-",
                           input=yaml.safe_dump(database("diffed")), check=False)
    assert same.returncode == 0, f"kubectl diff of the applied manifest\n{same}"


# ---------------------------------------------------------------- describe
def test_describe_shows_only_the_objects_own_events(cluster: Serve, namespace: str) -> None:
    """The Events section of ``kubectl describe dbi/X`` lists X's events and no others."""
    apply(cluster, namespace, database("calm"))
    apply(cluster, namespace, database("noisy", version="9.6"))
    calm = wait_ready(cluster, namespace, "calm")
    noisy = wait_failed(cluster, namespace, "noisy")
    own = eventually(lambda: events_of(cluster, namespace, calm["metadata"]["uid"]),
                     timeout=30, what="events of dbi/calm")
    others = events_of(cluster, namespace, noisy["metadata"]["uid"])
    own_messages = {e["message"] for e in own}
    foreign = {e["message"] for e in others} - own_messages
    assert foreign, "the failed object recorded no events of its own"
    text = cluster.kubectl("describe", "-n", namespace, "dbi/calm").stdout
    events = text.split("\nEvents:", 1)[1] if "\nEvents:" in text else ""
    assert events.strip() and "<none>" not in events, text
    assert any(m[:40] in events for m in own_messages), text
    leaked = [m for m in foreign if m[:40] in events]
    assert not leaked, f"describe dbi/calm shows events of dbi/noisy: {leaked}\n{text}"


# ------------------------------------------------------- garbage collection
def test_deleting_an_object_removes_its_connection_secret(cluster: Serve,
                                                          namespace: str) -> None:
    """The connection Secret is owned by the object; deleting the object collects it."""
    apply(cluster, namespace, database("owner"))
    obj = wait_ready(cluster, namespace, "owner")
    secret = cluster.get_json("secret", "-n", namespace, "owner-conn")
    owners = [ref["uid"] for ref in secret["metadata"].get("ownerReferences") or []]
    assert obj["metadata"]["uid"] in owners, secret["metadata"]
    cluster.kubectl("delete", "-n", namespace, "dbi/owner", "--timeout=90s", timeout=120)

    def secret_gone() -> bool:
        result = cluster.kubectl("get", "-n", namespace, "secret", "owner-conn", check=False)
        return not result.ok and "NotFound" in result.stderr

    eventually(secret_gone, timeout=30, what="garbage collection of secret owner-conn")


# ------------------------------------------------------------------- restart
def test_restarted_serve_keeps_every_object_and_converges_new_ones(tmp_path: Path) -> None:
    """Stop and start ``serve`` on the same state: same objects and uids, new ones reconciled."""
    server = Serve(tmp_path / "serve")
    try:
        server.start()
        install_crds(server)
        ns = new_namespace(server)
        apply(server, ns, database("before"))
        first = wait_ready(server, ns, "before")
        uids = {f"{i['kind']}/{i['metadata'].get('namespace')}/{i['metadata']['name']}":
                i["metadata"]["uid"]
                for what in ("dbi", "secrets", "crd", "providerconfigs", "namespaces")
                for i in server.get_json(what, "-A")["items"]}
        listed_rv = int(_objects(server).list_namespaced_custom_object(
            GROUP, VERSION, ns, PLURAL)["metadata"]["resourceVersion"])
        assert server.stop() is not None

        server.start()
        again = {f"{i['kind']}/{i['metadata'].get('namespace')}/{i['metadata']['name']}":
                 i["metadata"]["uid"]
                 for what in ("dbi", "secrets", "crd", "providerconfigs", "namespaces")
                 for i in server.get_json(what, "-A")["items"]}
        lost = {k: v for k, v in uids.items() if again.get(k) != v}
        assert not lost, f"objects lost or re-created across the restart: {lost}"
        kept = server.get_json("-n", ns, "dbi/before")
        assert kept["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
        apply(server, ns, database("after"))
        wait_ready(server, ns, "after")
        after = server.get_json("-n", ns, "dbi/after")
        assert int(after["metadata"]["resourceVersion"]) > listed_rv, (
            "resourceVersions started again after the restart")
        server.kubectl("wait", "-n", ns, "--for=condition=Ready", "--timeout=30s",
                       "dbi/before", timeout=45)
        events = [e for e in events_of(server, ns, first["metadata"]["uid"])
                  if e.get("reason") in ("Create", "Creating", "CreateRequested")]
        assert len(events) <= 1, f"the old object was provisioned again: {events}"
    finally:
        server.stop()



# ------------------------------------------------- the official client's paths
@pytest.fixture(scope="module", params=SERVERS)
def bare(request: pytest.FixtureRequest,
         tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    """An API server with the CRDs applied and no operator: nothing changes objects
    (``serve --no-operator``, or the real API server alone)."""
    with served(request.param, _real(request), tmp_path_factory.mktemp(f"bare-{request.param}"),
                operator=False) as server:
        install_crds(server)
        yield server
        server.kubectl("delete", "databaseinstances", "--all", "-A", "--wait=false",
                       check=False)


def _objects(server: Serve) -> Any:
    from kubernetes import client as k8s

    return k8s.CustomObjectsApi(server.client())


def _status_body(exc: Any) -> dict[str, Any]:
    body = yaml.safe_load(exc.body) if exc.body else None
    assert isinstance(body, dict), f"no Status body: {exc}"
    return body


def test_list_pagination_walks_every_page(bare: Serve) -> None:
    """limit/continue: pages of two, one snapshot resourceVersion, remainingItemCount, no gaps."""
    api = _objects(bare)
    namespace = new_namespace(bare)
    names = [f"page-{index}" for index in range(5)]
    for name in names:
        body = database(name)
        body["metadata"]["namespace"] = namespace
        api.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)
    first = api.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, limit=2)
    pages = [first]
    assert len(first["items"]) == 2 and first["metadata"].get("continue"), first["metadata"]
    assert first["metadata"].get("remainingItemCount") == 3, first["metadata"]
    # A change between pages does not show: the pages are one snapshot.
    api.patch_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "page-4",
                                       {"metadata": {"labels": {"touched": "yes"}}})
    token = first["metadata"]["continue"]
    while token:
        page = api.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, limit=2,
                                                 _continue=token)
        assert len(page["items"]) <= 2
        pages.append(page)
        token = page["metadata"].get("continue")
    seen = [item["metadata"]["name"] for page in pages for item in page["items"]]
    assert seen == names, seen
    assert len(pages) == 3
    versions = {page["metadata"]["resourceVersion"] for page in pages}
    assert len(versions) == 1, f"pages from different snapshots: {versions}"
    last = pages[-1]["items"][-1]
    assert "touched" not in (last["metadata"].get("labels") or {}), last["metadata"]


def test_a_malformed_continue_token_is_a_400(bare: Serve) -> None:
    """A continue token the server never issued is refused with 400 BadRequest."""
    from kubernetes.client import ApiException

    with pytest.raises(ApiException) as info:
        _objects(bare).list_namespaced_custom_object(GROUP, VERSION, "default", PLURAL,
                                                     limit=2, _continue="not-a-token")
    assert info.value.status == 400
    assert _status_body(info.value)["reason"] == "BadRequest"


def test_watch_streams_changes_of_the_selected_object(bare: Serve) -> None:
    """A watch from a list's resourceVersion sees ADDED, MODIFIED, DELETED of its object only."""
    from kubernetes import watch

    api = _objects(bare)
    namespace = new_namespace(bare)
    start = api.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL)
    for name in ("watched", "other"):
        body = database(name)
        body["metadata"]["namespace"] = namespace
        api.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)
    api.patch_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "watched",
                                       {"spec": {"forProvider": {"storageGB": 30}}})
    api.patch_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "other",
                                       {"spec": {"forProvider": {"storageGB": 30}}})
    api.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "watched")
    seen = []
    stream = watch.Watch()
    for event in stream.stream(api.list_namespaced_custom_object, GROUP, VERSION, namespace,
                               PLURAL, resource_version=start["metadata"]["resourceVersion"],
                               field_selector="metadata.name=watched", timeout_seconds=5):
        seen.append((event["type"], event["raw_object"]))
        if event["type"] == "DELETED":
            stream.stop()
    # On the shared real server an operator of another test may also write the object (its
    # finalizer): more MODIFIED events, never another object's.
    assert {obj["metadata"]["name"] for _, obj in seen} == {"watched"}
    types = [kind for kind, _ in seen]
    assert types[0] == "ADDED" and types[-1] == "DELETED", types
    assert set(types[1:-1]) == {"MODIFIED"}, types
    assert any(obj["spec"]["forProvider"]["storageGB"] == 30 for kind, obj in seen[1:-1]), seen


def _flood(server: Serve, namespace: str, writes: int, *, name: str = "flood") -> None:
    """``writes`` merge patches of one new ConfigMap ``name`` over one keep-alive connection."""
    import http.client
    import json

    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        path = f"/api/v1/namespaces/{namespace}/configmaps"
        connection.request("POST", path, body=json.dumps(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
             "data": {"n": "0"}}), headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        response.read()
        assert response.status == 201, response.status
        for index in range(1, writes + 1):
            connection.request("PATCH", f"{path}/{name}",
                               body=json.dumps({"data": {"n": str(index)}}),
                               headers={"Content-Type": "application/merge-patch+json"})
            response = connection.getresponse()
            response.read()
            assert response.status == 200, (index, response.status)
    finally:
        connection.close()


#: The watch history of the ``serve`` the 410 test starts: small, so a short flood expires
#: a version (the default's 10,000 is pinned by the test after it).
SMALL_WATCH_CACHE = 100


def test_watch_from_an_expired_resource_version_raises_410_expired(tmp_path: Path) -> None:
    """A resourceVersion the server's watch history no longer holds: 410 Expired on the stream.

    ``serve`` only: on the real server its watch cache and etcd compaction decide when a
    version expires, not a fixed window of writes. Its own ``serve --watch-cache-size``
    keeps the history small, so 50 writes more than it holds push the version out (with the
    default 10,000 this took 10,050 writes and two minutes)."""
    from kubernetes import watch
    from kubernetes.client import ApiException

    with serving(tmp_path, operator=False,
                 extra_args=["--watch-cache-size", str(SMALL_WATCH_CACHE)]) as server:
        api = _objects(server)
        namespace = new_namespace(server)
        old = api.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL)
        # Within the history the version still answers: the flood below is what expires it.
        _flood(server, namespace, SMALL_WATCH_CACHE // 2)
        assert list(watch.Watch().stream(
            api.list_namespaced_custom_object, GROUP, VERSION, namespace, PLURAL,
            timeout_seconds=1, resource_version=old["metadata"]["resourceVersion"])) == []
        _flood(server, namespace, SMALL_WATCH_CACHE, name="flood-2")
        with pytest.raises(ApiException) as info:
            for _ in watch.Watch().stream(api.list_namespaced_custom_object, GROUP, VERSION,
                                          namespace, PLURAL, timeout_seconds=5,
                                          resource_version=old["metadata"]["resourceVersion"]):
                pass
    assert info.value.status == 410
    assert str(info.value.reason).startswith("Expired: too old resource version"), (
        info.value.reason)


def test_serve_keeps_a_watch_history_of_10000_writes_by_default() -> None:
    """``lifecycle serve`` without ``--watch-cache-size`` holds 10,000 writes, as the embedded
    API does, and hands the value it is given to the API it serves."""
    import inspect

    from lifecycle.cli import build_parser
    from lifecycle.cli import serve as serve_module
    from lifecycle.sim import EmbeddedAPI

    parser = build_parser()
    assert parser.parse_args(["serve"]).watch_cache_size == 10_000
    assert parser.parse_args(["serve", "--watch-cache-size", "7"]).watch_cache_size == 7
    assert inspect.signature(EmbeddedAPI).parameters["watch_window"].default == 10_000
    assert serve_module.DEFAULT_WATCH_CACHE_SIZE == 10_000
    assert EmbeddedAPI()._log.window == 10_000


def test_a_watch_cache_size_below_one_is_one_line_and_exit_2(tmp_path: Path) -> None:
    """``--watch-cache-size 0``: one line naming the option, exit 2, nothing served."""
    done = subprocess.run([sys.executable, "-m", "lifecycle", "serve", "--watch-cache-size", "0",
                           "--kubeconfig", str(tmp_path / "kubeconfig"),
                           "--state", str(tmp_path / "state.db")],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 2, done
    assert done.stderr.strip().splitlines() == [
        "lifecycle serve: --watch-cache-size must be at least 1, got 0"], done.stderr
    assert not (tmp_path / "state.db").exists() and not (tmp_path / "kubeconfig").exists()


def test_resource_version_from_the_future_is_a_504_too_large(
        bare: Serve, request: pytest.FixtureRequest) -> None:
    """Listing at a resourceVersion not reached yet: 504 ResourceVersionTooLarge on both.
    Watching from one differs (docs/embedded-api.md, differences): the embedded API answers
    504 at once; a real v1.37 server holds the watch open and sends nothing."""
    import time

    from kubernetes import watch
    from kubernetes.client import ApiException

    api = _objects(bare)
    current = api.list_namespaced_custom_object(GROUP, VERSION, "default", PLURAL)
    future = str(int(current["metadata"]["resourceVersion"]) + 1_000_000)
    if request.node.callspec.params["bare"] == "serve":
        with pytest.raises(ApiException) as info:
            for _ in watch.Watch().stream(api.list_namespaced_custom_object, GROUP, VERSION,
                                          "default", PLURAL, resource_version=future,
                                          timeout_seconds=10):
                pass
        assert info.value.status == 504
        status = _status_body(info.value)
        assert status["reason"] == "Timeout"
        assert status["message"].startswith("Timeout: Too large resource version"), status
        causes = [c.get("reason") for c in (status.get("details") or {}).get("causes") or []]
        assert "ResourceVersionTooLarge" in causes, status
    else:
        started = time.monotonic()
        events = list(watch.Watch().stream(api.list_namespaced_custom_object, GROUP, VERSION,
                                           "default", PLURAL, resource_version=future,
                                           timeout_seconds=4))
        assert events == [] and time.monotonic() - started >= 3.5
    with pytest.raises(ApiException) as listed:
        api.list_namespaced_custom_object(GROUP, VERSION, "default", PLURAL,
                                          resource_version=future,
                                          resource_version_match="NotOlderThan")
    assert listed.value.status == 504
    assert "ResourceVersionTooLarge" in listed.value.body
