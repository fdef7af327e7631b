"""A real Kubernetes API server for tests and for trying the operator: the envtest tier.

As controller-runtime's envtest does for Go operators, :class:`RealCluster`
starts a real ``kube-apiserver`` backed by a real ``etcd`` on loopback, with
generated certificates (:mod:`lifecycle.testing.pki`), RBAC authorization on,
an audit log, and of the controllers only the garbage collector and the
namespace controller (run by a real kube-controller-manager): objects are
stored, validated, watched, authorized and collected exactly as on a
cluster, but there are no kubelets or scheduler, so nothing runs Pods.

No prebuilt binary is downloaded. :func:`binaries` builds the three from
their Go modules (the Go module shipped as :mod:`lifecycle.envtest`, which
pins ``k8s.io/kubernetes`` and the etcd server it uses) with the machine's
``go``, once per version, into the user's cache directory
(``$LIFECYCLE_ENVTEST_CACHE``, else ``$XDG_CACHE_HOME/lifecycle/envtest``,
else ``~/.cache/lifecycle/envtest``). A first build takes minutes; later
starts take seconds.

``lifecycle envtest`` runs one in the foreground; the ``real_cluster``
pytest fixture starts one per test session.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import attrs
import yaml

from lifecycle.core.errors import LifecycleError
from lifecycle.testing.pki import Credentials, issue

__all__ = ["Binaries", "EnvtestError", "RealCluster", "binaries", "cache_root",
           "kubernetes_version"]

#: Files of the Go module that decide what is built (the cache key hashes them).
SOURCES = ("go.mod", "go.sum", "tools.go", "etcd/main.go")
#: The hint printed when ``go`` is missing.
GO_HINT = ("the real API server is built from its Go modules and needs go on PATH (Go 1.21 "
           "or newer fetches the 1.26 toolchain it names itself): apt-get install golang-go, "
           "or Go from your package manager")
#: The controllers kube-controller-manager runs beside the API server.
CONTROLLERS = ("garbage-collector-controller", "namespace-controller")
#: How long a build may take, in seconds.
BUILD_TIMEOUT = 3600.0


class EnvtestError(LifecycleError):
    """The real API server cannot be built or started; the message says why in one line."""


@attrs.frozen
class Binaries:
    """The built servers and the Kubernetes version they are."""

    kube_apiserver: Path
    etcd: Path
    kube_controller_manager: Path
    version: str

    def complete(self) -> bool:
        """Whether every binary is built."""
        return all(p.is_file() for p in (self.kube_apiserver, self.etcd,
                                          self.kube_controller_manager))


def _module() -> Any:
    """The shipped Go module's folder (a Traversable of package ``lifecycle.envtest``)."""
    return resources.files("lifecycle.envtest")


def kubernetes_version() -> str:
    """The ``k8s.io/kubernetes`` version the shipped go.mod pins (``v1.37.2``)."""
    text = _module().joinpath("go.mod").read_text(encoding="utf-8")
    found = re.search(r"^\s*(?:require\s+)?k8s\.io/kubernetes\s+(v\S+)", text, re.M)
    if not found:
        raise EnvtestError("the envtest go.mod does not require k8s.io/kubernetes")
    return found.group(1)


def cache_root() -> Path:
    """Where built servers are kept (see the module's docstring)."""
    explicit = os.environ.get("LIFECYCLE_ENVTEST_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "lifecycle" / "envtest"


def _key() -> str:
    """The cache key: the version and a digest of the module's sources."""
    digest = hashlib.sha256()
    for name in SOURCES:
        digest.update(name.encode() + b"\0" + _module().joinpath(name).read_bytes())
    return f"{kubernetes_version()}-{digest.hexdigest()[:12]}"


def binaries(*, build: bool = True, log: Any = None) -> Binaries:
    """The servers for this version, built first when the cache has none.

    ``log(line)`` is told when a build starts and ends. With ``build=False``
    a missing build raises :class:`EnvtestError` instead. Concurrent callers
    (pytest workers, two terminals) wait for one build through a file lock.
    """
    version = kubernetes_version()
    home = cache_root() / _key()
    found = Binaries(home / "kube-apiserver", home / "etcd", home / "kube-controller-manager",
                     version)
    if found.complete():
        return found
    if not build:
        raise EnvtestError(f"the real API server {version} is not built yet (run "
                           f"lifecycle envtest once, or call binaries())")
    go = shutil.which("go")
    if go is None:
        raise EnvtestError(GO_HINT)
    home.parent.mkdir(parents=True, exist_ok=True)
    with open(home.parent / f"{home.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if found.complete():
            return found
        _build(go, home, version, log)
    return found


def _build(go: str, home: Path, version: str, log: Any) -> None:
    """Build both servers into a scratch folder, then move it to ``home`` whole."""
    if log:
        log(f"building kube-apiserver, kube-controller-manager {version} and etcd from their "
            f"Go modules into {home} "
            f"(once; a first build takes several minutes)")
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="envtest-build-", dir=home.parent) as scratch:
        source = Path(scratch) / "src"
        out = Path(scratch) / "bin"
        for name in SOURCES:
            target = source / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(_module().joinpath(name).read_bytes())
        out.mkdir()
        # GOTOOLCHAIN is left as the user set it: by default an older go fetches the
        # toolchain go.mod names through the module proxy.
        env = {**os.environ, "CGO_ENABLED": "0", "GOFLAGS": "-mod=readonly"}
        command = [go, "build", "-trimpath", f"-ldflags={_ldflags(version)}",
                   "-o", str(out) + os.sep,
                   "k8s.io/kubernetes/cmd/kube-apiserver",
                   "k8s.io/kubernetes/cmd/kube-controller-manager", "./etcd"]
        try:
            done = subprocess.run(command, cwd=source, env=env, capture_output=True,
                                  text=True, timeout=BUILD_TIMEOUT, check=False)
        except subprocess.TimeoutExpired:
            raise EnvtestError(f"building the real API server took over "
                               f"{BUILD_TIMEOUT:.0f} s") from None
        if done.returncode != 0:
            tail = " | ".join(done.stderr.strip().splitlines()[-3:])
            raise EnvtestError(f"go build of the real API server failed: {tail}")
        with contextlib.suppress(FileNotFoundError):
            shutil.rmtree(home)
        os.replace(out, home)
    if log:
        log(f"built in {time.monotonic() - started:.0f} s")


def _ldflags(version: str) -> str:
    """Linker flags: stripped, and stamped with the release as Kubernetes' own build does,
    so the server reports its version (``kubectl version``) instead of ``v0.0.0-master``."""
    major, minor = version.lstrip("v").split(".")[:2]
    stamps = {"gitVersion": version, "gitMajor": major, "gitMinor": minor,
              "gitTreeState": "clean"}
    flags = ["-s", "-w"]
    for package in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [f"-X {package}.{name}={value}" for name, value in stamps.items()]
    return " ".join(flags)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RealCluster:
    """A kube-apiserver and its etcd on loopback, with an admin kubeconfig.

    ``RealCluster(directory).start()`` prepares certificates and data in
    ``directory`` (kept across restarts), starts etcd and the API server and
    waits until ``/readyz`` answers. ``port=0`` picks a free port. ``durable``
    keeps etcd's fsync (off by default: a test server trades durability for
    speed). ``audit`` writes every request's metadata (user, user agent, verb,
    resource, status code) as JSON lines to ``audit.log`` in ``directory``
    (:meth:`audit_events` reads them), as a cluster's audit log does.
    ``controllers`` runs kube-controller-manager with only the garbage
    collector and the namespace controller (:data:`CONTROLLERS`), so owned
    objects are collected and deleted namespaces emptied as on a cluster;
    without it the server behaves as controller-runtime's envtest.
    ConfigMaps are served without the API server's watch cache, straight from
    etcd, so that :meth:`compact` expires their older resourceVersions at once
    (a watch from one answers 410 Gone), as etcd's periodic compaction does on
    a long-lived cluster. Stop it with :meth:`stop` or use it as a context
    manager.
    """

    def __init__(self, directory: str | os.PathLike[str], *, port: int = 0,
                 durable: bool = False, audit: bool = True, controllers: bool = True,
                 log: Any = None) -> None:
        self.dir = Path(directory).absolute()
        self.controllers = controllers
        self.audit = audit
        self.audit_log = self.dir / "audit.log"
        self.port = port or free_port()
        self.durable = durable
        self.log = log
        self.kubeconfig = self.dir / "admin.kubeconfig"
        self.credentials = Credentials.under(self.dir / "pki")
        self.version = ""
        self.etcd_url = ""
        self._processes: list[subprocess.Popen[bytes]] = []

    @property
    def url(self) -> str:
        """The API server's address."""
        return f"https://127.0.0.1:{self.port}"

    # ------------------------------------------------------------- lifecycle
    def start(self, *, timeout: float = 120.0) -> RealCluster:
        """Build if needed, start etcd and the API server, wait until ready."""
        built = binaries(log=self.log)
        self.version = built.version
        self.dir.mkdir(parents=True, exist_ok=True)
        self.credentials = issue(self.dir / "pki")
        etcd_port, peer_port = free_port(), free_port()
        self.etcd_url = f"http://127.0.0.1:{etcd_port}"
        try:
            self._spawn("etcd", [
                str(built.etcd), "--name", "envtest", "--data-dir", str(self.dir / "etcd"),
                "--listen-client-urls", f"http://127.0.0.1:{etcd_port}",
                "--advertise-client-urls", f"http://127.0.0.1:{etcd_port}",
                "--listen-peer-urls", f"http://127.0.0.1:{peer_port}",
                "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer_port}",
                "--initial-cluster", f"envtest=http://127.0.0.1:{peer_port}",
                "--log-level", "warn",
                *(() if self.durable else ("--unsafe-no-fsync",))])
            self._wait(lambda: _http_ok(f"http://127.0.0.1:{etcd_port}/health"), timeout,
                       "etcd")
            c = self.credentials
            self._spawn("kube-apiserver", [
                str(built.kube_apiserver),
                f"--etcd-servers=http://127.0.0.1:{etcd_port}",
                "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
                f"--secure-port={self.port}",
                f"--cert-dir={self.dir / 'pki'}",
                f"--tls-cert-file={c.serving_cert}", f"--tls-private-key-file={c.serving_key}",
                f"--client-ca-file={c.ca_cert}",
                "--authorization-mode=RBAC",
                f"--service-account-key-file={c.service_account_public}",
                f"--service-account-signing-key-file={c.service_account_key}",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                "--service-cluster-ip-range=10.0.0.0/24",
                "--allow-privileged=true",
                "--disable-admission-plugins=ServiceAccount",
                "--endpoint-reconciler-type=none",
                "--watch-cache-sizes=configmaps#0",
                *self._audit_flags(),
                "--v=1"])
            self._write_kubeconfig()
            self._wait(self._ready, timeout, "kube-apiserver")
            if self.controllers:
                self._spawn("kube-controller-manager", [
                    str(built.kube_controller_manager), f"--kubeconfig={self.kubeconfig}",
                    f"--controllers={','.join(CONTROLLERS)}", "--leader-elect=false",
                    "--secure-port=0", "--v=1"])
        except BaseException:
            self.stop()
            raise
        return self

    def compact(self) -> int:
        """Compact etcd up to its current revision; return that revision.

        Every resourceVersion older than the answer is gone afterwards: a
        watch of ConfigMaps from one gets 410 Gone (other kinds are served
        from the watch cache, which keeps its own window).
        """
        current = _etcd(self.etcd_url, "/v3/kv/range", {"key": _b64_text("\0")})
        revision = int(current["header"]["revision"])
        _etcd(self.etcd_url, "/v3/kv/compaction", {"revision": str(revision),
                                                    "physical": True})
        return revision

    def stop(self) -> None:
        """Stop the API server, then etcd (SIGTERM, then SIGKILL after 10 s)."""
        for process in reversed(self._processes):
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        self._processes.clear()

    def __enter__(self) -> RealCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def alive(self) -> bool:
        """Whether both processes still run."""
        return bool(self._processes) and all(p.poll() is None for p in self._processes)

    def _audit_flags(self) -> list[str]:
        if not self.audit:
            return []
        policy = self.dir / "audit-policy.yaml"
        policy.write_text(yaml.safe_dump({
            "apiVersion": "audit.k8s.io/v1", "kind": "Policy",
            "omitStages": ["RequestReceived"],
            "rules": [{"level": "Metadata"}]}), encoding="utf-8")
        return [f"--audit-policy-file={policy}", f"--audit-log-path={self.audit_log}",
                "--audit-log-mode=blocking", "--audit-log-maxsize=0"]

    def audit_events(self, *, since: int = 0) -> tuple[list[dict[str, Any]], int]:
        """The audit log's completed requests from byte offset ``since``, and the next offset.

        Each is the server's audit event (``user.username``, ``userAgent``,
        ``verb``, ``objectRef``, ``responseStatus.code``, ...). Only the
        ``ResponseComplete`` stage is kept, so a watch counts once.
        """
        import json

        try:
            with open(self.audit_log, "rb") as handle:
                handle.seek(since)
                data = handle.read()
        except FileNotFoundError:
            return [], since
        end = data.rfind(b"\n") + 1
        events = [json.loads(line) for line in data[:end].splitlines() if line.strip()]
        return [e for e in events if e.get("stage") == "ResponseComplete"], since + end

    def _spawn(self, name: str, command: Sequence[str]) -> None:
        logfile = open(self.dir / f"{name}.log", "ab")  # noqa: SIM115 - the child keeps it
        try:
            process = subprocess.Popen(command, stdout=logfile, stderr=subprocess.STDOUT,
                                       stdin=subprocess.DEVNULL, start_new_session=True)
        finally:
            logfile.close()
        self._processes.append(process)

    def _wait(self, ready: Any, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            dead = [p for p in self._processes if p.poll() is not None]
            if dead:
                raise EnvtestError(f"{what} exited with code {dead[0].returncode}: "
                                   f"{self._last_line(what)}")
            if ready():
                return
            time.sleep(0.2)
        raise EnvtestError(f"{what} was not ready within {timeout:.0f} s "
                           f"(its log: {self.dir / (what + '.log')})")

    def _last_line(self, what: str) -> str:
        try:
            lines = (self.dir / f"{what}.log").read_text(errors="replace").strip().splitlines()
        except OSError:
            return "(no log)"
        return lines[-1][:300] if lines else "(empty log)"

    def _ssl(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.credentials.ca_cert))
        context.load_cert_chain(str(self.credentials.admin_cert),
                                str(self.credentials.admin_key))
        return context

    def _ready(self) -> bool:
        return _http_ok(f"{self.url}/readyz", self._ssl())

    # ---------------------------------------------------------- kubeconfigs
    def _write_kubeconfig(self) -> None:
        c = self.credentials
        user = {"client-certificate-data": _b64(c.admin_cert),
                "client-key-data": _b64(c.admin_key)}
        _write(self.kubeconfig, self.config_for(user, "admin"))

    def config_for(self, user: dict[str, str], name: str,
                   namespace: str = "default") -> dict[str, Any]:
        """A kubeconfig for this server whose user entry is ``user``."""
        return {
            "apiVersion": "v1", "kind": "Config", "preferences": {},
            "current-context": name,
            "clusters": [{"name": "envtest", "cluster": {
                "server": self.url,
                "certificate-authority-data": _b64(self.credentials.ca_cert)}}],
            "users": [{"name": name, "user": user}],
            "contexts": [{"name": name, "context": {
                "cluster": "envtest", "user": name, "namespace": namespace}}],
        }

    def write_kubeconfig(self, path: str | os.PathLike[str]) -> Path:
        """Copy the admin kubeconfig to ``path``."""
        target = Path(path).absolute()
        _write(target, yaml.safe_load(self.kubeconfig.read_text(encoding="utf-8")))
        return target

    def api_client(self) -> Any:
        """An official-client ``ApiClient`` as the administrator."""
        from kubernetes import client as k8s
        from kubernetes import config as k8s_config

        configuration = k8s.Configuration()
        k8s_config.load_kube_config(config_file=str(self.kubeconfig),
                                    client_configuration=configuration)
        return k8s.ApiClient(configuration)

    def service_account_token(self, namespace: str, name: str, *,
                              seconds: int = 3600) -> str:
        """A token of ServiceAccount ``namespace/name`` (created if missing), via TokenRequest."""
        from kubernetes import client as k8s

        core = k8s.CoreV1Api(self.api_client())
        with contextlib.suppress(k8s.ApiException):
            core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=namespace)))
        try:
            core.create_namespaced_service_account(
                namespace, k8s.V1ServiceAccount(metadata=k8s.V1ObjectMeta(name=name)))
        except k8s.ApiException as exc:
            if exc.status != 409:
                raise
        answer = core.create_namespaced_service_account_token(
            name, namespace, k8s.AuthenticationV1TokenRequest(
                spec=k8s.V1TokenRequestSpec(audiences=[], expiration_seconds=seconds)))
        if answer.status is None or not answer.status.token:
            raise EnvtestError(f"the server issued no token for {namespace}/{name}")
        return str(answer.status.token)

    def service_account_kubeconfig(self, path: str | os.PathLike[str], namespace: str,
                                   name: str) -> Path:
        """Write a kubeconfig that acts as ServiceAccount ``namespace/name``."""
        token = self.service_account_token(namespace, name)
        target = Path(path).absolute()
        _write(target, self.config_for({"token": token}, f"{namespace}-{name}", namespace))
        return target

    def install_crds(self, kinds: Sequence[Any]) -> None:
        """Install (create or replace) the CRDs of ``kinds`` and wait until each is served."""
        from lifecycle.schema.crds import crds

        install(self.api_client(), crds(kinds))

    def logs(self) -> Iterator[tuple[str, str]]:
        """The last 20 lines of each server's log (for a failing test's report)."""
        for name in ("etcd", "kube-apiserver", "kube-controller-manager"):
            path = self.dir / f"{name}.log"
            if path.exists():
                yield name, "\n".join(path.read_text(errors="replace").splitlines()[-20:])


def install(client: Any, documents: Sequence[dict[str, Any]], *, timeout: float = 60.0) -> None:
    """Create or update each CRD in ``documents`` and wait until all are Established.

    A ProviderConfig CRD the server already serves is merged with it, not replaced
    (:func:`lifecycle.testing.crdmerge.merged_crd`): the kinds installed earlier keep
    their fields, and a field is required only where every install requires it.
    """
    from kubernetes import client as k8s

    from lifecycle.testing.crdmerge import merged_crd

    ext = k8s.ApiextensionsV1Api(client)
    for doc in documents:
        name = doc["metadata"]["name"]
        body: Any = doc  # the client sends plain dicts as they are
        for attempt in range(5):
            try:
                ext.create_custom_resource_definition(body)
                break
            except k8s.ApiException as exc:
                if exc.status != 409:
                    raise
            raw: Any = ext.read_custom_resource_definition(name, _preload_content=False)
            served = json.loads(raw.data)  # the CRD as served, not the client's model
            body = {**merged_crd(served, doc), "metadata": {
                **doc["metadata"], "resourceVersion": served["metadata"]["resourceVersion"]}}
            try:
                ext.replace_custom_resource_definition(name, body)
                break
            except k8s.ApiException as exc:  # changed since read (its status): read again
                if exc.status != 409 or attempt == 4:
                    raise
    deadline = time.monotonic() + timeout
    for doc in documents:
        name = doc["metadata"]["name"]
        while True:
            found = ext.read_custom_resource_definition(name)
            held = found.status.conditions if found.status else None
            conditions = {c.type: c.status for c in held or []}
            if conditions.get("Established") == "True":
                break
            if time.monotonic() > deadline:
                raise EnvtestError(f"CRD {name} was not established within {timeout:.0f} s")
            time.sleep(0.1)


def _etcd(base: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
    """One call of etcd's JSON gateway (the v3 API over HTTP)."""
    request = urllib.request.Request(base + path, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            found: dict[str, Any] = json.loads(answer.read())
            return found
    except (OSError, ValueError) as exc:
        raise EnvtestError(f"etcd {path} failed: {exc}") from None


def _b64_text(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _http_ok(url: str, context: ssl.SSLContext | None = None) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2, context=context) as answer:
            return bool(answer.status == 200)
    except (OSError, ValueError):
        return False


def _b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def _write(path: Path, doc: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    temporary.chmod(0o600)
    os.replace(temporary, path)
