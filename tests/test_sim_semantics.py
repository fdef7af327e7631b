"""The embedded API behaves like a real API server: dry runs, field selectors,
pagination, garbage collection, namespace deletion, too-new resourceVersions
and malformed objects."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from widgets import AV, FIXED, GADGET, WIDGET  # noqa: F401

from lifecycle.kube.errors import (
    BadRequest,
    Conflict,
    Forbidden,
    Gone,
    Invalid,
    NotFound,
    ResourceVersionTooLarge,
)
from lifecycle.kube.objects import owner_reference
from lifecycle.sim import EmbeddedAPI
from lifecycle.sim.fields import decode_continue, encode_continue, parse_field_selector


def widget(name: str = "w", namespace: str = "default", **meta: Any) -> dict[str, Any]:
    return {"apiVersion": AV, "kind": "Widget",
            "metadata": {"name": name, "namespace": namespace, **meta},
            "spec": {"size": 1}}


def secret(name: str, namespace: str = "default", **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": name, "namespace": namespace, **meta}}


def namespace(api: EmbeddedAPI, name: str) -> dict[str, Any]:
    return api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})


def names(items: list[dict[str, Any]]) -> list[str]:
    return [item["metadata"]["name"] for item in items]


def exists(api: EmbeddedAPI, api_version: str, kind: str, ns: str | None, name: str) -> bool:
    try:
        api.get(api_version, kind, ns, name)
    except NotFound:
        return False
    return True


def drain(stream: Any) -> list[tuple[str, str]]:
    """Every event a watch has ready, as (type, name); the watch has a short timeout."""
    return [(event.type, event.object["metadata"].get("name")) for event in stream]


# -- dry run ---------------------------------------------------------------------------------


def test_dry_run_create_answers_like_a_create_but_stores_nothing(api: EmbeddedAPI) -> None:
    before = api.resource_version
    stream = api.watch(AV, "Widget", resource_version=before, timeout=0.05)
    answer = api.create(widget("") | {"metadata": {"generateName": "w-",
                                                   "namespace": "default"}}, dry_run=True)
    assert answer["metadata"]["name"].startswith("w-") and len(answer["metadata"]["name"]) == 7
    assert answer["metadata"]["uid"] and answer["metadata"]["generation"] == 1
    assert answer["metadata"]["creationTimestamp"] == "2024-05-01T12:00:00Z"
    assert "resourceVersion" not in answer["metadata"]
    assert api.resource_version == before
    assert api.list(AV, "Widget")[0] == []
    assert drain(stream) == []


def test_dry_run_create_fails_as_the_real_write_would(api: EmbeddedAPI) -> None:
    api.create(widget("taken"))
    with pytest.raises(Invalid):
        api.create(widget("Bad_Name"), dry_run=True)
    with pytest.raises(NotFound, match='namespaces "nowhere" not found'):
        api.create(widget("x", namespace="nowhere"), dry_run=True)
    from lifecycle.kube.errors import AlreadyExists
    with pytest.raises(AlreadyExists):
        api.create(widget("taken"), dry_run=True)


def test_dry_run_updates_change_nothing(api: EmbeddedAPI) -> None:
    stored = api.create(widget("w"))
    rv = api.resource_version
    stream = api.watch(AV, "Widget", resource_version=rv, timeout=0.05)
    changed = dict(stored, spec={"size": 9})
    answer = api.replace(changed, dry_run=True)
    assert answer["spec"] == {"size": 9} and answer["metadata"]["generation"] == 2
    assert answer["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]
    status = api.replace_status(dict(stored, status={"phase": "Ready"}), dry_run=True)
    assert status["status"] == {"phase": "Ready"}
    patched = api.patch(AV, "Widget", "default", "w", {"spec": {"size": 3}}, dry_run=True)
    assert patched["spec"] == {"size": 3}
    patched = api.patch(AV, "Widget", "default", "w", {"status": {"x": 1}},
                        subresource="status", dry_run=True)
    assert patched["status"] == {"x": 1}
    assert api.get(AV, "Widget", "default", "w") == stored
    assert api.resource_version == rv
    assert drain(stream) == []
    # the same checks as a real write: a stale resourceVersion is a conflict
    with pytest.raises(Conflict):
        api.replace(dict(changed, metadata=dict(stored["metadata"], resourceVersion="1")),
                    dry_run=True)


def test_dry_run_delete_answers_what_the_object_would_become(api: EmbeddedAPI) -> None:
    plain = api.create(widget("plain"))
    held = api.create(widget("held", finalizers=["example.test/hold"]))
    child = api.create(secret("child", ownerReferences=[owner_reference(plain)]))
    rv = api.resource_version
    assert api.delete(AV, "Widget", "default", "plain", dry_run=True) is None
    answer = api.delete(AV, "Widget", "default", "held", dry_run=True)
    assert answer is not None
    assert answer["metadata"]["deletionTimestamp"] == "2024-05-01T12:00:00Z"
    foreground = api.delete(AV, "Widget", "default", "plain", dry_run=True,
                            propagation_policy="Foreground")
    assert foreground is not None and foreground["metadata"]["finalizers"] == [
        "foregroundDeletion"]
    assert api.get(AV, "Widget", "default", "held") == held
    assert api.get(AV, "Widget", "default", "plain") == plain
    assert api.get("v1", "Secret", "default", "child") == child
    assert api.resource_version == rv
    ns_answer = api.delete("v1", "Namespace", None, "default", dry_run=True)
    assert ns_answer is not None and ns_answer["status"]["phase"] == "Terminating"
    assert api.get("v1", "Namespace", None, "default")["status"]["phase"] == "Active"


# -- field selectors ---------------------------------------------------------------------------


def test_field_selector_on_name_and_namespace(api: EmbeddedAPI) -> None:
    namespace(api, "other")
    for name in ("a", "b", "c"):
        api.create(widget(name))
    api.create(widget("a", namespace="other"))
    assert names(api.list(AV, "Widget", field_selector="metadata.name=b")[0]) == ["b"]
    assert names(api.list(AV, "Widget", field_selector="metadata.name==b")[0]) == ["b"]
    assert names(api.list(AV, "Widget", "default", field_selector="metadata.name!=b")[0]) == [
        "a", "c"]
    found, _ = api.list(AV, "Widget", field_selector="metadata.name=a,metadata.namespace=other")
    assert [(w["metadata"]["namespace"], w["metadata"]["name"]) for w in found] == [("other", "a")]
    assert api.list(AV, "Widget", field_selector="metadata.name=")[0] == []
    assert names(api.list("v1", "Namespace", field_selector="metadata.namespace=")[0]) == [
        "default", "other"]


def test_field_selectors_of_events_secrets_and_namespaces(api: EmbeddedAPI) -> None:
    one, two = api.create(widget("one")), api.create(widget("two"))
    api.record_event(one, "Normal", "Created", "made", component="maker")
    api.record_event(one, "Warning", "Failed", "boom")
    api.record_event(two, "Normal", "Created", "made")

    def reasons(selector: str) -> list[tuple[str, str]]:
        events, _ = api.list("v1", "Event", field_selector=selector)
        return sorted((e["involvedObject"]["name"], e["reason"]) for e in events)

    assert reasons("involvedObject.name=one") == [("one", "Created"), ("one", "Failed")]
    assert reasons(f"involvedObject.uid={two['metadata']['uid']}") == [("two", "Created")]
    assert reasons("involvedObject.kind=Widget,type=Warning") == [("one", "Failed")]
    assert reasons("reason=Created,involvedObject.name!=one") == [("two", "Created")]
    assert reasons("source=maker") == [("one", "Created")]
    assert reasons("reportingComponent=maker") == [("one", "Created")]
    assert reasons(f"involvedObject.apiVersion={AV},involvedObject.namespace=default") == [
        ("one", "Created"), ("one", "Failed"), ("two", "Created")]
    api.create(secret("opaque"))
    api.create(secret("tls") | {"type": "kubernetes.io/tls",
                                "stringData": {"tls.crt": "c", "tls.key": "k"}})
    assert names(api.list("v1", "Secret", field_selector="type=kubernetes.io/tls")[0]) == ["tls"]
    assert names(api.list("v1", "Namespace", field_selector="status.phase=Active")[0]) == [
        "default"]


@pytest.mark.parametrize(
    ("kind", "selector", "message"),
    [
        ("Widget", "spec.size=1", "field label not supported: spec.size"),
        ("Widget", "type=x", "field label not supported: type"),
        ("Widget", "metadata.labels=x", "field label not supported: metadata.labels"),
        ("Widget", "metadata.name = x", "field label not supported: metadata.name "),
        ("Widget", "metadata.name", "invalid selector: 'metadata.name'; can't understand "
                                    "'metadata.name'"),
        ("Widget", "metadata.name=a=b", "invalid field selector: unescaped character in "
                                        "value: ="),
        ("Widget", "metadata.name=a\\x", "invalid field selector: invalid escape sequence"),
    ],
)
def test_field_selector_errors_are_bad_requests(
    api: EmbeddedAPI, kind: str, selector: str, message: str
) -> None:
    for call in (lambda: api.list(AV, kind, field_selector=selector),
                 lambda: api.watch(AV, kind, field_selector=selector),
                 lambda: api.list_page(AV, kind, field_selector=selector)):
        with pytest.raises(BadRequest) as caught:
            call()
        assert caught.value.status == 400 and caught.value.reason == "BadRequest"
        assert str(caught.value).startswith(message)


def test_field_selector_unsupported_on_one_kind_is_fine_on_another(api: EmbeddedAPI) -> None:
    with pytest.raises(BadRequest, match=r"field label not supported: status\.phase"):
        api.list("v1", "Secret", field_selector="status.phase=Active")
    with pytest.raises(BadRequest, match='"type" is not a known field selector'):
        api.list("v1", "ConfigMap", field_selector="type=Opaque")
    assert parse_field_selector("metadata.name=a\\,b").terms[0].value == "a,b"


def test_watch_with_a_field_selector_sees_only_matching_objects(api: EmbeddedAPI) -> None:
    api.create(widget("a"))
    api.create(widget("b"))
    stream = api.watch(AV, "Widget", field_selector="metadata.name=a", timeout=0.1)
    api.patch(AV, "Widget", "default", "b", {"spec": {"size": 2}})
    api.patch(AV, "Widget", "default", "a", {"spec": {"size": 2}})
    api.delete(AV, "Widget", "default", "b")
    api.delete(AV, "Widget", "default", "a")
    assert drain(stream) == [("ADDED", "a"), ("MODIFIED", "a"), ("DELETED", "a")]


def test_watch_field_selector_moves_arrive_as_added_and_deleted(api: EmbeddedAPI) -> None:
    namespace(api, "going")
    api.create(widget("held", namespace="going", finalizers=["example.test/hold"]))
    rv = api.resource_version
    stream = api.watch("v1", "Namespace", resource_version=rv,
                       field_selector="status.phase=Active", timeout=0.1)
    api.delete("v1", "Namespace", None, "going")
    # Active -> Terminating leaves the selection: the watch sees it as a deletion
    assert drain(stream) == [("DELETED", "going")]


# -- pagination --------------------------------------------------------------------------------


def test_pages_are_a_consistent_snapshot(api: EmbeddedAPI) -> None:
    for name in ("a", "b", "c", "d", "e"):
        api.create(widget(name))
    items, rv, token, remaining = api.list_page(AV, "Widget", limit=2)
    assert names(items) == ["a", "b"] and remaining == 3 and token is not None
    assert rv == api.resource_version
    # changes after the first page do not show in the later pages
    api.delete(AV, "Widget", "default", "c")
    api.create(widget("cc"))
    api.patch(AV, "Widget", "default", "d", {"spec": {"size": 7}})
    items, rv2, token, remaining = api.list_page(AV, "Widget", limit=2, continue_token=token)
    assert rv2 == rv and names(items) == ["c", "d"] and remaining == 1
    assert items[1]["spec"] == {"size": 1}
    items, rv3, token, remaining = api.list_page(AV, "Widget", limit=2, continue_token=token)
    assert (names(items), rv3, token, remaining) == (["e"], rv, None, None)
    # a fresh list sees the present
    assert names(api.list_page(AV, "Widget")[0]) == ["a", "b", "cc", "d", "e"]


def test_pages_with_selectors_have_no_remaining_count(api: EmbeddedAPI) -> None:
    for name in ("a", "b", "c", "d"):
        api.create(widget(name) | {"metadata": {"name": name, "namespace": "default",
                                                "labels": {"keep": "yes"}}})
    items, _, token, remaining = api.list_page(AV, "Widget", label_selector="keep=yes",
                                               field_selector="metadata.name!=b", limit=2)
    assert names(items) == ["a", "c"] and token is not None and remaining is None
    items, _, token, remaining = api.list_page(AV, "Widget", label_selector="keep=yes",
                                               field_selector="metadata.name!=b", limit=2,
                                               continue_token=token)
    assert (names(items), token, remaining) == (["d"], None, None)


def test_cluster_scoped_pages(api: EmbeddedAPI) -> None:
    for name in ("g1", "g2", "g3"):
        api.create({"apiVersion": AV, "kind": "Gadget", "metadata": {"name": name}})
    first, _, token, _ = api.list_page(AV, "Gadget", limit=1)
    assert token is not None and decode_continue(token)[1] == (None, "g1")
    rest, _, token, _ = api.list_page(AV, "Gadget", limit=5, continue_token=token)
    assert names(first + rest) == ["g1", "g2", "g3"] and token is None


def test_expired_continue_token_is_gone() -> None:
    api = EmbeddedAPI(watch_window=5)
    api.register(WIDGET)
    for name in ("a", "b", "c"):
        api.create(widget(name))
    _, _, token, _ = api.list_page(AV, "Widget", limit=1)
    assert token is not None
    for size in range(2, 8):
        api.patch(AV, "Widget", "default", "a", {"spec": {"size": size}})
    with pytest.raises(Gone) as caught:
        api.list_page(AV, "Widget", limit=1, continue_token=token)
    assert caught.value.status == 410 and caught.value.reason == "Expired"
    assert str(caught.value).startswith(
        "The provided continue parameter is too old to display a consistent list result.")


def _token(data: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")


@pytest.mark.parametrize(
    ("token", "message"),
    [
        ("not a token!", "invalid continue token: continue key is not valid"),
        (_token([1, 2]), "server does not recognize this encoded version"),
        (_token({"v": "v2", "rv": 1, "start": "a\x00"}),
         "server does not recognize this encoded version"),
        (_token({"v": "meta.k8s.io/v1", "rv": 0, "start": "a\x00"}),
         "incorrect encoded start resourceVersion"),
        (_token({"v": "meta.k8s.io/v1", "rv": 1, "start": ""}), "encoded start key empty"),
        (_token({"v": "meta.k8s.io/v1", "rv": 1, "start": "../../secrets/x\x00"}),
         "continue key is not valid: ../../secrets/x"),
    ],
)
def test_invalid_continue_tokens_are_bad_requests(
    api: EmbeddedAPI, token: str, message: str
) -> None:
    with pytest.raises(BadRequest) as caught:
        api.list_page(AV, "Widget", limit=1, continue_token=token)
    assert caught.value.status == 400 and message in str(caught.value)


def test_continue_token_from_the_future_is_too_large(api: EmbeddedAPI) -> None:
    token = encode_continue(int(api.resource_version) + 10, "default", "a")
    with pytest.raises(ResourceVersionTooLarge):
        api.list_page(AV, "Widget", limit=1, continue_token=token)


def test_list_at_a_resource_version(api: EmbeddedAPI) -> None:
    api.create(widget("a"))
    then = api.resource_version
    api.create(widget("b"))
    items, rv, _, _ = api.list_page(AV, "Widget", resource_version=then,
                                    resource_version_match="Exact")
    assert (names(items), rv) == (["a"], then)
    items, rv, _, _ = api.list_page(AV, "Widget", resource_version=then)
    assert names(items) == ["a", "b"] and rv == api.resource_version
    items, rv, _, _ = api.list_page(AV, "Widget", resource_version=then, limit=5)
    assert (names(items), rv) == (["a"], then)
    items, _, token, _ = api.list_page(AV, "Widget", resource_version="0", limit=1)
    assert names(items) == ["a", "b"] and token is None


def test_list_options_that_do_not_fit_together(api: EmbeddedAPI) -> None:
    with pytest.raises(Invalid) as caught:
        api.list_page(AV, "Widget", resource_version_match="Exact")
    assert str(caught.value) == (
        'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: '
        "resourceVersionMatch is forbidden unless resourceVersion is provided")
    with pytest.raises(Invalid, match="Unsupported value"):
        api.list_page(AV, "Widget", resource_version="1", resource_version_match="Newest")
    with pytest.raises(Invalid, match='forbidden for resourceVersion "0"'):
        api.list_page(AV, "Widget", resource_version="0", resource_version_match="Exact")
    token = encode_continue(1, "default", "a")
    with pytest.raises(BadRequest, match="specifying resource version is not allowed"):
        api.list_page(AV, "Widget", resource_version="1", continue_token=token)
    with pytest.raises(BadRequest):
        api.list_page(AV, "Widget", limit="ten")  # type: ignore[arg-type]


def test_exact_list_older_than_the_history_is_gone() -> None:
    api = EmbeddedAPI(watch_window=3)
    api.register(WIDGET)
    for size in range(1, 6):
        api.create(widget(f"w{size}"))
    with pytest.raises(Gone, match=r"The resourceVersion for the provided list is too old\."):
        api.list_page(AV, "Widget", resource_version="1", resource_version_match="Exact")


# -- resourceVersions never issued -------------------------------------------------------------


def test_watch_and_list_from_the_future_are_too_large(api: EmbeddedAPI) -> None:
    current = int(api.resource_version)
    with pytest.raises(ResourceVersionTooLarge) as caught:
        api.watch(AV, "Widget", resource_version=str(current + 5))
    error = caught.value
    assert (error.status, error.reason) == (504, "Timeout")
    assert str(error) == f"Timeout: Too large resource version: {current + 5}, current: {current}"
    assert error.to_status()["details"]["causes"][0]["reason"] == "ResourceVersionTooLarge"
    with pytest.raises(ResourceVersionTooLarge):
        api.list_page(AV, "Widget", resource_version=str(current + 1))
    # the current version itself is fine
    api.watch(AV, "Widget", resource_version=str(current), timeout=0).stop()


# -- garbage collection ------------------------------------------------------------------------


def test_background_deletion_removes_dependents_after_the_owner(api: EmbeddedAPI) -> None:
    owner = api.create(widget("owner"))
    api.create(secret("conn", ownerReferences=[owner_reference(owner)]))
    api.create({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "cfg", "namespace": "default",
                             "ownerReferences": [owner_reference(owner, controller=False)]}})
    rv = api.resource_version
    secrets = api.watch("v1", "Secret", resource_version=rv, timeout=5)
    widgets = api.watch(AV, "Widget", resource_version=rv, timeout=5)
    assert api.delete(AV, "Widget", "default", "owner") is None
    assert not exists(api, "v1", "Secret", "default", "conn")
    assert not exists(api, "v1", "ConfigMap", "default", "cfg")
    deleted_secret = next(secrets)
    deleted_owner = next(widgets)
    secrets.stop()
    widgets.stop()
    assert deleted_secret.type == deleted_owner.type == "DELETED"
    assert int(deleted_owner.object["metadata"]["resourceVersion"]) < int(
        deleted_secret.object["metadata"]["resourceVersion"])


def test_dependents_with_finalizers_linger(api: EmbeddedAPI) -> None:
    owner = api.create(widget("owner"))
    api.create(secret("conn", ownerReferences=[owner_reference(owner)],
                      finalizers=["example.test/keep"]))
    api.delete(AV, "Widget", "default", "owner")
    conn = api.get("v1", "Secret", "default", "conn")
    assert conn["metadata"]["deletionTimestamp"] == "2024-05-01T12:00:00Z"
    api.patch("v1", "Secret", "default", "conn", {"metadata": {"finalizers": None}})
    assert not exists(api, "v1", "Secret", "default", "conn")


def test_owner_with_finalizers_keeps_dependents_until_it_is_gone(api: EmbeddedAPI) -> None:
    owner = api.create(widget("owner", finalizers=["example.test/cleanup"]))
    api.create(secret("conn", ownerReferences=[owner_reference(owner)]))
    api.delete(AV, "Widget", "default", "owner")
    assert exists(api, "v1", "Secret", "default", "conn")
    api.patch(AV, "Widget", "default", "owner", {"metadata": {"finalizers": None}})
    assert not exists(api, AV, "Widget", "default", "owner")
    assert not exists(api, "v1", "Secret", "default", "conn")


def test_dependent_with_another_owner_only_loses_the_reference(api: EmbeddedAPI) -> None:
    first, second = api.create(widget("first")), api.create(widget("second"))
    api.create(secret("shared", ownerReferences=[
        owner_reference(first), owner_reference(second, controller=False)]))
    api.delete(AV, "Widget", "default", "first")
    shared = api.get("v1", "Secret", "default", "shared")
    assert [ref["name"] for ref in shared["metadata"]["ownerReferences"]] == ["second"]
    api.delete(AV, "Widget", "default", "second")
    assert not exists(api, "v1", "Secret", "default", "shared")


def test_cluster_scoped_owner_of_namespaced_dependents(api: EmbeddedAPI) -> None:
    namespace(api, "other")
    gadget = api.create({"apiVersion": AV, "kind": "Gadget", "metadata": {"name": "g"}})
    api.create(widget("a", ownerReferences=[owner_reference(gadget)]))
    api.create(widget("b", namespace="other", ownerReferences=[owner_reference(gadget)]))
    api.delete(AV, "Gadget", None, "g")
    assert api.list(AV, "Widget")[0] == []


def test_owner_in_another_namespace_is_no_owner(api: EmbeddedAPI) -> None:
    namespace(api, "other")
    owner = api.create(widget("owner"))
    # a namespaced owner must be in the dependent's namespace: this reference is dangling
    api.create(secret("stray", namespace="other", ownerReferences=[owner_reference(owner)]))
    assert not exists(api, "v1", "Secret", "other", "stray")
    # same-named object in the dependent's namespace but another uid: not the owner either
    api.create(widget("owner", namespace="other"))
    api.create(secret("kept", namespace="other", ownerReferences=[
        owner_reference(api.get(AV, "Widget", "other", "owner"))]))
    api.delete(AV, "Widget", "default", "owner")
    assert exists(api, "v1", "Secret", "other", "kept")


def test_reference_to_a_kind_not_served_is_left_alone(api: EmbeddedAPI) -> None:
    api.create(secret("kept", ownerReferences=[{
        "apiVersion": "nowhere.test/v1", "kind": "Thing", "name": "t", "uid": "123"}]))
    assert exists(api, "v1", "Secret", "default", "kept")


def test_foreground_deletion_waits_for_blocking_dependents(api: EmbeddedAPI) -> None:
    owner = api.create(widget("owner"))
    api.create(secret("blocking", ownerReferences=[owner_reference(owner)],
                      finalizers=["example.test/keep"]))
    api.create(secret("loose", ownerReferences=[
        owner_reference(owner, controller=False, block_owner_deletion=False)],
        finalizers=["example.test/keep"]))
    answer = api.delete(AV, "Widget", "default", "owner", propagation_policy="Foreground")
    assert answer is not None
    assert answer["metadata"]["finalizers"] == ["foregroundDeletion"]
    assert answer["metadata"]["deletionTimestamp"]
    for name in ("blocking", "loose"):
        assert api.get("v1", "Secret", "default", name)["metadata"]["deletionTimestamp"]
    # the non-blocking dependent does not hold the owner
    api.patch("v1", "Secret", "default", "loose", {"metadata": {"finalizers": None}})
    assert exists(api, AV, "Widget", "default", "owner")
    api.patch("v1", "Secret", "default", "blocking", {"metadata": {"finalizers": None}})
    assert not exists(api, AV, "Widget", "default", "owner")


def test_foreground_deletion_without_dependents_is_immediate(api: EmbeddedAPI) -> None:
    api.create(widget("alone"))
    assert api.delete(AV, "Widget", "default", "alone", propagation_policy="Foreground") is None
    assert not exists(api, AV, "Widget", "default", "alone")


def test_orphan_deletion_keeps_dependents_without_the_reference(api: EmbeddedAPI) -> None:
    owner = api.create(widget("owner"))
    other = api.create(widget("other"))
    api.create(secret("conn", ownerReferences=[owner_reference(owner),
                                               owner_reference(other, controller=False)]))
    assert api.delete(AV, "Widget", "default", "owner", propagation_policy="Orphan") is None
    conn = api.get("v1", "Secret", "default", "conn")
    assert [ref["name"] for ref in conn["metadata"]["ownerReferences"]] == ["other"]


def test_orphan_with_owner_finalizers_lingers_with_them(api: EmbeddedAPI) -> None:
    owner = api.create(widget("owner", finalizers=["example.test/cleanup"]))
    api.create(secret("conn", ownerReferences=[owner_reference(owner)]))
    answer = api.delete(AV, "Widget", "default", "owner", propagation_policy="Orphan")
    assert answer is not None and answer["metadata"]["finalizers"] == ["example.test/cleanup"]
    assert "ownerReferences" not in api.get("v1", "Secret", "default", "conn")["metadata"]


def test_unknown_propagation_policy_is_invalid(api: EmbeddedAPI) -> None:
    api.create(widget("w"))
    with pytest.raises(Invalid) as caught:
        api.delete(AV, "Widget", "default", "w", propagation_policy="Eventually")
    assert str(caught.value) == (
        'DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: Unsupported value: '
        '"Eventually": supported values: "Foreground", "Background", "Orphan"')
    assert exists(api, AV, "Widget", "default", "w")


def test_chains_cascade(api: EmbeddedAPI) -> None:
    top = api.create(widget("top"))
    middle = api.create(widget("middle", ownerReferences=[owner_reference(top)]))
    api.create(secret("bottom", ownerReferences=[owner_reference(middle)]))
    api.delete(AV, "Widget", "default", "top", propagation_policy="Foreground")
    assert api.list(AV, "Widget")[0] == []
    assert not exists(api, "v1", "Secret", "default", "bottom")


# -- namespaces ---------------------------------------------------------------------------------


def test_new_namespace_has_the_kubernetes_finalizer_and_name_label(api: EmbeddedAPI) -> None:
    ns = namespace(api, "team")
    assert ns["spec"] == {"finalizers": ["kubernetes"]}
    assert ns["metadata"]["labels"] == {"kubernetes.io/metadata.name": "team"}
    assert ns["status"] == {"phase": "Active"}
    ns["spec"] = {"finalizers": []}
    ns["metadata"]["labels"] = {}
    kept = api.replace(ns)
    assert kept["spec"] == {"finalizers": ["kubernetes"]}
    assert kept["metadata"]["labels"] == {"kubernetes.io/metadata.name": "team"}


def test_namespace_deletion_empties_it_then_removes_it(api: EmbeddedAPI) -> None:
    namespace(api, "team")
    api.create(widget("plain", namespace="team"))
    api.create(secret("held", namespace="team", finalizers=["example.test/keep"]))
    api.record_event(api.get(AV, "Widget", "team", "plain"), "Normal", "Made", "x")
    answer = api.delete("v1", "Namespace", None, "team")
    assert answer is not None
    assert answer["status"]["phase"] == "Terminating"
    assert answer["metadata"]["deletionTimestamp"] == "2024-05-01T12:00:00Z"
    assert api.list(AV, "Widget", "team")[0] == []
    assert api.list("v1", "Event", "team")[0] == []
    assert api.get("v1", "Secret", "team", "held")["metadata"]["deletionTimestamp"]
    with pytest.raises(Forbidden) as caught:
        api.create(widget("late", namespace="team"))
    assert caught.value.status == 403
    assert str(caught.value) == (
        'widgets.example.test "late" is forbidden: unable to create new content in namespace '
        "team because it is being terminated")
    api.patch("v1", "Secret", "team", "held", {"metadata": {"finalizers": None}})
    assert not exists(api, "v1", "Namespace", None, "team")


def test_empty_namespace_goes_at_once(api: EmbeddedAPI) -> None:
    namespace(api, "empty")
    rv = api.resource_version
    stream = api.watch("v1", "Namespace", resource_version=rv, timeout=0.05)
    assert api.delete("v1", "Namespace", None, "empty") is None
    assert drain(stream) == [("MODIFIED", "empty"), ("DELETED", "empty")]


# -- malformed objects ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("meta", "message"),
    [
        ("x", "json: cannot unmarshal string into Go struct field Widget.metadata of type "
              "v1.ObjectMeta"),
        ({"name": "w", "namespace": "default", "ownerReferences": "x"},
         "cannot unmarshal string into Go struct field ObjectMeta.metadata.ownerReferences of "
         "type []v1.OwnerReference"),
        ({"name": "w", "namespace": "default", "ownerReferences": ["x"]},
         "cannot unmarshal string into Go struct field ObjectMeta.metadata.ownerReferences of "
         "type v1.OwnerReference"),
        ({"name": "w", "namespace": "default",
          "ownerReferences": [{"apiVersion": "v1", "kind": "Secret", "name": "s", "uid": "u",
                               "controller": "yes"}]},
         "cannot unmarshal string into Go struct field "
         "OwnerReference.metadata.ownerReferences.controller of type bool"),
        ({"name": "w", "namespace": "default", "finalizers": [1]},
         "cannot unmarshal number into Go struct field ObjectMeta.metadata.finalizers of type "
         "string"),
        ({"name": "w", "namespace": "default", "finalizers": "x"},
         "cannot unmarshal string into Go struct field ObjectMeta.metadata.finalizers of type "
         "[]string"),
        ({"name": "w", "namespace": "default", "labels": {"a": 1}},
         "cannot unmarshal number into Go struct field ObjectMeta.metadata.labels of type "
         "string"),
        ({"name": 5, "namespace": "default"},
         "cannot unmarshal number into Go struct field ObjectMeta.metadata.name of type string"),
        ({"name": "w", "namespace": "default", "generation": "1"},
         "cannot unmarshal string into Go struct field ObjectMeta.metadata.generation of type "
         "int64"),
    ],
)
def test_metadata_of_the_wrong_type_is_a_bad_request(
    api: EmbeddedAPI, meta: Any, message: str
) -> None:
    rv = api.resource_version
    body = {"apiVersion": AV, "kind": "Widget", "metadata": meta}
    with pytest.raises(BadRequest) as caught:
        api.create(body)
    assert str(caught.value) == (
        f'Widget in version "v1" cannot be handled as a Widget: {message}'
        if message.startswith("json") else
        f'Widget in version "v1" cannot be handled as a Widget: json: {message}')
    with pytest.raises(BadRequest):
        api.create(body, dry_run=True)
    assert api.resource_version == rv and api.list(AV, "Widget")[0] == []
    # the same through an update and a patch, and nothing changes
    stored = api.create(widget("w"))
    with pytest.raises(BadRequest):
        api.replace(dict(stored, metadata=meta))
    if isinstance(meta, dict):
        with pytest.raises(BadRequest):
            api.patch(AV, "Widget", "default", "w",
                      {"metadata": {k: v for k, v in meta.items() if k != "namespace"}})
    assert api.get(AV, "Widget", "default", "w") == stored


@pytest.mark.parametrize(
    ("refs", "field", "message"),
    [
        # as kube-apiserver words them (tests/test_differential.py compares them)
        ([{"apiVersion": "v1", "kind": "Secret", "name": "s"}],
         "metadata.ownerReferences[0].uid", "Required value: must not be empty"),
        ([{"apiVersion": "", "kind": "Secret", "name": "s", "uid": "u"}],
         "metadata.ownerReferences[0].apiVersion", "Required value: must not be empty"),
        ([{"apiVersion": "v1", "kind": "", "name": "s", "uid": "u"}],
         "metadata.ownerReferences[0].kind", "Required value: must not be empty"),
        ([{"apiVersion": "v1", "kind": "Secret", "uid": "u"}],
         "metadata.ownerReferences[0].name", "Required value: must not be empty"),
        ([{"apiVersion": "v1", "kind": "Secret", "name": "a", "uid": "1", "controller": True},
          {"apiVersion": "v1", "kind": "Secret", "name": "b", "uid": "2", "controller": True}],
         "metadata.ownerReferences", "Invalid value: [{"),
    ],
)
def test_invalid_owner_references(
    api: EmbeddedAPI, refs: list[dict[str, Any]], field: str, message: str
) -> None:
    with pytest.raises(Invalid) as caught:
        api.create(widget("w", ownerReferences=refs))
    cause = caught.value.causes[0]
    assert cause["field"] == field and cause["message"].startswith(message)
    assert caught.value.to_status()["details"]["kind"] == "Widget"
    assert api.list(AV, "Widget")[0] == []


def test_delete_preconditions(api: EmbeddedAPI) -> None:
    stored = api.create(widget("w"))
    with pytest.raises(Conflict) as caught:
        api.delete(AV, "Widget", "default", "w", uid="not-the-uid")
    assert str(caught.value) == (
        'Operation cannot be fulfilled on Widget.example.test "w": the UID in the precondition '
        f"(not-the-uid) does not match the UID in record ({stored['metadata']['uid']}). "
        "The object might have been deleted and then recreated")
    with pytest.raises(Conflict, match=r"the ResourceVersion in the precondition \(1\)"):
        api.delete(AV, "Widget", "default", "w", resource_version="1")
    assert api.delete(AV, "Widget", "default", "w", uid=stored["metadata"]["uid"],
                      resource_version=stored["metadata"]["resourceVersion"]) is None


@pytest.mark.parametrize(("given", "field"), [({"resource_version": 5}, "resourceVersion"),
                                              ({"uid": ["x"]}, "uid")])
def test_preconditions_of_the_wrong_type_are_bad_requests(
    api: EmbeddedAPI, given: dict[str, Any], field: str
) -> None:
    api.create(widget("w"))
    with pytest.raises(BadRequest, match=f"Go struct field Preconditions.preconditions.{field} "):
        api.delete(AV, "Widget", "default", "w", **given)
    assert exists(api, AV, "Widget", "default", "w")


@pytest.mark.parametrize("bad", [{"resourceVersion": 5}, {"uid": 7}, {"namespace": {"x": 1}},
                                 {"name": ["w"]}])
def test_a_status_write_whose_metadata_does_not_decode_is_a_bad_request_first(
    api: EmbeddedAPI, bad: dict[str, Any]
) -> None:
    stored = api.create(widget("w"))
    body = {**stored, "metadata": {**stored["metadata"], **bad}, "status": {"phase": "x"}}
    with pytest.raises(BadRequest) as caught:  # before NotFound, Conflict or Invalid
        api.replace_status(body)
    assert "cannot unmarshal" in str(caught.value)
    missing = {**body, "metadata": {**body["metadata"], "name": "absent"}} if "name" not in bad \
        else body
    with pytest.raises(BadRequest):
        api.replace_status(missing)


def test_a_status_write_of_the_stored_metadata_itself_is_taken(api: EmbeddedAPI) -> None:
    view = api.shared()
    stored = view.create(widget("w"))
    written = view.replace_status({**stored, "status": {"phase": "x"}})
    assert written["status"] == {"phase": "x"}
    assert written["metadata"]["resourceVersion"] != stored["metadata"]["resourceVersion"]
    with pytest.raises(Conflict):  # the stored metadata of an older version: a stale write
        view.replace_status({**stored, "status": {"phase": "y"}})


def test_an_event_is_refused_where_a_create_would_be(api: EmbeddedAPI) -> None:
    namespace(api, "closing")
    involved = api.create(widget("w", namespace="closing", finalizers=["keep"]))
    api.delete("v1", "Namespace", None, "closing")  # terminating while the widget holds on
    with pytest.raises(Forbidden, match="is being terminated"):
        api.record_event(involved, "Normal", "Seen", "in a closing namespace")
    ghost = {**involved, "metadata": {**involved["metadata"], "namespace": "ghost"}}
    with pytest.raises(NotFound, match='namespaces "ghost" not found'):
        api.record_event(ghost, "Normal", "Seen", "in no namespace")
    long_name = {**involved, "metadata": {**involved["metadata"], "namespace": "default",
                                          "name": "x" * 250}}
    with pytest.raises(Invalid, match=r"metadata\.name"):  # the Event's name would be too long
        api.record_event(long_name, "Normal", "Seen", "about a long name")
    fine = api.create(widget("fine"))
    with pytest.raises(Invalid, match="Unsupported value"):
        api.record_event(fine, "Loud", "Seen", "of an unknown type")
    stored = api.record_event(fine, "Normal", "Seen", "once")
    assert stored["metadata"]["uid"] and stored["metadata"]["resourceVersion"]
    assert stored["metadata"]["creationTimestamp"] == stored["firstTimestamp"]
    assert api.get("v1", "Event", "default", stored["metadata"]["name"]) == stored
