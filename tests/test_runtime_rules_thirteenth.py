"""Rules of the managed pass and of a pass's effects that a fourth sampled mutation run
of ``lifecycle/runtime`` found unchecked in its pass modules:

* a deletion does not resolve references: an object being deleted whose references
  cannot be resolved is still deleted, its resource with it;
* an annotation is set on an object that carries no annotations at all (the fresh
  object read after a 409, whose annotations another writer removed, gets the
  journal entry);
* late-initialisation writes nothing into an object without a spec, or whose spec
  is not a mapping: there is no ``spec.forProvider`` to fill;
* :meth:`Effects.act <lifecycle.runtime.effects.Effects.act>` starts from the journal
  entry it is handed, not from the object's annotations;
* within an act, each entry the act writes is the one it answers next, without
  reading the object's annotations again;
* outside an act, :meth:`Effects.trusted <lifecycle.runtime.effects.Effects.trusted>`
  reads the object's journal (after an act too);
* by default an act does not observe again after a create that left no observation
  and did not say it finished (``observe_after_create`` is off).

Each test names the rule and asserts it through the reconciler on the embedded API
server, or through the runtime classes a pass uses.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from helpers import KIND, ready

from lifecycle.core.contract import ManagedResource
from lifecycle.core.decide import Choice, Decision, Facts, decide
from lifecycle.core.kind import INTENT, INTENT_MAC
from lifecycle.core.references import UnresolvedReference
from lifecycle.core.values import Creation, Intent, Observation
from lifecycle.kube.errors import NotFound
from lifecycle.kube.objects import clone
from lifecycle.machines.database import DatabaseInstance
from lifecycle.providers.simcloud import DatabaseConnector, SimCloud
from lifecycle.providers.simcloud.scenarios.harness import simulated_environment
from lifecycle.runtime.effects import Effects
from lifecycle.runtime.journalkey import Journal, subject_of
from lifecycle.runtime.reconciler import Pass, Reconciler
from lifecycle.runtime.references import References

AT = datetime(2026, 1, 1, tzinfo=UTC)


# ------------------------------------------------------------------------ references
class _Unresolvable(References):
    """References that can never be resolved (their target is gone)."""

    def resolve(self, run: Any) -> UnresolvedReference:
        """Refuse: the referenced object is not found."""
        return UnresolvedReference("unresolved reference(s): networkRef: Network 'gone' "
                                   "not found in namespace 'default'")


def test_a_deletion_does_not_resolve_references() -> None:
    """An object being deleted whose references no longer resolve is still deleted: the
    resource is deleted and the finalizer removed, no reference refusal in the way."""
    cloud = SimCloud(seed=1, create_polls=0)
    env, _ = simulated_environment(cloud=cloud)
    ready(env)
    reconciler = env.reconcilers[KIND]
    reconciler.references = _Unresolvable(DatabaseInstance)
    env.delete(KIND, "db")
    env.run_until_idle()
    try:
        left = env.get(KIND, "db")
    except NotFound:
        left = None
    assert left is None
    assert cloud.count("delete") == 1


# ------------------------------------------------------------------------ annotations
class _AnnotationsRemovedOnFirstWrite:
    """The API server, where another writer removes every annotation of the object just
    before the operator's first object write once ``armed`` (which then conflicts)."""

    def __init__(self, api: Any) -> None:
        self._api, self.armed, self.raced = api, False, False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._api, name)

    def replace(self, body: Any) -> Any:
        if self.armed and not self.raced and body.get("kind") == KIND:
            self.raced = True
            meta = body["metadata"]
            stored = clone(self._api.get(body["apiVersion"], KIND, meta.get("namespace"),
                                         meta["name"]))
            del stored["metadata"]["annotations"]
            self._api.replace(stored)
        return self._api.replace(body)


def test_an_annotation_is_set_on_an_object_without_annotations() -> None:
    """A Ready object's update journals first; when that write conflicts and the fresh
    object has no annotations at all, the entry and its MAC are still written."""
    cloud = SimCloud(seed=1, create_polls=0)
    env, _ = simulated_environment(cloud=cloud)
    api = _AnnotationsRemovedOnFirstWrite(env.operator_api)
    env.reconcilers[KIND] = Reconciler(api, DatabaseInstance, DatabaseConnector(cloud),
                                       clock=env.clock.now)
    obj = ready(env)
    changed = clone(obj)
    forprovider = changed["spec"]["forProvider"]
    forprovider["storageGB"] = int(forprovider.get("storageGB") or 10) + 10
    env.apply(changed)
    api.armed = True
    env.reconcile(KIND, "db")
    assert api.raced
    annotations = env.get(KIND, "db")["metadata"].get("annotations") or {}
    assert Intent.from_dict(json.loads(annotations[INTENT])).operation == "update"
    assert INTENT_MAC in annotations
    assert cloud.count("modify") == 1


# ------------------------------------------------------------------------ late-init
class _NoWrites:
    """A cluster that refuses every call: nothing may be read or written."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the cluster was called: {name}")


def test_late_init_writes_nothing_into_an_object_without_a_spec() -> None:
    """An object without a spec (or whose spec is not a mapping) has no
    ``spec.forProvider`` to fill: late-initialisation leaves it alone, writing nothing
    and raising nothing."""
    for spec in ({"absent": True}, {"spec": None}, {"spec": ["version"]}):
        obj: dict[str, Any] = {"apiVersion": DatabaseInstance.api_version, "kind": KIND,
                               "metadata": {"name": "db", "namespace": "default",
                                            "uid": "u", "generation": 1}}
        if "spec" in spec:
            obj["spec"] = spec["spec"]
        run = Pass(obj=obj, state="ready", generation=1, secrets=None, api=_NoWrites(),
                   kind=DatabaseInstance)
        run.late_init({"version": "16"})
        assert run.obj is obj
        assert run.observed is None


# ------------------------------------------------------------------------ the act
class _CountingPort:
    """The reconciled object's annotations as the journal sees them; counts the reads."""

    def __init__(self, values: dict[str, str]) -> None:
        self.values = dict(values)
        self.reads = 0

    def annotations(self) -> dict[str, str]:
        """The annotations (a read)."""
        self.reads += 1
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


class _Client:
    """A provider client that notes its calls; create answers ``creation``."""

    def __init__(self, creation: Creation | None = None) -> None:
        self.creation = creation or Creation()
        self.keys: list[str | None] = []
        self.observed = 0

    def observe(self, resource: ManagedResource) -> Observation:
        """Nothing is seen."""
        self.observed += 1
        return Observation(exists=False)

    def create(self, resource: ManagedResource) -> Creation:
        """Note the idempotency key."""
        self.keys.append(resource.idempotency_key)
        return self.creation

    def update(self, resource: ManagedResource) -> None:
        """Note the idempotency key."""
        self.keys.append(resource.idempotency_key)


class _Host:
    """A machine host whose one action updates twice, noting the entry trusted between."""

    def __init__(self) -> None:
        self.between: Intent | None = None

    def twice(self, effects: Effects) -> None:
        """Update, note the trusted entry, update again."""
        effects.update()
        self.between = effects.trusted()
        effects.update()


RESOURCE = ManagedResource(kind="K", namespace="ns", name="n", uid="u", generation=1,
                           external_name="n-ext", parameters=None)
SUBJECT = subject_of("K", "ns", "n", "u", "n-ext")
UPDATING = Decision(source="ready", choice=Choice("update", "UpdateRequested"),
                    actions=("twice",))


def test_an_act_starts_from_the_entry_it_is_handed() -> None:
    """The act's first call continues from the handed entry (a pending update of this
    generation is resumed with its key), not from what the annotations hold."""
    pending = Intent("update", "u/update/1/4", 1, "2026-01-01T00:00:00Z")
    port = _CountingPort({})
    client = _Client()
    effects = Effects(client, RESOURCE, port, lambda: AT, Journal())
    effects.act(Facts(state="ready"), UPDATING, _Host(), DatabaseInstance.machine,
                entry=pending)
    assert client.keys[0] == "u/update/1/4"
    assert port.reads == 0


def test_within_an_act_the_entry_written_is_the_one_answered() -> None:
    """Between two calls of one act, the trusted entry is the one the first call wrote,
    answered without reading the object's annotations again: the second call resumes
    that pending entry's key."""
    journal = Journal()
    port = _CountingPort({})
    client = _Client()
    effects = Effects(client, RESOURCE, port, lambda: AT, journal)
    host = _Host()
    effects.act(Facts(state="ready"), UPDATING, host, DatabaseInstance.machine, entry=None)
    assert host.between is not None and host.between.key == "u/update/1/1"
    assert client.keys == ["u/update/1/1", "u/update/1/1"]
    assert port.reads == 0


def test_outside_an_act_the_trusted_entry_is_read_from_the_object() -> None:
    """Once an act is over, :meth:`Effects.trusted` reads the object's journal again:
    an entry written on the object afterwards is the one it answers."""
    journal = Journal()
    port = _CountingPort({})
    effects = Effects(_Client(), RESOURCE, port, lambda: AT, journal)
    effects.act(Facts(state="ready"), Decision(source="ready", choice=Choice(None, "Idle")),
                _Host(), DatabaseInstance.machine)
    later = Intent("delete", "u/delete/1/1", 1, "2026-01-01T00:00:00Z")
    port.values.update({INTENT: later.to_json(), INTENT_MAC: journal.mac(later, SUBJECT)})
    assert effects.trusted() == later


def test_an_act_does_not_observe_after_a_create_by_default() -> None:
    """A create that says nothing of its effect (not finished, no observation) is not
    observed again by an act left at its default: the next pass observes."""
    machine = DatabaseInstance.machine
    facts = Facts(state="unclaimed", observation=Observation(exists=False))
    decision = decide(machine, facts)
    assert decision.actions
    client = _Client(Creation())
    effects = Effects(client, RESOURCE, _CountingPort({}), lambda: AT, Journal())
    decided, _, following = effects.act(facts, decision, machine.guard_host(), machine)
    assert decided.error is None and client.keys
    assert client.observed == 0
    assert following is None
