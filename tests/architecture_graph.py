"""The package's layers as its import graph draws them, and the picture made from them.

Every module of the package, laid out as installed (``machines/`` and
``providers/`` inside it as ``lifecycle.machines`` and ``lifecycle.providers``),
belongs to one layer of :data:`LAYERS`; a layer imports another when any of its
modules imports one of the other's, lazy imports included (grimp reads every
import statement). A layer's floor is one above the highest floor it imports,
so the floors are the graph's own ordering, not a drawing's.

``docs/img/architecture.dot`` is :func:`dot` of that graph, with an arrow only
where no longer path joins the same two layers, and a dashed arrow from
``registry`` to each layer an entry point of ``pyproject.toml`` names;
``docs/img/architecture.svg`` is Graphviz's rendering of it, carrying the
DOT's digest. ``tests/test_architecture.py`` checks both are current. To
write them anew::

    python tests/architecture_graph.py
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "lifecycle"
DOT = ROOT / "docs" / "img" / "architecture.dot"
SVG = ROOT / "docs" / "img" / "architecture.svg"

#: Each layer: its name, the modules it holds (a module and everything under it;
#: ``*`` stands for one name) and what it holds, in words.
LAYERS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("core", ("lifecycle.core",),
     "machines, values, errors, conditions,\nvocabulary, kinds, provider contract,\n"
     "event choice, status, plan"),
    ("kube", ("lifecycle.kube",),
     "API errors, object helpers,\nconflict retries, rate limiters,\nCluster protocol"),
    ("schema", ("lifecycle.schema",), "CRDs from kinds,\nstructural-schema checks"),
    ("registry", ("lifecycle.registry",), "kinds, demos and environments\nby entry point"),
    ("runtime", ("lifecycle.runtime",), "reconciler, claims,\nowned children, Secrets"),
    ("driver", ("lifecycle.driver",),
     "queue, informers, leader election,\nmetrics, manifests, real cluster"),
    ("sim", ("lifecycle.sim",), "embedded Kubernetes API\nand its HTTP face"),
    ("testing", ("lifecycle.testing",), "harness, pytest plugin,\nreal API server"),
    ("verify", ("lifecycle.verify",), "crash-point explorer"),
    ("diagrams", ("lifecycle.diagrams",), "DOT, Mermaid, reference pages"),
    ("cli", ("lifecycle.cli", "lifecycle.__main__"), "one module per command"),
    ("registrations", ("lifecycle.machines.registrations",),
     "the bundled kinds with their\nconnectors and crash-explorer targets"),
    ("machines", ("lifecycle.machines",), "the bundled kinds and\ntheir machines"),
    ("scenarios", ("lifecycle.providers.*.scenarios",),
     "demos, harness builders and\ncrash-explorer targets per provider"),
    ("providers", ("lifecycle.providers",),
     "clients, connectors, configs;\nthe simulated cloud"),
)

#: The entry-point groups ``lifecycle.registry`` reads.
ENTRY_POINT_GROUPS = ("lifecycle.kinds", "lifecycle.demos", "lifecycle.environments")

#: Fill colours by layer (the pure floor, the engine, the doubles and tools, the bundled).
_COLOURS = {
    "core": "#dbe9f6", "kube": "#dbe9f6", "schema": "#dbe9f6",
    "runtime": "#e3f1df", "driver": "#e3f1df",
    "sim": "#fbecd9", "testing": "#fbecd9", "verify": "#fbecd9", "diagrams": "#fbecd9",
    "machines": "#efe6f5", "providers": "#efe6f5", "scenarios": "#efe6f5",
    "registrations": "#efe6f5",
}


def installed_layout(into: Path) -> Path:
    """Copy the package into ``into`` as a wheel installs it; return the copy's root."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(PACKAGE, into / "lifecycle", ignore=ignore)
    shutil.copytree(ROOT / "machines", into / "lifecycle" / "machines", ignore=ignore)
    shutil.copytree(ROOT / "providers", into / "lifecycle" / "providers", ignore=ignore)
    shutil.copy(ROOT / "pyproject.toml", into / "pyproject.toml")
    return into


_IMPORTS = """
import json, grimp
graph = grimp.build_graph("lifecycle")
print(json.dumps(sorted([m, sorted(graph.find_modules_directly_imported_by(m))]
                        for m in graph.modules)))
"""


def module_imports(root: Path) -> dict[str, list[str]]:
    """Every module of the copy in ``root`` with the modules of the package it imports."""
    done = subprocess.run([sys.executable, "-c", _IMPORTS], cwd=root, capture_output=True,
                          text=True, timeout=300, check=False,
                          env={**os.environ, "PYTHONPATH": str(root)})
    if done.returncode != 0:
        raise RuntimeError(f"reading the import graph failed:\n{done.stderr}")
    return dict(json.loads(done.stdout))


def _matches(module: str, pattern: str) -> bool:
    parts, wanted = module.split("."), pattern.split(".")
    return len(parts) >= len(wanted) and all(
        w == "*" or w == p for w, p in zip(wanted, parts, strict=False))


def layer_of(module: str) -> str | None:
    """The layer holding ``module`` (the first of :data:`LAYERS` that matches); None for
    the package's facade (``lifecycle``) and anything outside every layer."""
    for name, patterns, _ in LAYERS:
        if any(_matches(module, pattern) for pattern in patterns):
            return name
    return None


def layer_imports(modules: Mapping[str, Sequence[str]]) -> dict[str, set[str]]:
    """Each layer with the other layers its modules import."""
    edges: dict[str, set[str]] = {name: set() for name, _, _ in LAYERS}
    for module, imported in modules.items():
        source = layer_of(module)
        if source is None:
            continue
        for other in imported:
            target = layer_of(other)
            if target is not None and target != source:
                edges[source].add(target)
    return edges


def cycles(edges: Mapping[str, set[str]]) -> list[list[str]]:
    """The cycles among layers: each group of layers that reach one another, sorted."""
    reached = {name: reach(edges, name) for name in edges}
    groups = {frozenset({a} | {b for b in reached[a] if a in reached[b]})
              for a in edges if a in reached[a]}
    return sorted(sorted(group) for group in groups)


def floors(edges: Mapping[str, set[str]]) -> dict[str, int]:
    """Each layer's floor: 1 for a layer importing no other, else one above the highest
    floor it imports. Raises ValueError on a cycle (there is no floor then)."""
    found = cycles(edges)
    if found:
        raise ValueError(f"layers import one another in a circle: {found}")
    memo: dict[str, int] = {}

    def floor(name: str) -> int:
        if name not in memo:
            memo[name] = 1 + max((floor(other) for other in edges[name]), default=0)
        return memo[name]

    return {name: floor(name) for name in edges}


def reach(edges: Mapping[str, set[str]], start: str) -> set[str]:
    """Every layer ``start`` imports, directly or through others."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        for nxt in edges[todo.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def layering_problems(edges: Mapping[str, set[str]]) -> list[str]:
    """What breaks the layering rules, one line each (none when the layers keep them):

    - no layers import one another in a circle;
    - the providers (clients, connectors, the simulated cloud) sit below the driver's floor
      (their scenarios and the kinds' registrations import them, so a provider reaching
      either is a circle);
    - the embedded API and the harness never reach the driver;
    - the CRD schemas reach nothing but the core.
    """
    found = cycles(edges)
    if found:
        return [f"layers import one another in a circle: {', '.join(group)}"
                for group in found]
    problems = []
    level = floors(edges)
    if level["providers"] >= level["driver"]:
        problems.append(f"providers are on floor {level['providers']}, not below the "
                        f"driver's floor {level['driver']} (they import "
                        f"{', '.join(sorted(edges['providers']))})")
    for layer in ("sim", "testing"):
        if "driver" in reach(edges, layer):
            problems.append(f"{layer} reaches the driver")
    if reach(edges, "schema") - {"core"}:
        problems.append(f"schema reaches {', '.join(sorted(reach(edges, 'schema') - {'core'}))}")
    return problems


def reduced(edges: Mapping[str, set[str]]) -> dict[str, set[str]]:
    """``edges`` without an arrow a longer path already draws (transitive reduction)."""
    def reaches(start: str, goal: str, skip: tuple[str, str]) -> bool:
        todo, seen = [start], {start}
        while todo:
            node = todo.pop()
            for nxt in edges[node]:
                if (node, nxt) == skip or nxt in seen:
                    continue
                if nxt == goal:
                    return True
                seen.add(nxt)
                todo.append(nxt)
        return False

    return {a: {b for b in targets if not reaches(a, b, (a, b))} for a, targets in edges.items()}


def entry_points(pyproject: Path = ROOT / "pyproject.toml") -> dict[str, set[str]]:
    """Each layer an entry point of ``pyproject.toml`` names, with the groups naming it."""
    project = tomllib.loads(pyproject.read_text())["project"]["entry-points"]
    found: dict[str, set[str]] = {}
    for group in ENTRY_POINT_GROUPS:
        for value in project.get(group, {}).values():
            layer = layer_of(value.partition(":")[0])
            if layer is not None:
                found.setdefault(layer, set()).add(group)
    return found


def dot(edges: Mapping[str, set[str]], found: Mapping[str, set[str]]) -> str:
    """The DOT source of the layers' picture: floors from the top down, reduced arrows."""
    level = floors(edges)
    arrows = reduced(edges)
    labels = {name: words for name, _, words in LAYERS}
    lines = [
        "// The layers of the lifecycle package, drawn from its import graph by",
        "// tests/architecture_graph.py (do not edit: run it to write this file anew).",
        "// A solid arrow: some module of one layer imports some module of the other",
        "// (only where no longer path joins them). A dashed arrow: found at run time",
        "// through entry points, never imported. Floors count from the bottom.",
        "digraph architecture {",
        '    graph [rankdir=TB, fontname="Helvetica", fontsize=11, nodesep=0.3, ranksep=0.4,',
        '           bgcolor="white", label="lifecycle: its layers as its imports draw them",',
        "           labelloc=t];",
        '    node [shape=box, style="rounded,filled", fillcolor="#f4f4f4", color="#555555",',
        '          fontname="Helvetica", fontsize=10];',
        '    edge [color="#555555", arrowsize=0.7];',
        "",
    ]
    for number in sorted(set(level.values()), reverse=True):
        names = sorted(name for name in level if level[name] == number)
        lines.append(f"    subgraph floor_{number} {{")
        lines.append("        rank=same;")
        lines.append(f'        "floor {number}" [shape=plaintext, style="", fontsize=9];')
        for name in names:
            text = f"{name}\\n" + labels[name].replace("\n", "\\n")
            colour = _COLOURS.get(name, "#f4f4f4")
            lines.append(f'        {name} [label="{text}", fillcolor="{colour}"];')
        lines.append("    }")
    numbers = sorted(set(level.values()), reverse=True)
    if len(numbers) > 1:
        chain = " -> ".join(f'"floor {n}"' for n in numbers)
        lines.append(f"    {chain} [style=invis];")
    lines.append("")
    for source in sorted(arrows):
        for target in sorted(arrows[source]):
            lines.append(f"    {source} -> {target};")
    for target in sorted(found):
        groups = "\\n".join(f" {g}" for g in sorted(found[target]))
        lines.append(f'    registry -> {target} [style=dashed, constraint=false, '
                     f'label="{groups}", fontsize=9, fontname="Helvetica"];')
    lines.append("}")
    return "\n".join(lines) + "\n"


def digest(source: str) -> str:
    """The digest the SVG carries of the DOT it was rendered from."""
    return hashlib.sha256(source.encode()).hexdigest()[:16]


def svg(source: str) -> str:
    """Graphviz's SVG of ``source``, carrying :func:`digest` of it in a comment."""
    done = subprocess.run(["dot", "-Tsvg"], input=source, capture_output=True, text=True,
                          timeout=120, check=True)
    head, _, rest = done.stdout.partition("<svg")
    return f"{head}<!-- drawn from architecture.dot {digest(source)} -->\n<svg{rest}"


def current() -> tuple[dict[str, set[str]], str]:
    """The layer graph of the checkout as installed, and its picture's DOT source."""
    with tempfile.TemporaryDirectory() as scratch:
        modules = module_imports(installed_layout(Path(scratch)))
    edges = layer_imports(modules)
    return edges, dot(edges, entry_points())


def main() -> None:
    """Write ``docs/img/architecture.dot`` and ``.svg`` from the checkout's imports."""
    _, source = current()
    DOT.write_text(source)
    SVG.write_text(svg(source))
    print(f"wrote {DOT.relative_to(ROOT)} and {SVG.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
