"""The generated files of a project: diagrams and reference pages, and their freshness.

``lifecycle diagrams`` writes, under a project root, ``diagrams/NAME.dot``,
``.mmd`` and ``.svg`` for every machine, and ``docs/reference/NAME.md`` plus
an index. DOT, Mermaid and Markdown are compared byte for byte; an SVG is
fresh when the DOT digest it carries matches the DOT generated now, since
Graphviz versions draw the same DOT differently.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from lifecycle.core.machine import LifecycleMachine
from lifecycle.diagrams.discover import bundled_kinds, bundled_machines
from lifecycle.diagrams.dot import to_dot
from lifecycle.diagrams.mermaid import to_mermaid
from lifecycle.diagrams.model import DiagramError
from lifecycle.diagrams.reference import reference_pages
from lifecycle.diagrams.render import mark_svg, render_dot, source_digest, svg_digest

__all__ = ["generated_files", "project_root", "stale_files", "write_generated"]


def project_root() -> Path:
    """The default project root: the current directory.

    The generated files belong to a source checkout, not to an installed
    package, so the command is run from the checkout (or given ``--root``).
    """
    return Path.cwd()


def generated_files(
    root: Path | None = None,
    machines: Sequence[type[LifecycleMachine]] | None = None,
    kinds: Sequence[Any] | None = None,
) -> dict[Path, bytes]:
    """Every generated file under ``root``: diagrams/ (DOT, Mermaid, SVG) and docs/reference/.

    ``machines`` defaults to :func:`~lifecycle.diagrams.discover.bundled_machines`
    and then ``kinds`` (named as users of a machine on its page) to the
    registered kinds; with explicit ``machines``, ``kinds`` defaults to none.
    Needs Graphviz ``dot`` for the SVGs.
    """
    root = root or project_root()
    if machines is None:
        machines_ = bundled_machines()
        kinds_ = list(bundled_kinds() if kinds is None else kinds)
    else:
        machines_ = list(machines)
        kinds_ = list(kinds or ())
    names = [m.__name__ for m in machines_]
    clash = sorted({n for n in names if names.count(n) > 1})
    if clash:
        raise DiagramError(f"machine class names must be unique (one file each): {clash}")
    files: dict[Path, bytes] = {}
    for machine in machines_:
        base = root / "diagrams" / machine.__name__
        source = to_dot(machine)
        files[base.with_suffix(".dot")] = source.encode()
        files[base.with_suffix(".mmd")] = to_mermaid(machine).encode()
        files[base.with_suffix(".svg")] = mark_svg(render_dot(source, "svg"), source)
    for path, text in reference_pages(machines_, kinds_, root).items():
        files[path] = text.encode()
    return files


def stale_files(
    root: Path | None = None,
    machines: Sequence[type[LifecycleMachine]] | None = None,
    kinds: Sequence[Any] | None = None,
) -> list[str]:
    """Generated files that are missing or out of date under ``root``, relative paths.

    DOT, Mermaid and Markdown compare byte for byte; an SVG is fresh when the
    DOT digest it carries matches the DOT generated now. Files under the
    generated folders that nothing generates any more are stale too.
    """
    root = root or project_root()
    files = generated_files(root, machines, kinds)
    stale = []
    for path, wanted in sorted(files.items()):
        try:
            have = path.read_bytes()
        except FileNotFoundError:
            stale.append(str(path.relative_to(root)))
            continue
        if path.suffix == ".svg":
            dot = files[path.with_suffix(".dot")].decode()
            if svg_digest(have) != source_digest(dot):
                stale.append(str(path.relative_to(root)))
        elif have != wanted:
            stale.append(str(path.relative_to(root)))
    stale.extend(str(p.relative_to(root)) for p in _leftovers(root, files))
    return sorted(stale)


def _leftovers(root: Path, files: Mapping[Path, bytes]) -> list[Path]:
    """Generated-looking files under diagrams/ and docs/reference/ that nothing generates."""
    found: list[Path] = []
    for folder, suffixes in ((root / "diagrams", {".dot", ".mmd", ".svg"}),
                             (root / "docs" / "reference", {".md"})):
        if folder.is_dir():
            found.extend(p for p in sorted(folder.iterdir())
                         if p.is_file() and p.suffix in suffixes and p not in files)
    return found


def write_generated(
    root: Path | None = None,
    machines: Sequence[type[LifecycleMachine]] | None = None,
    kinds: Sequence[Any] | None = None,
) -> list[Path]:
    """Write every generated file, remove stale generated ones; return the files written."""
    root = root or project_root()
    files = generated_files(root, machines, kinds)
    for old in _leftovers(root, files):
        old.unlink()
    for path, data in sorted(files.items()):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return sorted(files)
