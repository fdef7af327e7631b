"""The whole benchmark suite in one run: hot path, throughput, latency-bound scaling, memory.

:func:`run` measures everything a :class:`Config` asks for, one part after
another in the same process, and returns one JSON-ready dict: the headline
keys (``hot_path_us``, ``statemachine_build_send_us``, ``hot_path_speedup``,
``reconciles_per_second``, ``flatness_ratio``, ``latency_efficiency_16``,
``memory_ratio``), each part's full figures, the targets with whether each
was met, and the machine the figures came from. :func:`plot` draws
throughput against N and against workers as PNG files.
"""

from __future__ import annotations

import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

from benchmarks import hot_path, latency, memory, throughput


@attrs.frozen
class Config:
    """How much of each benchmark to run."""

    hot_path_rounds: int = 9
    hot_path_budget: float = 0.3
    sizes: tuple[int, ...] = (1_000, 10_000, 100_000)
    size_rounds: tuple[int, ...] = (9, 3, 1)
    workers: tuple[int, ...] = (1, 4, 16, 64)
    latency: float = 0.050
    latency_duration: float = 5.0
    memory_objects: int = 10_000


#: The full suite (several minutes: N=100,000 dominates).
FULL = Config()
#: A run of well under a minute on an idle machine: smaller N, shorter windows.
QUICK = Config(hot_path_rounds=5, hot_path_budget=0.1, sizes=(1_000, 4_000),
               size_rounds=(3, 1), latency_duration=1.0, memory_objects=1_000)

#: The issue's targets: key, comparison, bound.
TARGETS: tuple[tuple[str, str, float], ...] = (
    ("hot_path_speedup", ">=", 20.0),
    ("reconciles_per_second", ">=", 3_000.0),
    ("flatness_ratio", "<=", 1.5),
    ("latency_efficiency_16", ">=", 0.80),
    ("memory_ratio", "<=", 3.0),
)


def machine() -> dict[str, Any]:
    """Where the figures came from: cores, CPU model, Python, OS, load at the start."""
    model = platform.processor() or "unknown"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        load = list(os.getloadavg())
    except OSError:
        load = []
    return {
        "nproc": os.cpu_count(),
        "cpu_model": model,
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "load_average": load,
    }


def run(config: Config = FULL, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run the suite and return its figures as one dict."""
    say = progress or (lambda _message: None)
    started = time.perf_counter()
    info = machine()
    say("hot path")
    hot = hot_path.run(repeat=config.hot_path_rounds, budget=config.hot_path_budget)
    say(f"throughput, N = {', '.join(map(str, config.sizes))}")
    through = throughput.in_fresh_process(config.sizes, config.size_rounds)
    say(f"latency-bound scaling, workers = {', '.join(map(str, config.workers))}")
    lat = latency.run(config.workers, latency=config.latency, duration=config.latency_duration)
    say(f"memory, {config.memory_objects} objects")
    mem = memory.in_fresh_process(config.memory_objects)
    out: dict[str, Any] = {
        "hot_path_us": hot["hot_path_us"],
        "statemachine_build_send_us": hot["statemachine_build_send_us"],
        "transitions_build_send_us": hot["transitions_build_send_us"],
        "transitions_reuse_us": hot["transitions_reuse_us"],
        "dict_lookup_us": hot["dict_lookup_us"],
        "hot_path_speedup": hot["hot_path_speedup"],
        "reconciles_per_second": through["reconciles_per_second"],
        "reconciles_per_second_wall": through["reconciles_per_second_wall"],
        "flatness_ratio": through["flatness_ratio"],
        "flatness_ratio_wall": through["flatness_ratio_wall"],
        "memory_ratio": mem["memory_ratio"],
    }
    out.update({k: v for k, v in lat.items() if k.startswith("latency_efficiency_")})
    out.setdefault("latency_efficiency_16", None)
    out["targets"] = [
        {"key": key, "target": f"{op} {bound:g}", "value": out.get(key),
         "met": _met(out.get(key), op, bound)}
        for key, op, bound in TARGETS
    ]
    out["hot_path"] = hot
    out["throughput"] = through
    out["latency"] = lat
    out["memory"] = mem
    out["config"] = attrs.asdict(config)
    out["machine"] = info
    out["seconds"] = time.perf_counter() - started
    return out


def _met(value: Any, op: str, bound: float) -> bool | None:
    if value is None:
        return None
    return value >= bound if op == ">=" else value <= bound


def summary(result: dict[str, Any]) -> str:
    """A short human-readable table of the headline figures and targets."""
    m = result["machine"]
    lines = [
        f"machine: {m['nproc']} x {m['cpu_model']}, Python {m['python']}, "
        f"load {', '.join(f'{x:.2f}' for x in m['load_average'])}",
        f"hot path {result['hot_path_us']:.1f} us; python-statemachine build+send "
        f"{result['statemachine_build_send_us']:.1f} us; pytransitions build+send "
        f"{result['transitions_build_send_us']:.1f} us, reused "
        f"{result['transitions_reuse_us']:.1f} us; dict {result['dict_lookup_us']:.3f} us",
    ]
    for row in result["throughput"]["sizes"]:
        lines.append(
            f"N={row['n']:>7}: {row['seconds_to_ready']['median']:.2f} s to Ready, "
            f"{row['reconciles_per_cpu_second']['median']:.0f} reconciles/CPU-s "
            f"({row['reconciles_per_second_wall']['median']:.0f}/wall-s), "
            f"{row['cpu_us_per_reconcile']['median']:.0f} us/reconcile, {row['rounds']} round(s)")
    for row in result["latency"]["rows"]:
        lines.append(
            f"workers={row['workers']:>3}: {row['achieved_per_second']:.0f}/s of ideal "
            f"{row['ideal_per_second']:.0f}/s ({row['efficiency']:.0%})")
    mem = result["memory"]
    lines.append(f"memory: {mem['bytes_per_resource']:.0f} B/resource, JSON "
                 f"{mem['json_bytes_per_object']:.0f} B (plain dicts "
                 f"{mem['plain_bytes_per_resource']:.0f} B)")
    for target in result["targets"]:
        value = target["value"]
        shown = "n/a" if value is None else f"{value:.3g}"
        verdict = {True: "met", False: "MISSED", None: "not measured"}[target["met"]]
        lines.append(f"  {target['key']:<24} {shown:>8}  target {target['target']:<8} {verdict}")
    lines.append(f"suite took {result['seconds']:.1f} s")
    return "\n".join(lines)


def plot(result: dict[str, Any], directory: Path) -> list[Path]:
    """Write ``throughput-vs-n.png`` and ``throughput-vs-workers.png``; return their paths."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    directory.mkdir(parents=True, exist_ok=True)
    written = []
    rows = result["throughput"]["sizes"]
    ns = [r["n"] for r in rows]
    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=110)
    ax.plot(ns, [r["reconciles_per_cpu_second"]["median"] for r in rows], "o-",
            label="reconciles per CPU-second (one worker)")
    ax.plot(ns, [r["reconciles_per_second_wall"]["median"] for r in rows], "s--",
            label="reconciles per wall-second")
    ax.axhline(3000, color="grey", linestyle=":", label="target 3,000/s")
    ax.set_xscale("log")
    ax.set_xticks(ns, [f"{n:,}" for n in ns])
    ax.minorticks_off()
    ax.set_xlabel("resources N (created to Ready)")
    ax.set_ylabel("reconciles per second")
    ax.set_ylim(bottom=0)
    ax.set_title("Throughput against N, zero-latency cloud")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="lower left", fontsize=8)
    fig.tight_layout()
    path = directory / "throughput-vs-n.png"
    fig.savefig(path)
    plt.close(fig)
    written.append(path)

    lat = result["latency"]["rows"]
    workers = [r["workers"] for r in lat]
    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=110)
    ax.plot(workers, [r["ideal_per_second"] for r in lat], "k:", label="ideal: workers / latency")
    ax.plot(workers, [r["achieved_per_second"] for r in lat], "o-", label="achieved")
    for r in lat:
        ax.annotate(f"{r['efficiency']:.0%}", (r["workers"], r["achieved_per_second"]),
                    textcoords="offset points", xytext=(6, -12), fontsize=8)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(workers, [str(w) for w in workers])
    ax.set_xlabel("workers")
    ax.set_ylabel("reconciles per second")
    ax.set_title(f"Throughput against workers, cloud latency "
                 f"{result['latency']['latency_seconds'] * 1000:.0f} ms")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    path = directory / "throughput-vs-workers.png"
    fig.savefig(path)
    plt.close(fig)
    written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    """``python -m benchmarks.suite [--quick]``: print the summary."""
    quick = "--quick" in (argv if argv is not None else sys.argv[1:])
    result = run(QUICK if quick else FULL, progress=lambda m: print(f"# {m}", file=sys.stderr))
    print(summary(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
