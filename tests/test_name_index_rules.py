"""Rules of the external-name index (:class:`~lifecycle.runtime.names.NameIndex`):

* loading the index reports a list that failed, and the first claim lists again; a
  cluster that cannot list holds no objects;
* of two holders of one name, the older keeps it, then by namespace and name, then by
  uid, whatever order the list gives; a holder whose creation time is unknown counts
  as the older; of two of the same age, one without a namespace (cluster-scoped), or
  one whose name is unknown (an unknown name counts as empty), ranks first;
* a holder without a ``metadata.uid`` is reported with an empty uid;
* a name held by an object is refused to another whatever either namespace is called
  (a namespace named like a uid changes nothing), while the holder still holds it;
* a claim reads the holder afresh: a name another object claimed meanwhile is that
  object's, and a name the claimant itself took meanwhile is granted;
* a deletion claims the name the object holds, not the one it would take; an empty
  external name is never claimed, so a deletion under it leaves no claim behind.

Each test names the rule and asserts it through the reconciler on the embedded API
server, or through the index itself.
"""

from __future__ import annotations

from typing import Any

from helpers import KIND, name_holder

from lifecycle.core.kind import EXTERNAL_NAME, FINALIZER
from lifecycle.kube.errors import NotFound
from lifecycle.machines.database import DatabaseInstance
from lifecycle.providers.simcloud import DatabaseConnector, SimCloud
from lifecycle.providers.simcloud.scenarios.harness import database_manifest, simulated_environment
from lifecycle.runtime.names import NameIndex, kind_objects, read_object
from lifecycle.runtime.reconciler import Reconciler


# -------------------------------------------------------------- the external-name index
def test_loading_the_index_reports_a_list_that_failed_and_the_first_claim_lists_again() -> None:
    """Loading the index ahead of the workers answers False when the list failed; nothing
    is loaded, and the first claim lists the objects again and finds the holder."""
    holder = name_holder("a", "ua", "2026-01-01T00:00:00Z", held="x")
    asking = name_holder("b", "ub", "2026-01-02T00:00:00Z", annotated="x")
    objs = {"a": holder, "b": asking}
    lists: list[int] = []

    def lister() -> list[Any]:
        lists.append(1)
        if len(lists) == 1:
            raise ConnectionError("the API server is unreachable")
        return list(objs.values())

    index = NameIndex(lister, lambda _ns, name: objs.get(name))
    assert index.load() is False
    assert index.claim(asking, "x") == ("ua", "default", "a", "2026-01-01T00:00:00Z")
    assert len(lists) == 2
    assert index.load() is True
    assert len(lists) == 2  # loaded once: a later load lists nothing again


def test_a_holder_whose_creation_time_is_unknown_counts_as_the_older() -> None:
    """Of two objects holding one name, the older keeps it; an object whose creation time
    is unknown cannot be shown to be newer, so it counts as the older and a dated object
    never takes the name from it."""
    undated = name_holder("z", "uz", "", held="x")
    del undated["metadata"]["creationTimestamp"]
    dated = name_holder("a", "ua", "2026-01-01T00:00:00Z", held="x")
    objs = {"z": undated, "a": dated}
    index = NameIndex(lambda: [dated, undated], lambda _ns, name: objs.get(name))
    assert index.claim(dated, "x") == ("uz", "default", "z", "")
    assert index.claim(undated, "x") is None


def test_a_deletion_claims_the_name_the_object_holds_not_the_one_it_would_take() -> None:
    """A deleting object is checked against the name it holds (recorded in its status),
    never against the name it would take now: with its annotation removed and its
    default name annotated on another object, deleting it still deletes its own
    resource and leaves the other's alone."""
    env, cloud = simulated_environment(cloud=SimCloud(seed=3, create_polls=0))
    env.apply(database_manifest("a", annotations={EXTERNAL_NAME: "custom"}))
    env.run_until_idle()
    a = env.get(KIND, "a")
    assert a["status"]["externalName"] == "custom" and env.state(KIND, "a") == "ready"
    bare = {**a, "metadata": {**a["metadata"], "annotations": {}}}
    default = DatabaseInstance.external_name(bare)  # the name it takes without the annotation
    assert default != "custom"
    env.apply(database_manifest("b", annotations={EXTERNAL_NAME: default}))
    env.reconcile(KIND, "b")
    assert cloud.instances()[default]["state"] == "available"
    env.apply(database_manifest("a", annotations={EXTERNAL_NAME: None}))  # annotation removed
    env.delete(KIND, "a")
    env.run_until_idle()
    assert not env.exists(KIND, "a")
    assert cloud.count("delete", "custom") == 1
    assert cloud.count("delete", default) == 0
    assert cloud.instances()[default]["state"] == "available"


def test_the_holder_of_a_name_does_not_depend_on_the_order_of_the_list() -> None:
    """Of two records holding one name, the older keeps it, then by namespace and name, and
    last by uid: two records of one object name (deleted and made again within the same
    second, both in one list) rank the same whichever the list gives first."""
    old = name_holder("a", "ua", "2026-01-01T00:00:00Z", held="x")
    new = name_holder("a", "ub", "2026-01-01T00:00:00Z", held="x")
    asking = name_holder("c", "uc", "2026-01-02T00:00:00Z", annotated="x")
    for listed in ([old, new], [new, old]):
        index = NameIndex(lambda listed=listed: list(listed), lambda _ns, _name: old)
        assert index.claim(asking, "x") == ("ua", "default", "a", "2026-01-01T00:00:00Z")


def test_a_cluster_that_cannot_list_holds_no_objects() -> None:
    """The objects of a kind listed from a cluster without ``list`` are none (the index
    loads empty from it), not an error."""
    assert kind_objects(object(), DatabaseInstance.api_version, KIND) == []


def test_a_holder_keeps_its_name_whatever_its_namespace_is_called() -> None:
    """A name held by an object is refused to another, whatever the holder's namespace is
    called: a namespace named like the claimant's uid (a UUID is a valid namespace name)
    changes nothing."""
    uid = "6f1c2a9e-3b4d-4e5f-8a7b-9c0d1e2f3a4b"
    holder = name_holder("a", "ua", "2026-01-01T00:00:00Z", held="x")
    holder["metadata"]["namespace"] = uid
    asking = name_holder("c", uid, "2026-01-02T00:00:00Z", annotated="x")
    index = NameIndex(lambda: [holder], lambda _ns, _name: holder)
    assert index.claim(asking, "x") == ("ua", uid, "a", "2026-01-01T00:00:00Z")


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


def test_a_holder_whose_name_is_unknown_ranks_first_among_holders_of_its_age() -> None:
    """Two objects of the same age and namespace both hold a name, one of them without a
    ``metadata.name``: an unknown name counts as empty, so that one ranks first and keeps
    the name (here against a name starting with a digit), is read afresh under the empty
    name, and is reported with it."""
    created = "2026-01-01T00:00:00Z"
    unnamed = name_holder("", "u1", created, held="x")
    del unnamed["metadata"]["name"]
    named = name_holder("0db", "u2", created, held="x")
    objs = {"": unnamed, "0db": named}
    late = name_holder("d", "ud", "2026-01-04T00:00:00Z", annotated="x")
    for listed in ([unnamed, named], [named, unnamed]):
        index = NameIndex(lambda listed=listed: listed, lambda _ns, name: objs.get(name))
        assert index.claim(late, "x") == ("u1", "default", "", created)


def test_a_claim_is_refused_while_the_holder_holds_the_name_whatever_the_namespace() -> None:
    """A holder read afresh that still holds the name keeps it: the claim is refused
    with the holder, even when the claimant's namespace is named like the holder's uid
    (a UUID is a valid namespace name), and the name stays the holder's."""
    uid_a = "5f0c6a3e-1b2d-4c5e-8f90-a1b2c3d4e5f6"
    holder = name_holder("a", uid_a, "2026-01-01T00:00:00Z", held="x")
    asking = name_holder("b", "ub", "2026-01-02T00:00:00Z", annotated="x")
    asking["metadata"]["namespace"] = uid_a
    index = NameIndex(lambda: [holder], lambda ns, name: holder if (ns, name) == (
        "default", "a") else None)
    assert index.claim(asking, "x") == (uid_a, "default", "a", "2026-01-01T00:00:00Z")
    late = name_holder("c", "uc", "2026-01-03T00:00:00Z", annotated="x")
    found = index.claim(late, "x")
    assert found is not None and found[0] == uid_a


def test_a_holder_without_a_uid_is_reported_with_an_empty_uid() -> None:
    """A holder listed without ``metadata.uid`` counts as having the empty uid: a claim
    by an object whose uid is the text "None" is refused and reports the holder with
    ``""``, never a made-up uid under which the claimant would pass for the holder."""
    created = "2026-01-01T00:00:00Z"
    holder = name_holder("a", "", created, held="x")
    del holder["metadata"]["uid"]
    asking = name_holder("b", "None", "2026-01-02T00:00:00Z", annotated="x")
    index = NameIndex(lambda: [holder], lambda _ns, name: holder if name == "a" else None)
    assert index.claim(asking, "x") == ("", "default", "a", created)


def _unnamed_deleted(env: Any, name: str) -> None:
    """An object that carries our finalizer and an empty external-name annotation
    (no recorded name), then deleted: its deletion has no name to act under."""
    doc = database_manifest(name, annotations={EXTERNAL_NAME: ""})
    doc["metadata"]["finalizers"] = [FINALIZER]
    env.apply(doc)
    env.delete(KIND, name)


def test_an_empty_name_is_never_claimed_so_a_deletion_under_it_leaves_no_claim() -> None:
    """A deletion whose object holds an empty external name claims nothing in the index:
    once it is gone, the deletion of another such object reads no holder afresh (a claim
    of the empty name would stay, since the final pass releases only a real name)."""
    cloud = SimCloud(seed=1, create_polls=0)
    env, _ = simulated_environment(cloud=cloud)
    api = env.operator_api
    read: list[tuple[Any, str]] = []

    def reader(namespace: Any, name: str) -> Any:
        read.append((namespace, name))
        return read_object(api, DatabaseInstance.api_version, KIND, namespace, name)

    index = NameIndex(lambda: kind_objects(api, DatabaseInstance.api_version, KIND), reader,
                      DatabaseInstance.scope_of)
    env.reconcilers[KIND] = Reconciler(api, DatabaseInstance, DatabaseConnector(cloud),
                                       clock=env.clock.now, names=index)
    for name in ("a", "b"):
        _unnamed_deleted(env, name)
        env.reconcile(KIND, name)
        try:
            left = env.get(KIND, name)
        except NotFound:
            left = None
        assert left is None
    assert read == []
    assert cloud.count("create") == 0
