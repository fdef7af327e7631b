"""The comparison operator: the DatabaseInstance lifecycle written with kopf.

It does the work the lifecycle operator does from absent to Ready, the way a
kopf operator is usually written: a finalizer (kopf adds its own because a
delete handler exists), the connection Secret with a generated password
created before the cloud call, the instance created in the same simulated
cloud (:func:`benchmarks.e2e.bench_cloud`), one Event, and status
``phase: Ready`` with a ``Ready`` condition. A timer polls every Ready object
every ``POLL`` seconds and patches the status only when what the cloud
reports changed. The provider credentials are read once at startup.

Progress is kept in annotations (the CRD's status schema has no room for
kopf's own status field); kopf's "handler succeeded" Events are not posted
(posting level WARNING), so each object gets the one explicit Event.

Run as ``python -m benchmarks.kopf_operator KUBECONFIG NAMESPACE POLL STATS``;
prints ``ready`` once kopf is up, stops on SIGTERM. It connects as the
kubeconfig says (kopf's own kubeconfig login), serves one namespace, and
writes the connection resets it met (:mod:`benchmarks.e2e_netcount`) to the
file ``STATS`` when it exits.
"""

from __future__ import annotations

import base64
import datetime
import logging
import os
import secrets
import sys
import threading
from typing import Any

import kopf
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from benchmarks import e2e_netcount
from benchmarks.e2e import GROUP, PLURAL, VERSION, bench_cloud

CLOUD = bench_cloud()
STATE: dict[str, Any] = {}


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _ready_status(desc: dict[str, Any]) -> dict[str, Any]:
    available = desc["state"] == "available"
    return {
        "state": "ready" if available else "creating",
        "phase": "Ready" if available else "Progressing",
        "conditions": [{"type": "Ready", "status": "True" if available else "False",
                        "reason": "Available" if available else "Creating",
                        "lastTransitionTime": _now()}],
        "atProvider": {"state": desc["state"], "endpoint": desc["endpoint"],
                       "version": desc["version"]},
    }


def build(kubeconfig: str, poll: float) -> None:
    """Register the handlers for the server ``kubeconfig`` names, polling every ``poll`` s."""
    core = k8s.CoreV1Api(k8s_config.new_client_from_config(config_file=kubeconfig))
    os.environ["KUBECONFIG"] = kubeconfig

    @kopf.on.login()
    def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
        return kopf.login_with_kubeconfig(**kwargs)

    @kopf.on.startup()
    def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
        settings.posting.level = logging.WARNING
        settings.persistence.progress_storage = kopf.AnnotationsProgressStorage()
        settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage()
        secret = core.read_namespaced_secret("default-credentials", "default")
        data = {k: base64.b64decode(v).decode() for k, v in (secret.data or {}).items()}
        STATE["credentials"] = (data["accessKeyId"], data["secretAccessKey"])

    @kopf.on.create(GROUP, VERSION, PLURAL)
    def create(body: Any, spec: Any, name: str, namespace: str, uid: str, patch: Any,
               **_: Any) -> None:
        password = secrets.token_urlsafe(18)
        target = (spec.get("writeConnectionSecretToRef") or {}).get("name", f"{name}-conn")
        secret = {
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": target, "namespace": namespace, "ownerReferences": [{
                "apiVersion": f"{GROUP}/{VERSION}", "kind": "DatabaseInstance",
                "name": name, "uid": uid, "controller": True}]},
            "stringData": {"username": "admin", "password": password},
        }
        try:
            core.create_namespaced_secret(namespace, secret)
        except k8s.ApiException as exc:
            if exc.status != 409:
                raise
            stored = core.read_namespaced_secret(target, namespace)
            password = base64.b64decode(stored.data["password"]).decode()
        wanted = dict(spec.get("forProvider") or {})
        params = {"engine": wanted.get("engine", "postgres"),
                  "storage_gb": wanted.get("storageGB", 20), "size": wanted.get("size", "small")}
        if wanted.get("version"):
            params["version"] = wanted["version"]
        try:
            CLOUD.create_instance(STATE["credentials"], name, params, password=password,
                                  client_token=uid)
        except Exception as exc:
            if type(exc).__name__ != "CloudAlreadyExists":
                raise
        desc = CLOUD.describe_instance(STATE["credentials"], name)
        kopf.event(body, type="Normal", reason="Created",
                   message=f"instance {name} created")
        patch.status.update(_ready_status(desc))

    @kopf.timer(GROUP, VERSION, PLURAL, interval=poll, initial_delay=poll)
    def observe(name: str, status: Any, patch: Any, **_: Any) -> None:
        try:
            desc = CLOUD.describe_instance(STATE["credentials"], name)
        except Exception as exc:
            if type(exc).__name__ == "CloudNotFound":
                return  # not created yet: the create handler has not run
            raise
        wanted = _ready_status(desc)
        if (status.get("phase") != wanted["phase"]
                or status.get("atProvider") != wanted["atProvider"]):
            patch.status.update(wanted)

    @kopf.on.delete(GROUP, VERSION, PLURAL)
    def delete(name: str, **_: Any) -> None:
        try:
            CLOUD.delete_instance(STATE["credentials"], name)
        except Exception as exc:
            if type(exc).__name__ != "CloudNotFound":
                raise


class _Disconnects(logging.Handler):
    """Counts kopf's failed request attempts on a connection the server closed unanswered
    (aiohttp reports those without an exception from the socket)."""

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if "Request attempt" in message and "ServerDisconnected" in message:
            e2e_netcount.note_disconnect()


def main(argv: list[str]) -> int:
    """Run the kopf operator until SIGTERM."""
    if len(argv) != 4:
        print("usage: python -m benchmarks.kopf_operator KUBECONFIG NAMESPACE POLL STATS",
              file=sys.stderr)
        return 2
    e2e_netcount.install()
    e2e_netcount.write_at_exit(argv[3])
    build(argv[0], float(argv[2]))
    ready = threading.Event()

    def announce() -> None:
        ready.wait()
        print("ready", flush=True)

    threading.Thread(target=announce, daemon=True).start()
    kopf.configure(verbose=False, quiet=True)
    logging.getLogger("kopf").addHandler(_Disconnects(logging.ERROR))
    kopf.run(standalone=True, namespaces=[argv[1]], ready_flag=ready)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
