"""Operator metrics computed from the informer caches: resources per state and Stuck."""

from __future__ import annotations

from typing import Any

from lifecycle.driver.metrics import OperatorMetrics


class FakeStats:
    relists_after_gone = 2
    errors = 1


class CachedInformer:
    """Only what the metrics read of an informer: its cached items and stats."""

    def __init__(self, items: list[dict[str, Any]]) -> None:
        self._items = items
        self.stats = FakeStats()

    def items(self) -> list[dict[str, Any]]:
        return self._items


def obj(state: str | None, stuck: bool = False) -> dict[str, Any]:
    conditions = [{"type": "Stuck", "status": "True" if stuck else "False"}]
    return {"status": {"state": state, "conditions": conditions}} if state else {}


def test_resources_per_state_and_stuck_gauges() -> None:
    metrics = OperatorMetrics()
    metrics.watch_informer("databaseinstance", CachedInformer([
        obj("ready"), obj("ready"), obj("creating", stuck=True), obj("creating"), obj(None),
    ]))
    text = metrics.render().decode()
    assert 'lifecycle_resources{kind="databaseinstance",state="ready"} 2.0' in text
    assert 'lifecycle_resources{kind="databaseinstance",state="creating"} 2.0' in text
    assert 'lifecycle_resources{kind="databaseinstance",state="unknown"} 1.0' in text
    assert 'lifecycle_stuck_resources{kind="databaseinstance",state="creating"} 1.0' in text
    assert 'lifecycle_stuck_resources{kind="databaseinstance",state="ready"}' not in text
    assert 'lifecycle_watch_relists_total{kind="databaseinstance"} 2.0' in text
