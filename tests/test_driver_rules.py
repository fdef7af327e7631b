"""The driver's pure helpers: the change filter, sharding, redaction, RBAC rules."""

from __future__ import annotations

import copy
import logging
import re
import threading
import urllib.error
import urllib.request
import zlib
from typing import Any

import pytest
from prometheus_client import CONTENT_TYPE_LATEST

from lifecycle.core.kind import OPERATION, PAUSED, RECONCILE_POLICY
from lifecycle.driver.filters import (
    add_triggers,
    is_ignored,
    meta_field,
    one_line,
    redacted_traceback,
    shard_of,
    update_triggers,
)
from lifecycle.driver.leader import LEASE_API, LeaderElector, LeaseOptions
from lifecycle.driver.metrics import OperatorMetrics, ProbeServer
from lifecycle.driver.permissions import (
    CALL_VERBS,
    FINALIZERS_VERB,
    USES,
    lease_rules,
    rules,
    secret_rules,
    verbs_for,
)
from lifecycle.kube.errors import AlreadyExists, Conflict, NotFound, ServerError
from lifecycle.schema.structural import check_crd, check_structural

# --------------------------------------------------------------------------- filters


def test_one_line_collapses_whitespace_and_cuts() -> None:
    assert one_line("  a \n\t b  ") == "a b"
    assert one_line("x" * 300) == "x" * 300
    assert one_line("x" * 301) == "x" * 300 + "..."
    assert one_line("abcdef", limit=3) == "abc..."
    assert one_line("abc", limit=3) == "abc"
    assert one_line(12) == "12"


def obj(generation: Any = 1, deleting: Any = None, **annotations: str) -> dict[str, Any]:
    """An object with the metadata the change filter reads."""
    meta: dict[str, Any] = {"generation": generation, "annotations": annotations}
    if deleting is not None:
        meta["deletionTimestamp"] = deleting
    return {"metadata": meta}


def test_meta_field_and_ignored() -> None:
    assert meta_field(obj(3), "generation") == 3
    assert meta_field({}, "generation") is None
    assert meta_field({"metadata": "x"}, "generation") is None
    assert is_ignored(obj(**{OPERATION: "ignore"}))
    assert not is_ignored(obj(**{OPERATION: "reconcile"})) and not is_ignored(obj())
    assert add_triggers(obj()) and not add_triggers(obj(**{OPERATION: "ignore"}))


@pytest.mark.parametrize(("old", "new", "triggers"), [
    (obj(1), obj(1), False),
    (obj(1), obj(2), True),
    (obj(1), obj(1, deleting="t"), True),
    (obj(1, deleting="t"), obj(1, deleting="t"), False),
    (obj(1), obj(1, **{OPERATION: "reconcile"}), True),
    (obj(1, **{OPERATION: "reconcile"}), obj(1, **{OPERATION: "reconcile"}), False),
    (obj(1, **{OPERATION: "ignore"}), obj(1), True),
    (obj(1, **{OPERATION: "ignore"}), obj(1, **{OPERATION: "other"}), True),
    (obj(1), obj(2, **{OPERATION: "ignore"}), False),
    (obj(1), obj(1, **{PAUSED: "true"}), True),
    (obj(1, **{PAUSED: "true"}), obj(1), True),
    (obj(1), obj(1, **{RECONCILE_POLICY: "skip"}), True),
    (obj(1, **{RECONCILE_POLICY: "skip"}), obj(1, **{RECONCILE_POLICY: "skip"}), False),
    (obj(1), obj(1, other="x"), False),
    (obj(1), obj(1, **{OPERATION: "other"}), False),
])
def test_update_triggers(old: dict, new: dict, triggers: bool) -> None:
    assert update_triggers(old, new) is triggers


def test_shard_of_is_a_stable_crc_of_namespace_and_name() -> None:
    assert shard_of(("ns", "a"), 7) == zlib.crc32(b"ns/a") % 7
    assert shard_of((None, "a"), 7) == zlib.crc32(b"/a") % 7
    assert shard_of(("", "a"), 5) == shard_of((None, "a"), 5)
    assert {shard_of(("ns", str(i)), 4) for i in range(100)} == {0, 1, 2, 3}
    assert shard_of(("ns", "a"), 1) == 0


def _raise_secret() -> None:
    raise ValueError("password=hunter2")


def test_redacted_traceback_names_code_locations_only_innermost_first() -> None:
    try:
        _raise_secret()
    except ValueError as exc:
        text = redacted_traceback(exc)
    assert "hunter2" not in text
    assert text.startswith("ValueError at test_driver_rules.py:")
    inner, outer = text.split(" at ", 1)[1].split(" <- ")
    assert inner.endswith(" in _raise_secret")
    assert outer.endswith(" in test_redacted_traceback_names_code_locations_only_innermost_first")
    assert redacted_traceback(ValueError("x")) == "ValueError"


def test_redacted_traceback_keeps_the_innermost_frames_up_to_the_limit() -> None:
    def nest(depth: int) -> None:
        if depth == 0:
            raise KeyError("secret")
        nest(depth - 1)

    try:
        nest(20)
    except KeyError as exc:
        error = exc
    assert redacted_traceback(error).count(" <- ") == 11
    assert redacted_traceback(error, limit=3).count(" <- ") == 2
    assert " in nest" in redacted_traceback(error, limit=1)
    assert "<-" not in redacted_traceback(error, limit=1)


# --------------------------------------------------------------------------- RBAC rules


def test_verbs_for_collects_every_method_s_verbs_by_subresource() -> None:
    for use, methods in USES.items():
        expected: dict[str, set[str]] = {}
        for method in methods:
            for sub, verb in CALL_VERBS[method]:
                expected.setdefault(sub, set()).add(verb)
        found = verbs_for(use)
        assert list(found) == sorted(expected)
        assert found == {sub: sorted(verbs) for sub, verbs in expected.items()}
    assert verbs_for("events") == {"": ["create", "patch"]}


def _rule(group: str, resources: list[str], use: str, sub: str = "") -> dict[str, Any]:
    return {"apiGroups": [group], "resources": resources, "verbs": verbs_for(use)[sub]}


def test_rules_group_kinds_classes_children_and_provider_configs() -> None:
    kinds = [("g.io", "things"), ("g.io", "apples"), ("a.io", "x"), ("a.io", "y")]
    found = rules(kinds, [("c.io", "classes")],
                  children=[("k.io", "kids"), ("g.io", "things"), ("", "secrets")],
                  provisioned=[("a.io", "y")],
                  provider_config_groups=("p.io", "lifecycle.dev", "p.io"))
    run, child, claimed = (set(verbs_for(u)[""]) for u in ("kind", "children", "provisioned"))
    assert "create" not in run and "delete" not in run  # nothing creates a kind only run
    expected = [
        {"apiGroups": ["a.io"], "resources": ["x"], "verbs": sorted(run)},
        {"apiGroups": ["a.io"], "resources": ["y"], "verbs": sorted(run | claimed)},
        _rule("a.io", ["x/status", "y/status"], "kind", "status"),
        {"apiGroups": ["a.io"], "resources": ["x/finalizers", "y/finalizers"],
         "verbs": [FINALIZERS_VERB]},
        {"apiGroups": ["g.io"], "resources": ["apples"], "verbs": sorted(run)},
        {"apiGroups": ["g.io"], "resources": ["things"], "verbs": sorted(run | child)},
        _rule("g.io", ["apples/status", "things/status"], "kind", "status"),
        {"apiGroups": ["g.io"], "resources": ["apples/finalizers", "things/finalizers"],
         "verbs": [FINALIZERS_VERB]},
        _rule("k.io", ["kids"], "children"),
        _rule("c.io", ["classes"], "class"),
        _rule("lifecycle.dev", ["providerconfigs"], "providerconfigs"),
        _rule("lifecycle.dev", ["providerconfigs/status"], "providerconfigs", "status"),
        _rule("p.io", ["providerconfigs"], "providerconfigs"),
        _rule("p.io", ["providerconfigs/status"], "providerconfigs", "status"),
        _rule("", ["namespaces"], "namespaces"),
        _rule("", ["events"], "events"),
        *secret_rules(),
    ]
    assert found == expected
    assert FINALIZERS_VERB == "update"


def test_rules_without_secrets_and_the_separate_roles() -> None:
    assert rules([], secrets=False) == [
        _rule("lifecycle.dev", ["providerconfigs"], "providerconfigs"),
        _rule("lifecycle.dev", ["providerconfigs/status"], "providerconfigs", "status"),
        _rule("", ["namespaces"], "namespaces"),
        _rule("", ["events"], "events"),
    ]
    assert rules([])[-len(secret_rules()):] == secret_rules()
    assert secret_rules() == [_rule("", ["secrets"], "secrets")]
    assert lease_rules() == [_rule("coordination.k8s.io", ["leases"], "leases")]


# --------------------------------------------------------------------------- structural schemas


def crd_doc(schema: Any = None, **spec: Any) -> dict[str, Any]:
    """A valid CRD document, with ``spec`` fields replaced."""
    version = {"name": "v1", "served": True, "storage": True,
               "schema": {"openAPIV3Schema": schema or {"type": "object"}}}
    body: dict[str, Any] = {"group": "g.io", "names": {"plural": "things", "kind": "Thing"},
                            "scope": "Namespaced", "versions": [version]}
    body.update(spec)
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "things.g.io"}, "spec": body}


def test_junctor_branches_must_restate_fields_and_items_specified_outside() -> None:
    spec = {"type": "object",
            "properties": {"a": {"type": "string"},
                           "l": {"type": "array", "items": {
                               "type": "object", "properties": {"x": {"type": "string"}}}}},
            "anyOf": [{"properties": {"a": {"minLength": 1}}},
                      {"properties": {"b": {"minLength": 1}}},
                      {"properties": {"l": {"items": {"properties": {"x": {"minLength": 1},
                                                                     "y": {}}}}}},
                      {"properties": {"a": {"items": {}}}},
                      "not-a-branch"]}
    where = "openAPIV3Schema.properties[spec].anyOf"
    problems = check_structural({"type": "object", "properties": {"spec": spec}})
    covered = [p for p in problems if "outside the logical junctor" in p]
    assert covered == [
        f"{where}[1].properties[b]: must be specified outside the logical junctor too",
        f"{where}[2].properties[l].items.properties[y]: must be specified outside the "
        "logical junctor too",
        f"{where}[3].properties[a].items: must be specified outside the logical junctor too",
    ]
    fine = {"type": "object", "properties": {"a": {"type": "string"}},
            "oneOf": [{"properties": {"a": {"minLength": 1}}}]}
    assert check_structural(fine) == []


def test_metadata_may_restrict_only_name_and_generate_name() -> None:
    allowed = {"type": "object",
               "properties": {"name": {"type": "string", "maxLength": 5},
                              "generateName": {"type": "string"}}}
    schema = {"type": "object", "properties": {"metadata": allowed}}
    assert check_structural(schema) == []
    where = "openAPIV3Schema.properties[metadata]"
    # Not even a description (kube-apiserver v1.37 refuses one there).
    described = {"type": "object", "properties": {"metadata": {**allowed, "description": "d"}}}
    assert check_structural(described) == [
        f"{where}.description: only restrictions on name and generateName are allowed in "
        "metadata"]
    bad = {"type": "object", "required": ["name"],
           "properties": {"labels": {"type": "object"}}}
    problems = check_structural({"type": "object", "properties": {"metadata": bad}})
    assert problems == [
        f"{where}.required: only restrictions on name and generateName are allowed in metadata",
        f"{where}.properties[labels]: only name and generateName may be restricted in metadata",
    ]
    # Only the root's metadata is special.
    nested = {"type": "object", "properties": {"spec": {"type": "object",
                                                         "properties": {"metadata": bad}}}}
    assert check_structural(nested) == []


def test_a_null_default_needs_nullable_wherever_it_is() -> None:
    root = "spec.versions[0].schema.openAPIV3Schema"
    schema = {"type": "object", "properties": {
        "a": {"type": "string", "default": None},
        "b": {"type": "string", "default": None, "nullable": True},
        "l": {"type": "array", "items": {"type": "string", "default": None}},
        "m": {"type": "object", "additionalProperties": {"type": "string", "default": None}},
        "c": {"type": "string", "default": "x"}}}
    assert check_crd(crd_doc(schema)) == [
        f"{root}.properties[a].default: null default needs nullable: true",
        f"{root}.properties[l].items.default: null default needs nullable: true",
        f"{root}.properties[m].additionalProperties.default: null default needs nullable: true",
    ]


def test_check_crd_accepts_a_valid_document_and_names_each_problem() -> None:
    assert check_crd(crd_doc()) == []
    assert check_crd(crd_doc(scope="Cluster")) == []
    assert check_crd([]) == ["document: must be a mapping"]
    assert check_crd({"apiVersion": "v1", "kind": "X"}) == [
        "apiVersion: must be apiextensions.k8s.io/v1", "kind: must be CustomResourceDefinition",
        "spec: Required value"]
    bad = crd_doc(group="nodot", names={"plural": "Things"}, scope="Global", versions=[
        {"name": "v1", "storage": True, "schema": {"openAPIV3Schema": {"type": "object"}},
         "subresources": {"status": {}, "other": {}},
         "additionalPrinterColumns": [{"name": "Age", "jsonPath": ".x", "type": "date"},
                                      {"name": "Bad", "jsonPath": ".y", "type": "time"}]},
        {"name": "", "storage": True},
        "v3"])
    assert check_crd(bad) == [
        "spec.group: Invalid value 'nodot': a DNS subdomain with a dot",
        "spec.names.kind: Required value",
        "spec.names.plural: Invalid value 'Things'",
        "metadata.name: must be spec.names.plural+'.'+spec.group (Things.nodot), "
        "got 'things.g.io'",
        "spec.scope: must be Namespaced or Cluster",
        "spec.versions: exactly one version must be the storage version",
        "spec.versions[0].subresources: only status and scale are allowed",
        "spec.versions[0].additionalPrinterColumns: invalid column "
        "{'name': 'Bad', 'jsonPath': '.y', 'type': 'time'}",
        "spec.versions[1].name: Required value",
        "spec.versions[1].schema.openAPIV3Schema: Required value",
        "spec.versions[2]: must be a mapping",
    ]
    assert check_crd(crd_doc(versions=[])) == ["spec.versions: must have at least one version"]
    assert check_crd(crd_doc(names={})) == [
        "spec.names.plural: Required value", "spec.names.kind: Required value",
        "metadata.name: must be spec.names.plural+'.'+spec.group (.g.io), got 'things.g.io'"]


# --------------------------------------------------------------------------- metrics


HELP = {
    "controller_runtime_reconcile_total": ("counter",
                                           "Total number of reconciliations per controller"),
    "controller_runtime_reconcile_errors_total": (
        "counter", "Total number of reconciliation errors per controller"),
    "controller_runtime_reconcile_time_seconds": (
        "histogram", "Length of time per reconciliation per controller"),
    "controller_runtime_active_workers": (
        "gauge", "Number of currently used workers per controller"),
    "controller_runtime_max_concurrent_reconciles": (
        "gauge", "Maximum number of concurrent reconciles per controller"),
    "workqueue_depth": ("gauge", "Current depth of workqueue"),
    "workqueue_adds_total": ("counter", "Total number of adds handled by workqueue"),
    "workqueue_retries_total": ("counter", "Total number of retries handled by workqueue"),
    "workqueue_queue_duration_seconds": (
        "histogram", "How long in seconds an item stays in workqueue before being requested"),
    "workqueue_work_duration_seconds": (
        "histogram", "How long in seconds processing an item from workqueue takes"),
    "workqueue_unfinished_work_seconds": (
        "gauge", "How many seconds of work has been done that is in progress"),
    "workqueue_longest_running_processor_seconds": (
        "gauge", "How many seconds has the longest running processor for workqueue been running"),
    "leader_election_master_status": (
        "gauge", "Whether this replica is the leader (1) or not (0)"),
    "lifecycle_resources": ("gauge", "Objects per kind and lifecycle machine state"),
    "lifecycle_stuck_resources": (
        "gauge", "Objects held in a state longer than its maximum time"),
    "lifecycle_watch_relists_total": ("counter", "Re-lists after a watch expired (410 Gone)"),
    "lifecycle_watch_errors_total": ("counter", "Failed list or watch requests"),
}


class _Queue:
    def __len__(self) -> int:
        return 3

    def in_flight(self) -> dict[str, float]:
        return {"a": 1.5, "b": 4.0}


class _Stats:
    relists_after_gone = 2
    errors = 5


class _Informer:
    stats = _Stats()

    def __init__(self, items: list[Any]) -> None:
        self._items = items

    def items(self) -> list[Any]:
        return self._items


def _metrics_text(metrics: OperatorMetrics) -> str:
    return metrics.render().decode()


def test_every_metric_is_exposed_with_controller_runtime_s_name_type_and_help() -> None:
    metrics = OperatorMetrics()
    metrics.controller("db", 4)
    metrics.watch_queue("db", _Queue())
    metrics.leader.labels(name="lease").set(1)
    metrics.watch_informer("thing", _Informer([]))
    text = _metrics_text(metrics)
    for name, (kind, help_) in HELP.items():
        assert f"# HELP {name} {help_}\n" in text, name
        assert f"# TYPE {name} {kind}\n" in text, name


def test_a_controller_s_series_exist_at_zero_and_count_each_result() -> None:
    metrics = OperatorMetrics()
    metrics.controller("db", 4)
    value = metrics.registry.get_sample_value
    assert value("controller_runtime_max_concurrent_reconciles", {"controller": "db"}) == 4
    assert value("controller_runtime_active_workers", {"controller": "db"}) == 0
    for result in ("success", "error", "requeue", "requeue_after"):
        assert value("controller_runtime_reconcile_total",
                     {"controller": "db", "result": result}) == 0
    assert value("controller_runtime_reconcile_errors_total", {"controller": "db"}) == 0
    metrics.reconciled("db", "success", 0.02)
    assert value("controller_runtime_reconcile_errors_total", {"controller": "db"}) == 0
    metrics.reconciled("db", "error", 0.3)
    assert value("controller_runtime_reconcile_total",
                 {"controller": "db", "result": "error"}) == 1
    assert value("controller_runtime_reconcile_total",
                 {"controller": "db", "result": "success"}) == 1
    assert value("controller_runtime_reconcile_errors_total", {"controller": "db"}) == 1
    assert value("controller_runtime_reconcile_time_seconds_count", {"controller": "db"}) == 2
    assert value("controller_runtime_reconcile_time_seconds_sum", {"controller": "db"}) == 0.32
    assert value("controller_runtime_reconcile_time_seconds_bucket",
                 {"controller": "db", "le": "0.025"}) == 1
    assert value("controller_runtime_reconcile_time_seconds_bucket",
                 {"controller": "db", "le": "60.0"}) == 2
    buckets = [s.labels["le"] for s in metrics.reconcile_time.collect()[0].samples
               if s.name.endswith("_bucket")]
    assert (buckets[0], buckets[-2], len(buckets)) == ("0.005", "60.0", 41)


def test_a_watched_queue_exports_its_depth_in_flight_work_adds_and_retries() -> None:
    metrics = OperatorMetrics()
    metrics.watch_queue("q", _Queue())
    value = metrics.registry.get_sample_value
    assert value("workqueue_depth", {"name": "q"}) == 3
    assert value("workqueue_unfinished_work_seconds", {"name": "q"}) == 5.5
    assert value("workqueue_longest_running_processor_seconds", {"name": "q"}) == 4.0
    assert value("workqueue_adds_total", {"name": "q"}) == 0
    assert value("workqueue_retries_total", {"name": "q"}) == 0
    metrics.queue_added("q")
    metrics.queue_added("q")
    metrics.queue_retried("q")
    metrics.queue_started("q", 0.5)
    metrics.queue_finished("q", 2.0)
    assert value("workqueue_adds_total", {"name": "q"}) == 2
    assert value("workqueue_retries_total", {"name": "q"}) == 1
    assert value("workqueue_queue_duration_seconds_sum", {"name": "q"}) == 0.5
    assert value("workqueue_queue_duration_seconds_bucket", {"name": "q", "le": "1.0"}) == 1
    assert value("workqueue_queue_duration_seconds_bucket", {"name": "q", "le": "0.1"}) == 0
    assert value("workqueue_queue_duration_seconds_bucket", {"name": "q", "le": "1e-08"}) == 0
    assert value("workqueue_work_duration_seconds_sum", {"name": "q"}) == 2.0
    assert value("workqueue_work_duration_seconds_bucket", {"name": "q", "le": "1e-08"}) == 0
    assert value("workqueue_work_duration_seconds_bucket", {"name": "q", "le": "10.0"}) == 1
    idle = OperatorMetrics()

    class Empty(_Queue):
        def in_flight(self) -> dict[str, float]:
            return {}

    idle.watch_queue("q", Empty())
    assert idle.registry.get_sample_value("workqueue_longest_running_processor_seconds",
                                          {"name": "q"}) == 0.0


def test_informer_gauges_count_states_and_stuck_objects_per_kind() -> None:
    def obj(state: Any, *conditions: Any) -> dict[str, Any]:
        return {"status": {"state": state, "conditions": list(conditions)}}

    stuck = {"type": "Stuck", "status": "True"}
    metrics = OperatorMetrics()
    metrics.watch_informer("b", _Informer([obj("ready"), obj(None, stuck)]))
    metrics.watch_informer("a", _Informer([
        obj("creating", stuck), obj("creating", stuck),
        obj("creating", {"type": "Stuck", "status": "False"}),
        obj("creating", {"type": "Ready", "status": "True"}, "junk"), {"status": "x"},
        {"status": {"state": "ready", "conditions": "junk"}}]))
    assert [k for k, _ in metrics.informers()] == ["b", "a"]
    value = metrics.registry.get_sample_value
    assert value("lifecycle_resources", {"kind": "a", "state": "creating"}) == 4
    assert value("lifecycle_resources", {"kind": "a", "state": "unknown"}) == 1
    assert value("lifecycle_resources", {"kind": "a", "state": "ready"}) == 1
    assert value("lifecycle_resources", {"kind": "b", "state": "unknown"}) == 1
    assert value("lifecycle_stuck_resources", {"kind": "a", "state": "creating"}) == 2
    assert value("lifecycle_stuck_resources", {"kind": "b", "state": "unknown"}) == 1
    assert value("lifecycle_stuck_resources", {"kind": "b", "state": "ready"}) is None
    assert value("lifecycle_watch_relists_total", {"kind": "a"}) == 2
    assert value("lifecycle_watch_errors_total", {"kind": "b"}) == 5
    text = _metrics_text(metrics)
    assert text.index('lifecycle_resources{kind="a",state="creating"}') < text.index(
        'lifecycle_resources{kind="a",state="ready"}') < text.index(
        'lifecycle_resources{kind="a",state="unknown"}')


def test_the_probe_server_answers_each_path(caplog: pytest.LogCaptureFixture) -> None:
    state = {"healthy": True, "ready": False}

    def ready() -> bool:
        if state["ready"] is None:
            raise RuntimeError("secret detail")
        return bool(state["ready"])

    metrics = OperatorMetrics()
    metrics.controller("db", 1)
    caplog.set_level(logging.DEBUG, logger="lifecycle.driver.metrics")
    server = ProbeServer(metrics, healthy=lambda: state["healthy"], ready=ready).start()
    try:
        assert server.url.startswith("http://127.0.0.1:")
        assert int(server.url.rsplit(":", 1)[1]) > 1023  # a free port chosen by the system
        assert any(t.name == "probes" and t.daemon for t in threading.enumerate())

        def get(path: str) -> tuple[int, str, str]:
            try:
                with urllib.request.urlopen(server.url + path, timeout=10) as answer:
                    body = answer.read()
                    assert answer.headers["Content-Length"] == str(len(body))
                    return answer.status, answer.headers["Content-Type"], body.decode()
            except urllib.error.HTTPError as error:
                return error.code, error.headers["Content-Type"], error.read().decode()

        status, kind, body = get("/metrics?x=1")
        assert (status, kind) == (200, CONTENT_TYPE_LATEST)
        assert "controller_runtime_max_concurrent_reconciles" in body
        plain = "text/plain; charset=utf-8"
        assert get("/healthz") == (200, plain, "ok")
        assert get("/livez") == (200, plain, "ok")
        assert get("/readyz") == (500, plain, "not ready")
        assert get("/nowhere") == (404, plain, "not found")
        state.update(healthy=False, ready=True)
        assert get("/healthz") == (500, plain, "unhealthy")
        assert get("/readyz") == (200, plain, "ok")
        state["ready"] = None
        assert get("/readyz") == (500, plain, "probe failed: RuntimeError")
        logged = [r.getMessage() for r in caplog.records if r.name == "lifecycle.driver.metrics"]
        assert any('"GET /healthz HTTP/1.1" 200' in m for m in logged)
    finally:
        server.stop()


def test_check_structural_names_every_problem_at_its_path() -> None:
    schema = {"type": "object", "properties": {
        "a": {}, "b": {"type": ""}, "c": {"type": "thing"},
        "d": {"x-kubernetes-int-or-string": True},
        "e": {"x-kubernetes-preserve-unknown-fields": True},
        "f": {"x-kubernetes-int-or-string": False},
        "g": {"type": "object", "properties": ["x"]},
        "h": {"type": "object", "additionalProperties": {"description": "untyped"}},
        "i": {"type": "array", "items": {"type": "bogus"}},
        "j": {"type": "object", "properties": {"k": {"type": "string"}},
              "not": {"properties": {"k": {"type": "string"}}}},
        "l": {"type": "object", "allOf": {"x": 1},
              "anyOf": [{"description": "d", "properties": {"q": {"default": 1}}}]},
        "m": {"type": "object", "properties": {}, "additionalProperties": {"type": "string"}},
        "n": {"type": "string", "bogusKey": 1}}}
    p = "openAPIV3Schema.properties"
    required = "type: Required value: must not be empty for specified field"
    inside = "must not be set inside allOf/anyOf/oneOf/not"
    assert check_structural(schema) == [
        f"{p}[a].{required}",
        f"{p}[b].{required}",
        f"{p}[c].type: Unsupported value 'thing'",
        f"{p}[f].{required}",
        f"{p}[g].properties: must be an object",
        f"{p}[h].additionalProperties.{required}",
        f"{p}[i].items.type: Unsupported value 'bogus'",
        f"{p}[j].not[0].properties[k].type: {inside}",
        f"{p}[l].allOf: must be a list",
        f"{p}[l].anyOf[0].description: {inside}",
        f"{p}[l].anyOf[0].properties[q].default: {inside}",
        f"{p}[l].anyOf[0].properties[q]: must be specified outside the logical junctor too",
        f"{p}[m]: properties and additionalProperties are mutually exclusive",
        f"{p}[n].bogusKey: not allowed in apiextensions.k8s.io/v1 schemas",
    ]
    assert check_structural({"type": "string"}) == [
        "openAPIV3Schema.type: must be object at the root"]
    assert check_structural({}) == [
        "openAPIV3Schema.type: Required value: must not be empty for specified root"]
    assert check_structural([]) == ["openAPIV3Schema: must be an object"]
    assert check_structural({"type": "object"}, "here") == []
    assert check_structural({"type": "string"}, "here") == [
        "here.type: must be object at the root"]


def test_check_crd_accepts_the_scale_subresource_and_every_column_type() -> None:
    columns = [{"name": t, "jsonPath": f".{t}", "type": t}
               for t in ("string", "integer", "number", "boolean", "date")]
    doc = crd_doc()
    doc["spec"]["versions"][0].update(subresources={"status": {}, "scale": {}},
                                      additionalPrinterColumns=columns)
    assert check_crd(doc) == []
    for column in ({"name": "A", "type": "string"}, {"jsonPath": ".a", "type": "string"}):
        doc["spec"]["versions"][0]["additionalPrinterColumns"] = [column]
        assert check_crd(doc) == [
            f"spec.versions[0].additionalPrinterColumns: invalid column {column!r}"]
    missing = crd_doc()
    del missing["spec"]["group"]
    assert check_crd(missing)[0] == "spec.group: Invalid value '': a DNS subdomain with a dot"
    two = crd_doc(versions=["v0", {"name": "v1", "storage": True,
                                   "schema": {"openAPIV3Schema": {"type": "string"}}}])
    assert check_crd(two) == [
        "spec.versions[0]: must be a mapping",
        "spec.versions[1].schema.openAPIV3Schema.type: must be object at the root"]


# --------------------------------------------------------------------------- leader election


class LeaseStore:
    """An in-memory Lease API (with resourceVersion conflicts) whose next calls can fail."""

    def __init__(self) -> None:
        self.lease: dict[str, Any] | None = None
        self.fail: dict[str, Exception] = {}
        self.writes: list[dict[str, Any]] = []

    def _maybe_fail(self, call: str) -> None:
        if call in self.fail:
            raise self.fail.pop(call)

    def get(self, api_version: str, kind: str, namespace: str, name: str) -> dict[str, Any]:
        assert (api_version, kind, namespace, name) == (LEASE_API, "Lease", "ns", "lease")
        self._maybe_fail("get")
        if self.lease is None:
            raise NotFound("no lease")
        return copy.deepcopy(self.lease)

    def create(self, body: dict[str, Any]) -> dict[str, Any]:
        self._maybe_fail("create")
        self.writes.append(copy.deepcopy(body))
        self.lease = {**copy.deepcopy(body), "metadata": {**body["metadata"],
                                                          "resourceVersion": "1"}}
        return copy.deepcopy(self.lease)

    def replace(self, body: dict[str, Any]) -> dict[str, Any]:
        self._maybe_fail("replace")
        assert self.lease is not None
        if body["metadata"]["resourceVersion"] != self.lease["metadata"]["resourceVersion"]:
            raise Conflict("the lease was changed")
        self.writes.append(copy.deepcopy(body))
        version = str(int(body["metadata"]["resourceVersion"]) + 1)
        self.lease = {**copy.deepcopy(body), "metadata": {**body["metadata"],
                                                          "resourceVersion": version}}
        return copy.deepcopy(self.lease)


def _candidate(store: LeaseStore, identity: str, now: list[float]) -> LeaderElector:
    options = LeaseOptions("lease", "ns", identity, lease_duration=15.4, renew_deadline=10.0,
                           retry_period=2.0)
    return LeaderElector(store, options, clock=lambda: now[0])  # type: ignore[arg-type]


STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


def test_the_lease_is_created_taken_over_renewed_and_released_with_exact_fields() -> None:
    store, now = LeaseStore(), [0.0]
    first, second = _candidate(store, "a", now), _candidate(store, "b", now)
    assert first.try_acquire_or_renew() is True
    created = store.writes[-1]
    spec = created["spec"]
    assert created["apiVersion"] == LEASE_API and created["kind"] == "Lease"
    assert created["metadata"] == {"name": "lease", "namespace": "ns"}
    assert (spec["holderIdentity"], spec["leaseDurationSeconds"], spec["leaseTransitions"]) == (
        "a", 15, 0)
    assert STAMP.match(spec["acquireTime"]) and spec["renewTime"] == spec["acquireTime"]
    assert first.transitions == 0
    # Held and not expired: the other candidate waits, writing nothing.
    now[0] = 15.0
    assert second.try_acquire_or_renew() is False and len(store.writes) == 1
    # The holder renews: renewTime moves, acquireTime and transitions stay.
    assert first.try_acquire_or_renew() is True
    renewed = store.writes[-1]["spec"]
    assert (renewed["holderIdentity"], renewed["leaseTransitions"]) == ("a", 0)
    assert renewed["acquireTime"] == spec["acquireTime"] and STAMP.match(renewed["renewTime"])
    assert first.transitions == 0
    # Unchanged for the lease's 15 s (from when b last saw it change, at 16): b takes over.
    now[0] = 16.0
    assert second.try_acquire_or_renew() is False
    now[0] = 16.0 + 14.9
    assert second.try_acquire_or_renew() is False
    now[0] = 16.0 + 15.0
    assert second.try_acquire_or_renew() is True
    taken = store.writes[-1]["spec"]
    assert (taken["holderIdentity"], taken["leaseTransitions"], taken["leaseDurationSeconds"]) \
        == ("b", 1, 15)
    assert taken["acquireTime"] == taken["renewTime"]
    assert second.transitions == 1
    # b releases: empty holder, one second.
    assert first.release() is False
    assert second.release() is True
    released = store.writes[-1]["spec"]
    assert (released["holderIdentity"], released["leaseDurationSeconds"]) == (None, 1)
    assert released["leaseTransitions"] == 1 and STAMP.match(released["renewTime"])
    # A released lease is free: a takes it at once, counting a transition.
    assert first.try_acquire_or_renew() is True
    assert store.writes[-1]["spec"]["leaseTransitions"] == 2 and first.transitions == 1
    keys = {"holderIdentity", "leaseDurationSeconds", "acquireTime", "renewTime",
            "leaseTransitions"}
    assert all(set(write["spec"]) == keys for write in store.writes)
    # Every takeover counts, per replica.
    assert first.release() is True
    assert second.try_acquire_or_renew() is True and second.transitions == 2


def test_api_errors_are_a_failed_attempt_and_only_unexpected_ones_are_logged(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="lifecycle.driver.leader")
    store, now = LeaseStore(), [0.0]
    candidate = _candidate(store, "a", now)

    def warnings() -> list[str]:
        found = [r.getMessage() for r in caplog.records if r.name == "lifecycle.driver.leader"]
        caplog.clear()
        return found

    store.fail["get"] = ServerError("get failed")
    assert candidate.try_acquire_or_renew() is False
    assert warnings() == ["cannot read lease: get failed"]
    store.fail["create"] = Conflict("raced")
    assert candidate.try_acquire_or_renew() is False and warnings() == []
    store.fail["create"] = AlreadyExists("raced")
    assert candidate.try_acquire_or_renew() is False and warnings() == []
    store.fail["create"] = ServerError("create failed")
    assert candidate.try_acquire_or_renew() is False
    assert warnings() == ["cannot create lease: create failed"]
    assert candidate.try_acquire_or_renew() is True
    store.fail["replace"] = Conflict("raced")
    assert candidate.try_acquire_or_renew() is False and warnings() == []
    store.fail["replace"] = ServerError("renew failed")
    assert candidate.try_acquire_or_renew() is False
    assert warnings() == ["cannot renew lease: renew failed"]
    store.fail["replace"] = ServerError("release failed")
    assert candidate.release() is False
    assert warnings() == ["cannot release lease: release failed"]
    assert candidate.release() is True


def test_a_lease_without_a_duration_expires_after_our_own() -> None:
    store, now = LeaseStore(), [0.0]
    store.lease = {"apiVersion": LEASE_API, "kind": "Lease",
                   "metadata": {"name": "lease", "namespace": "ns", "resourceVersion": "7"},
                   "spec": {"holderIdentity": "other"}}
    candidate = _candidate(store, "a", now)
    assert candidate.try_acquire_or_renew() is False
    now[0] = 15.3
    assert candidate.try_acquire_or_renew() is False
    now[0] = 15.4
    assert candidate.try_acquire_or_renew() is True
    assert store.writes[-1]["spec"]["leaseTransitions"] == 1
    assert store.writes[-1]["spec"]["leaseDurationSeconds"] == 15
    assert store.writes[-1]["metadata"]["resourceVersion"] == "7"


def test_items_and_additional_properties_inside_a_junctor_are_checked_as_junctor_nodes() -> None:
    schema = {"type": "object", "properties": {
        "l": {"type": "array", "items": {"type": "string"},
              "anyOf": [{"items": {"type": "string"}}]},
        "m": {"type": "object", "additionalProperties": {"type": "string"},
              "anyOf": [{"additionalProperties": {"type": "string"}}]}}}
    inside = "must not be set inside allOf/anyOf/oneOf/not"
    assert check_structural(schema) == [
        f"openAPIV3Schema.properties[l].anyOf[0].items.type: {inside}",
        f"openAPIV3Schema.properties[m].anyOf[0].additionalProperties: {inside}",
        f"openAPIV3Schema.properties[m].anyOf[0].additionalProperties.type: {inside}",
    ]


def test_lease_options_refusals_are_exact() -> None:
    cases = [({"lease_duration": 5.0, "renew_deadline": 5.0},
              "need lease_duration > renew_deadline > retry_period > 0"),
             ({"identity": ""}, "identity must not be empty"),
             ({"name": ""}, "the Lease needs a name and a namespace"),
             ({"namespace": ""}, "the Lease needs a name and a namespace")]
    for change, message in cases:
        given: dict[str, Any] = {"name": "lease", "namespace": "ns", "identity": "a", **change}
        with pytest.raises(ValueError) as caught:
            LeaseOptions(**given)
        assert str(caught.value) == message


def test_a_short_lease_is_written_as_one_second_and_a_second_release_does_nothing() -> None:
    store = LeaseStore()
    options = LeaseOptions("lease", "ns", "a", lease_duration=1.2, renew_deadline=1.0,
                           retry_period=0.5)
    candidate = LeaderElector(store, options, clock=lambda: 0.0)  # type: ignore[arg-type]
    assert candidate.release() is False and store.writes == []
    assert candidate.try_acquire_or_renew() is True
    assert store.writes[-1]["spec"]["leaseDurationSeconds"] == 1
    assert candidate.release() is True
    assert candidate.release() is False and len(store.writes) == 2


def test_run_logs_leading_and_releasing_and_a_crash_neither_releases_nor_notifies(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="lifecycle.driver.leader")
    events: list[str] = []

    def elector(store: LeaseStore) -> LeaderElector:
        now = [0.0]

        def sleep(stop: threading.Event, seconds: float) -> bool:
            now[0] += seconds
            if now[0] >= 5.0 and not stop.is_set():
                actions[0]()
            return stop.is_set()

        options = LeaseOptions("lease", "ns", "a")
        return LeaderElector(store, options, clock=lambda: now[0], sleep=sleep,  # type: ignore[arg-type]
                             on_started=lambda: events.append("started"),
                             on_stopped=lambda: events.append("stopped"))

    graceful_store = LeaseStore()
    graceful = elector(graceful_store)
    actions = [graceful.stop]
    graceful.run()
    assert events == ["started", "stopped"]
    assert graceful_store.lease is not None
    assert graceful_store.lease["spec"]["holderIdentity"] is None
    records = [r for r in caplog.records if r.name == "lifecycle.driver.leader"]
    assert [r.getMessage() for r in records] == ["became leader", "released the lease"]
    assert (records[0].lease, records[0].identity, records[1].lease) == ("lease", "a", "lease")
    assert graceful.wait_leading(timeout=0.01) is False and graceful.lost is False

    events.clear()
    crashed_store = LeaseStore()
    crashed = elector(crashed_store)
    actions = [crashed.crash]
    crashed.run()
    assert events == ["started"]
    assert crashed_store.lease is not None
    assert crashed_store.lease["spec"]["holderIdentity"] == "a"
