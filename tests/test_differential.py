"""Differential tests: the embedded API against a real kube-apiserver.

Hypothesis generates request sequences (create, get, update with and
without resourceVersion, client-side apply, merge, JSON and strategic merge
patches, status writes, deletes with propagation policies and preconditions,
dry runs, lists with selectors and pagination, watches from a list's
resourceVersion) over the built-in kinds the engine and its users touch
(ConfigMap, Secret, Lease, Event) and a custom kind whose CRD exercises
pruning, defaults, types, required fields, enums, bounds, lengths, patterns
and ``x-kubernetes-validations``; CRDs with generated schemas are installed
on both servers. Each sequence runs in a fresh namespace of the same name on
both servers and the normalised answers (:mod:`differential_helpers`) must be
equal. ``EXAMPLES`` sequences per kind; the counts and the differences that
remain are in docs/embedded-api.md, each with its test in
tests/test_differential_known.py.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from typing import Any

import pytest
from differential_helpers import (
    APPLY,
    JSON_PATCH,
    MERGE,
    STRATEGIC,
    Answer,
    Run,
    Step,
    Target,
    b64,
    compare,
)
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

#: Generated sequences per kind and run (``LIFECYCLE_DIFF_EXAMPLES`` overrides).
EXAMPLES = int(os.environ.get("LIFECYCLE_DIFF_EXAMPLES", "40"))
#: Generated CRD schemas per run.
SCHEMAS = int(os.environ.get("LIFECYCLE_DIFF_SCHEMAS", "8"))
_PHASES = (Phase.explicit, Phase.generate) + (
    (Phase.shrink,) if os.environ.get("LIFECYCLE_DIFF_SHRINK") else ())
#: ``LIFECYCLE_DIFF_SEED``: explore other sequences than the fixed (derandomized) ones.
SEED = os.environ.get("LIFECYCLE_DIFF_SEED")
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, derandomize=SEED is None,
                    database=None,
                    phases=_PHASES,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.function_scoped_fixture])
_counter = itertools.count(1)
#: Sequences compared so far, per kind (reported by the tests).
COMPARED: dict[str, int] = {}
NAMES = ("a", "a", "a", "b", "c")
GROUP = "diff.lifecycle.test"


# ---------------------------------------------------------------- the servers
def _embedded_client(url: str) -> Any:
    from kubernetes import client as k8s

    return k8s.ApiClient(k8s.Configuration(host=url))


GIZMO_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "required": ["size"],
            "x-kubernetes-validations": [
                {"rule": "self.size <= 8 || self.mode == 'slow'",
                 "message": "a size over 8 needs mode slow"},
                {"rule": "self.mode == oldSelf.mode", "message": "mode is immutable"},
            ],
            "properties": {
                "size": {"type": "integer", "minimum": 1, "maximum": 10},
                "mode": {"type": "string", "enum": ["fast", "slow"], "default": "fast"},
                "label": {"type": "string", "minLength": 2, "maxLength": 8,
                          "pattern": "^[a-z]+$"},
                "ratio": {"type": "number"},
                "tags": {"type": "array", "maxItems": 3, "items": {"type": "string"}},
                "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                "limits": {
                    "type": "object",
                    "default": {},
                    "properties": {"low": {"type": "integer", "default": 0},
                                   "high": {"type": "integer"}},
                    "x-kubernetes-validations": [
                        {"rule": "!has(self.high) || self.low <= self.high",
                         "message": "low must not exceed high", "fieldPath": ".low"}],
                },
            },
        },
        "status": {
            "type": "object",
            "properties": {"phase": {"type": "string", "enum": ["Pending", "Ready"]},
                           "count": {"type": "integer", "minimum": 0}},
        },
    },
}


def gizmo_crd() -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"gizmos.{GROUP}"},
        "spec": {"group": GROUP, "scope": "Namespaced",
                 "names": {"plural": "gizmos", "singular": "gizmo", "kind": "Gizmo",
                           "listKind": "GizmoList"},
                 "versions": [{"name": "v1", "served": True, "storage": True,
                               "schema": {"openAPIV3Schema": GIZMO_SCHEMA},
                               "subresources": {"status": {}}}]},
    }


@pytest.fixture(scope="module")
def servers(real_cluster: Any) -> Iterator[tuple[Target, Target]]:
    """The session's real API server and a module's embedded one, both serving Gizmo."""
    from lifecycle.sim import EmbeddedAPI
    from lifecycle.sim.http import APIServerHTTP
    from lifecycle.testing.envtest import install

    face = APIServerHTTP(EmbeddedAPI()).start()
    embedded_client = _embedded_client(face.url)
    real_client = real_cluster.api_client()
    for client in (real_client, embedded_client):
        install(client, [gizmo_crd()])
    try:
        yield Target("real", real_client), Target("embedded", embedded_client)
    finally:
        face.stop()


# --------------------------------------------------------------- the kinds
class Kind:
    """How sequences of one kind are built: its path, bodies and patches."""

    api_version = "v1"
    kind = ""
    plural = ""
    builtin = True
    status = False

    def path(self, ns: str, name: str | None = None, sub: str | None = None) -> str:
        base = "/api/v1" if self.api_version == "v1" else f"/apis/{self.api_version}"
        path = f"{base}/namespaces/{ns}/{self.plural}"
        if name is not None:
            path += f"/{name}"
        if sub is not None:
            path += f"/{sub}"
        return path

    def body(self, ns: str, name: str, content: dict[str, Any]) -> dict[str, Any]:
        return {"apiVersion": self.api_version, "kind": self.kind,
                "metadata": {"name": name, **content.get("metadata", {})},
                **{k: v for k, v in content.items() if k != "metadata"}}

    def contents(self) -> st.SearchStrategy[dict[str, Any]]:
        raise NotImplementedError

    def valid(self) -> dict[str, Any]:
        """The content of an object every server accepts (the watch sentinel)."""
        return {}

    def merge_patches(self) -> st.SearchStrategy[dict[str, Any]]:
        return st.one_of(metadata_patches(), self.contents())

    def json_patches(self) -> st.SearchStrategy[list[dict[str, Any]]]:
        return st.lists(st.one_of(
            st.builds(lambda v: {"op": "add", "path": "/metadata/labels", "value": v},
                      labels()),
            st.sampled_from([{"op": "remove", "path": "/metadata/labels"},
                             {"op": "add", "path": "/metadata/labels/app", "value": "y"},
                             {"op": "replace", "path": "/metadata/labels/app", "value": "x"},
                             {"op": "test", "path": "/metadata/labels/app", "value": "x"},
                             {"op": "remove", "path": "/metadata/annotations"},
                             {"op": "move", "path": "/metadata/labels/tier",
                              "from": "/metadata/labels/app"}]),
            self.extra_json_ops()), min_size=1, max_size=3)

    def extra_json_ops(self) -> st.SearchStrategy[dict[str, Any]]:
        return st.nothing()

    def field_selectors(self) -> list[str | None]:
        return [None, "metadata.name=a", "metadata.name!=b", "spec.nothing=1"]


def labels() -> st.SearchStrategy[dict[str, str]]:
    return st.dictionaries(st.sampled_from(["app", "tier", "example.com/role", "bad key!",
                                            "k" * 64, "Bad.Prefix/x"]),
                           st.sampled_from(["x", "y", "", "bad value!", "v" * 64]), max_size=2)


def meta_content() -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({}, optional={
        "labels": labels(),
        "annotations": st.dictionaries(st.sampled_from(["note", "example.com/n", "Bad_Key!"]),
                                       st.sampled_from(["1", ""]), max_size=2),
        "finalizers": st.lists(st.sampled_from(["example.com/keep", "bad finalizer!"]),
                               max_size=1),
        # owner references a server refuses (stored ones would be collected asynchronously)
        "ownerReferences": st.sampled_from([
            [{"apiVersion": "v1", "kind": "ConfigMap", "name": "x"}],
            [{"apiVersion": "", "kind": "", "name": "", "uid": ""}],
            [{"apiVersion": "v1", "kind": "Event", "name": "e", "uid": "u1"}],
            [{"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "u1",
              "controller": True},
             {"apiVersion": "v1", "kind": "Secret", "name": "y", "uid": "u2",
              "controller": True}]]),
    })


def metadata_patches() -> st.SearchStrategy[dict[str, Any]]:
    return st.builds(lambda m: {"metadata": m}, st.one_of(
        meta_content(),
        st.just({"labels": None}), st.just({"finalizers": None}),
        st.just({"labels": {"app": None}})))


class ConfigMaps(Kind):
    kind, plural = "ConfigMap", "configmaps"

    def contents(self) -> st.SearchStrategy[dict[str, Any]]:
        return st.fixed_dictionaries({}, optional={
            "metadata": meta_content(),
            "data": st.dictionaries(st.sampled_from(["a", "b.txt", "bad/key", "_c"]),
                                    st.sampled_from(["1", "two", ""]), max_size=3),
            "binaryData": st.dictionaries(st.sampled_from(["bin", "a"]),
                                          st.sampled_from([b64("x"), "not base64!"]),
                                          max_size=1),
            "immutable": st.sampled_from([True, False]),
        })

    def extra_json_ops(self) -> st.SearchStrategy[dict[str, Any]]:
        return st.sampled_from([{"op": "add", "path": "/data", "value": {"a": "1"}},
                                {"op": "add", "path": "/data/b.txt", "value": "2"},
                                {"op": "remove", "path": "/data/a"},
                                {"op": "replace", "path": "/immutable", "value": True}])


class Secrets(Kind):
    kind, plural = "Secret", "secrets"

    def contents(self) -> st.SearchStrategy[dict[str, Any]]:
        return st.fixed_dictionaries({}, optional={
            "metadata": meta_content(),
            "type": st.sampled_from(["Opaque", "kubernetes.io/tls",
                                     "kubernetes.io/dockerconfigjson",
                                     "kubernetes.io/basic-auth", "example.com/custom"]),
            "data": st.dictionaries(
                st.sampled_from(["tls.crt", "tls.key", "username", ".dockerconfigjson", "a"]),
                st.sampled_from([b64("v"), b64('{"auths":{}}'), "not base64!", ""]),
                max_size=3),
            "stringData": st.dictionaries(st.sampled_from(["password", "a"]),
                                          st.sampled_from(["s3cr3t", ""]), max_size=1),
        })

    def field_selectors(self) -> list[str | None]:
        return [None, "type=Opaque", "metadata.name=a", "data.a=1"]


class Leases(Kind):
    api_version, kind, plural = "coordination.k8s.io/v1", "Lease", "leases"

    def contents(self) -> st.SearchStrategy[dict[str, Any]]:
        return st.fixed_dictionaries({}, optional={
            "metadata": meta_content(),
            "spec": st.fixed_dictionaries({}, optional={
                "holderIdentity": st.sampled_from(["me", "you", ""]),
                "leaseDurationSeconds": st.sampled_from([15, 0, -1]),
                "leaseTransitions": st.sampled_from([0, 2, -1]),
                "renewTime": st.sampled_from(["2026-01-01T00:00:00.000000Z"]),
            }),
        })

    def extra_json_ops(self) -> st.SearchStrategy[dict[str, Any]]:
        return st.sampled_from([{"op": "add", "path": "/spec/holderIdentity", "value": "x"},
                                {"op": "replace", "path": "/spec/leaseDurationSeconds",
                                 "value": 30},
                                {"op": "remove", "path": "/spec"}])


class Events(Kind):
    kind, plural = "Event", "events"

    def body(self, ns: str, name: str, content: dict[str, Any]) -> dict[str, Any]:
        body = super().body(ns, name, content)
        involved = body.get("involvedObject")
        if isinstance(involved, dict) and involved.get("namespace") == "<ns>":
            body["involvedObject"] = {**involved, "namespace": ns}
        return body

    def contents(self) -> st.SearchStrategy[dict[str, Any]]:
        return st.fixed_dictionaries({
            "involvedObject": st.sampled_from([
                {"apiVersion": "v1", "kind": "ConfigMap", "name": "a", "namespace": "<ns>"},
                {"apiVersion": "v1", "kind": "ConfigMap", "name": "a", "namespace": "other"},
                {"kind": "Namespace", "name": "default"}]),
        }, optional={
            "metadata": meta_content(),
            "reason": st.sampled_from(["Created", ""]),
            "message": st.sampled_from(["made it", ""]),
            "type": st.sampled_from(["Normal", "Warning", "Odd"]),
            "count": st.sampled_from([1, 3]),
            "source": st.sampled_from([{"component": "diff"}, {}]),
            "firstTimestamp": st.just("2026-01-01T00:00:00Z"),
            "lastTimestamp": st.just("2026-01-01T00:00:01Z"),
            "eventTime": st.just("2026-01-01T00:00:00.000000Z"),
            "reportingComponent": st.sampled_from(["diff", "example.com/diff", "Bad Name"]),
            "reportingInstance": st.sampled_from(["diff-1", ""]),
            "action": st.sampled_from(["Made", ""]),
        })

    def valid(self) -> dict[str, Any]:
        return {"involvedObject": {"apiVersion": "v1", "kind": "ConfigMap", "name": "a",
                                   "namespace": "<ns>"},
                "reason": "Sentinel", "message": "m", "type": "Normal",
                "source": {"component": "diff"}}

    def field_selectors(self) -> list[str | None]:
        return [None, "reason=Created", "involvedObject.name=a", "type=Warning", "spec.x=1"]


class Gizmos(Kind):
    api_version, kind, plural = f"{GROUP}/v1", "Gizmo", "gizmos"
    builtin = False
    status = True

    def spec(self) -> st.SearchStrategy[dict[str, Any]]:
        return st.fixed_dictionaries({}, optional={
            "size": st.sampled_from([0, 1, 5, 9, 11, "3"]),  # 2.5: see test_differential_known
            "mode": st.sampled_from(["fast", "slow", "medium"]),
            "label": st.sampled_from(["ab", "a", "abcdefghij", "AB"]),
            "ratio": st.sampled_from([0.5, 1, "x"]),
            "tags": st.lists(st.sampled_from(["t", "u"]), max_size=4),
            "extra": st.sampled_from([{"any": {"thing": 1}}, {}]),
            "limits": st.fixed_dictionaries({}, optional={
                "low": st.sampled_from([0, 5]), "high": st.sampled_from([1, 9])}),
            "bogus": st.just("pruned"),
        })

    def contents(self) -> st.SearchStrategy[dict[str, Any]]:
        return st.fixed_dictionaries({}, optional={
            "metadata": meta_content(), "spec": self.spec(),
            "status": st.fixed_dictionaries({"phase": st.just("Ready")}),
            "unknownTop": st.just(1)})

    def statuses(self) -> st.SearchStrategy[Any]:
        return st.fixed_dictionaries({}, optional={
            "phase": st.sampled_from(["Pending", "Ready", "Gone"]),
            "count": st.sampled_from([0, 2, -1, "x"]),
            "bogus": st.just(1)})

    def valid(self) -> dict[str, Any]:
        return {"spec": {"size": 1}}

    def merge_patches(self) -> st.SearchStrategy[dict[str, Any]]:
        return st.one_of(metadata_patches(), st.builds(lambda s: {"spec": s}, self.spec()),
                         st.just({"spec": {"limits": None}}), st.just({"spec": None}))

    def extra_json_ops(self) -> st.SearchStrategy[dict[str, Any]]:
        return st.sampled_from([{"op": "replace", "path": "/spec/size", "value": 4},
                                {"op": "add", "path": "/spec/tags/-", "value": "t"},
                                {"op": "remove", "path": "/spec/mode"},
                                {"op": "add", "path": "/spec/label", "value": "Bad"}])


KINDS = {k.kind: k for k in (ConfigMaps(), Secrets(), Leases(), Events(), Gizmos())}


# -------------------------------------------------------------- the steps
def _dry(dry: bool) -> dict[str, Any]:
    return {"dryRun": "All"} if dry else {}


def step_specs(kind: Kind) -> st.SearchStrategy[tuple[Any, ...]]:
    """One request of a sequence, as a plain tuple (printed by hypothesis on failure)."""
    name = st.sampled_from(NAMES)
    dry = st.sampled_from([False, False, True])
    rv = st.sampled_from(["none", "current", "stale"])
    options = [
        st.tuples(st.just("create"), name, kind.contents(), dry),
        st.tuples(st.just("get"), name),
        st.tuples(st.just("put"), name, kind.contents(), rv, dry),
        st.tuples(st.just("merge"), name, kind.merge_patches(), rv, dry),
        st.tuples(st.just("jsonpatch"), name, kind.json_patches(), dry),
        st.tuples(st.just("apply"), name, kind.contents()),
        st.tuples(st.just("delete"), name,
                  st.sampled_from([None, "Background", "Foreground", "Orphan", "Sideways"]),
                  st.sampled_from(["none", "uid", "wrong-uid", "rv", "stale-rv"]), dry),
        st.tuples(st.just("list"), st.sampled_from([None, "app=x", "app!=x", "tier",
                                                     "!tier", "app in (x,y)"]),
                  st.sampled_from(kind.field_selectors()), st.sampled_from([None, 1, 2])),
        st.tuples(st.just("next"),),
        st.tuples(st.just("mark"),),
        st.tuples(st.just("watch"), st.sampled_from([None, "app=x"])),
    ]
    if kind.builtin:
        options.append(st.tuples(st.just("strategic"), name, kind.merge_patches(), dry))
    if kind.status:
        options.append(st.tuples(st.just("status"), name, kind.statuses(),
                                 st.sampled_from(["put", "merge"]), rv))
    return st.one_of(options)


def sequences(kind: Kind) -> st.SearchStrategy[list[tuple[Any, ...]]]:
    """A sequence starts with a valid create of ``a`` (most of the rest then finds it)."""
    valid = st.builds(lambda extra: {**kind.valid(), "metadata": {"labels": extra}},
                      st.sampled_from([{}, {"app": "x"}, {"app": "y", "tier": "1"}]))
    first = st.tuples(st.just("create"), st.just("a"), valid, st.just(False))
    # then a list whose resourceVersion the watches start from
    return st.builds(lambda a, rest: [a, ("mark",), *rest], first,
                     st.lists(step_specs(kind), min_size=2, max_size=9))


def _version(run: Run, name: str, which: str) -> dict[str, Any]:
    version = run.version(name, which)
    return {"resourceVersion": version} if which != "none" and version else {}


def decodable(value: Any) -> Any:
    """``value`` without undecodable base64 (a patch whose result does not decode is
    refused with a Go rendering of the patched map, a difference listed in
    docs/embedded-api.md)."""
    if value == "not base64!":
        return b64("x")
    if isinstance(value, dict):
        return {k: decodable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(decodable(v) for v in value)
    return value


def build(kind: Kind, spec: tuple[Any, ...]) -> Step:
    """The :class:`Step` a spec describes."""
    if spec[0] in ("merge", "jsonpatch", "strategic", "apply"):
        spec = decodable(spec)
    verb = spec[0]
    label = repr(spec)
    if verb == "create":
        _, name, content, dry = spec
        return Step(label, lambda r: ("POST", kind.path(r.namespace), _dry(dry),
                                      kind.body(r.namespace, name, content), "application/json"))
    if verb == "get":
        return Step(label, lambda r: ("GET", kind.path(r.namespace, spec[1]), None, None, ""))
    if verb == "put":
        _, name, content, rv, dry = spec

        def put(r: Run) -> Any:
            body = kind.body(r.namespace, name, content)
            body["metadata"].update(_version(r, name, rv))
            return "PUT", kind.path(r.namespace, name), _dry(dry), body, "application/json"
        return Step(label, put)
    if verb == "merge":
        _, name, patch, rv, dry = spec

        def merge(r: Run) -> Any:
            body = dict(patch)
            if _version(r, name, rv):
                body["metadata"] = {**(body.get("metadata") or {}), **_version(r, name, rv)}
            return "PATCH", kind.path(r.namespace, name), _dry(dry), body, MERGE
        return Step(label, merge)
    if verb == "jsonpatch":
        _, name, ops, dry = spec
        return Step(label, lambda r: ("PATCH", kind.path(r.namespace, name), _dry(dry), ops,
                                      JSON_PATCH))
    if verb == "strategic":
        _, name, patch, dry = spec
        return Step(label, lambda r: ("PATCH", kind.path(r.namespace, name), _dry(dry), patch,
                                      STRATEGIC))
    if verb == "apply":
        _, name, content = spec

        def apply(r: Run) -> Any:
            # kubectl apply (client-side) of an object that exists: a patch carrying the
            # whole configuration and the last-applied annotation
            import json

            body = kind.body(r.namespace, name, content)
            meta = body["metadata"]
            last = json.dumps(body, sort_keys=True)
            meta["annotations"] = {**(meta.get("annotations") or {}),
                                   "kubectl.kubernetes.io/last-applied-configuration": last}
            return ("PATCH", kind.path(r.namespace, name), None, body,
                    STRATEGIC if kind.builtin else MERGE)
        return Step(label, apply)
    if verb == "status":
        _, name, status, method, rv = spec

        def status_write(r: Run) -> Any:
            if method == "put":
                body = kind.body(r.namespace, name, {"spec": {"size": 1}, "status": status})
                body["metadata"].update(_version(r, name, rv))
                return "PUT", kind.path(r.namespace, name, "status"), None, body, "application/json"
            body = {"status": status}
            if _version(r, name, rv):
                body["metadata"] = _version(r, name, rv)
            return "PATCH", kind.path(r.namespace, name, "status"), None, body, MERGE
        return Step(label, status_write)
    if verb == "delete":
        _, name, policy, pre, dry = spec

        def delete(r: Run) -> Any:
            query: dict[str, Any] = {**_dry(dry)}
            if policy:
                query["propagationPolicy"] = policy
            body: dict[str, Any] | None = None
            preconditions = {
                "uid": {"uid": r.uids.get(name, "")},
                "wrong-uid": {"uid": "00000000-0000-4000-8000-000000000000"},
                "rv": _version(r, name, "current"),
                "stale-rv": _version(r, name, "stale"),
            }.get(pre)
            if preconditions and all(preconditions.values()):
                body = {"apiVersion": "v1", "kind": "DeleteOptions",
                        "preconditions": preconditions}
            return "DELETE", kind.path(r.namespace, name), query, body, "application/json"

        def settled(r: Run) -> Any:
            def done(answer: Answer) -> bool:
                if answer.status == 404:
                    return True
                meta = (answer.body or {}).get("metadata") or {}
                gc = {"foregroundDeletion", "orphan"}
                return not (set(meta.get("finalizers") or ()) & gc)
            return kind.path(r.namespace, name), done
        return Step(label, delete, settle=settled,
                    collects=policy in ("Foreground", "Orphan"))
    if verb == "list":
        _, label_selector, field_selector, limit = spec

        def listing(r: Run) -> Any:
            query = {"labelSelector": label_selector, "fieldSelector": field_selector,
                     "limit": limit}
            return "GET", kind.path(r.namespace), query, None, ""
        return Step(label, listing, mark=True)
    if verb == "next":
        # the next page of the last list (or a list from the start without a token)
        def following(r: Run) -> Any:
            return "GET", kind.path(r.namespace), {"limit": 1, "continue": r.token}, None, ""
        return Step(label, following, mark=True)
    if verb == "mark":
        return Step(label, lambda r: ("GET", kind.path(r.namespace), None, None, ""), mark=True)
    if verb == "watch":
        _, selector = spec

        def watch(r: Run) -> Any:
            query: dict[str, Any] = {"resourceVersion": r.marks[0] if r.marks else "0"}
            if selector:
                query["labelSelector"] = selector
            return kind.path(r.namespace), query
        return Step(label, watch=watch)
    raise AssertionError(spec)


def sentinel(kind: Kind) -> Any:
    def create(run: Run) -> str:
        body = kind.body(run.namespace, "zz-sentinel", kind.valid())
        if kind.kind == "Event":
            body = Events().body(run.namespace, "zz-sentinel", kind.valid())
        body["metadata"]["labels"] = {"app": "x"}
        answer = run.target.request("POST", kind.path(run.namespace), body=body)
        assert answer.status == 201, answer
        return "zz-sentinel"
    return create


def check(servers: tuple[Target, Target], kind: Kind, specs: list[tuple[Any, ...]]) -> None:
    real, embedded = servers
    COMPARED[kind.kind] = COMPARED.get(kind.kind, 0) + 1
    ns = f"diff-{kind.plural}-{next(_counter)}"
    compare(real, embedded, ns, [build(kind, s) for s in specs], sentinel=sentinel(kind),
            cleanup=True, unstick=lambda t, n: unstick(t, kind, n))


def unstick(target: Target, kind: Kind, ns: str) -> None:
    """Remove the finalizers a sequence left, so its namespace can go."""
    answer = target.request("GET", kind.path(ns))
    for item in (answer.body or {}).get("items") or ():
        if item["metadata"].get("finalizers"):
            target.request("PATCH", kind.path(ns, item["metadata"]["name"]),
                           body={"metadata": {"finalizers": None}}, content_type=MERGE)


# -------------------------------------------------------------- the tests
@pytest.mark.parametrize("kind", list(KINDS))
def test_sequences_answer_alike(servers: tuple[Target, Target], kind: str) -> None:
    """Generated request sequences on one kind get the same answers from both servers."""
    profile = KINDS[kind]

    @SETTINGS
    @given(sequences(profile))
    def sequences_of(specs: list[tuple[Any, ...]]) -> None:
        check(servers, profile, specs)

    if SEED is not None:
        sequences_of = seed(int(SEED))(sequences_of)

    before = COMPARED.get(kind, 0)
    sequences_of()
    compared = COMPARED.get(kind, 0) - before
    print(f"{kind}: {compared} generated sequences compared")
    assert compared >= EXAMPLES, compared  # hypothesis ran every example asked for


_ = APPLY  # server-side apply: see tests/test_differential_known.py


# --------------------------------------------------- generated CRD schemas
_SCALARS = {
    "integer": st.fixed_dictionaries({"type": st.just("integer")}, optional={
        "minimum": st.sampled_from([0, 1]), "maximum": st.sampled_from([5, 10]),
        "default": st.sampled_from([1, 3]), "format": st.just("int32")}),
    "number": st.fixed_dictionaries({"type": st.just("number")}, optional={
        "maximum": st.just(2.5), "default": st.just(1.5)}),
    "string": st.fixed_dictionaries({"type": st.just("string")}, optional={
        "enum": st.just(["a", "bb", "ccc"]), "minLength": st.just(2), "maxLength": st.just(3),
        "pattern": st.just("^[a-c]+$"), "default": st.just("bb")}),
    "boolean": st.fixed_dictionaries({"type": st.just("boolean")}, optional={
        "default": st.just(True)}),
    "array": st.fixed_dictionaries({"type": st.just("array"), "items": st.just(
        {"type": "string"})}, optional={"maxItems": st.just(2), "minItems": st.just(1)}),
    "object": st.fixed_dictionaries({"type": st.just("object")}, optional={
        "x-kubernetes-preserve-unknown-fields": st.just(True),
        "properties": st.just({"inner": {"type": "integer", "default": 7}})}),
}
#: A CEL rule per property type, guarded so that it only looks at a present value.
_RULES = {"integer": "!has(self.{p}) || self.{p} != 4",
          "number": "!has(self.{p}) || self.{p} < 2.0",
          "string": "!has(self.{p}) || self.{p} != 'ccc'",
          "boolean": "!has(self.{p}) || self.{p}",
          "array": "!has(self.{p}) || size(self.{p}) != 1",
          "object": "!has(self.{p}) || self.{p} == self.{p}"}
_VALUES = {"integer": [0, 4, 7, 11, "x"], "number": [1, 2.25, 3.5, "x"],
           "string": ["a", "bb", "ccc", "d", "abcd"], "boolean": [True, False, "yes"],
           "array": [[], ["a"], ["a", "b", "c"], "x"], "object": [{}, {"inner": 1, "x": 2}, 5]}


@st.composite
def schemas(draw: Any) -> tuple[dict[str, Any], dict[str, str]]:
    """A spec schema of up to four properties, some required, with CEL rules."""
    names = draw(st.lists(st.sampled_from(["p", "q", "r", "s"]), min_size=1, max_size=4,
                          unique=True))
    types = {n: draw(st.sampled_from(sorted(_SCALARS))) for n in names}
    properties = {n: draw(_SCALARS[t]) for n, t in types.items()}
    spec: dict[str, Any] = {"type": "object", "properties": properties}
    required = draw(st.lists(st.sampled_from(names), unique=True, max_size=2))
    if required:
        spec["required"] = sorted(required)
    ruled = draw(st.lists(st.sampled_from(names), unique=True, max_size=2))
    if ruled:
        spec["x-kubernetes-validations"] = [
            {"rule": _RULES[types[n]].format(p=n), "message": f"{n} is refused"} for n in ruled]
    return spec, types


def generated_crd(index: int, spec: dict[str, Any]) -> dict[str, Any]:
    group = f"gen{index}.{GROUP}"
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"things.{group}"},
        "spec": {"group": group, "scope": "Namespaced",
                 "names": {"plural": "things", "singular": "thing", "kind": "Thing",
                           "listKind": "ThingList"},
                 "versions": [{"name": "v1", "served": True, "storage": True, "schema": {
                     "openAPIV3Schema": {"type": "object", "properties": {
                         "spec": spec, "status": {"type": "object", "properties": {
                             "ok": {"type": "boolean"}}}}}},
                     "subresources": {"status": {}}}]},
    }


_crds = itertools.count(1)


def served(target: Target, path: str, timeout: float = 30.0) -> None:
    """Wait until a new kind's storage answers lists (a real server answers 429 at first)."""
    import time

    deadline = time.monotonic() + timeout
    while target.request("GET", path).status != 200:
        assert time.monotonic() < deadline, f"{target.name} does not serve {path}"
        time.sleep(0.1)


def test_generated_crd_schemas_answer_alike(servers: tuple[Target, Target]) -> None:
    """CRDs with generated schemas (types, defaults, enums, bounds, lengths, patterns,
    required fields, pruning, CEL rules) are installed on both servers; creates, updates,
    merge patches and lists of objects with generated values get the same answers."""
    from lifecycle.testing.envtest import install

    @settings(SETTINGS, max_examples=SCHEMAS)
    @given(schemas(), st.data())
    def installed(drawn: tuple[dict[str, Any], dict[str, str]], data: Any) -> None:
        spec, types = drawn
        index = next(_crds)
        crd = generated_crd(index, spec)
        for target in servers:
            install(target.client, [crd])
            served(target, f"/apis/gen{index}.{GROUP}/v1/things")
        kind = Gizmos()
        kind.api_version, kind.kind, kind.plural = f"gen{index}.{GROUP}/v1", "Thing", "things"
        values = st.fixed_dictionaries({}, optional={
            n: st.sampled_from(_VALUES[t]) for n, t in types.items()} | {
            "unknown": st.just(1)})
        specs: list[tuple[Any, ...]] = [("mark",)]
        for name in ("a", "b", "c"):
            specs.append(("create", name, {"spec": data.draw(values)}, False))
        specs.append(("merge", "a", {"spec": data.draw(values)}, "none", False))
        specs.append(("put", "b", {"spec": data.draw(values)}, "current", False))
        specs.append(("list", None, None, None))
        try:
            real, embedded = servers
            COMPARED["schemas"] = COMPARED.get("schemas", 0) + 1
            ns = f"diff-things-{index}"
            compare(real, embedded, ns, [build(kind, s) for s in specs], sentinel=None,
                    cleanup=True)
        finally:
            for target in servers:
                target.request("DELETE", "/apis/apiextensions.k8s.io/v1/"
                               f"customresourcedefinitions/{crd['metadata']['name']}")

    before = COMPARED.get("schemas", 0)
    installed()
    compared = COMPARED.get("schemas", 0) - before
    print(f"{compared} generated CRD schemas compared")
    assert compared >= SCHEMAS, compared
