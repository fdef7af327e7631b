"""Headless Chromium for the docs tests: open a built page, measure it, screenshot it.

:class:`Browser` starts Debian's ``chromium`` headless with a throwaway profile and
talks to it over the Chrome DevTools Protocol on a websocket (``websocket-client``,
which the ``kubernetes`` client already depends on). :func:`chromium_or_skip` finds the
browser: outside CI a missing one skips the test with the package to install; in CI
(``CI`` set) it fails it, so the check is never silently left out there.
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import websocket

__all__ = ["Browser", "chromium_or_skip"]

#: Debian's package names the browser's executable.
CANDIDATES = ("chromium", "chromium-browser", "google-chrome")


def chromium_or_skip() -> str:
    """The headless browser's path; a skip outside CI, a failure in CI, when missing."""
    for name in CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    reason = "headless Chromium is not installed (apt-get install chromium)"
    if os.environ.get("CI", "").lower() not in ("", "0", "false", "no"):
        pytest.fail(f"{reason}; CI must run the browser checks")
    pytest.skip(f"{reason}; CI runs this check")


class Browser:
    """One headless Chromium with one tab, ``width`` by ``height`` CSS pixels."""

    def __init__(self, executable: str, profile: Path, *, width: int = 1200,
                 height: int = 900) -> None:
        self.width, self.height = width, height
        profile.mkdir(parents=True, exist_ok=True)
        self._log = (profile / "chromium.log").open("wb")
        self.process = subprocess.Popen(
            [executable, "--headless=new", "--no-sandbox", "--disable-gpu",
             "--disable-dev-shm-usage", "--no-first-run", "--no-default-browser-check",
             "--disable-extensions", "--disable-background-networking", "--hide-scrollbars",
             "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0",
             f"--user-data-dir={profile}", f"--window-size={width},{height}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT)
        self._ids = itertools.count(1)
        self._events: list[dict[str, Any]] = []
        try:
            port, path = self._endpoint(profile / "DevToolsActivePort")
            self.socket = websocket.create_connection(f"ws://127.0.0.1:{port}{path}",
                                                      timeout=60, suppress_origin=True)
            target = self._send("Target.createTarget", {"url": "about:blank"})["targetId"]
            self.session = self._send("Target.attachToTarget",
                                      {"targetId": target, "flatten": True})["sessionId"]
            self.call("Page.enable")
            self.call("Emulation.setDeviceMetricsOverride", {
                "width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
        except BaseException:
            self.close()
            raise

    def _endpoint(self, active: Path) -> tuple[str, str]:
        """Chromium writes its DevTools port and browser path into the profile."""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"chromium exited with {self.process.returncode}: "
                                   f"{self._tail()}")
            lines = active.read_text().split("\n") if active.is_file() else []
            if len(lines) >= 2 and lines[0].isdigit() and lines[1].startswith("/devtools/"):
                return lines[0], lines[1]
            time.sleep(0.05)
        raise RuntimeError(f"chromium opened no DevTools port in 60 s: {self._tail()}")

    def _tail(self) -> str:
        self._log.flush()
        return Path(self._log.name).read_text(errors="replace")[-1500:]

    def _send(self, method: str, params: dict[str, Any] | None = None,
              session: str | None = None) -> dict[str, Any]:
        ident = next(self._ids)
        message: dict[str, Any] = {"id": ident, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        self.socket.send(json.dumps(message))
        while True:
            answer = json.loads(self.socket.recv())
            if answer.get("id") == ident:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                return dict(answer.get("result") or {})
            if "method" in answer:
                self._events.append(answer)

    def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """Send a DevTools command to the tab and return its result."""
        return self._send(method, params, self.session)

    def open(self, page: Path, timeout: float = 60) -> None:
        """Load ``page`` from disk and wait for its load event and its fonts."""
        self._events.clear()
        self.call("Page.navigate", {"url": page.resolve().as_uri()})
        deadline = time.monotonic() + timeout
        while not any(e.get("method") == "Page.loadEventFired" for e in self._events):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{page} did not load in {timeout} s")
            self.socket.settimeout(max(0.1, deadline - time.monotonic()))
            event = json.loads(self.socket.recv())
            if "method" in event:
                self._events.append(event)
        self.socket.settimeout(60)
        self.evaluate("document.fonts.ready.then(() => true)")

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (promises awaited)."""
        result = self.call("Runtime.evaluate", {"expression": expression,
                                                "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in result:
            raise RuntimeError(f"script failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 60) -> Any:
        """Evaluate ``expression`` until it is truthy; its value."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.evaluate(expression)
            if value or time.monotonic() > deadline:
                return value
            time.sleep(0.1)

    def screenshot(self, path: Path) -> Path:
        """Save what the window shows as a PNG."""
        shot = self.call("Page.captureScreenshot", {"format": "png"})
        path.write_bytes(base64.b64decode(shot["data"]))
        return path

    def close(self) -> None:
        """Close the browser (this process only) and its log."""
        try:
            if getattr(self, "socket", None) is not None:
                with contextlib.suppress(OSError, RuntimeError, websocket.WebSocketException):
                    self._send("Browser.close")
                self.socket.close()
        finally:
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=20)
            self._log.close()

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
