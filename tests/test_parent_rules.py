"""The parent reconciler, rule by rule (:class:`lifecycle.runtime.children.ParentReconciler`).

A parent ``App`` owns two ConfigMaps. Each pass creates a missing child (owned, in the
parent's namespace, with a ``Created`` Event), leaves a foreign one alone (``NotOwned``),
writes the parent's values back over a child's compared fields (retrying 409s on a fresh
read), reports each child's readiness as ``<Name>Ready`` and the whole as ``Ready``, all
for the parent's generation, writes status only when it changed (retrying 409s, stopping
quietly when the parent is gone) and requeues after ``wait`` or, all Ready, ``ready_poll``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from lifecycle.core.conditions import ConditionStatus
from lifecycle.core.errors import UnhandledError
from lifecycle.core.parents import OwnedChild, ParentKind, Version
from lifecycle.core.values import ResultKind
from lifecycle.kube.errors import AlreadyExists, Conflict, Forbidden, NotFound
from lifecycle.kube.objects import owner_reference
from lifecycle.runtime.children import ParentReconciler, initialize_conditions, resource_types
from lifecycle.sim.apiserver import EmbeddedAPI

T, F, U = ConditionStatus.TRUE, ConditionStatus.FALSE, ConditionStatus.UNKNOWN
GROUP = "apps.example.org"


def child(suffix: str) -> Any:
    def build(app: dict[str, Any]) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": f"{app['metadata']['name']}-{suffix}"},
                "data": {"value": str(app["spec"].get(suffix, ""))}}
    return build


def ready(config: dict[str, Any]) -> ConditionStatus:
    """A child's readiness, as its ``state`` label says (none: pending)."""
    state = (config["metadata"].get("labels") or {}).get("state")
    return {"ready": T, "broken": F}.get(state, U)


def status_of(config: dict[str, Any]) -> dict[str, Any]:
    return {"value": (config.get("data") or {}).get("value")}


KIND = ParentKind(group=GROUP, kind="App", plural="apps", versions=(Version("v1"),),
                  children=(OwnedChild("first", child("first"), compare=("data",),
                                       ready=ready, status=status_of),
                            OwnedChild("second", child("second"), ready=ready)),
                  conditions=("Extra",))


class API:
    """The embedded API, with chosen calls failing and every write counted."""

    def __init__(self) -> None:
        self.api = EmbeddedAPI()
        for rtype in resource_types(KIND):
            self.api.register(rtype)
        self.fail: dict[str, list[Exception]] = {}
        self.calls: list[str] = []
        self.forbidden_kind = ""

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.api, name)
        if name not in ("get", "create", "replace", "replace_status", "record_event"):
            return method

        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls.append(name)
            if name == "get" and args[1] == self.forbidden_kind:
                raise Forbidden(f"{args[1].lower()}s is forbidden")
            if self.fail.get(name):
                raise self.fail[name].pop(0)
            return method(*args, **kwargs)

        return call


@pytest.fixture
def api() -> API:
    return API()


def parent(api: API, **spec: Any) -> dict[str, Any]:
    return api.api.create({"apiVersion": f"{GROUP}/v1", "kind": "App",
                           "metadata": {"name": "shop", "namespace": "team"}, "spec": spec})


def stored(api: API) -> dict[str, Any]:
    return api.api.get(f"{GROUP}/v1", "App", "team", "shop")


def conditions(api: API) -> dict[str, tuple[str, str, str, Any]]:
    return {c["type"]: (c["status"], c["reason"], c.get("message", ""),
                        c.get("observedGeneration"))
            for c in stored(api)["status"]["conditions"]}


def config(api: API, name: str) -> dict[str, Any]:
    return api.api.get("v1", "ConfigMap", "team", name)


def label(api: API, name: str, state: str) -> None:
    found = config(api, name)
    found["metadata"].setdefault("labels", {})["state"] = state
    api.api.replace(found)


def events(api: API) -> list[tuple[str, str, str]]:
    return [(e["type"], e["reason"], e["message"]) for e in api.api.list("v1", "Event")[0]]


@pytest.fixture(autouse=True)
def _namespace(api: API) -> None:
    api.api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}})


def test_missing_children_are_created_owned_in_the_parents_namespace(api: API) -> None:
    made = parent(api, first="a", second="b")
    result = ParentReconciler(api, KIND, wait=3.0, ready_poll=7.0).reconcile("team", "shop")
    assert (result.kind, result.reason, result.after) == (ResultKind.REQUEUE_AFTER, "Waiting",
                                                          3.0)
    for name, value in (("shop-first", "a"), ("shop-second", "b")):
        found = config(api, name)
        assert found["metadata"]["ownerReferences"] == [owner_reference(made)]
        assert found["data"] == {"value": value}
    assert sorted(events(api)) == [("Normal", "Created", "created ConfigMap team/shop-first"),
                                   ("Normal", "Created", "created ConfigMap team/shop-second")]
    assert conditions(api) == {
        "Ready": ("Unknown", "SubresourcesPending", "", 1),
        "FirstReady": ("Unknown", "Created", "created ConfigMap team/shop-first", 1),
        "SecondReady": ("Unknown", "Created", "created ConfigMap team/shop-second", 1),
        "Extra": ("Unknown", "Initializing", "", 1)}
    status = stored(api)["status"]
    assert status["observedGeneration"] == 1
    assert status["subresources"] == {"first": {}, "second": {}}


def test_readiness_of_each_child_and_of_the_whole_for_the_parents_generation(api: API) -> None:
    parent(api, first="a")
    reconciler = ParentReconciler(api, KIND, wait=3.0, ready_poll=7.0)
    reconciler.reconcile("team", "shop")
    body = stored(api)
    body["spec"]["first"] = "changed"
    api.api.replace(body)  # generation 2
    label(api, "shop-first", "ready")
    label(api, "shop-second", "broken")
    reconciler.reconcile("team", "shop")
    got = conditions(api)
    assert got["FirstReady"] == ("True", "Ready", "", 2)
    assert got["SecondReady"] == ("False", "NotReady", "", 2)
    assert got["Ready"] == ("False", "SubresourcesNotReady", "not ready: SecondReady", 2)
    assert stored(api)["status"]["observedGeneration"] == 2
    assert stored(api)["status"]["subresources"] == {"first": {"value": "changed"},
                                                     "second": {}}
    label(api, "shop-second", "pending")
    reconciler.reconcile("team", "shop")
    assert conditions(api)["SecondReady"] == ("Unknown", "Pending", "", 2)
    assert conditions(api)["Ready"] == ("Unknown", "SubresourcesPending", "", 2)
    label(api, "shop-second", "ready")
    result = reconciler.reconcile("team", "shop")
    assert conditions(api)["Ready"] == ("True", "SubresourcesReady", "", 2)
    assert (result.reason, result.after) == ("Poll", 7.0)


def test_the_default_intervals_are_two_seconds_waiting_and_a_minute_ready(api: API) -> None:
    parent(api)
    reconciler = ParentReconciler(api, KIND)
    assert reconciler.reconcile("team", "shop").after == 2.0
    label(api, "shop-first", "ready")
    label(api, "shop-second", "ready")
    assert reconciler.reconcile("team", "shop").after == 60.0


def test_every_failing_child_is_named_in_ready(api: API) -> None:
    parent(api)
    reconciler = ParentReconciler(api, KIND)
    reconciler.reconcile("team", "shop")
    label(api, "shop-first", "broken")
    label(api, "shop-second", "broken")
    reconciler.reconcile("team", "shop")
    assert conditions(api)["Ready"][:3] == ("False", "SubresourcesNotReady",
                                            "not ready: FirstReady, SecondReady")


def test_a_child_that_appears_while_being_created_is_reported_and_no_event_claims_it(
        api: API) -> None:
    parent(api)
    api.fail["create"] = [AlreadyExists("configmaps exists")]
    ParentReconciler(api, KIND).reconcile("team", "shop")
    assert conditions(api)["FirstReady"] == (
        "Unknown", "CreateRaced", "ConfigMap team/shop-first appeared while creating it", 1)
    assert ("Normal", "Created", "created ConfigMap team/shop-first") not in events(api)
    assert "first" not in stored(api)["status"]["subresources"]


def test_a_foreign_child_is_not_owned_and_left_untouched(api: API) -> None:
    foreign = api.api.create({"apiVersion": "v1", "kind": "ConfigMap",
                              "metadata": {"name": "shop-first", "namespace": "team"},
                              "data": {"value": "theirs"}})
    parent(api, first="ours")
    ParentReconciler(api, KIND).reconcile("team", "shop")
    message = "ConfigMap team/shop-first exists and is not owned by App shop; left untouched"
    assert conditions(api)["FirstReady"] == ("False", "NotOwned", message, 1)
    assert ("Warning", "NotOwned", message) in events(api)
    assert config(api, "shop-first") == foreign
    assert "first" not in stored(api)["status"]["subresources"]


def test_drift_is_written_back_over_the_compared_fields_only(api: API) -> None:
    parent(api, first="ours")
    reconciler = ParentReconciler(api, KIND)
    reconciler.reconcile("team", "shop")
    drifted = config(api, "shop-first")
    drifted["data"] = {"value": "hand", "extra": "kept"}
    drifted["metadata"].setdefault("labels", {})["by"] = "hand"
    api.api.replace(drifted)
    reconciler.reconcile("team", "shop")
    after = config(api, "shop-first")
    assert after["data"] == {"value": "ours", "extra": "kept"}
    assert after["metadata"]["labels"] == {"by": "hand"}


def test_a_conflict_while_writing_drift_back_is_retried_on_a_fresh_read(api: API) -> None:
    parent(api, first="ours")
    reconciler = ParentReconciler(api, KIND)
    reconciler.reconcile("team", "shop")
    drifted = config(api, "shop-first")
    drifted["data"] = {"value": "hand"}
    api.api.replace(drifted)
    api.fail["replace"] = [Conflict("stale")]
    api.calls.clear()
    reconciler.reconcile("team", "shop")
    assert config(api, "shop-first")["data"] == {"value": "ours"}
    first_write = api.calls.index("replace")
    assert api.calls[first_write:first_write + 3] == ["replace", "get", "replace"]


def test_drift_that_keeps_conflicting_ends_the_pass_with_the_child_named(api: API) -> None:
    parent(api, first="ours")
    reconciler = ParentReconciler(api, KIND)
    reconciler.reconcile("team", "shop")
    drifted = config(api, "shop-first")
    drifted["data"] = {"value": "hand"}
    api.api.replace(drifted)
    api.fail["replace"] = [Conflict("stale") for _ in range(20)]
    with pytest.raises(UnhandledError) as ended:
        reconciler.reconcile("team", "shop")
    assert str(ended.value).startswith("write of ConfigMap team/shop-first kept conflicting")


def test_status_is_written_only_when_it_changed_and_a_conflict_is_retried(api: API) -> None:
    parent(api)
    reconciler = ParentReconciler(api, KIND)
    reconciler.reconcile("team", "shop")  # created
    reconciler.reconcile("team", "shop")  # pending
    api.calls.clear()
    reconciler.reconcile("team", "shop")
    assert "replace_status" not in api.calls
    label(api, "shop-first", "ready")
    api.fail["replace_status"] = [Conflict("stale")]
    api.calls.clear()
    reconciler.reconcile("team", "shop")
    assert conditions(api)["FirstReady"][:2] == ("True", "Ready")
    assert api.calls.count("replace_status") == 2


def test_a_parent_gone_before_its_status_write_is_retried_ends_quietly(api: API) -> None:
    parent(api)
    reconciler = ParentReconciler(api, KIND)
    original = api.api.replace_status

    def gone(obj: dict[str, Any]) -> Any:
        api.api.delete(f"{GROUP}/v1", "App", "team", "shop")
        raise Conflict("stale")

    api.api.replace_status = gone  # type: ignore[method-assign]
    result = reconciler.reconcile("team", "shop")
    api.api.replace_status = original  # type: ignore[method-assign]
    assert result.reason == "Waiting"
    with pytest.raises(NotFound):
        stored(api)


def test_api_errors_end_the_pass_as_unhandled_and_a_failed_event_does_not(api: API) -> None:
    parent(api)
    api.fail["record_event"] = [Forbidden("events is forbidden")] * 2
    ParentReconciler(api, KIND).reconcile("team", "shop")
    assert conditions(api)["FirstReady"][1] == "Created"  # the pass went on
    api.forbidden_kind = "ConfigMap"
    with pytest.raises(UnhandledError) as ended:
        ParentReconciler(api, KIND).reconcile("team", "shop")
    assert str(ended.value) == ("API error during parent reconcile: configmaps is forbidden")


def test_missing_and_deleting_parents_are_done() -> None:
    api = API()
    assert ParentReconciler(api, KIND).reconcile("team", "absent").reason == "NotFound"


def test_initialize_conditions_adds_only_unset_types_as_unknown_for_the_generation() -> None:
    existing = [{"type": "Ready", "status": "True", "reason": "SubresourcesReady",
                 "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z",
                 "observedGeneration": 1}]
    merged = initialize_conditions(existing, ("Ready", "Extra"), 4, "2026-02-02T00:00:00Z")
    by_type = {c["type"]: c for c in merged}
    assert by_type["Ready"] == existing[0]
    assert by_type["Extra"] == {"type": "Extra", "status": "Unknown", "reason": "Initializing",
                                "message": "", "lastTransitionTime": "2026-02-02T00:00:00Z",
                                "observedGeneration": 4}


def test_resource_types_serve_the_kind_under_its_plural() -> None:
    (rtype,) = resource_types(KIND)
    assert (rtype.group, rtype.version, rtype.kind, rtype.plural, rtype.namespaced) == (
        GROUP, "v1", "App", "apps", True)


def test_conditions_keep_their_transition_times_and_others_values_across_passes(
        api: API) -> None:
    parent(api)
    moments = iter([datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 1, 0, 5, tzinfo=UTC)])
    reconciler = ParentReconciler(api, KIND, clock=lambda: next(moments))
    reconciler.reconcile("team", "shop")
    first = {c["type"]: c for c in stored(api)["status"]["conditions"]}
    assert first["Extra"]["lastTransitionTime"] == "2026-01-01T00:00:00Z"
    # Another controller sets the extra condition; the next pass, five minutes later,
    # keeps it and every unchanged condition's transition time.
    body = stored(api)
    body["status"]["conditions"] = [
        {**c, "status": "True", "reason": "BackedUp"} if c["type"] == "Extra" else c
        for c in body["status"]["conditions"]]
    api.api.replace_status(body)
    reconciler.reconcile("team", "shop")
    after = {c["type"]: c for c in stored(api)["status"]["conditions"]}
    assert (after["Extra"]["status"], after["Extra"]["reason"]) == ("True", "BackedUp")
    assert after["Ready"]["lastTransitionTime"] == "2026-01-01T00:00:00Z"
    assert after["FirstReady"]["lastTransitionTime"] == "2026-01-01T00:00:00Z"


def test_a_cluster_scoped_parent_names_its_cluster_scoped_child_without_a_namespace() -> None:
    def namespace_child(app: dict[str, Any]) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": f"{app['metadata']['name']}-ns"}}

    tenant = ParentKind(group=GROUP, kind="Tenant", plural="tenants",
                        versions=(Version("v1"),), namespaced=False,
                        children=(OwnedChild("space", namespace_child, compare=()),))
    api = EmbeddedAPI()
    for rtype in resource_types(tenant):
        api.register(rtype)
    api.create({"apiVersion": f"{GROUP}/v1", "kind": "Tenant", "metadata": {"name": "acme"},
                "spec": {}})
    ParentReconciler(api, tenant).reconcile(None, "acme")
    made = api.get("v1", "Namespace", None, "acme-ns")
    assert made["metadata"]["ownerReferences"][0]["name"] == "acme"
    obj = api.get(f"{GROUP}/v1", "Tenant", None, "acme")
    space = next(c for c in obj["status"]["conditions"] if c["type"] == "SpaceReady")
    assert (space["reason"], space["message"]) == ("Created", "created Namespace acme-ns")


def test_a_status_write_that_keeps_conflicting_ends_the_pass_named(api: API) -> None:
    parent(api)
    api.fail["replace_status"] = [Conflict("stale") for _ in range(20)]
    with pytest.raises(UnhandledError) as ended:
        ParentReconciler(api, KIND).reconcile("team", "shop")
    assert str(ended.value).startswith("parent status write kept conflicting")
