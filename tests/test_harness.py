"""The harness users import: the pytest fixture, custom kinds, the virtual queue."""

from __future__ import annotations

import re
from pathlib import Path

import attrs
import pytest

from lifecycle.core.contract import ManagedResource, ProviderConfig
from lifecycle.core.kind import Kind
from lifecycle.core.values import Creation, Observation
from lifecycle.machines.managed import ManagedResourceMachine
from lifecycle.providers.simcloud.scenarios.harness import database_manifest
from lifecycle.testing import Backoff, Environment


def test_fixture_builds_the_bundled_kind(lifecycle_env) -> None:
    env = lifecycle_env()
    env.apply(database_manifest("orders"))
    steps = env.run_until_idle()
    assert env.state("DatabaseInstance", "orders") == "ready"
    assert [s.after for s in steps][-1] == "ready"
    assert env.cloud.count("create") == 1


@attrs.frozen
class NoteParameters:
    text: str = ""


class NoteStore:
    """A tiny external system for a custom kind."""

    def __init__(self) -> None:
        self.notes: dict[str, str] = {}
        self.calls: list[str] = []

    def connect(self, resource: ManagedResource, config: ProviderConfig) -> NoteStore:
        return self

    def observe(self, r: ManagedResource) -> Observation:
        self.calls.append("observe")
        if r.external_name not in self.notes:
            return Observation.absent()
        return Observation(exists=True, up_to_date=self.notes[r.external_name] == r.parameters.text)

    def create(self, r: ManagedResource) -> Creation:
        self.calls.append("create")
        self.notes[r.external_name] = r.parameters.text
        return Creation()

    def update(self, r: ManagedResource) -> None:
        self.calls.append("update")
        self.notes[r.external_name] = r.parameters.text

    def delete(self, r: ManagedResource) -> None:
        self.calls.append("delete")
        self.notes.pop(r.external_name, None)


Note = Kind("notes.example.org", "v1", "Note", "notes", ManagedResourceMachine, NoteParameters)


def note(text: str) -> dict:
    return {
        "apiVersion": "notes.example.org/v1",
        "kind": "Note",
        "metadata": {"name": "n1"},
        "spec": {"forProvider": {"text": text}},
    }


def test_custom_kind_through_the_fixture(lifecycle_env) -> None:
    store = NoteStore()
    env = lifecycle_env(kinds=[(Note, store)])
    env.provider_config()
    env.apply(note("hello"))
    env.run_until_idle()
    assert env.state("Note", "n1") == "ready"
    env.apply(note("changed"))
    env.run_until_idle()
    assert list(store.notes.values()) == ["changed"]
    env.delete("Note", "n1")
    env.run_until_idle()
    assert store.notes == {}
    assert store.calls.count("create") == 1 and store.calls.count("update") == 1


def test_backoff_grows_and_is_capped() -> None:
    b = Backoff(base=1.0, cap=8.0)
    assert [b.delay(n) for n in range(1, 7)] == [1.0, 2.0, 4.0, 8.0, 8.0, 8.0]
    assert b.delay(1, at_least=30.0) == 30.0
    assert b.delay(5000) == 8.0  # no overflow after many failures


def test_run_until_idle_reports_a_queue_that_never_settles() -> None:
    class Broken(NoteStore):
        def observe(self, r: ManagedResource) -> Observation:
            raise RuntimeError("always down")

    env = Environment([(Note, Broken())])
    env.provider_config()
    env.apply(note("x"))
    with pytest.raises(AssertionError, match="did not settle"):
        env.run_until_idle(max_steps=20)


def test_readme_example_defines_a_working_kind() -> None:
    readme = (Path(__file__).parents[1] / "README.md").read_text()
    block = re.search(r"```python\n(.*?)```", readme, re.S).group(1)
    namespace: dict = {}
    exec(compile(block, "README.md", "exec"), namespace)
    bucket = namespace["Bucket"]
    assert bucket.machine.table().initial == "unclaimed"

    class FakeBuckets:
        def __init__(self) -> None:
            self.store: dict[str, dict] = {}

        def get_bucket(self, name: str) -> dict | None:
            return self.store.get(name)

        def put_bucket(self, name: str, params: dict) -> None:
            self.store[name] = params

        def delete_bucket(self, name: str) -> None:
            self.store.pop(name, None)

    api = FakeBuckets()

    class Connector:
        def connect(self, resource, config):
            return namespace["BucketClient"](api)

    env = Environment([(bucket, Connector())])
    env.provider_config()
    env.apply(
        {
            "apiVersion": "storage.example.org/v1alpha1",
            "kind": "Bucket",
            "metadata": {"name": "logs"},
            "spec": {"forProvider": {"versioning": True}},
        }
    )
    env.run_until_idle()
    assert env.state("Bucket", "logs") == "ready"
    assert list(api.store.values()) == [{"region": "eu-west-1", "versioning": True}]


def test_fixture_with_custom_kinds_needs_no_provider_config_call(lifecycle_env) -> None:
    store = NoteStore()
    env = lifecycle_env(kinds=[(Note, store)], history=5)
    env.apply(note("hello"))
    env.run_until_idle()
    assert env.state("Note", "n1") == "ready"
    assert env.steps.limit == 5


def test_engine_faults_leave_the_tests_own_calls_alone() -> None:
    env = Environment([(Note, NoteStore())])
    env.provider_config()
    env.faults.fail("*", "Note")
    env.apply(note("x"))  # the test's own writes and reads go through
    assert env.get("Note", "n1")["spec"]["forProvider"]["text"] == "x"
    step = env.reconcile("Note", "n1")
    assert step.failed and step.error == (
        "API error during reconcile: injected fault: get Note n1")
    assert env.queued("Note", "n1").reason == "Backoff"
