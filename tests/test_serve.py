"""``lifecycle serve`` from the outside: a subprocess on a free port, its state file and restarts.

Each test starts the command with a private kubeconfig and state file, talks
to it with the official client, and stops it with SIGTERM (or SIGKILL) in a
``finally``; every wait is bounded.
"""

from __future__ import annotations

import json
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s
from serve_helpers import Serve, eventually

GROUP, VERSION, PLURAL = "db.lifecycle.dev", "v1alpha1", "databaseinstances"


def database(name: str) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "DatabaseInstance",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"forProvider": {"engine": "postgres", "storageGB": 20, "size": "small"},
                     "providerConfigRef": {"name": "default"},
                     "writeConnectionSecretToRef": {"name": f"{name}-connection"}}}


def custom(server: Serve) -> k8s.CustomObjectsApi:
    return k8s.CustomObjectsApi(server.client())


def read(server: Serve, name: str) -> dict[str, Any]:
    found: dict[str, Any] = custom(server).get_namespaced_custom_object(
        GROUP, VERSION, "default", PLURAL, name)
    return found


def ready(server: Serve, name: str) -> dict[str, Any] | None:
    obj = read(server, name)
    return obj if (obj.get("status") or {}).get("state") == "ready" else None


def saved_object(state: Path, kind: str, name: str) -> dict[str, Any] | None:
    """One object of the ``default`` namespace as the state file holds it (None if not)."""
    db = sqlite3.connect(state)
    try:
        row = db.execute("SELECT body FROM objects WHERE kind = ? AND namespace = 'default' "
                         "AND name = ?", (kind, name)).fetchone()
    finally:
        db.close()
    return None if row is None else json.loads(row[0])


def saved_cloud(state: Path) -> dict[str, Any]:
    """The simulated cloud as the (closed) state file holds it."""
    db = sqlite3.connect(state)
    try:
        (body,) = db.execute("SELECT body FROM external WHERE name = 'DatabaseInstance'").fetchone()
    finally:
        db.close()
    doc: dict[str, Any] = json.loads(body)
    return doc


def test_a_restart_keeps_objects_versions_and_the_simulated_cloud(tmp_path: Path) -> None:
    server = Serve(tmp_path)
    try:
        server.start()
        custom(server).create_namespaced_custom_object(GROUP, VERSION, "default", PLURAL,
                                                       database("first"))
        eventually(lambda: ready(server, "first"), timeout=60, what="first Ready")
        assert server.stop() == 0, server.log_tail()
        # What the stop saved, whatever the operator wrote last.
        first = saved_object(server.state, "DatabaseInstance", "first")
        assert first is not None and first["status"]["state"] == "ready"
        external = first["status"]["externalName"]

        cloud = saved_cloud(server.state)
        assert [i["name"] for i in cloud["instances"]] == [external]
        assert cloud["creations"] == {external: 1}

        server.start()
        again = read(server, "first")
        assert again["metadata"]["uid"] == first["metadata"]["uid"]
        assert again["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
        assert again["status"]["state"] == "ready"

        created = custom(server).create_namespaced_custom_object(
            GROUP, VERSION, "default", PLURAL, database("second"))
        assert int(created["metadata"]["resourceVersion"]) > int(
            first["metadata"]["resourceVersion"])
        second = eventually(lambda: ready(server, "second"), timeout=60, what="second Ready")
        assert read(server, "first")["status"]["state"] == "ready"
        assert server.stop() == 0, server.log_tail()

        cloud = saved_cloud(server.state)
        assert cloud["creations"] == {external: 1, second["status"]["externalName"]: 1}, (
            "the first instance was created again after the restart")
    finally:
        server.stop()


def configmap(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default"}, "data": {"k": name}}


def test_kill_9_loses_at_most_the_last_interval_and_never_reuses_a_version(
        tmp_path: Path) -> None:
    server = Serve(tmp_path, operator=False, extra_args=["--save-interval", "0.2"])
    try:
        server.start()
        core = k8s.CoreV1Api(server.client())
        made = core.create_namespaced_config_map("default", configmap("kept"))
        seen = int(made.metadata.resource_version)
        # No pause for a save interval: with durable writes (the default) a create is
        # saved before it is answered, and the server holds the state file locked.
        late = core.create_namespaced_config_map("default", configmap("late"))
        seen = max(seen, int(late.metadata.resource_version))
        assert server.process is not None
        server.process.kill()
        server.process.wait(10)
        server.process = None

        server.start()
        core = k8s.CoreV1Api(server.client())
        kept = core.read_namespaced_config_map("kept", "default")
        assert kept.metadata.uid == made.metadata.uid
        assert kept.metadata.resource_version == made.metadata.resource_version
        after = core.create_namespaced_config_map("default", configmap("after"))
        assert int(after.metadata.resource_version) > seen
        listed = core.list_namespaced_config_map("default")
        assert int(listed.metadata.resource_version) > seen
    finally:
        server.stop()


def test_sigterm_saves_everything_and_versions_continue(tmp_path: Path) -> None:
    server = Serve(tmp_path, operator=False, extra_args=["--save-interval", "30"])
    try:
        server.start()
        core = k8s.CoreV1Api(server.client())
        made = core.create_namespaced_config_map("default", configmap("only-in-memory"))
        assert server.stop() == 0  # long before the first periodic save
        server.start()
        core = k8s.CoreV1Api(server.client())
        kept = core.read_namespaced_config_map("only-in-memory", "default")
        assert kept.metadata.uid == made.metadata.uid
        after = core.create_namespaced_config_map("default", configmap("next"))
        # a clean stop saved the exact counter: the next write continues from it
        assert int(after.metadata.resource_version) == int(made.metadata.resource_version) + 1
    finally:
        server.stop()


# ------------------------------------------------------------------ one-line errors
def run_serve(tmp_path: Path, *args: str, timeout: float = 60.0) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "lifecycle", "serve", "--no-operator",
            "--kubeconfig", str(tmp_path / "kubeconfig"), *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=tmp_path)


def one_line_error(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("lifecycle serve: "), done.stderr
    assert "Traceback" not in done.stderr
    return lines[0]


def test_a_port_in_use_is_one_line(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        line = one_line_error(run_serve(tmp_path, "--port", str(port),
                                        "--state", str(tmp_path / "s.db")))
    assert f"cannot listen on 127.0.0.1:{port}" in line and "in use" in line


def test_a_corrupt_state_file_is_one_line(tmp_path: Path) -> None:
    state = tmp_path / "s.db"
    state.write_bytes(b"not a database at all\n" * 100)
    line = one_line_error(run_serve(tmp_path, "--port", "1", "--state", str(state)))
    assert "corrupt or not a lifecycle state file" in line and str(state) in line
    assert state.read_bytes() == b"not a database at all\n" * 100  # left as it was


def test_an_unwritable_state_file_is_one_line(tmp_path: Path) -> None:
    line = one_line_error(run_serve(tmp_path, "--state", str(tmp_path / "missing" / "s.db")))
    assert "cannot create the state file" in line


def test_a_state_file_in_use_is_one_line(tmp_path: Path) -> None:
    server = Serve(tmp_path, operator=False)
    try:
        server.start()
        line = one_line_error(run_serve(tmp_path, "--port", "1", "--state", str(server.state)))
        assert "in use by another process" in line
    finally:
        server.stop()


@pytest.mark.parametrize("address", ["0.0.0.0", "192.0.2.10"])
def test_a_non_loopback_address_needs_allow_remote(tmp_path: Path, address: str) -> None:
    line = one_line_error(run_serve(tmp_path, "--address", address,
                                    "--state", str(tmp_path / "s.db")))
    assert "not a loopback address" in line and "--allow-remote" in line
    assert not (tmp_path / "s.db").exists()  # refused before touching anything


# ------------------------------------------------- the store's snapshot and the state file
WIDGETS_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.test"},
    "spec": {"group": "example.test", "scope": "Namespaced",
             "names": {"kind": "Widget", "plural": "widgets", "singular": "widget",
                       "listKind": "WidgetList"},
             "versions": [{"name": "v1", "served": True, "storage": True,
                           "subresources": {"status": {}},
                           "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                               "spec": {"type": "object", "properties": {
                                   "size": {"type": "integer"}}}}}}}]},
}


def widget(name: str, size: int = 1) -> dict[str, Any]:
    return {"apiVersion": "example.test/v1", "kind": "Widget",
            "metadata": {"name": name, "namespace": "default"}, "spec": {"size": size}}


def populated() -> Any:
    from lifecycle.sim.apiserver import EmbeddedAPI

    api = EmbeddedAPI(seed=1)
    api.create(WIDGETS_CRD)
    first = api.create(widget("first"))
    api.record_event(first, "Normal", "Made", "made it")
    api.create(configmap("settings"))
    return api


def test_restore_brings_back_objects_crd_kinds_and_the_counter() -> None:
    from lifecycle.kube.errors import Gone
    from lifecycle.sim.apiserver import EmbeddedAPI

    old = populated()
    saved = old.snapshot()
    restored = EmbeddedAPI(seed=1)  # the same seed: uids must still never repeat
    restored.restore(saved["objects"], saved["resourceVersion"])
    for api_version, kind, name in (("example.test/v1", "Widget", "first"),
                                    ("v1", "ConfigMap", "settings")):
        assert restored.get(api_version, kind, "default", name) == old.get(
            api_version, kind, "default", name)
    assert restored.resource_version == old.resource_version
    with pytest.raises(Gone):
        restored.watch("example.test/v1", "Widget", None, "1")
    resumed = restored.watch("example.test/v1", "Widget", None, str(saved["resourceVersion"]),
                             timeout=2)
    second = restored.create(widget("second", 3))
    assert int(second["metadata"]["resourceVersion"]) == saved["resourceVersion"] + 1
    assert second["metadata"]["uid"] not in {o["metadata"].get("uid")
                                             for o in saved["objects"]}
    event = next(iter(resumed))
    assert (event.type, event.object["metadata"]["name"]) == ("ADDED", "second")
    resumed.stop()
    again = restored.record_event(restored.get("example.test/v1", "Widget", "default", "first"),
                                  "Normal", "Made", "made it")
    assert again["count"] == 2  # the same Event, aggregated as before the restart


def test_restore_refuses_objects_of_kinds_nothing_serves() -> None:
    from lifecycle.kube.errors import NotFound
    from lifecycle.sim.apiserver import EmbeddedAPI

    saved = populated().snapshot()
    without_crd = [o for o in saved["objects"] if o["kind"] != "CustomResourceDefinition"]
    api = EmbeddedAPI()
    before = api.snapshot()
    with pytest.raises(NotFound):
        api.restore(without_crd, saved["resourceVersion"])
    assert api.snapshot() == before


def test_the_state_file_saves_what_changed_and_knows_a_crash() -> None:
    import tempfile

    from lifecycle.sim.persist import CRASH_GAP, StateFile

    api = populated()
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "state.db"
        state = StateFile(path)
        assert state.load() is None
        assert state.save(api.snapshot(with_external=lambda: {"cloud": {"n": 1}}))
        assert not state.save(api.snapshot(with_external=lambda: {"cloud": {"n": 1}}))
        api.patch("example.test/v1", "Widget", "default", "first", {"spec": {"size": 9}})
        api.delete("v1", "ConfigMap", "default", "settings")
        assert state.save(api.snapshot(with_external=lambda: {"cloud": {"n": 2}}))
        state.close()  # not marked clean: as if the process died after this save

        state = StateFile(path)
        loaded = state.load()
        assert loaded is not None and not loaded.clean
        assert loaded.resource_version == int(api.resource_version)
        assert loaded.restart_resource_version == int(api.resource_version) + CRASH_GAP
        assert loaded.external == {"cloud": {"n": 2}}
        assert sorted(o["metadata"]["name"] for o in loaded.objects
                      if o["kind"] in ("Widget", "ConfigMap")) == ["first"]
        assert next(o for o in loaded.objects if o["kind"] == "Widget")["spec"] == {"size": 9}
        state.close(clean=True)

        state = StateFile(path)
        loaded = state.load()
        assert loaded is not None and loaded.clean
        assert loaded.restart_resource_version == int(api.resource_version)
        state.close(clean=True)
