"""Diagrams drawn from machine classes: content, determinism, live objects, freshness, CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from statemachine import State

from lifecycle import diagrams as diagram
from lifecycle.cli import main
from lifecycle.diagrams import (
    DiagramError,
    LiveObject,
    cluster_diagram,
    layout,
    render,
    stale_files,
    to_dot,
    to_mermaid,
    write_generated,
)
from lifecycle.machines.database import DatabaseInstance, DatabaseInstanceMachine
from lifecycle.machines.managed import ManagedResourceMachine
from lifecycle.providers.simcloud.scenarios.harness import database_manifest, simulated_environment

ROOT = Path(__file__).resolve().parents[1]
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


class SuspendableMachine(ManagedResourceMachine):
    """The standard machine plus a Suspended state, entered from Ready."""

    suspended = State("Suspended")

    suspend = ManagedResourceMachine.ready.to(suspended)
    resume = suspended.to(ManagedResourceMachine.ready)
    # Naming an inherited event adds these transitions to it.
    delete = suspended.to(ManagedResourceMachine.deleting, on="delete_external")
    gone = suspended.to(ManagedResourceMachine.deleted)
    orphan = suspended.to(ManagedResourceMachine.deleted)

    state_docs = {**ManagedResourceMachine.state_docs, "suspended": "paused by the user"}
    ready_condition = {**ManagedResourceMachine.ready_condition,
                       "suspended": ("False", "Suspended")}


def expanded(plan: diagram.Layout) -> set[tuple[str, str, str]]:
    """Every (source, label text, target) a layout draws, with bundles expanded."""
    bundles = {b.id: b for b in plan.bundles}
    drawn = set()
    for edge in plan.edges:
        sources = bundles[edge.source].sources if edge.source in bundles else (edge.source,)
        for line in edge.lines:
            for source in sources:
                drawn.add((source, line.text, edge.target))
    return drawn


@pytest.mark.parametrize("machine", [ManagedResourceMachine, DatabaseInstanceMachine,
                                     SuspendableMachine])
def test_every_transition_is_drawn_exactly_as_the_table_has_it(machine):
    table = machine.table()
    wanted = {(t.source, diagram.transition_text(t), t.target) for t in table.transitions}
    drawn = expanded(layout(machine))
    # A bundle stands for its sources; it may also cover its own target's self-transition
    # only when the table has it.
    assert drawn == wanted


def test_standard_machine_dot_shows_states_events_guards_actions_conditions_and_requeue():
    dot = to_dot(ManagedResourceMachine)
    for state in ManagedResourceMachine.table().states.values():
        assert f"<B>{state.name}</B>" in dot
    for text in ("create / create_external", "update / update_external", "wait",
                 "wait [failed_during_update]", "delete / delete_external", "gone", "orphan",
                 "fail", "available"):
        assert text in dot
    assert "Ready=False (Creating), Creating=True" in dot
    assert "Ready=True (Available)" in dot
    assert "requeue after 5 s; Stuck after 30 min" in dot
    assert "requeue after 2 s" in dot  # deleting
    assert "poll every 1 min ±10 %" in dot
    assert "backoff (exponential, at least retry-after)" in dot
    assert "(initial)" in dot and "(final)" in dot
    assert "start -> unclaimed" in dot and "deleted -> end" in dot


def test_kind_timing_shows_in_its_diagram():
    dot = to_dot(DatabaseInstanceMachine)
    assert "poll every 30 s ±10 %" in dot
    assert "requeue after 2 s; Stuck after 30 min" in dot
    assert "requeue after 1 s" in dot


def test_deletion_is_grouped_not_a_hairball():
    plan = layout(ManagedResourceMachine)
    assert plan.deletion == ("deleting", "deleted")
    into_deletion = [e for e in plan.edges
                     if e.target in plan.deletion and e.source not in plan.deletion]
    # delete, gone and orphan from six states: two edges from one 'any state' node.
    assert {e.source for e in into_deletion} == {"any_deletion"}
    assert len(into_deletion) == 2
    into_failed = [e for e in plan.edges if e.target == "failed"]
    assert [e.source for e in into_failed] == ["any_failed"]
    dot = to_dot(ManagedResourceMachine)
    assert "subgraph cluster_deletion" in dot
    assert "once deletion is requested" in dot


def test_dot_and_mermaid_are_byte_identical_across_processes():
    code = ("import sys; from lifecycle.diagrams import to_dot, to_mermaid; "
            "from lifecycle.machines.managed import ManagedResourceMachine as M; "
            "sys.stdout.write(to_dot(M) + to_mermaid(M))")
    outputs = {
        subprocess.run([sys.executable, "-c", code], capture_output=True, check=True,
                       env={**os.environ, "PYTHONHASHSEED": seed}).stdout
        for seed in ("1", "2", "3")
    }
    assert len(outputs) == 1
    assert outputs.pop().decode() == to_dot(ManagedResourceMachine) + to_mermaid(
        ManagedResourceMachine)


def test_mermaid_marks_initial_final_and_every_state():
    text = to_mermaid(ManagedResourceMachine)
    assert text.startswith("---\ntitle: ManagedResourceMachine\n---\nstateDiagram-v2\n")
    assert "    [*] --> unclaimed\n" in text
    assert "    deleted --> [*]\n" in text
    assert "    failed --> updating : wait [failed_during_update]\n" in text
    assert '    state "any state, once deletion is requested" as any_deletion\n' in text
    for state in ManagedResourceMachine.table().states:
        assert f"    {state} : " in text
    for line in text.splitlines()[4:]:
        # one statement per line; a second ':' would end a Mermaid label early
        assert line.count(" : ") <= 1 and ";" not in line


def test_added_state_appears_in_every_format():
    dot = to_dot(SuspendableMachine)
    assert "<B>Suspended</B>" in dot
    assert "ready -> suspended" in dot and "suspend" in dot
    assert "suspended -> ready" in dot and "resume" in dot
    mermaid = to_mermaid(SuspendableMachine)
    assert "    ready --> suspended : suspend\n" in mermaid
    assert "    suspended --> ready : resume\n" in mermaid
    svg = render(SuspendableMachine, "svg")
    assert b"Suspended" in svg and b">suspend<" in svg and b">resume<" in svg
    png = render(SuspendableMachine, "png")
    assert png.startswith(PNG_SIGNATURE) and len(png) > 10_000
    # the suspended state takes part in deletion like every other state
    bundle = next(b for b in layout(SuspendableMachine).bundles if b.deletion)
    assert "suspended" in bundle.sources and bundle.excluded == ()


def test_a_state_left_out_of_a_bundle_is_named_on_it():
    class NoFailWhileSuspended(SuspendableMachine):
        """Suspended cannot fail (fail is not declared from it)."""

    plan = layout(NoFailWhileSuspended)
    fail = next(b for b in plan.bundles if not b.deletion)
    assert fail.excluded == ("suspended",)
    assert "any state except suspended" in to_dot(NoFailWhileSuspended)


def test_svg_carries_the_digest_of_its_dot():
    svg = render(ManagedResourceMachine, "svg")
    assert diagram.svg_digest(svg) == diagram.source_digest(to_dot(ManagedResourceMachine))
    assert svg.lstrip().startswith(b"<?xml") and svg.rstrip().endswith(b"</svg>")


# ------------------------------------------------------------ live objects


@pytest.fixture
def settled_env():
    """One DatabaseInstance created, updated, failed and recovered on the harness."""
    env, cloud = simulated_environment()
    env.apply(database_manifest("orders"))
    env.run_until_idle()
    env.apply(database_manifest("orders", storage_gb=40))
    env.run_until_idle()
    external = env.get("DatabaseInstance", "orders")["metadata"]["annotations"][
        "lifecycle.dev/external-name"]
    cloud.fail_instance(external, "disk failure")
    env.advance(100)
    cloud.recover_instance(external)
    env.advance(400)
    return env


def test_live_object_from_the_embedded_cluster(settled_env):
    env = settled_env
    history = env.history("DatabaseInstance", "orders")
    assert [h[2] for h in history] == ["create", "available", "update", "available", "fail",
                                       "available"]
    dot = cluster_diagram(env.api, DatabaseInstance, "default", "orders", fmt="dot").decode()
    assert "DatabaseInstance default/orders on DatabaseInstanceMachine" in dot
    current = next(line for line in dot.splitlines() if line.startswith("  ready ["))
    assert "penwidth=4" in current and "current state" in current
    others = [line for line in dot.splitlines()
              if line.startswith("  creating [") or line.startswith("  failed [")]
    assert others and all("penwidth=4" not in line for line in others)
    assert 'unclaimed -> creating [xlabel="1. create"' in dot
    assert 'ready -> updating [xlabel="3. update"' in dot
    assert 'ready -> failed [xlabel="5. fail"' in dot
    assert 'failed -> ready [xlabel="6. available"' in dot
    assert 'creating -> ready [xlabel="2. available"' in dot
    mermaid = cluster_diagram(env.api, DatabaseInstance, "default", "orders",
                              fmt="mermaid").decode()
    assert "    ready --> failed : (5) fail\n" in mermaid
    assert mermaid.rstrip().endswith("class ready current")
    svg = cluster_diagram(env.api, DatabaseInstance, "default", "orders", fmt="svg")
    assert b"5. fail" in svg and b"current state" in svg


def test_live_object_from_a_yaml_dump_on_the_command_line(settled_env, tmp_path, capsys):
    dump = tmp_path / "orders.yaml"
    dump.write_text(yaml.safe_dump(settled_env.get("DatabaseInstance", "orders")))
    out = tmp_path / "orders.dot"
    assert main(["diagram", "lifecycle.machines.database:DatabaseInstanceMachine",
                 "--object", str(dump), "-o", str(out)]) == 0
    assert '[xlabel="4. available"' in out.read_text()
    # JSON is read too, and an object not yet reconciled shows its initial state
    fresh = tmp_path / "fresh.json"
    fresh.write_text('{"apiVersion": "db.lifecycle.dev/v1alpha1", "kind": "DatabaseInstance",'
                     ' "metadata": {"name": "new", "namespace": "default"}}')
    assert main(["diagram", "lifecycle.machines.database:DatabaseInstanceMachine", "--object",
                 str(fresh), "-f", "dot"]) == 0
    assert "not reconciled yet" in capsys.readouterr().out


@pytest.mark.parametrize(("content", "message"), [
    ("status: [", "is not valid YAML or JSON at line"),
    ("kind: X\n", "has no metadata"),
    ("metadata: {name: a}\nstatus: {state: exploded}\n", "'exploded' is not a state of"),
    ("metadata: {name: a}\nstatus: {state: ready, history: [{from: ready, to: mars}]}\n",
     "status.history entry 1 names 'mars'"),
    ("items: [{metadata: {name: a}}, {metadata: {name: b}}]\n", "holds 2 objects"),
])
def test_bad_object_dumps_are_one_line_errors(tmp_path, capsys, content, message):
    dump = tmp_path / "bad.yaml"
    dump.write_text(content)
    code = main(["diagram", "lifecycle.machines.managed:ManagedResourceMachine",
                 "--object", str(dump)])
    err = capsys.readouterr().err
    assert code == 2
    assert message in err and len(err.strip().splitlines()) == 1


def test_object_dump_list_with_name_picks_one(tmp_path):
    dump = tmp_path / "list.yaml"
    dump.write_text("items: [{metadata: {name: a}, status: {state: ready}},"
                    " {metadata: {name: b}, status: {state: failed}}]\n")
    obj = diagram.load_object(dump, "b")
    live = LiveObject.from_dict(obj, ManagedResourceMachine)
    assert live.state == "failed"
    with pytest.raises(DiagramError, match="holds 0 objects named 'c'"):
        diagram.load_object(dump, "c")


# ----------------------------------------------------------------- CLI


def run_cli(args, path):
    """Run the CLI in a subprocess with PATH set to ``path``."""
    return subprocess.run([sys.executable, "-m", "lifecycle.cli", *args], capture_output=True,
                          env={**os.environ, "PATH": path}, cwd=ROOT)


def test_without_dot_svg_fails_plainly_and_text_formats_still_work(tmp_path, monkeypatch,
                                                                   capsys):
    target = "lifecycle.machines.managed:ManagedResourceMachine"
    empty = str(tmp_path)  # a PATH holding no dot
    svg = run_cli(["diagram", target, "-f", "svg"], empty)  # the real command, end to end
    assert svg.returncode == 2
    lines = svg.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and "Graphviz 'dot' is not on PATH" in lines[0]
    monkeypatch.setenv("PATH", empty)
    assert main(["diagram", target, "-o", str(tmp_path / "m.png")]) == 2
    err = capsys.readouterr().err
    assert "cannot render png" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "m.png").exists()
    assert main(["diagram", target, "-f", "dot"]) == 0
    assert capsys.readouterr().out == to_dot(ManagedResourceMachine)
    assert main(["diagram", target, "-f", "mermaid"]) == 0
    assert capsys.readouterr().out == to_mermaid(ManagedResourceMachine)


def test_format_follows_the_output_suffix(tmp_path):
    for suffix, check in ((".svg", lambda b: b"<svg" in b), (".png", lambda b: b.startswith(
            PNG_SIGNATURE)), (".mmd", lambda b: b.startswith(b"---\ntitle")),
            (".dot", lambda b: b.startswith(b"digraph"))):
        out = tmp_path / f"m{suffix}"
        assert main(["diagram", "lifecycle.machines.managed:ManagedResourceMachine",
                     "-o", str(out)]) == 0
        assert check(out.read_bytes()), suffix


@pytest.mark.parametrize(("args", "message"), [
    (["lifecycle.core.kind:Kind"], "is not a LifecycleMachine class"),
    (["lifecycle.machines.managed:Nope"], "has no 'Nope'"),
    (["nonsense"], "expected MODULE:NAME"),
    ([], "name a machine as MODULE:CLASS"),
])
def test_cli_mistakes_are_one_line(capsys, args, message):
    assert main(["diagram", *args]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


# ----------------------------------------------------------- freshness


def test_bundled_machines_are_the_registered_kinds_machines_and_their_ancestors():
    from lifecycle import registry

    found = diagram.bundled_machines()
    # Resource class kinds are registered too (for their CRDs) but have no machine.
    kinds = [r.kind for r in registry.registrations() if hasattr(r.kind, "machine")]
    assert "DatabaseInstanceClass" in {r.name for r in registry.registrations()}
    assert {k.machine for k in kinds} <= set(found)
    # the standard machine has no kind of its own but every bundled kind extends it
    assert ManagedResourceMachine in found and DatabaseInstanceMachine in found
    assert SuspendableMachine not in found  # defined here, registered by no kind
    assert found == sorted(found, key=lambda m: (m.__module__, m.__qualname__))
    assert len(set(found)) == len(found)
    assert diagram.bundled_kinds() == kinds
    modules = {m.__module__ for m in found}
    on_disk = {f"lifecycle.machines.{p.stem}" for p in (ROOT / "machines").glob("*.py")
               if not p.stem.startswith("_")}
    assert modules <= on_disk


def test_machines_of_named_modules_and_packages():
    modules = diagram.import_modules(["lifecycle.machines.managed"])
    assert diagram.machines_in(modules) == [ManagedResourceMachine]
    assert diagram.kinds_in(modules) == []
    package = diagram.import_modules(["lifecycle.machines"])
    assert diagram.machines_in(package) == diagram.bundled_machines()
    assert DatabaseInstance in diagram.kinds_in(package)
    with pytest.raises(DiagramError, match="cannot import no_such_module"):
        diagram.import_modules(["no_such_module"])


def test_machine_of_an_object_is_found_through_the_registry():
    obj = {"apiVersion": DatabaseInstance.api_version, "kind": "DatabaseInstance"}
    assert diagram.machine_for(obj) is DatabaseInstanceMachine
    with pytest.raises(DiagramError, match="no bundled kind is 'ConfigMap'"):
        diagram.machine_for({"apiVersion": "v1", "kind": "ConfigMap"})


def test_checked_in_diagrams_and_reference_pages_are_fresh():
    stale = stale_files(ROOT)
    assert stale == [], f"stale generated files (run `lifecycle diagrams`): {stale}"
    for machine in diagram.bundled_machines():
        for suffix in (".dot", ".mmd", ".svg"):
            assert (ROOT / "diagrams" / f"{machine.__name__}{suffix}").is_file()


def test_stale_check_catches_each_kind_of_drift(tmp_path):
    machines = [ManagedResourceMachine]
    written = write_generated(tmp_path, machines)
    assert stale_files(tmp_path, machines) == []
    names = {p.relative_to(tmp_path).as_posix() for p in written}
    assert names == {"diagrams/ManagedResourceMachine.dot",
                     "diagrams/ManagedResourceMachine.mmd",
                     "diagrams/ManagedResourceMachine.svg",
                     "docs/reference/ManagedResourceMachine.md", "docs/reference/index.md"}
    dot = tmp_path / "diagrams/ManagedResourceMachine.dot"
    dot.write_text(dot.read_text().replace("Creating", "Creatin"))
    svg = tmp_path / "diagrams/ManagedResourceMachine.svg"
    unmarked = svg.read_bytes().split(b"<!-- " + diagram.SOURCE_MARK.encode())[0] + b"<svg/>"
    svg.write_bytes(diagram.mark_svg(unmarked, "some other dot"))
    (tmp_path / "diagrams/ManagedResourceMachine.mmd").unlink()
    page = tmp_path / "docs/reference/ManagedResourceMachine.md"
    page.write_text(page.read_text() + "\nhand edit\n")
    assert stale_files(tmp_path, machines) == [
        "diagrams/ManagedResourceMachine.dot",
        "diagrams/ManagedResourceMachine.mmd",
        "diagrams/ManagedResourceMachine.svg",
        "docs/reference/ManagedResourceMachine.md",
    ]
    write_generated(tmp_path, machines)
    assert stale_files(tmp_path, machines) == []


def test_diagrams_command_writes_then_check_passes_and_catches_drift(tmp_path, capsys):
    assert main(["diagrams", "--root", str(tmp_path), "--check"]) == 1
    assert main(["diagrams", "--root", str(tmp_path)]) == 0
    listed = capsys.readouterr().out.split()
    assert "diagrams/ManagedResourceMachine.svg" in listed
    assert "docs/reference/DatabaseInstanceMachine.md" in listed
    assert main(["diagrams", "--root", str(tmp_path), "--check"]) == 0
    leftover = tmp_path / "diagrams" / "RemovedMachine.dot"
    leftover.write_text("digraph {}")
    (tmp_path / "diagrams" / "DatabaseInstanceMachine.dot").write_text("digraph {}")
    assert main(["diagrams", "--root", str(tmp_path), "--check"]) == 1
    assert "stale: diagrams/DatabaseInstanceMachine.dot" in capsys.readouterr().out
    assert main(["diagrams", "--root", str(tmp_path)]) == 0
    assert not leftover.exists()


def test_diagrams_command_defaults_to_the_current_directory(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert diagram.project_root() == tmp_path
    assert main(["diagrams", "lifecycle.machines.managed"]) == 0
    assert (tmp_path / "diagrams" / "ManagedResourceMachine.svg").is_file()
    assert not (tmp_path / "diagrams" / "DatabaseInstanceMachine.dot").exists()
    assert main(["diagrams", "lifecycle.machines.managed", "--check"]) == 0
    # the default set has more machines: the other ones are missing here
    assert main(["diagrams", "--check"]) == 1
    assert "stale: diagrams/DatabaseInstanceMachine.dot" in capsys.readouterr().out


@pytest.mark.parametrize(("args", "message"), [
    (["no_such_module"], "cannot import no_such_module"),
    (["lifecycle.core.values"], "no machine class with states in lifecycle.core.values"),
    (["lifecycle.machines.managed:ManagedResourceMachine"], "expected a module or package"),
])
def test_diagrams_command_mistakes_are_one_line(tmp_path, capsys, args, message):
    assert main(["diagrams", "--root", str(tmp_path), *args]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
