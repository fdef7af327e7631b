"""What a create, update or delete says of its own effect (``Completion``), and what the
engine does with it: go on in the same pass, observe once more, or leave it to the next.
"""

from __future__ import annotations

from typing import Any

import attrs
from helpers import AnnotationsPort

from lifecycle.core.contract import ManagedResource
from lifecycle.core.decide import Facts, decide
from lifecycle.core.errors import ExternalError
from lifecycle.core.kind import FINALIZER, INTENT
from lifecycle.core.plan import acted, after_action
from lifecycle.core.values import Completion, Creation, Intent, Observation, ProviderStatus
from lifecycle.machines.database import DatabaseInstance
from lifecycle.providers.simcloud import DatabaseConnector, SimCloud
from lifecycle.providers.simcloud.scenarios.harness import database_manifest
from lifecycle.runtime.effects import Effects, next_intent
from lifecycle.testing import Environment

M = DatabaseInstance.machine
AT = "2026-01-01T00:00:00Z"


def test_a_call_declares_its_completion_by_what_it_returns() -> None:
    seen = Observation(exists=True)
    assert Completion.of(seen) == Completion(observation=seen)
    assert Completion.of(Creation(finished=True)) == Completion(finished=True)
    assert Completion.of(Creation(observation=seen)) == Completion(observation=seen)
    assert Completion.of(None) == Completion.of("done") == Completion()


def test_after_an_update_or_a_delete_only_progress_is_taken() -> None:
    updating = Facts(state="ready", observation=Observation(exists=True, up_to_date=False))
    update = decide(M, updating)
    assert acted(update) == "update"
    moved = after_action(M, updating, update, Observation(exists=True))
    assert moved is not None and moved[1].transition is not None
    assert moved[1].transition.target == "ready"
    pending = Observation(exists=True, status=ProviderStatus.PENDING)
    assert after_action(M, updating, update, pending) is None
    assert after_action(M, updating, update, Observation.absent()) is None
    assert after_action(M, updating, update.failing(ExternalError("x"), "update"),
                        Observation(exists=True)) is None

    deleting = Facts(state="ready", deleting=True, observation=Observation(exists=True))
    delete = decide(M, deleting)
    assert acted(delete) == "delete"
    gone = after_action(M, deleting, delete, Observation.absent())
    assert gone is not None and gone[1].transition is not None
    assert M.table().states[gone[1].transition.target].final
    assert after_action(M, deleting, delete, pending) is None  # still deleting: wait


def test_a_ready_object_never_resumes_a_pending_entry() -> None:
    from datetime import UTC, datetime

    at = datetime(2026, 1, 1, tzinfo=UTC)
    pending = Intent("update", "u/update/2/2", 2, AT)
    assert next_intent(pending, "update", "u", 2, at) is pending
    assert next_intent(pending, "update", "u", 2, at, settled=True).key == "u/update/2/3"


class Client:
    """Answers each call as told; counts observations."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.observed = 0

    def observe(self, resource: ManagedResource) -> Observation:
        self.observed += 1
        return Observation(exists=True, message="observed")

    def create(self, resource: ManagedResource) -> Any:
        return self.answer

    def update(self, resource: ManagedResource) -> Any:
        return self.answer

    def delete(self, resource: ManagedResource) -> Any:
        return self.answer


def effects_of(answer: Any) -> tuple[Effects, Client]:
    from datetime import UTC, datetime

    client = Client(answer)
    resource = ManagedResource(kind="K", namespace="ns", name="n", uid="u", generation=1,
                               external_name="x", parameters=None)
    at = datetime(2026, 1, 1, tzinfo=UTC)
    return Effects(client, resource, AnnotationsPort(), lambda: at), client


def test_the_answer_is_taken_without_observing_and_finished_is_observed_once() -> None:
    answered = Observation(exists=True, message="answer")
    effects, client = effects_of(answered)
    effects.update()
    assert effects.after() is answered and client.observed == 0

    effects, client = effects_of(Completion(finished=True))
    effects.delete()
    seen = effects.after()
    assert seen is not None and seen.message == "observed" and client.observed == 1

    effects, client = effects_of(None)
    effects.update()
    assert effects.after() is None and client.observed == 0
    assert effects.after(observe_again=True) is not None and client.observed == 1


def test_a_deletion_keeps_its_status_write_while_another_finalizer_holds_the_object() -> None:
    cloud = SimCloud(seed=1, create_polls=0, modify_polls=0, delete_polls=0)
    env = Environment([(DatabaseInstance, DatabaseConnector(cloud))])
    env.provider_config()
    env.apply(database_manifest("db"))
    env.run_until_idle()
    obj = env.get("DatabaseInstance", "db")
    obj["metadata"]["finalizers"] = [*obj["metadata"]["finalizers"], "example.org/other"]
    env.api.replace(obj)
    env.delete("DatabaseInstance", "db")
    env.api.reset_stats()
    env.run_until_idle()
    held = env.get("DatabaseInstance", "db")  # still there: the other finalizer holds it
    assert FINALIZER not in held["metadata"]["finalizers"]
    assert env.api.stats["replace_status"] == 1  # its status says Deleted
    assert held["status"]["phase"] != "Ready"
    assert cloud.instances() == {}
    assert INTENT in held["metadata"]["annotations"]


def test_a_deletion_that_completes_at_once_writes_only_the_entry_and_the_finalizer() -> None:
    cloud = SimCloud(seed=1, create_polls=0, modify_polls=0, delete_polls=0)
    env = Environment([(DatabaseInstance, DatabaseConnector(cloud))])
    env.provider_config()
    env.apply(database_manifest("db"))
    env.run_until_idle()
    env.delete("DatabaseInstance", "db")
    env.api.reset_stats()
    steps = env.run_until_idle()
    assert len(steps) == 1 and not env.exists("DatabaseInstance", "db")
    assert env.api.writes() == 2 and env.api.stats["record_event"] == 0
    assert cloud.instances() == {}
    # A cloud still deleting is waited for: the pass records the Deleting step.
    slow = SimCloud(seed=1, create_polls=0, delete_polls=1)
    env = Environment([(DatabaseInstance, DatabaseConnector(slow))])
    env.provider_config()
    env.apply(database_manifest("db"))
    env.run_until_idle()
    env.delete("DatabaseInstance", "db")
    first = env.reconcile("DatabaseInstance", "db")
    assert first.after == "deleting"
    assert attrs.asdict(first.result)["reason"] == "Waiting"
