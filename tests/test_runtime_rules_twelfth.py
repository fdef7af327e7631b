"""Rules of the managed pass, the external-name index and the intent journal that a
fourth sampled mutation run of ``lifecycle/runtime`` found unchecked in its pass
modules:

* a pass takes the connection's inputs read-only exactly when the policy forbids
  changes (``skip``), and writable otherwise (what a pass of the reconciler's
  ``pass_type`` is handed);
* a holder of a name without a ``metadata.uid`` is reported with an empty uid, never
  a made-up one, and is not taken for an object whose uid reads "None";
* an empty external name is never claimed in the index: a deletion under it leaves
  no claim behind, so no later claim of it reads the deleted object afresh;
* a forced pass whose object lost every annotation meanwhile (seen on the re-read
  after a 409) has no operation annotation to remove, and goes on;
* :meth:`Effects.resume_create <lifecycle.runtime.effects.Effects.resume_create>`
  answers the name the provider assigned to the resumed create, the name the
  resource is then observed under.

Each test names the rule and asserts it through the reconciler on the embedded API
server, or through the runtime classes a pass uses.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, ClassVar

from helpers import KIND, name_holder

from lifecycle.core.contract import ManagedResource
from lifecycle.core.decide import ReconcilePolicy
from lifecycle.core.kind import EXTERNAL_NAME, FINALIZER, INTENT, INTENT_MAC, OPERATION
from lifecycle.core.values import Creation, Intent, Observation
from lifecycle.kube.errors import NotFound
from lifecycle.kube.objects import clone
from lifecycle.machines.database import DatabaseInstance
from lifecycle.providers.simcloud import DatabaseConnector, SimCloud
from lifecycle.providers.simcloud.scenarios.harness import database_manifest, simulated_environment
from lifecycle.runtime.effects import Effects, Inputs
from lifecycle.runtime.journalkey import Journal, subject_of
from lifecycle.runtime.names import NameIndex, kind_objects, read_object
from lifecycle.runtime.reconciler import Pass, Reconciler

AT = datetime(2026, 1, 1, tzinfo=UTC)


# ----------------------------------------------------------------------------- the pass
class _InputsPass(Pass):
    """A pass that notes how take-over asks for the connection's inputs."""

    seen: ClassVar[list[Any]] = []

    def inputs(self, deleting: bool, read_only: bool) -> Inputs:
        """Note ``read_only``, then read the inputs as a pass does."""
        _InputsPass.seen.append(read_only)
        return super().inputs(deleting, read_only)


class _InputsReconciler(Reconciler):
    """A reconciler whose passes are :class:`_InputsPass`."""

    pass_type = _InputsPass


def test_the_inputs_are_read_only_exactly_when_the_policy_forbids_changes() -> None:
    """Under ``skip`` (no create, no update) the take-over reads the connection's inputs
    read-only; under ``manage`` it reads them writable."""
    for policy, expected in ((ReconcilePolicy.SKIP, True), (ReconcilePolicy.MANAGE, False)):
        cloud = SimCloud(seed=1, create_polls=0)
        env, _ = simulated_environment(cloud=cloud)
        env.reconcilers[KIND] = _InputsReconciler(
            env.operator_api, DatabaseInstance, DatabaseConnector(cloud),
            clock=env.clock.now, default_policy=policy)
        _InputsPass.seen.clear()
        env.apply(database_manifest("db"))
        env.reconcile(KIND, "db")
        assert _InputsPass.seen == [expected]


# ------------------------------------------------------------------ the external-name index
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


# ------------------------------------------------------------- the operation annotation
class _AnnotationsRemovedMeanwhile:
    """The API server, where another writer removes every annotation of the object just
    before the operator's first write of it (which then conflicts)."""

    def __init__(self, api: Any) -> None:
        self._api, self.raced = api, False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._api, name)

    def replace(self, body: Any) -> Any:
        if not self.raced and body.get("kind") == KIND:
            self.raced = True
            meta = body["metadata"]
            stored = clone(self._api.get(body["apiVersion"], KIND, meta.get("namespace"),
                                         meta["name"]))
            del stored["metadata"]["annotations"]
            self._api.replace(stored)
        return self._api.replace(body)


def test_a_forced_pass_whose_annotations_vanished_meanwhile_goes_on() -> None:
    """The forced pass removes the operation annotation; when its write conflicts and
    the fresh object has no annotations at all (the user removed them), there is
    nothing to remove: the pass goes on and creates the resource."""
    cloud = SimCloud(seed=1, create_polls=0)
    env, _ = simulated_environment(cloud=cloud)
    api = _AnnotationsRemovedMeanwhile(env.operator_api)
    env.reconcilers[KIND] = Reconciler(api, DatabaseInstance, DatabaseConnector(cloud),
                                       clock=env.clock.now)
    env.apply(database_manifest("db", annotations={OPERATION: "reconcile"}))
    env.reconcile(KIND, "db")
    assert api.raced
    assert OPERATION not in (env.get(KIND, "db")["metadata"].get("annotations") or {})
    assert cloud.count("create") == 1


# ------------------------------------------------------------------ the intent journal
class _NamingClient:
    """A provider client whose create answers the name it assigned."""

    def __init__(self, assigned: str) -> None:
        self.assigned = assigned
        self.keys: list[str | None] = []

    def observe(self, resource: ManagedResource) -> Observation:
        """Nothing is seen."""
        return Observation(exists=False)

    def create(self, resource: ManagedResource) -> Creation:
        """Note the idempotency key; answer the assigned name."""
        self.keys.append(resource.idempotency_key)
        return Creation(external_name=self.assigned)


class _Port:
    """The reconciled object's annotations, as the journal sees them."""

    def __init__(self, values: dict[str, str]) -> None:
        self.values = dict(values)

    def annotations(self) -> dict[str, str]:
        """The annotations."""
        return dict(self.values)

    def annotate(self, key: str, value: str) -> None:
        """Commit one annotation."""
        self.values[key] = value

    def stage(self, key: str, value: str) -> None:
        """Set one annotation with the next write."""
        self.values[key] = value

    def defer(self, key: str, value: str) -> None:
        """Set one annotation with the next write, if any."""
        self.values[key] = value


def test_a_resumed_create_answers_the_name_the_provider_assigned() -> None:
    """A pending create resumed with its journalled key answers the name the provider
    assigned (committed to the annotation): the name the resource is observed under."""
    resource = ManagedResource(kind="K", namespace="ns", name="n", uid="u", generation=1,
                               external_name="requested", parameters=None)
    journal = Journal()
    entry = Intent("create", "u/create/1/1", 1, "2026-01-01T00:00:00Z")
    subject = subject_of("K", "ns", "n", "u", "requested")
    port = _Port({INTENT: entry.to_json(), INTENT_MAC: journal.mac(entry, subject)})
    client = _NamingClient("assigned-7")
    effects = Effects(client, resource, port, lambda: AT, journal)
    assert effects.resume_create() == "assigned-7"
    assert client.keys == ["u/create/1/1"]
    assert port.values[EXTERNAL_NAME] == "assigned-7"
    assert effects.resource.external_name == "assigned-7"
