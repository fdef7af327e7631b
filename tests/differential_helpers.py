"""Differential testing of the embedded API against a real kube-apiserver.

The same HTTP requests go to both servers (:class:`Target`: raw ``urllib3``
through an official-client ``ApiClient``'s pool, so exact bodies go out and
every status code comes back without the client raising) and the answers are
compared after :class:`Normalizer` has taken out what legitimately differs:
uids become ``uid#N`` by first appearance, ``creationTimestamp``,
``managedFields`` and other server clocks go, ``deletionTimestamp`` becomes
``<set>``, and each ``resourceVersion`` becomes its rank among the versions
the sequence saw on that server (``rv#3``), so the order of versions and
which answers share one is still compared, but not their values. A list's
own resourceVersion is only kept to watch from (a real server's global
revision moves with writes of other clients).

:func:`compare` runs one sequence (a list of :class:`Step`) on both servers in
a fresh namespace of the same name and raises :class:`Mismatch` with a
readable report of the first answers that differ.
"""

from __future__ import annotations

import base64
import json
import os
import re
import time
import urllib.parse
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import attrs
import urllib3

__all__ = ["Answer", "Mismatch", "Normalizer", "Run", "Step", "Target", "compare", "run_steps"]

_VERSIONS = re.compile(r"(ResourceVersion in (?:the precondition|record) )\(\d+\)")
UID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
JSON = "application/json"
MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
APPLY = "application/apply-patch+yaml"


@attrs.frozen
class Answer:
    """One HTTP answer: the status code and the decoded body (text when not JSON)."""

    status: int
    body: Any


class Target:
    """One server reached through an official-client ``ApiClient`` (its pool and TLS)."""

    def __init__(self, name: str, client: Any) -> None:
        self.name = name
        self.client = client
        self.host = client.configuration.host.rstrip("/")
        self.pool = client.rest_client.pool_manager

    def url(self, path: str, query: dict[str, Any] | None = None) -> str:
        text = urllib.parse.urlencode(
            {k: v for k, v in (query or {}).items() if v is not None}, doseq=True)
        return f"{self.host}{path}" + (f"?{text}" if text else "")

    def request(self, method: str, path: str, *, query: dict[str, Any] | None = None,
                body: Any = None, content_type: str = JSON) -> Answer:
        """Send one request; never raises for an HTTP error status."""
        data: bytes | None = None
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
        headers = {"Accept": JSON}
        if data is not None:
            headers["Content-Type"] = content_type
        response = self.pool.request(method, self.url(path, query), body=data,
                                     headers=headers, retries=False,
                                     timeout=urllib3.Timeout(connect=10, read=60))
        raw = response.data
        try:
            doc = json.loads(raw) if raw else None
        except ValueError:
            doc = raw.decode(errors="replace")
        return Answer(response.status, doc)

    def watch(self, path: str, query: dict[str, Any],
              until: Callable[[dict[str, Any]], bool], *, timeout: float = 15.0,
              ) -> list[dict[str, Any]]:
        """The events of a watch up to and including the first one ``until`` accepts."""
        query = {**query, "watch": "true", "timeoutSeconds": str(int(timeout))}
        response = self.pool.request("GET", self.url(path, query), headers={"Accept": JSON},
                                     preload_content=False, retries=False,
                                     timeout=urllib3.Timeout(connect=10, read=timeout + 5))
        events: list[dict[str, Any]] = []
        if response.status != 200:
            body = response.read()
            response.release_conn()
            return [{"type": "HTTP", "object": {"code": response.status,
                                                "body": json.loads(body or b"null")}}]
        pending = b""
        try:
            for chunk in response.stream(65536):
                pending += chunk
                while b"\n" in pending:
                    line, pending = pending.split(b"\n", 1)
                    if not line.strip():
                        continue
                    event = json.loads(line)
                    if event.get("type") == "BOOKMARK":
                        continue
                    events.append(event)
                    if until(event) or event.get("type") == "ERROR":
                        return events
        finally:
            response.close()
        return events


# --------------------------------------------------------------- normalising
class RV:
    """A resourceVersion seen in an answer, replaced by its rank at the end of a run."""

    __slots__ = ("value",)

    def __init__(self, value: int) -> None:
        self.value = value

    def __repr__(self) -> str:
        return f"RV({self.value})"


#: Metadata fields a server sets from its clock or bookkeeping, dropped before comparing.
DROPPED_META = ("creationTimestamp", "managedFields", "selfLink")


def _unordered(message: Any, causes: list[dict[str, Any]]) -> Any:
    """A 422's message ``... is invalid: [a, b]`` with its causes in a fixed order.

    A real server validates maps in Go's random order, so the order of the
    causes (and of their texts in the message) is not part of the answer.
    """
    if not isinstance(message, str) or len(causes) < 1:
        return message
    texts = [f"{c['field']}: {c['message']}" if c.get("field") else c.get("message", "")
             for c in causes]
    head, _, listed = message.partition(": [")
    if not listed.endswith("]"):
        return message
    found = listed[:-1]
    unique = sorted(set(texts))
    # the message lists every cause (some several times), in any order
    for text in sorted(unique, key=len, reverse=True):
        found = found.replace(text, "")
    if found.replace(", ", ""):
        return message
    if len(unique) == 1:
        return f"{head}: {unique[0]}"
    return f"{head}: [" + ", ".join(unique) + "]"


class Normalizer:
    """Normalises the answers of one server within one run (see the module docstring)."""

    def __init__(self) -> None:
        self.uids: dict[str, str] = {}
        self.versions: set[int] = set()

    def uid(self, value: str) -> str:
        return self.uids.setdefault(value, f"uid#{len(self.uids) + 1}")

    def rv(self, value: Any) -> Any:
        if isinstance(value, str) and value.isdigit():
            self.versions.add(int(value))
            return RV(int(value))
        return value

    def text(self, message: str) -> str:
        """A message with uids replaced by their tokens and resourceVersions by ``<rv>``."""
        message = UID.sub(lambda m: self.uid(m.group(0)), message)
        return _VERSIONS.sub(lambda m: m.group(1) + "(<rv>)", message)

    def meta(self, meta: dict[str, Any]) -> dict[str, Any]:
        out = {k: v for k, v in meta.items() if k not in DROPPED_META}
        if "uid" in out:
            out["uid"] = self.uid(str(out["uid"]))
        if "resourceVersion" in out:
            out["resourceVersion"] = self.rv(out["resourceVersion"])
        if "deletionTimestamp" in out:
            out["deletionTimestamp"] = "<set>"
        refs = out.get("ownerReferences")
        if isinstance(refs, list):
            out["ownerReferences"] = [
                {**r, "uid": self.uid(r["uid"])} if isinstance(r, dict) and r.get("uid") else r
                for r in refs]
        return out

    def object(self, obj: Any) -> Any:
        if not isinstance(obj, dict):
            return obj
        out = dict(obj)
        kind = out.get("kind")
        is_list = (isinstance(kind, str) and kind.endswith("List")
                   and isinstance(out.get("items"), list))
        if isinstance(out.get("metadata"), dict) and not is_list:
            out["metadata"] = self.meta(out["metadata"])
        if kind == "Status":
            if isinstance(out.get("message"), str):
                out["message"] = self.text(out["message"])
            details = out.get("details")
            if isinstance(details, dict):
                details = dict(details)
                if "uid" in details:
                    details["uid"] = self.uid(details["uid"])
                causes = details.get("causes")
                if isinstance(causes, list):
                    causes = [{**c, "message": self.text(c["message"])} if "message" in c else c
                              for c in causes]
                    # a real server may report one cause several times (it validates a custom
                    # resource's metadata more than once): each counts once
                    causes = [c for i, c in enumerate(causes) if c not in causes[:i]]
                    out["message"] = _unordered(out.get("message"), causes)
                    details["causes"] = sorted(causes, key=lambda c: json.dumps(c, sort_keys=True))
                out["details"] = details
        elif is_list:
            meta = dict(out.get("metadata") or {})
            meta.pop("resourceVersion", None)  # a real server's revision is global
            if meta.get("continue"):
                meta["continue"] = "<token>"
            out["metadata"] = meta
            out["items"] = [self.object(i) for i in out["items"]]
        elif (kind == "Event" and isinstance(out.get("involvedObject"), dict)
              and out["involvedObject"].get("uid")):
                out["involvedObject"] = {**out["involvedObject"],
                                         "uid": self.uid(out["involvedObject"]["uid"])}
        return out

    def answer(self, answer: Answer) -> dict[str, Any]:
        return {"code": answer.status, "body": self.object(answer.body)}

    def ranked(self, value: Any) -> Any:
        """``value`` with every :class:`RV` replaced by ``rv#rank``."""
        order = {v: i + 1 for i, v in enumerate(sorted(self.versions))}

        def walk(node: Any) -> Any:
            if isinstance(node, RV):
                return f"rv#{order[node.value]}"
            if isinstance(node, dict):
                return {k: walk(v) for k, v in node.items()}
            if isinstance(node, list):
                return [walk(v) for v in node]
            return node

        return walk(value)


# ----------------------------------------------------------------- the runs
@attrs.define
class Run:
    """What a sequence has done on one server: answers seen, versions and uids by object."""

    target: Target
    namespace: str
    normalizer: Normalizer = attrs.Factory(Normalizer)
    transcript: list[Any] = attrs.Factory(list)
    versions: dict[str, list[str]] = attrs.Factory(dict)  # name -> resourceVersions seen
    uids: dict[str, str] = attrs.Factory(dict)
    marks: list[str] = attrs.Factory(list)  # list resourceVersions to watch from
    token: str | None = None  # the continue token of the last list

    def saw(self, answer: Answer) -> None:
        body = answer.body
        docs = []
        if isinstance(body, dict) and isinstance(body.get("items"), list):
            docs = body["items"]
        elif isinstance(body, dict) and isinstance(body.get("metadata"), dict):
            docs = [body]
        for doc in docs:
            meta = doc.get("metadata") or {}
            name, version = meta.get("name"), meta.get("resourceVersion")
            if name and version and doc.get("kind") not in ("Status",):
                seen = self.versions.setdefault(name, [])
                if version not in seen:
                    seen.append(version)
                if meta.get("uid"):
                    self.uids[name] = meta["uid"]

    def version(self, name: str, which: str) -> str | None:
        """The ``current`` (last seen) or ``stale`` (one before) resourceVersion of ``name``."""
        seen = self.versions.get(name) or []
        if which == "current":
            return seen[-1] if seen else None
        if which == "stale":
            return seen[-2] if len(seen) > 1 else "1"
        return None


@attrs.frozen
class Step:
    """One request of a sequence, built per server by ``build(run)``.

    ``build`` returns ``(method, path, query, body, content_type)``; a step
    whose ``watch`` is set instead opens a watch (see :func:`run_steps`).
    ``label`` names the step in reports; ``settle`` waits for the garbage
    collector after a delete (a real server's controllers act asynchronously).
    ``collects``: a delete with the Foreground or Orphan policy, whose answer
    is the object waiting for the garbage collector on a real server and may
    already be gone on the embedded one (which collects synchronously): both
    answers compare as ``<collected>``.
    """

    label: str
    build: Callable[[Run], tuple[str, str, dict[str, Any] | None, Any, str]] | None = None
    watch: Callable[[Run], tuple[str, dict[str, Any]]] | None = None
    settle: Callable[[Run], tuple[str, Callable[[Answer], bool]]] | None = None
    mark: bool = False
    collects: bool = False


class Mismatch(AssertionError):
    """The two servers answered a step differently."""


def _settle(run: Run, step: Step) -> None:
    assert step.settle is not None
    path, done = step.settle(run)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if done(run.target.request("GET", path)):
            return
        time.sleep(0.1)


def run_steps(run: Run, steps: Sequence[Step], sentinel: Callable[[Run], Any] | None) -> None:
    """Carry out ``steps`` on ``run.target``, appending normalised answers to its transcript.

    Watches run last (each from the list resourceVersion marked by an earlier
    step), until the ``sentinel`` step's object arrives.
    """
    watches: list[tuple[int, Step]] = []
    for index, step in enumerate(steps):
        if step.watch is not None:
            watches.append((index, step))
            run.transcript.append({"step": step.label, "deferred": "watch"})
            continue
        assert step.build is not None
        method, path, query, body, content_type = step.build(run)
        answer = run.target.request(method, path, query=query, body=body,
                                    content_type=content_type)
        run.saw(answer)
        if step.mark and isinstance(answer.body, dict) and answer.status == 200:
            list_meta = answer.body.get("metadata") or {}
            run.marks.append(str(list_meta.get("resourceVersion")))
            run.token = list_meta.get("continue")
        if step.collects and answer.status == 200 and (
                collecting(answer.body) or (answer.body or {}).get("status") == "Success"):
            entry = {"step": step.label, "code": 200, "body": "<collected>"}
        else:
            entry = {"step": step.label, **run.normalizer.answer(answer)}
        run.transcript.append(entry)
        if step.settle is not None:
            _settle(run, step)
    if not watches:
        return
    assert sentinel is not None
    name = sentinel(run)
    for index, step in watches:
        assert step.watch is not None
        path, query = step.watch(run)
        events = run.target.watch(path, query, lambda e: (
            e.get("type") == "ADDED" and (e.get("object") or {}).get("metadata", {})
            .get("name") == name))
        # the garbage collector's steps (a real server's: a MODIFIED adding its finalizer,
        # a DELETED that may still carry it) compare as the embedded API's one DELETED
        run.transcript[index] = {"step": step.label, "events": [
            {"type": e.get("type"), "object": run.normalizer.object(collected(e.get("object")))}
            for e in events if not (e.get("type") == "MODIFIED" and collecting(e.get("object")))]}


#: The finalizers of the garbage collector.
GC_FINALIZERS = frozenset(("foregroundDeletion", "orphan"))


def collecting(obj: Any) -> bool:
    """Whether ``obj`` is being deleted and waits for the garbage collector only."""
    meta = (obj or {}).get("metadata") if isinstance(obj, dict) else None
    if not isinstance(meta, dict) or not meta.get("deletionTimestamp"):
        return False
    finalizers = set(meta.get("finalizers") or ())
    return bool(finalizers) and finalizers <= GC_FINALIZERS


def collected(obj: Any) -> Any:
    """``obj`` without the garbage collector's finalizers."""
    meta = (obj or {}).get("metadata") if isinstance(obj, dict) else None
    if not isinstance(meta, dict) or not set(meta.get("finalizers") or ()) & GC_FINALIZERS:
        return obj
    left = [f for f in meta["finalizers"] if f not in GC_FINALIZERS]
    meta = {k: v for k, v in meta.items() if k != "finalizers"}
    if left:
        meta["finalizers"] = left
    return {**obj, "metadata": meta}


def namespace(target: Target, name: str) -> None:
    """Create namespace ``name`` on ``target`` (waiting out a previous one's deletion)."""
    deadline = time.monotonic() + 60
    while True:
        answer = target.request("POST", "/api/v1/namespaces",
                                body={"apiVersion": "v1", "kind": "Namespace",
                                      "metadata": {"name": name}})
        if answer.status == 201:
            return
        if answer.status != 409 or time.monotonic() > deadline:
            raise AssertionError(f"{target.name}: namespace {name}: {answer}")
        time.sleep(0.2)


def compare(real: Target, embedded: Target, ns: str, steps: Sequence[Step], *,
            sentinel: Callable[[Run], Any] | None = None, cleanup: bool = True,
            unstick: Callable[[Target, str], Any] | None = None) -> list[Any]:
    """Run ``steps`` on both servers in namespace ``ns``; raise :class:`Mismatch` on a difference.

    Returns the (equal) normalised transcript.
    """
    runs = []
    for target in (real, embedded):
        namespace(target, ns)
        run = Run(target, ns)
        try:
            run_steps(run, steps, sentinel)
        finally:
            if cleanup and unstick is not None:
                unstick(target, ns)
            if cleanup:
                target.request("DELETE", f"/api/v1/namespaces/{ns}")
        runs.append(run)
    left, right = (r.normalizer.ranked(r.transcript) for r in runs)
    for index, (a, b) in enumerate(zip(left, right, strict=True)):
        if a != b:
            if os.environ.get("LIFECYCLE_DIFF_VERBOSE"):
                for name, transcript in (("real", left), ("embedded", right)):
                    print(f"--- {name}")
                    for entry in transcript:
                        print(json.dumps(entry, sort_keys=True, default=str)[:1500])
            raise Mismatch(report(index, steps, a, b))
    return left


def report(index: int, steps: Sequence[Step], real: Any, embedded: Any) -> str:
    """The first difference, with the steps that led to it."""
    lines = [f"step {index} differs ({steps[index].label}); the sequence (watches run last):"]
    lines += [f"  {i}: {s.label}" for i, s in enumerate(steps)]
    lines.append("real:     " + json.dumps(real, sort_keys=True, default=str)[:3000])
    lines.append("embedded: " + json.dumps(embedded, sort_keys=True, default=str)[:3000])
    return "\n".join(lines)


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def iter_pages(target: Target, path: str, limit: int) -> Iterator[Answer]:
    """Every page of a paginated list."""
    token: str | None = None
    while True:
        answer = target.request("GET", path, query={"limit": limit, "continue": token})
        yield answer
        token = ((answer.body or {}).get("metadata") or {}).get("continue")
        if answer.status != 200 or not token:
            return
