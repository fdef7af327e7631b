"""The package's architecture: the layering contract, module size, the public API.

The layering contract lives in ``pyproject.toml`` (``[tool.importlinter]``) and
is checked with import-linter. Its module names describe the package as
installed, with the bundled kinds and providers inside it as
``lifecycle.machines`` and ``lifecycle.providers``; in the repository they are
the folders ``machines/`` and ``providers/``. So the checks run on a copy of the
package laid out as installed, which also lets a test break the copy on
purpose and see the contract fail.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import textwrap
import tomllib
from importlib.metadata import version
from pathlib import Path

import architecture_graph as graph
import pytest
from architecture_graph import installed_layout

import lifecycle
from lifecycle import registry

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "lifecycle"
MAX_LINES = 600

LINT = "from importlinter.cli import lint_imports_command; lint_imports_command()"


def contracts() -> list[dict]:
    """The import-linter contracts declared in pyproject.toml."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return config["tool"]["importlinter"]["contracts"]


def run_python(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run Python in ``root`` with the copy of the package ahead of the installed one."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run([sys.executable, *args], cwd=root, env=env, capture_output=True,
                          text=True, timeout=120, check=False)


def lint(root: Path) -> tuple[int, str]:
    """Check the contracts on the copy in ``root``: the exit code and the report."""
    done = run_python(root, "-c", LINT, "--config", str(root / "pyproject.toml"), "--no-cache")
    return done.returncode, done.stdout + done.stderr


def verdicts(report: str) -> dict[str, str]:
    """Each contract's name mapped to KEPT or BROKEN, read from a lint report."""
    flat = " ".join(report.split())
    found = {}
    for contract in contracts():
        match = re.search(re.escape(contract["name"]) + r" ?(KEPT|BROKEN)", flat)
        found[contract["name"]] = match.group(1) if match else "missing"
    return found


@pytest.fixture(scope="module")
def layout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An untouched copy of the package, laid out as installed."""
    return installed_layout(tmp_path_factory.mktemp("installed"))


def test_layering_contracts_hold(layout):
    code, report = lint(layout)
    assert code == 0, report
    assert set(verdicts(report).values()) == {"KEPT"}, report


def test_layering_contracts_fail_on_bad_imports(tmp_path):
    root = installed_layout(tmp_path)
    with (root / "lifecycle/core/contract.py").open("a") as module:
        module.write("\nfrom lifecycle.sim import apiserver  # a runtime module using the fake\n")
    with (root / "lifecycle/core/values.py").open("a") as module:
        module.write("\nimport lifecycle.runtime  # the core reaching up\n")
    with (root / "lifecycle/kube/conflict.py").open("a") as module:
        module.write(textwrap.dedent("""
            def _lazy():  # a cycle hidden inside a function still counts
                from lifecycle.kube import objects
                return objects
            """))
    with (root / "lifecycle/kube/objects.py").open("a") as module:
        module.write("\nfrom lifecycle.kube import conflict\n")
    with (root / "lifecycle/cli/plan.py").open("a") as module:
        module.write("\nfrom lifecycle.machines import managed\n")
    with (root / "lifecycle/sim/events.py").open("a") as module:
        module.write("\nfrom lifecycle.driver import metrics  # the API above the driver\n")
    with (root / "lifecycle/providers/simcloud/client.py").open("a") as module:
        module.write("\nfrom lifecycle.testing import history  # a client using the harness\n")

    code, report = lint(root)

    assert code != 0, report
    by_name = {c["name"]: c for c in contracts()}
    broken = {name for name, verdict in verdicts(report).items() if verdict == "BROKEN"}
    assert {name for name, c in by_name.items()
            if c["type"] == "forbidden" and "lifecycle.core" in c["source_modules"]} <= broken
    assert {name for name, c in by_name.items()
            if c["type"] == "forbidden" and "lifecycle.runtime" in c["source_modules"]} <= broken
    assert {name for name, c in by_name.items() if c["type"] in ("protected",
                                                                 "acyclic_siblings")} <= broken
    assert "lifecycle.core.values -> lifecycle.runtime" in report
    assert "lifecycle.core.contract -> lifecycle.sim.apiserver" in report
    assert "lifecycle.cli.plan -> lifecycle.machines" in report
    assert re.search(r"\.conflict -> \.objects|\.objects -> \.conflict", report), report
    assert {name for name, c in by_name.items() if c["type"] == "forbidden" and (
        "lifecycle.sim" in c["source_modules"]
        or "lifecycle.providers" in c["source_modules"])} <= broken
    assert "lifecycle.sim.events -> lifecycle.driver" in report
    assert "lifecycle.providers.simcloud.client -> lifecycle.testing" in report


def test_core_and_kube_contracts_name_every_other_part_of_the_package():
    parts = {f"lifecycle.{p.stem}" for p in PACKAGE.iterdir()
             if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").is_file()}
    parts |= {"lifecycle.machines", "lifecycle.providers"}
    for layer in ("lifecycle.core", "lifecycle.kube"):
        (contract,) = [c for c in contracts()
                       if c["type"] == "forbidden" and c["source_modules"] == [layer]]
        assert set(contract["forbidden_modules"]) == parts - {layer}, layer


CYCLES = textwrap.dedent("""
    import json, grimp
    graph = grimp.build_graph("lifecycle")
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []

    def visit(module):  # Tarjan's strongly connected components, iteratively
        work = [(module, iter(sorted(graph.find_modules_directly_imported_by(module))))]
        index[module] = low[module] = len(index)
        stack.append(module); on_stack.add(module)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt); on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.find_modules_directly_imported_by(nxt)))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        top = stack.pop(); on_stack.discard(top); component.append(top)
                        if top == node:
                            break
                    if len(component) > 1:
                        cycles.append(sorted(component))

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    print(json.dumps(cycles))
""")


def test_no_import_cycles_between_modules(layout):
    # Finer than the contract's package-level check: module by module, lazy
    # imports included, and across the bundled kinds and providers too.
    done = run_python(layout, "-c", CYCLES)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []


@pytest.fixture(scope="module")
def layers(layout: Path) -> dict[str, set[str]]:
    """Each layer of the copy with the layers it imports (tests/architecture_graph.py)."""
    return graph.layer_imports(graph.module_imports(layout))


def test_every_module_belongs_to_a_layer(layout: Path):
    modules = graph.module_imports(layout)
    assert len(modules) > 150
    assert [m for m in modules if graph.layer_of(m) is None] == ["lifecycle"]  # the facade
    assert graph.layer_of("lifecycle.providers.simcloud.scenarios.demo") == "scenarios"
    assert graph.layer_of("lifecycle.providers.simcloud.client") == "providers"
    assert graph.layer_of("lifecycle.machines.registrations") == "registrations"


def test_the_layers_keep_their_floors(layers: dict[str, set[str]]):
    assert graph.layering_problems(layers) == []
    level = graph.floors(layers)
    assert level["core"] == level["kube"] == 1
    assert level["providers"] < level["driver"]
    assert level["sim"] <= level["driver"] and "driver" not in graph.reach(layers, "testing")


def test_the_layering_rules_catch_a_layer_out_of_place(layers: dict[str, set[str]]):
    def broken(**extra: str) -> list[str]:
        edges = {name: set(targets) for name, targets in layers.items()}
        for source, target in extra.items():
            edges[source].add(target)
        return graph.layering_problems(edges)

    assert broken(core="runtime") == ["layers import one another in a circle: core, runtime"]
    assert any(p.startswith("providers are on floor") for p in broken(providers="testing"))
    assert broken(providers="scenarios") == [
        "layers import one another in a circle: machines, providers, scenarios"]
    assert broken(sim="driver") == ["sim reaches the driver", "testing reaches the driver"]
    assert broken(schema="kube") == ["schema reaches kube"]


def test_the_architecture_picture_is_drawn_from_the_import_graph(layers: dict[str, set[str]]):
    source = graph.dot(layers, graph.entry_points())
    assert graph.DOT.read_text() == source, (
        "docs/img/architecture.dot is not the import graph's: run "
        "python tests/architecture_graph.py")
    assert f"drawn from architecture.dot {graph.digest(source)}" in graph.SVG.read_text(), (
        "docs/img/architecture.svg was not rendered from docs/img/architecture.dot: run "
        "python tests/architecture_graph.py")
    for name, _, _ in graph.LAYERS:
        assert f">{name}</text>" in graph.SVG.read_text(), name


def test_the_picture_draws_each_arrow_once_and_the_entry_points_dashed():
    edges = {"a": {"b", "c"}, "b": {"c"}, "c": set()}
    assert graph.reduced(edges) == {"a": {"b"}, "b": {"c"}, "c": set()}
    assert graph.floors(edges) == {"a": 3, "b": 2, "c": 1}
    found = graph.entry_points()
    assert found["registrations"] == {"lifecycle.kinds"}
    assert found["scenarios"] == {"lifecycle.demos", "lifecycle.environments"}


def oversized(folders: list[Path], base: Path = ROOT) -> dict[str, int]:
    """The modules under ``folders`` longer than :data:`MAX_LINES` (path from ``base``)."""
    sizes = {str(path.relative_to(base)): len(path.read_text().splitlines())
             for folder in folders for path in sorted(folder.rglob("*.py"))}
    return {path: n for path, n in sizes.items() if n > MAX_LINES}


def test_no_module_of_the_package_kinds_or_providers_is_oversized():
    assert oversized([PACKAGE, ROOT / "machines", ROOT / "providers"]) == {}


def test_the_size_rule_catches_a_long_module(tmp_path):
    folder = tmp_path / "providers" / "cloud"
    folder.mkdir(parents=True)
    (folder / "long.py").write_text("x = 1\n" * (MAX_LINES + 1))
    (folder / "short.py").write_text("x = 1\n" * MAX_LINES)
    assert oversized([tmp_path / "providers"], tmp_path) == {
        "providers/cloud/long.py": MAX_LINES + 1}


# Built from pieces so that this file does not match itself.
UNPUBLISHED = re.compile("|".join([
    r"(?i:seed)" + r" 00\d", "SPEC" + r" (?:section|\u00a7|\d)", "shared/" + "SPEC", "\u00a7",
]))


def test_nothing_cites_documents_users_do_not_have():
    tracked = subprocess.run(["git", "ls-files", "-z", "*.py", "*.md", "*.yaml", "*.yml"],
                             cwd=ROOT, capture_output=True, text=True, check=True)
    hits = []
    for name in filter(None, tracked.stdout.split("\0")):
        path = ROOT / name
        if not path.is_file():  # deleted in the working tree, not yet committed
            continue
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if UNPUBLISHED.search(line):
                hits.append(f"{name}:{number}: {line.strip()}")
    kinds = [r.name for r in registry.registrations()]
    crds = subprocess.run([sys.executable, "-m", "lifecycle", "crds", "--kinds", *kinds],
                          cwd=ROOT, capture_output=True, text=True, timeout=120, check=True)
    assert crds.stdout.count("kind: CustomResourceDefinition") >= len(kinds)
    hits += [f"lifecycle crds: {line.strip()}" for line in crds.stdout.splitlines()
             if UNPUBLISHED.search(line)]
    assert hits == []


def test_every_public_name_resolves():
    assert len(set(lifecycle.__all__)) == len(lifecycle.__all__)
    for name in lifecycle.__all__:
        value = getattr(lifecycle, name)
        assert value is not None, name
        if name != "__version__":
            assert getattr(value, "__doc__", None), f"{name} has no docstring"
    assert set(lifecycle.__all__) <= set(dir(lifecycle))
    assert lifecycle.__version__ == version("kube-lifecycle")
    with pytest.raises(AttributeError):
        _ = lifecycle.NoSuchName


def test_importing_the_package_loads_nothing_else():
    probe = ("import sys; import lifecycle; "
             "print(sorted(m for m in sys.modules if m.split('.')[0] in "
             "('lifecycle', 'kubernetes', 'statemachine', 'attrs', 'yaml')))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=True, timeout=60)
    assert ast.literal_eval(done.stdout.strip()) == ["lifecycle"]


def test_the_core_loads_none_of_the_outer_layers():
    probe = ("import sys; import lifecycle.core.machine, lifecycle.core.decide, "
             "lifecycle.core.plan; print(sorted({m.split('.')[0] + '.' + m.split('.')[1] "
             "if m.startswith('lifecycle.') else m.split('.')[0] for m in sys.modules}))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=True, timeout=60)
    loaded = set(ast.literal_eval(done.stdout.strip()))
    assert {m for m in loaded if m.startswith("lifecycle.")} == {"lifecycle.core"}
    assert "kubernetes" not in loaded
