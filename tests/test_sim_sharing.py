"""The embedded API's shared view: stored objects handed out without copies, and the
mutation detector that catches a caller changing one."""

from __future__ import annotations

import base64

import pytest

from lifecycle.kube.objects import clone
from lifecycle.kube.sharing import SharedObjectChanged, changed_path, detector_from_env
from lifecycle.sim import EmbeddedAPI


def _secret(name: str = "creds", password: str = "hunter2") -> dict:
    return {"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": name, "namespace": "default", "labels": {"app": "db"}},
            "data": {"password": base64.b64encode(password.encode()).decode()}}


def _config_map(name: str = "settings") -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default"}, "data": {"k": "v"}}


@pytest.fixture
def api() -> EmbeddedAPI:
    return EmbeddedAPI(detect_mutations=True)


def test_the_shared_view_hands_out_the_stored_object_and_the_api_a_copy(api):
    view = api.shared()
    created = view.create(_config_map())
    read = view.get("v1", "ConfigMap", "default", "settings")
    assert read is created  # no copy on the way out
    assert view.list("v1", "ConfigMap", "default")[0][0] is created
    copy = api.get("v1", "ConfigMap", "default", "settings")
    assert copy == created and copy is not created
    copy["data"]["k"] = "changed by a test"  # copies are the caller's own
    assert api.get("v1", "ConfigMap", "default", "settings")["data"] == {"k": "v"}


def test_a_body_written_through_the_view_is_handed_over(api):
    view = api.shared()
    body = _config_map()
    stored = view.create(body)
    # The server fills in its own copy of the object and its metadata ...
    assert stored is not body and stored["metadata"] is not body["metadata"]
    assert "resourceVersion" not in body["metadata"] and "uid" not in body["metadata"]
    # ... and keeps the rest of the body: the caller must not change it any more.
    assert stored["data"] is body["data"]
    body["data"]["k"] = "changed after the write"
    with pytest.raises(SharedObjectChanged) as caught:
        api.get("v1", "ConfigMap", "default", "settings")
    assert "at .data.k" in str(caught.value)


def test_a_replace_through_the_view_stores_a_new_version(api):
    view = api.shared()
    stored = view.create(_config_map())
    updated = view.replace({**stored, "data": {"k": "w"}})
    assert updated["data"] == {"k": "w"} and stored["data"] == {"k": "v"}  # a new version
    assert view.get("v1", "ConfigMap", "default", "settings") is updated
    assert stored["metadata"]["resourceVersion"] != updated["metadata"]["resourceVersion"]
    status = {"phase": "x"}  # kinds without a status subresource keep status in the body
    assert view.replace({**updated, "status": status})["status"] is status


def test_what_is_written_on_the_api_itself_is_copied(api):
    body = _config_map()
    api.create(body)
    body["data"]["k"] = "changed after the write"
    assert api.get("v1", "ConfigMap", "default", "settings")["data"] == {"k": "v"}
    replaced = {**api.get("v1", "ConfigMap", "default", "settings"), "data": {"k": "w"}}
    api.replace(replaced)
    replaced["data"]["k"] = "changed again"
    assert api.shared().get("v1", "ConfigMap", "default", "settings")["data"] == {"k": "w"}


def test_a_change_to_a_shared_object_is_caught_at_the_next_read(api):
    view = api.shared()
    view.create(_config_map())
    read = view.get("v1", "ConfigMap", "default", "settings")
    read["data"]["k"] = "changed in place"
    with pytest.raises(SharedObjectChanged) as caught:
        api.get("v1", "ConfigMap", "default", "settings")
    assert "ConfigMap default/settings" in str(caught.value)
    assert "at .data.k" in str(caught.value)
    assert "clone()" in str(caught.value)


def test_a_change_is_caught_when_the_changed_object_is_written_back(api):
    view = api.shared()
    view.create(_config_map())
    read = view.get("v1", "ConfigMap", "default", "settings")
    read["metadata"]["labels"] = {"edited": "in-place"}
    with pytest.raises(SharedObjectChanged, match=r"at \.metadata\.labels"):
        view.replace(read)


def test_a_change_to_a_replaced_version_is_caught_when_it_is_replaced(api):
    view = api.shared()
    first = view.create(_config_map())
    first["data"]["k"] = "changed"  # then a write that does not read it first
    with pytest.raises(SharedObjectChanged):
        api.delete("v1", "ConfigMap", "default", "settings")


def test_check_shared_finds_a_change_nobody_looked_at_again(api):
    view = api.shared()
    view.create(_config_map("a"))
    b = view.create(_config_map("b"))
    api.check_shared()  # nothing changed yet
    b["data"].pop("k")
    with pytest.raises(SharedObjectChanged, match=r"ConfigMap default/b .* at \.data\.k"):
        api.check_shared()


def test_the_message_names_the_path_never_the_secret_value(api):
    view = api.shared()
    secret = view.create(_secret(password="s3cr3t-value"))
    secret["data"]["password"] = base64.b64encode(b"another-secret").decode()
    with pytest.raises(SharedObjectChanged) as caught:
        api.check_shared()
    text = str(caught.value)
    assert "at .data.password" in text
    for value in ("s3cr3t-value", "another-secret",
                  base64.b64encode(b"s3cr3t-value").decode(),
                  base64.b64encode(b"another-secret").decode()):
        assert value not in text


def test_watches_opened_through_the_view_share_and_others_copy(api):
    view = api.shared()
    stored = view.create(_config_map())
    with view.watch("v1", "ConfigMap", "default", resource_version="1", timeout=0.5) as shared:
        event = next(shared)
    assert event.object is stored
    with api.watch("v1", "ConfigMap", "default", resource_version="1", timeout=0.5) as copied:
        event = next(copied)
    assert event.object == stored and event.object is not stored


def test_a_dry_run_answer_is_a_copy_even_through_the_view(api):
    view = api.shared()
    stored = view.create(_config_map())
    answer = view.replace({**stored, "data": {"k": "dry"}}, dry_run=True)
    answer["data"]["k"] = "changed"  # never stored, so the caller's own
    api.check_shared()
    assert api.get("v1", "ConfigMap", "default", "settings")["data"] == {"k": "v"}


def test_without_the_detector_nothing_is_checked():
    api = EmbeddedAPI(detect_mutations=False)
    view = api.shared()
    view.create(_config_map())
    view.get("v1", "ConfigMap", "default", "settings")["data"]["k"] = "x"
    api.check_shared()  # the detector is off: the caller broke the contract unseen
    assert api.get("v1", "ConfigMap", "default", "settings")["data"] == {"k": "x"}


def test_the_environment_turns_the_detector_on(monkeypatch):
    for value, expected in (("1", True), ("true", True), ("yes", True), ("0", False),
                            ("", False)):
        monkeypatch.setenv("LIFECYCLE_MUTATION_DETECTOR", value)
        assert detector_from_env() is expected
        view = EmbeddedAPI().shared()
        view.create(_config_map())["data"]["k"] = "x"
        if expected:
            with pytest.raises(SharedObjectChanged):
                view.get("v1", "ConfigMap", "default", "settings")
        else:
            view.get("v1", "ConfigMap", "default", "settings")


def test_changed_path_names_the_first_difference():
    base = {"metadata": {"labels": {"a": "1"}}, "spec": {"items": [1, {"x": 2}]}}
    assert changed_path(base, clone(base)) is None
    edited = clone(base)
    edited["spec"]["items"][1]["x"] = 3
    assert changed_path(base, edited) == ".spec.items[1].x"
    edited = clone(base)
    edited["spec"]["items"].append(4)
    assert changed_path(base, edited) == ".spec.items"
    edited = clone(base)
    edited["metadata"]["labels"]["b"] = "2"
    assert changed_path(base, edited) == ".metadata.labels.b"
    assert changed_path(base, {**base, "status": {}}) == ".status"
    assert changed_path(1, "1") == "."


def test_the_harness_engine_reads_through_the_view_and_tests_get_copies():
    from lifecycle.machines.database import DatabaseInstance
    from lifecycle.providers.simcloud import DatabaseConnector, SimCloud
    from lifecycle.testing import Environment

    env = Environment([(DatabaseInstance, DatabaseConnector(SimCloud(seed=0)))])
    env.api.create(_config_map())
    engine = env.operator_api.get("v1", "ConfigMap", "default", "settings")
    assert engine is env.operator_api.get("v1", "ConfigMap", "default", "settings")
    mine = env.api.get("v1", "ConfigMap", "default", "settings")
    mine["data"]["k"] = "a test may change its copy"
    env.api.replace(mine)
    # an engine that changed what it read is caught
    fresh = env.operator_api.get("v1", "ConfigMap", "default", "settings")
    fresh["data"]["k"] = "changed by a broken reconciler"
    with pytest.raises(SharedObjectChanged):
        env.operator_api.replace(fresh)


def test_a_hook_standing_in_for_a_verb_reads_copies(api):
    view = api.shared()
    view.create(_config_map())
    real_replace = api.replace
    seen: list[dict] = []

    def replace(obj: dict) -> dict:  # a test's hook, called by the view in the engine's place
        other = api.get("v1", "ConfigMap", "default", "settings")
        other["data"]["k"] = "the hook's own copy"
        seen.append(other)
        return real_replace(obj)

    api.replace = replace  # type: ignore[method-assign]
    stored = view.get("v1", "ConfigMap", "default", "settings")
    written = view.replace({**stored, "data": {"k": "w"}})
    assert seen and written is view.get("v1", "ConfigMap", "default", "settings")
    api.check_shared()  # the hook changed a copy, never a shared object


def test_lookup_answers_as_get_does_and_none_for_a_missing_object(api):
    created = api.create(_config_map())
    assert api.lookup("v1", "ConfigMap", "default", "settings") == created
    assert api.lookup("v1", "ConfigMap", "default", "absent") is None
    assert api.lookup("v1", "ConfigMap", "other", "settings") is None
    assert api.stats["get"] == 3  # a lookup is a read, counted as one
    view = api.shared()
    assert view.lookup("v1", "ConfigMap", "default", "settings") is (
        view.get("v1", "ConfigMap", "default", "settings"))  # shared, as get is
    copy = api.lookup("v1", "ConfigMap", "default", "settings")
    copy["data"]["k"] = "the caller's own"
    assert api.get("v1", "ConfigMap", "default", "settings")["data"] == {"k": "v"}
