"""The benchmark suite in a tiny configuration: its output keys and their plausibility.

Nothing here asserts a speed: timings belong to the benchmarks themselves.
"""

from __future__ import annotations

import json

import pytest

from benchmarks import suite
from benchmarks.cache import ObjectCache
from benchmarks.operator import build
from benchmarks.runner import Runner
from lifecycle import cli

TINY = suite.Config(hot_path_rounds=1, hot_path_budget=0.01, sizes=(20, 40),
                    size_rounds=(1, 1), workers=(1, 16), latency=0.002,
                    latency_duration=0.2, memory_objects=300)

HEADLINE = ("hot_path_us", "statemachine_build_send_us", "hot_path_speedup",
            "reconciles_per_second", "flatness_ratio", "latency_efficiency_16", "memory_ratio")


@pytest.fixture(scope="module")
def result() -> dict:
    return suite.run(TINY)


def test_headline_keys_are_positive_numbers(result):
    for key in HEADLINE:
        assert isinstance(result[key], float), key
        assert result[key] > 0, key
    json.dumps(result)  # the whole result is JSON-ready


def test_figures_are_consistent(result):
    hot = result["hot_path"]
    assert hot["hot_path"]["min_us"] <= hot["hot_path_us"] <= hot["hot_path"]["max_us"]
    assert result["hot_path_speedup"] == pytest.approx(
        result["statemachine_build_send_us"] / result["hot_path_us"])
    sizes = result["throughput"]["sizes"]
    assert [row["n"] for row in sizes] == [20, 40]
    for row in sizes:
        assert row["all_ready"] and row["errors"] == 0
        # one pass: claim+create, the cloud's answer says available (observed in that pass)
        assert row["reconciles_per_object"] == 1.0
    assert result["flatness_ratio"] == pytest.approx(
        sizes[1]["cpu_us_per_reconcile"]["median"] / sizes[0]["cpu_us_per_reconcile"]["median"])
    for row in result["latency"]["rows"]:
        assert row["errors"] == 0
        assert row["cloud_calls_per_reconcile"] == 1.0  # a Ready poll makes one cloud call
        assert 0 < row["efficiency"] <= 1.2
    mem = result["memory"]
    assert mem["json_bytes_per_object"] > 500
    assert mem["bytes_per_resource"] < mem["plain_bytes_per_resource"]
    assert {t["key"] for t in result["targets"]} <= set(HEADLINE)
    assert all(isinstance(t["met"], bool) for t in result["targets"])
    assert result["machine"]["nproc"] >= 1 and result["machine"]["python"]


def test_plots_are_png_files(result, tmp_path):
    paths = suite.plot(result, tmp_path / "img")
    assert [p.name for p in paths] == ["throughput-vs-n.png", "throughput-vs-workers.png"]
    for path in paths:
        assert path.read_bytes().startswith(b"\x89PNG")


def test_summary_names_every_target(result):
    text = suite.summary(result)
    for key, _, _ in suite.TARGETS:
        assert key in text


def test_cli_json_prints_one_object(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(suite, "QUICK", TINY)
    assert cli.main(["bench", "--quick", "--json", "--out", str(tmp_path / "out")]) == 0
    printed = json.loads(capsys.readouterr().out)
    for key in HEADLINE:
        assert key in printed
    assert json.loads((tmp_path / "out" / "bench.json").read_text())["config"]["sizes"] == [20, 40]
    assert (tmp_path / "out" / "throughput-vs-n.png").is_file()


def test_cli_rejects_out_that_is_a_file(tmp_path, capsys):
    target = tmp_path / "file"
    target.write_text("x")
    assert cli.main(["bench", "--quick", "--out", str(target)]) == 2
    assert "not a directory" in capsys.readouterr().err


def test_runner_brings_every_object_to_ready_with_many_workers():
    operator = build(30)
    stats = Runner(operator.reconciler, workers=4).settle(operator.keys, timeout=60)
    assert stats.settled == 30 and stats.errors == 0
    items, _ = operator.api.list("db.lifecycle.dev/v1alpha1", "DatabaseInstance")
    assert {obj["status"]["state"] for obj in items} == {"ready"}
    assert all(operator.cloud.creations(obj["metadata"]["annotations"]
                                        ["lifecycle.dev/external-name"]) == 1 for obj in items)


def test_cache_interns_and_follows_deletes():
    cache = ObjectCache()
    text = json.dumps({"metadata": {"name": "a", "namespace": "ns"},
                       "status": {"lastTransitionTime": "2026-01-01T00:00:00Z"}})
    key = cache.apply("ADDED", text)
    other = cache.apply("ADDED", text.replace('"a"', '"b"'))
    first, second = cache.get(key), cache.get(other)
    assert first is not None and second is not None
    assert first["status"]["lastTransitionTime"] is second["status"]["lastTransitionTime"]
    cache.apply("DELETED", text)
    assert cache.get(key) is None and len(cache) == 1


def test_bench_outside_a_checkout_says_where_the_suite_lives(tmp_path, capsys, monkeypatch):
    monkeypatch.delitem(__import__("sys").modules, "benchmarks", raising=False)
    monkeypatch.chdir(tmp_path)
    assert cli.main(["bench", "--quick", "--suite-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "no benchmarks/ suite in" in err and "--suite-dir" in err
    assert len(err.splitlines()) == 1
