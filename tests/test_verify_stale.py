"""The explorer's stale-cache mode: reads from lagging informer stores, users acting mid-pass.

The engine reads through the operator's own cache
(:class:`~lifecycle.driver.cache.CachedCluster`) over stores that lag the
server by up to K writes; watch events arrive late and folded. Safety must
then come from the resourceVersion guard on writes. The real engine passes
for the bundled kinds; an engine whose object writes drop the guard loses the
user's spec change and is a counterexample.
"""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from lifecycle.cli import main
from lifecycle.kube.objects import clone
from lifecycle.runtime.reconciler import Reconciler
from lifecycle.sim.apiserver import EmbeddedAPI
from lifecycle.verify import CONCURRENT, VARIANTS, explore, run_scenario, targets
from lifecycle.verify.model import CrashPoint
from lifecycle.verify.stale import LaggingStore, StaleView


def _instance_target() -> Any:
    chosen, _ = targets(["DatabaseInstance"])
    return next(t for t in chosen if t.name == "DatabaseInstance")


def _secret(name: str, value: str = "a") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": name, "namespace": "default"}, "stringData": {"k": value}}


# --------------------------------------------------------------- the lagging store

def test_store_lags_by_the_given_number_of_writes_and_never_moves_back() -> None:
    api = EmbeddedAPI()
    store = LaggingStore(api, "v1", "Secret", 1, lambda *a: None)
    api.create(_secret("one"))
    assert store.get(("default", "one")) is None  # the create is the newest write: not seen
    api.create(_secret("two"))
    assert store.get(("default", "one")) is not None
    assert store.get(("default", "two")) is None
    before = store.position
    store.advance(before - 1)
    assert store.position == before  # an informer never goes back


def test_moves_are_delivered_folded_and_through_the_operators_filters() -> None:
    api = EmbeddedAPI()
    queued: list[tuple[str, str | None, str]] = []
    kinds = [("v1", "Secret"), ("v1", "ConfigMap")]
    view = StaleView(api, kinds, 1, {"Secret"},
                     lambda kind, ns, name: queued.append((kind, ns, name)))
    made = api.create(_secret("s"))
    api.create({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "c", "namespace": "default"}})
    assert view.catch_up()
    assert queued == [("Secret", "default", "s")]  # ConfigMap is not watched
    changed = clone(made)
    changed["stringData"] = {"k": "b"}
    api.replace(changed)
    changed = api.get("v1", "Secret", "default", "s")
    changed["metadata"]["labels"] = {"x": "y"}
    api.replace(changed)
    queued.clear()
    view.catch_up()
    # Two writes, one delivery at most; a Secret has no generation, so the
    # generation-changed filter lets neither through.
    assert queued == []
    api.delete("v1", "Secret", "default", "s")
    view.catch_up()
    assert queued == [("Secret", "default", "s")]  # a deletion is always delivered


def test_a_store_lags_only_within_one_instant_of_the_clock() -> None:
    api = EmbeddedAPI()
    clock = [0.0]
    view = StaleView(api, [("v1", "Secret")], 5, (), lambda *a: None, now=lambda: clock[0])
    store = view.stores[("v1", "Secret")]
    api.create(_secret("one"))
    api.create(_secret("two"))
    assert store.get(("default", "two")) is not None  # first read of this instant
    api.create(_secret("three"))
    assert store.get(("default", "three")) is None  # written in this instant: behind
    clock[0] = 1.0
    assert store.get(("default", "three")) is not None  # the clock moved: caught up


def test_stale_view_needs_a_lag() -> None:
    with pytest.raises(ValueError, match="at least one write"):
        StaleView(EmbeddedAPI(), [("v1", "Secret")], 0, (), lambda *a: None)


# ------------------------------------------------------------ the explorer's mode

def test_engine_reads_stale_objects_and_still_converges() -> None:
    run = run_scenario(_instance_target(), stale=1)
    assert run.problems == []
    # The first pass after the create reads a store that has not seen it yet.
    assert "engine 1: reconcile default/alpha -> DONE NotFound" in run.recorder.trace


def test_real_engine_has_no_counterexample_with_stale_reads_and_concurrent_users() -> None:
    report = explore(_instance_target(), variants=(*VARIANTS, CONCURRENT), stale=2)
    assert report.points > 20
    concurrent = [c for c in report.checked if c.point.variant == CONCURRENT]
    assert len(concurrent) == report.points  # one run per point, the "before" side only
    assert report.counterexamples == []


class _Unguarded:
    """An API face whose object writes drop the resourceVersion (last writer wins)."""

    def __init__(self, api: Any) -> None:
        self._api = api

    def __getattr__(self, name: str) -> Any:
        return getattr(self._api, name)

    def replace(self, obj: dict[str, Any]) -> dict[str, Any]:
        body = clone(obj)
        body["metadata"].pop("resourceVersion", None)
        return self._api.replace(body)


def _unguarded(api: Any, *args: Any, **kwargs: Any) -> Reconciler:
    return Reconciler(_Unguarded(api), *args, **kwargs)


def test_a_write_without_the_resource_version_guard_is_a_counterexample() -> None:
    target = attrs.evolve(_instance_target(), reconciler=_unguarded)
    report = explore(target, variants=(CONCURRENT,), stale=1)
    assert report.counterexamples
    example = report.counterexamples[0]
    assert any("lost the user's spec change: spec.forProvider.storageGB" in p
               for p in example.problems)
    assert example.replay_command().endswith("--variant concurrent --stale 1 --trace")
    assert "user (engine mid-pass): update alpha" in example.trace


def test_concurrent_delete_during_the_update_is_not_lost() -> None:
    target = _instance_target()
    baseline = run_scenario(target, stale=1)
    update_points = [i + 1 for i, phase in enumerate(baseline.recorder.phases)
                     if phase == "update"]
    assert update_points
    run = run_scenario(target, CrashPoint(update_points[0], "before", CONCURRENT), stale=1)
    assert run.problems == []
    assert "user (engine mid-pass): delete alpha" in run.recorder.trace


def test_cli_stale_mode(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["verify", "DatabaseInstance", "--stale", "1", "--point", "3",
                 "--variant", CONCURRENT])
    out = capsys.readouterr().out
    assert code == 0
    assert "replay #3 before concurrent" in out
    assert "<- the user acts first" in out


def test_cli_refuses_concurrent_without_stale(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["verify", "DatabaseInstance", "--variant", CONCURRENT])
    err = capsys.readouterr().err
    assert code == 2
    assert "--variant concurrent needs --stale" in err
    assert "Traceback" not in err
