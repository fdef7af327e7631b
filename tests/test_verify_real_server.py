"""``lifecycle verify --kubeconfig``: the crash explorer on a real API server (envtest tier).

The scenario's Kubernetes API is the session's real kube-apiserver; the
simulated cloud and the virtual clock stay in the test process. Each test
explores a few points only (``--points``), so the tier stays quick: every
run is a dozen requests or more to the real server.
"""

from __future__ import annotations

import base64
import json
import re
from typing import Any

import attrs
import pytest
from kubernetes import client as k8s

from lifecycle.cli import main
from lifecycle.core.kind import FINALIZER, INTENT, Kind
from lifecycle.driver.cluster import api_client
from lifecycle.machines.database import DatabaseInstance
from lifecycle.providers.simcloud.scenarios.verify import simcloud_target
from lifecycle.registry import Registration
from lifecycle.runtime.reconciler import Reconciler
from lifecycle.verify import Target, run_scenario
from lifecycle.verify.remote import RUN_LABEL, RealServer, ServerRefused

#: The side-effect points the tests explore: the finalizer and journal write, the create.
POINTS = "2-3"


class LateFinalizerAPI:
    """Deliberately broken: the engine's finalizer reaches the server only once the create
    is committed in the journal; the write that should claim the object before the
    external create goes out without it."""

    def __init__(self, api: Any) -> None:
        self.api = api

    def __getattr__(self, name: str) -> Any:
        return getattr(self.api, name)

    def replace(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Write ``obj`` with the finalizer dropped while the create is pending."""
        meta = obj.get("metadata") or {}
        raw = (meta.get("annotations") or {}).get(INTENT)
        if obj.get("kind") != DatabaseInstance.kind or not raw:
            return self.api.replace(obj)
        intent = json.loads(raw)
        pending = intent.get("operation") == "create" and intent.get("outcome") != "succeeded"
        finalizers = list(meta.get("finalizers") or [])
        if pending:
            finalizers = [f for f in finalizers if f != FINALIZER]
        elif FINALIZER not in finalizers and not meta.get("deletionTimestamp"):
            finalizers.append(FINALIZER)  # committed: now the object is claimed
        return self.api.replace({**obj, "metadata": {**meta, "finalizers": finalizers}})


def _late_finalizer(api: Any, kind: Kind, connector: Any, **options: Any) -> Reconciler:
    return Reconciler(LateFinalizerAPI(api), kind, connector, **options)


def _broken_target(kind: Kind) -> Target:
    """DatabaseInstance with an engine that commits its finalizer only after the create."""
    return attrs.evolve(simcloud_target(kind), reconciler=_late_finalizer)


#: The DatabaseInstance scenario alone (its registration also adds the tenancy scenarios).
DATABASE = Registration(DatabaseInstance, verify_target=simcloud_target)
#: The same scenario run by the deliberately broken engine.
BROKEN = Registration(DatabaseInstance, verify_target=_broken_target)


def _points(out: str) -> list[str]:
    """Each explored point's line: verdict, index, side, variant, phase, operation (the
    default external name, from the object's uid, as ``alpha-<uid>``)."""
    return [re.sub(r"\balpha-[0-9a-f]{8}\b", "alpha-<uid>", line.strip())
            for line in out.splitlines() if re.match(r"\s+(ok|FAIL)\s+#", line)]


def _summary(out: str) -> tuple[int, int, int]:
    found = re.search(r"(\d+) side-effect points, (\d+) runs .*?, (\d+) counterexample", out)
    assert found, out
    points, runs, counterexamples = found.groups()
    return int(points), int(runs), int(counterexamples)


@pytest.fixture
def sentinels(real_cluster: Any) -> Any:
    """Objects the explorer must never touch: a ProviderConfig ``default`` and the Secret
    ``default-credentials`` in the server's own ``default`` namespace, as a user has them.
    Yields a function returning their resourceVersions now."""
    real_cluster.install_crds([DatabaseInstance])
    client = real_cluster.api_client()
    core, custom = k8s.CoreV1Api(client), k8s.CustomObjectsApi(client)
    for call in (
        lambda: core.create_namespaced_secret("default", {
            "metadata": {"name": "default-credentials"}, "stringData": {"accessKeyId": "mine"}}),
        lambda: custom.create_cluster_custom_object(
            "lifecycle.dev", "v1alpha1", "providerconfigs", {
                "apiVersion": "lifecycle.dev/v1alpha1", "kind": "ProviderConfig",
                "metadata": {"name": "default"},
                "spec": {"credentials": {"secretRef": {"name": "default-credentials",
                                                       "namespace": "default"}}}})):
        try:
            call()
        except k8s.ApiException as exc:
            assert exc.status == 409, exc  # left by another test: still someone else's

    def versions() -> tuple[str, str]:
        secret = core.read_namespaced_secret("default-credentials", "default")
        config = custom.get_cluster_custom_object("lifecycle.dev", "v1alpha1",
                                                  "providerconfigs", "default")
        return secret.metadata.resource_version, config["metadata"]["resourceVersion"]

    return versions


def test_verify_on_the_real_server_explores_points_without_counterexample(
        real_cluster: Any, sentinels: Any, capsys: pytest.CaptureFixture[str]) -> None:
    before = sentinels()
    code = main(["verify", f"{__name__}:DATABASE", "--points", POINTS,
                 "--kubeconfig", str(real_cluster.kubeconfig)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert f"on the API server at {real_cluster.url}" in out
    points, runs, counterexamples = _summary(out)
    assert counterexamples == 0 and out.strip().endswith("verify: OK")
    assert points >= 20  # the whole scenario ran on the real server to count them
    assert runs == 2 * 2 * 2  # points 2 and 3, both sides, both variants
    explored = _points(out)
    assert len(explored) == runs and all(line.startswith("ok") for line in explored)
    assert any("external.create" in line for line in explored)
    # The crash points are the same operations as on the embedded API.
    assert main(["verify", f"{__name__}:DATABASE", "--points", POINTS]) == 0
    assert _points(capsys.readouterr().out) == explored
    # Nothing of the user's was touched, and every run cleaned up after itself.
    assert sentinels() == before
    client = real_cluster.api_client()
    left = k8s.CoreV1Api(client).list_namespace(label_selector=RUN_LABEL).items
    assert all(ns.metadata.deletion_timestamp for ns in left)  # being deleted, or gone
    configs = k8s.CustomObjectsApi(client).list_cluster_custom_object(
        "lifecycle.dev", "v1alpha1", "providerconfigs")["items"]
    assert not [c for c in configs if re.match(r"lv[0-9a-f]{8}-", c["metadata"]["name"])]


def test_a_broken_engine_yields_a_counterexample_on_the_real_server_too(
        real_cluster: Any, capsys: pytest.CaptureFixture[str]) -> None:
    target = _broken_target(DatabaseInstance)
    operations = run_scenario(target).recorder.operations
    create = next(i for i, op in enumerate(operations, 1) if op.startswith("external.create"))
    assert "+finalizer" not in operations[create - 2]  # the claim without the finalizer
    code = main(["verify", f"{__name__}:BROKEN", "--points", str(create), "--side", "after",
                 "--variant", "delete-while-down", "--kubeconfig", str(real_cluster.kubeconfig)])
    out = capsys.readouterr().out
    assert code == 1, out
    assert _summary(out)[1:] == (1, 1)
    assert f"COUNTEREXAMPLE {__name__}:BROKEN: crash after point #{create}" in out
    assert re.search(r"problem: after \w+: external resource \S+ leaked", out), out
    assert "user (no engine running): delete alpha" in out
    assert f"--kubeconfig {real_cluster.kubeconfig}" in out  # the replay line names the server
    assert out.strip().endswith("verify: FAILED")


def test_credentials_the_real_server_refuses_are_one_line(
        real_cluster: Any, tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    config = real_cluster.service_account_kubeconfig(tmp_path / "kc", "verify-tests", "nobody")
    assert main(["verify", f"{__name__}:DATABASE", "--kubeconfig", str(config)]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in captured.err
    assert "refuses what the explorer needs (403): may not create namespaces" in lines[0]
    assert captured.out == ""


@pytest.mark.parametrize("content", [None, "clusters: [\n"])
def test_a_missing_or_broken_kubeconfig_is_one_line(
        content: str | None, tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "kc"
    if content is not None:
        path.write_text(content)
    assert main(["verify", f"{__name__}:DATABASE", "--kubeconfig", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert f"kubeconfig {path}" in err


def test_a_run_sees_its_own_world_and_its_writes_as_they_were(real_cluster: Any) -> None:
    server = RealServer.from_kubeconfig(str(real_cluster.kubeconfig))
    api = server.open()
    try:
        real = api.namespaces["default"]
        assert real.startswith(api.prefix + "-") and real != "default"
        assert api.get("v1", "Namespace", None, "default")["metadata"]["name"] == "default"
        first = api.create({"apiVersion": "v1", "kind": "Secret",
                            "metadata": {"name": "s", "namespace": "default"},
                            "stringData": {"v": "one"}})
        assert first["metadata"]["namespace"] == "default"
        after_create = api.resource_version
        api.replace({**first, "stringData": {"v": "two"}})
        secrets, _ = api.list("v1", "Secret")
        assert [(s["metadata"]["namespace"], s["metadata"]["name"]) for s in secrets] == [
            ("default", "s")]  # only the run's, under the scenario's names
        then, _, _, _ = api.list_page("v1", "Secret", resource_version=after_create,
                                      resource_version_match="Exact")
        assert [s["data"]["v"] for s in then] == [base64.b64encode(b"one").decode()]
        now, _, _, _ = api.list_page("v1", "Secret", resource_version=api.resource_version,
                                     resource_version_match="Exact")
        assert [s["data"]["v"] for s in now] == [base64.b64encode(b"two").decode()]
        # The server's own default namespace holds no Secret of the run.
        core = k8s.CoreV1Api(real_cluster.api_client())
        assert "s" not in {s.metadata.name for s in core.list_namespaced_secret("default").items}
        assert core.read_namespaced_secret("s", real).metadata.name == "s"
    finally:
        server.close(api)
    assert core.read_namespace(real).metadata.deletion_timestamp is not None
    assert server.leftovers == []


def test_stale_reads_on_the_real_server(real_cluster: Any,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["verify", f"{__name__}:DATABASE", "--points", "2", "--side", "before",
                 "--stale", "2", "--kubeconfig", str(real_cluster.kubeconfig)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert _summary(out)[1:] == (3, 0)  # restart, delete-while-down and concurrent
    assert "reads up to 2 write(s) stale" in out


def test_a_refusal_in_the_middle_stops_the_exploration(real_cluster: Any, tmp_path: Any) -> None:
    config = real_cluster.service_account_kubeconfig(tmp_path / "kc", "verify-tests", "nobody")
    server = RealServer(api_client(kubeconfig=str(config)), kubeconfig=str(config))
    server.reachable()  # it answers; the credentials may do nothing
    with pytest.raises(ServerRefused, match=r"refused a request \(403 Forbidden\)"):
        run_scenario(simcloud_target(DatabaseInstance), server=server)
    assert not issubclass(ServerRefused, Exception)  # the engine cannot retry it away
