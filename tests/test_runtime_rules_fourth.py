"""Rules of the effects that a third sampled mutation run found unchecked: observing again
after a create of a kind whose creates finish, closing a client whose observe failed, and
resuming an interrupted create while its object is deleted.

Each test names the rule in the engine's words and asserts it through the public surface:
the harness's objects and the simulated cloud.
"""

from __future__ import annotations

from contextlib import suppress
from typing import Any

import attrs
import pytest

from lifecycle.core.errors import ExternalError
from lifecycle.core.kind import EXTERNAL_NAME, FINALIZER, INTENT
from lifecycle.core.values import Creation
from lifecycle.machines.database import DatabaseInstance
from lifecycle.providers.simcloud import DatabaseConnector, SimCloud
from lifecycle.providers.simcloud.client import DatabaseClient
from lifecycle.providers.simcloud.scenarios.harness import database_manifest
from lifecycle.testing import Environment

KIND = "DatabaseInstance"


def _environment(kind: Any = DatabaseInstance) -> tuple[Environment, SimCloud]:
    cloud = SimCloud(seed=1, create_polls=0)
    env = Environment([(kind, DatabaseConnector(cloud))])
    env.provider_config()
    return env, cloud


# ------------------------------------------------------------ a kind whose creates finish
def _first_pass_after_a_create_describing_nothing(monkeypatch: pytest.MonkeyPatch,
                                                  kind: Any) -> str:
    """The state the first pass leaves when the create answers neither an observation
    nor ``finished`` (the instance is available at once)."""
    create = DatabaseClient.create

    def answer(self: DatabaseClient, resource: Any) -> Creation:
        return attrs.evolve(create(self, resource), observation=None, finished=False)

    monkeypatch.setattr(DatabaseClient, "create", answer)
    env, _ = _environment(kind)
    env.apply(database_manifest("db"))
    return str(env.reconcile(KIND, "db").after)


def test_a_kind_whose_creates_finish_observes_again_after_a_create_that_said_nothing(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``Kind.observe_after_create``: the create has finished when it returns, so even a
    create whose answer describes nothing is observed once more in the same pass, and the
    object is Ready after it. Without the flag the pass waits in ``creating``."""
    finishing = attrs.evolve(DatabaseInstance, observe_after_create=True)
    assert _first_pass_after_a_create_describing_nothing(monkeypatch, finishing) == "ready"
    assert _first_pass_after_a_create_describing_nothing(
        monkeypatch, DatabaseInstance) == "creating"


# ------------------------------------------------------------------- the client's life
def test_a_client_whose_observe_fails_is_closed_before_the_pass_ends(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A connect whose observe fails (a handled error, or anything the provider raised)
    closes the client it opened before the error becomes the pass's condition: no pass
    leaves a client open."""
    opened: list[DatabaseClient] = []
    connect = DatabaseConnector.connect

    def spy(self: DatabaseConnector, resource: Any, config: Any) -> Any:
        client = connect(self, resource, config)
        opened.append(client)
        return client

    def unavailable(self: DatabaseClient, resource: Any) -> Any:
        raise ExternalError("describe failed: the region is unavailable",
                            reason="ProviderUnavailable")

    def broken(self: DatabaseClient, resource: Any) -> Any:
        raise KeyError("endpoint")

    monkeypatch.setattr(DatabaseConnector, "connect", spy)
    env, _ = _environment()
    for observe, reason in ((unavailable, "ProviderUnavailable"),
                            (broken, "ProviderClientError")):
        monkeypatch.setattr(DatabaseClient, "observe", observe)
        env.apply(database_manifest("db"))
        env.reconcile(KIND, "db")
        synced = env.condition(KIND, "db", "Synced")
        assert synced is not None and synced.status.value == "False"
        assert env.get(KIND, "db")["status"]["failure"]["reason"] == reason
    assert len(opened) == 2
    assert [client.closed for client in opened] == [True, True]


# ------------------------------------------- a create resumed while its object is deleted
class Crash(BaseException):
    """The operator process dying."""


ASSIGNING = attrs.evolve(DatabaseInstance, names_assigned=True)


def _created_then_interrupted_before_the_call() -> tuple[Environment, SimCloud, str]:
    """A kind whose provider names what it creates; the first pass commits its pending
    create entry, then dies before the cloud sees the call. The object is then deleted.
    Returns the environment, the cloud and the external name the object records."""
    env, cloud = _environment(ASSIGNING)
    env.apply(database_manifest("db"))
    real = cloud.create_instance

    def dying(*args: Any, **kwargs: Any) -> Any:
        raise Crash

    cloud.create_instance = dying  # type: ignore[method-assign]
    try:
        with suppress(Crash):
            env.reconcile(KIND, "db")
    finally:
        cloud.create_instance = real  # type: ignore[method-assign]
    meta = env.get(KIND, "db")["metadata"]
    assert '"outcome": "pending"' in meta["annotations"][INTENT]
    assert FINALIZER in meta["finalizers"] and cloud.instances() == {}
    env.delete(KIND, "db")
    return env, cloud, meta["annotations"][EXTERNAL_NAME]


def test_a_deletion_deletes_what_the_resumed_create_made_under_the_recorded_name() -> None:
    """Deleting an object whose create was interrupted repeats the create with its
    journalled key to learn the resource's name. A provider that keeps the requested name
    names nothing new, and the repeated call may have made the resource only now: it is
    observed again under the recorded name and deleted, never left behind."""
    env, cloud, name = _created_then_interrupted_before_the_call()
    env.advance(600)
    assert not env.exists(KIND, "db")
    assert cloud.creations(name) == 1  # made by the resumed create, with the journalled key
    assert name not in cloud.instances()


def test_a_resumed_create_whose_answer_is_no_creation_names_nothing(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A resumed create is read as its answer declares: an answer that is not a
    :class:`Creation` names nothing. The recorded name is observed again, nothing is there,
    and the deletion ends at once, without a failure."""
    env, cloud, _ = _created_then_interrupted_before_the_call()
    monkeypatch.setattr(DatabaseClient, "create", lambda self, resource: None)
    step = env.reconcile(KIND, "db")
    assert step.error is None and step.result is not None
    assert step.result.reason == "Deleted"
    assert not env.exists(KIND, "db") and cloud.instances() == {}
