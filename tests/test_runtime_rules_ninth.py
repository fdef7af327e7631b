"""Rules of the reconciler, the intent journal, the connection Secrets and the
external-name index that a fourth sampled mutation run of ``lifecycle/runtime`` found
unchecked in its pass modules:

* a reconciler given an index of external names (``names``) claims in that index, so
  a name another object holds there is refused, never loaded afresh from the list;
* of two holders of a name created at the same moment in the same namespace, one
  whose name is unknown ranks first (an unknown name counts as empty) and keeps it;
* ``ensure_password`` reuses a stored password: it generates none and writes nothing,
  even for a forced pass;
* a cluster-scoped object's journal entries are sealed for the empty namespace, the
  subject the next pass reads them under, so a retried create gets a new key;
* the ``ExternalNameConflict`` message quotes at most 64 characters of the name;
* :func:`~lifecycle.runtime.effects.connect` takes the stored state as not Ready by
  default, so a pending entry for the same call is resumed with its key;
* a claim is refused while the holder still holds the name, even when the
  claimant's namespace is named like the holder's uid.

Each test names the rule and asserts it through the reconciler on the embedded API
server, or through the runtime classes a pass uses.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import attrs
from helpers import KIND, name_holder

from lifecycle.core.contract import ManagedResource, ProviderConfig
from lifecycle.core.errors import ExternalError
from lifecycle.core.kind import EXTERNAL_NAME, INTENT, INTENT_MAC
from lifecycle.core.values import Creation, Intent, Observation
from lifecycle.machines.database import DatabaseInstance
from lifecycle.providers.simcloud import DatabaseConnector, SimCloud
from lifecycle.providers.simcloud.scenarios.harness import database_manifest, simulated_environment
from lifecycle.runtime.effects import connect
from lifecycle.runtime.journalkey import Journal, subject_of
from lifecycle.runtime.names import NameIndex
from lifecycle.runtime.reconciler import Reconciler
from lifecycle.runtime.secrets import ConnectionSecrets
from lifecycle.testing import Environment

KEY = b"k" * 32


# ------------------------------------------------------------ the external-name index
def test_a_reconciler_given_an_index_of_names_claims_in_that_index() -> None:
    """``names`` is the index the reconciler claims in (shared, say, with a kind naming
    the same resources): a name another object holds there is refused with
    ``ExternalNameConflict`` and nothing is created, though no object of this kind in
    the cluster holds it."""
    holder = name_holder("a", "ua", "2026-01-01T00:00:00Z", held="orders")
    shared = NameIndex(lambda: [holder], lambda _ns, name: holder if name == "a" else None)
    cloud = SimCloud(seed=1, create_polls=0)
    env = Environment([(DatabaseInstance, DatabaseConnector(cloud))])
    env.provider_config()
    env.reconcilers[KIND] = Reconciler(env.operator_api, DatabaseInstance,
                                       DatabaseConnector(cloud), clock=env.clock.now,
                                       names=shared)
    env.apply(database_manifest("db", annotations={EXTERNAL_NAME: "orders"}))
    env.reconcile(KIND, "db")
    failed = env.condition(KIND, "db", "Failed")
    assert failed is not None and failed.reason == "ExternalNameConflict"
    assert failed.message == "external name 'orders' is held by default/a; choose another name"
    assert list(cloud.instances()) == []


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


def test_a_conflict_message_quotes_at_most_64_characters_of_the_name() -> None:
    """``ExternalNameConflict`` names the holder and quotes only the first 64 characters of
    a long external name (the kind sets no maximum length)."""
    name = "orders-" + "x" * 70
    env, cloud = simulated_environment(cloud=SimCloud(seed=1, create_polls=0))
    env.apply(database_manifest("a", annotations={EXTERNAL_NAME: name}))
    env.reconcile(KIND, "a")
    env.apply(database_manifest("b", annotations={EXTERNAL_NAME: name}))
    env.reconcile(KIND, "b")
    failed = env.condition(KIND, "b", "Failed")
    assert failed is not None and failed.reason == "ExternalNameConflict"
    assert failed.message == (f"external name {name[:64]!r} is held by default/a; "
                              "choose another name")
    assert list(cloud.instances()) == [name]


# ------------------------------------------------------------ the connection Secret
def test_ensure_password_reuses_a_stored_password_and_writes_nothing_even_forced() -> None:
    """A password already in the connection Secret is reused as it is: no new one is
    generated and the Secret is not written, even for a forced pass."""
    env, _ = simulated_environment()
    env.apply(database_manifest("db"))
    owner = env.get(KIND, "db")
    ConnectionSecrets(env.api, DatabaseInstance, lambda: "stored-password").ensure_password(
        owner)
    writes = env.api.writes("Secret")
    made: list[str] = []

    def factory() -> str:
        made.append("new-password")
        return "new-password"

    secrets = ConnectionSecrets(env.api, DatabaseInstance, factory)
    assert secrets.ensure_password(owner, forced=True) == "stored-password"
    assert env.api.writes("Secret") == writes
    assert made == []
    assert env.secret("db-conn") == {"password": "stored-password"}


# ------------------------------------------------------------------ the intent journal
class _FailingFirstCreate:
    """The simulated cloud's connector; its client's first create fails (a provider error),
    and every create's idempotency key is recorded."""

    def __init__(self, cloud: SimCloud) -> None:
        self.inner = DatabaseConnector(cloud)
        self.keys: list[str] = []

    def connect(self, resource: ManagedResource, config: ProviderConfig) -> Any:
        client, keys = self.inner.connect(resource, config), self.keys

        class Client:
            def __getattr__(self, name: str) -> Any:
                return getattr(client, name)

            def create(self, r: ManagedResource) -> Creation:
                keys.append(r.idempotency_key)
                if len(keys) == 1:
                    raise ExternalError("the provider is unavailable", reason="Unavailable")
                return client.create(r)

        return Client()


def test_a_cluster_scoped_object_s_failed_create_is_retried_under_a_new_key() -> None:
    """A cluster-scoped object's journal entry is sealed for the empty namespace, the
    subject the next pass reads it under: after a create failed, the next pass trusts
    the failed entry and retries under the next key, never under the failed one's."""
    cluster_scoped = attrs.evolve(DatabaseInstance, namespaced=False)
    connector = _FailingFirstCreate(SimCloud(seed=1, create_polls=0))
    env = Environment([(cluster_scoped, connector)])
    env.provider_config()
    manifest = database_manifest("db")
    del manifest["metadata"]["namespace"]
    manifest["spec"]["writeConnectionSecretToRef"]["namespace"] = "default"
    env.apply(manifest)
    env.reconcile(KIND, "db", None)
    env.reconcile(KIND, "db", None)
    uid = env.get(KIND, "db", None)["metadata"]["uid"]
    assert connector.keys == [f"{uid}/create/1/1", f"{uid}/create/1/2"]


class _Port:
    """An ObjectPort over a plain dict of annotations."""

    def __init__(self, annotations: dict[str, str]) -> None:
        self.committed = annotations

    def annotations(self) -> dict[str, str]:
        return self.committed

    def annotate(self, key: str, value: str) -> None:
        self.committed[key] = value

    def stage(self, key: str, value: str) -> None:
        self.committed[key] = value

    def defer(self, key: str, value: str) -> None:
        self.committed[key] = value


class _AbsentConnector:
    """A connector whose resource is not there, recording each create's key."""

    def __init__(self) -> None:
        self.keys: list[str] = []

    def connect(self, resource: ManagedResource, config: ProviderConfig) -> Any:
        keys = self.keys

        class Client:
            def observe(self, r: ManagedResource) -> Observation:
                return Observation.absent()

            def create(self, r: ManagedResource) -> Creation:
                keys.append(r.idempotency_key)
                return Creation()

        return Client()


def test_connect_takes_the_stored_state_as_not_ready_by_default() -> None:
    """Unless told the stored state is Ready, the effects ``connect`` makes resume a pending
    entry for the same call and generation with its key (a crash interrupted it), even
    for a kind whose closes are deferred."""
    journal = Journal(KEY)
    resource = ManagedResource(kind=KIND, namespace="default", name="db", uid="u-1",
                               generation=2, external_name="orders", parameters=None)
    pending = Intent("create", "u-1/create/2/1", 2, "2026-01-01T00:00:00Z")
    sealed = journal.mac(pending, subject_of(KIND, "default", "db", "u-1", "orders"))
    port = _Port({INTENT: pending.to_json(), INTENT_MAC: sealed})
    connector = _AbsentConnector()
    effects, observation = connect(connector, resource, ProviderConfig("default", {}, {}),
                                   port, lambda: datetime(2026, 1, 2, tzinfo=UTC), journal,
                                   defer_closes=True)
    assert not observation.exists
    effects.create()
    assert connector.keys == ["u-1/create/2/1"]
