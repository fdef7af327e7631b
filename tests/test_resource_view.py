"""What the engine hands a client about one resource: ``ManagedResource.observed``."""

from __future__ import annotations

from typing import Any

from lifecycle.machines.database import DatabaseInstance
from lifecycle.providers.simcloud import DatabaseConnector, SimCloud
from lifecycle.providers.simcloud.scenarios.harness import database_manifest
from lifecycle.testing import Environment


class Recording:
    """A connector whose clients record every resource they are handed."""

    def __init__(self, inner: DatabaseConnector) -> None:
        self.inner = inner
        self.seen: list[Any] = []

    def connect(self, resource: Any, config: Any) -> Any:
        self.seen.append(resource)
        return self.inner.connect(resource, config)


def test_the_client_sees_what_the_last_observation_stored() -> None:
    connector = Recording(DatabaseConnector(SimCloud(seed=1, create_polls=0)))
    env = Environment([(DatabaseInstance, connector)])
    env.provider_config()
    env.apply(database_manifest("db"))
    env.run_until_idle()
    assert connector.seen[0].observed == {}  # nothing observed yet
    stored = env.get(DatabaseInstance.kind, "db")["status"]["atProvider"]
    assert stored  # the simulated cloud reports its instance's fields
    env.reconcile(DatabaseInstance.kind, "db")
    assert dict(connector.seen[-1].observed) == stored
