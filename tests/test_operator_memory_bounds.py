"""What the operator keeps per object beside the informer stores stays bounded.

The cached reader remembers an object it wrote only until its informer has
caught up: the informer's event for that version (or a later one) ends the
remembering, so once objects settle nothing is kept beside the stores.
"""

from __future__ import annotations

import queue
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

from lifecycle.driver.cache import CachedCluster
from lifecycle.driver.informer import Informer, InformerOptions

API, KIND = "v1", "ConfigMap"


def _obj(name: str, version: str, uid: str = "u-1") -> dict[str, Any]:
    return {"apiVersion": API, "kind": KIND,
            "metadata": {"name": name, "namespace": "default", "uid": uid,
                         "resourceVersion": version}}


class Fed:
    """An informer source: an empty list, then the watch events the test puts in."""

    def __init__(self) -> None:
        self.events: queue.Queue[tuple[str, dict[str, Any]] | None] = queue.Queue()

    def list(self) -> tuple[list[dict[str, Any]], str]:
        return [], "1"

    def watch(self, resource_version: str, *, timeout: float,
              inactivity: float) -> Iterator[tuple[str, dict[str, Any]]]:
        while True:
            event = self.events.get()
            if event is None:
                return
            yield event

    def stop(self) -> None:
        self.events.put(None)


class Answering:
    """A cluster whose writes answer the object at the next version."""

    def info(self, api_version: str, kind: str) -> SimpleNamespace:
        return SimpleNamespace(namespaced=True)

    def replace(self, obj: dict[str, Any]) -> dict[str, Any]:
        meta = dict(obj["metadata"], resourceVersion=str(int(obj["metadata"]
                                                             ["resourceVersion"]) + 1))
        return dict(obj, metadata=meta)


class _Seen:
    """An informer handler that signals each object it hears of."""

    def __init__(self) -> None:
        self.seen: queue.Queue[dict[str, Any]] = queue.Queue()

    def on_add(self, obj: dict[str, Any]) -> None:
        self.seen.put(obj)

    def on_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        self.seen.put(new)

    def on_delete(self, obj: dict[str, Any]) -> None:
        self.seen.put(obj)

    def on_resync(self, obj: dict[str, Any]) -> None:
        """Not used."""


def _wired() -> tuple[CachedCluster, Fed, _Seen, Informer]:
    source, seen = Fed(), _Seen()
    informer = Informer("configmaps", source, seen, InformerOptions(resync=0)).start()
    assert informer.wait_synced(10)
    cached = CachedCluster(Answering())  # type: ignore[arg-type]
    cached.serve_from(API, KIND, informer, complete=True)
    return cached, source, seen, informer


def test_a_write_is_forgotten_once_the_informer_shows_it() -> None:
    cached, source, seen, informer = _wired()
    try:
        for i in range(50):
            source.events.put(("ADDED", _obj(f"o{i}", "2")))
            seen.seen.get(timeout=10)
        for i in range(50):
            cached.replace(_obj(f"o{i}", "2"))
        assert len(cached._written) == 50  # the informer has not caught up yet
        for i in range(50):
            source.events.put(("MODIFIED", _obj(f"o{i}", "3")))
            seen.seen.get(timeout=10)
        assert len(cached._written) == 0
        assert cached.get(API, KIND, "default", "o7")["metadata"]["resourceVersion"] == "3"
    finally:
        informer.stop()


def test_an_older_event_or_another_incarnation_keeps_the_write() -> None:
    cached, source, seen, informer = _wired()
    try:
        source.events.put(("ADDED", _obj("a", "2")))
        seen.seen.get(timeout=10)
        cached.replace(_obj("a", "2"))  # written at version 3
        source.events.put(("MODIFIED", _obj("a", "2", uid="u-1")))
        source.events.put(("DELETED", _obj("a", "4", uid="u-0")))  # an older object's end
        seen.seen.get(timeout=10)
        seen.seen.get(timeout=10)
        assert len(cached._written) == 1
        assert cached.get(API, KIND, "default", "a")["metadata"]["resourceVersion"] == "3"
    finally:
        informer.stop()


def test_a_write_the_informer_already_shows_is_not_remembered() -> None:
    cached, source, seen, informer = _wired()
    try:
        source.events.put(("ADDED", _obj("a", "3")))  # the watch ran ahead of the answer
        seen.seen.get(timeout=10)
        cached.replace(_obj("a", "2"))
        assert len(cached._written) == 0
    finally:
        informer.stop()


def test_the_shared_leaf_table_is_bounded_and_keeps_no_pair_tuples() -> None:
    import json

    from lifecycle.driver import store

    for i in range(store.SHARED_LIMIT + 100):
        decoded = store.decode(json.dumps({"metadata": {"name": f"o{i}"},
                                           "status": {"conditions": [
                                               {"type": "Ready", "status": "True",
                                                "lastTransitionTime": f"t{i}"}]}}))
        assert decoded["status"]["conditions"][0]["lastTransitionTime"] == f"t{i}"
    assert 0 < len(store._shared) <= store.SHARED_LIMIT
    for signature, shared in store._shared.items():
        assert not any(isinstance(item, tuple) for item in signature)
        assert dict(zip(signature[::2], signature[1::2], strict=True)) == shared
