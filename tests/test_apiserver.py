"""Behaviour of the embedded API server (lifecycle.sim.apiserver)."""

from __future__ import annotations

import base64
import threading
import time

import pytest
from widgets import AV, FIXED, GADGET, WIDGET  # noqa: F401

from lifecycle.kube.errors import (
    AlreadyExists,
    ApiError,
    BadRequest,
    Conflict,
    Gone,
    Invalid,
    NotFound,
    ServerError,
    TooManyRequests,
    error_from_status,
)
from lifecycle.kube.objects import clone, merge_patch
from lifecycle.kube.resources import ResourceType
from lifecycle.kube.selectors import parse_label_selector
from lifecycle.sim import EmbeddedAPI, FaultInjector, WatchEvent


def widget(name: str = "w", namespace: str = "default", **extra) -> dict:
    obj = {
        "apiVersion": AV,
        "kind": "Widget",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"size": 1},
    }
    obj.update(extra)
    return obj


def rv(obj: dict) -> int:
    return int(obj["metadata"]["resourceVersion"])


# -- types and errors --------------------------------------------------------------


def test_builtin_types_are_registered(api: EmbeddedAPI) -> None:
    kinds = {(t.api_version, t.kind) for t in api.types()}
    assert {
        ("v1", "Namespace"),
        ("v1", "Secret"),
        ("v1", "Event"),
        ("v1", "ConfigMap"),
        ("coordination.k8s.io/v1", "Lease"),
        (AV, "Widget"),
    } <= kinds
    assert api.resource_type("v1", "Namespace").namespaced is False
    assert api.resource_type("v1", "Secret").api_version == "v1"
    assert WIDGET.api_version == "example.test/v1"
    with pytest.raises(NotFound):
        api.resource_type("v1", "Nope")


def test_register_is_idempotent_and_rejects_redefinition(api: EmbeddedAPI) -> None:
    api.register(WIDGET)
    assert sum(1 for t in api.types() if t.kind == "Widget") == 1
    with pytest.raises(ValueError):
        api.register(ResourceType("example.test", "v1", "Widget", "widgetz", namespaced=True))


@pytest.mark.parametrize(
    ("error", "status", "reason"),
    [
        (NotFound("x"), 404, "NotFound"),
        (AlreadyExists("x"), 409, "AlreadyExists"),
        (Conflict("x"), 409, "Conflict"),
        (Gone("x"), 410, "Expired"),
        (Invalid("x"), 422, "Invalid"),
        (ServerError("x"), 500, "InternalError"),
        (TooManyRequests("x", retry_after=3), 429, "TooManyRequests"),
    ],
)
def test_error_classes(error: ApiError, status: int, reason: str) -> None:
    assert (error.status, error.reason, str(error)) == (status, reason, "x")
    back = error_from_status(error.to_status())
    assert type(back) is type(error)
    assert back.to_status()["code"] == status


def test_clone_is_deep_and_merge_patch_follows_rfc7386() -> None:
    original = {"a": [{"b": 1}], "c": {"d": "e"}, "f": None}
    copied = clone(original)
    assert copied == original
    copied["a"][0]["b"] = 2
    copied["c"]["d"] = "x"
    assert original == {"a": [{"b": 1}], "c": {"d": "e"}, "f": None}
    target = {"a": "b", "c": {"d": "e", "f": "g"}, "l": [1, 2]}
    assert merge_patch(target, {"a": "z", "c": {"f": None}, "l": [3]}) == {
        "a": "z",
        "c": {"d": "e"},
        "l": [3],
    }
    assert target == {"a": "b", "c": {"d": "e", "f": "g"}, "l": [1, 2]}


# -- create / get / list -------------------------------------------------------------


def test_create_sets_server_fields_and_copies(api: EmbeddedAPI) -> None:
    body = widget(status={"ready": True})
    body["metadata"].update(uid="forged", resourceVersion="999", generation=7)
    created = api.create(body)
    meta = created["metadata"]
    assert meta["uid"] != "forged" and len(meta["uid"]) == 36
    assert meta["creationTimestamp"] == "2024-05-01T12:00:00Z"
    assert meta["generation"] == 1
    assert rv(created) == int(api.resource_version)
    assert "status" not in created  # custom kinds drop status on create
    created["spec"]["size"] = 99
    body["spec"]["size"] = 98
    assert api.get(AV, "Widget", "default", "w")["spec"] == {"size": 1}


def test_resource_version_is_global_and_increasing(api: EmbeddedAPI) -> None:
    a = api.create(widget("a"))
    b = api.create(widget("b"))
    cm = api.create(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "default"}}
    )
    assert rv(a) < rv(b) < rv(cm)
    assert len({a["metadata"]["uid"], b["metadata"]["uid"]}) == 2


def test_create_errors(api: EmbeddedAPI) -> None:
    api.create(widget())
    with pytest.raises(AlreadyExists):
        api.create(widget())
    with pytest.raises(NotFound, match='namespaces "nowhere" not found'):
        api.create(widget(namespace="nowhere"))
    with pytest.raises(Invalid):
        api.create({"apiVersion": AV, "kind": "Widget", "metadata": {"name": "x"}})
    with pytest.raises(Invalid):
        api.create(widget("Bad_Name"))
    with pytest.raises(NotFound):
        api.create({"apiVersion": "v9", "kind": "Unknown", "metadata": {"name": "x"}})
    with pytest.raises(Invalid):
        api.create(
            widget("l")
            | {"metadata": {"name": "l", "namespace": "default", "labels": {"bad key!": "v"}}}
        )


def test_namespace_must_exist_then_can_be_used(api: EmbeddedAPI) -> None:
    with pytest.raises(NotFound):
        api.create(widget(namespace="team"))
    api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}})
    assert api.create(widget(namespace="team"))["metadata"]["namespace"] == "team"


def test_cluster_scoped_kind_strips_namespace(api: EmbeddedAPI) -> None:
    created = api.create(
        {"apiVersion": AV, "kind": "Gadget", "metadata": {"name": "g", "namespace": "default"}}
    )
    assert "namespace" not in created["metadata"]
    assert api.get(AV, "Gadget", None, "g")["metadata"]["name"] == "g"
    assert api.get(AV, "Gadget", "ignored", "g")["metadata"]["name"] == "g"


def test_generate_name_is_deterministic_with_seed() -> None:
    names = []
    for _ in range(2):
        server = EmbeddedAPI(seed=7)
        server.register(WIDGET)
        obj = widget()
        obj["metadata"] = {"generateName": "w-", "namespace": "default"}
        names.append(server.create(obj)["metadata"]["name"])
    assert names[0] == names[1]
    assert names[0].startswith("w-") and len(names[0]) == 7


def test_core_kinds_keep_status_on_create(api: EmbeddedAPI) -> None:
    lease = api.create(
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": "l", "namespace": "default"},
            "spec": {"holderIdentity": "me"},
        }
    )
    assert lease["spec"] == {"holderIdentity": "me"}
    ns = api.get("v1", "Namespace", None, "default")
    assert ns["status"] == {"phase": "Active"}


def test_get_missing_is_not_found(api: EmbeddedAPI) -> None:
    with pytest.raises(NotFound, match=r'widgets\.example\.test "nope" not found'):
        api.get(AV, "Widget", "default", "nope")


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("", ["a", "b", "c", "d"]),
        ("tier=web", ["a", "b"]),
        ("tier==web", ["a", "b"]),
        ("tier!=web", ["c", "d"]),
        ("tier in (web, db)", ["a", "b", "c"]),
        ("tier notin (web)", ["c", "d"]),
        ("env", ["a", "c"]),
        ("!env", ["b", "d"]),
        ("tier=web,env=prod", ["a"]),
        ("tier in (web,db),!env", ["b"]),
        ("example.test/owner=me", ["d"]),
        ("n>2", ["c", "d"]),
        ("n<2", ["a"]),
    ],
)
def test_list_label_selectors(api: EmbeddedAPI, selector: str, expected: list[str]) -> None:
    labels = {
        "a": {"tier": "web", "env": "prod", "n": "1"},
        "b": {"tier": "web", "n": "2"},
        "c": {"tier": "db", "env": "dev", "n": "3"},
        "d": {"example.test/owner": "me", "n": "4"},
    }
    for name, value in labels.items():
        obj = widget(name)
        obj["metadata"]["labels"] = value
        api.create(obj)
    items, list_rv = api.list(AV, "Widget", "default", label_selector=selector)
    assert [item["metadata"]["name"] for item in items] == expected
    assert list_rv == api.resource_version


@pytest.mark.parametrize(
    "selector",
    ["a in (x", "a notin ()", "=b", "a=b=c", "a b", "a,,b", "a=b,", "!", "a in x", "a=" + "v" * 70],
)
def test_malformed_selector_is_a_bad_request(api: EmbeddedAPI, selector: str) -> None:
    # the parser says what is wrong; the server answers 400 as a real one does
    with pytest.raises(BadRequest) as listed:
        api.list(AV, "Widget", label_selector=selector)
    assert listed.value.status == 400 and listed.value.reason == "BadRequest"
    with pytest.raises(BadRequest):
        api.watch(AV, "Widget", label_selector=selector)
    with pytest.raises(Invalid):
        parse_label_selector(selector)


def test_list_filters_namespace_and_sorts(api: EmbeddedAPI) -> None:
    api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "aaa"}})
    api.create(widget("z"))
    api.create(widget("b"))
    api.create(widget("m", namespace="aaa"))
    everywhere, _ = api.list(AV, "Widget")
    assert [(o["metadata"]["namespace"], o["metadata"]["name"]) for o in everywhere] == [
        ("aaa", "m"),
        ("default", "b"),
        ("default", "z"),
    ]
    only, _ = api.list(AV, "Widget", "aaa")
    assert [o["metadata"]["name"] for o in only] == ["m"]


# -- replace / status / patch ----------------------------------------------------------


def test_stale_resource_version_conflicts(api: EmbeddedAPI) -> None:
    first = api.create(widget())
    second = clone(first)
    first["spec"]["size"] = 2
    api.replace(first)
    second["spec"]["size"] = 3
    with pytest.raises(Conflict, match="the object has been modified"):
        api.replace(second)
    with pytest.raises(Conflict):
        api.replace_status(second | {"status": {"x": 1}})
    with pytest.raises(Conflict):
        api.patch(AV, "Widget", "default", "w", {"metadata": {"resourceVersion": "1"}})
    with pytest.raises(Conflict):
        api.delete(AV, "Widget", "default", "w", resource_version="1")
    assert api.get(AV, "Widget", "default", "w")["spec"] == {"size": 2}


def test_replace_without_resource_version_is_unconditional(api: EmbeddedAPI) -> None:
    api.create(widget())
    body = widget()
    body["spec"] = {"size": 5}
    assert api.replace(body)["spec"] == {"size": 5}


def test_uid_mismatch_conflicts(api: EmbeddedAPI) -> None:
    obj = api.create(widget())
    obj["metadata"]["uid"] = "00000000-0000-4000-8000-000000000000"
    with pytest.raises(Conflict, match="Precondition failed"):
        api.replace(obj)


def test_replace_missing_object_is_not_found(api: EmbeddedAPI) -> None:
    with pytest.raises(NotFound):
        api.replace(widget("ghost"))


@pytest.mark.parametrize(
    ("change", "bumps"),
    [
        (lambda o: o["spec"].update(size=2), True),
        (lambda o: o["metadata"].setdefault("labels", {}).update(a="b"), False),
        (lambda o: o["metadata"].setdefault("annotations", {}).update(a="b"), False),
        (lambda o: o.update(status={"ready": True}), False),
    ],
)
def test_generation_bumps_only_on_spec_change(api: EmbeddedAPI, change, bumps: bool) -> None:
    obj = api.create(widget())
    change(obj)
    updated = api.replace(obj)
    assert updated["metadata"]["generation"] == (2 if bumps else 1)


def test_status_writes_keep_generation_and_spec(api: EmbeddedAPI) -> None:
    obj = api.create(widget())
    obj["status"] = {"ready": True}
    obj["spec"] = {"size": 42}
    obj["metadata"]["labels"] = {"sneaky": "yes"}
    written = api.replace_status(obj)
    assert written["status"] == {"ready": True}
    assert written["spec"] == {"size": 1}
    assert "labels" not in written["metadata"]
    assert written["metadata"]["generation"] == 1
    assert rv(written) > rv(obj)


def test_main_resource_writes_ignore_status(api: EmbeddedAPI) -> None:
    obj = api.create(widget())
    obj["status"] = {"ready": True}
    obj = api.replace_status(obj)
    obj["status"] = {"ready": False}
    obj["spec"] = {"size": 3}
    written = api.replace(obj)
    assert written["status"] == {"ready": True}
    assert written["spec"] == {"size": 3}
    patched = api.patch(AV, "Widget", "default", "w", {"status": {"ready": False}})
    assert patched["status"] == {"ready": True}


def test_noop_writes_do_not_bump_resource_version(api: EmbeddedAPI) -> None:
    obj = api.create(widget())
    obj["status"] = {"ready": True}
    obj = api.replace_status(obj)
    before = api.resource_version
    again = api.replace(clone(obj))
    assert again == obj
    assert api.replace_status(clone(obj)) == obj
    assert api.patch(AV, "Widget", "default", "w", {"spec": {"size": 1}}) == obj
    assert api.resource_version == before
    assert api.stats["replace"] == 1 and api.stats["replace_status"] == 2
    assert api.writes("Widget") == 5
    obj["spec"]["size"] = 2
    assert rv(api.replace(obj)) == int(before) + 1


def test_patch_merges_and_deletes_keys(api: EmbeddedAPI) -> None:
    obj = widget()
    obj["metadata"]["labels"] = {"a": "1", "b": "2"}
    obj["spec"] = {"size": 1, "color": "red"}
    api.create(obj)
    patched = api.patch(
        AV,
        "Widget",
        "default",
        "w",
        {"metadata": {"labels": {"a": None, "c": "3"}}, "spec": {"color": None, "size": 2}},
    )
    assert patched["metadata"]["labels"] == {"b": "2", "c": "3"}
    assert patched["spec"] == {"size": 2}
    assert patched["metadata"]["generation"] == 2
    status = api.patch(
        AV, "Widget", "default", "w", {"status": {"phase": "Up"}}, subresource="status"
    )
    assert status["status"] == {"phase": "Up"}
    assert status["metadata"]["generation"] == 2
    with pytest.raises(NotFound):
        api.patch(AV, "Widget", "default", "w", {}, subresource="scale")


def test_patch_status_subresource_ignores_spec(api: EmbeddedAPI) -> None:
    api.create(widget())
    out = api.patch(
        AV,
        "Widget",
        "default",
        "w",
        {"spec": {"size": 9}, "status": {"a": 1}},
        subresource="status",
    )
    assert out["spec"] == {"size": 1} and out["status"] == {"a": 1}


def test_core_kind_without_status_subresource(api: EmbeddedAPI) -> None:
    cm = api.create(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "default"}}
    )
    with pytest.raises(NotFound):
        api.replace_status(cm)


def test_immutable_configmap(api: EmbeddedAPI) -> None:
    cm = api.create(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "c", "namespace": "default"},
            "data": {"k": "v"},
            "immutable": True,
        }
    )
    cm["data"]["k"] = "changed"
    with pytest.raises(Invalid, match="immutable"):
        api.replace(cm)
    cm["data"]["k"] = "v"
    cm["metadata"]["labels"] = {"ok": "yes"}
    assert api.replace(cm)["metadata"]["labels"] == {"ok": "yes"}


# -- secrets ---------------------------------------------------------------------------


def test_secret_string_data_is_merged_into_data(api: EmbeddedAPI) -> None:
    secret = api.create(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "s", "namespace": "default"},
            "data": {"a": base64.b64encode(b"old").decode()},
            "stringData": {"b": "hunter2"},
        }
    )
    assert "stringData" not in secret
    assert secret["type"] == "Opaque"
    assert base64.b64decode(secret["data"]["b"]) == b"hunter2"
    secret["stringData"] = {"a": "new"}
    replaced = api.replace(secret)
    assert base64.b64decode(replaced["data"]["a"]) == b"new"
    assert "generation" not in replaced["metadata"]  # built-in kinds have none
    with pytest.raises(BadRequest, match="illegal base64 data"):
        api.create(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "bad", "namespace": "default"},
                "data": {"a": "not base64!"},
            }
        )


# -- deletion and finalizers --------------------------------------------------------------


def test_delete_without_finalizers_removes(api: EmbeddedAPI) -> None:
    api.create(widget())
    assert api.delete(AV, "Widget", "default", "w") is None
    with pytest.raises(NotFound):
        api.get(AV, "Widget", "default", "w")
    with pytest.raises(NotFound):
        api.delete(AV, "Widget", "default", "w")


def test_finalizers_delay_deletion_until_the_last_is_removed(api: EmbeddedAPI) -> None:
    obj = widget()
    obj["metadata"]["finalizers"] = ["a.example.test/one", "a.example.test/two"]
    api.create(obj)
    deleting = api.delete(AV, "Widget", "default", "w")
    assert deleting["metadata"]["deletionTimestamp"] == "2024-05-01T12:00:00Z"
    assert deleting["metadata"]["deletionGracePeriodSeconds"] == 0
    again = api.delete(AV, "Widget", "default", "w")
    assert again == deleting  # second delete writes nothing

    attempt = clone(deleting)
    attempt["metadata"]["finalizers"].append("a.example.test/three")
    with pytest.raises(Invalid, match="no new finalizers"):
        api.replace(attempt)

    cleared = clone(deleting)
    del cleared["metadata"]["deletionTimestamp"]
    cleared["metadata"]["finalizers"] = ["a.example.test/two"]
    kept = api.replace(cleared)
    assert kept["metadata"]["deletionTimestamp"] == "2024-05-01T12:00:00Z"

    watch = api.watch(AV, "Widget", "default", kept["metadata"]["resourceVersion"], timeout=1)
    api.patch(AV, "Widget", "default", "w", {"metadata": {"finalizers": None}})
    with pytest.raises(NotFound):
        api.get(AV, "Widget", "default", "w")
    event = next(watch)
    assert event.type == "DELETED"
    assert "finalizers" not in event.object["metadata"]
    assert event.object["metadata"]["deletionTimestamp"] == "2024-05-01T12:00:00Z"
    assert rv(event.object) == int(api.resource_version)
    watch.stop()


# -- watches -----------------------------------------------------------------------------


def test_watch_from_zero_lists_then_follows(api: EmbeddedAPI) -> None:
    api.create(widget("a"))
    watch = api.watch(AV, "Widget", timeout=2)
    first = next(watch)
    assert first == WatchEvent("ADDED", api.get(AV, "Widget", "default", "a"))
    api.create(widget("b"))
    api.delete(AV, "Widget", "default", "a")
    assert [(e.type, e.object["metadata"]["name"]) for e in (next(watch), next(watch))] == [
        ("ADDED", "b"),
        ("DELETED", "a"),
    ]
    watch.stop()
    assert list(watch) == []


def test_watch_replays_after_resource_version(api: EmbeddedAPI) -> None:
    start = api.create(widget())
    obj = clone(start)
    for size in (2, 3):
        obj["spec"]["size"] = size
        obj = api.replace(obj)
    api.create(widget("other"))
    events = list(
        api.watch(AV, "Widget", "default", start["metadata"]["resourceVersion"], timeout=0.2)
    )
    assert [(e.type, e.object["spec"]["size"]) for e in events] == [
        ("MODIFIED", 2),
        ("MODIFIED", 3),
        ("ADDED", 1),
    ]
    assert [rv(e.object) for e in events] == sorted(rv(e.object) for e in events)


def test_watch_too_old_resource_version_is_gone() -> None:
    api = EmbeddedAPI(watch_window=5)
    api.register(WIDGET)
    first = api.create(widget())
    for size in range(10):
        api.patch(AV, "Widget", "default", "w", {"spec": {"size": size + 2}})
    with pytest.raises(Gone):
        api.watch(AV, "Widget", "default", first["metadata"]["resourceVersion"])
    recent = str(int(api.resource_version) - 3)
    assert len(list(api.watch(AV, "Widget", "default", recent, timeout=0.1))) == 3


def test_slow_watcher_gets_expired_error_event() -> None:
    api = EmbeddedAPI(watch_window=3)
    api.register(WIDGET)
    api.create(widget())
    watch = api.watch(AV, "Widget", "default", api.resource_version, timeout=2)
    for size in range(6):
        api.patch(AV, "Widget", "default", "w", {"spec": {"size": size + 2}})
    events = list(watch)
    assert len(events) == 1
    assert events[0].type == "ERROR"
    assert events[0].object["code"] == 410 and events[0].object["reason"] == "Expired"


def test_watch_filters_namespace_and_labels(api: EmbeddedAPI) -> None:
    api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}})
    start = api.resource_version
    watch = api.watch(AV, "Widget", "default", start, label_selector="team=a", timeout=0.3)
    labelled = widget("x")
    labelled["metadata"]["labels"] = {"team": "a"}
    api.create(labelled)
    api.create(widget("y"))  # not selected
    other_ns = widget("z", namespace="other")
    other_ns["metadata"]["labels"] = {"team": "a"}
    api.create(other_ns)
    api.patch(AV, "Widget", "default", "x", {"metadata": {"labels": {"team": "b"}}})
    api.patch(AV, "Widget", "default", "y", {"metadata": {"labels": {"team": "a"}}})
    seen = [(e.type, e.object["metadata"]["name"]) for e in watch]
    assert seen == [("ADDED", "x"), ("DELETED", "x"), ("ADDED", "y")]


def test_watch_ends_on_drop_and_close(api: EmbeddedAPI) -> None:
    watch = api.watch(AV, "Widget", "default", api.resource_version)
    seen: list[str] = []
    iterating, ended = threading.Event(), threading.Event()

    def consume() -> None:
        for event in watch:
            seen.append(event.type)
            iterating.set()
        ended.set()

    thread = threading.Thread(target=consume)
    thread.start()
    api.create(widget())
    assert iterating.wait(5)  # the consumer is in its loop, waiting for the next event
    assert not ended.is_set()
    api.faults.drop_watches()
    assert ended.wait(5)
    thread.join(5)
    assert seen == ["ADDED"]

    second = api.watch(AV, "Widget")
    api.close()
    assert list(second) == []
    assert list(api.watch(AV, "Widget")) == []


def test_watch_times_out(api: EmbeddedAPI) -> None:
    started = time.monotonic()
    assert list(api.watch(AV, "Widget", timeout=0.1)) == []
    assert time.monotonic() - started >= 0.1


def test_watch_wakes_on_new_event_from_another_thread(api: EmbeddedAPI) -> None:
    watch = api.watch(AV, "Widget", "default", api.resource_version, timeout=5)
    timer = threading.Timer(0.05, lambda: api.create(widget()))
    timer.start()
    started = time.monotonic()
    event = next(watch)
    assert event.type == "ADDED"
    assert time.monotonic() - started < 2
    watch.stop()
    timer.join()


def test_bookmarks() -> None:
    api = EmbeddedAPI(bookmark_interval=0.05)
    api.register(WIDGET)
    watch = api.watch(AV, "Widget", "default", api.resource_version, bookmarks=True, timeout=0.3)
    api.create(widget())
    events = list(watch)
    assert events[0].type == "ADDED"
    bookmarks = [e for e in events if e.type == "BOOKMARK"]
    assert len(bookmarks) >= 2
    assert bookmarks[-1].object == {
        "apiVersion": AV,
        "kind": "Widget",
        "metadata": {"resourceVersion": api.resource_version},
    }
    quiet = list(api.watch(AV, "Widget", "default", api.resource_version, timeout=0.3))
    assert quiet == []  # no bookmarks unless asked


def test_watch_objects_are_copies(api: EmbeddedAPI) -> None:
    api.create(widget())
    event = next(api.watch(AV, "Widget", timeout=1))
    event.object["spec"]["size"] = 100
    assert api.get(AV, "Widget", "default", "w")["spec"] == {"size": 1}
    assert next(api.watch(AV, "Widget", timeout=1)).object["spec"] == {"size": 1}


# -- faults ------------------------------------------------------------------------------


def test_fault_triggers_before_the_write(api: EmbeddedAPI) -> None:
    fault = api.faults.add("create", "Widget", error=ServerError, times=1)
    before = api.resource_version
    with pytest.raises(ServerError, match="injected"):
        api.create(widget())
    assert api.resource_version == before
    assert fault.fired == 1
    api.create(widget())  # times=1: the next call goes through
    with pytest.raises(ValueError):
        api.faults.add("frobnicate")


def test_fault_kind_filter_and_removal(api: EmbeddedAPI) -> None:
    fault = api.faults.add("get", "Widget", error=TooManyRequests("slow down", retry_after=2))
    api.create(widget())
    with pytest.raises(TooManyRequests) as caught:
        api.get(AV, "Widget", "default", "w")
    assert caught.value.retry_after == 2
    api.get("v1", "Namespace", None, "default")  # other kinds unaffected
    api.faults.remove(fault)
    api.get(AV, "Widget", "default", "w")
    api.faults.add("*", error=Conflict("everything conflicts"))
    with pytest.raises(Conflict):
        api.list(AV, "Widget")
    api.faults.clear()
    assert api.list(AV, "Widget")[0]


def test_fault_probability_is_deterministic_with_seed() -> None:
    def pattern(seed: int) -> list[bool]:
        injector = FaultInjector(seed=seed)
        injector.add("get", error=ServerError, probability=0.5)
        out = []
        for _ in range(200):
            try:
                injector.check("get", "Widget")
                out.append(False)
            except ServerError:
                out.append(True)
        return out

    first, second = pattern(3), pattern(3)
    assert first == second
    assert 60 < sum(first) < 140
    assert pattern(4) != first


def test_fault_latency(api: EmbeddedAPI) -> None:
    api.faults.add("list", latency=0.1, times=1)
    started = time.monotonic()
    api.list(AV, "Widget")
    assert time.monotonic() - started >= 0.1


def test_watch_fault_raises_at_open(api: EmbeddedAPI) -> None:
    api.faults.add("watch", "Widget", error=ServerError, times=1)
    with pytest.raises(ServerError):
        api.watch(AV, "Widget")
    api.watch(AV, "Widget", timeout=0).stop()


# -- events ------------------------------------------------------------------------------


def test_record_event_aggregates_identical_events(api: EmbeddedAPI) -> None:
    involved = api.create(widget())
    first = api.record_event(involved, "Normal", "Created", "made it")
    assert first["involvedObject"] == {
        "apiVersion": AV,
        "kind": "Widget",
        "name": "w",
        "namespace": "default",
        "uid": involved["metadata"]["uid"],
        "resourceVersion": involved["metadata"]["resourceVersion"],
    }
    assert (first["count"], first["type"], first["reason"]) == (1, "Normal", "Created")
    assert first["firstTimestamp"] == first["lastTimestamp"] == "2024-05-01T12:00:00Z"
    second = api.record_event(involved, "Normal", "Created", "made it")
    assert second["metadata"]["name"] == first["metadata"]["name"]
    assert second["count"] == 2
    api.record_event(involved, "Warning", "Failed", "boom")
    events, _ = api.list("v1", "Event", "default")
    assert sorted((e["reason"], e["count"]) for e in events) == [("Created", 2), ("Failed", 1)]
    with pytest.raises(Invalid):
        api.record_event(involved, "Bogus", "X", "y")


# -- concurrency ---------------------------------------------------------------------------


def test_concurrent_writers_get_unique_increasing_versions(api: EmbeddedAPI) -> None:
    per_thread: dict[int, list[int]] = {}
    errors: list[BaseException] = []

    def work(index: int) -> None:
        seen = []
        try:
            obj = api.create(widget(f"t{index}"))
            seen.append(rv(obj))
            for size in range(50):
                obj["spec"]["size"] = size + 2
                obj = api.replace(obj)
                seen.append(rv(obj))
                api.get(AV, "Widget", "default", f"t{index}")
        except BaseException as exc:
            errors.append(exc)
        per_thread[index] = seen

    watch = api.watch(AV, "Widget", "default", api.resource_version, timeout=5)
    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    every = [v for seen in per_thread.values() for v in seen]
    assert len(every) == len(set(every)) == 8 * 51
    for seen in per_thread.values():
        assert seen == sorted(seen)
    streamed = []
    for event in watch:
        streamed.append(rv(event.object))
        if len(streamed) == len(every):
            break
    watch.stop()
    assert streamed == sorted(every)
