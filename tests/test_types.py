"""The type check: mypy over lifecycle/, machines/ and providers/ at the levels
pyproject.toml sets (``[tool.mypy]``: the default level everywhere, strict for
lifecycle.core and lifecycle.kube), and ``__all__`` in every module of lifecycle.

mypy keeps its cache in the user's cache directory, so a run after the first
takes seconds.
"""

from __future__ import annotations

import ast
import importlib
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import attrs
import pytest

ROOT = Path(__file__).resolve().parent.parent

# Modules whose type errors are still to be fixed: only they may report errors.
BUSY = (
    "lifecycle/runtime/",
    "lifecycle/driver/cluster.py",
    "lifecycle/driver/informer.py",
    "lifecycle/driver/cache.py",
    "lifecycle/driver/store.py",
    "lifecycle/driver/transport.py",
    "lifecycle/driver/manager.py",
    "lifecycle/schema/crds.py",
    "lifecycle/schema/openapi.py",
    "lifecycle/verify/",
    "lifecycle/cli/bench.py",
    "lifecycle/cli/verify.py",
    "lifecycle/cli/serve.py",
    "lifecycle/cli/envtest.py",
    "lifecycle/core/kind.py",
    "providers/postgres/config.py",
    "providers/simcloud/__init__.py",
)

#: Errors reported at a call outside BUSY whose cause is the annotation of a busy module:
#: (file, start of the message) -> the module whose annotation is too narrow.
CAUSED_BY_BUSY = {
    ("lifecycle/cli/run.py", 'Argument 2 to "cached_manager"'): "lifecycle/driver/cache.py",
    ("providers/simcloud/scenarios/verify.py", 'Argument 1 to "TracedReconciler"'):
        "lifecycle/verify/crashing.py",
}

#: ``path:line: error: message  [code]``, with a column when the configuration shows them.
_ERROR = re.compile(r"^(?P<path>[^:\n]+):(?P<line>\d+)(?::\d+)?: error: (?P<message>.*)$")


@attrs.frozen
class Reported:
    """One error mypy reported: the file (relative to the repository when inside it)."""

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


def mypy_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/lifecycle/mypy`` (``~/.cache/lifecycle/mypy`` when unset)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "lifecycle" / "mypy"


def run_mypy(*paths: str) -> MypyRun:
    """Run mypy from the repository root with its configuration; ``paths`` replace the
    configured files when given. A run that did not check (a crash, a bad configuration)
    fails the test with mypy's output."""
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(mypy_cache_dir()),
         "--no-pretty", "--hide-error-context", *paths],
        cwd=ROOT, capture_output=True, text=True, check=False)
    output = done.stdout + done.stderr
    errors = []
    for line in done.stdout.splitlines():
        found = _ERROR.match(line)
        if found:
            path = Path(found["path"])
            if path.is_absolute() and path.is_relative_to(ROOT):
                path = path.relative_to(ROOT)
            errors.append(Reported(path.as_posix(), int(found["line"]), found["message"]))
    if done.returncode not in (0, 1) or (done.returncode == 1) != bool(errors):
        pytest.fail(f"mypy did not finish a check (exit {done.returncode}):\n{output}")
    return MypyRun(done.returncode, output, tuple(errors))


def is_busy(path: str) -> bool:
    """Whether ``path`` is a module listed in :data:`BUSY`."""
    return any(path == busy or (busy.endswith("/") and path.startswith(busy)) for busy in BUSY)


def blocking(errors: tuple[Reported, ...]) -> list[Reported]:
    """The errors the check fails on: those outside BUSY not caused by a busy module."""
    return [e for e in errors if not is_busy(e.path) and not any(
        e.path == path and e.message.startswith(start) for path, start in CAUSED_BY_BUSY)]


@pytest.mark.typecheck
@pytest.mark.timeout(900)  # a first run without a cache checks everything (minutes)
def test_mypy_reports_no_errors() -> None:
    run = run_mypy()
    failing = blocking(run.errors)
    assert failing == [], (
        f"mypy reports {len(failing)} error(s) outside the busy modules:\n"
        + "\n".join(map(str, failing)) + f"\n\nmypy's whole output:\n{run.output}")


@pytest.mark.typecheck
@pytest.mark.timeout(900)
def test_the_type_check_catches_a_type_error(tmp_path: Path) -> None:
    double = "def double(n: int) -> int:\n    return n * 2\n\n\n"
    broken = tmp_path / "broken_types.py"
    broken.write_text(double + 'count: int = double("2")\n')
    run = run_mypy(str(broken))
    assert run.returncode == 1
    assert [(e.line, e.message) for e in run.errors] == [
        (5, 'Argument 1 to "double" has incompatible type "str"; expected "int"  [arg-type]')]
    assert blocking(run.errors) == list(run.errors)  # not hidden by the busy list
    clean = tmp_path / "clean_types.py"
    clean.write_text(double + "count: int = double(2)\n")
    assert run_mypy(str(clean)).errors == ()


@pytest.mark.typecheck
def test_the_busy_list_hides_only_busy_modules_and_named_causes() -> None:
    errors = (Reported("lifecycle/runtime/reconciler.py", 3, "x"),
              Reported("lifecycle/runtime.py", 3, "x"),
              Reported("lifecycle/driver/cache.py", 1, "x"),
              Reported("lifecycle/driver/cache_extra.py", 1, "x"),
              Reported("lifecycle/cli/run.py", 9, 'Argument 2 to "cached_manager" is off'),
              Reported("lifecycle/cli/run.py", 9, 'Argument 1 to "cached_manager" is off'))
    assert blocking(errors) == [errors[1], errors[3], errors[5]]


def _modules() -> list[tuple[str, Path]]:
    """Every module of lifecycle/ but the ``__main__`` scripts, with its dotted name."""
    found = []
    for path in sorted((ROOT / "lifecycle").rglob("*.py")):
        if path.name == "__main__.py":
            continue
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found.append((".".join(parts), path))
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


def test_every_module_of_lifecycle_declares_all() -> None:
    source = {name: path.read_text() for name, path in _modules()
              if not is_busy(path.relative_to(ROOT).as_posix())}
    assert len(source) > 50  # the walk found the package
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
    for name, path in _modules():
        if not is_busy(path.relative_to(ROOT).as_posix()):
            problems += all_problems(importlib.import_module(name))
    assert problems == []


def test_the_all_check_catches_a_missing_or_repeated_name() -> None:
    module = ModuleType("example")
    exec('__all__ = ["f", "g", "f"]\n\n\ndef f():\n    pass\n', module.__dict__)
    assert all_problems(module) == ["example.f is listed twice", "example.g does not exist"]
