"""Rules of the reconciler and the external-name index that a sampled mutation run of
``lifecycle/runtime`` found unchecked:

* the supporting reads are cached per namespace: with a ``reads_ttl``, an object in
  one namespace is judged by its own namespace's annotations, never by those read
  for another namespace a moment before;
* the ``ExternalResourceLeftAlone`` note of a deletion that finds another's resource
  names at most the first 64 characters of the external name;
* a claim that finds, after reading the holder afresh, that another object claimed
  the name meanwhile reports that object, whatever the claimant's namespace is
  called; a claim that finds the name became its own meanwhile is granted;
* of two holders of a name created at the same moment, one without a namespace (a
  cluster-scoped object) keeps it, whatever the other's namespace is called.

Each test names the rule and asserts it through the reconciler on the embedded API
server, or through the runtime classes a pass uses.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from helpers import KIND, name_holder

from lifecycle.core.kind import EXTERNAL_NAME, OWNER
from lifecycle.core.values import ResultKind
from lifecycle.machines.database import DatabaseInstance
from lifecycle.providers.simcloud import DatabaseConnector, SimCloud
from lifecycle.providers.simcloud.scenarios.harness import database_manifest, simulated_environment
from lifecycle.runtime import reads
from lifecycle.runtime.names import NameIndex
from lifecycle.runtime.reconciler import Reconciler
from lifecycle.testing import Environment

CREDS = ("AKIDEXAMPLE", "s3cr3t")
PARAMS = {"engine": "postgres", "storage_gb": 20}


# ------------------------------------------------------------------ the supporting reads
def test_cached_reads_keep_each_namespace_s_annotations_apart(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """With a ``reads_ttl`` the namespace's annotations are reused, but only for objects
    of that namespace: an object whose namespace is handed to another operator stops
    (``NotOwned``, no provider call) even right after a pass in a namespace that is
    ours (the reads' clock stands still here, so every cached read is still fresh)."""
    monkeypatch.setattr(reads, "time", SimpleNamespace(monotonic=lambda: 1000.0))
    cloud = SimCloud(seed=1, create_polls=0)
    env = Environment([(DatabaseInstance, DatabaseConnector(cloud))])
    env.provider_config()
    env.reconcilers[KIND] = Reconciler(env.operator_api, DatabaseInstance,
                                       DatabaseConnector(cloud), clock=env.clock.now,
                                       reads_ttl=60.0)
    env.namespace("team-a")
    env.namespace("team-b", {OWNER: "other-operator"})
    env.apply(database_manifest("db", "team-a"))
    env.apply(database_manifest("db", "team-b"))
    ours = env.reconcile(KIND, "db", "team-a")
    assert ours.result is not None and ours.result.reason != "NotOwned"
    calls = len(cloud.calls)
    theirs = env.reconcile(KIND, "db", "team-b")
    assert theirs.result is not None
    assert (theirs.result.kind, theirs.result.reason) == (ResultKind.DONE, "NotOwned")
    assert len(cloud.calls) == calls


# ------------------------------------------------------- deleting beside another's resource
def test_the_note_of_a_resource_left_alone_names_at_most_64_characters_of_its_name() -> None:
    """A deletion that finds another's resource under a long external name lets go with
    an ``ExternalResourceLeftAlone`` note quoting only the name's first 64 characters
    (seen here because another finalizer keeps the object)."""
    name = "precious-" + "x" * 70
    env, cloud = simulated_environment(cloud=SimCloud(seed=3, create_polls=0))
    cloud.create_instance(CREDS, name, PARAMS, password="owners-password-1")
    doc = database_manifest("a", annotations={EXTERNAL_NAME: name})
    doc["metadata"]["finalizers"] = ["example.com/keep"]
    env.apply(doc)
    env.reconcile(KIND, "a")
    env.delete(KIND, "a")
    env.reconcile(KIND, "a")
    assert env.state(KIND, "a") == "deleted"
    note = env.condition(KIND, "a", "Informational")
    assert note is not None and note.reason == "ExternalResourceLeftAlone"
    assert note.message == f"external resource {name[:64]!r} is not this object's: left untouched"
    assert cloud.instances()[name]["state"] == "available"


# ---------------------------------------------------------- the external-name index
def _placed(obj: dict[str, Any], namespace: str | None) -> dict[str, Any]:
    """``obj`` moved to ``namespace`` (None: a cluster-scoped object, no namespace)."""
    if namespace is None:
        obj["metadata"].pop("namespace")
    else:
        obj["metadata"]["namespace"] = namespace
    return obj


def test_a_name_claimed_by_another_while_the_holder_is_read_is_that_objects() -> None:
    """A claim reads the holder it found afresh; if another object claimed the name in the
    meantime (the holder let it go, a second worker's object took it), the claim reports
    that object, even when the claimant's namespace is named like its uid, and the name
    stays that object's."""
    uid_c = "5f0c6a3e-1b2d-4c5e-8f90-a1b2c3d4e5f6"  # a UUID is a valid namespace name
    holder = name_holder("a", "ua", "2026-01-01T00:00:00Z", held="x")
    asking = _placed(name_holder("b", "ub", "2026-01-02T00:00:00Z", annotated="x"), uid_c)
    other = name_holder("c", uid_c, "2026-01-03T00:00:00Z", annotated="x")
    objs: dict[tuple[str | None, str], dict[str, Any]] = {("default", "a"): holder}
    reads_of_a: list[int] = []

    def reader(namespace: str | None, name: str) -> dict[str, Any] | None:
        if (namespace, name) == ("default", "a") and not reads_of_a:
            reads_of_a.append(1)
            index.release(holder, "x")  # a's finalizer removed: it is gone
            objs.pop(("default", "a"))
            assert index.claim(other, "x") is None  # c, reconciled meanwhile, takes it
        return objs.get((namespace, name))

    index = NameIndex(lambda: [holder, asking, other], reader)
    found = index.claim(asking, "x")
    assert reads_of_a == [1]
    assert found is not None and found[0] == uid_c
    assert index.claim(other, "x") is None


def test_a_claim_that_finds_the_name_its_own_after_reading_the_holder_is_granted() -> None:
    """If, while the holder is read afresh, the holder lets the name go and the claimant
    itself takes it, the claim is granted (None), not reported as held by the claimant."""
    holder = name_holder("a", "ua", "2026-01-01T00:00:00Z", held="x")
    asking = name_holder("b", "ub", "2026-01-02T00:00:00Z", annotated="x")
    objs: dict[str, dict[str, Any]] = {"a": holder}
    reads_of_a: list[int] = []

    def reader(_namespace: str | None, name: str) -> dict[str, Any] | None:
        if name == "a" and not reads_of_a:
            reads_of_a.append(1)
            index.release(holder, "x")
            objs.pop("a")
            assert index.claim(asking, "x") is None  # a second pass of b took it
        return objs.get(name)

    index = NameIndex(lambda: [holder, asking], reader)
    assert index.claim(asking, "x") is None
    assert reads_of_a == [1]
    late = name_holder("d", "ud", "2026-01-04T00:00:00Z", annotated="x")
    objs["b"] = asking
    found = index.claim(late, "x")
    assert found is not None and found[0] == "ub"


def test_a_holder_without_a_namespace_keeps_a_name_held_by_one_of_the_same_age() -> None:
    """Two objects created at the same moment both holding a name (an index shared by a
    cluster-scoped and a namespaced kind): the one without a namespace ranks first and
    keeps it, whatever the other's namespace is called (here one starting with a digit)."""
    created = "2026-01-01T00:00:00Z"
    cluster = _placed(name_holder("z", "u2", created, held="x"), None)
    namespaced = _placed(name_holder("a", "u1", created, held="x"), "2024-archive")
    objs = {(None, "z"): cluster, ("2024-archive", "a"): namespaced}
    late = name_holder("d", "ud", "2026-01-04T00:00:00Z", annotated="x")
    for listed in ([cluster, namespaced], [namespaced, cluster]):
        index = NameIndex(lambda listed=listed: listed,
                          lambda ns, name: objs.get((ns, name)))
        found = index.claim(late, "x")
        assert found is not None and found[0] == "u2"
