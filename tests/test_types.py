"""The type check: mypy over lifecycle/, machines/ and providers/ at the levels
pyproject.toml sets (``[tool.mypy]``: the default level everywhere, strict for
lifecycle.core and lifecycle.kube), and ``__all__`` in every public module.

machines/ and providers/ are installed as ``lifecycle.machines`` and
``lifecycle.providers`` (setuptools ``package-dir``), which mypy cannot map: run
from the repository, it would treat ``lifecycle.providers.*`` imports as missing
and check nothing through them. So mypy runs on a tree laid out as installed: a
directory whose ``lifecycle/`` holds a symbolic link to each entry of the
package, plus ``machines`` and ``providers``. The tree and mypy's cache live in
the user's cache directory, so a run after the first takes seconds.
"""

from __future__ import annotations

import ast
import hashlib
import importlib
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

import attrs
import pytest

ROOT = Path(__file__).resolve().parent.parent

#: Folders of the repository installed inside the package: (name under lifecycle/, folder).
MAPPED = (("machines", ROOT / "machines"), ("providers", ROOT / "providers"))

#: ``path:line: error: message  [code]``, with a column when the configuration shows them.
_ERROR = re.compile(r"^(?P<path>[^:\n]+):(?P<line>\d+)(?::\d+)?: error: (?P<message>.*)$")


@attrs.frozen
class Reported:
    """One error mypy reported: the file as the repository names it."""

    path: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}"


@attrs.frozen
class MypyRun:
    """What one mypy run printed and the errors parsed from it."""

    returncode: int
    output: str
    errors: tuple[Reported, ...]


def cache_dir() -> Path:
    """``$XDG_CACHE_HOME/lifecycle`` (``~/.cache/lifecycle`` when unset)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "lifecycle"


def installed_tree() -> Path:
    """A directory laid out as the package installs, made of symbolic links into the
    checkout (one tree per checkout, kept in the cache directory): ``lifecycle/`` links
    every entry of the package, and ``lifecycle/machines`` and ``lifecycle/providers``
    link the repository's folders. Links to entries gone from the checkout are removed."""
    digest = hashlib.sha256(str(ROOT).encode()).hexdigest()[:12]
    tree = cache_dir() / f"typed-tree-{digest}"
    package = tree / "lifecycle"
    package.mkdir(parents=True, exist_ok=True)
    wanted = {entry.name: entry for entry in (ROOT / "lifecycle").iterdir()
              if entry.name != "__pycache__"}
    wanted.update(MAPPED)
    for link in package.iterdir():
        if link.is_symlink() and Path(os.readlink(link)) != wanted.get(link.name):
            link.unlink()
        elif link.name.startswith(_PROBE) and link.name != _probe_name():
            link.unlink()  # left by a run that did not finish
    for name, target in wanted.items():
        link = package / name
        if not link.is_symlink():
            link.symlink_to(target)
    return tree


def repository_path(reported: str, tree: Path) -> str:
    """A path as mypy printed it (relative to the tree, or absolute), as the repository
    names it: ``lifecycle/providers/x.py`` is ``providers/x.py``."""
    path = Path(reported)
    if path.is_absolute():
        for base in (tree, ROOT):
            if path.is_relative_to(base):
                path = path.relative_to(base)
                break
        else:
            return path.as_posix()
    parts = path.parts
    for name, folder in MAPPED:
        if parts[:2] == ("lifecycle", name):
            return (folder.relative_to(ROOT) / Path(*parts[2:])).as_posix()
    return path.as_posix()


def run_mypy(*paths: str) -> MypyRun:
    """Run mypy with the repository's configuration on the installed tree; ``paths``
    (relative to the tree, or absolute) replace the whole package when given. A run that
    did not check (a crash, a bad configuration) fails the test with mypy's output."""
    tree = installed_tree()
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
         "--cache-dir", str(cache_dir() / "mypy"), "--no-pretty", "--hide-error-context",
         *(paths or ("lifecycle",))],
        cwd=tree, capture_output=True, text=True, check=False)
    output = done.stdout + done.stderr
    errors = []
    for line in done.stdout.splitlines():
        found = _ERROR.match(line)
        if found:
            errors.append(Reported(repository_path(found["path"], tree), int(found["line"]),
                                   found["message"]))
    if done.returncode not in (0, 1) or (done.returncode == 1) != bool(errors):
        pytest.fail(f"mypy did not finish a check (exit {done.returncode}):\n{output}")
    return MypyRun(done.returncode, output, tuple(errors))


_PROBE = "_typecheck_probe_"


def _probe_name() -> str:
    return f"{_PROBE}{os.getpid()}.py"


@contextmanager
def probe_module(text: str) -> Iterator[str]:
    """A module written into the installed tree's package for one run (its path from the
    tree's root); removed afterwards."""
    name = _probe_name()
    path = installed_tree() / "lifecycle" / name
    path.write_text(text)
    try:
        yield f"lifecycle/{name}"
    finally:
        path.unlink(missing_ok=True)


@pytest.mark.typecheck
@pytest.mark.timeout(900)  # a first run without a cache checks everything (minutes)
def test_mypy_reports_no_errors() -> None:
    run = run_mypy()
    assert run.errors == (), (
        f"mypy reports {len(run.errors)} error(s):\n" + "\n".join(map(str, run.errors))
        + f"\n\nmypy's whole output:\n{run.output}")


@pytest.mark.typecheck
@pytest.mark.timeout(900)
def test_the_type_check_catches_a_type_error(tmp_path: Path) -> None:
    double = "def double(n: int) -> int:\n    return n * 2\n\n\n"
    broken = tmp_path / "broken_types.py"
    broken.write_text(double + 'count: int = double("2")\n')
    run = run_mypy(str(broken))
    assert run.returncode == 1
    assert [(Path(e.path).name, e.line, e.message) for e in run.errors] == [
        ("broken_types.py", 5,
         'Argument 1 to "double" has incompatible type "str"; expected "int"  [arg-type]')]
    clean = tmp_path / "clean_types.py"
    clean.write_text(double + "count: int = double(2)\n")
    assert run_mypy(str(clean)).errors == ()


@pytest.mark.typecheck
@pytest.mark.timeout(900)
def test_the_type_check_follows_the_bundled_providers_and_kinds() -> None:
    # Run from the repository, these imports would be missing and silently Any.
    misuse = ("from lifecycle.machines.managed import ManagedResourceMachine\n"
              "from lifecycle.providers.simcloud.client import DatabaseClient\n\n"
              "client = DatabaseClient(None, 'key')\n"
              "depth: int = ManagedResourceMachine.history_limit.real + 'x'\n")
    with probe_module(misuse) as probe:
        run = run_mypy(probe)
    messages = [e.message for e in run.errors]
    assert any('Argument 2 to "DatabaseClient" has incompatible type "str"' in m
               for m in messages), run.output
    assert any('Unsupported operand types for + ("int" and "str")' in m
               for m in messages), run.output


def test_tree_paths_are_named_as_in_the_repository(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    assert repository_path("lifecycle/providers/simcloud/cloud.py", tree) == (
        "providers/simcloud/cloud.py")
    assert repository_path("lifecycle/machines/managed.py", tree) == "machines/managed.py"
    assert repository_path("lifecycle/core/kind.py", tree) == "lifecycle/core/kind.py"
    assert repository_path(str(tree / "lifecycle/providers/x.py"), tree) == "providers/x.py"
    assert repository_path("/elsewhere/probe.py", tree) == "/elsewhere/probe.py"


def _modules() -> list[tuple[str, Path]]:
    """Every public module of the package, machines/ and providers/ included (as
    ``lifecycle.machines`` and ``lifecycle.providers``), with its dotted name; the
    ``__main__`` scripts and modules named with a leading underscore are not public."""
    found = []
    for base, folder in (("lifecycle", ROOT / "lifecycle"),
                         *((f"lifecycle.{name}", path) for name, path in MAPPED)):
        for path in sorted(folder.rglob("*.py")):
            if path.name == "__main__.py" or (
                    path.name.startswith("_") and path.name != "__init__.py"):
                continue
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found.append((".".join([base, *parts]), path))
    return found


def _declares_all(tree: ast.Module) -> bool:
    return any(isinstance(target, ast.Name) and target.id == "__all__"
               for node in tree.body if isinstance(node, ast.Assign | ast.AnnAssign)
               for target in (node.targets if isinstance(node, ast.Assign) else [node.target]))


def _docstring_only(tree: ast.Module) -> bool:
    """A package that only documents itself (its names are its submodules)."""
    return all(isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
               for node in tree.body)


def modules_without_all(source: dict[str, str]) -> list[str]:
    """The modules (dotted name -> source) that bind names but declare no ``__all__``."""
    missing = []
    for name, text in source.items():
        tree = ast.parse(text)
        if not _docstring_only(tree) and not _declares_all(tree):
            missing.append(name)
    return missing


def test_every_public_module_declares_all() -> None:
    source = {name: path.read_text() for name, path in _modules()}
    assert len(source) > 50  # the walk found the package
    assert {"lifecycle.machines.managed", "lifecycle.providers.simcloud.client"} <= set(source)
    assert modules_without_all(source) == []


def test_the_all_check_catches_a_module_without_it() -> None:
    assert modules_without_all({
        "a": '"""Doc."""\n\n__all__ = ["f"]\n\n\ndef f():\n    pass\n',
        "b": '"""Doc."""\n\n__all__: list[str] = []\n',
        "c": '"""Only a package docstring."""\n',
        "d": '"""Doc."""\n\nimport os\n\n\ndef f():\n    pass\n',
    }) == ["d"]


def all_problems(module: ModuleType) -> list[str]:
    """What is wrong with ``module.__all__``: names listed twice, names the module lacks."""
    listed = list(getattr(module, "__all__", ()))
    problems = [f"{module.__name__}.{n} is listed twice" for n in sorted(set(listed))
                if listed.count(n) > 1]
    return problems + [f"{module.__name__}.{n} does not exist" for n in listed
                       if not hasattr(module, n)]


def test_every_name_in_all_exists() -> None:
    problems = []
    for name, _ in _modules():
        problems += all_problems(importlib.import_module(name))
    assert problems == []


def test_the_all_check_catches_a_missing_or_repeated_name() -> None:
    module = ModuleType("example")
    exec('__all__ = ["f", "g", "f"]\n\n\ndef f():\n    pass\n', module.__dict__)
    assert all_problems(module) == ["example.f is listed twice", "example.g does not exist"]
