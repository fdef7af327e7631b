"""The driver's drift sweep (:mod:`lifecycle.driver.sweep`) on its own, with a recording
connector: what it hands the connector, what it queues, and how it fails.

* only Ready objects not being deleted nor ignored reach the connector, grouped by the
  ProviderConfig each names, and only keys among them are queued;
* a key is queued once per catalogue state the connector reports, and again for a
  new state or after it was seen in sync;
* a config that cannot be read, or a connector that fails, is logged once per config
  and reason with no credential in it, and the sweep goes on with the other configs;
* only kinds whose timing sets ``sweep`` and whose connector offers it are swept.
"""

from __future__ import annotations

import base64
import logging
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import pytest

from lifecycle.core.contract import ProviderConfig
from lifecycle.core.errors import CredentialsError
from lifecycle.core.kind import PROVIDER_CONFIG_API, Kind
from lifecycle.core.machine import Timing
from lifecycle.driver.sweep import DriftSweeper, SweepTarget, sweep_targets
from lifecycle.kube.errors import NotFound
from lifecycle.machines import postgres as pg

SECRET = "s3cret-admin-password"


class Cluster:
    """ProviderConfigs and their Secrets, as a pass reads them."""

    def __init__(self, configs: Sequence[str]) -> None:
        self.objects: dict[tuple[str, str, str | None, str], dict[str, Any]] = {}
        for name in configs:
            self.objects[(PROVIDER_CONFIG_API, "ProviderConfig", None, name)] = {
                "metadata": {"name": name}, "spec": {"host": "db", "credentials": {
                    "source": "Secret", "secretRef": {"name": f"{name}-creds",
                                                      "namespace": "ops"}}}}
            self.objects[("v1", "Secret", "ops", f"{name}-creds")] = {
                "metadata": {"name": f"{name}-creds", "namespace": "ops"},
                "data": {"username": base64.b64encode(b"admin").decode(),
                         "password": base64.b64encode(SECRET.encode()).decode()}}

    def get(self, api_version: str, kind: str, namespace: str | None,
            name: str) -> dict[str, Any]:
        try:
            return self.objects[(api_version, kind, namespace, name)]
        except KeyError:
            raise NotFound(f"{kind} {name} not found") from None


class Connector:
    """Records what each sweep was handed and answers what ``answer`` says."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[tuple[str | None, str]]]] = []
        self.answer: dict[tuple[str | None, str], str] = {}
        self.error: Exception | None = None

    def sweep(self, kind: Kind, config: ProviderConfig,
              objects: Sequence[Mapping[str, Any]]) -> dict[tuple[str | None, str], str]:
        assert config.credentials["password"] == SECRET
        self.calls.append((config.name, sorted(
            (o["metadata"]["namespace"], o["metadata"]["name"]) for o in objects)))
        if self.error is not None:
            raise self.error
        return dict(self.answer)

    def connect(self, resource: Any, config: Any) -> Any:
        raise AssertionError("the sweep never connects a client")


class Informer:
    def __init__(self, objects: list[dict[str, Any]]) -> None:
        self.objects = objects
        self.synced = threading.Event()
        self.synced.set()

    def items(self) -> list[dict[str, Any]]:
        return list(self.objects)


class Controller:
    """What the sweep uses of a controller: its name, informer, owns and enqueue."""

    def __init__(self, objects: list[dict[str, Any]]) -> None:
        self.name = "role"
        self.informer = Informer(objects)
        self.queued: list[tuple[str | None, str]] = []

    def owns(self, key: tuple[str | None, str]) -> bool:
        return True

    def enqueue(self, key: tuple[str | None, str]) -> None:
        self.queued.append(key)


def obj(name: str, config: str = "default", *, ready: bool = True,
        deleting: bool = False, ignored: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "team"}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    if ignored:
        meta["annotations"] = {"lifecycle.dev/operation": "ignore"}
    return {"metadata": meta, "spec": {"providerConfigRef": {"name": config}},
            "status": {"conditions": [{"type": "Ready",
                                       "status": "True" if ready else "False"}]}}


def setup(objects: list[dict[str, Any]], configs: Sequence[str] = ("default", "other")
          ) -> tuple[DriftSweeper, SweepTarget, Connector, Controller]:
    connector, controller = Connector(), Controller(objects)
    target = SweepTarget(pg.Role, connector, controller, 1.0)  # type: ignore[arg-type]
    return DriftSweeper(Cluster(configs), [target]), target, connector, controller


def test_only_ready_objects_reach_the_connector_grouped_by_their_config() -> None:
    sweeper, target, connector, controller = setup([
        obj("a"), obj("b", "other"), obj("c", ready=False), obj("d", deleting=True),
        obj("e"), obj("f", ignored=True)])
    connector.answer = {("team", "a"): "x", ("team", "b"): "y", ("team", "zz"): "forged"}
    sweeper.sweep(target)
    assert connector.calls == [("default", [("team", "a"), ("team", "e")]),
                               ("other", [("team", "b")])]
    # Each config's answer queues only keys among the objects that name that config.
    assert sorted(controller.queued) == [("team", "a"), ("team", "b")]
    assert sweeper.sweeps == 2 and sweeper.enqueued == 2


def test_a_key_is_queued_once_per_state() -> None:
    sweeper, target, connector, controller = setup([obj("a")])
    connector.answer = {("team", "a"): "limit 5"}
    for _ in range(3):
        sweeper.sweep(target)
    assert controller.queued == [("team", "a")]
    connector.answer = {("team", "a"): "limit 6"}
    sweeper.sweep(target)
    connector.answer = {}
    sweeper.sweep(target)
    connector.answer = {("team", "a"): "limit 6"}
    sweeper.sweep(target)
    assert controller.queued == [("team", "a")] * 3
    assert sweeper.enqueued == 3


def test_failures_are_logged_once_without_credentials_and_other_configs_go_on(
        caplog: pytest.LogCaptureFixture) -> None:
    sweeper, target, connector, controller = setup([obj("a"), obj("b", "gone")])
    connector.answer = {("team", "a"): "drifted"}
    caplog.set_level(logging.INFO, logger="lifecycle.driver.sweep")
    for _ in range(3):
        sweeper.sweep(target)
    assert controller.queued == [("team", "a")]
    assert sweeper.failures == 3
    connector.error = CredentialsError(f"connecting as admin with {SECRET}: refused",
                                       reason="InvalidCredentials")
    for _ in range(2):
        sweeper.sweep(target)
    connector.error = RuntimeError(f"driver bug holding {SECRET}")
    sweeper.sweep(target)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 3, warnings
    assert "'gone'" in warnings[0] and "ProviderConfigMissing" in warnings[0]
    assert "'default'" in warnings[1] and "InvalidCredentials" in warnings[1]
    assert warnings[2].endswith("failed: RuntimeError; drift is left to the poll until it works")
    assert SECRET not in caplog.text
    connector.error = None
    sweeper.sweep(target)
    assert any("works again" in r.getMessage() for r in caplog.records)


def test_only_kinds_with_a_sweep_and_a_sweeping_connector_are_swept() -> None:
    class Unswept(pg.RoleMachine):
        timing = Timing(poll=60.0)

    class Other:
        def connect(self, resource: Any, config: Any) -> Any:
            raise AssertionError

    controllers: Any = {"Role": Controller([]), "Database": Controller([]),
                        "Grant": Controller([])}
    targets = sweep_targets([(pg.Role, Connector()),
                             (attrs.evolve(pg.Database, machine=Unswept), Connector()),
                             (pg.Grant, Other())], controllers)
    assert [t.kind.kind for t in targets] == ["Role"]
    assert targets[0].interval == pg.SQL_TIMING.sweep == 10.0
    with pytest.raises(ValueError):
        Timing(sweep=0.0)


def test_the_sweeper_runs_on_its_thread_until_stopped() -> None:
    sweeper, target, connector, controller = setup([obj("a")])
    target.interval = 0.05
    connector.answer = {("team", "a"): "drifted"}
    done = threading.Event()
    original = controller.enqueue

    def enqueue(key: tuple[str | None, str]) -> None:
        original(key)
        done.set()

    controller.enqueue = enqueue  # type: ignore[method-assign]
    sweeper.start()
    try:
        assert done.wait(10.0)
    finally:
        sweeper.stop()
    calls = len(connector.calls)
    sweeper.stop()
    assert len(connector.calls) == calls and sweeper._thread is None
