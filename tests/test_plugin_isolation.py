"""One broken ``lifecycle.kinds`` plugin costs only its own kinds.

A user's plugin whose module raises on import (a missing dependency, a typo)
used to stop ``crds``, ``diagram``, ``verify`` and ``serve`` for every kind.
Now it is left out with one warning naming it, the other kinds work, and
asking for a kind by a name nothing registers says which plugin failed.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from lifecycle import registry
from lifecycle.cli import main
from lifecycle.machines.database import DatabaseInstance


class EP:
    """An entry point as importlib.metadata gives it, loading ``value`` or raising it."""

    def __init__(self, name: str, value: str, obj: object) -> None:
        self.name, self.value, self._obj = name, value, obj

    def load(self) -> object:
        if isinstance(self._obj, Exception):
            raise self._obj
        return self._obj


@pytest.fixture
def broken_plugin(monkeypatch: pytest.MonkeyPatch) -> Any:
    """The real entry points plus a plugin whose module raises on import."""
    real = registry.entry_points

    def points(group: str) -> list[Any]:
        found = list(real(group=group))
        if group == registry.KINDS_GROUP:
            found.append(EP("bucket", "bucket_operator.kinds:REGISTRATIONS",
                            ModuleNotFoundError("No module named 'boto3'")))
            # a stale duplicate of a real one (an old *.egg-info beside the install): it must
            # count once, or its kinds would be "registered twice"
            found += [EP(ep.name, ep.value, RuntimeError("stale")) for ep in found[:1]]
        if group == registry.DEMOS_GROUP:
            found.append(EP("bucket", "bucket_operator.demo:run", RuntimeError("boom")))
        return found

    monkeypatch.setattr(registry, "entry_points", points)
    registry.refresh()
    yield
    monkeypatch.undo()
    registry.refresh()


def test_the_other_kinds_stay_registered_with_one_warning(
        broken_plugin: Any, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="lifecycle.registry"):
        names = [r.name for r in registry.registrations()]
        registry.registrations()  # loaded once: one warning, not one per call
    assert "DatabaseInstance" in names and len(names) == len(set(names))
    warnings = [r.getMessage() for r in caplog.records if r.name == "lifecycle.registry"]
    assert warnings == [
        "lifecycle: skipping the plugin entry point bucket = bucket_operator.kinds:REGISTRATIONS:"
        " cannot load: ModuleNotFoundError: No module named 'boto3' (lifecycle.kinds): its kinds "
        "are left out"]
    assert [f.name for f in registry.failures()] == ["bucket"]


def test_a_kind_of_the_broken_plugin_is_reported_with_the_reason(broken_plugin: Any) -> None:
    with pytest.raises(registry.RegistryError) as refused:
        registry.find("Bucket")
    assert "no registered kind 'Bucket'" in str(refused.value)
    assert ("plugins that failed to load: bucket = bucket_operator.kinds:REGISTRATIONS failed: "
            "cannot load: ModuleNotFoundError: No module named 'boto3'") in str(refused.value)
    assert registry.find("DatabaseInstance").kind is DatabaseInstance


@pytest.mark.parametrize("argv", [
    ["crds", "--kinds", "DatabaseInstance"],
    ["diagram", "DatabaseInstance", "-f", "mermaid"],
])
def test_commands_work_for_the_other_kinds(broken_plugin: Any, argv: list[str],
                                           capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 0
    assert capsys.readouterr().out


def test_a_broken_demo_plugin_leaves_the_others(broken_plugin: Any,
                                                caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="lifecycle.registry"):
        assert {"managed", "claims"} <= set(registry.demos())
    assert "bucket" not in registry.demos()
    assert any("the demo is left out" in r.getMessage() for r in caplog.records)
    with pytest.raises(registry.RegistryError) as refused:
        registry.demo("bucket")
    assert str(refused.value) == ("demo bucket = bucket_operator.demo:run: cannot load: "
                                  "RuntimeError: boom")
    assert callable(registry.demo("managed"))


PLUGIN = """
raise ModuleNotFoundError("No module named 'boto3'", name="boto3")
"""


def test_an_installed_broken_plugin_does_not_stop_crds(tmp_path: Path) -> None:
    """End to end: a real distribution on the path whose entry point fails to import."""
    site = tmp_path / "site"
    (site / "broken_kinds").mkdir(parents=True)
    (site / "broken_kinds" / "__init__.py").write_text(textwrap.dedent(PLUGIN))
    info = site / "broken_kinds-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-kinds\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[lifecycle.kinds]\nbroken = broken_kinds:REGISTRATIONS\n")
    env = {"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-m", "lifecycle", "crds", "--kinds",
                           "DatabaseInstance"], capture_output=True, text=True, env=env,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert any(d["spec"]["names"]["kind"] == "DatabaseInstance"
               for d in yaml.safe_load_all(done.stdout))
    assert done.stderr.strip() == (
        "lifecycle: skipping the plugin entry point broken = broken_kinds:REGISTRATIONS: cannot "
        "load: ModuleNotFoundError: No module named 'boto3' (lifecycle.kinds): its kinds are "
        "left out")
