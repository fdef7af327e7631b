"""The HTTP face shows a write only once ``after_write`` has saved it.

``lifecycle serve --state`` saves (and fsyncs) every write in ``after_write``
before answering. A reader on another connection must not see the write
sooner: it could act on it (the operator creating an external resource after
its finalizer showed up) and then lose it to a crash. Each test holds the
save open, gives a second client one second to read or watch the object, then
finishes the save and checks that what the client saw came after it.
"""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from lifecycle.sim.apiserver import EmbeddedAPI
from lifecycle.sim.http import APIServerHTTP

CONFIGMAPS = "/api/v1/namespaces/default/configmaps"


@pytest.fixture
def face() -> Iterator[APIServerHTTP]:
    with APIServerHTTP(EmbeddedAPI()) as served:
        yield served


def request(face: APIServerHTTP, method: str, path: str, body: Any = None,
            content_type: str = "application/json") -> tuple[int, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", face.port, timeout=30)
    try:
        data = None if body is None else json.dumps(body).encode()
        conn.request(method, path, body=data, headers={"Content-Type": content_type})
        response = conn.getresponse()
        return response.status, json.loads(response.read() or b"null")
    finally:
        conn.close()


def configmap(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default"}, "data": {"k": "v"}}


def hold_save(face: APIServerHTTP, reader: Callable[[dict[str, Any]], None]
              ) -> dict[str, Any]:
    """Install an ``after_write`` that, on its first call, starts ``reader`` on another
    thread and gives it a second before the save counts as done; what the reader saw
    lands in the returned dict, with ``saved`` telling whether the save was done then."""
    seen: dict[str, Any] = {}
    saved = threading.Event()
    threads: list[threading.Thread] = []

    def run() -> None:
        reader(seen)
        seen["saved"] = saved.is_set()

    def after_write() -> None:
        if threads:
            return
        thread = threading.Thread(target=run, daemon=True)
        threads.append(thread)
        thread.start()
        thread.join(1.0)  # the reader's chance to see the write before it is saved
        saved.set()

    face.after_write = after_write
    seen["_threads"] = threads
    return seen


def finish(seen: dict[str, Any]) -> dict[str, Any]:
    for thread in seen.pop("_threads"):
        thread.join(30)
        assert not thread.is_alive(), "the reader never got an answer"
    return seen


def test_a_get_waits_until_the_write_it_would_show_is_saved(face: APIServerHTTP) -> None:
    request(face, "POST", CONFIGMAPS, configmap("c"))
    seen = hold_save(face, lambda seen: seen.update(
        answer=request(face, "GET", f"{CONFIGMAPS}/c")))
    status, _ = request(face, "PATCH", f"{CONFIGMAPS}/c", {"data": {"k": "changed"}},
                        "application/merge-patch+json")
    assert status == 200
    seen = finish(seen)
    code, obj = seen["answer"]
    assert code == 200 and obj["data"] == {"k": "changed"}
    assert seen["saved"], "a GET showed the change before after_write had saved it"


def test_a_list_waits_until_the_write_it_would_show_is_saved(face: APIServerHTTP) -> None:
    seen = hold_save(face, lambda seen: seen.update(answer=request(face, "GET", CONFIGMAPS)))
    status, _ = request(face, "POST", CONFIGMAPS, configmap("listed"))
    assert status == 201
    seen = finish(seen)
    code, doc = seen["answer"]
    assert code == 200 and [o["metadata"]["name"] for o in doc["items"]] == ["listed"]
    assert seen["saved"], "a list showed the new object before after_write had saved it"


def test_a_watch_event_waits_until_its_write_is_saved(face: APIServerHTTP) -> None:
    status, doc = request(face, "GET", CONFIGMAPS)
    assert status == 200
    version = doc["metadata"]["resourceVersion"]

    def watch(seen: dict[str, Any]) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", face.port, timeout=30)
        try:
            conn.request("GET", f"{CONFIGMAPS}?watch=true&resourceVersion={version}"
                                "&timeoutSeconds=20")
            response = conn.getresponse()
            seen["event"] = json.loads(response.readline())
        finally:
            conn.close()

    seen = hold_save(face, watch)
    assert request(face, "POST", CONFIGMAPS, configmap("watched"))[0] == 201
    seen = finish(seen)
    assert seen["event"]["type"] == "ADDED"
    assert seen["event"]["object"]["metadata"]["name"] == "watched"
    assert seen["saved"], "a watch delivered the event before after_write had saved it"


def test_without_after_write_reads_do_not_wait_on_writes(face: APIServerHTTP) -> None:
    """The lock exists only for ``after_write``: a face without one never holds it."""
    assert face.after_write is None
    with face.committed(), face.committed():  # not a lock: re-entered freely
        pass
    face.after_write = lambda: None
    lock = face.committed()
    assert lock is face.committed()
