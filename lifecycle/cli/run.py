"""The ``lifecycle run``, ``lifecycle crds`` and ``lifecycle manifests`` subcommands.

``lifecycle run --kinds KIND ...`` runs the operator against a kubeconfig
(``--kubeconfig``) or the in-cluster service account: managed kinds with the
connector their registration declares (``--connector MODULE:NAME`` gives one
for all), claim kinds with their claim binding, parent kinds with their owned
children. ``--embedded`` instead starts an in-memory API server behind a real
HTTP endpoint in the same process (its URL is printed first); the operator
still talks to it through the official client. SIGTERM and SIGINT shut down gracefully: no new
work, in-flight reconciles finish, the lease is released.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import math
import os
import re
import signal
import sys
import threading
from collections.abc import Sequence
from typing import Any

import attrs
import yaml

from lifecycle import registry
from lifecycle.cli import UsageError, check_connector, load
from lifecycle.core.claims import ClassKind
from lifecycle.core.contract import Connector
from lifecycle.core.kind import Kind
from lifecycle.core.parents import ParentKind

__all__ = ["JsonFormatter", "configure_logging", "register"]

DEFAULT_KINDS = ("DatabaseInstance",)

_RESERVED = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message",
                                                                              "asctime"}


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message and any ``extra`` fields."""

    def format(self, record: logging.LogRecord) -> str:
        """Render ``record`` as JSON."""
        doc: dict[str, Any] = {"ts": self.formatTime(record, "%Y-%m-%dT%H:%M:%S%z"),
                               "level": record.levelname.lower(), "logger": record.name,
                               "msg": record.getMessage()}
        for key, value in vars(record).items():
            if key not in _RESERVED and not key.startswith("_"):
                doc[key] = value
        if record.exc_info and record.exc_info[0] is not None:
            doc["error"] = record.exc_info[0].__name__
        return json.dumps(doc, default=str)


class _KeyValueFormatter(logging.Formatter):
    """``time level logger message key=value ...``."""

    def format(self, record: logging.LogRecord) -> str:
        base = super().format(record)
        extras = " ".join(f"{k}={v}" for k, v in vars(record).items()
                          if k not in _RESERVED and not k.startswith("_"))
        return f"{base} {extras}" if extras else base


class _StderrHandler(logging.StreamHandler[Any]):
    """Writes to whatever ``sys.stderr`` is when a record is emitted.

    A stream captured at configuration time may be replaced and closed later
    (an embedding host redirecting stderr); looking it up per record keeps
    logging working instead of failing on a closed stream.
    """

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self) -> Any:
        """The current ``sys.stderr``."""
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        """Ignored: the handler always writes to the current ``sys.stderr``."""


#: Loggers of libraries the operator uses, quiet unless asked for: urllib3's retry
#: warnings, the kubernetes client's request and response dumps, python-statemachine.
THIRD_PARTY_LOGGERS = ("urllib3", "kubernetes", "statemachine")


def configure_logging(level: str = "info", json_format: bool = False, *,
                      third_party: bool = False) -> None:
    """Structured logs on stderr, as JSON lines or ``key=value`` text.

    Calling it again replaces the handler an earlier call added (never more
    than one); handlers installed by anyone else are left in place. The
    loggers of :data:`THIRD_PARTY_LOGGERS` log errors only, unless
    ``third_party`` is set and ``level`` is debug (their debug lines can
    carry request and response bodies).
    """
    handler = _StderrHandler()
    handler.setFormatter(JsonFormatter() if json_format else _KeyValueFormatter(
        "%(asctime)s %(levelname)s %(name)s %(message)s"))
    root = logging.getLogger()
    for previous in [h for h in root.handlers if isinstance(h, _StderrHandler)]:
        root.removeHandler(previous)
    root.addHandler(handler)
    root.setLevel(level.upper())
    loud = third_party and level.lower() == "debug"
    for name in THIRD_PARTY_LOGGERS:
        logging.getLogger(name).setLevel(logging.NOTSET if loud else logging.ERROR)


def _registrations(specs: Sequence[str], *,
                   classes: bool = False) -> list[registry.Registration]:
    """The registrations ``specs`` name; ``classes`` also admits resource class kinds."""
    found = []
    for spec in specs:
        try:
            r = registry.find(spec)
        except registry.RegistryError as exc:
            raise UsageError(str(exc)) from None
        if isinstance(r.kind, ClassKind) and not classes:
            raise UsageError(f"{spec} is a resource class kind, not runnable: it has no "
                             f"reconciler (run the claim kinds that use it)")
        if not isinstance(r.kind, Kind | ClassKind | ParentKind):
            raise UsageError(f"{spec} is not a lifecycle.core.kind.Kind")
        found.append(r)
    names = [r.kind.kind for r in found]
    if len(set(names)) != len(names):
        raise UsageError("a kind is listed twice in --kinds")
    return found




def _connector(spec: str) -> Connector:
    return check_connector(load(spec), spec)


def _pairs(registrations: Sequence[registry.Registration],
           connector_spec: str | None) -> list[tuple[Any, Connector | None]]:
    """What the manager runs for each registration, with its connector.

    A managed kind gets ``--connector`` when given, else the one it registers;
    a claim kind runs as its :class:`~lifecycle.core.claims.ClaimBinding`, a
    parent kind as itself, both without a connector.
    """
    from lifecycle.schema.crds import is_claim

    shared = _connector(connector_spec) if connector_spec and any(
        not is_claim(r.kind) and not isinstance(r.kind, ParentKind)
        for r in registrations) else None
    pairs: list[tuple[Any, Connector | None]] = []
    for r in registrations:
        if is_claim(r.kind):
            if r.binding is None:
                raise UsageError(f"{r.name} is a claim kind whose registration names no "
                                 f"ClaimBinding (Registration(..., binding=...))")
            pairs.append((r.binding, None))
        elif isinstance(r.kind, ParentKind):
            pairs.append((r.kind, None))
        elif shared is not None:
            pairs.append((r.kind, shared))
        elif r.connector is None:
            raise UsageError(f"{r.name} registers no connector; pass --connector MODULE:NAME")
        else:
            made = check_connector(r.connector, f"the connector {r.name} registers")
            pairs.append((r.kind, made))
    return pairs


def _address(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isascii() or not port.isdigit():
        raise UsageError(f"expected --probe-address HOST:PORT, got {text!r}")
    if not 0 <= int(port) <= 65535:
        raise UsageError(f"--probe-address port must be between 0 and 65535, got {port}")
    return host or "127.0.0.1", int(port)


def _check_numbers(args: argparse.Namespace) -> None:
    """Refuse numeric ``run`` options outside their meaningful range, with one line."""
    if args.workers < 1:
        raise UsageError(f"--workers must be at least 1, got {args.workers}")
    for option, value, positive in (("--resync", args.resync, False),
                                    ("--backoff-base", args.backoff_base, True),
                                    ("--backoff-cap", args.backoff_cap, True),
                                    ("--drain-timeout", args.drain_timeout, False),
                                    ("--reads-ttl", args.reads_ttl, False)):
        if not math.isfinite(value) or value < 0 or (positive and value == 0):
            bound = "greater than 0" if positive else "0 or more"
            raise UsageError(f"{option} must be a finite number of seconds {bound}, "
                             f"got {value:g}")
    if args.backoff_cap < args.backoff_base:
        raise UsageError(f"--backoff-cap ({args.backoff_cap:g}) must not be below "
                         f"--backoff-base ({args.backoff_base:g})")


_NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def allowed_adoption(namespaces: Sequence[str]) -> frozenset[str]:
    """The ``--allow-adoption`` namespaces (``*``: all); a :class:`UsageError` for one that
    is neither ``*`` nor a namespace name."""
    for namespace in namespaces:
        if namespace != "*" and not _NAMESPACE.match(namespace):
            raise UsageError(f"--allow-adoption {namespace!r} is neither '*' nor a namespace "
                             "name (RFC 1123 label)")
    return frozenset(namespaces)


def _journal_key(args: argparse.Namespace, cluster: Any, log: logging.Logger) -> bytes | None:
    """The journal key: ``--journal-key-file``, ``--journal-key-secret``, then
    ``$LIFECYCLE_JOURNAL_KEY``; None (a key of this process) when none is given."""
    from lifecycle.runtime.journalkey import (
        JournalKeyError,
        key_from_env,
        key_from_file,
        key_from_secret,
    )

    if args.journal_key_file and args.journal_key_secret:
        raise UsageError("give --journal-key-file or --journal-key-secret, not both")
    key: bytes | None
    try:
        if args.journal_key_file:
            key = key_from_file(args.journal_key_file)
            log.info("intent journal sealed with the key in file %s", args.journal_key_file)
            return key
        if args.journal_key_secret:
            namespace, _, name = args.journal_key_secret.partition("/")
            if not _NAMESPACE.match(namespace) or not name:
                raise UsageError(f"--journal-key-secret {args.journal_key_secret!r} is not "
                                 "NAMESPACE/NAME")
            key = key_from_secret(cluster, namespace, name)
            log.info("intent journal sealed with the key in Secret %s/%s", namespace, name)
            return key
        key = key_from_env()
    except JournalKeyError as exc:
        raise UsageError(str(exc)) from None
    if key is None and not args.embedded:
        log.warning("no --journal-key-file, --journal-key-secret or $LIFECYCLE_JOURNAL_KEY: "
                    "the intent journal is sealed with a key of this process only; after a "
                    "restart an interrupted create whose resource is not yet marked is "
                    "refused as not owned (docs/reliability.md)")
    return key


def _shard(text: str) -> tuple[int, int]:
    index, sep, count = text.partition("/")
    if not sep or not index.isdigit() or not count.isdigit() or not 0 <= int(index) < int(
            count):
        raise UsageError(f"expected --shard INDEX/COUNT with 0 <= INDEX < COUNT, got {text!r}")
    return int(index), int(count)


def _embedded_kubeconfig(path: str, url: str) -> Any:
    """Write a kubeconfig for the embedded API at ``url`` to ``path``; the absolute path."""
    from pathlib import Path

    from lifecycle.cli.kubeconfigs import write_kubeconfig

    written = Path(path).absolute()
    write_kubeconfig(written, url)
    print(f"export KUBECONFIG={written}", flush=True)
    return written


def _stop_embedded(server: Any, kubeconfig: Any) -> None:
    """Stop the embedded API and remove the kubeconfig written for it (it names nothing
    once the process is gone)."""
    if server is not None:
        server.stop()
    if kubeconfig is not None:
        with contextlib.suppress(OSError):
            kubeconfig.unlink()


# ---------------------------------------------------------------------- run
def run(args: argparse.Namespace) -> int:
    """``lifecycle run``: run the operator until SIGTERM/SIGINT."""
    from lifecycle.driver.cache import cached_manager
    from lifecycle.driver.cluster import KubeCluster, api_client
    from lifecycle.driver.informer import InformerOptions
    from lifecycle.driver.kinds import served_kinds
    from lifecycle.driver.manager import ManagerOptions, default_identity
    from lifecycle.sim.embedded import embedded_cluster

    _check_numbers(args)
    adoption = allowed_adoption(args.allow_adoption or ())
    if args.embedded and args.context:
        raise UsageError("--context picks a context of a kubeconfig to read; with --embedded "
                         "there is none to read (--kubeconfig names the file to write)")
    if args.embedded and args.kubeconfig:
        from pathlib import Path

        from lifecycle.cli.kubeconfigs import check_kubeconfig_target

        check_kubeconfig_target(Path(args.kubeconfig).absolute())  # before anything starts
    if not _SUBDOMAIN.match(args.lease_name) or len(args.lease_name) > 253:
        raise UsageError(f"--lease-name {args.lease_name!r} is not a Lease name (a lowercase "
                         "RFC 1123 subdomain: letters, digits, '-' and '.')")
    if not _NAMESPACE.match(args.lease_namespace):
        raise UsageError(f"--lease-namespace {args.lease_namespace!r} is not a namespace name "
                         "(RFC 1123 label)")
    if args.log_third_party and args.log_level != "debug":
        raise UsageError("--log-third-party needs --log-level debug")
    probe_address = _address(args.probe_address) if args.probe_address else None
    registrations = _registrations(args.kinds or DEFAULT_KINDS)
    pairs = _pairs(registrations, args.connector)
    served = served_kinds([target for target, _ in pairs])
    kinds = [k for k in served if isinstance(k, Kind)]
    shard_index, shard_count = _shard(args.shard) if args.shard else (0, 1)
    configure_logging(args.log_level, args.log_json, third_party=args.log_third_party)
    log = logging.getLogger("lifecycle.driver")
    server = None
    written = None
    if args.embedded:
        server = embedded_cluster(served)  # type: ignore[arg-type]
        print(f"embedded API server: {server.url}", flush=True)
        client = api_client(host=server.url)
    else:
        try:
            client = api_client(kubeconfig=args.kubeconfig, context=args.context)
        except Exception as exc:
            raise UsageError(f"cannot load cluster configuration: {type(exc).__name__}: "
                             f"{str(exc).splitlines()[0][:200] if str(exc) else ''}") from None
    options = ManagerOptions(
        workers=args.workers, namespace=args.namespace,
        informer=InformerOptions(resync=args.resync),
        backoff_base=args.backoff_base, backoff_cap=args.backoff_cap,
        leader_election=args.leader_elect, lease_name=args.lease_name,
        lease_namespace=args.lease_namespace,
        identity=args.identity or os.environ.get("POD_NAME") or default_identity(),
        shard_index=shard_index, shard_count=shard_count, operator_id=args.operator_id,
        probe_address=probe_address,
        drain_timeout=args.drain_timeout,
        reads_ttl=args.reads_ttl,
        allow_cross_namespace_secrets=args.allow_cross_namespace_secrets,
        allow_adoption=adoption,
    )
    from prometheus_client import disable_created_metrics

    disable_created_metrics()
    cluster = KubeCluster(client, kinds)
    try:
        options = attrs.evolve(options, journal_key=_journal_key(args, cluster, log))
    except UsageError:
        _stop_embedded(server, None)
        raise
    manager = cached_manager(cluster, pairs, options, secrets=True)
    stop = threading.Event()

    def on_signal(signum: int, _frame: Any) -> None:
        log.info("received %s; shutting down", signal.Signals(signum).name)
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        if server is not None and args.kubeconfig:  # removed again however the run ends
            written = _embedded_kubeconfig(args.kubeconfig, server.url)
        manager.start()
        if manager.probes is not None:
            print(f"probes: {manager.probes.url}", flush=True)
        while not stop.wait(0.2):
            if manager.wait(0):
                break
        manager.stop()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        _stop_embedded(server, written)
    if manager.lost_lease:
        log.error("leadership lost; exiting so the replica restarts as a standby")
        return 1
    return 0


# ----------------------------------------------------------- crds, manifests
def _dump(docs: Sequence[dict[str, Any]]) -> str:
    return yaml.safe_dump_all(docs, sort_keys=False, default_flow_style=False)


def crds_command(args: argparse.Namespace) -> int:
    """``lifecycle crds``: print the CRDs of the kinds as YAML."""
    from lifecycle.schema.crds import check_crd, crds

    docs = crds([r.kind for r in _registrations(args.kinds or DEFAULT_KINDS, classes=True)])
    for doc in docs:
        problems = check_crd(doc)
        if problems:
            raise UsageError(f"generated CRD {doc['metadata']['name']} is invalid: "
                             f"{problems[0]}")
    sys.stdout.write(_dump(docs))
    return 0


def _run_name(spec: str, r: registry.Registration) -> str:
    """How the container names a kind: its registered name when that finds it, else the spec."""
    try:
        same = registry.find(r.name).kind is r.kind
    except registry.RegistryError:
        same = False
    return r.name if same else spec


def manifests_command(args: argparse.Namespace) -> int:
    """``lifecycle manifests``: print (or write as a kustomize base) the operator's objects."""
    from pathlib import Path

    from lifecycle.driver.manifests import Options, dump, manifests, write_kustomize

    specs = args.kinds or list(DEFAULT_KINDS)
    found = _registrations(specs, classes=True)
    from lifecycle.driver.kinds import served_kinds

    runnable = [(spec, r) for spec, r in zip(specs, found, strict=True)
                if not isinstance(r.kind, ClassKind)]
    pairs = _pairs([r for _, r in runnable], args.connector)  # what run checks first
    opts = Options(image=args.image, kind_names=tuple(_run_name(s, r) for s, r in runnable),
                   name=args.name, namespace=args.namespace, replicas=args.replicas,
                   connector=args.connector, watch_namespace=args.watch_namespace,
                   cluster_wide_secrets=args.cluster_wide_secrets)
    # What the runnable kinds need served (a claim's class and managed kinds), then any
    # other class named.
    served = served_kinds([target for target, _ in pairs])
    served += [r.kind for r in found if not any(r.kind is k for k in served)]
    docs = manifests(served, opts)
    if args.kustomize:
        for path in write_kustomize(Path(args.kustomize), docs):
            print(path)
    else:
        sys.stdout.write(dump(docs))
    return 0


def register(subparsers: Any) -> None:
    """Add ``run``, ``crds`` and ``manifests``."""
    kinds_help = ("registered kinds by name or plural, or MODULE:NAME "
                  "(default: DatabaseInstance)")
    p = subparsers.add_parser("run", help="run the operator against a cluster",
                              description=__doc__.split("\n\n")[1].replace("``", ""))
    p.add_argument("--kinds", nargs="+", metavar="MODULE:KIND", help=kinds_help)
    p.add_argument("--connector", metavar="MODULE:NAME",
                   help="one provider connector (or a factory returning one) for every kind "
                        "(default: the connector each kind registers)")
    p.add_argument("--kubeconfig", metavar="FILE",
                   help="kubeconfig file to read (default: in-cluster, then $KUBECONFIG or "
                        "~/.kube/config); with --embedded, the file to write for the embedded "
                        "API, removed on exit (default then: none written; an existing file "
                        "lifecycle did not write is never overwritten)")
    p.add_argument("--context", help="kubeconfig context (default: its current context)")
    p.add_argument("--embedded", action="store_true",
                   help="serve an in-memory API on loopback in this process and run on it "
                        "(default: off, use the cluster of --kubeconfig)")
    p.add_argument("--workers", type=int, default=2,
                   help="concurrent reconciles per kind (default: 2)")
    p.add_argument("--namespace", help="watch one namespace (default: all)")
    p.add_argument("--resync", type=float, default=600.0,
                   help="resync period, seconds; 0: never (default: 600.0)")
    p.add_argument("--backoff-base", type=float, default=1.0,
                   help="per-item backoff start, seconds (default: 1.0)")
    p.add_argument("--backoff-cap", type=float, default=60.0,
                   help="per-item backoff cap, seconds (default: 60.0)")
    p.add_argument("--leader-elect", action="store_true",
                   help="elect a leader on a Lease; only the leader reconciles (default: off)")
    p.add_argument("--lease-name", default="lifecycle-operator",
                   help="name of the Lease (default: lifecycle-operator)")
    p.add_argument("--lease-namespace", default="default",
                   help="namespace of the Lease (default: default)")
    p.add_argument("--identity",
                   help="replica identity in the Lease (default: $POD_NAME or host_pid)")
    p.add_argument("--shard", metavar="INDEX/COUNT",
                   help="handle one shard of the keys (default: all of them)")
    p.add_argument("--operator-id",
                   help="operator instance id for namespace ownership and the marks on "
                        "external resources (default: none; marks then name lifecycle)")
    p.add_argument("--probe-address", metavar="HOST:PORT",
                   help="serve /metrics, /healthz and /readyz here; port 0: any free port "
                        "(default: not served)")
    p.add_argument("--reads-ttl", type=float, default=5.0, metavar="SECONDS",
                   help="reuse namespace annotations and provider configs with their "
                        "credentials this long; 0: read them on every reconcile (default: 5.0)")
    p.add_argument("--allow-cross-namespace-secrets", action="store_true",
                   help="let a namespaced object write its connection Secret into another "
                        "namespace (default: only its own)")
    p.add_argument("--allow-adoption", action="append", metavar="NAMESPACE",
                   help="let objects in NAMESPACE ('*': every namespace, cluster-scoped "
                        "objects too) adopt an existing external resource they did not create, "
                        "with the lifecycle.dev/adopt annotation (repeatable; default: none)")
    p.add_argument("--journal-key-file", metavar="PATH",
                   help="the key sealing the intent journal (made there on first start if "
                        "missing); default: --journal-key-secret, $LIFECYCLE_JOURNAL_KEY, "
                        "else a key of this process")
    p.add_argument("--journal-key-secret", metavar="NAMESPACE/NAME",
                   help="a Secret (field 'key') holding that key, made on first start if "
                        "missing; put it in the operator's own namespace (default: none)")
    p.add_argument("--drain-timeout", type=float, default=30.0,
                   help="seconds to wait for in-flight reconciles on shutdown (default: 30.0)")
    p.add_argument("--log-json", action="store_true",
                   help="JSON log lines (default: key=value text)")
    p.add_argument("--log-level", default="info",
                   choices=["debug", "info", "warning", "error"],
                   help="lowest level logged; debug: every reconcile with its reconcile ID "
                        "(default: info)")
    p.add_argument("--log-third-party", action="store_true",
                   help="with --log-level debug, also log urllib3, the kubernetes client and "
                        "python-statemachine at debug; their lines may carry request bodies "
                        "(default: off)")
    p.set_defaults(func=run)

    c = subparsers.add_parser(
        "crds", help="print CustomResourceDefinition YAML for kinds",
        description="Print the CustomResourceDefinitions of the kinds (and the ProviderConfig "
                    "kinds they name) as YAML, generated from each kind's machine and attrs "
                    "fields, for kubectl apply -f -.")
    c.add_argument("--kinds", nargs="+", metavar="MODULE:KIND", help=kinds_help)
    c.set_defaults(func=crds_command)

    m = subparsers.add_parser(
        "manifests", help="print the objects that deploy the operator (CRDs, RBAC, Deployment)",
        description="Print every object that deploys the operator for the kinds: its "
                    "namespace, the CRDs, a ServiceAccount with the RBAC it uses (Secrets "
                    "only in the watched namespace unless --cluster-wide-secrets), the "
                    "journal key's Secret access and a Deployment running lifecycle run with "
                    "leader election.")
    m.add_argument("--kinds", nargs="+", metavar="MODULE:KIND",
                   help=kinds_help + "; resource classes get a CRD and read access only")
    m.add_argument("--name", default="lifecycle-operator",
                   help="name of the Deployment, ServiceAccount and RBAC objects "
                        "(default: lifecycle-operator)")
    m.add_argument("--namespace", default="lifecycle-system",
                   help="operator namespace (default: lifecycle-system)")
    m.add_argument("--image", default="lifecycle:latest",
                   help="operator container image (default: lifecycle:latest)")
    m.add_argument("--replicas", type=int, default=2,
                   help="operator replicas, one leads (default: 2)")
    m.add_argument("--connector", metavar="MODULE:NAME",
                   help="connector passed to run (default: the one each kind registers)")
    m.add_argument("--watch-namespace", metavar="NS",
                   help="the namespace the operator watches, and the only one where it may "
                        "read and write Secrets (default: the operator's --namespace)")
    m.add_argument("--cluster-wide-secrets", action="store_true",
                   help="watch every namespace instead, which grants Secrets access in "
                        "every namespace (cluster-wide; default: off)")
    m.add_argument("--kustomize", metavar="DIR",
                   help="write a kustomize base (one file per object) to DIR instead "
                        "(default: print the objects as YAML)")
    m.set_defaults(func=manifests_command)
