"""A kind written outside this repository goes through every command.

The package below is what ``docs/adding-a-kind.md`` asks of a user: an attrs
parameters class (one field aliased to camelCase, one late-initialised), a
client over an in-memory fake of the external API, a connector, a machine
subclass, a Kind and a Registration whose ``verify_target`` is
:func:`lifecycle.verify.targets.fake_target`. It is written into a temporary
directory with the ``.dist-info`` an installer would write (its
``lifecycle.kinds`` entry point), and every ``lifecycle`` command runs on it
in a subprocess whose ``PYTHONPATH`` holds that directory. In-process tests
import the same module from a directory without the ``.dist-info``, so the
registry of this process never sees the kind.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from lifecycle.cli import UsageError, check_connector, machine_of
from lifecycle.core.errors import TerminalError
from lifecycle.core.kind import Kind
from lifecycle.core.values import Observation
from lifecycle.verify import run_scenario
from lifecycle.verify.model import VerifyError
from lifecycle.verify.targets import fake_target

PACKAGE = '''\
"""A user's kind: object-store buckets on an in-memory fake of their API."""

import attrs

from lifecycle.core.kind import Kind
from lifecycle.core.values import Observation
from lifecycle.core.machine import Timing
from lifecycle.core.values import Creation, Observation
from lifecycle.machines.managed import ManagedResourceMachine
from lifecycle.registry import Registration
from lifecycle.verify.targets import fake_target

#: The fake API of the operator process: external name -> bucket.
BUCKETS = {}


@attrs.frozen
class BucketParameters:
    region: str = "eu-west-1"
    size_gb: int = attrs.field(default=1, alias="sizeGB",
                               validator=attrs.validators.instance_of(int))
    storage_class: str | None = attrs.field(default=None, alias="storageClass")


class BucketClient:
    def __init__(self, buckets):
        self.buckets = buckets

    def observe(self, resource):
        found = self.buckets.get(resource.external_name)
        if found is None:
            return Observation.absent()
        wanted = {k: v for k, v in attrs.asdict(resource.parameters).items() if v is not None}
        return Observation(exists=True,
                           up_to_date=all(found[k] == v for k, v in wanted.items()),
                           late_init={"storageClass": found["storage_class"]},
                           connection={"region": found["region"]})

    def create(self, resource):
        params = attrs.asdict(resource.parameters)
        params["storage_class"] = params["storage_class"] or "standard"
        self.buckets.setdefault(resource.external_name, params)
        return Creation()

    def update(self, resource):
        self.buckets[resource.external_name].update(
            {k: v for k, v in attrs.asdict(resource.parameters).items() if v is not None})

    def delete(self, resource):
        self.buckets.pop(resource.external_name, None)


class BucketConnector:
    def __init__(self, buckets=None):
        self.buckets = BUCKETS if buckets is None else buckets

    def connect(self, resource, config) -> BucketClient:
        return BucketClient(self.buckets)


class BucketMachine(ManagedResourceMachine):
    timing = Timing(poll=5.0, wait={"creating": 0.2, "updating": 0.2, "deleting": 0.2})


Bucket = Kind(group="storage.example.org", version="v1", kind="Bucket", plural="buckets",
              machine=BucketMachine, parameters=BucketParameters)

BUCKET = Registration(Bucket, connector=BucketConnector,
                      verify_target=fake_target(BucketConnector, changed={"sizeGB": 2}))
REGISTRATIONS = (BUCKET,)
'''

MODULE = "bucket_operator_test_kind"

DUMP = """\
apiVersion: storage.example.org/v1
kind: Bucket
metadata: {name: photos, uid: u-1, generation: 2, finalizers: [lifecycle.dev/finalizer]}
spec: {forProvider: {sizeGB: 3}}
status: {state: ready}
"""


def _write(root: Path, entry_point: bool) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / f"{MODULE}.py").write_text(PACKAGE)
    if entry_point:
        info = root / "bucket_operator-0.1.dist-info"
        info.mkdir()
        (info / "METADATA").write_text("Metadata-Version: 2.1\nName: bucket-operator\n"
                                       "Version: 0.1\n")
        (info / "entry_points.txt").write_text(
            f"[lifecycle.kinds]\nbucket = {MODULE}:REGISTRATIONS\n")
    return root


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The package as installed: the module and its entry point, for subprocesses."""
    return _write(tmp_path_factory.mktemp("site"), entry_point=True)


@pytest.fixture
def user_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The same module imported in this process, without an entry point."""
    monkeypatch.syspath_prepend(str(_write(tmp_path / "src", entry_point=False)))
    monkeypatch.delitem(sys.modules, MODULE, raising=False)
    import importlib

    return importlib.import_module(MODULE)


def _env(site: Path) -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, "PYTHONUNBUFFERED": "1"}


def lifecycle(site: Path, *args: str, cwd: Path | None = None,
              timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "lifecycle.cli", *args], env=_env(site),
                          capture_output=True, text=True, timeout=timeout, cwd=cwd)


# ------------------------------------------------------------ aliases
def test_parameters_are_read_by_alias_and_errors_name_the_alias(user_module: Any) -> None:
    kind: Kind = user_module.Bucket
    params = kind.parse_parameters({"forProvider": {"sizeGB": 5, "storageClass": "cold"}})
    assert (params.size_gb, params.storage_class) == (5, "cold")
    with pytest.raises(TerminalError) as unknown:
        kind.parse_parameters({"forProvider": {"storage_gb": 5, "size_gb": 5}})
    assert unknown.value.reason == "InvalidSpec"
    assert "unknown field(s) in spec.forProvider: size_gb, storage_gb" in str(unknown.value)
    with pytest.raises(TerminalError) as wrong:
        kind.parse_parameters({"forProvider": {"sizeGB": "five"}})
    assert wrong.value.reason == "InvalidSpec"
    assert "'sizeGB'" in str(wrong.value) and "size_gb" not in str(wrong.value)
    assert kind.to_spec({"storage_class": "a", "sizeGB": 1, "other": 2}) == {
        "storageClass": "a", "sizeGB": 1, "other": 2}


def test_bundled_kinds_spell_multi_word_parameters_in_camel_case() -> None:
    from lifecycle.machines.database import DatabaseInstance
    from lifecycle.machines.postgres import Database, Role

    assert DatabaseInstance.parse_parameters({"forProvider": {"storageGB": 40}}).storage_gb == 40
    for kind in (Role, Database):
        assert kind.parse_parameters(
            {"forProvider": {"connectionLimit": 3}}).connection_limit == 3
    for kind, key in ((DatabaseInstance, "storage_gb"), (Role, "connection_limit")):
        with pytest.raises(TerminalError, match=f"unknown field.*{key}"):
            kind.parse_parameters({"forProvider": {key: 3}})


def test_the_harness_late_initialises_under_the_alias(user_module: Any) -> None:
    from lifecycle.testing import Environment

    buckets: dict[str, Any] = {}
    env = Environment([(user_module.Bucket, user_module.BucketConnector(buckets))])
    env.provider_config()
    env.apply({"apiVersion": "storage.example.org/v1", "kind": "Bucket",
               "metadata": {"name": "photos", "namespace": "default"},
               "spec": {"forProvider": {"sizeGB": 3}}})
    env.run_until_idle()
    assert env.state("Bucket", "photos") == "ready"
    written = env.get("Bucket", "photos")["spec"]["forProvider"]
    assert written == {"region": "eu-west-1", "sizeGB": 3, "storageClass": "standard"}
    assert [b["size_gb"] for b in buckets.values()] == [3]


# ------------------------------------------------------------ fake_target
def test_fake_target_explores_the_users_client(user_module: Any) -> None:
    target = user_module.BUCKET.verify_target(user_module.Bucket)
    assert target.manifest("a")["spec"]["forProvider"] == {}
    assert target.update(target.manifest("a"))["spec"]["forProvider"] == {"sizeGB": 2}
    assert run_scenario(target).problems == []


def test_fake_target_catches_a_client_that_leaks(user_module: Any) -> None:
    class Leaky(user_module.BucketClient):
        """Hides a deleted bucket from observe but keeps it in the fake."""

        def observe(self, resource: Any) -> Any:
            found = self.buckets.get(resource.external_name)
            if found is not None and found.get("hidden"):
                return Observation.absent()
            return super().observe(resource)

        def delete(self, resource: Any) -> None:
            self.buckets[resource.external_name]["hidden"] = True

    class LeakyConnector(user_module.BucketConnector):
        def connect(self, resource: Any, config: Any) -> Leaky:
            return Leaky(self.buckets)

    healthy = fake_target(user_module.BucketConnector, changed={"sizeGB": 2})
    assert run_scenario(healthy(user_module.Bucket)).problems == []
    target = fake_target(LeakyConnector, changed={"sizeGB": 2})(user_module.Bucket)
    problems = run_scenario(target).problems
    assert any("leak" in p for p in problems), problems


def test_fake_target_needs_a_change() -> None:
    with pytest.raises(VerifyError, match="changed="):
        fake_target(dict, changed={})


# ------------------------------------------------------------ CLI checks in process
def test_a_kind_stands_for_its_machine(user_module: Any) -> None:
    assert machine_of(f"{MODULE}:Bucket") is user_module.BucketMachine
    assert machine_of(f"{MODULE}:BUCKET") is user_module.BucketMachine
    assert machine_of(f"{MODULE}:BucketMachine") is user_module.BucketMachine
    with pytest.raises(UsageError, match="is not a LifecycleMachine class"):
        machine_of(f"{MODULE}:BucketClient")


class NoDelete:
    """A client that forgot ``delete``."""

    def observe(self, resource: Any) -> None: ...
    def create(self, resource: Any) -> None: ...
    def update(self, resource: Any) -> None: ...


class Half:
    """A connector whose annotated client misses a method of the contract."""

    def connect(self, resource: Any, config: Any) -> NoDelete:
        return NoDelete()


class ClientBase:
    """A base class the real clients extend; it has none of the contract's methods."""


class RealClient(ClientBase):
    """A complete client."""

    def observe(self, resource: Any) -> None: ...
    def create(self, resource: Any) -> None: ...
    def update(self, resource: Any) -> None: ...
    def delete(self, resource: Any) -> None: ...


class BaseConnector:
    """A connector annotated with its clients' base class, as the PostgreSQL one is."""

    def connect(self, resource: Any, config: Any) -> ClientBase:
        return RealClient()


def test_a_connector_annotated_with_a_base_class_is_accepted() -> None:
    assert isinstance(check_connector(BaseConnector, "app:BaseConnector"), BaseConnector)
    from lifecycle import registry

    role = registry.find("Role")
    assert callable(check_connector(role.connector, "Role").connect)


def test_connectors_are_checked_for_the_contract(user_module: Any) -> None:
    made = check_connector(user_module.BucketConnector, "c")
    assert isinstance(made, user_module.BucketConnector)

    with pytest.raises(UsageError) as missing:
        check_connector(Half, "app:Half")
    assert str(missing.value) == ("app:Half: connect() returns NoDelete, which has no "
                                  "delete() method")
    with pytest.raises(UsageError, match="has no connect"):
        check_connector(user_module.BucketClient({}), "app:client")
    with pytest.raises(UsageError, match="calling the connector factory failed: TypeError"):
        check_connector(user_module.BucketClient, "app:BucketClient")


def test_run_refuses_a_connector_without_the_contract(installed: Path) -> None:
    result = lifecycle(installed, "run", "--embedded", "--kinds", "Bucket",
                       "--connector", f"{MODULE}:BucketClient")
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0
    assert "calling the connector factory failed" in result.stderr


# ------------------------------------------------------------ every command, installed
def test_verify_diagram_plan_and_crds_find_the_installed_kind(installed: Path,
                                                              tmp_path: Path) -> None:
    verified = lifecycle(installed, "verify", "Bucket", "--variant", "restart")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert "0 counterexample(s)" in verified.stdout and "verify: OK" in verified.stdout

    drawn = lifecycle(installed, "diagram", "Bucket")
    assert drawn.returncode == 0 and drawn.stdout.startswith('digraph "BucketMachine"')
    mermaid = lifecycle(installed, "diagram", f"{MODULE}:Bucket", "-f", "mermaid")
    assert mermaid.returncode == 0 and "title: BucketMachine" in mermaid.stdout

    written = lifecycle(installed, "diagrams", MODULE, "--root", str(tmp_path))
    assert written.returncode == 0, written.stderr
    assert (tmp_path / "diagrams" / "BucketMachine.svg").is_file()
    assert (tmp_path / "docs" / "reference" / "BucketMachine.md").is_file()

    dump = tmp_path / "photos.yaml"
    dump.write_text(DUMP)
    planned = lifecycle(installed, "plan", "--object", str(dump), "--observed", "drifted",
                        "-o", "json")
    assert planned.returncode == 0, planned.stderr
    document = json.loads(planned.stdout)
    assert document["decision"]["event"] == "update"
    assert document["transition"]["actions"] == ["update_external"]
    assert document["target"] == "updating" and document["requeue"]["after"] == 0.2

    crds = lifecycle(installed, "crds", "--kinds", "Bucket")
    assert crds.returncode == 0, crds.stderr
    crd = next(d for d in yaml.safe_load_all(crds.stdout) if d["spec"]["names"]["kind"] == "Bucket")
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    fields = schema["properties"]["spec"]["properties"]["forProvider"]["properties"]
    assert set(fields) == {"region", "sizeGB", "storageClass"}


def test_run_serves_the_installed_kind_until_an_object_is_ready(installed: Path) -> None:
    from kubernetes import client as k8s

    from lifecycle.driver.cluster import api_client

    proc = subprocess.Popen(
        [sys.executable, "-m", "lifecycle.cli", "run", "--embedded", "--kinds", "Bucket"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(installed))
    try:
        assert proc.stdout is not None
        match = re.search(r"(http://127\.0\.0\.1:\d+)", proc.stdout.readline())
        assert match, proc.stderr.read() if proc.stderr else ""
        custom = k8s.CustomObjectsApi(api_client(host=match.group(1)))
        custom.create_namespaced_custom_object(
            "storage.example.org", "v1", "default", "buckets",
            {"apiVersion": "storage.example.org/v1", "kind": "Bucket",
             "metadata": {"name": "photos"}, "spec": {"forProvider": {"sizeGB": 3}}})
        deadline = time.monotonic() + 30
        obj: dict[str, Any] = {}
        while time.monotonic() < deadline:
            obj = custom.get_namespaced_custom_object(
                "storage.example.org", "v1", "default", "buckets", "photos")
            if (obj.get("status") or {}).get("state") == "ready":
                break
            time.sleep(0.2)
        assert (obj.get("status") or {}).get("state") == "ready", obj
        assert obj["spec"]["forProvider"]["storageClass"] == "standard"  # late-initialised
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# ------------------------------------------------------------ packaging
def test_the_package_ships_its_type_marker_and_optional_extras() -> None:
    import tomllib

    root = Path(__file__).resolve().parent.parent
    project = tomllib.loads((root / "pyproject.toml").read_text())
    assert (root / "lifecycle" / "py.typed").is_file()
    assert "py.typed" in project["tool"]["setuptools"]["package-data"]["lifecycle"]
    extras = project["project"]["optional-dependencies"]
    required = " ".join(project["project"]["dependencies"])
    assert "psycopg" not in required and "graphviz" not in required
    assert any(d.startswith("psycopg") for d in extras["postgres"])
    assert any(d.startswith("graphviz") for d in extras["diagrams"])
    for package in ("psycopg", "graphviz", "pytest", "hypothesis"):
        assert any(d.startswith(package) for d in extras["dev"]), package


WITHOUT_EXTRAS = """\
import sys
sys.modules["psycopg"] = None  # neither optional extra is installed
sys.modules["graphviz"] = None
from lifecycle import registry
from lifecycle.cli import main
print(sorted(r.name for r in registry.registrations()))
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize(("argv", "code", "stdout", "stderr"), [
    (["crds", "--kinds", "DatabaseInstance"], 0, "kind: CustomResourceDefinition", ""),
    (["diagram", "DatabaseInstance", "-f", "dot"], 0, 'digraph "DatabaseInstanceMachine"', ""),
    (["diagram", "DatabaseInstance", "-f", "svg"], 2, "",
     "lifecycle diagram: cannot render svg: the graphviz Python package is not installed "
     "(pip install 'kube-lifecycle[diagrams]')"),
    (["run", "--kinds", "Role"], 2, "", "lifecycle run: no registered kind 'Role'"),
])
def test_without_the_optional_extras(argv: list[str], code: int, stdout: str,
                                     stderr: str) -> None:
    result = subprocess.run([sys.executable, "-c", WITHOUT_EXTRAS, *argv],
                            capture_output=True, text=True, timeout=120)
    first, _, rest = result.stdout.partition("\n")
    assert first == "['DatabaseClaim', 'DatabaseInstance', 'DatabaseInstanceClass']", result
    assert result.returncode == code, result.stderr
    assert stdout in rest
    assert result.stderr.startswith(stderr) and result.stderr.count("\n") <= 1, result.stderr
