"""The PostgreSQL workload of the end-to-end benchmark, beside the Go provider-sql peer.

Against one throwaway PostgreSQL server (:class:`~lifecycle.providers.postgres.scenarios.testing.
PostgresServer`, the one the tests use) each operator in turn manages N Roles
that can log in (generated passwords), N Databases each owned by one of them,
and N Grants (CONNECT and CREATE on database *i* for role *i+1*):

1. **to Ready**: all 3N created at once; the time until every one is Ready;
2. **change**: one field of each changed (connection limits 10 -> 20, the
   Grant gains TEMPORARY); the time until PostgreSQL shows every change;
3. **drift**: the same three made by hand in PostgreSQL (``ALTER ROLE ...
   CONNECTION LIMIT 5``, ``ALTER DATABASE ...``, ``REVOKE CREATE ...``), the
   objects' drifts spread evenly over one poll interval so that each falls
   at its own moment of the operator's cycle; per object the time from its
   drift until the operator has put it back (the peer notices at its poll,
   so its time is bounded by the poll interval; lifecycle polls at the same
   interval and also sweeps the catalogue every ``Timing.sweep`` seconds,
   10 for these kinds as shipped, queueing only the drifted objects);
4. **delete**: all 3N deleted; the time until they are gone from the API.

The operators: ``lifecycle run --kinds Role Database Grant`` (the kinds as
shipped, polling every minute and sweeping every ten seconds) and the Go peer
of ``benchmarks/sqlpeer.py`` (crossplane-runtime, API group
``postgresql.sql.crossplane.io``, started with the same poll interval). Each
runs as its own user on the same API server; API calls, CPU (whole workload)
and RSS of each process are measured as for DatabaseInstance. The
``pg_*_ratio_vs_provider_sql`` keys are ours over the peer's.
"""

from __future__ import annotations

import importlib
import re
import statistics
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

from benchmarks.e2e_servers import BenchError, Client, Tracker, cpu_seconds, rss_bytes
from lifecycle.core.errors import LifecycleError

PEER = "provider-sql"
OURS_GROUP = "postgresql.lifecycle.dev/v1alpha1"
PEER_GROUP = "postgresql.sql.crossplane.io/v1alpha1"
CONFIG = "bench-pg"
KINDS = (("Role", "roles"), ("Database", "databases"), ("Grant", "grants"))
#: Lines of the peer's log that are a connection reset or refusal it met.
RESET_LINE = re.compile(r"connection reset by peer|connection refused|broken pipe|"
                        r"http2: client connection lost|unexpected EOF", re.I)


def peer() -> Any:
    """The provider-sql peer's launcher module (``benchmarks/sqlpeer.py``), or a one-line error."""
    try:
        return importlib.import_module("benchmarks.sqlpeer")
    except ModuleNotFoundError as exc:
        if exc.name != "benchmarks.sqlpeer":
            raise
        raise BenchError("the provider-sql peer is not in this checkout "
                         "(benchmarks/sqlpeer.py is missing); run without --peers provider-sql"
                         ) from None


def poll_interval() -> float:
    """The shipped PostgreSQL kinds' Ready poll interval, which the peer is given too."""
    from lifecycle.machines.postgres import SQL_TIMING

    return float(SQL_TIMING.poll)


@attrs.frozen
class Flavor:
    """One operator's spelling of the workload: its API group, names and manifests."""

    operator: str
    api_version: str
    prefix: str  # of the PostgreSQL names, so both operators' objects never meet
    namespaced: bool

    def pg_name(self, short: str, i: int) -> str:
        """The PostgreSQL name of role (``r``) or database (``d``) number ``i``."""
        return f"{self.prefix}_{short}_{i:05d}"

    def path(self, plural: str, namespace: str) -> str:
        """The collection path of ``plural``."""
        group = f"/apis/{self.api_version}"
        return f"{group}/namespaces/{namespace}/{plural}" if self.namespaced \
            else f"{group}/{plural}"

    def name(self, kind: str, i: int) -> str:
        """The object name of ``kind`` number ``i``."""
        return f"{self.prefix}-{kind.lower()}-{i:05d}"

    def manifests(self, i: int, n: int, namespace: str) -> list[dict[str, Any]]:
        """Role, Database and Grant number ``i`` of ``n``."""
        role, db = self.pg_name("r", i), self.pg_name("d", i)
        grantee = self.pg_name("r", (i + 1) % n)
        ours = self.operator == "lifecycle"
        annotation = "lifecycle.dev/external-name" if ours else "crossplane.io/external-name"
        secret_ref = ({"name": f"{self.name('Role', i)}-conn"} if ours else
                      {"name": f"{self.name('Role', i)}-conn", "namespace": namespace})
        role_params = ({"login": True, "connectionLimit": 10} if ours else
                       {"privileges": {"login": True}, "connectionLimit": 10})
        out = []
        for kind, params, external in (
                ("Role", role_params, role),
                ("Database", {"owner": role, "connectionLimit": 10}, db),
                ("Grant", {"role": grantee, "database": db,
                           "privileges": ["CONNECT", "CREATE"]}, None)):
            metadata: dict[str, Any] = {"name": self.name(kind, i)}
            if self.namespaced:
                metadata["namespace"] = namespace
            if external:
                metadata["annotations"] = {annotation: external}
            spec: dict[str, Any] = {"forProvider": params, "providerConfigRef": {"name": CONFIG}}
            if kind == "Role":
                spec["writeConnectionSecretToRef"] = secret_ref
            out.append({"apiVersion": self.api_version, "kind": kind, "metadata": metadata,
                        "spec": spec})
        return out


CHANGES = {"Role": {"spec": {"forProvider": {"connectionLimit": 20}}},
           "Database": {"spec": {"forProvider": {"connectionLimit": 20}}},
           "Grant": {"spec": {"forProvider": {"privileges": ["CONNECT", "CREATE", "TEMPORARY"]}}}}


class Catalog:
    """What PostgreSQL shows of one flavour's objects, read as the admin."""

    def __init__(self, server: Any, flavor: Flavor, n: int) -> None:
        self.server = server
        self.flavor = flavor
        self.n = n

    def state(self) -> dict[tuple[str, int], Any]:
        """Per (kind, i): a role's or database's connection limit, a grant's privileges."""
        like = f"{self.flavor.prefix}\\_%"
        found: dict[tuple[str, int], Any] = {}
        with self.server.connect() as conn:
            for name, limit in conn.execute(
                    "SELECT rolname, rolconnlimit FROM pg_roles WHERE rolname LIKE %s", (like,)):
                found[("Role", int(name.rsplit("_", 1)[1]))] = limit
            for name, limit in conn.execute(
                    "SELECT datname, datconnlimit FROM pg_database WHERE datname LIKE %s",
                    (like,)):
                found[("Database", int(name.rsplit("_", 1)[1]))] = limit
            grants: dict[int, set[str]] = {}
            for name, privilege in conn.execute(
                    "SELECT d.datname, a.privilege_type FROM pg_database d "
                    "CROSS JOIN LATERAL aclexplode(d.datacl) a "
                    "JOIN pg_roles r ON r.oid = a.grantee "
                    "WHERE d.datname LIKE %s AND r.rolname LIKE %s", (like, like)):
                index = int(name.rsplit("_", 1)[1])
                grants.setdefault(index, set()).add(privilege)
            for index, privileges in grants.items():
                found[("Grant", index)] = frozenset(privileges)
        return found

    def drift(self, spread: float = 0.0,
              made: dict[int, float] | None = None) -> dict[int, float]:
        """Make one change by hand to every object, object *i* ``i * spread / n`` seconds
        after the first, so each falls at its own moment of the operators' poll interval;
        return when each object's changes were made (``time.perf_counter``), also filled
        into ``made`` as each is."""
        from psycopg import sql

        made = {} if made is None else made
        started = time.perf_counter()
        with self.server.connect() as conn:
            for i in range(self.n):
                pause = started + i * spread / self.n - time.perf_counter()
                if pause > 0:
                    time.sleep(pause)
                role, db = self.flavor.pg_name("r", i), self.flavor.pg_name("d", i)
                grantee = self.flavor.pg_name("r", (i + 1) % self.n)
                conn.execute(sql.SQL("ALTER ROLE {} CONNECTION LIMIT 5").format(
                    sql.Identifier(role)))
                conn.execute(sql.SQL("ALTER DATABASE {} CONNECTION LIMIT 5").format(
                    sql.Identifier(db)))
                conn.execute(sql.SQL("REVOKE CREATE ON DATABASE {} FROM {}").format(
                    sql.Identifier(db), sql.Identifier(grantee)))
                made[i] = time.perf_counter()
        return made


def _wants(limit: int, privileges: frozenset[str]) -> Callable[[str, Any], bool]:
    def ok(kind: str, value: Any) -> bool:
        if kind == "Grant":
            return value is not None and privileges <= value
        return value == limit
    return ok


def _until(catalog: Catalog, ok: Callable[[str, Any], bool], timeout: float,
           since: dict[int, float] | None = None) -> dict[tuple[str, int], float]:
    """Poll the catalog until every object satisfies ``ok``; when each first did, in seconds
    from now (or from ``since[i]``, when object *i*'s drift was made). With ``since``, an
    object counts only once its drift is in it when the catalog is read: ``since`` may
    still be filling (the drifts being made meanwhile, :func:`_drift_and_repair`)."""
    started = time.perf_counter()
    done: dict[tuple[str, int], float] = {}
    keys = [(kind, i) for kind, _ in KINDS for i in range(catalog.n)]
    while len(done) < len(keys) and time.perf_counter() - started < timeout:
        drifted = dict(since) if since is not None else None
        state = catalog.state()
        clock = time.perf_counter()
        for key in keys:
            if key in done or (drifted is not None and key[1] not in drifted):
                continue
            if ok(key[0], state.get(key)):
                done[key] = clock - (drifted[key[1]] if drifted is not None else started)
        time.sleep(0.2)
    return done


def _drift_and_repair(catalog: Catalog, ok: Callable[[str, Any], bool], spread: float,
                      timeout: float) -> dict[tuple[str, int], float]:
    """Make the drifts (spread over ``spread`` seconds) while the catalog is polled, so each
    object's repair is timed from its own drift, however early it comes."""
    made: dict[int, float] = {}
    box: list[dict[tuple[str, int], float]] = []
    watcher = threading.Thread(target=lambda: box.append(_until(catalog, ok, timeout,
                                                                since=made)),
                               name="drift-watch", daemon=True)
    watcher.start()
    catalog.drift(spread=spread, made=made)
    watcher.join(timeout + 5.0)
    return box[0] if box else {}


def _install(client: Client, documents: list[dict[str, Any]], timeout: float = 60.0) -> None:
    """Create the CRDs that are missing and wait until every one is Established."""
    base = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    for doc in documents:
        if client.call("GET", f"{base}/{doc['metadata']['name']}", missing=None) is None:
            client.call("POST", base, doc)
    deadline = time.monotonic() + timeout
    for doc in documents:
        while True:
            found = client.call("GET", f"{base}/{doc['metadata']['name']}")
            conditions = {c.get("type"): c.get("status")
                          for c in (found.get("status") or {}).get("conditions") or []}
            if conditions.get("Established") == "True":
                break
            if time.monotonic() > deadline:
                raise BenchError(f"CRD {doc['metadata']['name']} was not established within "
                                 f"{timeout:.0f} s")
            time.sleep(0.1)


def _setup(client: Client, flavor: Flavor, server: Any, pg: Any, namespace: str,
           peer_module: Any) -> None:
    """The flavour's ProviderConfig and admin Secret (and the peer's CRDs).

    The Secret is in the round's namespace, the one the operator serves: an operator of
    one namespace follows only the credentials Secrets in it (elsewhere it would read
    them afresh every few seconds), so a team running it keeps its credentials there.
    """
    secret = f"{CONFIG}-{flavor.prefix}-admin"
    if flavor.operator == "lifecycle":
        data = {"username": pg.user, "password": pg.password}
        config = {"apiVersion": "lifecycle.dev/v1alpha1", "kind": "ProviderConfig",
                  "metadata": {"name": CONFIG},
                  "spec": {"host": pg.host, "port": pg.port, "sslmode": "disable",
                           "credentials": {"secretRef": {"name": secret,
                                                         "namespace": namespace}}}}
    else:
        _install(client, peer_module.crds())
        wanted, config = peer_module.provider_config(namespace, secret, {
            "host": pg.host, "port": pg.port, "user": pg.user, "password": pg.password,
            "sslmode": "disable"})
        data = wanted["stringData"]
        config["metadata"]["name"] = CONFIG
    base = f"/api/v1/namespaces/{namespace}/secrets"
    client.call("DELETE", f"{base}/{secret}", missing=None)
    client.call("POST", base, {"apiVersion": "v1", "kind": "Secret",
                               "metadata": {"name": secret, "namespace": namespace},
                               "stringData": data})
    configs = f"/apis/{config['apiVersion']}/providerconfigs"
    current = client.call("GET", f"{configs}/{CONFIG}", missing=None)
    if current is None:
        client.call("POST", configs, config)
    else:
        config["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        client.call("PUT", f"{configs}/{CONFIG}", config)


def _start(flavor: Flavor, server: Any, workdir: Path, tag: str, namespace: str,
           peer_module: Any) -> tuple[Any, Callable[[], int]]:
    """Start the flavour's operator; return it and a function counting its resets."""
    from benchmarks import e2e, e2e_netcount

    kubeconfig = server.operator_kubeconfig(flavor.operator)
    if flavor.operator == "lifecycle":
        operator = e2e.start_operator("lifecycle", kubeconfig, workdir, tag, namespace,
                                      kinds=tuple(kind for kind, _ in KINDS), connector=None)

        def ours() -> int:
            return int(e2e_netcount.read(str(operator.stats)).get("total", 0))
        return operator.process, ours
    log = workdir / f"{tag}.log"
    try:
        peer_module.build()
        started = peer_module.start(kubeconfig, poll=poll_interval(), user_agent=flavor.operator,
                                    log=log)
    except LifecycleError as exc:
        raise BenchError(f"the {PEER} peer: {exc}") from None

    def theirs() -> int:
        text = log.read_text(errors="replace") if log.exists() else ""
        return sum(1 for line in text.splitlines() if RESET_LINE.search(line))
    return _Running(started), theirs


class _Running:
    """The peer's process seen as the benchmark sees its own children (CPU, RSS, stop)."""

    def __init__(self, peer: Any) -> None:
        self.peer = peer

    @property
    def cpu(self) -> float:
        return cpu_seconds(self.peer.pid)

    @property
    def rss(self) -> int:
        return rss_bytes(self.peer.pid)

    def stop(self) -> None:
        self.peer.stop()


def one(flavor: Flavor, server: Any, config: Any, pg: Any, workdir: Path, tag: str,
        peer_module: Any) -> dict[str, Any]:
    """The whole workload for one operator."""
    n = config.pg_n
    namespace = f"bench-{tag}"
    client = Client(server.endpoint)
    client.ensure_namespace(namespace)
    _setup(client, flavor, server, pg, namespace, peer_module)
    from benchmarks.e2e import is_ready, settle

    trackers = {kind: Tracker(server.endpoint, flavor.path(plural, namespace), is_ready).start()
                for kind, plural in KINDS}
    process, resets = _start(flavor, server, workdir, tag, namespace, peer_module)
    catalog = Catalog(pg, flavor, n)
    row: dict[str, Any] = {"operator": flavor.operator, "n": n}
    calls: dict[str, dict[str, int]] = {}
    try:
        time.sleep(0.5)
        server.reset()
        cpu0, rss0 = process.cpu, process.rss
        started = time.perf_counter()
        docs = [doc for i in range(n) for doc in flavor.manifests(i, n, namespace)]
        for doc in docs:
            client.call("POST", flavor.path(KINDS[[k for k, _ in KINDS].index(doc["kind"])][1],
                                            namespace), doc)
        ready = all(t.wait(lambda t: len(t.ready_at) >= n, config.timeout)
                    for t in trackers.values())
        row["time_to_ready_seconds"] = time.perf_counter() - started
        row["all_ready"] = ready
        calls["ready"] = settle(lambda: server.counts(flavor.operator), config.timeout)
        row["rss_growth_bytes_per_object"] = (process.rss - rss0) / (3 * n)
        window = 3 * poll_interval() + 30

        server.reset()
        started = time.perf_counter()
        for kind, plural in KINDS:
            for i in range(n):
                client.call("PATCH", f"{flavor.path(plural, namespace)}/{flavor.name(kind, i)}",
                            CHANGES[kind], content_type="application/merge-patch+json")
        changed = _until(catalog, _wants(20, frozenset({"CREATE", "TEMPORARY"})), window)
        row["change_seconds"] = time.perf_counter() - started
        row["all_changed"] = len(changed) == 3 * n
        calls["change"] = settle(lambda: server.counts(flavor.operator), config.timeout)

        server.reset()
        repaired = _drift_and_repair(catalog, _wants(20, frozenset({"CREATE", "TEMPORARY"})),
                                     poll_interval(), window + poll_interval())
        row["drift_repair_median_seconds"] = (statistics.median(repaired.values())
                                              if repaired else None)
        row["drift_repair_max_seconds"] = max(repaired.values()) if repaired else None
        row["all_repaired"] = len(repaired) == 3 * n
        calls["drift"] = settle(lambda: server.counts(flavor.operator), config.timeout)

        server.reset()
        started = time.perf_counter()
        for kind, plural in reversed(KINDS):
            for i in range(n):
                client.call("DELETE", f"{flavor.path(plural, namespace)}/{flavor.name(kind, i)}",
                            missing=None)
        gone = all(t.wait(lambda t: len(t.gone_at) >= n, config.timeout)
                   for t in trackers.values())
        row["delete_seconds"] = time.perf_counter() - started
        row["all_deleted"] = gone
        calls["delete"] = settle(lambda: server.counts(flavor.operator), config.timeout)
        row["operator_cpu_seconds"] = process.cpu - cpu0
    finally:
        for tracker in trackers.values():
            tracker.stop()
        process.stop()
        if not server.fresh_per_round:
            client.call("DELETE", f"/api/v1/namespaces/{namespace}", missing=None)
        client.close()
    objects = 3 * n
    row["api_calls_per_object"] = {phase: sum(c.values()) / objects for phase, c in calls.items()}
    row["api_calls_per_object_total"] = sum(row["api_calls_per_object"].values())
    row["api_calls_by_request"] = {phase: {k: v / objects for k, v in sorted(c.items())}
                                   for phase, c in calls.items()}
    row["operator_cpu_ms_per_object"] = row["operator_cpu_seconds"] / objects * 1000
    row["operator_connection_resets"] = resets()
    row["observer_connection_resets"] = client.resets + sum(t.resets for t in trackers.values())
    row["connection_resets"] = (row["operator_connection_resets"]
                                + row["observer_connection_resets"])
    return row


def run(config: Any, server_for: Any, workdir: Path, say: Callable[[str], None]
        ) -> dict[str, Any]:
    """The workload for lifecycle and the peer, on one PostgreSQL server; rows and ratios."""
    from lifecycle.providers.postgres.scenarios.testing import PostgresServer, PostgresUnavailable

    peer_module = peer()
    flavors = (Flavor("lifecycle", OURS_GROUP, "lc", True),
               Flavor(PEER, PEER_GROUP, "ps", False))
    rows: dict[str, dict[str, Any]] = {}
    try:
        pg = PostgresServer()
        pg.start()
    except PostgresUnavailable as exc:
        raise BenchError(str(exc)) from None
    try:
        for flavor in flavors:
            say(f"PostgreSQL: {flavor.operator}, {config.pg_n} each of Role, Database, Grant")
            with server_for("postgres") as server:
                rows[flavor.operator] = one(flavor, server, config, pg, workdir,
                                            f"{flavor.prefix}-pg-{time.strftime('%H%M%S')}",
                                            peer_module)
    finally:
        pg.close()
    ours, theirs = rows["lifecycle"], rows[PEER]

    def ratio(a: float | None, b: float | None) -> float | None:
        return a / b if a is not None and b else None

    return {
        "rows": rows, "poll_seconds": poll_interval(),
        "connection_resets": sum(r["connection_resets"] for r in rows.values()),
        "pg_api_calls_ratio_vs_provider_sql": ratio(ours["api_calls_per_object_total"],
                                                    theirs["api_calls_per_object_total"]),
        "pg_time_to_ready_ratio_vs_provider_sql": ratio(ours["time_to_ready_seconds"],
                                                        theirs["time_to_ready_seconds"]),
        "pg_drift_repair_ratio_vs_provider_sql": ratio(ours["drift_repair_median_seconds"],
                                                       theirs["drift_repair_median_seconds"]),
        "pg_cpu_ratio_vs_provider_sql": ratio(ours["operator_cpu_seconds"],
                                              theirs["operator_cpu_seconds"]),
    }


PG_ROWS = (("time to all Ready, s", "time_to_ready_seconds"),
           ("time to all changes, s", "change_seconds"),
           ("drift repair, median s", "drift_repair_median_seconds"),
           ("time to all deleted, s", "delete_seconds"),
           ("API calls per object, all phases", "api_calls_per_object_total"),
           ("operator CPU per object, ms", "operator_cpu_ms_per_object"),
           ("RSS growth per object, KB", "rss_growth_bytes_per_object"))


def summary(pg: dict[str, Any]) -> str:
    """The workload's table: one column per operator."""
    names = list(pg["rows"])
    lines = [f"PostgreSQL workload, N = {pg['rows'][names[0]]['n']} of each kind, poll "
             f"{pg['poll_seconds']:g} s:",
             f"{'':<40}" + "".join(f"{n:>14}" for n in names)]
    for label, key in PG_ROWS:
        cells = []
        for name in names:
            value = pg["rows"][name].get(key)
            if value is not None and key.startswith("rss"):
                value /= 1024
            cells.append(f"{'-' if value is None else f'{value:.2f}':>14}")
        lines.append(f"  {label:<38}" + "".join(cells))
    for name in names:
        phases = ", ".join(f"{phase} {value:.2f}" for phase, value in
                           pg["rows"][name]["api_calls_per_object"].items())
        lines.append(f"{name} calls per object by phase: {phases}")
    for key in ("pg_api_calls_ratio_vs_provider_sql", "pg_time_to_ready_ratio_vs_provider_sql",
                "pg_drift_repair_ratio_vs_provider_sql", "pg_cpu_ratio_vs_provider_sql"):
        value = pg.get(key)
        lines.append(f"{key}: {'-' if value is None else f'{value:.2f}'}")
    return "\n".join(lines)


def plot_panel(pg: dict[str, Any], axis: Any) -> None:
    """Calls per object per phase, one bar group per operator."""
    names = list(pg["rows"])
    phases = list(pg["rows"][names[0]]["api_calls_per_object"])
    bottoms = [0.0] * len(names)
    for phase in phases:
        heights = [pg["rows"][n]["api_calls_per_object"].get(phase, 0.0) for n in names]
        axis.bar(names, heights, bottom=bottoms, label=phase)
        bottoms = [b + h for b, h in zip(bottoms, heights, strict=True)]
    axis.set_ylabel("PostgreSQL kinds: API calls per object")
    axis.legend(fontsize=7)
