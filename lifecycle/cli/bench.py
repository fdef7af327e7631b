"""``lifecycle bench``: run the benchmark suite in ``benchmarks/`` and report its figures.

``--quick`` runs a reduced suite (under a minute on an idle machine);
``--json`` prints one JSON object instead of the summary table; ``--out DIR``
also writes ``bench.json`` and the PNG plots there. The suite lives in the
source tree's ``benchmarks`` package and needs the ``dev`` extra
(pytransitions, matplotlib).
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from lifecycle.cli import UsageError


def _suite() -> ModuleType:
    """Import ``benchmarks.suite``, from the source checkout next to this package if needed."""
    try:
        return importlib.import_module("benchmarks.suite")
    except ModuleNotFoundError as exc:
        if exc.name not in ("benchmarks", "benchmarks.suite"):
            raise UsageError(f"the benchmark suite needs {exc.name!r}; install the dev extra") \
                from None
    root = Path(__file__).resolve().parent.parent
    if not (root / "benchmarks" / "suite.py").is_file():
        raise UsageError("the benchmarks/ suite is not available; run from a source checkout")
    sys.path.insert(0, str(root))
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
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run the suite as ``args`` asks; print the result."""
    out: Path | None = args.out
    if out is not None and out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} exists and is not a directory")
    suite = _suite()
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
