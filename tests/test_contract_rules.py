"""The optional parts of the provider contract, rule by rule (:mod:`lifecycle.core.contract`).

A client's ``close`` is called once the pass is done with it; a connector's ``admit`` is
asked before an object is taken over; a connector's ``bind`` gets the engine's list of
the kind's objects. Each is optional: a connector or client without it (or with an
attribute of that name that is not callable) is used as it is.
"""

from __future__ import annotations

from typing import Any

import pytest

from lifecycle.core.contract import (
    ManagedResource,
    ProviderConfig,
    admission,
    bind_objects,
    close_client,
)
from lifecycle.core.errors import TerminalError
from lifecycle.core.kind import FINALIZER
from lifecycle.machines.database import DatabaseInstance
from lifecycle.providers.simcloud import DatabaseConnector, SimCloud
from lifecycle.providers.simcloud.scenarios.harness import database_manifest
from lifecycle.testing import Environment


class Closing:
    def __init__(self) -> None:
        self.closed = 0

    def close(self) -> None:
        self.closed += 1


def test_close_client_calls_a_clients_close_once_and_skips_what_it_lacks() -> None:
    client = Closing()
    close_client(client)  # type: ignore[arg-type]
    assert client.closed == 1

    class NotCallable:
        close = "no"

    close_client(NotCallable())  # type: ignore[arg-type]
    close_client(object())  # type: ignore[arg-type]


def test_admission_is_the_connectors_admit_or_none() -> None:
    class Admitting:
        def admit(self, resource: Any, config: Any) -> None:
            raise TerminalError("no", reason="Refused")

    admit = admission(Admitting())
    assert admit is not None and admit.__name__ == "admit"
    with pytest.raises(TerminalError):
        admit(None, None)  # type: ignore[arg-type]

    class NotCallable:
        admit = True

    assert admission(NotCallable()) is None
    assert admission(object()) is None


def test_bind_objects_hands_the_kind_and_the_list_to_a_connectors_bind() -> None:
    seen: list[Any] = []

    class Binding:
        def bind(self, kind: Any, objects: Any) -> None:
            seen.append((kind, objects()))

    def listed() -> list[dict[str, Any]]:
        return [{"metadata": {"name": "a"}}]

    bind_objects(Binding(), DatabaseInstance, listed)
    assert seen == [(DatabaseInstance, [{"metadata": {"name": "a"}}])]

    class NotCallable:
        bind = 1

    bind_objects(NotCallable(), DatabaseInstance, listed)
    bind_objects(object(), DatabaseInstance, listed)
    assert len(seen) == 1


class Recording:
    """The simulated cloud's connector, recording binds, admits and clients' closes."""

    def __init__(self, refuse: bool = False) -> None:
        self.inner = DatabaseConnector(SimCloud(seed=1, create_polls=0))
        self.refuse = refuse
        self.bound: list[Any] = []
        self.admitted: list[str] = []
        self.clients: list[Any] = []

    def bind(self, kind: Any, objects: Any) -> None:
        self.bound.append((kind, objects))

    def admit(self, resource: ManagedResource, config: ProviderConfig) -> None:
        self.admitted.append(resource.name)
        assert resource.password is None  # asked before any Secret is read or made
        if self.refuse:
            raise TerminalError("refused by the provider", reason="Refused")

    def connect(self, resource: ManagedResource, config: ProviderConfig) -> Any:
        client = self.inner.connect(resource, config)
        closes = [0]
        original = getattr(client, "close", None)

        def close() -> None:
            closes[0] += 1
            if callable(original):
                original()

        client.close = close  # type: ignore[method-assign]
        self.clients.append(closes)
        return client


def env_with(connector: Recording) -> Environment:
    env = Environment([(DatabaseInstance, connector)])
    env.provider_config()
    return env


def test_the_engine_binds_its_connector_to_the_kinds_objects() -> None:
    connector = Recording()
    env = env_with(connector)
    env.apply(database_manifest("db"))
    ((kind, objects),) = connector.bound
    assert kind is DatabaseInstance
    assert [o["metadata"]["name"] for o in objects()] == ["db"]


def test_every_client_a_pass_connects_is_closed_once() -> None:
    connector = Recording()
    env = env_with(connector)
    env.apply(database_manifest("db"))
    env.run_until_idle()
    env.delete("DatabaseInstance", "db")
    env.run_until_idle()
    assert not env.exists("DatabaseInstance", "db")
    assert connector.clients and all(c == [1] for c in connector.clients), connector.clients


def test_admit_is_asked_once_before_the_takeover_and_a_refusal_takes_nothing() -> None:
    allowed = Recording()
    env = env_with(allowed)
    env.apply(database_manifest("db"))
    env.run_until_idle()
    assert allowed.admitted == ["db"]  # asked once: an owned object is not asked again
    assert env.state("DatabaseInstance", "db") == "ready"

    refused = Recording(refuse=True)
    env = env_with(refused)
    env.apply(database_manifest("no"))
    env.run_until_idle()
    assert refused.admitted == ["no"] and refused.clients == []
    obj = env.get("DatabaseInstance", "no")
    assert FINALIZER not in (obj["metadata"].get("finalizers") or [])
    failed = env.condition("DatabaseInstance", "no", "Failed")
    assert failed is not None and failed.reason == "Refused"
