"""The embedded API against a real kube-apiserver, request by request: fixed and known differences.

The first tests send the requests of issue 26's list of differences to both
servers and require equal answers (they were different; the embedded API now
answers as the real one). The ``test_difference_*`` tests assert each
difference docs/embedded-api.md still lists ("Differences from a real API
server"), on both servers, so the table cannot go stale: when the embedded API
learns one, its test fails and the row goes.
"""

from __future__ import annotations

import base64
import itertools
import json
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from differential_helpers import (
    APPLY,
    MERGE,
    STRATEGIC,
    Answer,
    Normalizer,
    Target,
    collecting,
    namespace,
)
from serve_helpers import kubectl_binary
from test_differential import GROUP, gizmo_crd

from lifecycle.sim import EmbeddedAPI

_counter = itertools.count(1)


@pytest.fixture(scope="module")
def servers(real_cluster: Any) -> Iterator[tuple[Target, Target]]:
    """The session's real API server and an embedded one, both serving Gizmo."""
    from kubernetes import client as k8s

    from lifecycle.sim.http import APIServerHTTP
    from lifecycle.testing.envtest import install

    face = APIServerHTTP(EmbeddedAPI()).start()
    embedded = k8s.ApiClient(k8s.Configuration(host=face.url))
    real = real_cluster.api_client()
    for client in (real, embedded):
        install(client, [gizmo_crd()])
    try:
        yield Target("real", real), Target("embedded", embedded)
    finally:
        face.stop()


@pytest.fixture
def ns(servers: tuple[Target, Target]) -> Iterator[str]:
    """A fresh namespace of the same name on both servers."""
    name = f"known-{next(_counter)}"
    for target in servers:
        namespace(target, name)
    yield name
    for target in servers:
        target.request("DELETE", f"/api/v1/namespaces/{name}")


def both(servers: tuple[Target, Target], method: str, path: str, body: Any = None, *,
         query: dict[str, Any] | None = None,
         content_type: str = "application/json") -> tuple[Answer, Answer]:
    """The real server's answer and the embedded one's to the same request."""
    real, embedded = (t.request(method, path, body=body, query=query,
                                content_type=content_type) for t in servers)
    return real, embedded


def same(answers: tuple[Answer, Answer]) -> dict[str, Any]:
    """Require equal normalised answers; return the real one."""
    normalizers = (Normalizer(), Normalizer())
    real, embedded = (n.ranked(n.answer(a)) for n, a in zip(normalizers, answers, strict=True))
    assert real == embedded, f"\nreal:     {json.dumps(real)}\nembedded: {json.dumps(embedded)}"
    return real


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def cm(name: str, **fields: Any) -> dict[str, Any]:
    meta = fields.pop("metadata", {})
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, **meta},
            **fields}


def secret(name: str, **fields: Any) -> dict[str, Any]:
    meta = fields.pop("metadata", {})
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, **meta}, **fields}


# ------------------------------------------------ fixed: issue 26's first list
BUILT_IN_REFUSALS = {
    "a ConfigMap over 1 MiB": cm("big", data={"a": "x" * 1_500_000}),
    "a 300 KB annotation": cm("noted", metadata={"annotations": {"n": "x" * 300_000}}),
    "the finalizer 'bad finalizer!'": cm("final", metadata={"finalizers": ["bad finalizer!"]}),
    "a finalizer neither standard nor qualified": cm("plain", metadata={"finalizers": ["x"]}),
    "a TLS Secret without its keys": secret("tls", type="kubernetes.io/tls"),
    "a TLS Secret without tls.key": secret("tls2", type="kubernetes.io/tls",
                                          data={"tls.crt": b64("c")}),
    "a dockerconfigjson Secret without its key": secret(
        "docker", type="kubernetes.io/dockerconfigjson"),
    "a dockerconfigjson Secret that is not JSON": secret(
        "docker2", type="kubernetes.io/dockerconfigjson", data={".dockerconfigjson": b64("{")}),
    "a service-account-token Secret without its annotation": secret(
        "token", type="kubernetes.io/service-account-token"),
    "a basic-auth Secret without username and password": secret(
        "basic", type="kubernetes.io/basic-auth"),
    "a Secret key that is not a config key": secret("keys", data={"bad/key": b64("v")}),
    "an invalid label value": cm("labelled", metadata={"labels": {"a": "bad value!"}}),
    "an invalid annotation key": cm("annotated", metadata={"annotations": {"Bad_Key!": "1"}}),
}


@pytest.mark.parametrize("case", list(BUILT_IN_REFUSALS))
def test_built_in_objects_are_refused_as_by_a_real_server(servers: tuple[Target, Target],
                                                           ns: str, case: str) -> None:
    """What a real server refuses on a built-in kind the embedded API refuses alike:
    422 with the same message and ``details.causes`` (issue 26, differences 1 and 2)."""
    body = BUILT_IN_REFUSALS[case]
    plural = "secrets" if body["kind"] == "Secret" else "configmaps"
    answer = same(both(servers, "POST", f"/api/v1/namespaces/{ns}/{plural}", body))
    assert answer["code"] == 422
    assert answer["body"]["details"]["causes"], answer


def test_update_refusals_carry_causes_as_on_a_real_server(servers: tuple[Target, Target],
                                                          ns: str) -> None:
    """A Secret type change, bad base64 and an invalid label value on update: the same
    answers, the 422s with causes (issue 26, difference 2)."""
    base = f"/api/v1/namespaces/{ns}/secrets"
    same(both(servers, "POST", base, secret("s", data={"a": b64("1")})))
    changed = same(both(servers, "PATCH", f"{base}/s", {"type": "kubernetes.io/tls"},
                        content_type=MERGE))
    assert changed["code"] == 422 and {
        "reason": "FieldValueInvalid", "field": "type",
        "message": 'Invalid value: "kubernetes.io/tls": field is immutable'} in changed["body"][
        "details"]["causes"]
    assert same(both(servers, "PUT", f"{base}/s", secret("s", data={"a": "not base64!"})))[
        "code"] == 400
    labelled = same(both(servers, "PATCH", f"{base}/s",
                         {"metadata": {"labels": {"a": "bad value!"}}}, content_type=MERGE))
    assert labelled["code"] == 422 and labelled["body"]["details"]["causes"]


def test_errors_name_their_object_in_details_as_on_a_real_server(
        servers: tuple[Target, Target], ns: str) -> None:
    """NotFound, AlreadyExists, Conflict and a delete's Success carry the same details."""
    base = f"/api/v1/namespaces/{ns}/configmaps"
    same(both(servers, "GET", f"{base}/missing"))
    same(both(servers, "POST", base, cm("a")))
    same(both(servers, "POST", base, cm("a")))
    same(both(servers, "PUT", f"{base}/a", cm("a", metadata={"resourceVersion": "1"})))
    same(both(servers, "DELETE", f"{base}/a", {"preconditions": {"uid": "x"}}))
    same(both(servers, "DELETE", f"{base}/a"))


def kubectl(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([kubectl_binary(), "--kubeconfig", str(config), *args],
                          capture_output=True, text=True, timeout=60, check=False)


def test_kubectl_auth_can_i_and_whoami_answer_on_both_servers(real_cluster: Any,
                                                              tmp_path: Path) -> None:
    """``kubectl auth can-i`` and ``kubectl auth whoami`` work on the embedded API (an
    administrator who may do everything) as for the real server's administrator (issue 26,
    difference 3)."""
    from lifecycle.sim.http import APIServerHTTP

    with APIServerHTTP(EmbeddedAPI()) as face:
        config = tmp_path / "embedded.kubeconfig"
        config.write_text(yaml.safe_dump(face.kubeconfig()), encoding="utf-8")
        for kubeconfig in (Path(real_cluster.kubeconfig), config):
            for verb in (("list", "secrets"), ("create", "configmaps", "-n", "x"),
                         ("delete", "namespaces")):
                done = kubectl(kubeconfig, "auth", "can-i", *verb)
                assert (done.returncode, done.stdout.strip()) == (0, "yes"), done
            whoami = kubectl(kubeconfig, "auth", "whoami", "-o", "json")
            assert whoami.returncode == 0, whoami.stderr
            user = json.loads(whoami.stdout)["status"]["userInfo"]
            assert user["username"] and "system:masters" in user["groups"], user


def test_events_expire_an_hour_after_their_last_write() -> None:
    """Events are kept ``event_ttl`` seconds (one hour, a real server's ``--event-ttl``
    default) after their last write, then deleted; watchers see DELETED (issue 26,
    difference 4)."""
    now = [datetime(2026, 1, 1, tzinfo=UTC)]
    api = EmbeddedAPI(clock=lambda: now[0])
    assert api.event_ttl == 3600
    owner = api.create(cm("x") | {"metadata": {"name": "x", "namespace": "default"}})
    api.record_event(owner, "Normal", "Made", "made")
    other = api.record_event(owner, "Normal", "Other", "other")
    watch = api.watch("v1", "Event", "default", api.resource_version, timeout=0.5)
    now[0] += timedelta(minutes=59)
    api.record_event(owner, "Normal", "Made", "made")  # a repeat renews the first
    now[0] += timedelta(minutes=2)
    api.create({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "y", "namespace": "default"}})
    left = [e["reason"] for e in api.list("v1", "Event", "default")[0]]
    assert left == ["Made"]
    now[0] += timedelta(minutes=60)
    api.create({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "z", "namespace": "default"}})
    assert api.list("v1", "Event", "default")[0] == []
    events = [(e.type, e.object["reason"]) for e in watch]
    assert events == [("MODIFIED", "Made"), ("DELETED", "Other"), ("DELETED", "Made")], events
    assert other["metadata"]["name"] not in {e["metadata"]["name"]
                                             for e in api.list("v1", "Event")[0]}


def test_the_driver_docs_no_longer_say_the_server_ignores_list_and_delete_options() -> None:
    """docs/driver.md said the embedded API ignores limit, fieldSelector, dryRun and
    propagationPolicy; it honours them (issue 26, difference 5)."""
    text = (Path(__file__).parent.parent / "docs" / "driver.md").read_text(encoding="utf-8")
    section = text.split("## Where the HTTP face differs from a real API server")[1]
    assert "ignored" not in section.split("\n## ")[0]
    assert "docs/embedded-api.md" in section


# ------------------------------------------- documented, remaining differences
def test_difference_server_side_apply(servers: tuple[Target, Target], ns: str) -> None:
    """Server-side apply: the real server applies (201 with managedFields naming the
    field manager); the embedded API answers 415."""
    real, embedded = both(servers, "PATCH", f"/api/v1/namespaces/{ns}/configmaps/a",
                          json.dumps(cm("a", data={"k": "v"})).encode(),
                          query={"fieldManager": "diff", "force": "true"}, content_type=APPLY)
    assert real.status == 201, real
    assert real.body["metadata"]["managedFields"][0]["manager"] == "diff"
    assert embedded.status == 415 and embedded.body["reason"] == "UnsupportedMediaType"


def test_difference_managed_fields(servers: tuple[Target, Target], ns: str) -> None:
    """Every write on a real server records ``metadata.managedFields``; the embedded API
    keeps none (the differential tests drop them before comparing)."""
    real, embedded = both(servers, "POST", f"/api/v1/namespaces/{ns}/configmaps",
                          cm("a", data={"k": "v"}))
    assert real.body["metadata"]["managedFields"][0]["operation"] == "Update"
    assert "managedFields" not in embedded.body["metadata"]


def test_difference_garbage_collection_inside_the_write(servers: tuple[Target, Target],
                                                         ns: str) -> None:
    """A Foreground or Orphan delete: a real server answers the object waiting for its
    garbage collector (finalizer foregroundDeletion or orphan), which removes it a moment
    later; the embedded API collects inside the write and answers Success."""
    base = f"/api/v1/namespaces/{ns}/configmaps"
    for policy in ("Foreground", "Orphan"):
        name = policy.lower()
        both(servers, "POST", base, cm(name))
        real, embedded = both(servers, "DELETE", f"{base}/{name}",
                              query={"propagationPolicy": policy})
        assert real.status == 200 and collecting(real.body), real
        assert embedded.status == 200 and embedded.body["status"] == "Success", embedded


def test_difference_malformed_label_selector_message(servers: tuple[Target, Target],
                                                      ns: str) -> None:
    """A malformed label selector is a 400 on both servers; the messages differ."""
    real, embedded = both(servers, "GET", f"/api/v1/namespaces/{ns}/configmaps",
                          query={"labelSelector": "app=(x"})
    assert real.status == embedded.status == 400
    assert real.body["message"] == "unable to parse requirement: found '(', expected: identifier"
    assert embedded.body["message"] != real.body["message"]


def test_difference_a_patch_whose_result_does_not_decode(servers: tuple[Target, Target],
                                                          ns: str) -> None:
    """A patch that puts bad base64 into a Secret: a real server answers 422 with a cause
    ``patch`` printing the patched object as a Go map; the embedded API answers the 400 a
    body that does not decode gets."""
    base = f"/api/v1/namespaces/{ns}/secrets"
    both(servers, "POST", base, secret("s"))
    real, embedded = both(servers, "PATCH", f"{base}/s", {"data": {"a": "not base64!"}},
                          content_type=STRATEGIC)
    assert real.status == 422 and real.body["details"]["causes"][0]["field"] == "patch"
    assert "illegal base64 data at input byte 3" in real.body["message"]
    assert embedded.status == 400
    assert embedded.body["message"].endswith("illegal base64 data at input byte 3")


def test_difference_a_float_for_an_integer_with_cel_rules(servers: tuple[Target, Target],
                                                          ns: str) -> None:
    """A float where the schema says integer, in a schema with CEL rules: a real server
    adds a cause from its CEL type check (``<nil>: ... must be of type integer``); the
    embedded API reports the type error and that the rules were not checked."""
    body = {"apiVersion": f"{GROUP}/v1", "kind": "Gizmo", "metadata": {"name": "g"},
            "spec": {"size": 2.5}}
    real, embedded = both(servers, "POST", f"/apis/{GROUP}/v1/namespaces/{ns}/gizmos", body)
    assert real.status == embedded.status == 422
    extra = [c for c in real.body["details"]["causes"]
             if "Checked value must be of type integer" in c["message"]]
    assert extra and extra[0]["field"] == "<nil>", real.body
    assert not [c for c in embedded.body["details"]["causes"]
                if "Checked value" in c["message"]], embedded.body


def test_namespaces_answer_as_on_a_real_server(servers: tuple[Target, Target]) -> None:
    """Namespaces: create (an invalid label refused with its cause, the name label and the
    ``kubernetes`` finalizer added), get, update, merge patch and lists with field and
    label selectors get the same answers from both servers."""
    name = f"known-ns-{next(_counter)}"
    base = "/api/v1/namespaces"
    body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    try:
        same(both(servers, "POST", base, {**body, "metadata": {
            "name": name, "labels": {"team": "bad value!"}}}))
        same(both(servers, "POST", base, {**body, "metadata": {"name": "Bad_Name"}}))
        same(both(servers, "POST", base, {**body, "metadata": {"name": name,
                                                                "labels": {"team": "a"}}}))
        same(both(servers, "GET", f"{base}/{name}"))
        same(both(servers, "PATCH", f"{base}/{name}", {"metadata": {"labels": {"team": "b"}}},
                  content_type=MERGE))
        same(both(servers, "PUT", f"{base}/{name}", {**body, "metadata": {
            "name": name, "labels": {"team": "c"}}, "spec": {"finalizers": []}}))
        for selector in ({"labelSelector": "team=c"},
                         {"fieldSelector": f"metadata.name={name},status.phase=Active"},
                         {"fieldSelector": "spec.finalizers=x"}):
            real, embedded = both(servers, "GET", base, query=selector)
            assert real.status == embedded.status, (real, embedded)
            if real.status == 200:  # other tests' namespaces may be listed too
                mine = [[i for i in a.body["items"] if i["metadata"]["name"] == name]
                        for a in (real, embedded)]
                assert len(mine[0]) == len(mine[1]) == 1
            else:
                same((real, embedded))
    finally:
        for target in servers:
            target.request("DELETE", f"{base}/{name}")


def test_difference_namespace_deletion_inside_the_write(servers: tuple[Target, Target]) -> None:
    """Deleting an empty Namespace: a real server answers it Terminating and its namespace
    controller removes it a moment later; the embedded API empties and removes it inside
    the write and answers Success."""
    name = f"known-ns-{next(_counter)}"
    both(servers, "POST", "/api/v1/namespaces",
         {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    real, embedded = both(servers, "DELETE", f"/api/v1/namespaces/{name}")
    assert real.status == 200 and real.body["status"]["phase"] == "Terminating", real
    assert embedded.status == 200 and embedded.body["status"] == "Success", embedded


def test_generation_is_bumped_when_deletion_starts_on_both_servers(
        servers: tuple[Target, Target], ns: str) -> None:
    """A custom resource whose deletion starts (it has a finalizer) gets a new ``generation``
    on both servers, once: a second DELETE while it lingers keeps it."""
    path = f"/apis/{GROUP}/v1/namespaces/{ns}/gizmos"
    body = {"apiVersion": f"{GROUP}/v1", "kind": "Gizmo",
            "metadata": {"name": "g", "finalizers": ["example.com/keep"]}, "spec": {"size": 1}}
    both(servers, "POST", path, body)
    real, embedded = both(servers, "DELETE", f"{path}/g")
    assert real.body["metadata"]["generation"] == 2, real
    assert embedded.body["metadata"]["generation"] == 2, embedded
    again = both(servers, "DELETE", f"{path}/g")
    assert [answer.body["metadata"]["generation"] for answer in again] == [2, 2], again
    for target in servers:
        target.request("PATCH", f"{path}/g", body={"metadata": {"finalizers": None}},
                       content_type=MERGE)
