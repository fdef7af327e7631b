"""API calls per object of the kinds as shipped, counted at the API server.

The real operator runs as ``lifecycle run`` wires it (a manager over the
cached reader with informers, connection Secrets read from an informer), over
HTTP to the embedded API; every request it makes is counted by verb and
resource at the server's dispatch. Objects are created and deleted in
process, so only the operator's requests are counted. The budgets:

* from creation to Ready, settled (trailing status writes and Events
  included): at most 6 calls per object;
* from deletion to gone: at most 2 calls per object (the journal entry
  before the external delete, and the finalizer's removal), when the
  external delete completes at once.

The supporting reads of a pass (the namespace, the provider config and its
credentials Secret) come from informers and the name index is listed as the
workers start, so none of them reaches the server while objects are
reconciled: they are charged to the objects like any other call, and must
stay at zero. Only the provider config's usage status (one write per burst of
changes, whatever N) is counted and printed but not charged. A
DatabaseInstance takes exactly 6 calls to Ready and 2 to gone. These are
counts, not timings: waiting only decides when to count.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import pytest

from lifecycle.core.kind import Kind
from lifecycle.machines.database import DatabaseInstance
from lifecycle.sim import http as sim_http
from lifecycle.sim.apiserver import EmbeddedAPI
from lifecycle.sim.embedded import register_kinds

N = 20
#: The provider config's credentials Secret (seeded by ``register_kinds``).
CREDENTIALS = "default-credentials"
#: The one write made for the operator as a whole, not per object: the provider config's
#: usage status (once per burst of changes). Counted, printed, and kept out of the budget.
SHARED = ("update providerconfigs/status",)
#: What a pass reads besides its object, all served by informers: never sent while
#: objects are reconciled (the name index's list is made as the workers start).
SUPPORTING = ("get namespaces", "get providerconfigs", "get secrets (credentials)",
              "list databaseinstances", "list roles", "list databases", "list grants")
#: Calls per object from creation to Ready (settled), and from deletion to gone.
READY_BUDGET, DELETE_BUDGET = 6, 2


def classify(face: Any, method: str, path: str) -> str:
    """``"<verb> <resource>[/<subresource>]"`` of one request."""
    url = urlsplit(path)
    parts = [unquote(p) for p in url.path.split("/") if p]
    try:
        found = face.route(parts)
    except Exception:  # discovery, OpenAPI: not a resource
        return f"{method.lower()} discovery"
    resource = found.rtype.plural + (f"/{found.subresource}" if found.subresource else "")
    if resource == "secrets" and parts[-1] == CREDENTIALS:
        resource = "secrets (credentials)"
    if method == "GET":
        watch = (parse_qs(url.query).get("watch") or [""])[-1] in ("true", "1")
        verb = "watch" if watch else ("list" if found.name is None else "get")
    else:
        verb = {"POST": "create", "PUT": "update", "PATCH": "patch",
                "DELETE": "delete"}.get(method, method.lower())
    return f"{verb} {resource}"


class Counted:
    """The embedded API over HTTP, counting every request by verb and resource."""

    def __init__(self, kinds: Sequence[Kind], monkeypatch: pytest.MonkeyPatch) -> None:
        self.counts: Counter[str] = Counter()
        self.lock = threading.Lock()
        #: The collections informers listed (a list in pages) and those they watch.
        self.listed: set[tuple[str, str, str]] = set()
        self.watched: set[tuple[str, str, str]] = set()
        self.config_apis = sorted({kind.provider_config_api for kind in kinds})
        #: The operator's manager, once started (its controllers say when it is idle).
        self.manager: Any = None
        original = sim_http._Handler._dispatch

        def counted(handler: Any, method: str) -> None:
            key = classify(handler.face, method, handler.path)
            with self.lock:
                self.counts[key] += 1
                if method == "GET":
                    self._note_informer(handler.path)
            original(handler, method)

        monkeypatch.setattr(sim_http._Handler, "_dispatch", counted)
        self.api = EmbeddedAPI()
        register_kinds(self.api, kinds)
        self.face = sim_http.APIServerHTTP(self.api).start()

    def _note_informer(self, path: str) -> None:
        url = urlsplit(path)
        query = parse_qs(url.query)
        key = (url.path, (query.get("labelSelector") or [""])[-1],
               (query.get("fieldSelector") or [""])[-1])
        if (query.get("watch") or [""])[-1] in ("true", "1"):
            self.watched.add(key)
        elif "limit" in query:  # an informer's list (a plain list reads once, unpaged)
            self.listed.add(key)

    def wait_started(self, timeout: float = 30.0) -> None:
        """Wait until the operator's start-up requests are over: every informer that listed
        has opened its watch, and every ProviderConfig carries the usage status the
        operator writes as it starts."""
        from lifecycle.core.kind import PROVIDER_CONFIG_KIND

        def started() -> bool:
            with self.lock:
                watching = bool(self.listed) and self.listed <= self.watched
            configs = [c for api in self.config_apis
                       for c in self.api.list(api, PROVIDER_CONFIG_KIND)[0]]
            return watching and all("users" in (c.get("status") or {}) for c in configs)

        deadline = time.monotonic() + timeout
        while not started():
            with self.lock:
                unwatched = sorted(self.listed - self.watched)
            assert time.monotonic() < deadline, (
                f"the operator did not finish starting: {unwatched} listed, never watched")
            time.sleep(0.02)

    def take(self) -> Counter[str]:
        """The counts since the last take, and start counting afresh."""
        with self.lock:
            counts, self.counts = self.counts, Counter()
        return counts

    def idle(self) -> bool:
        """Whether the operator has seen every change the server holds and has nothing left
        to do: every informer of every controller has caught up with the server's
        resourceVersion (bookmarks carry it to watches with nothing to deliver), and no queue
        holds a key ready or in flight. The version is read before and after, so no write
        slipped in between."""
        version = int(self.api.resource_version)
        for controller in list(self.manager.controllers.values()):
            for informer in (controller.informer, *controller.watches):
                seen = informer.resource_version
                if seen is None or int(seen) < version:
                    return False
            if len(controller.queue) or controller.queue.in_flight():
                return False
        return int(self.api.resource_version) == version

    def settle(self, done: Callable[[], bool], objects: Callable[[], list[dict[str, Any]]],
               timeout: float = 30.0) -> None:
        """Wait until ``done()`` and the operator is :meth:`idle` (so every call the change
        causes has been made)."""
        deadline = time.monotonic() + timeout
        while not (done() and self.idle()):
            if time.monotonic() > deadline:
                stuck = [(o["metadata"]["name"], (o.get("status") or {}).get("conditions"))
                         for o in objects()[:2]]
                raise AssertionError(f"the operator did not get there and go idle in time "
                                     f"(done: {done()}): {stuck}")
            time.sleep(0.05)


def is_ready(obj: dict[str, Any]) -> bool:
    """Whether an object's status carries Ready=True."""
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (obj.get("status") or {}).get("conditions") or [])


def breakdown(counts: Counter[str], n: int) -> str:
    """Calls per object by request, most first."""
    total = sum(counts.values())
    rows = ", ".join(f"{k}: {v / n:.2f}" for k, v in counts.most_common())
    return f"{total / n:.2f} calls per object ({rows})"


@pytest.fixture
def operator(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., Counted]]:
    """Start the embedded API and the operator, as ``lifecycle run`` wires it."""
    from lifecycle.driver.cache import cached_manager
    from lifecycle.driver.cluster import KubeCluster, api_client
    from lifecycle.driver.manager import ManagerOptions

    started: list[Any] = []

    def start(pairs: Sequence[tuple[Kind, Any]],
              prepare: Callable[[EmbeddedAPI], None] = lambda api: None) -> Counted:
        server = Counted([kind for kind, _ in pairs], monkeypatch)
        started.append(server.face)
        prepare(server.api)
        cluster = KubeCluster(api_client(host=server.face.url), [kind for kind, _ in pairs])
        manager = cached_manager(cluster, list(pairs), ManagerOptions(workers=2), secrets=True)
        manager.start()
        started.append(manager)
        server.manager = manager
        manager.wait_synced()
        assert manager.cluster.wait_synced()  # Namespaces, Secrets and credentials too
        server.wait_started()  # the watches and the usage status trail the sync
        server.take()
        return server

    yield start
    for thing in reversed(started):
        thing.stop()


def measure(server: Counted, kind: Kind, manifests: Sequence[dict[str, Any]]
            ) -> tuple[Counter[str], Counter[str]]:
    """Create ``manifests`` (of ``kind``), count to Ready; delete them, count to gone."""
    api = server.api
    names = [m["metadata"]["name"] for m in manifests]

    def objects() -> list[dict[str, Any]]:
        return [o for o in api.list(kind.api_version, kind.kind, "default")[0]
                if o["metadata"]["name"] in names]

    server.take()
    for manifest in manifests:
        api.create(manifest)
    server.settle(lambda: sum(map(is_ready, objects())) == len(names), objects)
    to_ready = server.take()
    for name in names:
        api.delete(kind.api_version, kind.kind, "default", name)
    server.settle(lambda: not objects(), objects)
    return to_ready, server.take()


def per_object(counts: Counter[str]) -> int:
    """The calls charged to the objects: all but :data:`SHARED`."""
    return sum(v for k, v in counts.items() if k not in SHARED)


def check(kind: str, to_ready: Counter[str], to_gone: Counter[str], n: int = N,
          exact: tuple[float, float] | None = None) -> None:
    """Assert both budgets (``exact``: the figures themselves), the breakdown in the
    message, and that no supporting read reached the server."""
    ready_calls, gone_calls = per_object(to_ready) / n, per_object(to_gone) / n
    for counts in (to_ready, to_gone):
        assert not set(counts) & set(SUPPORTING), f"{kind}: {breakdown(counts, n)}"
    assert ready_calls <= READY_BUDGET, f"{kind} to Ready: {breakdown(to_ready, n)}"
    assert gone_calls <= DELETE_BUDGET, f"{kind} to gone: {breakdown(to_gone, n)}"
    if exact is not None:
        assert (ready_calls, gone_calls) == exact, (
            f"{kind}: {breakdown(to_ready, n)} | {breakdown(to_gone, n)}")


def database_instance(name: str) -> dict[str, Any]:
    """A DatabaseInstance with a connection Secret (and so a generated password)."""
    return {"apiVersion": DatabaseInstance.api_version, "kind": "DatabaseInstance",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"forProvider": {"engine": "postgres", "storageGB": 20},
                     "writeConnectionSecretToRef": {"name": f"{name}-conn"}}}


def test_a_database_instance_as_shipped_stays_within_budget(
        operator: Callable[..., Counted]) -> None:
    from lifecycle.providers.simcloud import DatabaseConnector, SimCloud

    cloud = SimCloud(seed=0, create_polls=0, modify_polls=0, delete_polls=0)
    server = operator([(DatabaseInstance, DatabaseConnector(cloud))])
    to_ready, to_gone = measure(server, DatabaseInstance,
                                [database_instance(f"db-{i:03d}") for i in range(N)])
    assert cloud.instances() == {}
    print("DatabaseInstance", breakdown(to_ready, N), "|", breakdown(to_gone, N))
    check("DatabaseInstance", to_ready, to_gone, exact=(READY_BUDGET, DELETE_BUDGET))


@pytest.mark.postgres
def test_the_postgres_kinds_stay_within_budget(
        operator: Callable[..., Counted], server: Any, postgres_admins: Any) -> None:
    import uuid

    from lifecycle.machines.postgres import Database, Grant, Role, kinds
    from lifecycle.providers.postgres.scenarios.testing import manifest
    from lifecycle.sim.embedded import seed_provider_config

    admin = postgres_admins["superuser"]
    pg = server

    def prepare(api: EmbeddedAPI) -> None:
        from lifecycle.core.kind import PROVIDER_CONFIG_KIND
        config_api = Role.provider_config_api
        from lifecycle.kube.errors import NotFound
        for deleting in ((config_api, PROVIDER_CONFIG_KIND, None, "default"),
                         ("v1", "Secret", "default", CREDENTIALS)):
            with contextlib.suppress(NotFound):  # none is seeded for the PostgreSQL kinds
                api.delete(*deleting)
        seed_provider_config(api, credentials={"username": admin.user,
                                               "password": admin.password},
                             namespace="default", api_version=config_api,
                             spec={"host": pg.host, "port": pg.port, "sslmode": "disable",
                                   "database": "postgres"})

    pairs = [(k, c) for k, c in kinds() if k in (Role, Database, Grant)]
    counted = operator(pairs, prepare)
    tag = uuid.uuid4().hex[:6]
    roles = [f"bud{tag}r{i}" for i in range(N)]
    dbs = [f"bud{tag}d{i}" for i in range(N)]
    phases = [
        (Role, [manifest("Role", f"r{i}", external_name=roles[i], login=True)
                for i in range(N)]),
        (Database, [manifest("Database", f"d{i}", external_name=dbs[i]) for i in range(N)]),
        (Grant, [manifest("Grant", f"g{i}", role=roles[i], database=dbs[i],
                          privileges=["CONNECT"]) for i in range(N)]),
    ]
    created: list[tuple[Kind, Counter[str]]] = []
    api = counted.api
    for kind, manifests in phases:
        counted.take()
        for m in manifests:
            api.create(m)

        def listed(k: Kind = kind) -> list[dict[str, Any]]:
            return api.list(k.api_version, k.kind, "default")[0]

        counted.settle(lambda ls=listed: sum(map(is_ready, ls())) == N, listed)
        created.append((kind, counted.take()))
    gone: dict[str, Counter[str]] = {}
    for kind, manifests in reversed(phases):
        for m in manifests:
            api.delete(kind.api_version, kind.kind, "default", m["metadata"]["name"])
        counted.settle(lambda k=kind: not api.list(k.api_version, k.kind, "default")[0],
                       lambda k=kind: api.list(k.api_version, k.kind, "default")[0])
        gone[kind.kind] = counted.take()
    lines = [f"{kind.kind}: {breakdown(c, N)} | {breakdown(gone[kind.kind], N)}"
             for kind, c in created]
    print("\n".join(lines))
    for kind, to_ready in created:
        check(kind.kind, to_ready, gone[kind.kind])
