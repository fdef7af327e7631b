"""The crash explorer on a real Kubernetes API server (``lifecycle verify --kubeconfig``).

Only the Kubernetes API moves: the external system, the virtual clock that
drives the engine's requeues and the crash points stay in this process. The
engine writes through the operator's own client (:class:`KubeCluster`).

Every scenario run is isolated on the shared server. A :class:`RemoteAPI`
gives the run a world of its own: the namespaces the scenario names
(``default``, ``team-b``) are real namespaces with a run-unique prefix
(``lv1a2b3c4d-default``), labelled :data:`RUN_LABEL`, and the names of
cluster-scoped objects (ProviderConfigs, classes) carry the same prefix. The
adapter rewrites names on the way out and back, so the engine, the checks
and the traces see the scenario's own names, while lists only ever return
the run's objects: nothing the run did not create is read or written. After
the run its leftovers lose their finalizers, its cluster-scoped objects are
deleted and its namespaces deleted without waiting.

The CRDs the scenarios serve are installed when the server lacks them (and
then kept); a CRD the server already has is left as it is. Server timestamps
are real while the engine's clock is virtual: no check reads them.

A server that cannot be reached or refuses a request (401, 403) stops the
exploration with :class:`ServerRefused`, a ``BaseException`` as the engine
must not swallow it, which the command line prints as one line.
"""

from __future__ import annotations

import builtins
import hashlib
import json
import secrets
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from lifecycle.core.kind import Kind
from lifecycle.driver.cluster import KubeCluster, ResourceInfo, api_client, translate
from lifecycle.kube.errors import ApiError, Forbidden, NotFound, TooManyRequests
from lifecycle.kube.resources import ResourceType
from lifecycle.sim.apiserver import EmbeddedAPI
from lifecycle.verify.model import VerifyError

__all__ = ["RUN_LABEL", "RealServer", "RemoteAPI", "ServerRefused", "real_kinds"]

#: The label on every namespace a run creates; its value is the run's prefix.
RUN_LABEL = "verify.lifecycle.dev/run"
_CRD = ("apiextensions.k8s.io/v1", "CustomResourceDefinition")
_NAMESPACE = ("v1", "Namespace")
#: What every run does beyond the scenario's own kinds: (group, resource, verbs).
_CORE_RULES = (("", "namespaces", ("create", "delete", "get", "list")),
               ("", "secrets", ("create", "get", "list", "update", "delete")),
               ("", "events", ("create", "patch")),
               ("apiextensions.k8s.io", "customresourcedefinitions", ("get",)))
_KIND_VERBS = ("create", "get", "list", "update", "patch", "delete")


class ServerRefused(BaseException):
    """The real API server cannot be reached or refused a request: the exploration stops.

    A ``BaseException`` so that the engine's ``except Exception`` cannot turn
    it into retries and a misleading counterexample.
    """


def _line(exc: BaseException) -> str:
    text = str(exc).splitlines()
    return text[0][:200] if text else type(exc).__name__


def _stop(exc: ApiError) -> None:
    """Raise :class:`ServerRefused` for a refusal or a lost server; return otherwise."""
    if exc.status == 401 or (isinstance(exc, Forbidden) and "being terminated" not in str(exc)):
        raise ServerRefused(f"the API server refused a request ({exc.status} {exc.reason}): "
                            f"{_line(exc)}") from None
    if exc.status == 503 and str(exc).startswith("API server unreachable"):
        raise ServerRefused(f"lost the API server: {_line(exc)}") from None


#: How long in all a request may be retried while the server answers 429, in seconds.
PATIENCE = 30.0


def patiently(call: Callable[[], Any]) -> Any:
    """``call()``, retried while the server answers 429 (a new CRD's storage initialising,
    its priority and fairness shedding load), waiting as it asks (at most 1 s a time,
    :data:`PATIENCE` in all). The server's own load is no event of the scenario: were the
    engine to see it, it would back off on the virtual clock and the runs would differ."""
    deadline = time.monotonic() + PATIENCE
    while True:
        try:
            return call()
        except TooManyRequests as exc:
            if time.monotonic() > deadline:
                raise
            time.sleep(min(max(exc.retry_after, 0.05), 1.0))


class RealServer:
    """A real API server shared by every run of an exploration; each run opens a
    :class:`RemoteAPI` on it (:meth:`open`) and closes it (:meth:`close`).

    ``kubeconfig`` is only remembered for replay commands.
    """

    def __init__(self, client: Any, *, kubeconfig: str = "",
                 request_timeout: float = 30.0) -> None:
        self.client = client
        self.kubeconfig = kubeconfig
        self.host = str(client.configuration.host)
        self.cluster = KubeCluster(client, component="lifecycle-verify",
                                   request_timeout=request_timeout)
        #: The CRDs the scenarios serve, kept here for client-side field checks and scopes.
        self.mirror = EmbeddedAPI()
        #: CRDs this explorer installed because the server lacked them.
        self.installed: list[str] = []
        #: Objects a run could not clean up (one line each).
        self.leftovers: list[str] = []
        #: Runs opened so far.
        self.runs = 0
        self._checked_crds: set[str] = set()

    @classmethod
    def from_kubeconfig(cls, path: str, context: str | None = None) -> RealServer:
        """The server of kubeconfig ``path``; :class:`VerifyError` (one line) when the file
        is missing or unreadable, the server unreachable or the credentials refused."""
        try:
            Path(path).read_bytes()
        except OSError as exc:
            raise VerifyError(f"cannot read kubeconfig {path}: "
                              f"{exc.strerror or type(exc).__name__}") from None
        try:
            client = api_client(kubeconfig=path, context=context)
        except Exception as exc:  # the client's loader: any malformed file
            raise VerifyError(f"cannot load kubeconfig {path}: {type(exc).__name__}: "
                              f"{_line(exc)}") from None
        server = cls(client, kubeconfig=path)
        server.reachable()
        return server

    def _call(self, method: str, path: str, *, query: Mapping[str, str] | None = None,
              body: Any = None, content_type: str = "application/json") -> Any:
        """One request with the client's credentials; the parsed JSON answer (a 429 is
        retried, see :func:`patiently`)."""
        return patiently(lambda: self._once(method, path, query, body, content_type))

    def _once(self, method: str, path: str, query: Mapping[str, str] | None, body: Any,
              content_type: str) -> Any:
        try:
            m, url, headers, data, _ = self.client.param_serialize(
                method, path, query_params=list((query or {}).items()),
                header_params={"Accept": "application/json", "Content-Type": content_type},
                body=body, auth_settings=["BearerToken"])
            answer = self.client.call_api(m, url, header_params=headers, body=data,
                                          _request_timeout=self.cluster.request_timeout)
            answer.read()
        except Exception as exc:
            raise translate(exc) from None
        if not 200 <= answer.status < 300:
            from kubernetes.client import ApiException

            raise translate(ApiException(http_resp=answer))
        return json.loads(answer.data) if answer.data else None

    def reachable(self) -> None:
        """:class:`VerifyError` unless the server answers and accepts the credentials."""
        try:
            self._call("GET", "/version")
        except ApiError as exc:
            if exc.status == 503 and str(exc).startswith("API server unreachable"):
                raise VerifyError(f"cannot reach the API server at {self.host}: "
                                  f"{_line(exc)}") from None
            raise VerifyError(f"the API server at {self.host} refused the credentials "
                              f"({exc.status} {exc.reason}): {_line(exc)}") from None

    def check(self, kinds: Iterable[Any]) -> None:
        """:class:`VerifyError` naming what the credentials may not do that the runs need:
        namespaces, Secrets, Events, reading CRDs, and every verb on ``kinds`` and their
        ProviderConfigs (asked with SelfSubjectAccessReviews)."""
        rules = list(_CORE_RULES)
        for kind in kinds:
            group, plural = getattr(kind, "group", None), getattr(kind, "plural", None)
            if group is None or plural is None:
                continue
            rules.append((group, plural, _KIND_VERBS))
            rules.append((group, f"{plural}/status", ("update",)))
            api = getattr(kind, "provider_config_api", None)
            if isinstance(kind, Kind) and api:
                rules.append((api.rpartition("/")[0], "providerconfigs", _KIND_VERBS))
        denied = []
        for group, resource, verbs in dict.fromkeys(rules):
            plural, _, sub = resource.partition("/")
            for verb in verbs:
                review = {"apiVersion": "authorization.k8s.io/v1",
                          "kind": "SelfSubjectAccessReview",
                          "spec": {"resourceAttributes": {"group": group, "resource": plural,
                                                          "subresource": sub, "verb": verb}}}
                try:
                    answer = self._call(
                        "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
                        body=review)
                except ApiError as exc:
                    raise VerifyError(f"the API server at {self.host} refused an access "
                                      f"review ({exc.status} {exc.reason}): "
                                      f"{_line(exc)}") from None
                if not (answer.get("status") or {}).get("allowed"):
                    denied.append(f"{verb} {resource}{'.' + group if group else ''}")
        if denied:
            more = f" (and {len(denied) - 3} more)" if len(denied) > 3 else ""
            raise VerifyError(f"the API server at {self.host} refuses what the explorer needs "
                              f"(403): may not {', '.join(denied[:3])}{more}")

    def ensure_crd(self, doc: Mapping[str, Any]) -> None:
        """Install CRD ``doc`` when the server lacks it and wait until it is served; a CRD the
        server has is left as it is. Either way its kind is made known to the client."""
        name = doc["metadata"]["name"]
        spec = doc["spec"]
        version = next((v["name"] for v in spec["versions"] if v.get("storage")),
                       spec["versions"][0]["name"])
        self.cluster.register(ResourceInfo(spec["group"], version, spec["names"]["kind"],
                                           spec["names"]["plural"],
                                           spec.get("scope") == "Namespaced"))
        if name in self._checked_crds:
            return
        path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
        try:
            self._call("GET", f"{path}/{name}")
        except NotFound:
            try:
                self._call("POST", path, body=dict(doc))
            except ApiError as exc:
                _stop(exc)
                if exc.status != 409:  # another explorer installed it meanwhile
                    raise VerifyError(f"cannot install CRD {name}: {_line(exc)}") from None
            else:
                self.installed.append(name)
            self._wait_established(name)
        except ApiError as exc:
            _stop(exc)
            raise
        self._checked_crds.add(name)

    def _wait_established(self, name: str, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        path = f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}"
        while True:
            found = self._call("GET", path)
            conditions = {c.get("type"): c.get("status")
                          for c in (found.get("status") or {}).get("conditions") or []}
            if conditions.get("Established") == "True":
                return
            if time.monotonic() > deadline:
                raise VerifyError(f"CRD {name} was not established within {timeout:.0f} s")
            time.sleep(0.1)

    def open(self) -> RemoteAPI:
        """A fresh, isolated world for one run (its ``default`` namespace created)."""
        self.runs += 1
        api = RemoteAPI(self, f"lv{secrets.token_hex(4)}")
        api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})
        return api

    def close(self, api: RemoteAPI) -> None:
        """Clean up after a run: drop the finalizers of whatever it left, delete its
        cluster-scoped objects and its namespaces (without waiting). Failures are kept in
        :attr:`leftovers`, never raised."""
        merge = "application/merge-patch+json"
        unfinalize = {"metadata": {"finalizers": None}}
        for api_version, kind in sorted(api.written - {_NAMESPACE, ("v1", "Event")}):
            try:
                info = self.cluster.info(api_version, kind)
                if not info.namespaced:
                    continue
                for namespace in api.namespaces.values():
                    doc = self._call("GET", _path(info, namespace))
                    for obj in doc.get("items") or []:
                        if obj["metadata"].get("finalizers"):
                            self._call("PATCH", _path(info, namespace, obj["metadata"]["name"]),
                                       body=unfinalize, content_type=merge)
            except ApiError as exc:
                self.leftovers.append(f"{kind} in {api.prefix}-*: {_line(exc)}")
        for api_version, kind, name in sorted(api.cluster_objects):
            try:
                info = self.cluster.info(api_version, kind)
                self._call("PATCH", _path(info, None, name), body=unfinalize,
                           content_type=merge)
                self._call("DELETE", _path(info, None, name))
            except NotFound:
                continue
            except ApiError as exc:
                self.leftovers.append(f"{kind} {name}: {_line(exc)}")
        for namespace in api.namespaces.values():
            try:
                self._call("DELETE", f"/api/v1/namespaces/{namespace}")
            except NotFound:
                continue
            except ApiError as exc:
                self.leftovers.append(f"namespace {namespace}: {_line(exc)}")


def _path(info: ResourceInfo, namespace: str | None, name: str | None = None) -> str:
    path = f"/apis/{info.group}/{info.version}" if info.group else f"/api/{info.version}"
    if namespace:
        path += f"/namespaces/{namespace}"
    path += f"/{info.plural}"
    return path + (f"/{name}" if name else "")


class RemoteAPI:
    """One run's view of the real server, with the embedded API's interface.

    The scenario's names are rewritten on the way out (namespace ``N`` is
    ``<prefix>-N``, a cluster-scoped object ``n`` is ``<prefix>-n``) and back
    on the way in; lists return only the run's objects. CRD writes go to the
    server's mirror (:attr:`RealServer.mirror`) and install a CRD the server
    lacks. ``resource_version`` counts the run's writes, each mapped to the
    server's revision after it, so the stale-cache mode's lagging stores list
    the real server at the revisions they lag to.
    """

    def __init__(self, server: RealServer, prefix: str) -> None:
        self.server = server
        self.prefix = prefix
        self.cluster = server.cluster
        #: The run's namespaces: scenario name -> real name.
        self.namespaces: dict[str, str] = {}
        self._scenario_ns: dict[str, str] = {}
        #: (apiVersion, kind, real name) of every cluster-scoped object the run created.
        self.cluster_objects: set[tuple[str, str, str]] = set()
        #: (apiVersion, kind) of every kind the run wrote.
        self.written: set[tuple[str, str]] = set()
        self._revisions: list[int] = [0]

    # ------------------------------------------------------------ names
    def real_namespace(self, namespace: str) -> str:
        """The real name of the scenario's namespace ``namespace``."""
        real = f"{self.prefix}-{namespace}"
        if len(real) <= 63:
            return real
        return f"{self.prefix}-{hashlib.sha256(namespace.encode()).hexdigest()[:16]}"

    def _info(self, api_version: str, kind: str) -> ResourceInfo:
        try:
            return self.cluster.info(api_version, kind)
        except ApiError as exc:
            _stop(exc)
            raise

    def _renamed(self, info: ResourceInfo) -> bool:
        return not info.namespaced and (info.api_version, info.kind) != _NAMESPACE

    def _out_ns(self, namespace: str | None) -> str | None:
        if namespace is None:
            return None
        return self.namespaces.get(namespace) or self.real_namespace(namespace)

    def _out_name(self, info: ResourceInfo, name: str) -> str:
        if (info.api_version, info.kind) == _NAMESPACE:
            return self._out_ns(name) or name
        return f"{self.prefix}-{name}" if self._renamed(info) else name

    def _out(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """A copy of ``obj`` with real names (the caller's object is never changed)."""
        info = self._info(str(obj.get("apiVersion", "")), str(obj.get("kind", "")))
        body = dict(obj)
        meta = body["metadata"] = dict(obj.get("metadata") or {})
        if meta.get("namespace") and info.namespaced:
            meta["namespace"] = self._out_ns(meta["namespace"])
        if meta.get("name"):
            meta["name"] = self._out_name(info, meta["name"])
        if (info.api_version, info.kind) == _NAMESPACE:
            meta["labels"] = {**(meta.get("labels") or {}), RUN_LABEL: self.prefix}
        return body

    def _in(self, obj: dict[str, Any], info: ResourceInfo | None = None) -> dict[str, Any]:
        """``obj`` (as the server returned it) with the scenario's names."""
        info = info or self._info(str(obj.get("apiVersion", "")), str(obj.get("kind", "")))
        meta = obj.get("metadata") or {}
        if meta.get("namespace") in self._scenario_ns:
            meta["namespace"] = self._scenario_ns[meta["namespace"]]
        name = str(meta.get("name", ""))
        if (info.api_version, info.kind) == _NAMESPACE:
            meta["name"] = self._scenario_ns.get(name, name)
        elif self._renamed(info) and name.startswith(self.prefix + "-"):
            meta["name"] = name[len(self.prefix) + 1:]
        involved = obj.get("involvedObject")
        if isinstance(involved, dict) and involved.get("namespace") in self._scenario_ns:
            involved["namespace"] = self._scenario_ns[involved["namespace"]]
        return obj

    def _mine(self, info: ResourceInfo, obj: Mapping[str, Any]) -> bool:
        name = str((obj.get("metadata") or {}).get("name", ""))
        if (info.api_version, info.kind) == _NAMESPACE:
            return name in self._scenario_ns
        return not self._renamed(info) or name.startswith(self.prefix + "-")

    def _wrote(self, result: Any, info: ResourceInfo, namespace: str | None) -> None:
        """Note the server's revision after one of the run's writes."""
        self.written.add((info.api_version, info.kind))
        meta = ((result or {}).get("metadata") or {}) \
            if isinstance(result, dict) and result.get("kind") != "Status" else {}
        rv = meta.get("resourceVersion")
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            rv = None  # the write let it go: the server deleted it in a revision of its own
        if rv is None:  # deleted: the server's revision now is after the delete
            listed = self.server._call("GET", _path(info, namespace), query={"limit": "1"})
            rv = listed["metadata"]["resourceVersion"]
        self._revisions.append(int(rv))

    # ---------------------------------------------------- EmbeddedAPI's face
    @property
    def resource_version(self) -> str:
        """How many writes the run made (each maps to the server's revision after it)."""
        return str(len(self._revisions) - 1)

    def shared(self) -> RemoteAPI:
        """The embedded API's no-copy view: every answer here is fresh already."""
        return self

    def resource_type(self, api_version: str, kind: str) -> ResourceType:
        """The kind's type: from the mirror (with its schema) or from discovery."""
        try:
            return self.server.mirror.resource_type(api_version, kind)
        except NotFound:
            info = self._info(api_version, kind)
            return ResourceType(info.group, info.version, info.kind, info.plural,
                                info.namespaced)

    def _do(self, call: Any, *args: Any) -> Any:
        try:
            return patiently(lambda: call(*args))
        except ApiError as exc:
            _stop(exc)
            raise

    def get(self, api_version: str, kind: str, namespace: str | None, name: str) -> dict[str, Any]:
        """Read one object; ``NotFound`` if absent."""
        if (api_version, kind) == _CRD:
            return self.server.mirror.get(api_version, kind, namespace, name)
        info = self._info(api_version, kind)
        found = self._do(self.cluster.get, api_version, kind,
                         self._out_ns(namespace) if info.namespaced else None,
                         self._out_name(info, name))
        return self._in(found, info)

    def create(self, obj: dict[str, Any], **_: Any) -> dict[str, Any]:
        """Create an object (a CRD: install it if the server lacks it)."""
        if (obj.get("apiVersion"), obj.get("kind")) == _CRD:
            self.server.ensure_crd(obj)
            return self.server.mirror.create(obj)
        body = self._out(obj)
        info = self._info(body["apiVersion"], body["kind"])
        if (info.api_version, info.kind) == _NAMESPACE:
            name = obj["metadata"]["name"]
            self.namespaces[name] = body["metadata"]["name"]
            self._scenario_ns[body["metadata"]["name"]] = name
        created = self._do(self.cluster.create, body)
        if self._renamed(info):
            self.cluster_objects.add((info.api_version, info.kind, body["metadata"]["name"]))
        self._wrote(created, info, body["metadata"].get("namespace"))
        return self._in(created, info)

    def replace(self, obj: dict[str, Any], **_: Any) -> dict[str, Any]:
        """Write metadata and spec (a CRD: the mirror's copy)."""
        if (obj.get("apiVersion"), obj.get("kind")) == _CRD:
            self.server.ensure_crd(obj)
            return self.server.mirror.replace(obj)
        return self._write(self.cluster.replace, obj)

    def replace_status(self, obj: dict[str, Any], **_: Any) -> dict[str, Any]:
        """Write the status subresource."""
        return self._write(self.cluster.replace_status, obj)

    def _write(self, call: Any, obj: dict[str, Any]) -> dict[str, Any]:
        body = self._out(obj)
        info = self._info(body["apiVersion"], body["kind"])
        written = self._do(call, body)
        self._wrote(written, info, body["metadata"].get("namespace"))
        return self._in(written, info)

    def patch(self, api_version: str, kind: str, namespace: str | None, name: str,
              patch: dict[str, Any], **_: Any) -> dict[str, Any]:
        """Merge-patch an object."""
        info = self._info(api_version, kind)
        ns = self._out_ns(namespace) if info.namespaced else None
        patched = self._do(lambda: self.server._call(
            "PATCH", _path(info, ns, self._out_name(info, name)), body=patch,
            content_type="application/merge-patch+json"))
        self._wrote(patched, info, ns)
        return self._in(patched, info)

    def delete(self, api_version: str, kind: str, namespace: str | None, name: str,
               **options: Any) -> Any:
        """Request deletion (``propagation_policy``, ``preconditions`` as DeleteOptions)."""
        info = self._info(api_version, kind)
        ns = self._out_ns(namespace) if info.namespaced else None
        body: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if options.get("propagation_policy"):
            body["propagationPolicy"] = options["propagation_policy"]
        if options.get("preconditions"):
            body["preconditions"] = options["preconditions"]
        answer = self._do(lambda: self.server._call(
            "DELETE", _path(info, ns, self._out_name(info, name)), body=body))
        self._wrote(answer, info, ns)
        return self._in(answer, info) if answer and answer.get("kind") != "Status" else answer

    def record_event(self, involved: dict[str, Any], type: str, reason: str,
                     message: str, **_: Any) -> Any:
        """Record an Event in the run's namespace of ``involved`` (a cluster-scoped object's
        Events go to the run's ``default`` namespace, never the server's)."""
        about = self._out(involved)
        about["metadata"].setdefault("namespace", self._out_ns("default"))
        info = self._info("v1", "Event")
        event = self._do(self.cluster.record_event, about, type, reason, message)
        self._wrote(event, info, about["metadata"]["namespace"])
        return self._in(event, info)

    def list(self, api_version: str, kind: str, namespace: str | None = None,
             label_selector: str | None = None, **_: Any) -> tuple[list[dict[str, Any]], str]:
        """The run's objects of a kind (in one of its namespaces, or all of them)."""
        items = self.list_page(api_version, kind, namespace,
                               label_selector=label_selector)[0]
        return items, self.resource_version

    def list_page(self, api_version: str, kind: str, namespace: str | None = None, *,
                  label_selector: str | None = None, resource_version: str | None = None,
                  resource_version_match: str | None = None,
                  **_: Any) -> tuple[builtins.list[dict[str, Any]], str, None, None]:
        """One list of the run's objects; with ``resource_version`` (a count of the run's
        writes) and ``resource_version_match`` ``Exact``, as they were after that write."""
        if (api_version, kind) == _CRD:
            items = self.server.mirror.list(api_version, kind)[0]
            return items, self.resource_version, None, None
        info = self._info(api_version, kind)
        query: dict[str, str] = {}
        if label_selector:
            query["labelSelector"] = label_selector
        if resource_version is not None:
            query["resourceVersion"] = str(self._revisions[int(resource_version)])
            query["resourceVersionMatch"] = resource_version_match or "NotOlderThan"
        if (info.api_version, info.kind) == _NAMESPACE:
            query["labelSelector"] = f"{RUN_LABEL}={self.prefix}"
            scopes: list[str | None] = [None]
        elif not info.namespaced:
            scopes = [None]
        elif namespace is not None:
            scopes = [self._out_ns(namespace)]
        else:
            scopes = [self.namespaces[n] for n in sorted(self.namespaces)]
        found: list[dict[str, Any]] = []
        for scope in scopes:
            try:
                doc = self.server._call("GET", _path(info, scope), query=query)
            except NotFound:
                if namespace is None and info.namespaced:
                    continue  # a namespace of the run already gone
                raise
            except ApiError as exc:
                _stop(exc)
                raise
            kind_of = doc.get("kind", "").removesuffix("List") or info.kind
            for obj in doc.get("items") or []:
                obj.setdefault("apiVersion", info.api_version)
                obj.setdefault("kind", kind_of)
                if self._mine(info, obj):
                    found.append(self._in(obj, info))
        return found, resource_version or self.resource_version, None, None


def real_kinds(targets: Iterable[Any]) -> list[Any]:
    """Every kind the targets' scenarios write, for :meth:`RealServer.check`."""
    kinds: dict[str, Any] = {}
    for target in targets:
        for kind in (target.kind, target.tracking, *target.listed):
            if kind is not None:
                kinds.setdefault(f"{kind.group}/{kind.kind}", kind)
    return list(kinds.values())

