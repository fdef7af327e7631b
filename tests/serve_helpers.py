"""Shared pieces of the tests that drive ``lifecycle serve`` from the outside.

:class:`Serve` runs ``python -m lifecycle serve`` as a subprocess on a free
loopback port with its own kubeconfig and state file, waits until it
answers, and stops it; :meth:`Serve.kubectl` runs the ``kubectl`` on the
PATH against it (client-side validation on, a private discovery cache) and
:meth:`Serve.client` gives an official-client ``ApiClient`` for it.
Every wait is bounded; failures carry the command, kubectl's stderr and the
tail of the server's log.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import yaml

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "docs" / "examples"

#: How long ``lifecycle serve`` may take to answer after it is started.
START_TIMEOUT = 60.0
#: The default bound of one kubectl command.
KUBECTL_TIMEOUT = 60.0

T = TypeVar("T")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def kubectl_binary() -> str:
    """The ``kubectl`` on the PATH; fail with how to install it when there is none."""
    found = shutil.which("kubectl")
    if found is None:
        raise AssertionError("kubectl not found on PATH; install Debian's kubernetes-client "
                             "package (apt-get install kubernetes-client)")
    return found


def eventually(check: Callable[[], T | None], *, timeout: float, what: str,
               interval: float = 0.2) -> T:
    """Call ``check`` until it returns something other than None/False; fail after ``timeout``.

    The failure message names ``what`` and the last exception or value seen.
    """
    deadline = time.monotonic() + timeout
    last: object = None
    while True:
        try:
            value = check()
        except AssertionError as exc:
            value, last = None, exc
        else:
            if value is not None and value is not False:
                return value
            last = value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}; "
                                 f"last: {last}")
        time.sleep(interval)


def load_docs(path: Path) -> list[dict[str, Any]]:
    """The YAML documents of a file (empty documents dropped)."""
    with path.open(encoding="utf-8") as handle:
        return [doc for doc in yaml.safe_load_all(handle) if doc]


class KubectlResult:
    """What one kubectl command did: the command line, exit code, stdout and stderr."""

    def __init__(self, argv: Sequence[str], returncode: int, stdout: str, stderr: str) -> None:
        self.argv = list(argv)
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr

    @property
    def ok(self) -> bool:
        """Whether kubectl exited 0."""
        return self.returncode == 0

    def json(self) -> Any:
        """stdout parsed as JSON."""
        return json.loads(self.stdout)

    def __str__(self) -> str:
        return (f"$ {' '.join(self.argv)}\nexit {self.returncode}\n"
                f"--- stdout\n{self.stdout[-4000:]}\n--- stderr\n{self.stderr[-4000:]}")


class Serve:
    """``lifecycle serve`` in a subprocess, with its kubeconfig, state file and log.

    ``directory`` holds the kubeconfig, the state file, the log and kubectl's
    cache. Start it with :meth:`start` (or as a context manager); :meth:`stop`
    terminates it (SIGTERM, then SIGKILL after a bound) and may be called
    again; a stopped instance can be started again on the same port and
    state, as a restart.
    """

    def __init__(self, directory: Path, *, operator: bool = True,
                 port: int | None = None, extra_args: Sequence[str] = ()) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.operator = operator
        self.port = port if port is not None else free_port()
        self.kubeconfig = self.directory / "kubeconfig"
        self.state = self.directory / "state.db"
        self.log_path = self.directory / "serve.log"
        self.cache = self.directory / "kube-cache"
        self.extra_args = list(extra_args)
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0

    # ----------------------------------------------------------- lifecycle
    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return f"http://127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        """The command line that starts the server."""
        argv = [sys.executable, "-m", "lifecycle", "serve", "--port", str(self.port),
                "--kubeconfig", str(self.kubeconfig), "--state", str(self.state)]
        if not self.operator:
            argv.append("--no-operator")
        return [*argv, *self.extra_args]

    def start(self, timeout: float = START_TIMEOUT) -> Serve:
        """Start the server and wait until it answers discovery and wrote its kubeconfig."""
        if self.process is not None and self.process.poll() is None:
            raise RuntimeError("already running")
        self.starts += 1
        log = self.log_path.open("ab")
        log.write(f"\n===== start {self.starts}: {' '.join(self.command())}\n".encode())
        log.flush()
        self.process = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL, cwd=self.directory)
        log.close()
        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                raise AssertionError(f"lifecycle serve exited with {self.process.returncode} "
                                     f"before answering\n{self.log_tail()}")
            if self.kubeconfig.exists() and self._answers():
                return self
            if time.monotonic() >= deadline:
                self.stop()
                raise AssertionError(f"lifecycle serve did not answer on {self.url} within "
                                     f"{timeout:.0f}s\n{self.log_tail()}")
            time.sleep(0.1)

    def _announced(self) -> bool:
        """Whether this start printed its URL: what answers on the port is this process,
        not another server that took the port between :func:`free_port` and the bind."""
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return False
        return text.count("lifecycle serve: Kubernetes API on ") >= self.starts

    def _answers(self) -> bool:
        if not self._announced():
            return False
        try:
            with urllib.request.urlopen(f"{self.url}/api", timeout=2) as response:
                return bool(response.status == 200)
        except (OSError, urllib.error.URLError):
            return False

    def stop(self, timeout: float = 20.0) -> int | None:
        """Stop the server (SIGTERM, SIGKILL after ``timeout``); its exit code, if it ran."""
        process, self.process = self.process, None
        if process is None:
            return None
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
        return process.returncode

    def __enter__(self) -> Serve:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def exited(self) -> str:
        """A line saying the server process has exited (and how), or an empty string."""
        if self.process is not None and self.process.poll() is not None:
            return f"lifecycle serve has exited with {self.process.returncode}\n"
        return ""

    def log_tail(self, chars: int = 6000) -> str:
        """The end of the server's combined stdout and stderr."""
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return "(no server log)"
        return "--- lifecycle serve log (tail)\n" + text[-chars:]

    # ------------------------------------------------------------ clients
    def env(self) -> dict[str, str]:
        """The environment kubectl runs in: this server's kubeconfig and a private cache."""
        env = dict(os.environ)
        env["KUBECONFIG"] = str(self.kubeconfig)
        env["KUBECACHEDIR"] = str(self.cache)
        env.pop("KUBECTL_EXTERNAL_DIFF", None)
        return env

    def kubectl(self, *args: str, input: str | None = None, timeout: float = KUBECTL_TIMEOUT,
                check: bool = True) -> KubectlResult:
        """Run ``kubectl ARGS`` against the server; with ``check``, fail unless it exits 0."""
        argv = [kubectl_binary(), *args]
        try:
            done = subprocess.run(argv, input=input, capture_output=True, text=True,
                                  timeout=timeout, env=self.env(), cwd=self.directory)
        except subprocess.TimeoutExpired as exc:
            raise AssertionError(f"kubectl {' '.join(args)} did not finish within "
                                 f"{timeout:.0f}s\nstderr: {exc.stderr!r}\n"
                                 f"{self.log_tail()}") from None
        result = KubectlResult(argv, done.returncode, done.stdout, done.stderr)
        if check and not result.ok:
            raise AssertionError(f"kubectl failed\n{result}\n{self.exited()}"
                                 f"{self.log_tail(3000)}")
        return result

    def get_json(self, *args: str) -> dict[str, Any]:
        """``kubectl get ARGS -o json``, parsed."""
        return self.kubectl("get", *args, "-o", "json").json()  # type: ignore[no-any-return]

    def client(self) -> Any:
        """An official-client ``ApiClient`` configured from the server's kubeconfig."""
        from kubernetes import config

        return config.new_client_from_config(config_file=str(self.kubeconfig))


@contextlib.contextmanager
def serving(directory: Path, **options: Any) -> Iterator[Serve]:
    """A started :class:`Serve`, stopped on exit whatever happens."""
    server = Serve(directory, **options)
    try:
        server.start()
        yield server
    finally:
        server.stop()
