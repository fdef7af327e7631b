"""``lifecycle serve --state``: a write acknowledged is a write kept, whatever kills the server.

Each test runs ``lifecycle serve`` as a subprocess with a save interval far
longer than the test (so the periodic save never helps), acknowledges
writes through the official client, sends ``SIGKILL`` the moment the answer
arrives, restarts on the same state file and finds every acknowledged write.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kubernetes import client as k8s
from serve_helpers import Serve, eventually

GROUP, VERSION, PLURAL = "db.lifecycle.dev", "v1alpha1", "databaseinstances"
FINALIZER = "lifecycle.dev/finalizer"


def configmap(name: str, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default"}, "data": data}


def kill_9(server: Serve) -> None:
    assert server.process is not None
    server.process.kill()
    server.process.wait(10)
    server.process = None


def test_kill_9_right_after_an_acknowledged_write_loses_nothing(tmp_path: Path) -> None:
    server = Serve(tmp_path, operator=False, extra_args=["--save-interval", "600"])
    acknowledged: dict[str, tuple[str, str]] = {}
    try:
        for round_ in range(4):
            server.start()
            core = k8s.CoreV1Api(server.client())
            for name, (uid, version) in acknowledged.items():
                kept = core.read_namespaced_config_map(name, "default")
                assert (kept.metadata.uid, kept.metadata.resource_version) == (uid, version), name
                assert FINALIZER in (kept.metadata.finalizers or []), name
            name = f"round-{round_}"
            core.create_namespaced_config_map("default", configmap(name, n=str(round_)))
            # The write the issue lost: a finalizer added just before the crash.
            done = core.patch_namespaced_config_map(
                name, "default", {"metadata": {"finalizers": [FINALIZER]}})
            kill_9(server)
            acknowledged[name] = (done.metadata.uid, done.metadata.resource_version)
        server.start()
        core = k8s.CoreV1Api(server.client())
        for name, (uid, version) in acknowledged.items():
            kept = core.read_namespaced_config_map(name, "default")
            assert (kept.metadata.uid, kept.metadata.resource_version) == (uid, version), name
    finally:
        server.stop()


def test_the_operators_finalizer_survives_a_kill_9_just_after_it_was_written(
        tmp_path: Path) -> None:
    """The issue's case: the operator creates the external resource and writes its finalizer;
    the server is killed the moment the finalizer is visible; after the restart the
    finalizer is there, so deleting the object deletes the external resource (no leak)."""
    server = Serve(tmp_path, extra_args=["--save-interval", "600"])
    try:
        server.start()
        api = k8s.CustomObjectsApi(server.client())
        body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "DatabaseInstance",
                "metadata": {"name": "orders", "namespace": "default"},
                "spec": {"forProvider": {"engine": "postgres", "storageGB": 20,
                                         "size": "small"},
                         "providerConfigRef": {"name": "default"},
                         "writeConnectionSecretToRef": {"name": "orders-connection"}}}
        api.create_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, body)

        def finalized() -> dict[str, Any] | None:
            obj: dict[str, Any] = api.get_namespaced_custom_object(
                GROUP, VERSION, "default", PLURAL, "orders")
            return obj if FINALIZER in (obj["metadata"].get("finalizers") or []) else None

        seen = eventually(finalized, timeout=60, what="the operator's finalizer", interval=0.01)
        kill_9(server)
        server.start()
        api = k8s.CustomObjectsApi(server.client())
        after = api.get_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, "orders")
        assert FINALIZER in after["metadata"]["finalizers"]
        assert int(after["metadata"]["resourceVersion"]) >= int(
            seen["metadata"]["resourceVersion"])
        assert after["metadata"]["uid"] == seen["metadata"]["uid"]
    finally:
        server.stop()
