"""``lifecycle bench``: run the benchmark suite in ``benchmarks/`` and report its figures.

``--quick`` runs a reduced suite (under a minute on an idle machine);
``--json`` prints one JSON object instead of the summary table; ``--out DIR``
also writes ``bench.json`` and the PNG plots there. The suite lives in the
source repository's ``benchmarks/`` folder, which is not installed with the
package: run the command from a checkout (or pass ``--suite-dir``). It needs
the ``dev`` extra (pytransitions, matplotlib).

``--e2e`` instead runs the end-to-end comparison (``benchmarks/e2e.py``):
the API server and each operator in processes of their own, ``-n`` objects
to Ready, the steady state and deletion per round, ``--rounds`` interleaved
rounds, and a memory round at ``--memory-n`` objects. ``--server`` picks the
embedded API (default) or a real kube-apiserver started for the run
(``envtest``); ``--kubeconfig FILE --audit-log FILE`` runs on a server
already running (``lifecycle envtest``). ``--peers kopf provider-sql``
compares with kopf on DatabaseInstance and with the Go provider-sql peer on
the PostgreSQL kinds. It needs the ``bench`` extra (kopf).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from lifecycle.cli import UsageError

__all__ = ["register", "run"]


def _checkouts(chosen: Path | None) -> list[Path]:
    if chosen is not None:
        return [chosen]
    # The current directory, then the checkout this package runs from (an editable install).
    return [Path.cwd(), Path(__file__).resolve().parents[2]]


def _suite(chosen: Path | None = None, module: str = "suite") -> ModuleType:
    """A module of the source checkout's ``benchmarks`` package (not installed)."""
    loaded = sys.modules.get("benchmarks")
    if loaded is None:
        for root in _checkouts(chosen):
            init = root / "benchmarks" / "__init__.py"
            if (root / "benchmarks" / "suite.py").is_file() and init.is_file():
                spec = importlib.util.spec_from_file_location(
                    "benchmarks", init, submodule_search_locations=[str(init.parent)])
                assert spec is not None and spec.loader is not None
                loaded = importlib.util.module_from_spec(spec)
                sys.modules["benchmarks"] = loaded
                spec.loader.exec_module(loaded)
                break
        else:
            where = chosen if chosen is not None else "the current directory"
            raise UsageError(f"no benchmarks/ suite in {where}: the suite ships with the source "
                             "repository, not the package; run from a checkout or pass --suite-dir")
    try:
        return importlib.import_module(f"benchmarks.{module}")
    except ModuleNotFoundError as exc:
        extra = "bench" if module == "e2e" else "dev"
        raise UsageError(f"the benchmark suite needs {exc.name!r}; install the {extra} extra") \
            from None


def register(subparsers: Any) -> None:
    """Add the ``bench`` subcommand."""
    parser = subparsers.add_parser(
        "bench",
        help="measure the engine: hot path, throughput, scaling, memory",
        description="Run the benchmark suite and report medians with spread: the engine's "
                    "hot path, throughput, scaling and memory, or with --e2e the operator "
                    "end to end beside its peers.",
    )
    parser.add_argument("--quick", action="store_true",
                        help="a reduced suite that takes under a minute (default: off, the "
                             "full suite)")
    parser.add_argument("--json", action="store_true",
                        help="print one JSON object instead of the summary (default: off)")
    parser.add_argument("--out", metavar="DIR", type=Path,
                        help="also write bench.json and the PNG plots into DIR (default: "
                             "none, nothing written)")
    parser.add_argument("--suite-dir", metavar="DIR", type=Path,
                        help="the source checkout holding benchmarks/ (default: the current "
                             "directory, then the checkout lifecycle runs from)")
    parser.add_argument("--e2e", action="store_true",
                        help="end to end beside the peers: API server and operators in "
                             "processes of their own; API calls, CPU, wall time, memory and "
                             "connection resets to Ready, at rest and to delete (default: "
                             "off, the engine's suite in this process)")
    parser.add_argument("-n", type=int, default=200, metavar="N",
                        help="objects per round with --e2e (default: 200)")
    parser.add_argument("--rounds", type=int, default=5,
                        help="interleaved rounds per operator with --e2e (default: 5)")
    parser.add_argument("--steady-polls", type=int, default=2, metavar="K",
                        help="poll intervals of the steady state with --e2e (0 skips it; "
                             "default: 2)")
    parser.add_argument("--operators", nargs="+", metavar="NAME",
                        choices=["lifecycle", "kopf", "lifecycle-direct",
                                 "lifecycle-uncached-secrets"],
                        help="operators to compare with --e2e (default: lifecycle kopf; "
                             "lifecycle is the 'lifecycle run' command line; lifecycle-direct: "
                             "without the cached reader; lifecycle-uncached-secrets: the "
                             "cached reader without its Secret informer)")
    parser.add_argument("--peers", nargs="+", metavar="PEER", choices=["kopf", "provider-sql"],
                        help="with --e2e: kopf runs DatabaseInstance beside lifecycle; "
                             "provider-sql adds the PostgreSQL workload (Role, Database, "
                             "Grant) beside the Go peer (default: none, the --operators "
                             "comparison)")
    parser.add_argument("--server", choices=["embedded", "envtest"], default=None,
                        help="API server of --e2e: embedded (default) or a real kube-apiserver "
                             "started for the run")
    parser.add_argument("--kubeconfig", metavar="FILE",
                        help="with --e2e: run on the server this admin kubeconfig names "
                             "(e.g. from lifecycle envtest); needs --audit-log (default: "
                             "none, a server is started for the run)")
    parser.add_argument("--audit-log", metavar="FILE",
                        help="that server's audit log, where API calls are counted "
                             "(lifecycle envtest --dir D writes D/audit.log; default: none)")
    parser.add_argument("--memory-n", type=int, default=5000, metavar="N",
                        help="objects of the memory round with --e2e (0 skips it; "
                             "default: 5000)")
    parser.add_argument("--pg-n", type=int, default=50, metavar="N",
                        help="Roles, Databases and Grants of the PostgreSQL workload "
                             "(default: 50)")
    parser.set_defaults(func=run)


def _e2e_config(args: argparse.Namespace, e2e: ModuleType) -> Any:
    """The end-to-end benchmark's Config from the options, or a one-line UsageError."""
    for option, value, low, high in (("-n", args.n, 1, 100_000),
                                     ("--rounds", args.rounds, 1, 100),
                                     ("--steady-polls", args.steady_polls, 0, 100),
                                     ("--memory-n", args.memory_n, 0, 100_000),
                                     ("--pg-n", args.pg_n, 1, 10_000)):
        if not low <= value <= high:
            raise UsageError(f"{option} must be between {low} and {high}, got {value}")
    if args.kubeconfig and args.server:
        raise UsageError("give --server or --kubeconfig, not both")
    if args.audit_log and not args.kubeconfig:
        raise UsageError("--audit-log goes with --kubeconfig (the server it names)")
    if args.kubeconfig:
        if not args.audit_log:
            raise UsageError("counting API calls on the server --kubeconfig names needs its "
                             "audit log: pass --audit-log FILE (lifecycle envtest --dir D "
                             "writes D/audit.log)")
        for option, path in (("--kubeconfig", args.kubeconfig), ("--audit-log", args.audit_log)):
            if not Path(path).is_file():
                raise UsageError(f"{option} {path}: no such file")
    peers = tuple(dict.fromkeys(args.peers or ()))
    if args.operators and peers:
        raise UsageError("give --operators or --peers, not both")
    operators = (("lifecycle", *(("kopf",) if "kopf" in peers else ())) if peers
                 else tuple(dict.fromkeys(args.operators or e2e.OPERATORS)))
    return e2e.Config(n=args.n, rounds=args.rounds, steady_polls=args.steady_polls,
                      operators=operators, peers=peers,
                      server="kubeconfig" if args.kubeconfig else (args.server or "embedded"),
                      kubeconfig=args.kubeconfig, audit_log=args.audit_log,
                      memory_n=args.memory_n, pg_n=args.pg_n)


def _run_e2e(args: argparse.Namespace) -> int:
    e2e = _suite(args.suite_dir, "e2e")
    config = _e2e_config(args, e2e)
    if "kopf" in config.operators:
        importlib.import_module("kopf")  # fail early, with the extra to install
    progress = None if args.json else (lambda message: print(f"# {message}", file=sys.stderr))
    result = e2e.run(config, progress=progress)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "e2e.json").write_text(json.dumps(result, indent=2) + "\n",
                                           encoding="utf-8")
        e2e.plot(result, args.out / "e2e.png")
    print(json.dumps(result) if args.json else e2e.summary(result))
    return 0


def run(args: argparse.Namespace) -> int:
    """Run the suite as ``args`` asks; print the result."""
    out: Path | None = args.out
    if out is not None and out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} exists and is not a directory")
    if args.e2e:
        try:
            return _run_e2e(args)
        except ModuleNotFoundError as exc:
            raise UsageError(f"the end-to-end benchmark needs {exc.name!r}; install the "
                             f"bench extra") from None
    suite = _suite(args.suite_dir)
    config = suite.QUICK if args.quick else suite.FULL
    progress = None if args.json else (lambda message: print(f"# {message}", file=sys.stderr))
    result = suite.run(config, progress=progress)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "bench.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        suite.plot(result, out)
    if args.json:
        print(json.dumps(result))
    else:
        print(suite.summary(result))
    return 0
