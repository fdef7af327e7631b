"""Mutation canaries: engine breakages the fast tests must keep catching.

Each canary is one deliberate bug: an exact snippet of a source file and the
edit that breaks one rule of the engine. The test copies the package, as
installed (``machines/`` and ``providers/`` inside ``lifecycle/``), and the
tests to a temporary folder, applies the edit there, and runs the named tests
against the copy: they must fail. A snippet that no longer occurs exactly once
fails the canary, so a refactoring cannot retire a canary silently. A control
run of the same tests on the unmodified copy must pass, so a broken copy can
never make every canary look caught.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Canary:
    """One deliberate bug and the tests that must catch it."""

    id: str
    path: str  # relative to the installed ``lifecycle`` package
    old: str
    new: str
    tests: tuple[str, ...]


CANARIES: tuple[Canary, ...] = (
    Canary(
        "requeue-waiting-before-error",
        "core/decide.py",
        "    if error is not None:\n"
        "        if error.severity is Severity.TERMINAL and not deleting:",
        "    if waiting or state in timing.wait:\n"
        "        return Result.later(timing.wait_for(state), \"Waiting\")\n"
        "    if error is not None:\n"
        "        if error.severity is Severity.TERMINAL and not deleting:",
        ("tests/test_requeue_matrix.py::test_every_pair_of_competing_inputs",),
    ),
    Canary(
        "requeue-error-before-dirty",
        "core/decide.py",
        "    if dirty:\n        return Result.now(\"ObjectChanged\")",
        "    if dirty and error is None:\n        return Result.now(\"ObjectChanged\")",
        ("tests/test_requeue_matrix.py::test_every_pair_of_competing_inputs",
         "tests/test_requeue_matrix.py::test_named_rows"),
    ),
    Canary(
        "condition-stamp-kept-on-flip",
        "core/conditions.py",
        "if old is not None and old[\"status\"] == status and old[\"lastTransitionTime\"]:",
        "if old is not None and old[\"lastTransitionTime\"]:",
        ("tests/test_condition_rules.py::test_a_status_flip_moves_last_transition_time",),
    ),
    Canary(
        "condition-stamp-moved-on-reason",
        "core/conditions.py",
        "if old is not None and old[\"status\"] == status and old[\"lastTransitionTime\"]:",
        "if (old is not None and old[\"status\"] == status"
        " and old[\"lastTransitionTime\"] and old.get(\"reason\") == camel_reason(cond.reason)):",
        ("tests/test_condition_rules.py::test_a_change_without_a_flip_keeps_last_transition_time",),
    ),
    Canary(
        "state-since-reset-every-pass",
        "core/status.py",
        "    since = valid_timestamp(old.get(\"stateSince\")) if target == source else when\n",
        "    since = when\n",
        ("tests/test_status_rules.py::test_state_since_stays_fixed_while_the_state_is_unchanged",),
    ),
    Canary(
        "journal-never-resumes",
        "runtime/effects.py",
        "    if (not settled and previous is not None and previous.outcome == \"pending\"\n",
        "    if (not settled and previous is not None and previous.outcome == \"never resumed\"\n",
        ("tests/test_journal.py::"
         "test_a_create_lost_before_it_reached_the_cloud_is_retried_with_the_same_key",),
    ),
    Canary(
        "journal-resumes-across-generations",
        "runtime/effects.py",
        "            and previous.operation == operation and previous.generation == generation):\n",
        "            and previous.operation == operation):\n",
        ("tests/test_runtime_rules.py::test_a_pending_intent_is_resumed_only_at_its_own_generation",
         "tests/test_runtime_rules.py::"
         "test_an_update_lost_at_one_generation_is_retried_under_a_key_of_the_next"),
    ),
    Canary(
        "late-init-pruned-taken-as-persisted",
        "runtime/passes.py",
        "        if after != before and all(written.get(k) is not None for k in missing):\n",
        "        if True:\n",
        ("tests/test_runtime_rules.py::"
         "test_a_late_init_write_the_schema_pruned_is_reported_not_taken_as_persisted",),
    ),
    Canary(
        "late-init-overwrites-the-user",
        "runtime/passes.py",
        "if params.get(k) is None and v is not None}",
        "if v is not None}",
        ("tests/test_runtime_rules.py::test_late_init_never_overwrites_a_value_the_user_set",
         "tests/test_spec_conformance.py::test_late_init_conflict_never_loses_the_users_write"),
    ),
    Canary(
        "name-index-releases-anothers-name",
        "runtime/names.py",
        "            if key in holders and holders[key][0] == uid:\n",
        "            if key in holders:\n",
        ("tests/test_runtime_rules.py::test_the_name_index_never_releases_a_name_another_object_holds",
         "tests/test_runtime_rules.py::"
         "test_deleting_an_object_that_lost_a_name_leaves_the_name_with_its_holder"),
    ),
    Canary(
        "external-name-edit-followed",
        "runtime/passes.py",
        "f\"still managing {name.recorded!r}\", run.generation))\n        return name.recorded\n",
        "f\"still managing {name.recorded!r}\", run.generation))\n"
        "        return str(name.chosen)\n",
        ("tests/test_spec_conformance.py::"
         "test_changing_the_external_name_after_acquiring_leaks_nothing",),
    ),
    Canary(
        "status-write-no-409-retry",
        "runtime/passes.py",
        "        on_conflict(attempt, self.refresh, what=\"status write\")\n",
        "        attempt()\n",
        ("tests/test_conflicts.py::test_fewer_conflicts_than_the_limit_are_absorbed_and_the_write_"
         "lands_in_the_same_pass",),
    ),
    Canary(
        "crd-without-status-failure",
        "schema/crds.py",
        "                \"failure\": {\"type\": \"object\","
        " \"description\": \"The last failed operation.\",",
        "                \"failure_\": {\"type\": \"object\","
        " \"description\": \"The last failed operation.\",",
        ("tests/test_status_schema.py::"
         "test_every_engine_status_key_is_declared_by_every_managed_kind",),
    ),
    Canary(
        "relist-drops-updates",
        "driver/informer.py",
        "            elif _rv(before) != _rv(obj):\n"
        "                self.handler.on_update(before, obj)\n"
        "        self._resource_version = resource_version",
        "            elif _rv(before) != _rv(obj):\n                pass\n"
        "        self._resource_version = resource_version",
        ("tests/test_informer_rules.py::test_gone_relists_and_delivers_the_difference",
         "tests/test_driver_informer.py::"
         "test_a_410_relist_delivers_changes_and_deletions_made_during_the_gap"),
    ),
    Canary(
        "forced-pass-skips-the-secret",
        "runtime/passes.py",
        "self.secrets.publish(self.obj, connection, self.forced)",
        "self.secrets.publish(self.obj, connection, False)",
        ("tests/test_reconciler.py::"
         "test_a_forced_pass_rewrites_the_connection_secret_and_an_idle_one_does_not",),
    ),
)


def _ignore(_folder: str, names: list[str]) -> set[str]:
    return {n for n in names if n in ("__pycache__", ".pytest_cache", ".hypothesis")}


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An unmodified copy of the package (installed layout), the tests and pyproject.toml."""
    root = tmp_path_factory.mktemp("pristine")
    shutil.copytree(ROOT / "lifecycle", root / "lifecycle", ignore=_ignore)
    shutil.copytree(ROOT / "machines", root / "lifecycle" / "machines", ignore=_ignore)
    shutil.copytree(ROOT / "providers", root / "lifecycle" / "providers", ignore=_ignore)
    shutil.copytree(ROOT / "tests", root / "tests", ignore=_ignore)
    shutil.copy2(ROOT / "pyproject.toml", root / "pyproject.toml")
    return root


def _copy(pristine: Path, into: Path) -> Path:
    shutil.copytree(pristine, into, symlinks=True)
    return into


def _run(root: Path, tests: tuple[str, ...]) -> subprocess.CompletedProcess[str]:
    """Run ``tests`` in ``root`` with the copy of the package first on the import path."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(root), str(root / "tests")]),
               PYTHONDONTWRITEBYTECODE="1")
    env.pop("PYTEST_ADDOPTS", None)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
         "-p", "no:randomly", *tests],
        cwd=root, env=env, capture_output=True, text=True, timeout=240, check=False)


def _tail(proc: subprocess.CompletedProcess[str]) -> str:
    return (proc.stdout + proc.stderr)[-3000:]


def _mutated(canary: Canary, text: str) -> str:
    """``text`` with the canary's edit applied; fails unless its snippet occurs exactly once."""
    count = text.count(canary.old)
    assert count == 1, (
        f"canary {canary.id}: the snippet occurs {count} times in lifecycle/{canary.path} "
        f"(expected exactly once); update the canary to the current code:\n{canary.old}")
    return text.replace(canary.old, canary.new)


def test_a_snippet_missing_or_repeated_fails_its_canary() -> None:
    """A canary whose snippet is gone, or occurs twice, fails instead of passing silently."""
    canary = Canary("probe", "core/x.py", "a = 1\n", "a = 2\n", ("tests/test_x.py",))
    assert _mutated(canary, "b = 0\na = 1\n") == "b = 0\na = 2\n"
    with pytest.raises(AssertionError, match="occurs 0 times"):
        _mutated(canary, "a = 3\n")
    with pytest.raises(AssertionError, match="occurs 2 times"):
        _mutated(canary, "a = 1\na = 1\n")


def test_a_collection_error_is_not_a_catch(pristine: Path, tmp_path: Path) -> None:
    """A test id that does not exist ends with a usage exit code, never the failures' 1."""
    proc = _run(_copy(pristine, tmp_path / "repo"), ("tests/test_no_such_file.py",))
    assert proc.returncode not in (0, 1), _tail(proc)


def test_canary_ids_are_unique() -> None:
    """Every canary has its own id."""
    ids = [c.id for c in CANARIES]
    assert len(ids) == len(set(ids))


def test_control_unmodified_copy_passes(pristine: Path, tmp_path: Path) -> None:
    """The tests of every canary pass on the unmodified copy, importing the copy."""
    root = _copy(pristine, tmp_path / "repo")
    tests = tuple(dict.fromkeys(t for c in CANARIES for t in c.tests))
    probe = subprocess.run(
        [sys.executable, "-c", "import lifecycle, lifecycle.machines; "
         "print(lifecycle.__file__); print(lifecycle.machines.__file__)"],
        cwd=root, env=dict(os.environ, PYTHONPATH=str(root)), capture_output=True, text=True,
        check=True)
    assert all(line.startswith(str(root)) for line in probe.stdout.split()), probe.stdout
    proc = _run(root, tests)
    assert proc.returncode == 0, _tail(proc)


@pytest.mark.parametrize("canary", CANARIES, ids=[c.id for c in CANARIES])
def test_canary_is_caught(canary: Canary, pristine: Path, tmp_path: Path) -> None:
    """The canary's edit applies to exactly one place, and its tests fail on it."""
    root = _copy(pristine, tmp_path / "repo")
    target = root / "lifecycle" / canary.path
    target.write_text(_mutated(canary, target.read_text()))
    proc = _run(root, canary.tests)
    assert proc.returncode == 1, (
        f"canary {canary.id} survived (pytest exit code {proc.returncode}; 1 = tests failed):\n"
        + _tail(proc))
