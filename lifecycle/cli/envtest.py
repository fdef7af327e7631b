"""The ``lifecycle envtest`` subcommand: a real Kubernetes API server on loopback.

``lifecycle envtest`` builds the real kube-apiserver and etcd from their Go
modules once (kept in the user's cache directory, keyed by version; it needs
``go`` on PATH), then runs them in the foreground until SIGINT or SIGTERM:
RBAC authorization on, generated certificates and ServiceAccount keys, data
kept in ``--dir``. It writes an admin kubeconfig (``--kubeconfig``), installs
the CRDs of every registered kind and a ``default`` ProviderConfig for the
simulated cloud (unless ``--no-crds``), and runs no operator: start one beside
it with ``lifecycle run --kubeconfig FILE``. Of the controllers, a real
kube-controller-manager runs only the garbage collector and the namespace
controller (owned objects are collected, deleted namespaces emptied); there
are no kubelets or scheduler, so nothing runs Pods.
"""

from __future__ import annotations

import argparse
import base64
import logging
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from lifecycle.cli import UsageError

__all__ = ["DEFAULT_DIR", "DEFAULT_KUBECONFIG", "DEFAULT_PORT", "register"]

log = logging.getLogger("lifecycle.envtest")

#: Where the API server listens unless ``--port`` says otherwise.
DEFAULT_PORT = 6443
#: The data, certificates and logs, relative to the working directory.
DEFAULT_DIR = "lifecycle-envtest"
#: The admin kubeconfig written, relative to the working directory.
DEFAULT_KUBECONFIG = "envtest.kubeconfig"


def seed(client: Any, kinds: list[Any]) -> None:
    """Install ``kinds``' CRDs and a ``default`` ProviderConfig with its Secret (idempotent);
    only of the ProviderConfig kinds whose spec needs nothing but credentials
    (:func:`~lifecycle.schema.crds.default_config_fits`)."""
    from kubernetes import client as k8s

    from lifecycle.core.kind import PROVIDER_CONFIG_KIND
    from lifecycle.schema.crds import crds, default_config_fits, provider_config_apis
    from lifecycle.sim.embedded import EXAMPLE_CREDENTIALS
    from lifecycle.testing.envtest import install

    install(client, crds(kinds))
    core = k8s.CoreV1Api(client)
    custom = k8s.CustomObjectsApi(client)
    secret: Any = {"apiVersion": "v1", "kind": "Secret",
              "metadata": {"name": "default-credentials", "namespace": "default"},
              "data": {k: base64.b64encode(v.encode()).decode()
                       for k, v in EXAMPLE_CREDENTIALS.items()}}
    _create(lambda: core.create_namespaced_secret("default", secret))
    for api_version in provider_config_apis(kinds):
        if not default_config_fits(kinds, api_version):
            continue
        group, version = api_version.split("/")
        _create(lambda g=group, v=version, a=api_version: custom.create_cluster_custom_object(
            g, v, "providerconfigs",
            {"apiVersion": a, "kind": PROVIDER_CONFIG_KIND, "metadata": {"name": "default"},
             "spec": {"credentials": {"secretRef": {"name": "default-credentials",
                                                    "namespace": "default"}}}}))


def _create(call: Any) -> None:
    from kubernetes import client as k8s

    try:
        call()
    except k8s.ApiException as exc:
        if exc.status != 409:
            raise


def envtest(args: argparse.Namespace) -> int:
    """``lifecycle envtest``: run the real API server until SIGINT/SIGTERM."""
    from lifecycle import registry
    from lifecycle.cli.run import _registrations, configure_logging
    from lifecycle.testing.envtest import EnvtestError, RealCluster, free_port

    if args.build_only:
        return build_only()
    if not 0 <= args.port < 65536:
        raise UsageError(f"--port must be between 0 and 65535, got {args.port}")
    configure_logging(args.log_level, False)
    if args.kinds:
        kinds = [r.kind for r in _registrations(args.kinds, classes=True)]
    else:
        kinds = [r.kind for r in registry.registrations()]
    port = args.port or free_port()
    _check_port(port)
    stop = threading.Event()

    def on_signal(signum: int, _frame: Any) -> None:
        log.info("received %s; shutting down", signal.Signals(signum).name)
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    cluster = RealCluster(Path(args.dir), port=port, durable=True,
                          log=lambda line: print(f"lifecycle envtest: {line}",
                                                 file=sys.stderr, flush=True))
    try:
        try:
            cluster.start()
            if not args.no_crds:
                seed(cluster.api_client(), kinds)
        except EnvtestError as exc:
            raise UsageError(str(exc)) from None
        config = cluster.write_kubeconfig(args.kubeconfig)
        print(f"lifecycle envtest: kube-apiserver {cluster.version} on {cluster.url} "
              f"(data: {cluster.dir})", flush=True)
        print(f"export KUBECONFIG={config}", flush=True)
        while not stop.wait(0.5):
            if not cluster.alive():
                print("lifecycle envtest: the API server or etcd exited; see the logs in "
                      f"{cluster.dir}", file=sys.stderr, flush=True)
                return 1
        return 0
    finally:
        cluster.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def build_only() -> int:
    """``lifecycle envtest --build-only``: build (or find) the servers, print where, exit."""
    from lifecycle.testing.envtest import EnvtestError, binaries

    try:
        built = binaries(log=lambda line: print(f"lifecycle envtest: {line}", file=sys.stderr,
                                                flush=True))
    except EnvtestError as exc:
        raise UsageError(str(exc)) from None
    print(f"lifecycle envtest: kube-apiserver {built.version} at {built.kube_apiserver}",
          flush=True)
    return 0


def _check_port(port: int) -> None:
    import socket

    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError as exc:
            raise UsageError(f"cannot listen on 127.0.0.1:{port}: {exc.strerror or exc} "
                             f"(another API server? choose another with --port)") from None


def register(subparsers: Any) -> None:
    """Add ``envtest``."""
    p = subparsers.add_parser(
        "envtest", help="a real kube-apiserver and etcd on loopback (built from Go modules)",
        description=__doc__.split("\n\n", 1)[1].replace("``", ""),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="example:\n  lifecycle envtest --kubeconfig kc &\n"
               "  lifecycle run --kubeconfig kc &\n"
               "  kubectl --kubeconfig kc apply -f docs/examples/databaseinstance.yaml")
    p.add_argument("--port", type=int, default=DEFAULT_PORT,
                   help=f"TCP port of the API server on 127.0.0.1, 0 for any free one "
                        f"(default: {DEFAULT_PORT})")
    p.add_argument("--kubeconfig", default=DEFAULT_KUBECONFIG, metavar="FILE",
                   help=f"admin kubeconfig to write (default: ./{DEFAULT_KUBECONFIG})")
    p.add_argument("--dir", default=DEFAULT_DIR, metavar="DIR",
                   help=f"etcd data, certificates, ServiceAccount keys and logs, kept "
                        f"across runs (default: ./{DEFAULT_DIR})")
    p.add_argument("--kinds", nargs="+", metavar="KIND",
                   help="registered kinds whose CRDs to install (default: every registered "
                        "kind)")
    p.add_argument("--no-crds", action="store_true",
                   help="install no CRDs and no default ProviderConfig (default: off)")
    p.add_argument("--build-only", action="store_true",
                   help="build the servers into the cache (or find them there) and exit; "
                        "CI runs this before the tests (default: off)")
    p.add_argument("--log-level", default="info",
                   choices=["debug", "info", "warning", "error"],
                   help="log level (default: info)")
    p.set_defaults(func=envtest)
