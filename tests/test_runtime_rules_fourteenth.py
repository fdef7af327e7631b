"""Rules of a pass's conclusion and of the connection Secret that a fourth sampled
mutation run of ``lifecycle/runtime`` found unchecked in its pass modules:

* a note that stands across a pass that acted and then saw the result keeps its
  ``lastTransitionTime``: the call's own conclusion carries the pass's notes too, so
  the note never flips in between (a ``ConfigValid`` False ``ExternalNameChanged``
  note stays stamped when it was first reported, through an update that reaches
  Ready in the same pass);
* by default :meth:`ConnectionSecrets.publish
  <lifecycle.runtime.secrets.ConnectionSecrets.publish>` writes only a Secret that
  changed: publishing details the Secret already holds writes nothing;
* the connection Secret's ownerReference blocks its owner's deletion
  (``blockOwnerDeletion: true``): a foreground deletion of the owner waits until the
  Secret is gone.

Each test names the rule and asserts it through the reconciler on the embedded API
server, or through the runtime classes a pass uses.
"""

from __future__ import annotations

from typing import Any

from helpers import KIND, make, ready

from lifecycle.core.kind import EXTERNAL_NAME
from lifecycle.kube.errors import NotFound
from lifecycle.machines.database import DatabaseInstance
from lifecycle.providers.simcloud import DatabaseConnector, SimCloud
from lifecycle.providers.simcloud.scenarios.harness import database_manifest
from lifecycle.runtime.secrets import ConnectionSecrets, decode
from lifecycle.testing import Environment


def _config_valid(env: Environment) -> dict[str, Any]:
    found = [c for c in env.get(KIND, "db")["status"]["conditions"]
             if c.get("type") == "ConfigValid"]
    assert len(found) == 1
    return found[0]


# ------------------------------------------------------------------------ conclusion
def test_a_standing_note_keeps_its_transition_time_through_a_pass_that_acted_and_saw() -> None:
    """An ``ExternalNameChanged`` note reported before an update that reaches Ready in
    the same pass (ready -> updating -> ready) is still the same note afterwards: its
    ``lastTransitionTime`` is when it was first reported, not the update's time."""
    cloud = SimCloud(seed=1, create_polls=0, modify_polls=0)
    env = Environment([(DatabaseInstance, DatabaseConnector(cloud))])
    env.provider_config()
    env.apply(database_manifest("db", annotations={EXTERNAL_NAME: "orders"}))
    env.run_until_idle()
    assert env.state(KIND, "db") == "ready"
    env.apply(database_manifest("db", annotations={EXTERNAL_NAME: "renamed"}))
    env.reconcile(KIND, "db")
    noted = _config_valid(env)
    assert (noted["status"], noted["reason"]) == ("False", "ExternalNameChanged")
    env.clock.advance(600)
    env.apply(database_manifest("db", annotations={EXTERNAL_NAME: "renamed"}, storage_gb=40))
    env.reconcile(KIND, "db")
    # The pass acted and saw the result: one Event naming both transitions.
    assert [e["message"] for e in env.events("db")][-1].startswith(
        "ready -> updating -> ready: ")
    assert cloud.count("modify") == 1
    after = _config_valid(env)
    assert (after["status"], after["reason"]) == ("False", "ExternalNameChanged")
    assert after["observedGeneration"] == env.get(KIND, "db")["metadata"]["generation"]
    assert after["lastTransitionTime"] == noted["lastTransitionTime"]


# ------------------------------------------------------------------------ publish
def test_publishing_unchanged_details_writes_nothing_by_default() -> None:
    """``publish`` without ``forced`` writes the Secret only when the details change it:
    the second publish of the same details writes nothing and leaves the Secret's
    resourceVersion as it was."""
    env, _ = make(create_polls=0)
    owner = ready(env)
    secrets = ConnectionSecrets(env.api, DatabaseInstance)
    secrets.publish(owner, {"region": "eu-west-1"})
    written = env.api.get("v1", "Secret", "default", "db-conn")
    assert decode(written)["region"] == "eu-west-1"
    before = env.api.writes("Secret")
    ConnectionSecrets(env.api, DatabaseInstance).publish(owner, {"region": "eu-west-1"})
    assert env.api.writes("Secret") == before
    again = env.api.get("v1", "Secret", "default", "db-conn")
    assert again["metadata"]["resourceVersion"] == written["metadata"]["resourceVersion"]


# ------------------------------------------------------------------------ ownership
def test_the_connection_secret_blocks_its_owners_foreground_deletion() -> None:
    """The Secret's controller ownerReference has ``blockOwnerDeletion``: deleted in the
    foreground, the owner (its resource deleted, its finalizer removed) stays while the
    Secret lingers behind another finalizer, and goes once the Secret is gone."""
    env, cloud = make(create_polls=0)
    ready(env)
    secret = env.api.get("v1", "Secret", "default", "db-conn")
    secret["metadata"]["finalizers"] = ["example.com/hold"]
    env.api.replace(secret)
    env.api.delete(DatabaseInstance.api_version, KIND, "default", "db",
                   propagation_policy="Foreground")
    env.enqueue(KIND, "db")
    env.run_until_idle()
    assert cloud.count("delete") == 1
    owner = env.get(KIND, "db")  # raises NotFound if the Secret did not block it
    assert owner["metadata"].get("finalizers") == ["foregroundDeletion"]
    lingering = env.api.get("v1", "Secret", "default", "db-conn")
    assert lingering["metadata"].get("deletionTimestamp")
    lingering["metadata"]["finalizers"] = []
    env.api.replace(lingering)
    for kind, api_version, name in (("Secret", "v1", "db-conn"),
                                    (KIND, DatabaseInstance.api_version, "db")):
        try:
            env.api.get(api_version, kind, "default", name)
        except NotFound:
            continue
        raise AssertionError(f"{kind} {name} is still there")
