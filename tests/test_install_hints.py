"""Every install hint names the project's distribution, ``kube-lifecycle``.

The import package is ``lifecycle``, but the name ``lifecycle`` on PyPI belongs
to an unrelated project: a ``pip install 'lifecycle[diagrams]'`` or a
``dependencies = ["lifecycle"]`` copied from the docs or an error message would
install someone else's code. These tests read every ``pip install`` hint and
every dependency declaration in README.md, docs/ and the package's sources
(messages included, with implicitly concatenated string literals joined) and
fail on one naming ``lifecycle``.
"""

from __future__ import annotations

import ast
import re
import shlex
from collections.abc import Iterator
from importlib.metadata import distribution
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DISTRIBUTION = "kube-lifecycle"

#: ``pip install`` (or ``pip3``, ``python -m pip``, ``uv pip``) and what follows on the line.
_PIP = re.compile(r"\bpip3?\s+install\b([^\n`]*)")
#: A requirement naming the import package's name instead of the distribution's.
_WRONG = re.compile(r"^lifecycle(\[[^\]]*\])?(\s*[<>=!~;@].*)?$", re.IGNORECASE)
#: A TOML dependency list item naming ``lifecycle`` (``dependencies = ["lifecycle>=0.1"]``).
_DEPENDENCY = re.compile(r"""["']lifecycle(\[[^\]]*\])?\s*([<>=!~;][^"']*)?["']""",
                         re.IGNORECASE)
_DEPENDENCY_LIST = re.compile(r"dependencies\s*=\s*\[")


def wrong_hints(text: str) -> list[str]:
    """The install hints in ``text`` that name ``lifecycle`` rather than ``kube-lifecycle``."""
    found: list[str] = []
    for match in _PIP.finditer(text):
        rest = re.split(r"&&|\|\||;|\)\s|\)$|#", match.group(1))[0]
        try:
            words = shlex.split(rest)
        except ValueError:  # an unbalanced quote: the hint is cut by the string's end
            words = rest.replace("'", " ").replace('"', " ").split()
        skip = False
        for word in words:
            if skip:
                skip = False
                continue
            if word in ("-e", "--editable", "-r", "--requirement", "-c", "--constraint"):
                skip = True  # a path follows
                continue
            if word.startswith("-"):
                continue
            if _WRONG.match(word.strip("'\"),.")):
                found.append(match.group(0).strip())
    for listed in _DEPENDENCY_LIST.finditer(text):
        items = _bracketed(text, listed.end())
        found += [f"dependencies = [{m.group(0)}]" for m in _DEPENDENCY.finditer(items)]
    return found


def _bracketed(text: str, start: int) -> str:
    """The text from ``start`` to the ``]`` closing the ``[`` just before it."""
    depth = 1
    for index in range(start, len(text)):
        depth += {"[": 1, "]": -1}.get(text[index], 0)
        if depth == 0:
            return text[start:index]
    return text[start:]


def _strings(source: str) -> Iterator[str]:
    """Every string of a Python module: constants (concatenated literals are one constant),
    the literal parts of f-strings joined, and the source's own lines (for comments)."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.value
        elif isinstance(node, ast.JoinedStr):
            yield "".join(part.value if isinstance(part, ast.Constant) else "{}"
                          for part in node.values)
    yield from (line for line in source.splitlines() if "#" in line)


def _files() -> Iterator[Path]:
    yield ROOT / "README.md"
    yield from sorted((ROOT / "docs").rglob("*.md"))
    yield from sorted((ROOT / "docs").rglob("*.rst"))
    for folder in ("lifecycle", "machines", "providers", "benchmarks"):
        yield from sorted((ROOT / folder).rglob("*.py"))
    yield ROOT / "Dockerfile"


def test_every_install_hint_names_the_distribution() -> None:
    problems: list[str] = []
    checked = 0
    for path in _files():
        if not path.is_file():
            continue
        text = path.read_text(encoding="utf-8")
        texts = list(_strings(text)) if path.suffix == ".py" else [text]
        for part in texts:
            checked += len(_PIP.findall(part))
            problems += [f"{path.relative_to(ROOT)}: {hint}" for hint in wrong_hints(part)]
    assert checked >= 5, "the scan found almost no pip install hint: is it still reading?"
    assert not problems, "install hints naming 'lifecycle' (PyPI's is another project):\n" + \
        "\n".join(problems)


@pytest.mark.parametrize("text", [
    "pip install 'lifecycle[diagrams]'",
    "Install the extra: `pip install lifecycle[sphinx]`.",
    'pip install "lifecycle>=0.1"',
    "python -m pip install -U lifecycle",
    "pip install lifecycle",
    'dependencies = ["attrs", "lifecycle>=0.1"]',
    "dependencies = [\n    'lifecycle[postgres]',\n]",
])
def test_the_check_catches_a_hint_naming_lifecycle(text: str) -> None:
    assert wrong_hints(text), text


@pytest.mark.parametrize("text", [
    "pip install 'kube-lifecycle[diagrams]'",
    "pip install -e '.[dev]' && lifecycle demo",
    "pip install . && rm -rf /src",
    "pip install /work/main && lifecycle --version",
    "pip install kube-lifecycle && lifecycle demo",
    'dependencies = ["kube-lifecycle>=0.1"]',
    "pip install -e . # then run lifecycle",
])
def test_the_check_passes_hints_naming_the_distribution(text: str) -> None:
    assert wrong_hints(text) == [], text


def test_a_broken_hint_in_a_message_is_caught_through_concatenated_literals() -> None:
    source = ('raise DiagramError(f"cannot render {fmt}: not installed (pip install "\n'
              '                   "\'lifecycle[diagrams]\'); -f dot works")\n')
    assert any(wrong_hints(text) for text in _strings(source))


def test_the_installed_distribution_is_kube_lifecycle() -> None:
    import lifecycle

    found = distribution(DISTRIBUTION)
    assert found.metadata["Name"] == DISTRIBUTION
    assert lifecycle.__version__ == found.version
    scripts = {e.name: e.value for e in found.entry_points if e.group == "console_scripts"}
    assert scripts["lifecycle"] == "lifecycle.cli:main"
