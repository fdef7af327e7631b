"""The benchmark suite in a tiny configuration: its output keys and their plausibility.

Nothing here asserts a speed: timings belong to the benchmarks themselves.
"""

from __future__ import annotations

import json

import pytest

from benchmarks import e2e, suite
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
        # claim+create, observe available (late-init, its generation observed in that pass)
        assert row["reconciles_per_object"] == 2.0
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


# ------------------------------------------------------------ end to end
E2E_TINY = e2e.Config(n=4, rounds=1, poll=0.5, steady_polls=2, timeout=60)


@pytest.fixture(scope="module")
def e2e_result() -> dict:
    return e2e.run(E2E_TINY)


def test_e2e_headline_keys_and_sane_values(e2e_result):
    for key in ("e2e_cpu_ratio_vs_kopf", "e2e_api_calls_per_object", "e2e_poll_api_calls"):
        assert isinstance(e2e_result[key], float), key
    assert e2e_result["e2e_cpu_ratio_vs_kopf"] > 0
    for name in ("lifecycle", "kopf"):
        side = e2e_result[name]
        assert side["all_ready"], name
        assert side["operator_cpu_seconds"] > 0 and side["apiserver_cpu_seconds"] > 0
        assert 0 < side["wall_seconds"] < E2E_TINY.timeout
        # At least: the create of the connection Secret and a status write per object.
        assert side["api_calls_per_object"] >= 2, name
        assert sum(side["api_calls_by_verb"].values()) == pytest.approx(
            side["api_calls_per_object"])
        assert side["api_calls_by_request"]["create secrets"] == pytest.approx(1.0), name
        assert side["poll_api_calls"] == pytest.approx(
            sum(side["poll_api_calls_by_request"].values())), name
    # Polling Ready objects writes neither them nor their Secrets (the idle rule).
    assert not [request for request in e2e_result["lifecycle"]["poll_api_calls_by_request"]
                if request.split()[0] in ("create", "update", "patch", "delete")
                and request.split()[1].split("/")[0] in ("databaseinstances", "secrets")]
    assert e2e_result["e2e_api_calls_by_verb"] == e2e_result["lifecycle"]["api_calls_by_verb"]
    # One sample before the rounds and one after each operator's round.
    samples = e2e_result["load_average"]["samples"]
    assert len(samples) == 1 + E2E_TINY.rounds * 2
    assert all(len(sample) == 3 and all(isinstance(x, float) for x in sample)
               for sample in samples)
    assert e2e_result["load_average"]["max_1min"] == max(sample[0] for sample in samples)
    json.dumps(e2e_result)
    text = e2e.summary(e2e_result)
    assert "lifecycle / kopf" in text and "N = 4" in text


def test_e2e_plot_is_a_png(e2e_result, tmp_path):
    path = tmp_path / "e2e.png"
    e2e.plot(e2e_result, path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert path.stat().st_size > 5_000


def test_e2e_counting_classifies_requests_by_verb_and_resource():
    from lifecycle.sim.apiserver import EmbeddedAPI
    from lifecycle.sim.http import APIServerHTTP

    face = APIServerHTTP(EmbeddedAPI())
    try:
        cases = {
            ("GET", "/api/v1/namespaces/default/secrets/x"): "get secrets",
            ("GET", "/api/v1/namespaces/default/secrets"): "list secrets",
            ("GET", "/api/v1/namespaces/default/secrets?watch=true"): "watch secrets",
            ("POST", "/api/v1/namespaces/default/events"): "create events",
            ("PATCH", "/api/v1/namespaces/default/events/e.1"): "patch events",
            ("PUT", "/api/v1/namespaces/default/secrets/x"): "update secrets",
            ("DELETE", "/api/v1/namespaces/default/secrets/x"): "delete secrets",
            ("GET", "/apis"): "get discovery",
        }
        for (method, path), expected in cases.items():
            assert e2e.classify(method, path, face.route) == expected
    finally:
        face._server.server_close()


def test_e2e_cpu_seconds_reads_proc():
    import os

    spent = e2e.cpu_seconds(os.getpid())
    sum(i * i for i in range(300_000))
    assert e2e.cpu_seconds(os.getpid()) > spent


@pytest.mark.parametrize("args, message", [
    (["-n", "0"], "-n must be between"),
    (["--rounds", "0"], "--rounds must be between"),
    (["--poll", "0"], "--poll must be between"),
])
def test_e2e_cli_rejects_bad_numbers_in_one_line(args, message, capsys):
    assert cli.main(["bench", "--e2e", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_e2e_cli_prints_one_json_object_and_writes_it(capsys, tmp_path):
    assert cli.main(["bench", "--e2e", "--json", "-n", "2", "--rounds", "1", "--poll", "0.5",
                     "--operators", "lifecycle", "--out", str(tmp_path)]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["lifecycle"]["all_ready"] and printed["config"]["n"] == 2
    assert printed["e2e_api_calls_per_object"] > 0 and "e2e_cpu_ratio_vs_kopf" not in printed
    assert json.loads((tmp_path / "e2e.json").read_text())["config"]["operators"] == ["lifecycle"]
