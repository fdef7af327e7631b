"""``lifecycle verify``: the crash-point explorer on the command line.

Explores every side-effect point of each chosen kind (or replays one point
with its full trace) and prints a verdict per point, the counterexamples
and a summary; exits 1 when any counterexample was found. With
``--kubeconfig`` every run takes place on that real API server
(:mod:`lifecycle.verify.remote`) instead of an embedded one.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any, TextIO

from lifecycle.cli import UsageError
from lifecycle.kube.errors import ApiError
from lifecycle.verify import (
    CONCURRENT,
    SIDES,
    VARIANTS,
    Checked,
    Counterexample,
    CrashPoint,
    Target,
    VerifyError,
    explore,
    run_scenario,
    targets,
)
from lifecycle.verify.remote import RealServer, ServerRefused, real_kinds

__all__ = ["parse_points", "register", "run_cli"]


def _print_point(out: TextIO, checked: Checked, example: Counterexample | None) -> None:
    p = checked.point
    verdict = "ok  " if checked.ok else "FAIL"
    out.write(f"  {verdict} #{p.index:<3} {p.side:<6} {p.variant:<17} [{checked.phase}] "
              f"{checked.operation}\n")
    if example is not None:
        out.write(example.render() + "\n")


def run_cli(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """``lifecycle verify``: explore each target; exit 1 on any counterexample."""
    out = out if out is not None else sys.stdout

    chosen, skipped = targets(args.kinds)
    for name, reason in skipped:
        out.write(f"SKIP {name}: {reason}\n")
    if not chosen:
        raise UsageError("no kind to verify")
    stale = getattr(args, "stale", 0)
    if stale < 0:
        raise UsageError(f"--stale must be 0 (fresh reads) or a number of writes, got {stale}")
    if args.variant == CONCURRENT and not stale:
        raise UsageError("--variant concurrent needs --stale K (the user acts while the "
                         "engine reads a stale cache)")
    points = parse_points(getattr(args, "points", None))
    if points is not None and args.point is not None:
        raise UsageError("--points explores some points, --point replays one: give one of them")
    sides = SIDES if args.side is None else (args.side,)
    every = (*VARIANTS, CONCURRENT) if stale else VARIANTS
    variants = every if args.variant is None else (args.variant,)
    server = _server(args, chosen, out)
    with _stopped_by(server):
        baselines = (_baselines(chosen, args.point, stale, server)
                     if args.point is not None else {})
        failed = 0
        for target in chosen:
            if args.point is not None:
                failed += _replay(out, target, args.point, sides, variants,
                                  baselines[target.name], stale, server)
                continue
            failed += _explore(out, target, sides, variants, stale, points, server)
    if server is not None:
        _server_summary(out, server)
    out.write("verify: " + ("FAILED" if failed else "OK") + "\n")
    return 1 if failed else 0


def _explore(out: TextIO, target: Target, sides: Sequence[str], variants: Sequence[str],
             stale: int, points: list[int] | None, server: RealServer | None) -> int:
    """Explore one target, printing each point's verdict and a summary; the failures."""
    reads = f", reads up to {stale} write(s) stale" if stale else ""
    which = "every side-effect point" if points is None else "the chosen side-effect points"
    out.write(f"{target.name}: exploring {which} of create -> update -> delete{reads}\n")
    started = time.monotonic()
    report = explore(target, sides=sides, variants=variants, stale=stale, points=points,
                     server=server, on_point=lambda c, e: _print_point(out, c, e))
    took = f" in {time.monotonic() - started:.1f} s" if server is not None else ""
    out.write(f"{target.name}: {report.points} side-effect points, "
              f"{len(report.checked)} runs "
              f"({' and '.join(sides)} x {', '.join(variants)}), "
              f"{len(report.counterexamples)} counterexample(s){took}\n")
    return len(report.counterexamples)


def parse_points(spec: str | None) -> list[int] | None:
    """``--points``: ``3``, ``1-5``, ``1-5,9,12-14`` as a sorted list of points (None: all)."""
    if spec is None:
        return None
    chosen: set[int] = set()
    for part in spec.split(","):
        low, dash, high = part.strip().partition("-")
        try:
            first = int(low)
            last = int(high) if dash else first
        except ValueError:
            raise UsageError(f"--points expects points such as 1-5,9, got {spec!r}") from None
        if first < 1 or last < first:
            raise UsageError(f"--points: {part.strip()!r} is no range of points (they count "
                             "from 1)")
        chosen.update(range(first, last + 1))
    return sorted(chosen)


def _server(args: argparse.Namespace, chosen: Sequence[Target],
            out: TextIO) -> RealServer | None:
    """The real API server of ``--kubeconfig`` (None: embedded), checked before any run."""
    kubeconfig = getattr(args, "kubeconfig", None)
    if kubeconfig is None:
        if getattr(args, "context", None):
            raise UsageError("--context needs --kubeconfig")
        return None
    try:
        server = RealServer.from_kubeconfig(kubeconfig, getattr(args, "context", None))
        server.check(real_kinds(chosen))
    except VerifyError as exc:
        raise UsageError(str(exc)) from None
    out.write(f"verify: on the API server at {server.host}, every run in namespaces of its "
              "own\n")
    return server


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


@contextlib.contextmanager
def _stopped_by(server: RealServer | None) -> Iterator[None]:
    """A lost or refusing real server ends the command with one line; on a real server a
    SIGTERM interrupts as Ctrl-C does, so the current run still cleans up after itself."""
    previous = None
    if server is not None and threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        yield
    except ServerRefused as exc:
        where = f" at {server.host}" if server is not None else ""
        raise UsageError(f"{exc} (server{where}); nothing more was explored") from None
    except ApiError as exc:  # an answer to the explorer's own request, not the engine's
        if server is None:
            raise
        raise UsageError(f"the API server at {server.host} answered {exc.status} "
                         f"{exc.reason}: {str(exc)[:200]}; nothing more was explored") from None
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _server_summary(out: TextIO, server: RealServer) -> None:
    if server.installed:
        out.write(f"verify: installed the missing CRDs {', '.join(server.installed)} "
                  "(kept)\n")
    for line in server.leftovers[:5]:
        out.write(f"verify: WARNING could not clean up {line}\n")
    if len(server.leftovers) > 5:
        out.write(f"verify: WARNING ... and {len(server.leftovers) - 5} more left behind\n")


def _baselines(chosen: Sequence[Target], index: int, stale: int = 0,
               server: RealServer | None = None) -> dict[str, Any]:
    """Each target's run without a crash; a :class:`UsageError` when ``index`` is no point of it.

    Checked for every target before anything is replayed, so an out-of-range
    ``--point`` is one line and no partial output.
    """
    if index < 0:
        raise UsageError(f"--point must be 0 (no crash) or a side-effect point, got {index}")
    baselines = {}
    for target in chosen:
        baseline = run_scenario(target, stale=stale, server=server)
        count = baseline.recorder.count
        if index > count:
            raise UsageError(f"--point {index} is out of range for {target.name}: "
                             f"valid points are 0..{count}")
        baselines[target.name] = baseline
    return baselines


def _replay(out: TextIO, target: Target, index: int, sides: Sequence[str],
            variants: Sequence[str], baseline: Any = None, stale: int = 0,
            server: RealServer | None = None) -> int:
    """Replay one point (0: no crash) and print its full trace."""
    if index == 0 and baseline is None:
        baseline = run_scenario(target, stale=stale, server=server)
    replays = ([(None, baseline)] if index == 0 else
               [(CrashPoint(index, s, v), run_scenario(target, CrashPoint(index, s, v),
                                                       stale=stale, server=server))
                for v in variants for s in sides
                if v != CONCURRENT or s == "before"])
    failed = 0
    for point, outcome in replays:
        where = "no crash" if point is None else f"#{index} {point.side} {point.variant}"
        out.write(f"{target.name}: replay {where}\n")
        for line in outcome.recorder.trace:
            out.write(f"    {line}\n")
        for problem in outcome.problems:
            out.write(f"  problem: {problem}\n")
        out.write(f"  {'FAIL' if outcome.problems else 'ok'}\n")
        failed += bool(outcome.problems)
    return failed


def register(subparsers: Any) -> None:
    """Add ``lifecycle verify [KIND ...]``."""
    parser = subparsers.add_parser(
        "verify",
        help="explore a crash at every side-effect point of each kind's lifecycle",
        description=(
            "Run create -> update -> delete for each kind and, for every API write and "
            "external create/update/delete, simulate the operator dying just before and just "
            "after it (also with the objects deleted while it is down); a fresh engine takes "
            "over. Checks that nothing is created twice, nothing leaks and every object "
            "converges. With no argument: every registered kind (a kind whose target needs "
            "something absent here, such as a database server, is listed as skipped). "
            "With --kubeconfig the Kubernetes API is that real server instead of an embedded "
            "one (the external system and the virtual clock stay in this process): every run "
            "gets namespaces of its own and prefixed names for its cluster-scoped objects, "
            "touches nothing else and is cleaned up after; missing CRDs are installed. "
            "Exits 1 on a counterexample."),
        epilog=("example, with a real API server from lifecycle envtest --kubeconfig kc "
                "beside it: lifecycle verify DatabaseInstance/adoption --kubeconfig kc "
                "--points 1-5"),
    )
    parser.add_argument("kinds", nargs="*", metavar="KIND",
                        help="kinds to verify: a registered name (DatabaseInstance), its "
                             "plural, or MODULE:NAME of a Registration or Kind; the kind's "
                             "registration says how (Registration.verify_target, e.g. "
                             "lifecycle.verify.targets.fake_target over an in-memory fake; "
                             "default: every registered kind)")
    parser.add_argument("--point", type=int, default=None,
                        help="replay one point (0: the run without a crash) with its trace "
                             "(default: explore every point)")
    parser.add_argument("--side", choices=SIDES, default=None,
                        help="only crashes on this side of each point, just before or just "
                             "after the write (default: both)")
    parser.add_argument("--variant", choices=(*VARIANTS, CONCURRENT), default=None,
                        help="only this variant: restart (a fresh engine takes over), "
                             "delete-while-down (the objects are deleted while it is down) or "
                             "concurrent (the user's next action lands just before the point; "
                             "needs --stale) (default: every variant that applies)")
    parser.add_argument("--stale", type=int, default=0, metavar="K",
                        help="stale-cache mode: the engine reads through the operator's "
                             "informer cache, every store up to K writes behind the server, "
                             "watch events late and coalesced; adds the concurrent variant "
                             "(default: 0, every read straight from the server)")
    parser.add_argument("--points", default=None, metavar="LIST",
                        help="explore only these side-effect points, e.g. 1-5,9 (points a "
                             "scenario does not have are skipped; default: every point)")
    parser.add_argument("--kubeconfig", default=None, metavar="FILE",
                        help="run every scenario on the real API server of this kubeconfig, "
                             "each run in namespaces of its own (it needs rights to create "
                             "namespaces, the kinds' objects, Secrets and Events, and to read "
                             "CRDs; to install the missing ones too) (default: an embedded "
                             "API server per run)")
    parser.add_argument("--context", default=None, metavar="NAME",
                        help="with --kubeconfig: the context to use (default: the file's "
                             "current context)")
    parser.add_argument("--trace", action="store_true",
                        help="with --point: print the trace; a replay always prints it, so "
                             "this changes nothing (kept for scripts; default: off)")
    parser.set_defaults(func=run_cli)
