"""Informers keep their objects packed, and the supporting reads of a pass come from informers.

What bounds the operator's memory per object is the packed store: each
object held as its compact JSON deflated against dictionaries learned from
the kind's own objects. These tests pin the mechanism, not a measured size:
the store holds bytes, not dicts; a read gives a dict of the caller's own
that equals what the server serves; nothing a caller does to it reaches the
store; a Secret's data values never enter a dictionary. Turning packing off
(``Informer(packed=False)``) fails them.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from lifecycle.driver.cache import CachedCluster, _Ignore
from lifecycle.driver.cluster import KubeCluster, api_client
from lifecycle.driver.informer import Informer, InformerOptions
from lifecycle.driver.store import MAX_DICTIONARIES, Packer
from lifecycle.machines.database import DatabaseInstance
from lifecycle.runtime.credentials import credential_secrets
from lifecycle.sim.apiserver import EmbeddedAPI
from lifecycle.sim.embedded import register_kinds
from lifecycle.sim.http import APIServerHTTP


@pytest.fixture(scope="module")
def ready() -> dict[str, Any]:
    """A DatabaseInstance as the engine leaves it once Ready."""
    from benchmarks.informer_memory import ready_template

    return ready_template()


@pytest.fixture
def served() -> Iterator[tuple[EmbeddedAPI, APIServerHTTP]]:
    api = EmbeddedAPI()
    register_kinds(api, [DatabaseInstance])
    with APIServerHTTP(api) as face:
        yield api, face
    api.close()


def _seed(api: EmbeddedAPI, ready: dict[str, Any], count: int) -> None:
    for index in range(count):
        obj = json.loads(json.dumps(ready))
        meta = obj["metadata"]
        meta["name"] = f"db-{index:05d}"
        for field in ("uid", "resourceVersion", "creationTimestamp", "generation"):
            meta.pop(field, None)
        made = api.create(obj)
        api.replace_status({**made, "status": ready["status"]})


def _informer(face: APIServerHTTP, **kwargs: Any) -> Informer:
    cluster = KubeCluster(api_client(host=face.url), [DatabaseInstance])
    kind = DatabaseInstance
    return Informer("packed", cluster.list_watcher(kind.api_version, kind.kind, None),
                    _Ignore(), InformerOptions(resync=0), **kwargs).start()


def test_an_informer_holds_bytes_a_fraction_of_the_json_and_reads_back_equal(
        served: tuple[EmbeddedAPI, APIServerHTTP], ready: dict[str, Any]) -> None:
    api, face = served
    _seed(api, ready, 300)
    informer = _informer(face)
    try:
        assert informer.wait_synced(60)
        served_items, _ = api.list(DatabaseInstance.api_version, DatabaseInstance.kind)
        held = informer.stored_bytes()
        assert held is not None  # None: the store keeps decoded dicts
        text = sum(len(json.dumps(o, separators=(",", ":"))) for o in served_items)
        # Deflated against learned dictionaries an object shrinks to about a tenth;
        # a store of dicts, or of plain JSON, could never get under a third.
        assert held < text / 3, (held, text)
        assert all(isinstance(v, bytes) for v in informer._cache.values())
        for obj in served_items:
            key = (obj["metadata"]["namespace"], obj["metadata"]["name"])
            assert informer.get(key) == obj
    finally:
        informer.stop()


def test_a_read_is_the_callers_own_and_changing_it_never_reaches_the_store(
        served: tuple[EmbeddedAPI, APIServerHTTP], ready: dict[str, Any]) -> None:
    api, face = served
    _seed(api, ready, 3)
    informer = _informer(face)
    try:
        assert informer.wait_synced(30)
        first = informer.get(("default", "db-00001"))
        assert first is not None
        second = informer.get(("default", "db-00001"))
        assert first == second and first is not second
        first["status"]["state"] = "changed"
        first["metadata"]["annotations"].clear()
        assert informer.get(("default", "db-00001")) == second
        assert [o["metadata"]["name"] for o in informer.items()] == [
            "db-00000", "db-00001", "db-00002"]
    finally:
        informer.stop()


def test_without_packing_the_store_keeps_the_decoded_objects(
        served: tuple[EmbeddedAPI, APIServerHTTP], ready: dict[str, Any]) -> None:
    api, face = served
    _seed(api, ready, 2)
    informer = _informer(face, packed=False)
    try:
        assert informer.wait_synced(30)
        assert informer.stored_bytes() is None
        assert informer.get(("default", "db-00000")) is informer.get(("default", "db-00000"))
    finally:
        informer.stop()


def test_a_packer_learns_a_bounded_number_of_dictionaries_without_secret_values() -> None:
    packer = Packer()
    secrets = []
    for index in range(400):
        secret = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                  "metadata": {"name": f"s-{index}", "namespace": "default",
                               "uid": f"{index:08x}-0000-4000-8000-000000000000"},
                  "data": {"password": f"c2VjcmV0LXZhbHVlLW51bWJlci0{index:05d}",
                           "shape": "x" * (index % 50)}}
        secrets.append((secret, packer.pack(secret)))
    assert 1 <= packer.dictionaries < MAX_DICTIONARIES
    for secret, packed in secrets:
        assert packer.unpack(packed) == secret
    learned = b"".join(packer._dictionaries)
    assert b'"password"' in learned  # the keys are learned ...
    for secret, _ in secrets:  # ... never a value of the data
        assert secret["data"]["password"].encode() not in learned


def test_an_unknown_dictionary_number_is_refused() -> None:
    packer = Packer()
    packed = packer.pack({"a": 1})
    with pytest.raises(IndexError):
        packer.unpack(bytes((7,)) + packed[1:])


def test_the_credentials_secret_and_the_namespace_are_read_from_informers(
        served: tuple[EmbeddedAPI, APIServerHTTP]) -> None:
    api, face = served  # the embedded API comes with the default ProviderConfig
    from lifecycle.core.kind import PROVIDER_CONFIG_API, PROVIDER_CONFIG_KIND

    gets: list[str] = []
    cluster = KubeCluster(api_client(host=face.url), [DatabaseInstance])
    original = cluster.get

    def counted(api_version: str, kind: str, namespace: str | None, name: str) -> Any:
        gets.append(f"{kind} {name}")
        return original(api_version, kind, namespace, name)

    cluster.get = counted  # type: ignore[method-assign]
    cached = CachedCluster(cluster)
    configs = Informer("configs", cluster.list_watcher(PROVIDER_CONFIG_API, PROVIDER_CONFIG_KIND),
                       _Ignore(), InformerOptions(resync=0))
    cached.follow_credentials(configs)
    configs.start()
    cached.watch_namespaces("default")
    try:
        config = api.get(PROVIDER_CONFIG_API, PROVIDER_CONFIG_KIND, None, "default")
        ((namespace, name),) = credential_secrets(config)
        deadline = time.monotonic() + 30
        while not all(i.synced.is_set() for i in cached._informers):
            assert time.monotonic() < deadline, "the informers did not sync"
            time.sleep(0.05)
        secret = cached.get("v1", "Secret", namespace, name)
        assert secret["data"] == api.get("v1", "Secret", namespace, name)["data"]
        assert cached.get("v1", "Namespace", None, "default")["metadata"]["name"] == "default"
        assert gets == []  # both answered by informers
        # A rotation reaches the reader through the watch, with no read of its own.
        api.replace({**api.get("v1", "Secret", namespace, name), "data": {"accessKeyId": "Qw=="}})
        changed = threading.Event()
        while not changed.is_set() and time.monotonic() < deadline:
            if cached.get("v1", "Secret", namespace, name)["data"] == {"accessKeyId": "Qw=="}:
                changed.set()
            time.sleep(0.05)
        assert changed.is_set() and gets == []
    finally:
        configs.stop()
        cached.stop()
