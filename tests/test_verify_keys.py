"""Crash safety when the provider assigns identity by idempotency key.

Some external APIs name a new resource themselves and make ``create``
idempotent only through a client token: the same token returns the resource
already made, a new token makes another one. For such a provider the engine
must resume an interrupted create with the key it journalled before the call;
a new key on resume creates a second resource that no object tracks.

The target here is a fake of such an API. The explorer crashes the engine at
every side-effect point and checks that nothing is created twice or leaked:
the real engine passes, and a variant that mints a new key on resume is a
counterexample.
"""

from __future__ import annotations

import itertools
from typing import Any

import attrs
import pytest

from lifecycle import verify
from lifecycle.core.contract import ManagedResource, ProviderConfig
from lifecycle.core.errors import TerminalError
from lifecycle.core.kind import Kind
from lifecycle.core.values import Creation, Observation
from lifecycle.machines.managed import ManagedResourceMachine
from lifecycle.runtime import effects
from lifecycle.verify.targets import fake_target


@attrs.frozen
class KeyedParameters:
    """The one field of the fake resource: its size."""

    size: int = 1


class KeyedMachine(ManagedResourceMachine):
    """The standard lifecycle."""


Keyed = Kind(group="keys.example.test", version="v1alpha1", kind="KeyedThing",
             plural="keyedthings", machine=KeyedMachine, parameters=KeyedParameters,
             names_assigned=True)


class KeyedAPI:
    """An external API that names what it creates and dedupes creates by client token."""

    def __init__(self) -> None:
        self.items: dict[str, dict[str, Any]] = {}
        self.tokens: dict[str, str] = {}
        self.creates = 0
        self._ids = itertools.count(1)

    def names(self) -> set[str]:
        """Every resource that exists."""
        return set(self.items)

    def create(self, token: str, params: dict[str, Any]) -> str:
        """The id of the resource made with ``token``; a new resource for a new token."""
        self.creates += 1
        if token in self.tokens:
            return self.tokens[token]
        ident = f"kr-{next(self._ids):04d}"
        self.items[ident] = dict(params)
        self.tokens[token] = ident
        return ident


class KeyedClient:
    """The external client over :class:`KeyedAPI`: the identity comes back from create."""

    def __init__(self, api: KeyedAPI) -> None:
        self.api = api

    def observe(self, r: ManagedResource) -> Observation:
        found = self.api.items.get(r.external_name)
        if found is None:
            return Observation.absent()
        return Observation(exists=True, up_to_date=found == attrs.asdict(r.parameters))

    def create(self, r: ManagedResource) -> Creation:
        if not r.idempotency_key:
            raise TerminalError("create without an idempotency key")
        ident = self.api.create(r.idempotency_key, attrs.asdict(r.parameters))
        return Creation(external_name=ident)

    def update(self, r: ManagedResource) -> None:
        if r.external_name in self.api.items:
            self.api.items[r.external_name] = attrs.asdict(r.parameters)

    def delete(self, r: ManagedResource) -> None:
        self.api.items.pop(r.external_name, None)


class KeyedConnector:
    """Connects every resource to one :class:`KeyedAPI`."""

    def __init__(self, api: KeyedAPI) -> None:
        self.api = api

    def connect(self, resource: ManagedResource, config: ProviderConfig) -> KeyedClient:
        return KeyedClient(self.api)


def target() -> verify.Target:
    return fake_target(KeyedConnector, changed={"size": 2}, store=KeyedAPI)(Keyed)


def mint_new_keys(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Make the engine mint a fresh key for every call, never resuming a pending one."""
    minted: list[str] = []
    original = effects.next_intent
    counter = itertools.count(1)

    def fresh(previous: Any, operation: str, uid: str, generation: int, at: Any,
              **_: Any) -> Any:
        intent = original(None, operation, uid, generation, at)
        key = f"{intent.key}-{next(counter)}"
        minted.append(key)
        return attrs.evolve(intent, key=key)

    monkeypatch.setattr(effects, "next_intent", fresh)
    return minted


# ----------------------------------------------------------------- the fake
def test_the_fake_dedupes_by_token_and_names_what_it_makes() -> None:
    api = KeyedAPI()
    first = api.create("t1", {"size": 1})
    assert api.create("t1", {"size": 1}) == first, "same token: same resource"
    second = api.create("t2", {"size": 1})
    assert second != first and api.names() == {first, second}
    assert api.creates == 3


# --------------------------------------------------------------- the engine
@pytest.fixture(scope="module")
def real_report() -> verify.Report:
    return verify.explore(target(), variants=("restart",))


def test_the_real_engine_resumes_with_the_journalled_key(real_report: verify.Report) -> None:
    """An engine restarted after a crash at any point never makes a second resource."""
    assert real_report.points > 0
    assert any(op.startswith("external.create") for op in real_report.operations)
    assert real_report.ok, "\n".join(c.render() for c in real_report.counterexamples)
    assert len(real_report.checked) == 2 * real_report.points


def create_points() -> list[int]:
    """The side-effect points of the scenario from the external create to its recorded name."""
    labels = verify.run_scenario(target()).recorder.operations
    first = next(i for i, label in enumerate(labels, start=1)
                 if label.startswith("external.create"))
    named = next(i for i, label in enumerate(labels, start=1)
                 if i > first and "+external-name" in label)
    return list(range(first, named + 2))


@pytest.mark.parametrize("side", ["before", "after"])
def test_a_crash_between_the_create_and_its_recorded_name_makes_no_second_resource(
        side: str) -> None:
    """The window that matters: the provider made the resource, the object does not yet
    record its id. A restarted engine must come back to the same resource."""
    for index in create_points():
        run = verify.run_scenario(target(), verify.CrashPoint(index, side, "restart"))
        assert run.recorder.crashed_at is not None
        assert run.problems == [], (index, side, run.problems)


def test_an_object_deleted_while_down_after_an_unrecorded_create_leaks_nothing() -> None:
    """The deletion resumes the pending create with its key, learns the name, deletes it."""
    report = verify.explore(target(), variants=("delete-while-down",), points=create_points())
    assert report.ok, "\n".join(c.render() for c in report.counterexamples)


def test_without_names_assigned_the_unrecorded_create_leaks() -> None:
    """The check is needed: a kind that does not declare it leaves the resource behind."""
    plain = attrs.evolve(target(), kind=attrs.evolve(Keyed, names_assigned=False))
    report = verify.explore(plain, variants=("delete-while-down",), points=create_points())
    assert not report.ok
    assert any("leaked" in p for c in report.counterexamples for p in c.problems)


def test_a_variant_that_mints_a_new_key_on_resume_is_a_counterexample(
        monkeypatch: pytest.MonkeyPatch) -> None:
    minted = mint_new_keys(monkeypatch)
    report = verify.explore(target(), variants=("restart",))
    assert minted, "the broken journal was used"
    assert not report.ok
    crashed = [c for c in report.counterexamples if c.point is not None]
    assert len(crashed) == len(report.counterexamples), "no failure without a crash"
    assert all(any("leaked" in p for p in c.problems) for c in crashed), crashed
    # Caught exactly at the crash after the create call: the resumed create got a new key.
    first = create_points()[0]
    assert verify.CrashPoint(first, "after", "restart") in {c.point for c in crashed}
    assert all(c.trace and "CRASH" in "\n".join(c.trace) for c in crashed)


def test_the_broken_variant_passes_when_nothing_crashes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a crash a new key per call is harmless: only the resume tells them apart."""
    minted = mint_new_keys(monkeypatch)
    assert verify.run_scenario(target()).problems == []
    assert minted
