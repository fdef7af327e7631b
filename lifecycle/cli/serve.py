"""The ``lifecycle serve`` subcommand: a local cluster to try the operator with kubectl.

``lifecycle serve`` starts the embedded Kubernetes API on a fixed loopback
port, writes a kubeconfig for it, installs the CRDs of the kinds it runs (and of
the ProviderConfig kinds they name, typed by their providers' declarations), a
``default`` ProviderConfig where one needs nothing but credentials (the simulated
cloud's; a PostgreSQL one needs a server, so none is made), and runs the operator
for those kinds in the same process (each with the connector its registration declares; for
DatabaseInstance that is the simulated cloud). Point kubectl at it with the
``export KUBECONFIG=...`` line it prints.

Everything (every object with its uid and resourceVersion, the
resourceVersion counter, the simulated cloud's instances) is kept in a
SQLite state file and restored on the next start. Every write is saved and
fsynced before it is acknowledged, so ``kill -9`` (or a power cut) never
loses a write a client saw succeed; the state is also saved every
``--save-interval`` seconds when something changed outside the API (the
simulated cloud) and once more on SIGTERM/SIGINT. ``--no-durable-writes``
acknowledges writes before they are saved (faster; a ``kill -9`` then loses
the writes of the last interval). After a crash the resourceVersion counter
jumps far ahead, so no version a client may have seen is issued again. Watches
replay from the last ``--watch-cache-size`` writes (default 10,000), as a real
API server's watch cache does: a watch from an older resourceVersion gets 410
Expired and its client lists again.

Objects may adopt an external resource they did not create (annotated
lifecycle.dev/adopt: "true") only in the namespaces --allow-adoption names;
by default none may. A start that fails (its port taken, say) leaves no state
file it created behind, and a --kubeconfig that holds another cluster's
configuration is never overwritten.

The API has no authentication and no TLS: it listens on 127.0.0.1 unless
``--address`` names another address together with ``--allow-remote``. It
answers only requests whose Host names an address it serves (no DNS
rebinding; ``--allow-host`` adds names), and a web page's writes only from
its own origin with a body that says it is JSON or YAML.
"""

from __future__ import annotations

import argparse
import errno
import ipaddress
import json
import logging
import random
import signal
import socket
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from lifecycle.cli import UsageError
from lifecycle.cli.kubeconfigs import (
    DEFAULT_KUBECONFIG,
    check_kubeconfig_target,
    write_kubeconfig,
)
from lifecycle.core.kind import Kind
from lifecycle.kube.errors import ApiError

__all__ = ["DEFAULT_PORT", "DEFAULT_STATE", "DEFAULT_WATCH_CACHE_SIZE", "register",
           "remove_state_file", "serve"]

log = logging.getLogger("lifecycle.serve")

#: Where the API listens unless ``--port`` says otherwise.
DEFAULT_PORT = 6443
#: The state file, relative to the working directory.
DEFAULT_STATE = "lifecycle-state.db"
#: How many writes the watch history holds unless ``--watch-cache-size`` says otherwise:
#: a watch from an older resourceVersion gets 410 Expired.
DEFAULT_WATCH_CACHE_SIZE = 10_000
#: The kubeconfig written, relative to the working directory.


# ----------------------------------------------------------------- addresses
def _bind_address(address: str, allow_remote: bool) -> str:
    """The address to listen on; refuses non-loopback ones unless ``allow_remote``."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        try:
            ip = ipaddress.ip_address(socket.gethostbyname(address))
        except (OSError, UnicodeError):
            raise UsageError(f"--address {address!r} is neither an IPv4 address nor a "
                             f"name that resolves to one") from None
    if ip.version != 4:
        raise UsageError(f"--address {address}: only IPv4 addresses are supported "
                         f"(use 127.0.0.1)")
    if not ip.is_loopback:
        if not allow_remote:
            raise UsageError(f"--address {address} is not a loopback address; the API has "
                             f"no authentication, so anyone who can reach it could read and "
                             f"change every object (Secrets included). Pass --allow-remote "
                             f"to serve there anyway")
        print(f"warning: serving on {address} without authentication or TLS: anyone who can "
              f"reach this port can read and change every object, Secrets included",
              file=sys.stderr, flush=True)
    return str(ip)


def _client_host(bound: str) -> str:
    """The host clients use: loopback for a wildcard address."""
    return "127.0.0.1" if ipaddress.ip_address(bound).is_unspecified else bound


# ----------------------------------------------------------------------- CRDs
def _install_crd(api: Any, doc: dict[str, Any]) -> None:
    """Create a CRD in the store, or bring a stored one up to date (as ``kubectl apply``)."""
    from lifecycle.sim.crds import apply_crd

    try:
        apply_crd(api, doc)
    except ApiError as exc:
        log.warning("kept the stored CRD %s: it cannot be updated (%s)",
                    doc["metadata"]["name"], exc)


# ---------------------------------------------------------------------- serve
def _persisted(pairs: Sequence[tuple[Kind, Any]]) -> dict[str, Any]:
    """Connectors whose provider state is kept in the state file, by kind name."""
    return {kind.kind: connector for kind, connector in pairs
            if callable(getattr(connector, "snapshot", None))
            and callable(getattr(connector, "restore", None))}


def serve(args: argparse.Namespace) -> int:
    """``lifecycle serve``: serve the API (and run the operator) until SIGTERM/SIGINT."""
    from lifecycle.cli.run import _pairs, _registrations, allowed_adoption, configure_logging
    from lifecycle.schema.crds import crds
    from lifecycle.sim.apiserver import EmbeddedAPI
    from lifecycle.sim.embedded import seed_provider_config
    from lifecycle.sim.persist import StateFile, StateFileError

    registrations = _registrations(args.kinds or ("DatabaseInstance",))
    kinds = [r.kind for r in registrations]
    pairs = [] if args.no_operator else _pairs(registrations, args.connector)
    if not 0 < args.port < 65536:
        raise UsageError(f"--port must be between 1 and 65535, got {args.port}")
    if args.save_interval <= 0:
        raise UsageError("--save-interval must be positive")
    if args.watch_cache_size < 1:
        raise UsageError(f"--watch-cache-size must be at least 1, got {args.watch_cache_size}")
    host = _bind_address(args.address, args.allow_remote)
    adoption = allowed_adoption(args.allow_adoption or ())
    check_kubeconfig_target(Path(args.kubeconfig).absolute())  # before anything is made
    configure_logging(args.log_level, args.log_json)

    path = Path(args.state).absolute()
    created = not path.exists()
    state = StateFile(path)
    saved = None
    served = finished = False
    try:
        saved = state.load()
        api = EmbeddedAPI(seed=random.SystemRandom().getrandbits(63),
                          watch_window=args.watch_cache_size)
        externals = _persisted(pairs)
        if saved is not None:
            try:
                api.restore(saved.objects, saved.restart_resource_version)
            except ApiError as exc:
                raise StateFileError(f"the saved objects cannot be restored: {exc}") from None
            for name, connector in externals.items():
                if name in saved.external:
                    try:
                        connector.restore(saved.external[name])
                    except ValueError as exc:
                        raise StateFileError(f"the saved state of {name}'s provider cannot "
                                             f"be restored: {exc}") from None
        for doc in crds(kinds):
            _install_crd(api, doc)
        if saved is None:
            _seed_configs(api, kinds, seed_provider_config)
        face = _listen(api, host, args.port, args.allow_host or ())
        url = f"http://{_client_host(host)}:{face.port}"
        write_kubeconfig(Path(args.kubeconfig).absolute(), url)
        served = True
        _run(args, api, face, state, externals, pairs, kinds, url, adoption)
        finished = True
        return 0
    finally:
        # Before serving nothing was issued, so the file is as clean as it was loaded.
        state.close(clean=finished if served else (saved is None or saved.clean))
        if created and not served:  # a start that failed leaves no file it made behind
            remove_state_file(path)


def _seed_configs(api: Any, kinds: Sequence[Kind], seed: Any) -> None:
    """A ``default`` ProviderConfig (simulated-cloud credentials) of each ProviderConfig kind
    the served kinds name, where a config needs nothing but credentials; for the others
    (PostgreSQL's needs a host), one line saying what to create."""
    from lifecycle.schema.crds import default_config_fits, provider_config_apis

    for api_version in provider_config_apis(kinds):
        if default_config_fits(kinds, api_version):
            seed(api, api_version=api_version)
        else:
            log.info("no default ProviderConfig of %s was made: its spec needs more than "
                     "credentials (kubectl explain providerconfig.spec); create one named "
                     "default, or name yours in spec.providerConfigRef", api_version)


def remove_state_file(path: Path) -> None:
    """Remove a state file made by a start that never served, with SQLite's files beside it."""
    for leftover in (path, *(path.with_name(path.name + s) for s in ("-wal", "-shm",
                                                                      "-journal"))):
        try:
            leftover.unlink()
        except FileNotFoundError:
            pass
        except OSError as exc:
            log.warning("could not remove %s: %s", leftover, exc.strerror or exc)


def _listen(api: Any, host: str, port: int, allowed: Sequence[str] = ()) -> Any:
    """The HTTP face bound to ``host:port`` (not serving yet); one-line error if taken.

    ``allowed`` are more names its clients may use in the Host header.
    """
    from lifecycle.sim.http import APIServerHTTP

    for name in allowed:
        if not name or any(c.isspace() or c in "/@" for c in name):
            raise UsageError(f"--allow-host {name!r} is not a host name")
    try:
        return APIServerHTTP(api, host=host, port=port, allowed_hosts=allowed)
    except OSError as exc:
        hint = (" (another lifecycle serve or a cluster? choose another with --port)"
                if exc.errno == errno.EADDRINUSE else "")
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror or exc}{hint}") from None


def _run(args: argparse.Namespace, api: Any, face: Any, state: Any,
         externals: Mapping[str, Any], pairs: Sequence[tuple[Kind, Any]],
         kinds: Sequence[Kind], url: str, adoption: frozenset[str] = frozenset()) -> None:
    """Serve, save and run the operator until a signal; then stop in order and save."""
    from lifecycle.sim.durable import DurableSave

    last: list[Any] = [None]

    def provider_states() -> dict[str, Any]:
        return {name: connector.snapshot() for name, connector in externals.items()}

    def changed() -> bool:
        seen = (api.resource_version, json.dumps(provider_states(), sort_keys=True))
        if seen == last[0]:
            return False
        last[0] = seen
        return True

    config_path = Path(args.kubeconfig).absolute()
    autosave = DurableSave(state, lambda: api.snapshot(with_external=provider_states),
                           interval=args.save_interval, changed=changed,
                           durable=args.durable_writes)
    if args.durable_writes:
        face.after_write = autosave.save  # saved and fsynced before the answer
    stop = threading.Event()

    def on_signal(signum: int, _frame: Any) -> None:
        log.info("received %s; shutting down", signal.Signals(signum).name)
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    manager = None
    started = False
    # The journal key is made before the API answers: a client that sees the server up
    # finds the key beside the state file, and a start that cannot make it serves nothing.
    key = _journal_key(Path(f"{state.path}.journal-key")) if pairs else None
    try:
        autosave.save()
        face.start()
        started = True
        autosave.start()
        print(f"lifecycle serve: Kubernetes API on {url} (state: {state.path})", flush=True)
        print(f"export KUBECONFIG={config_path}", flush=True)
        if pairs:
            manager = _operator(url, pairs, kinds, key, adoption)
            manager.start()
        while not stop.wait(0.2):
            if manager is not None and manager.wait(0):
                break
    finally:
        if manager is not None:
            manager.stop()
        if started:
            face.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        autosave.stop()
    log.info("state saved", extra={"resourceVersion": api.resource_version})


def _journal_key(key_file: Path) -> bytes:
    """The intent journal's key kept in ``key_file`` beside the state file (made on the
    first start, mode 0600), so a restart on the same state trusts the entries it wrote."""
    from lifecycle.runtime.journalkey import key_from_file

    return key_from_file(str(key_file))


def _operator(url: str, pairs: Sequence[tuple[Kind, Any]], kinds: Sequence[Kind],
              key: bytes | None, adoption: frozenset[str] = frozenset()) -> Any:
    """The operator for ``pairs``, talking to ``url`` through the official client.

    ``adoption`` names the namespaces (``*``: all) whose objects may adopt an external
    resource they did not create, as ``lifecycle run --allow-adoption``.

    Wired as ``lifecycle run`` wires it: objects and connection Secrets are read
    from its informers (:func:`~lifecycle.driver.cache.cached_manager`). The intent
    journal is sealed with ``key``, kept beside the state file (:func:`_journal_key`).
    """
    from prometheus_client import disable_created_metrics

    from lifecycle.driver.cache import cached_manager
    from lifecycle.driver.cluster import KubeCluster, api_client
    from lifecycle.driver.manager import ManagerOptions

    disable_created_metrics()
    options = ManagerOptions(workers=2, drain_timeout=10.0,
                             journal_key=key, allow_adoption=adoption)
    return cached_manager(KubeCluster(api_client(host=url), kinds), pairs, options,
                          secrets=True)


def register(subparsers: Any) -> None:
    """Add ``serve``."""
    p = subparsers.add_parser(
        "serve", help="a local Kubernetes API with the operator, for kubectl",
        description=__doc__.split("\n\n", 1)[1].replace("``", ""),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="example:\n  lifecycle serve &\n  export KUBECONFIG=$PWD/lifecycle.kubeconfig\n"
               "  kubectl apply -f docs/examples/databaseinstance.yaml\n  kubectl get dbi")
    p.add_argument("--port", type=int, default=DEFAULT_PORT,
                   help=f"TCP port of the API (default: {DEFAULT_PORT})")
    p.add_argument("--address", default="127.0.0.1",
                   help="address to listen on (default: 127.0.0.1)")
    p.add_argument("--allow-remote", action="store_true",
                   help="allow a non-loopback --address (no authentication, no TLS; "
                        "default: off)")
    p.add_argument("--allow-host", action="append", metavar="NAME",
                   help="also answer requests whose Host header is NAME (repeatable; by "
                        "default only the served address, and localhost on loopback: other "
                        "names are refused, which stops DNS rebinding)")
    p.add_argument("--kubeconfig", default=DEFAULT_KUBECONFIG, metavar="FILE",
                   help=f"kubeconfig to write (default: ./{DEFAULT_KUBECONFIG})")
    p.add_argument("--state", default=DEFAULT_STATE, metavar="FILE",
                   help=f"SQLite file keeping the state across restarts "
                        f"(default: ./{DEFAULT_STATE})")
    p.add_argument("--save-interval", type=float, default=0.5, metavar="SECONDS",
                   help="save this often when something changed outside the API (the "
                        "simulated cloud); with --no-durable-writes a kill -9 loses at most "
                        "this much (default: 0.5)")
    p.add_argument("--durable-writes", action=argparse.BooleanOptionalAction, default=True,
                   help="save and fsync every write before acknowledging it, so kill -9 "
                        "loses no acknowledged write (default: on; --no-durable-writes "
                        "answers first and saves every --save-interval)")
    p.add_argument("--watch-cache-size", type=int, default=DEFAULT_WATCH_CACHE_SIZE,
                   metavar="WRITES",
                   help="how many writes the watch history holds; a watch from a "
                        "resourceVersion older than that gets 410 Expired and must list "
                        f"again (default: {DEFAULT_WATCH_CACHE_SIZE})")
    p.add_argument("--kinds", nargs="+", metavar="KIND",
                   help="registered kinds by name or plural, or MODULE:NAME, whose CRDs to "
                        "install and operator to run (default: DatabaseInstance)")
    p.add_argument("--connector", metavar="MODULE:NAME",
                   help="one provider connector for every kind (default: the connector each "
                        "kind registers; DatabaseInstance: the simulated cloud)")
    p.add_argument("--allow-adoption", action="append", metavar="NAMESPACE",
                   help="let the operator's objects in NAMESPACE ('*': every namespace, "
                        "cluster-scoped objects too) adopt an existing external resource they "
                        "did not create, when annotated lifecycle.dev/adopt: \"true\" "
                        "(repeatable; default: none, such a resource is refused as not owned)")
    p.add_argument("--no-operator", action="store_true",
                   help="serve the API only; run no operator (default: run it)")
    p.add_argument("--log-json", action="store_true",
                   help="JSON log lines (default: key=value text)")
    p.add_argument("--log-level", default="info",
                   choices=["debug", "info", "warning", "error"],
                   help="lowest level logged (default: info)")
    p.set_defaults(func=serve)
