"""The end-to-end benchmark's table and plot (:func:`summary`, :func:`plot`)."""

from __future__ import annotations

from typing import Any

ROWS = (("wall to all Ready, s", "wall_seconds", "{:.2f}"),
        ("median create to Ready, s", "ready_latency_median_seconds", "{:.2f}"),
        ("operator CPU, s", "operator_cpu_seconds", "{:.2f}"),
        ("operator CPU per object, ms", "operator_cpu_ms_per_object", "{:.2f}"),
        ("API server CPU, s", "apiserver_cpu_seconds", "{:.2f}"),
        ("API calls per object when all Ready", "api_calls_per_object_at_ready", "{:.2f}"),
        ("API calls per object, settled", "api_calls_per_object", "{:.2f}"),
        ("API calls per Ready object per poll", "poll_api_calls", "{:.2f}"),
        ("operator CPU per poll, ms", "poll_operator_cpu_ms", "{:.2f}"),
        ("API calls per object to delete", "delete_api_calls_per_object", "{:.2f}"),
        ("operator CPU per delete, ms", "delete_operator_cpu_ms_per_object", "{:.2f}"),
        ("connection resets (all rounds)", "connection_resets", "{:.0f}"))
MEMORY_ROWS = (("RSS growth per object, KB", "rss_growth_bytes_per_object", 1 / 1024),
               ("object JSON, KB", "object_json_bytes", 1 / 1024),
               ("RSS growth / JSON", "memory_ratio_json", 1.0))
LABEL = 40


def _cell(value: Any, form: str, width: int) -> str:
    return f"{'-' if value is None else form.format(value):>{width}}"


def _names(result: dict[str, Any]) -> list[str]:
    from benchmarks.e2e import OPERATORS, VARIANTS

    return list(dict.fromkeys(n for n in (*OPERATORS, *VARIANTS) if n in result))


def summary(result: dict[str, Any]) -> str:
    """A side-by-side table of the medians, the memory round and the PostgreSQL workload."""
    names = _names(result)
    width = max(12, *(len(n) + 2 for n in names))
    lines = [f"{'':<{LABEL}}" + "".join(f"{n:>{width}}" for n in names)]
    for label, key, form in ROWS:
        lines.append(f"{label:<{LABEL}}" + "".join(_cell(result[n].get(key), form, width)
                                                   for n in names))
    if any(result[n].get("memory") for n in names):
        n_mem = next(result[n]["memory"]["n"] for n in names if result[n].get("memory"))
        lines.append(f"memory round, N = {n_mem}:")
        for label, key, scale in MEMORY_ROWS:
            cells = []
            for n in names:
                value = (result[n].get("memory") or {}).get(key)
                cells.append(_cell(None if value is None else value * scale, "{:.2f}", width))
            lines.append(f"  {label:<{LABEL - 2}}" + "".join(cells))
    if result.get("e2e_cpu_ratio_vs_kopf") is not None:
        lines.append(f"operator CPU ratio lifecycle / kopf: {result['e2e_cpu_ratio_vs_kopf']:.2f}")
    for name in names:
        calls = ", ".join(f"{k} {v:.2f}" for k, v in result[name]["api_calls_by_request"].items())
        lines.append(f"{name} calls per object to Ready: {calls}")
        deletes = ", ".join(f"{k} {v:.2f}"
                            for k, v in result[name]["delete_api_calls_by_request"].items())
        if deletes:
            lines.append(f"{name} calls per object to delete: {deletes}")
    if result.get("pg"):
        from benchmarks.e2e_pg import summary as pg_summary

        lines.append(pg_summary(result["pg"]))
    cfg = result["config"]
    lines.append(f"N = {cfg['n']}, {cfg['rounds']} round(s), {cfg['server']} server, poll "
                 f"{result['poll_seconds']:g} s; 1-min load up to "
                 f"{result['load_average']['max_1min']:.2f}")
    return "\n".join(lines)


def plot(result: dict[str, Any], path: Any) -> None:
    """Three panels: API calls per object by verb to Ready and to delete, CPU per object.

    Each operator's bars stack the verbs it sent from absent to Ready
    (settled) and from the delete to gone; the third panel is the median
    operator CPU per object, to Ready and to delete. With the PostgreSQL
    workload a fourth panel compares its calls per object per phase.
    Written as a PNG to ``path``.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = _names(result)
    pg = result.get("pg")
    panels = 4 if pg else 3
    fig, axes = plt.subplots(1, panels, figsize=(3.4 * panels, 3.6))
    for axis, key, title in ((axes[0], "api_calls_by_request", "to Ready"),
                             (axes[1], "delete_api_calls_by_request", "to delete")):
        verbs = sorted({r.split(" ", 1)[0] for n in names for r in result[n][key]})
        bottoms = [0.0] * len(names)
        for verb in verbs:
            heights = [sum(v for r, v in result[n][key].items() if r.split(" ", 1)[0] == verb)
                       for n in names]
            axis.bar(names, heights, bottom=bottoms, label=verb)
            bottoms = [b + h for b, h in zip(bottoms, heights, strict=True)]
        axis.set_ylabel(f"API calls per object, {title}")
        axis.legend(fontsize=7)
    cpu = axes[2]
    xs = range(len(names))
    cpu.bar([x - 0.2 for x in xs], [result[n]["operator_cpu_ms_per_object"] or 0 for n in names],
            width=0.4, color="#777", label="to Ready")
    cpu.bar([x + 0.2 for x in xs],
            [result[n]["delete_operator_cpu_ms_per_object"] or 0 for n in names],
            width=0.4, color="#bbb", label="to delete")
    cpu.set_xticks(list(xs), names)
    cpu.set_ylabel("operator CPU per object, ms")
    cpu.legend(fontsize=7)
    if pg:
        from benchmarks.e2e_pg import plot_panel

        plot_panel(pg, axes[3])
    cfg = result["config"]
    fig.suptitle(f"N = {cfg['n']}, {cfg['server']} server, median of {cfg['rounds']} "
                 f"interleaved rounds; 1-min load up to "
                 f"{result['load_average']['max_1min']:.1f}", fontsize=9)
    for axis in axes:
        axis.tick_params(axis="x", labelsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
