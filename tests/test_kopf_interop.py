"""A kopf operator, a client we did not write, against ``lifecycle serve --no-operator``.

kopf runs in a subprocess (``python -m kopf run --standalone``, no peering)
with the server's kubeconfig, watching one namespace for a small CRD of its
own, ``kopfexamples.kopf.dev``. Its create, update and delete handlers must
all run: kopf adds its finalizer, records each handler's result in
``status`` and its last-handled configuration in an annotation, and on
deletion runs the delete handler, removes the finalizer and lets the object
go. Every wait is bounded, and failures include kopf's and the server's logs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from envtest_helpers import SERVERS, served, unique
from serve_helpers import Serve, eventually

GROUP, VERSION, PLURAL = "kopf.dev", "v1", "kopfexamples"
FINALIZER = "kopf.zalando.org/KopfFinalizerMarker"
LAST_HANDLED = "kopf.zalando.org/last-handled-configuration"
TIMEOUT = 60.0

CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": f"{PLURAL}.{GROUP}"},
    "spec": {
        "group": GROUP,
        "scope": "Namespaced",
        "names": {"kind": "KopfExample", "listKind": "KopfExampleList", "plural": PLURAL,
                  "singular": "kopfexample", "shortNames": ["kex"]},
        "versions": [{
            "name": VERSION, "served": True, "storage": True,
            "subresources": {"status": {}},
            "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                "spec": {"type": "object", "required": ["field"], "properties": {
                    "field": {"type": "string"},
                    "items": {"type": "array", "items": {"type": "string"}}}},
                "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            }}},
        }],
    },
}

OPERATOR = textwrap.dedent('''
    """A small kopf operator: create, update and delete handlers on KopfExample."""
    import os
    from pathlib import Path

    import kopf

    MARKS = Path(os.environ["KOPF_MARKS"])


    def mark(what, name, text):
        # Appended, so a handler that runs twice leaves its text twice.
        with (MARKS / f"{what}-{name}").open("a", encoding="utf-8") as f:
            f.write(text)


    @kopf.on.startup()
    def configure(settings, **_):
        settings.watching.server_timeout = 30
        settings.watching.client_timeout = 40
        settings.posting.level = 20


    @kopf.on.create("kopf.dev", "v1", "kopfexamples")
    def created(spec, name, **_):
        mark("created", name, spec["field"])
        return {"message": f"created with {spec['field']}"}


    @kopf.on.update("kopf.dev", "v1", "kopfexamples")
    def updated(spec, name, diff, **_):
        mark("updated", name, spec["field"])
        return {"message": f"updated to {spec['field']}", "changes": len(diff)}


    @kopf.on.delete("kopf.dev", "v1", "kopfexamples")
    def deleted(spec, name, **_):
        mark("deleted", name, spec["field"])
''')


class Kopf:
    """``python -m kopf run --standalone`` of a handler file against a kubeconfig."""

    def __init__(self, directory: Path, kubeconfig: Path, namespace: str) -> None:
        self.directory = directory
        self.marks = directory / "marks"
        self.marks.mkdir(parents=True, exist_ok=True)
        self.script = directory / "operator.py"
        self.script.write_text(OPERATOR, encoding="utf-8")
        self.log_path = directory / "kopf.log"
        self.kubeconfig = kubeconfig
        self.namespace = namespace
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Start kopf and wait until it watches the namespace (bounded)."""
        env = dict(os.environ, KUBECONFIG=str(self.kubeconfig), KOPF_MARKS=str(self.marks))
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "kopf", "run", "--standalone", "--verbose",
                 "--namespace", self.namespace, str(self.script)],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                cwd=self.directory)

        def watching() -> bool:
            if self.process is not None and self.process.poll() is not None:
                raise AssertionError(f"kopf exited with {self.process.returncode}\n"
                                     f"{self.log()}")
            return any("Starting the watch-stream for" in line and PLURAL in line
                       for line in self.log().splitlines())

        eventually(watching, timeout=TIMEOUT, what="kopf to watch kopfexamples")

    def stop(self) -> None:
        """Stop kopf (SIGINT, then kill after a bound)."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)

    def log(self) -> str:
        """kopf's output so far."""
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return ""

    def mark(self, what: str, name: str) -> str | None:
        """What handler ``what`` recorded for ``name`` (each run appends), or None if it
        has not run."""
        path = self.marks / f"{what}-{name}"
        return path.read_text(encoding="utf-8") if path.exists() else None


@pytest.fixture(params=SERVERS)
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Serve]:
    """An API server with no operator of ours and the KopfExample CRD Established:
    ``lifecycle serve --no-operator``, or the real API server (the envtest tier)."""
    from kubernetes import client as k8s

    real = request.getfixturevalue("real_cluster") if request.param == "envtest" else None
    with served(request.param, real, tmp_path / request.param, operator=False) as serving:
        ext = k8s.ApiextensionsV1Api(serving.client())
        try:
            ext.create_custom_resource_definition(CRD)
        except k8s.ApiException as exc:
            if exc.status != 409:  # the real server outlives a test; the CRD stays
                raise

        def established() -> bool:
            crd = ext.read_custom_resource_definition(f"{PLURAL}.{GROUP}").to_dict()
            conditions = (crd.get("status") or {}).get("conditions") or []
            return any(c["type"] == "Established" and c["status"] == "True"
                       for c in conditions)

        eventually(established, timeout=30, what="the KopfExample CRD to be Established")
        yield serving


def _get(api: Any, namespace: str, name: str) -> dict[str, Any] | None:
    from kubernetes.client import ApiException

    try:
        found: dict[str, Any] = api.get_namespaced_custom_object(GROUP, VERSION, namespace,
                                                                 PLURAL, name)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise
    return found


def test_kopf_create_update_delete_handlers_and_finalizer(server: Serve, tmp_path: Path) -> None:
    """Each kopf handler runs once per change; the finalizer guards deletion until it ran."""
    from kubernetes import client as k8s

    core = k8s.CoreV1Api(server.client())
    namespace = unique("kopf")
    core.create_namespace({"apiVersion": "v1", "kind": "Namespace",
                           "metadata": {"name": namespace}})
    api = k8s.CustomObjectsApi(server.client())
    operator = Kopf(tmp_path / "kopf", server.kubeconfig, namespace)
    context = ""
    try:
        operator.start()
        context = "creating"
        api.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "KopfExample",
            "metadata": {"name": "kex-1"}, "spec": {"field": "one", "items": ["a"]}})

        def handled_create() -> dict[str, Any] | None:
            obj = _get(api, namespace, "kex-1")
            if obj is None or not (obj.get("status") or {}).get("created"):
                return None
            return obj

        obj = eventually(handled_create, timeout=TIMEOUT, what="kopf's create handler")
        assert operator.mark("created", "kex-1") == "one"
        assert obj["status"]["created"] == {"message": "created with one"}
        assert FINALIZER in obj["metadata"].get("finalizers", []), obj["metadata"]
        last = json.loads(obj["metadata"]["annotations"][LAST_HANDLED])
        assert last["spec"] == {"field": "one", "items": ["a"]}

        context = "updating"
        api.patch_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "kex-1",
                                           {"spec": {"field": "two"}})

        def handled_update() -> dict[str, Any] | None:
            found = _get(api, namespace, "kex-1")
            status = (found or {}).get("status") or {}
            return found if status.get("updated", {}).get("message") == "updated to two" \
                else None

        obj = eventually(handled_update, timeout=TIMEOUT, what="kopf's update handler")
        assert operator.mark("updated", "kex-1") == "two"
        assert json.loads(obj["metadata"]["annotations"][LAST_HANDLED])["spec"]["field"] == "two"
        assert obj["status"]["created"] == {"message": "created with one"}, "status was reset"

        context = "deleting"
        api.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "kex-1")
        eventually(lambda: _get(api, namespace, "kex-1") is None, timeout=TIMEOUT,
                   what="the object to be gone after kopf's delete handler")
        assert operator.mark("deleted", "kex-1") == "two", "the delete handler did not run"
        # Handlers run once each: no second create after the object was gone. A later
        # object, handled after kex-1's deletion came down the same watch, shows kopf
        # had its chance to run kex-1's handlers again.
        context = "creating a later object"
        api.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "KopfExample",
            "metadata": {"name": "kex-2"}, "spec": {"field": "later"}})
        eventually(lambda: operator.mark("created", "kex-2") == "later", timeout=TIMEOUT,
                   what="kopf's create handler for a later object")
        assert [operator.mark(what, "kex-1") for what in ("created", "updated", "deleted")
                ] == ["one", "two", "two"]
        assert "Traceback" not in operator.log(), operator.log()[-6000:]
    except AssertionError as exc:
        raise AssertionError(f"{exc}\nwhile {context}\n--- kopf log (tail)\n"
                             f"{operator.log()[-6000:]}\n{server.log_tail(3000)}") from None
    finally:
        operator.stop()


def test_kopf_handles_objects_that_existed_before_it_started(server: Serve,
                                                             tmp_path: Path) -> None:
    """Objects created while kopf was down are listed and handled when it starts."""
    from kubernetes import client as k8s

    core = k8s.CoreV1Api(server.client())
    namespace = unique("kopf-early")
    core.create_namespace({"apiVersion": "v1", "kind": "Namespace",
                           "metadata": {"name": namespace}})
    api = k8s.CustomObjectsApi(server.client())
    for index in range(3):
        api.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "KopfExample",
            "metadata": {"name": f"early-{index}"}, "spec": {"field": f"v{index}"}})
    operator = Kopf(tmp_path / "kopf", server.kubeconfig, namespace)
    try:
        operator.start()
        for index in range(3):
            eventually(lambda i=index: operator.mark("created", f"early-{i}") == f"v{i}",
                       timeout=TIMEOUT, what=f"kopf's create handler for early-{index}")
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n--- kopf log (tail)\n{operator.log()[-6000:]}\n"
                             f"{server.log_tail(3000)}") from None
    finally:
        operator.stop()
