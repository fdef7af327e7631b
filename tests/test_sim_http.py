"""The HTTP face of the embedded API answers like a real API server.

Raw HTTP (``http.client`` and sockets) checks status codes, reasons and
messages of query options, patches, discovery, Table answers, OpenAPI and
malformed requests; ``kubectl`` (on the PATH) checks that a user's commands
work with client-side validation on.
"""

from __future__ import annotations

import http.client
import json
import random
import shutil
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from lifecycle.sim.apiserver import EmbeddedAPI
from lifecycle.sim.http import APIServerHTTP
from lifecycle.sim.patches import strategic_merge
from lifecycle.sim.tables import human_duration, jsonpath

G, V = "example.test", "v1"
WIDGETS = f"/apis/{G}/{V}/namespaces/default/widgets"
SECRETS = "/api/v1/namespaces/default/secrets"

WIDGET_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": f"widgets.{G}"},
    "spec": {
        "group": G, "scope": "Namespaced",
        "names": {"kind": "Widget", "plural": "widgets", "singular": "widget",
                  "listKind": "WidgetList", "shortNames": ["wd"], "categories": ["managed"]},
        "versions": [{
            "name": V, "served": True, "storage": True, "subresources": {"status": {}},
            "additionalPrinterColumns": [
                {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
                {"name": "Ready", "type": "string",
                 "jsonPath": '.status.conditions[?(@.type=="Ready")].status'},
                {"name": "Color", "type": "string", "jsonPath": ".spec.color", "priority": 1},
                {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
            ],
            "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                "spec": {"type": "object", "properties": {
                    "size": {"type": "integer"}, "color": {"type": "string"}}},
                "status": {"type": "object", "properties": {
                    "conditions": {"type": "array", "items": {
                        "type": "object", "properties": {
                            "type": {"type": "string"}, "status": {"type": "string"}}}}}},
            }}},
        }],
    },
}


@pytest.fixture
def face() -> Iterator[APIServerHTTP]:
    api = EmbeddedAPI(bookmark_interval=0.1)
    api.create(WIDGET_CRD)
    with APIServerHTTP(api) as srv:
        yield srv
    api.close()


class Client:
    """A raw HTTP/1.1 client on one kept-alive connection."""

    def __init__(self, face: APIServerHTTP) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", face.port, timeout=10)

    def call(self, method: str, path: str, body: Any = None, *,
             content_type: str = "application/json",
             headers: dict[str, str] | None = None) -> tuple[int, Any, http.client.HTTPResponse]:
        data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
        sent = {"Content-Type": content_type, **(headers or {})}
        self.conn.request(method, path, body=data, headers=sent)
        response = self.conn.getresponse()
        raw = response.read()
        try:
            doc = json.loads(raw) if raw else None
        except ValueError:
            doc = raw.decode()
        return response.status, doc, response


@pytest.fixture
def client(face: APIServerHTTP) -> Client:
    return Client(face)


def widget(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": f"{G}/{V}", "kind": "Widget", "metadata": {"name": name},
            "spec": {"size": 1, **spec}}


def secret(name: str, **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, **meta},
            "data": {"k": "dg=="}}


def assert_status(doc: Any, code: int, reason: str) -> dict[str, Any]:
    assert isinstance(doc, dict) and doc["kind"] == "Status", doc
    assert (doc["code"], doc["reason"], doc["status"]) == (code, reason, "Failure"), doc
    return doc


# ------------------------------------------------------------ request bodies
def test_a_built_in_kind_takes_a_missing_api_version_and_kind_from_the_url(
        client: Client) -> None:
    # As kube-apiserver decodes into the built-in type (kopf posts Events this way).
    event = {"metadata": {"name": "e1"}, "involvedObject": {"kind": "Widget", "name": "w"},
             "reason": "Made", "message": "m", "type": "Normal"}
    code, doc, _ = client.call("POST", "/api/v1/namespaces/default/events", event)
    assert code == 201, doc
    assert (doc["apiVersion"], doc["kind"], doc["metadata"]["name"]) == ("v1", "Event", "e1")
    body = {"kind": "Secret", "metadata": {"name": "s1"}, "data": {"k": "dg=="}}
    code, doc, _ = client.call("POST", SECRETS, body)
    assert code == 201 and doc["apiVersion"] == "v1", doc
    # What the body does say must still match the URL.
    code, doc, _ = client.call("POST", SECRETS, {**body, "apiVersion": "v2",
                                                 "metadata": {"name": "s2"}})
    assert_status(doc, 400, "BadRequest")
    assert "the API version in the data (v2) does not match" in doc["message"]
    code, doc, _ = client.call("POST", SECRETS, {"kind": "ConfigMap", "metadata": {"name": "s3"}})
    assert_status(doc, 400, "BadRequest")


def test_a_custom_resource_must_name_its_api_version_and_kind(client: Client) -> None:
    for missing in ("apiVersion", "kind"):
        body = {k: v for k, v in widget("w").items() if k != missing}
        code, doc, _ = client.call("POST", WIDGETS, body)
        assert code == 400, doc
        label = "Kind" if missing == "kind" else "apiVersion"
        assert assert_status(doc, 400, "BadRequest")["message"] == (
            f"Object '{label}' is missing in the request body")


# ----------------------------------------------------------------- query options
def test_dry_run_all_validates_without_storing_and_other_values_are_invalid(
        client: Client, face: APIServerHTTP) -> None:
    code, doc, _ = client.call("POST", f"{WIDGETS}?dryRun=All", widget("a"))
    assert code == 201 and doc["metadata"]["name"] == "a"
    code, doc, _ = client.call("GET", f"{WIDGETS}/a")
    assert_status(doc, 404, "NotFound")
    code, doc, _ = client.call("POST", f"{WIDGETS}?dryRun=Some", widget("a"))
    status = assert_status(doc, 422, "Invalid")
    assert status["message"] == ('CreateOptions.meta.k8s.io "" is invalid: dryRun: Unsupported '
                                 'value: []string{"Some"}: supported values: "All"')
    assert status["details"]["causes"] == [{"reason": "FieldValueNotSupported", "field": "dryRun",
                                            "message": 'Unsupported value: []string{"Some"}: '
                                                       'supported values: "All"'}]
    assert face.api.list(f"{G}/{V}", "Widget", "default")[0] == []


def test_delete_options_body_policies_and_preconditions(client: Client) -> None:
    code, made, _ = client.call("POST", WIDGETS, widget("a"))
    assert code == 201
    code, doc, _ = client.call("DELETE", f"{WIDGETS}/a",
                               {"kind": "DeleteOptions", "propagationPolicy": "Sideways"})
    assert assert_status(doc, 422, "Invalid")["message"] == (
        'DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: Unsupported value: '
        '"Sideways": supported values: "Foreground", "Background", "Orphan", "nil"')
    code, doc, _ = client.call("DELETE", f"{WIDGETS}/a",
                               {"kind": "DeleteOptions", "preconditions": {"uid": "other"}})
    assert assert_status(doc, 409, "Conflict")["message"] == (
        f'Operation cannot be fulfilled on Widget.example.test "a": the UID in the '
        f"precondition (other) does not match the UID in record ({made['metadata']['uid']}). "
        f"The object might have been deleted and then recreated")
    code, doc, _ = client.call("DELETE", f"{WIDGETS}/a", {"kind": "Pod"})
    assert_status(doc, 400, "BadRequest")
    code, doc, _ = client.call("DELETE", f"{WIDGETS}/a", {
        "kind": "DeleteOptions", "apiVersion": "v1",
        "preconditions": {"uid": made["metadata"]["uid"],
                          "resourceVersion": made["metadata"]["resourceVersion"]}})
    assert code == 200 and doc["status"] == "Success"
    assert client.call("GET", f"{WIDGETS}/a")[0] == 404


def test_list_options_are_checked_like_a_real_server(client: Client, face: APIServerHTTP) -> None:
    before = face.api.resource_version
    client.call("POST", WIDGETS, widget("a"))
    code, doc, _ = client.call("GET", f"{WIDGETS}?resourceVersionMatch=Exact")
    assert assert_status(doc, 422, "Invalid")["details"]["causes"][0]["field"] == (
        "resourceVersionMatch")
    code, doc, _ = client.call("GET", f"{WIDGETS}?resourceVersionMatch=Sometimes&"
                                      f"resourceVersion=1")
    assert_status(doc, 422, "Invalid")
    future = int(face.api.resource_version) + 100
    code, doc, _ = client.call("GET", f"{WIDGETS}?resourceVersion={future}")
    status = assert_status(doc, 504, "Timeout")
    assert status["details"]["causes"][0]["reason"] == "ResourceVersionTooLarge"
    code, doc, _ = client.call("GET", f"{WIDGETS}?resourceVersion={before}&"
                                      f"resourceVersionMatch=Exact")
    assert code == 200 and doc["items"] == [] and doc["metadata"]["resourceVersion"] == before
    current = face.api.resource_version
    code, doc, _ = client.call("GET", f"{WIDGETS}?resourceVersion={current}&"
                                      f"resourceVersionMatch=NotOlderThan")
    assert code == 200 and [o["metadata"]["name"] for o in doc["items"]] == ["a"]
    for bad in ("limit=ten", "watch=maybe", "timeoutSeconds=x"):
        code, doc, _ = client.call("GET", f"{WIDGETS}?{bad}")
        assert_status(doc, 400, "BadRequest")
    code, doc, _ = client.call("GET", f"{WIDGETS}?labelSelector=a%20in%20(")
    assert_status(doc, 400, "BadRequest")
    code, doc, _ = client.call("POST", f"{WIDGETS}?fieldManager={'m' * 129}", widget("b"))
    assert assert_status(doc, 422, "Invalid")["details"]["causes"][0]["field"] == "fieldManager"
    code, doc, _ = client.call("POST", f"{WIDGETS}?fieldManager=kubectl", widget("b"))
    assert code == 201


def test_limit_and_continue_page_through_a_consistent_snapshot(client: Client) -> None:
    for name in "abcde":
        client.call("POST", WIDGETS, widget(name))
    code, page, _ = client.call("GET", f"{WIDGETS}?limit=2")
    assert [o["metadata"]["name"] for o in page["items"]] == ["a", "b"]
    assert page["metadata"]["remainingItemCount"] == 3 and page["metadata"]["continue"]
    client.call("DELETE", f"{WIDGETS}/e")
    names = []
    while page["metadata"].get("continue"):
        token = page["metadata"]["continue"]
        code, page, _ = client.call("GET", f"{WIDGETS}?limit=2&continue={token}")
        assert code == 200
        names += [o["metadata"]["name"] for o in page["items"]]
    assert names == ["c", "d", "e"]  # the snapshot of the first page
    code, doc, _ = client.call("GET", f"{WIDGETS}?limit=2&continue=garbage")
    assert_status(doc, 400, "BadRequest")


def test_field_selectors_on_lists_and_watches(client: Client, face: APIServerHTTP) -> None:
    for name in ("a", "b"):
        client.call("POST", WIDGETS, widget(name))
    doc = client.call("GET", f"{WIDGETS}?fieldSelector=metadata.name%3Db")[1]
    assert [o["metadata"]["name"] for o in doc["items"]] == ["b"]
    assert_status(client.call("GET", f"{WIDGETS}?fieldSelector=spec.size%3D1")[1], 400,
                  "BadRequest")
    start = face.api.resource_version
    client.call("PATCH", f"{WIDGETS}/a", {"spec": {"size": 2}},
                content_type="application/merge-patch+json")
    client.call("PATCH", f"{WIDGETS}/b", {"spec": {"size": 2}},
                content_type="application/merge-patch+json")
    conn = http.client.HTTPConnection("127.0.0.1", face.port, timeout=10)
    conn.request("GET", f"{WIDGETS}?watch=true&resourceVersion={start}&timeoutSeconds=1&"
                        f"fieldSelector=metadata.name%3Db")
    events = [json.loads(line) for line in conn.getresponse().read().splitlines() if line]
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("MODIFIED", "b")]


def test_dry_run_on_replace_patch_and_delete_changes_nothing(
        client: Client, face: APIServerHTTP) -> None:
    code, made, _ = client.call("POST", WIDGETS, widget("a"))
    made["spec"]["size"] = 5
    code, doc, _ = client.call("PUT", f"{WIDGETS}/a?dryRun=All", made)
    assert code == 200 and doc["spec"]["size"] == 5
    code, doc, _ = client.call("PATCH", f"{WIDGETS}/a?dryRun=All", {"spec": {"size": 6}},
                               content_type="application/merge-patch+json")
    assert code == 200 and doc["spec"]["size"] == 6
    code, doc, _ = client.call("PATCH", f"{WIDGETS}/a?dryRun=All", [
        {"op": "replace", "path": "/spec/size", "value": 7}],
        content_type="application/json-patch+json")
    assert code == 200 and doc["spec"]["size"] == 7
    code, doc, _ = client.call("DELETE", f"{WIDGETS}/a", {"kind": "DeleteOptions",
                                                          "dryRun": ["All"]})
    assert code == 200
    code, doc, _ = client.call("DELETE", f"{WIDGETS}?dryRun=All")
    assert code == 200 and [o["metadata"]["name"] for o in doc["items"]] == ["a"]
    assert face.api.get(f"{G}/{V}", "Widget", "default", "a")["metadata"] == made["metadata"]


def test_pretty_output_and_watch_flag_on_a_list_url(client: Client, face: APIServerHTTP) -> None:
    client.call("POST", WIDGETS, widget("a"))
    client.conn.request("GET", f"{WIDGETS}/a?pretty=true")
    text = client.conn.getresponse().read().decode()
    assert text.startswith("{\n  ") and json.loads(text)["metadata"]["name"] == "a"
    start = face.api.resource_version
    client.call("POST", WIDGETS, widget("b"))
    conn = http.client.HTTPConnection("127.0.0.1", face.port, timeout=10)
    conn.request("GET", f"{WIDGETS}?watch=1&resourceVersion={start}&timeoutSeconds=1")
    response = conn.getresponse()
    events = [json.loads(line) for line in response.read().splitlines() if line]
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "b")]


# ---------------------------------------------------------------------- patches
def test_strategic_merge_patch_merges_finalizers_and_owner_references(client: Client) -> None:
    refs = []
    for name in ("o", "p"):
        made = client.call("POST", "/api/v1/namespaces/default/configmaps", {
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}})[1]
        refs.append({"apiVersion": "v1", "kind": "ConfigMap", "name": name,
                     "uid": made["metadata"]["uid"]})
    owner, other = refs
    code, _, _ = client.call("POST", SECRETS, secret("s", finalizers=["a/x"],
                                                     ownerReferences=[owner]))
    assert code == 201
    smp = "application/strategic-merge-patch+json"
    code, doc, _ = client.call("PATCH", f"{SECRETS}/s", {"metadata": {
        "finalizers": ["b/y"],
        "ownerReferences": [other, {"uid": owner["uid"], "controller": True}]}},
        content_type=smp)
    assert code == 200, doc
    assert doc["metadata"]["finalizers"] == ["a/x", "b/y"]
    assert doc["metadata"]["ownerReferences"] == [{**owner, "controller": True}, other]
    code, doc, _ = client.call("PATCH", f"{SECRETS}/s", {"metadata": {
        "$deleteFromPrimitiveList/finalizers": ["a/x"],
        "ownerReferences": [{"uid": owner["uid"], "$patch": "delete"}]}}, content_type=smp)
    assert doc["metadata"]["finalizers"] == ["b/y"]
    assert [r["uid"] for r in doc["metadata"]["ownerReferences"]] == [other["uid"]]
    # A merge patch replaces the list instead.
    code, doc, _ = client.call("PATCH", f"{SECRETS}/s", {"metadata": {"finalizers": ["c/z"]}},
                               content_type="application/merge-patch+json")
    assert doc["metadata"]["finalizers"] == ["c/z"]
    code, doc, _ = client.call("PATCH", f"{SECRETS}/s",
                               {"data": {"$patch": "replace", "n": "bg=="}}, content_type=smp)
    assert doc["data"] == {"n": "bg=="}


def test_strategic_merge_directives() -> None:
    base = {"metadata": {"finalizers": ["a", "b"], "labels": {"x": "1", "y": "2"}},
            "data": {"k": "v"}}
    assert strategic_merge(base, {"metadata": {"$setElementOrder/finalizers": ["b", "a"],
                                               "finalizers": ["c"]}})["metadata"][
        "finalizers"] == ["b", "a", "c"]
    assert strategic_merge(base, {"metadata": {"labels": {"$retainKeys": ["x"], "z": "3"}}})[
        "metadata"]["labels"] == {"x": "1"}
    assert "data" not in strategic_merge(base, {"data": {"$patch": "delete"}})
    assert strategic_merge(base, {"metadata": {"labels": {"x": None}}})["metadata"]["labels"] == {
        "y": "2"}
    assert base["metadata"]["finalizers"] == ["a", "b"]  # the target is not modified


def test_patch_content_types_like_a_real_server(client: Client) -> None:
    client.call("POST", WIDGETS, widget("a"))
    code, doc, _ = client.call("PATCH", f"{WIDGETS}/a", {"spec": {"size": 2}},
                               content_type="application/strategic-merge-patch+json")
    assert assert_status(doc, 415, "UnsupportedMediaType")["message"] == (
        "the body of the request was in an unknown format - accepted media types include: "
        "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml")
    code, doc, _ = client.call("PATCH", f"{WIDGETS}/a", b"spec: {}",
                               content_type="application/apply-patch+yaml")
    assert "server-side apply" in assert_status(doc, 415, "UnsupportedMediaType")["message"]
    code, doc, _ = client.call("PATCH", f"{WIDGETS}/a", {"spec": {}}, content_type="text/plain")
    assert_status(doc, 415, "UnsupportedMediaType")
    code, doc, _ = client.call("POST", WIDGETS, b"<xml/>", content_type="application/xml")
    assert_status(doc, 415, "UnsupportedMediaType")
    code, doc, _ = client.call("PATCH", f"{WIDGETS}/a", [
        {"op": "test", "path": "/spec/size", "value": 9}],
        content_type="application/json-patch+json")
    status = assert_status(doc, 422, "Invalid")
    assert status["details"] == {}  # as kube-apiserver 1.37 answers (tests/test_differential.py)
    code, doc, _ = client.call("PATCH", f"{WIDGETS}/a", [
        {"op": "replace", "path": "/metadata", "value": "x"}],
        content_type="application/json-patch+json")
    assert_status(doc, 422, "Invalid")
    code, doc, _ = client.call("PATCH", f"{WIDGETS}/a", [
        {"op": "replace", "path": "/spec/size", "value": 7}],
        content_type="application/json-patch+json")
    assert code == 200 and doc["spec"]["size"] == 7 and doc["metadata"]["generation"] == 2


# ------------------------------------------------------------ field validation
def test_field_validation_strict_refuses_and_warn_reports_unknown_fields(client: Client) -> None:
    body = widget("a", shape="round")
    code, doc, _ = client.call("POST", f"{WIDGETS}?fieldValidation=Strict", body)
    assert assert_status(doc, 400, "BadRequest")["message"] == (
        'Widget in version "v1" cannot be handled as a Widget: strict decoding error: '
        'unknown field "spec.shape"')
    code, doc, response = client.call("POST", WIDGETS, body)
    assert code == 201
    assert response.getheader("Warning") == '299 - "unknown field \\"spec.shape\\""'
    code, doc, _ = client.call("POST", f"{WIDGETS}?fieldValidation=Loose", widget("b"))
    assert_status(doc, 400, "BadRequest")
    code, doc, _ = client.call("POST", f"{SECRETS}?fieldValidation=Strict",
                               {**secret("s"), "extra": 1})
    assert 'unknown field "extra"' in assert_status(doc, 400, "BadRequest")["message"]


# -------------------------------------------------------------------- discovery
def test_discovery_lists_short_names_categories_verbs_and_status(client: Client) -> None:
    code, doc, _ = client.call("GET", f"/apis/{G}/{V}")
    assert code == 200
    by_name = {r["name"]: r for r in doc["resources"]}
    assert by_name["widgets"]["shortNames"] == ["wd"]
    assert by_name["widgets"]["categories"] == ["managed"]
    assert by_name["widgets"]["singularName"] == "widget"
    assert {"patch", "watch", "deletecollection"} <= set(by_name["widgets"]["verbs"])
    assert by_name["widgets/status"]["verbs"] == ["get", "patch", "update"]
    code, doc, _ = client.call("GET", "/api/v1")
    core = {r["name"]: r for r in doc["resources"]}
    assert core["namespaces"]["shortNames"] == ["ns"]
    assert "deletecollection" not in core["namespaces"]["verbs"]
    code, doc, _ = client.call("GET", "/apis/nothing.test")
    assert_status(doc, 404, "NotFound")


def test_delete_collection_honours_selectors(client: Client) -> None:
    for name, tier in (("a", "x"), ("b", "y"), ("c", "x")):
        body = widget(name)
        body["metadata"]["labels"] = {"tier": tier}
        client.call("POST", WIDGETS, body)
    code, doc, _ = client.call("DELETE", f"{WIDGETS}?labelSelector=tier%3Dx")
    assert code == 200 and [o["metadata"]["name"] for o in doc["items"]] == ["a", "c"]
    code, doc, _ = client.call("GET", WIDGETS)
    assert [o["metadata"]["name"] for o in doc["items"]] == ["b"]


# ----------------------------------------------------------------------- tables
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"


def test_table_answers_use_printer_columns(client: Client, face: APIServerHTTP) -> None:
    made = face.api.create({**widget("a", color="red"), "metadata": {
        "name": "a", "namespace": "default"}})
    made["status"] = {"conditions": [{"type": "Synced", "status": "False"},
                                     {"type": "Ready", "status": "True"}]}
    face.api.replace_status(made)
    code, doc, _ = client.call("GET", WIDGETS, headers={"Accept": TABLE})
    assert code == 200 and doc["kind"] == "Table" and doc["apiVersion"] == "meta.k8s.io/v1"
    assert [(c["name"], c["priority"]) for c in doc["columnDefinitions"]] == [
        ("Name", 0), ("Size", 0), ("Ready", 0), ("Color", 1), ("Age", 0)]
    row = doc["rows"][0]
    assert row["cells"][:4] == ["a", 1, "True", "red"]
    assert row["cells"][4].endswith("s")
    assert row["object"]["kind"] == "PartialObjectMetadata"
    assert "spec" not in row["object"]
    code, doc, _ = client.call("GET", f"{WIDGETS}/a?includeObject=Object",
                               headers={"Accept": TABLE})
    assert doc["rows"][0]["object"]["spec"]["color"] == "red"
    client.call("POST", SECRETS, secret("s"))
    code, doc, _ = client.call("GET", SECRETS, headers={"Accept": TABLE})
    assert [c["name"] for c in doc["columnDefinitions"]] == ["Name", "Type", "Data", "Age"]
    assert doc["rows"][0]["cells"][:3] == ["s", "Opaque", 1]
    code, doc, _ = client.call("GET", "/api/v1/namespaces", headers={"Accept": TABLE})
    assert doc["rows"][0]["cells"][:2] == ["default", "Active"]
    code, doc, _ = client.call("GET", WIDGETS, headers={
        "Accept": "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io"})
    assert doc["kind"] == "PartialObjectMetadataList" and "spec" not in doc["items"][0]
    code, doc, _ = client.call("GET", WIDGETS,
                               headers={"Accept": "application/vnd.kubernetes.protobuf"})
    assert_status(doc, 406, "NotAcceptable")


def test_table_watch_sends_the_column_definitions_once(client: Client,
                                                       face: APIServerHTTP) -> None:
    start = face.api.resource_version
    for name in ("a", "b"):
        client.call("POST", WIDGETS, widget(name))
    conn = http.client.HTTPConnection("127.0.0.1", face.port, timeout=10)
    conn.request("GET", f"{WIDGETS}?watch=true&resourceVersion={start}&timeoutSeconds=1",
                 headers={"Accept": TABLE})
    events = [json.loads(line) for line in conn.getresponse().read().splitlines() if line]
    assert [e["object"]["kind"] for e in events] == ["Table", "Table"]
    assert [len(e["object"]["columnDefinitions"]) for e in events] == [5, 0]
    assert [e["object"]["rows"][0]["cells"][0] for e in events] == ["a", "b"]


def test_jsonpath_and_ages() -> None:
    obj = {"status": {"conditions": [{"type": "A", "status": "x"},
                                     {"type": "Ready", "status": "True"}]},
           "spec": {"items": [1, 2]}}
    assert jsonpath(obj, '.status.conditions[?(@.type=="Ready")].status') == ["True"]
    assert jsonpath(obj, ".status.conditions[?(@.type!='Ready')].type") == ["A"]
    assert jsonpath(obj, "{.spec.items[*]}") == [1, 2]
    assert jsonpath(obj, ".spec.items[-1]") == [2]
    assert jsonpath(obj, ".spec.missing") == []
    assert [human_duration(s) for s in (5, 150, 700, 4 * 3600 + 120, 3 * 86400 + 3600,
                                        400 * 86400)] == ["5s", "2m30s", "11m", "4h2m", "3d1h",
                                                          "400d"]


# ---------------------------------------------------------------------- OpenAPI
def test_openapi_v3_documents_carry_kinds_and_the_field_validation_parameter(
        client: Client) -> None:
    code, index, _ = client.call("GET", "/openapi/v3")
    assert code == 200 and f"apis/{G}/{V}" in index["paths"] and "api/v1" in index["paths"]
    code, doc, _ = client.call("GET", index["paths"][f"apis/{G}/{V}"]["serverRelativeURL"])
    assert code == 200 and doc["openapi"].startswith("3.")
    schema = doc["components"]["schemas"][f"test.example.{V}.Widget"]
    assert schema["x-kubernetes-group-version-kind"] == [
        {"group": G, "version": V, "kind": "Widget"}]
    assert schema["properties"]["spec"]["properties"]["size"] == {"type": "integer"}
    patch = doc["paths"][f"/apis/{G}/{V}/namespaces/{{namespace}}/widgets/{{name}}"]["patch"]
    assert patch["x-kubernetes-group-version-kind"]["kind"] == "Widget"
    assert any(p["name"] == "fieldValidation" for p in patch["parameters"])
    code, doc, _ = client.call("GET", "/openapi/v3/apis/nothing.test/v1")
    assert_status(doc, 404, "NotFound")
    code, doc, _ = client.call("GET", "/openapi/v2", headers={"Accept": "application/json"})
    assert doc["swagger"] == "2.0" and "io.k8s.api.core.v1.Secret" in doc["definitions"]
    client.conn.request("GET", "/openapi/v2", headers={
        "Accept": "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"})
    response = client.conn.getresponse()
    encoded = response.read()
    assert response.status == 200
    assert response.getheader("Content-Type") == (
        "application/com.github.proto-openapi.spec.v2.v1.0+protobuf")
    assert f"/apis/{G}/{V}/namespaces/{{namespace}}/widgets/{{name}}".encode() in encoded
    assert b"x-kubernetes-group-version-kind" in encoded and b"fieldValidation" in encoded
    code, doc, _ = client.call("GET", "/openapi/v2", headers={"Accept": "text/html"})
    assert_status(doc, 406, "NotAcceptable")


# ------------------------------------------------------------------ robustness
def exchange(sock: socket.socket, request: bytes) -> tuple[int, dict[str, str], bytes]:
    """Send one request and read one response (by Content-Length)."""
    sock.sendall(request)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"connection closed without an answer to {request[:80]!r}"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    length = int(headers.get("content-length", "0"))
    while len(body) < length:
        chunk = sock.recv(65536)
        assert chunk, "connection closed in the middle of an answer"
        body += chunk
    return status, headers, body[:length]


def assert_status_answer(answer: tuple[int, dict[str, str], bytes]) -> dict[str, Any]:
    status, headers, body = answer
    doc = json.loads(body)
    assert headers["content-type"] == "application/json"
    assert doc["kind"] == "Status" and doc["code"] == status and doc["status"] == "Failure"
    assert doc["reason"] and doc["message"]
    return doc


def request(method: str, path: str, body: bytes = b"", **headers: str) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1"]
    if "Content-Length" not in headers and body:
        lines.append(f"Content-Length: {len(body)}")
    lines += [f"{k.replace('_', '-')}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


JSON = "application/json"

MALFORMED = [
    (request("POST", SECRETS, b"{", Content_Type="application/json"), 400, True),
    (request("POST", SECRETS, b"[" * 100_000 + b"]" * 100_000, Content_Type=JSON), 400, True),
    (request("POST", SECRETS, json.dumps({"apiVersion": "v1", "kind": "Secret",
                                          "metadata": "x"}).encode(), Content_Type=JSON),
     400, True),
    (request("POST", SECRETS, b"[]", Content_Type=JSON), 400, True),
    (request("POST", SECRETS, b'{"apiVersion": "v2", "kind": "Secret"}', Content_Type=JSON),
     400, True),
    (request("POST", WIDGETS, b'{"kind": "Widget", "metadata": {"name": "a"}}',
             Content_Type=JSON), 400, True),
    (request("PUT", SECRETS, b"{}", Content_Type=JSON), 405, True),
    (request("POST", f"{SECRETS}/x", b"{}", Content_Type=JSON), 405, True),
    # A browser's write whose body does not say it is JSON or YAML (cross-site): 415.
    (request("POST", SECRETS, b'{"apiVersion": "v1", "kind": "Secret"}',
             Origin="http://evil.example.com"), 415, True),
    (request("PATCH", f"{SECRETS}/x", b"", Content_Type="application/merge-patch+json"), 400,
     True),
    (request("GET", "/apis/no/such/thing/here/at/all"), 404, True),
    (request("GET", "/api/v2"), 404, True),
    (request("GET", "/%ff%fe"), 404, True),
    (request("DELETE", "/api/v1/namespaces"), 405, True),
    (request("HEAD", SECRETS), 405, False),
    (request("OPTIONS", SECRETS), 405, True),
    (request("BREW", SECRETS), 405, False),
    (request("POST", SECRETS, Content_Length="abc"), 400, False),
    (request("POST", SECRETS, Content_Length="-3"), 400, False),
    (request("POST", SECRETS, Content_Length=str(64 * 1024 * 1024)), 413, False),
    (b"GARBAGE\r\n\r\n", 400, False),
]


@pytest.mark.parametrize(("raw", "code", "keeps_connection"), MALFORMED)
def test_malformed_requests_get_a_status_and_the_connection_stays_usable(
        face: APIServerHTTP, raw: bytes, code: int, keeps_connection: bool) -> None:
    with socket.create_connection(("127.0.0.1", face.port), timeout=10) as sock:
        doc = assert_status_answer(exchange(sock, raw))
        assert doc["code"] == code, doc
        if keeps_connection:
            status, _, body = exchange(sock, request("GET", "/api/v1/namespaces/default"))
            assert status == 200 and json.loads(body)["metadata"]["name"] == "default"
    # The server still answers on a fresh connection.
    with socket.create_connection(("127.0.0.1", face.port), timeout=10) as sock:
        assert exchange(sock, request("GET", "/api"))[0] == 200


def test_fuzzed_requests_always_get_a_parsable_status(face: APIServerHTTP) -> None:
    rng = random.Random(12)
    paths = [SECRETS, f"{SECRETS}/s", WIDGETS, f"{WIDGETS}/w", f"{WIDGETS}/w/status",
             "/api/v1/namespaces/default", "/apis", f"/apis/{G}", "/openapi/v3/apis/x/y"]
    queries = ["", "?dryRun=All", "?dryRun=x", "?limit=-1", "?limit=z", "?watch=2",
               "?labelSelector=!!", "?fieldValidation=Strict", "?resourceVersion=-1",
               "?propagationPolicy=Nope", "?includeObject=All", "?timeoutSeconds=-5"]
    types = ["application/json", "application/merge-patch+json",
             "application/json-patch+json", "application/strategic-merge-patch+json",
             "application/yaml", "text/plain", ""]
    bodies = [b"", b"{", b"null", b"[]", b"1", b'"s"', b'{"metadata": 5}',
              b'{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "data": 5}',
              b'[{"op": "move", "from": "/nope", "path": "/x"}]',
              b'[{"op": "add", "path": "/metadata/labels/a", "value": {"x": 1}}]',
              b'{"metadata": {"finalizers": [{"a": 1}]}}', b'{"$patch": "explode"}',
              b'{"kind": "DeleteOptions", "dryRun": "All"}', b'{"spec": {"$retainKeys": 3}}',
              b'{"apiVersion": "example.test/v1", "kind": "Widget", "metadata": {"name": "w"},'
              b' "spec": {"size": "big"}}', bytes(rng.randrange(256) for _ in range(64))]
    with socket.create_connection(("127.0.0.1", face.port), timeout=10) as sock:
        for _ in range(400):
            method = rng.choice(["GET", "POST", "PUT", "PATCH", "DELETE"])
            body = rng.choice(bodies)
            raw = request(method, rng.choice(paths) + rng.choice(queries), body,
                          Content_Type=rng.choice(types))
            status, headers, answer = exchange(sock, raw)
            if status >= 300:
                doc = json.loads(answer)
                assert doc["kind"] == "Status" and doc["code"] == status, (raw, doc)
                assert status < 500, (raw, doc)
            if headers.get("connection") == "close":
                sock.close()
                sock = socket.create_connection(("127.0.0.1", face.port), timeout=10)


# ------------------------------------------------------------------------ kubectl
KUBECTL = shutil.which("kubectl")


@pytest.fixture
def kubectl(face: APIServerHTTP, tmp_path: Path) -> Any:
    if KUBECTL is None:  # a missing client is a failure to fix, never a quiet skip
        pytest.fail("kubectl is not on PATH: these tests drive the embedded API with the "
                    "real kubectl (install the kubectl package)")
    config = tmp_path / "kubeconfig"
    config.write_text(yaml.safe_dump(face.kubeconfig()))

    def run(*args: str, stdin: str | None = None, ok: bool = True) -> str:
        done = subprocess.run([str(KUBECTL), "--kubeconfig", str(config), "--cache-dir",
                               str(tmp_path / "cache"), *args], input=stdin,
                              capture_output=True, text=True, timeout=60)
        if ok:
            assert done.returncode == 0, done.stderr
            return done.stdout
        assert done.returncode != 0, done.stdout
        return done.stderr
    return run


def manifest(*docs: dict[str, Any]) -> str:
    return yaml.safe_dump_all(docs)


def test_kubectl_get_prints_columns_by_short_name_and_category(kubectl: Any) -> None:
    kubectl("apply", "-f", "-", stdin=manifest(widget("one", color="blue")))
    wide = kubectl("get", "wd", "-o", "wide").splitlines()
    assert wide[0].split() == ["NAME", "SIZE", "READY", "COLOR", "AGE"]
    # READY finds nothing: a null cell, printed blank under its header
    assert wide[1].split()[:3] == ["one", "1", "blue"]
    assert wide[1][wide[0].index("READY")] == " " and wide[1][wide[0].index("COLOR")] == "b"
    narrow = kubectl("get", "managed").splitlines()
    assert narrow[0].split() == ["NAME", "SIZE", "READY", "AGE"]
    assert narrow[1].split()[:2] == ["one", "1"]
    assert "one" in kubectl("get", "widgets", "one", "-o", "name")


def test_kubectl_validates_and_explains_with_the_served_openapi(kubectl: Any) -> None:
    error = kubectl("apply", "-f", "-", stdin=manifest(widget("bad", shape="round")), ok=False)
    assert 'unknown field "spec.shape"' in error
    kubectl("create", "-f", "-", stdin=manifest(widget("good")))
    changed = widget("good", size=3)
    kubectl("replace", "-f", "-", stdin=manifest(changed))
    explained = kubectl("explain", "widgets.spec")
    assert "size" in explained and "color" in explained
    assert "KIND:" in kubectl("explain", "secret")
    error = kubectl("patch", "wd", "good", "-p", '{"spec":{"size":4}}', ok=False)
    assert "application/strategic-merge-patch+json is not supported" in error
    kubectl("patch", "wd", "good", "--type", "merge", "-p", '{"spec":{"size":4}}')
    assert kubectl("get", "wd", "good", "-o", "jsonpath={.spec.size}") == "4"
    error = kubectl("apply", "--server-side", "-f", "-", stdin=manifest(widget("ssa")), ok=False)
    assert "server-side apply" in error
    # A kind the v3 documents do not name: kubectl reads /openapi/v2 (protobuf), leaves
    # validation to the server and reports the missing kind.
    gadget = {**widget("g"), "kind": "Gadget"}
    error = kubectl("apply", "-f", "-", stdin=manifest(gadget), ok=False)
    assert 'no matches for kind "Gadget"' in error and "ensure CRDs are installed" in error


def test_kubectl_server_dry_runs_change_nothing(kubectl: Any, face: APIServerHTTP) -> None:
    kubectl("apply", "-f", "-", stdin=manifest(widget("keep")))
    before = face.api.get(f"{G}/{V}", "Widget", "default", "keep")
    out = kubectl("apply", "--dry-run=server", "-f", "-", stdin=manifest(widget("fresh")))
    assert "(server dry run)" in out
    with pytest.raises(Exception, match="not found"):
        face.api.get(f"{G}/{V}", "Widget", "default", "fresh")
    kubectl("create", "--dry-run=server", "-f", "-", stdin=manifest(widget("fresh2")))
    assert [o["metadata"]["name"] for o in face.api.list(f"{G}/{V}", "Widget")[0]] == ["keep"]
    assert face.api.get(f"{G}/{V}", "Widget", "default", "keep") == before
    kubectl("label", "secret", "--all", "x=y", "--dry-run=server")
    kubectl("create", "secret", "generic", "s", "--from-literal=a=b")
    kubectl("patch", "secret", "s", "-p", '{"metadata":{"finalizers":["a/b"]}}')
    kubectl("patch", "secret", "s", "-p", '{"metadata":{"finalizers":["c/d"]}}')
    finalizers = kubectl("get", "secret", "s", "-o", "jsonpath={.metadata.finalizers}")
    assert json.loads(finalizers) == ["a/b", "c/d"]
    applied = {"apiVersion": "v1", "kind": "Secret",
               "metadata": {"name": "applied", "finalizers": ["a/x", "b/y"]},
               "stringData": {"k": "v"}}
    kubectl("apply", "-f", "-", stdin=manifest(applied))
    applied["metadata"]["finalizers"] = ["b/y", "c/z"]
    applied["stringData"] = {"k": "w"}
    # kubectl sends a strategic merge patch with $deleteFromPrimitiveList and $setElementOrder
    kubectl("apply", "-f", "-", stdin=manifest(applied))
    stored = face.api.get("v1", "Secret", "default", "applied")
    assert stored["metadata"]["finalizers"] == ["b/y", "c/z"] and stored["data"] == {"k": "dw=="}
    table = kubectl("get", "secret", "s").splitlines()
    assert table[0].split() == ["NAME", "TYPE", "DATA", "AGE"]
    assert table[1].split()[:3] == ["s", "Opaque", "1"]


def test_a_watch_that_times_out_leaves_its_kept_alive_connection_usable(
        client: Client) -> None:
    """A watch ended by ``timeoutSeconds`` finishes its chunked body and keeps the
    connection, or says ``Connection: close``; the next request on the same
    connection is answered either way (a silent close races the client's reuse)."""
    code, _, response = client.call("GET", f"{SECRETS}?watch=true&timeoutSeconds=1")
    assert code == 200
    closes = (response.getheader("Connection") or "").lower() == "close"
    kept = client.conn.sock  # http.client drops it (and reconnects) after "close"
    code, doc, _ = client.call("GET", "/api/v1/namespaces/default")
    assert code == 200 and doc["metadata"]["name"] == "default"
    # Answered on the same socket: the server read this request after ending the watch,
    # so it had its chance to close the connection, and kept it (a silent close would
    # have failed the request, whenever it came).
    assert not closes
    assert kept is not None and client.conn.sock is kept
