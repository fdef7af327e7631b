"""The compact form informers store objects in (:mod:`lifecycle.driver.store`).

What an informer keeps must read back as the object the server served, with
only ``metadata.managedFields`` left out (the engine never reads it): every
field the reconciler reads is there, with its value and its JSON type. Shared
leaf dicts must never merge values that only compare equal in Python.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from lifecycle.driver import store
from lifecycle.driver.cache import _Ignore
from lifecycle.driver.cluster import KubeCluster, api_client
from lifecycle.driver.informer import Informer, InformerOptions
from lifecycle.machines.database import DatabaseInstance
from lifecycle.sim.apiserver import EmbeddedAPI
from lifecycle.sim.embedded import register_kinds
from lifecycle.sim.http import APIServerHTTP

MANAGED = [{"manager": "kubectl", "operation": "Update", "apiVersion": "v1",
            "time": "2026-01-01T00:00:00Z", "fieldsType": "FieldsV1",
            "fieldsV1": {"f:spec": {"f:forProvider": {}}}}]


@pytest.fixture(scope="module")
def ready() -> dict[str, Any]:
    """A DatabaseInstance as the engine leaves it once Ready, plus server bookkeeping."""
    from benchmarks.informer_memory import ready_template

    obj = ready_template()
    obj["metadata"]["managedFields"] = MANAGED
    return obj


def typed(value: Any) -> Any:
    """``value`` with each scalar tagged by its type, so 1, 1.0 and True differ."""
    if isinstance(value, dict):
        return {k: typed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [typed(v) for v in value]
    return (type(value).__name__, value)


def without_managed_fields(obj: dict[str, Any]) -> dict[str, Any]:
    copy = json.loads(json.dumps(obj))
    copy["metadata"].pop("managedFields", None)
    return copy


def paths(value: Any, prefix: str = "") -> set[str]:
    if isinstance(value, dict):
        return {prefix} | {p for k, v in value.items() for p in paths(v, f"{prefix}.{k}")}
    if isinstance(value, list):
        return {prefix} | {p for i, v in enumerate(value) for p in paths(v, f"{prefix}[{i}]")}
    return {prefix}


def test_a_ready_object_reads_back_equal_without_managed_fields(ready: dict[str, Any]) -> None:
    stored = store.decode(json.dumps(ready).encode())
    expected = without_managed_fields(ready)
    assert typed(stored) == typed(expected)
    # Every field the reconciler can read (status, spec, annotations, finalizers...) is kept.
    assert paths(stored) == paths(ready) - {p for p in paths(ready) if ".managedFields" in p}
    assert {".status.conditions[0].type", ".spec.forProvider",
            ".metadata.finalizers[0]"} <= paths(stored)
    assert any(p.startswith(".metadata.annotations.") for p in paths(stored))
    assert typed(store.compact(ready)) == typed(expected)
    assert "managedFields" in ready["metadata"]  # compact copies, never changes its input


def test_lists_and_watch_events_lose_managed_fields_of_each_object(
        ready: dict[str, Any]) -> None:
    listed = store.decode(json.dumps({"kind": "List", "metadata": {"resourceVersion": "3"},
                                      "items": [ready, ready]}))
    assert [typed(o) for o in listed["items"]] == [typed(without_managed_fields(ready))] * 2
    event = store.decode(json.dumps({"type": "MODIFIED", "object": ready}))
    assert typed(event["object"]) == typed(without_managed_fields(ready))
    # Elsewhere a field of that name is the user's, and kept.
    spec = store.decode(json.dumps({"spec": {"managedFields": [1]}, "metadata": {}}))
    assert spec["spec"] == {"managedFields": [1]}


def test_shared_leaf_dicts_never_merge_values_of_different_types() -> None:
    doc = store.decode(b'[{"a": 1}, {"a": true}, {"a": 1.0}, {"a": "1"}, {"a": null},'
                       b' {"a": 1}]')
    assert [typed(d) for d in doc] == [{"a": ("int", 1)}, {"a": ("bool", True)},
                                       {"a": ("float", 1.0)}, {"a": ("str", "1")},
                                       {"a": ("NoneType", None)}, {"a": ("int", 1)}]
    assert doc[0] is doc[5]  # equal flat dicts are stored once
    assert doc[0] is not doc[1] and doc[0] is not doc[2]


def test_keys_and_short_strings_are_stored_once() -> None:
    one = store.decode(b'{"status": {"phase": "Ready", "message": "' + b"x" * 40 + b'"}}')
    two = store.decode(b'{"status": {"phase": "Ready", "message": "' + b"x" * 40 + b'"}}')
    assert one == two
    (k1,), (k2,) = one.keys(), two.keys()
    assert k1 is k2
    assert one["status"]["phase"] is two["status"]["phase"]


# ------------------------------------------------------------ an informer
@pytest.fixture
def served() -> Iterator[tuple[EmbeddedAPI, APIServerHTTP]]:
    api = EmbeddedAPI()
    register_kinds(api, [DatabaseInstance])
    with APIServerHTTP(api) as face:
        yield api, face
    api.close()


def test_an_informer_holds_what_the_server_serves(served: tuple[EmbeddedAPI, APIServerHTTP],
                                                 ready: dict[str, Any]) -> None:
    api, face = served
    for index in range(1_203):  # three pages and a bit
        obj = without_managed_fields(ready)
        meta = obj["metadata"]
        meta["name"] = f"db-{index:05d}"
        for field in ("uid", "resourceVersion", "creationTimestamp", "generation"):
            meta.pop(field, None)
        made = api.create(obj)
        api.replace_status({**made, "status": ready["status"]})
    cluster = KubeCluster(api_client(host=face.url), [DatabaseInstance])
    kind = DatabaseInstance
    informer = Informer("stored", cluster.list_watcher(kind.api_version, kind.kind, None),
                        _Ignore(), InformerOptions(resync=0)).start()
    try:
        assert informer.wait_synced(60)
        served_items, _ = api.list(kind.api_version, kind.kind)
        assert len(informer) == len(served_items) == 1_203
        for obj in served_items:
            held = informer.get((obj["metadata"]["namespace"], obj["metadata"]["name"]))
            assert typed(held) == typed(without_managed_fields(obj))
        # A change arrives by the watch in the same form.
        changed = api.get(kind.api_version, kind.kind, "default", "db-00007")
        api.replace({**changed, "metadata": {**changed["metadata"],
                                             "labels": {"team": "blue"}}})
        latest = api.get(kind.api_version, kind.kind, "default", "db-00007")
        done = threading.Event()
        for _ in range(200):
            held = informer.get(("default", "db-00007"))
            if held and held["metadata"].get("labels") == {"team": "blue"}:
                done.set()
                break
            done.wait(0.05)
        assert done.is_set()
        assert typed(informer.get(("default", "db-00007"))) == typed(
            without_managed_fields(latest))
    finally:
        informer.stop()
