"""Rules of the runtime that a fourth sampled mutation run of ``lifecycle/runtime`` found
unchecked: which key seals the intent journal, what a reconcile that met an API error
reports, what an invalid connection Secret is called, which reads of the connection
Secret ask the API server, what persisting a password does to a Secret another writer
created first, and that the external-name index ranks holders whatever order its list
gives.

Each test names the rule and asserts it through the reconciler on the embedded API
server, or through the runtime classes a pass uses.
"""

from __future__ import annotations

from contextlib import suppress
from typing import Any

from helpers import KIND, CountingCache, RacedSecretCreate, name_holder

from lifecycle.core.kind import CONNECTION_SECRET_LABEL, EXTERNAL_NAME, INTENT
from lifecycle.kube.errors import Invalid
from lifecycle.machines.database import DatabaseInstance
from lifecycle.providers.simcloud import DatabaseConnector, SimCloud
from lifecycle.providers.simcloud.scenarios.harness import database_manifest, simulated_environment
from lifecycle.runtime.journalkey import Journal, process_key, subject_of
from lifecycle.runtime.names import NameIndex
from lifecycle.runtime.reconciler import Reconciler
from lifecycle.runtime.secrets import ConnectionSecrets
from lifecycle.testing import Environment

#: A configured journal key (64 hex digits), not this process's own.
KEY = b"0123456789abcdef" * 4


def _stored(name: str = "db") -> tuple[Environment, dict[str, Any]]:
    """An environment holding the object ``name``, stored and never reconciled."""
    env, _ = simulated_environment(cloud=SimCloud(seed=1, create_polls=0))
    env.apply(database_manifest(name))
    return env, env.get(KIND, name)


# ------------------------------------------------------------------ the intent journal
class _Crash(BaseException):
    """The operator process dying."""


def test_the_journal_entry_of_a_create_is_sealed_with_the_operators_configured_key() -> None:
    """A reconciler given a journal key seals every entry with it, the one written by the
    pass's actions before a create included: another process holding the same key trusts
    the entry, and the process's own key does not."""
    assert process_key() != KEY
    cloud = SimCloud(seed=1, create_polls=0)
    env = Environment([(DatabaseInstance, DatabaseConnector(cloud))])
    env.provider_config()
    env.reconcilers[KIND] = Reconciler(env.operator_api, DatabaseInstance,
                                       DatabaseConnector(cloud), clock=env.clock.now,
                                       journal_key=KEY)
    env.apply(database_manifest("db"))

    def dying(*args: Any, **kwargs: Any) -> Any:
        raise _Crash

    real, cloud.create_instance = cloud.create_instance, dying  # type: ignore[method-assign]
    try:
        with suppress(_Crash):
            env.reconcile(KIND, "db")
    finally:
        cloud.create_instance = real  # type: ignore[method-assign]
    meta = env.get(KIND, "db")["metadata"]
    assert INTENT in meta["annotations"]
    subject = subject_of(KIND, "default", "db", meta["uid"], meta["annotations"][EXTERNAL_NAME])
    entry = Journal(KEY).read(meta["annotations"], subject)
    assert entry is not None and entry.operation == "create" and entry.outcome == "pending"
    assert Journal().read(meta["annotations"], subject) is None


# ------------------------------------------------------------------- the reconcile's errors
def test_a_reconcile_that_meets_an_api_error_says_so_and_names_the_error() -> None:
    """An API error other than NotFound or throttling ends the reconcile as an error for
    the work queue's backoff, saying it happened during reconcile and what the API server
    answered."""
    env, _ = _stored()
    env.faults.fail("get", KIND, "db", times=1)
    step = env.reconcile(KIND, "db")
    assert step.result is None and step.error is not None
    assert step.error.startswith("API error during reconcile: ")
    assert "injected fault: get" in step.error


def test_a_connection_secret_the_api_server_refuses_as_invalid_is_called_so() -> None:
    """A connection Secret the API server refuses as invalid is a terminal error whose
    reason names the Secret (``ConnectionSecretInvalid``), not the object's spec."""
    env, _ = _stored()
    env.faults.fail("create", "Secret", error=Invalid("data: invalid key"))
    env.reconcile(KIND, "db")
    failed = env.condition(KIND, "db", "Failed")
    assert failed is not None and failed.reason == "ConnectionSecretInvalid"
    assert "connection Secret default/db-conn is invalid" in failed.message


# ------------------------------------------------------------ the connection Secret
def test_reading_a_stored_password_asks_the_api_server_unless_the_caller_creates() -> None:
    """Reading the stored password asks the API server: the cache's store may not hold a
    Secret that exists yet. Only a caller that creates the Secret when none is found
    answers a missing one from the store, since its create tells one the store lacks."""
    env, obj = _stored()
    api = CountingCache(env.api)
    assert ConnectionSecrets(api, DatabaseInstance).stored_password(obj) is None
    assert (api.lookups, api.secret_gets) == (0, 1)
    api = CountingCache(env.api)
    assert ConnectionSecrets(api, DatabaseInstance).stored_password(obj, creating=True) is None
    assert (api.lookups, api.secret_gets) == (1, 0)


def test_persisting_a_password_keeps_a_secret_another_writer_created_first_unforced() -> None:
    """Persisting a password, unless forced, keeps the password of a Secret another writer
    for the same object created just before, and leaves that Secret as it was written:
    nothing changed in its data, so nothing is written."""
    env, obj = _stored()
    secrets = ConnectionSecrets(RacedSecretCreate(env, obj["metadata"]["uid"]), DatabaseInstance,
                                lambda: "second-password")
    assert secrets.ensure_password(obj) == "first-password"
    secret = env.api.get("v1", "Secret", "default", "db-conn")
    assert env.secret("db-conn") == {"password": "first-password"}
    assert CONNECTION_SECRET_LABEL not in (secret["metadata"].get("labels") or {})
    assert not secret["metadata"].get("ownerReferences")


# ---------------------------------------------------------- the external-name index
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
