"""``lifecycle bench``: run the benchmark suite in ``benchmarks/`` and report its figures.

``--quick`` runs a reduced suite (under a minute on an idle machine);
``--json`` prints one JSON object instead of the summary table; ``--out DIR``
also writes ``bench.json`` and the PNG plots there. The suite lives in the
source repository's ``benchmarks/`` folder, which is not installed with the
package: run the command from a checkout (or pass ``--suite-dir``). It needs
the ``dev`` extra (pytransitions, matplotlib).
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


def _checkouts(chosen: Path | None) -> list[Path]:
    if chosen is not None:
        return [chosen]
    # The current directory, then the checkout this package runs from (an editable install).
    return [Path.cwd(), Path(__file__).resolve().parents[2]]


def _suite(chosen: Path | None = None) -> ModuleType:
    """The ``benchmarks`` package of a source checkout (it is not installed with lifecycle)."""
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
        return importlib.import_module("benchmarks.suite")
    except ModuleNotFoundError as exc:
        raise UsageError(f"the benchmark suite needs {exc.name!r}; install the dev extra") \
            from None


def register(subparsers: Any) -> None:
    """Add the ``bench`` subcommand."""
    parser = subparsers.add_parser(
        "bench",
        help="measure the engine: hot path, throughput, scaling, memory",
        description="Run the benchmark suite and report medians with spread.",
    )
    parser.add_argument("--quick", action="store_true",
                        help="a reduced suite that takes under a minute")
    parser.add_argument("--json", action="store_true",
                        help="print one JSON object instead of the summary")
    parser.add_argument("--out", metavar="DIR", type=Path,
                        help="also write bench.json and the PNG plots into DIR")
    parser.add_argument("--suite-dir", metavar="DIR", type=Path,
                        help="the source checkout holding benchmarks/ (default: the current "
                             "directory, then the checkout lifecycle runs from)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run the suite as ``args`` asks; print the result."""
    out: Path | None = args.out
    if out is not None and out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} exists and is not a directory")
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
