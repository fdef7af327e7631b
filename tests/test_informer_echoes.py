"""Watch events of this process's own writes: taken from the written answer, not decoded;
and the objects a watch changed last, kept unpacked until others push them out.

A source with ``watch_lines`` yields each event as its raw line; an object handed over
with :meth:`Informer.expect` stands for the line whose one ``resourceVersion`` is its
own. These tests check what the store, the observers and the handler then see, and every
case where the line must still be decoded."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import lifecycle.driver.informer as informer_module
from lifecycle.driver.informer import MAX_EXPECTED, Informer, InformerOptions
from lifecycle.driver.store import Packer


def obj(name: str, rv: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}",
                         "resourceVersion": rv}, "spec": spec}


def line(kind: str, o: dict[str, Any]) -> bytes:
    return json.dumps({"type": kind, "object": o}, separators=(",", ":")).encode()


class Lines:
    """A source listing ``items`` and then watching ``events`` (type, line) once."""

    def __init__(self, items: list[dict[str, Any]], events: list[tuple[str, bytes]]) -> None:
        self.items = items
        self.events = events
        self.informer: Informer | None = None

    def list(self) -> tuple[list[dict[str, Any]], str]:
        return [dict(i) for i in self.items], "10"

    def watch(self, *args: Any, **kwargs: Any) -> Iterator[tuple[str, dict[str, Any]]]:
        raise AssertionError("an informer given watch_lines reads lines")

    def watch_lines(self, resource_version: str, *, timeout: float,
                    inactivity: float) -> Iterator[tuple[str, bytes]]:
        assert self.informer is not None
        yield from self.events
        self.informer._stop.set()

    def stop(self) -> None:
        pass


class Seen:
    def __init__(self) -> None:
        self.updates: list[tuple[dict[str, Any], dict[str, Any]]] = []
        self.adds: list[dict[str, Any]] = []

    def on_add(self, o: dict[str, Any]) -> None:
        self.adds.append(o)

    def on_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        self.updates.append((old, new))

    def on_delete(self, o: dict[str, Any]) -> None:
        pass

    def on_resync(self, o: dict[str, Any]) -> None:
        pass


def run(source: Lines, expected: list[dict[str, Any]]) -> tuple[Informer, Seen]:
    seen = Seen()
    informer = Informer("t", source, seen, InformerOptions(resync=0))
    source.informer = informer
    informer._relist()
    for o in expected:
        informer.expect(o)
    informer._watch_once()
    return informer, seen


def test_the_event_of_a_written_object_is_that_object() -> None:
    written = obj("a", "11", size=2)
    observed: list[dict[str, Any]] = []
    source = Lines([obj("a", "10", size=1)], [("MODIFIED", line("MODIFIED", written))])
    seen = Seen()
    informer = Informer("t", source, seen, InformerOptions(resync=0))
    source.informer = informer
    informer.observers.append(observed.append)
    informer._relist()
    informer.expect(written)
    informer._watch_once()
    assert informer.stats.echoes == 1 and informer.stats.events == 1
    old, new = seen.updates[0]
    assert new is written and observed[-1] is written
    assert old["spec"] == {"size": 1}
    assert informer.get(("ns", "a")) == written and informer.version(("ns", "a")) == "11"
    assert informer.resource_version == "11"


def test_a_line_naming_resource_version_twice_is_decoded() -> None:
    written = obj("a", "11", ref={"resourceVersion": "11"})  # a reference in the spec
    on_wire = obj("a", "11", ref={"resourceVersion": "11"}, extra=True)
    source = Lines([obj("a", "10")], [("MODIFIED", line("MODIFIED", on_wire))])
    informer, seen = run(source, [written])
    assert informer.stats.echoes == 0
    assert seen.updates[0][1] == on_wire and seen.updates[0][1] is not written


def test_an_event_of_another_version_is_decoded() -> None:
    on_wire = obj("a", "12", size=3)
    source = Lines([obj("a", "10")], [("MODIFIED", line("MODIFIED", on_wire))])
    informer, seen = run(source, [obj("a", "11", size=2)])
    assert informer.stats.echoes == 0 and seen.updates[0][1] == on_wire


def test_a_created_object_is_taken_from_the_answer_and_deletions_are_decoded() -> None:
    made = obj("b", "11")
    gone = obj("b", "12")
    source = Lines([], [("ADDED", line("ADDED", made)), ("DELETED", line("DELETED", gone))])
    informer, seen = run(source, [made, gone])
    assert seen.adds == [made] and seen.adds[0] is made
    assert informer.stats.echoes == 1 and informer.get(("ns", "b")) is None


def test_written_objects_whose_events_will_not_come_are_dropped() -> None:
    # the answer to a write the watch filters out (or whose event already passed)
    source = Lines([obj("a", "10")], [("MODIFIED", line("MODIFIED", obj("a", "13")))])
    informer, _ = run(source, [obj("x", "11"), obj("y", "12"), obj("z", "14")])
    assert list(informer._expected) == ["14"]
    for n in range(MAX_EXPECTED + 5):
        informer.expect(obj("w", str(100 + n)))
    assert len(informer._expected) == MAX_EXPECTED


def test_a_packed_object_tells_its_version_without_unpacking() -> None:
    packer = Packer()
    packed = packer.pack(obj("a", "123456", size=1))
    assert packer.version(packed) == "123456"
    assert packer.unpack(packed) == obj("a", "123456", size=1)
    assert packer.version(packer.pack({"metadata": {}})) == ""


def test_objects_changed_last_stay_unpacked_until_pushed_out_then_read_back_equal(
        monkeypatch: Any) -> None:
    monkeypatch.setattr(informer_module, "YOUNG", 3)
    first = [obj(f"o{i}", str(20 + i), size=i) for i in range(5)]
    again = obj("o4", "30", size=40)
    source = Lines([], [("ADDED", line("ADDED", o)) for o in first]
                   + [("MODIFIED", line("MODIFIED", again))])
    informer, seen = run(source, [])
    cache = informer._cache
    assert [k for k, v in cache.items() if isinstance(v, bytes)] == [("ns", "o0"), ("ns", "o1")]
    assert all(isinstance(cache[("ns", f"o{i}")], dict) for i in (2, 3, 4))
    for o in first[:4]:
        key = ("ns", o["metadata"]["name"])
        assert informer.get(key) == o and informer.shared(key) == o
        assert informer.version(key) == o["metadata"]["resourceVersion"]
    # the handler's previous object is the one it was handed, not unpacked again
    old, new = seen.updates[0]
    assert old is seen.adds[4] and new == again
    # a read of a young object is the caller's own; a shared read is the object itself
    mine = informer.get(("ns", "o4"))
    assert mine == again and mine is not informer.shared(("ns", "o4"))
    assert informer.shared(("ns", "o4")) is seen.updates[0][1]
    assert sorted(o["metadata"]["name"] for o in informer.items()) == [
        f"o{i}" for i in range(5)]
    assert informer.stored_bytes() == sum(
        len(informer.packer.pack(v)) if isinstance(v, dict) else len(v)
        for v in cache.values())


class _Late:
    """A list-watcher whose watch lines arrive a moment late, after the writer has had
    the answer (as they do when the informer thread is busy), so the test is not a race."""

    def __init__(self, source: Any) -> None:
        self.source = source

    def list(self) -> tuple[list[dict[str, Any]], str]:
        found: tuple[list[dict[str, Any]], str] = self.source.list()
        return found

    def watch_lines(self, resource_version: str, *, timeout: float,
                    inactivity: float) -> Iterator[tuple[str, bytes]]:
        for event in self.source.watch_lines(resource_version, timeout=timeout,
                                             inactivity=inactivity):
            time.sleep(0.3)
            yield event

    def stop(self) -> None:
        self.source.stop()


def _round_trip(cluster: Any, namespace: str, other: Any, served: Any) -> None:
    """Write through a cached cluster, let ``other`` change the object as another client,
    and check what the informer took from the answers and what it decoded."""
    from lifecycle.driver.cache import CachedCluster, _Ignore

    cached = CachedCluster(cluster)
    informer = Informer("configmaps",
                        _Late(cluster.list_watcher("v1", "ConfigMap", namespace)),
                        _Ignore(), InformerOptions(resync=0)).start()
    try:
        assert informer.wait_synced(30)
        cached.serve_from("v1", "ConfigMap", informer)
        made = cached.create({"apiVersion": "v1", "kind": "ConfigMap",
                              "metadata": {"name": "a", "namespace": namespace},
                              "data": {"k": "1"}})
        wrote = cached.replace({**made, "data": {"k": "2"}})
        version = other("a")
        deadline = time.monotonic() + 30
        while informer.version((namespace, "a")) != version:
            assert time.monotonic() < deadline, "the informer never caught up"
            time.sleep(0.02)
        assert informer.stats.events == 3
        assert informer.stats.echoes == 2  # the create and the replace, not the other
        assert wrote["metadata"]["resourceVersion"] not in informer._expected
        assert informer.get((namespace, "a")) == served("a")
        assert cached.get("v1", "ConfigMap", namespace, "a")["data"] == {"k": "3"}
    finally:
        informer.stop()
        cluster.transport.close()


def test_over_the_wire_the_cache_hands_its_writes_to_the_informer_and_reads_them_back() -> None:
    """Through the embedded API's HTTP face: a cached cluster's writes come back as watch
    events the informer takes from the answers (not decoded), and its store then equals
    what the server serves; a change made by another client is decoded."""
    from lifecycle.driver.cluster import KubeCluster, api_client
    from lifecycle.sim.apiserver import EmbeddedAPI
    from lifecycle.sim.http import APIServerHTTP

    api = EmbeddedAPI()

    def other(name: str) -> str:
        found = api.get("v1", "ConfigMap", "default", name)
        return str(api.replace({**found, "data": {"k": "3"}})["metadata"]["resourceVersion"])

    with APIServerHTTP(api) as face:
        _round_trip(KubeCluster(api_client(host=face.url)), "default", other,
                    lambda name: api.get("v1", "ConfigMap", "default", name))
    api.close()


def test_on_a_real_server_the_writes_come_back_as_their_answers(real_cluster: Any) -> None:
    """The same on a kube-apiserver: its watch lines (keys in its own order, the
    objects' managedFields) carry one resourceVersion each, that of the answer."""
    import uuid

    from kubernetes import client as k8s

    from lifecycle.driver.cluster import KubeCluster
    from lifecycle.driver.store import loads

    core = k8s.CoreV1Api(real_cluster.api_client())
    namespace = f"echo-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": namespace}})
    cluster = KubeCluster(real_cluster.api_client())

    def other(name: str) -> str:
        changed = core.patch_namespaced_config_map(name, namespace, {"data": {"k": "3"}})
        return str(changed.metadata.resource_version)

    def served(name: str) -> Any:
        raw = core.read_namespaced_config_map(name, namespace, _preload_content=False)
        return loads(raw.data)  # as the informer keeps it: without managedFields

    _round_trip(cluster, namespace, other, served)
