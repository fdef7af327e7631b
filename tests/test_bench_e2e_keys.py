"""The end-to-end benchmark at a tiny size, on both servers: it runs and its keys are there.

Nothing here asserts a speed: timings belong to the benchmark itself.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import e2e, e2e_servers
from lifecycle import cli

ROOT = Path(__file__).resolve().parents[1]
#: The keys ``--json`` promises (the PostgreSQL ones are None unless provider-sql ran).
DONE_WHEN = ("e2e_api_calls_per_object", "e2e_delete_api_calls_per_object",
             "e2e_cpu_ratio_vs_kopf", "e2e_memory_ratio_json", "e2e_connection_resets",
             "pg_api_calls_ratio_vs_provider_sql", "pg_time_to_ready_ratio_vs_provider_sql",
             "pg_drift_repair_ratio_vs_provider_sql", "pg_cpu_ratio_vs_provider_sql")
TINY = e2e.Config(n=4, rounds=1, steady_polls=0, timeout=90, memory_n=6)


@pytest.fixture(scope="module")
def embedded() -> dict:
    return e2e.run(TINY)


def test_embedded_run_has_every_key_and_counts_both_phases(embedded):
    assert all(key in embedded for key in DONE_WHEN)
    for key in DONE_WHEN[:4]:
        assert isinstance(embedded[key], float) and embedded[key] > 0, key
    assert isinstance(embedded["e2e_connection_resets"], int)
    assert embedded["e2e_connection_resets"] >= 0
    assert all(embedded[key] is None for key in DONE_WHEN[5:])
    for name in ("lifecycle", "kopf"):
        side = embedded[name]
        row = embedded["rows"][name][0]
        assert side["all_ready"] and row["all_deleted"], name
        # The Secret each operator writes is counted; the benchmark's own creates are not.
        assert side["api_calls_by_request"]["create secrets"] == pytest.approx(1.0), name
        assert "create databaseinstances" not in side["api_calls_by_request"], name
        assert "delete databaseinstances" not in side["delete_api_calls_by_request"], name
        # Removing the finalizer at least: one write per object.
        assert side["delete_api_calls_per_object"] >= 1, name
        assert sum(side["api_calls_by_verb"].values()) == pytest.approx(
            side["api_calls_per_object"])
        memory = side["memory"]
        assert memory["n"] == TINY.memory_n and memory["object_json_bytes"] > 200, name
        assert memory["memory_ratio_json"] == pytest.approx(
            memory["rss_growth_bytes_per_object"] / memory["object_json_bytes"])
    assert embedded["e2e_delete_api_calls_per_object"] == \
        embedded["lifecycle"]["delete_api_calls_per_object"]
    assert embedded["poll_seconds"] > 0
    json.dumps(embedded)
    text = e2e.summary(embedded)
    for words in ("lifecycle / kopf", "to delete", "memory round, N = 6", "embedded server"):
        assert words in text, words


def test_embedded_plot_is_a_png(embedded, tmp_path):
    path = tmp_path / "e2e.png"
    e2e.plot(embedded, path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert path.stat().st_size > 5_000


def test_real_server_run_counts_from_the_audit_log(real_cluster, tmp_path):
    config = e2e.Config(n=3, rounds=1, steady_polls=0, timeout=90, memory_n=0,
                        operators=("lifecycle",), server="kubeconfig",
                        kubeconfig=str(real_cluster.kubeconfig),
                        audit_log=str(real_cluster.audit_log))
    result = e2e.run(config)
    assert all(key in result for key in DONE_WHEN)
    side = result["lifecycle"]
    assert side["all_ready"] and result["rows"]["lifecycle"][0]["all_deleted"]
    # Counted per user: the operator's Secret create, never the benchmark's own creates,
    # nor the controller manager's work.
    assert side["api_calls_by_request"]["create secrets"] == pytest.approx(1.0)
    assert "create databaseinstances" not in side["api_calls_by_request"]
    assert side["delete_api_calls_per_object"] >= 1
    assert result["e2e_memory_ratio_json"] is None  # no memory round asked for
    assert "kubeconfig server" in e2e.summary(result)


def _event(audit_id, stage, user, verb, resource=None, subresource=None):
    event = {"auditID": audit_id, "stage": stage, "verb": verb, "user": {"username": user}}
    if resource:
        event["objectRef"] = {"resource": resource, **(
            {"subresource": subresource} if subresource else {})}
    return json.dumps(event) + "\n"


def test_audit_counter_counts_each_request_once_per_user(tmp_path):
    log = tmp_path / "audit.log"
    log.write_text(_event("old", "ResponseComplete", "op", "create", "secrets"))
    counter = e2e_servers.AuditCounter(log)  # starts at the end: "old" is not counted
    with open(log, "a") as out:
        out.write(_event("w1", "ResponseStarted", "op", "watch", "secrets"))
        out.write(_event("c1", "ResponseComplete", "op", "update", "databaseinstances",
                         "status"))
        out.write(_event("c2", "ResponseComplete", "admin", "create", "databaseinstances"))
        out.write(_event("d1", "ResponseComplete", "op", "get"))
        out.write(_event("w1", "ResponseComplete", "op", "watch", "secrets"))
        out.write('{"auditID": "half", "stage": "ResponseComplete"')  # not yet a whole line
    assert counter.of("op") == {"watch secrets": 1, "update databaseinstances/status": 1,
                                "get discovery": 1}
    assert counter.of("admin") == {"create databaseinstances": 1}
    counter.reset()
    assert counter.of("op") == {}


def test_counting_classifies_requests_by_verb_and_resource():
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


def test_connection_counter_sees_a_refused_connection_and_a_reset():
    script = (
        "import socket, threading, http.client\n"
        "from benchmarks import e2e_netcount as n\n"
        "n.install()\n"
        "s = socket.socket(); s.bind(('127.0.0.1', 0)); port = s.getsockname()[1]; s.close()\n"
        "try:\n"
        "    socket.create_connection(('127.0.0.1', port), timeout=2)\n"
        "except ConnectionRefusedError:\n"
        "    pass\n"
        "server = socket.socket(); server.bind(('127.0.0.1', 0)); server.listen()\n"
        "def answer():\n"
        "    c, _ = server.accept(); c.recv(1024); c.close()\n"
        "threading.Thread(target=answer).start()\n"
        "conn = http.client.HTTPConnection('127.0.0.1', server.getsockname()[1], timeout=5)\n"
        "conn.request('GET', '/')\n"
        "try:\n"
        "    conn.getresponse()\n"
        "except http.client.RemoteDisconnected:\n"
        "    pass\n"
        "print(n.snapshot())\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=env, timeout=60, check=True)
    counts = ast.literal_eval(done.stdout.strip())
    assert counts == {"refused": 1, "closed_without_answer": 1, "total": 2}


def test_proc_readings():
    spent = e2e.cpu_seconds(os.getpid())
    sum(i * i for i in range(300_000))
    assert e2e.cpu_seconds(os.getpid()) > spent
    assert e2e_servers.rss_bytes(os.getpid()) > 10_000_000


@pytest.mark.parametrize("args, message", [
    (["-n", "0"], "-n must be between"),
    (["--rounds", "0"], "--rounds must be between"),
    (["--memory-n", "-1"], "--memory-n must be between"),
    (["--steady-polls", "-1"], "--steady-polls must be between"),
    (["--kubeconfig", "kc"], "needs its audit log: pass --audit-log FILE"),
    (["--audit-log", "a.log"], "--audit-log goes with --kubeconfig"),
    (["--kubeconfig", "nowhere", "--audit-log", "a.log"], "--kubeconfig nowhere: no such file"),
    (["--server", "envtest", "--kubeconfig", "kc", "--audit-log", "a"], "not both"),
    (["--peers", "kopf", "--operators", "lifecycle"], "--operators or --peers, not both"),
])
def test_cli_rejects_bad_options_in_one_line(args, message, capsys):
    assert cli.main(["bench", "--e2e", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_cli_peers_without_the_go_peer_say_so_in_one_line(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "benchmarks.sqlpeer", None)
    assert cli.main(["bench", "--e2e", "--peers", "provider-sql", "-n", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert "provider-sql peer" in err and len(err.splitlines()) == 1


def test_cli_prints_one_json_object_and_writes_it(capsys, tmp_path):
    assert cli.main(["bench", "--e2e", "--json", "-n", "2", "--rounds", "1",
                     "--steady-polls", "0", "--memory-n", "0", "--operators", "lifecycle",
                     "--out", str(tmp_path)]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["lifecycle"]["all_ready"] and printed["config"]["n"] == 2
    assert printed["e2e_api_calls_per_object"] > 0 and printed["e2e_cpu_ratio_vs_kopf"] is None
    assert all(key in printed for key in DONE_WHEN)
    assert json.loads((tmp_path / "e2e.json").read_text())["config"]["operators"] == ["lifecycle"]
    assert (tmp_path / "e2e.png").stat().st_size > 5_000


def test_postgres_workload_manifests_are_valid_objects_of_the_shipped_kinds():
    from benchmarks import e2e_pg
    from lifecycle.sim.apiserver import EmbeddedAPI
    from lifecycle.sim.embedded import register_kinds

    api = EmbeddedAPI()
    register_kinds(api, e2e_servers.kinds_of("postgres"), seed_config=False)
    flavor = e2e_pg.Flavor("lifecycle", e2e_pg.OURS_GROUP, "lc", True)
    docs = [doc for i in range(3) for doc in flavor.manifests(i, 3, "default")]
    assert [doc["kind"] for doc in docs[:3]] == ["Role", "Database", "Grant"]
    for doc in docs:
        stored = api.create(doc)
        assert stored["spec"]["forProvider"] == {**stored["spec"]["forProvider"],
                                                 **doc["spec"]["forProvider"]}
    grant = docs[2]["spec"]["forProvider"]
    assert grant["database"] == flavor.pg_name("d", 0) and grant["role"] == flavor.pg_name("r", 1)
    for kind, change in e2e_pg.CHANGES.items():
        assert set(change["spec"]["forProvider"]) <= set(
            next(d for d in docs if d["kind"] == kind)["spec"]["forProvider"])
