"""A journal a tenant cannot forge (issue 28, item 1).

A tenant who may write its own object can write any annotation on it. The
intent journal decides that an unmarked external resource is the object's
own, so the engine trusts an entry only when its MAC
(``lifecycle.dev/intent-mac``) checks out under the operator's key for this
object (kind, namespace, name, uid) and this external name. A forged entry,
an entry copied from another object and an entry replayed after the external
name changed are each refused exactly like no entry: the victim instance is
left byte for byte as it was. The operator's own crash-resume still works.
"""

from __future__ import annotations

import json
import logging
import os
from contextlib import suppress
from typing import Any

import attrs
import pytest

from lifecycle.core.kind import EXTERNAL_NAME, INTENT, INTENT_MAC
from lifecycle.core.ownership import mark_uid
from lifecycle.core.seal import KEY_BYTES, Subject, check_key, mac, unseal
from lifecycle.core.values import Intent
from lifecycle.providers.simcloud import OWNER_TAG, SimCloud
from lifecycle.providers.simcloud.scenarios.harness import database_manifest, simulated_environment
from lifecycle.runtime.journalkey import (
    ENV_KEY,
    Journal,
    JournalKeyError,
    key_from_env,
    key_from_file,
    key_from_secret,
    new_key,
    process_key,
)
from lifecycle.testing import Environment

KIND = "DatabaseInstance"
CREDS = ("AKIDEXAMPLE", "s3cr3t")
PARAMS = {"engine": "postgres", "storage_gb": 20}
#: The entry of the issue's report, as a tenant writes it.
FORGED = ('{"operation":"update","key":"x/update/1/1","generation":1,'
          '"started":"2020-01-01T00:00:00Z","outcome":"succeeded"}')
KEY = b"k" * KEY_BYTES
SUBJECT = Subject("DatabaseInstance", "team-a", "db", "uid-a", "mine")
ENTRY = Intent("create", "uid-a/create/1/1", 1, "2026-01-01T00:00:00Z")


# ------------------------------------------------------------------ the pure seal
def test_an_entry_is_trusted_only_with_its_own_mac_for_its_own_subject() -> None:
    text, good = ENTRY.to_json(), mac(KEY, SUBJECT, ENTRY)
    assert unseal(KEY, SUBJECT, text, good) == ENTRY
    assert unseal(KEY, SUBJECT, text, None) is None                      # forged: no MAC
    assert unseal(KEY, SUBJECT, text, "0" * 64) is None                  # forged: made up
    assert unseal(b"t" * KEY_BYTES, SUBJECT, text, good) is None         # another key
    assert unseal(KEY, SUBJECT, text, mac(b"t" * KEY_BYTES, SUBJECT, ENTRY)) is None
    for changed in ({"uid": "uid-b"}, {"name": "db2"}, {"namespace": "team-b"},
                    {"kind": "Role"}, {"external_name": "precious"}):
        other = attrs.evolve(SUBJECT, **changed)
        assert unseal(KEY, other, text, good) is None, changed           # copied, replayed
    failed = Intent(ENTRY.operation, ENTRY.key, 1, ENTRY.started, "failed")
    assert unseal(KEY, SUBJECT, failed.to_json(), good) is None          # edited outcome
    assert unseal(KEY, SUBJECT, failed.to_json(), mac(KEY, SUBJECT, failed)) == failed
    assert unseal(KEY, SUBJECT, "not json", good) is None
    assert unseal(KEY, SUBJECT, 7, good) is None
    assert unseal(KEY, SUBJECT, text, "é" * 64) is None
    assert unseal(KEY, SUBJECT, text, good + "0") is None
    padded = text[:-1] + ', "pad": "' + "x" * 5000 + '"}'
    assert unseal(KEY, SUBJECT, padded, good) is None  # too long to be one the engine wrote


def test_fields_cannot_be_shifted_between_subject_parts() -> None:
    a = Subject("K", "ns", "a/b", "u", "x")
    b = Subject("K", "ns/a", "b", "u", "x")
    assert mac(KEY, a, ENTRY) != mac(KEY, b, ENTRY)


def test_a_key_too_short_or_not_bytes_is_refused_without_showing_it() -> None:
    with pytest.raises(ValueError, match="at least 32 bytes") as short:
        check_key(b"sekrit-sekrit")
    assert "sekrit" not in str(short.value)
    with pytest.raises(ValueError, match="must be bytes"):
        check_key("a-string-key-of-enough-length-0123456789")
    assert "key=" not in repr(Journal(KEY)) and KEY.decode() not in repr(Journal(KEY))
    assert process_key() == process_key() and len(process_key()) >= KEY_BYTES


# ------------------------------------------------------------------ key sources
def test_a_key_file_is_made_on_first_start_then_read(tmp_path: Any) -> None:
    path = str(tmp_path / "journal-key")
    made = key_from_file(path)
    assert len(made) == 2 * KEY_BYTES and os.stat(path).st_mode & 0o777 == 0o600
    assert key_from_file(path) == made
    with pytest.raises(JournalKeyError, match="does not exist"):
        key_from_file(str(tmp_path / "absent"), create=False)
    (tmp_path / "short").write_bytes(b"tiny-secret\n")
    with pytest.raises(JournalKeyError, match="at least 32 bytes") as short:
        key_from_file(str(tmp_path / "short"))
    assert "tiny-secret" not in str(short.value)
    with pytest.raises(JournalKeyError, match="cannot be read"):
        key_from_file(str(tmp_path))  # a directory
    with pytest.raises(JournalKeyError, match="cannot be created"):
        key_from_file(str(tmp_path / "no" / "such" / "dir"))


def test_the_key_from_the_environment() -> None:
    assert key_from_env({}) is None and key_from_env({ENV_KEY: " "}) is None
    assert key_from_env({ENV_KEY: "x" * 40 + "\n"}) == b"x" * 40
    with pytest.raises(JournalKeyError, match="at least") as short:
        key_from_env({ENV_KEY: "hunter2"})
    assert "hunter2" not in str(short.value)


def test_a_key_secret_is_made_on_first_start_then_read() -> None:
    env, _ = simulated_environment()
    env.namespace("lifecycle-system")
    made = key_from_secret(env.api, "lifecycle-system", "lifecycle-journal-key")
    assert len(made) == 2 * KEY_BYTES
    assert key_from_secret(env.api, "lifecycle-system", "lifecycle-journal-key") == made
    env.api.create({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                    "metadata": {"name": "bad", "namespace": "lifecycle-system"},
                    "data": {"other": "eA=="}})
    with pytest.raises(JournalKeyError, match="no 'key' field"):
        key_from_secret(env.api, "lifecycle-system", "bad")


def test_a_key_secret_that_cannot_be_read_is_a_clear_error() -> None:
    from lifecycle.kube.errors import Forbidden

    class Refusing:
        def get(self, *args: Any) -> Any:
            raise Forbidden("secrets is forbidden")

    with pytest.raises(JournalKeyError, match="cannot be read or created: Forbidden"):
        key_from_secret(Refusing(), "ops", "k")


# ------------------------------------------------------------------ the attacks
def _env() -> tuple[Environment, SimCloud]:
    env, cloud = simulated_environment(cloud=SimCloud(seed=3, create_polls=0))
    for ns in ("team-a", "team-b"):
        env.namespace(ns)
    return env, cloud


def _victim(cloud: SimCloud) -> Any:
    """``precious``, created outside the operator: unmarked, with its owner's password."""
    cloud.create_instance(CREDS, "precious", PARAMS, password="owners-password-1")
    return json.dumps(cloud.instances()["precious"], sort_keys=True), cloud.password_of(
        "precious")


def _seen(cloud: SimCloud) -> Any:
    return json.dumps(cloud.instances()["precious"], sort_keys=True), cloud.password_of(
        "precious")


def _changes(cloud: SimCloud, name: str) -> int:
    return sum(cloud.count(op, name) for op in ("create", "modify", "delete", "reset_password"))


def _refused(env: Environment, name: str, namespace: str) -> str | None:
    """Why the last pass failed: the Failed condition's reason, or (for an object that was
    Ready, which holds its state through a retryable error) ``status.failure``'s."""
    failed = env.condition(KIND, name, "Failed", namespace)
    if failed is not None and failed.status.value == "True":
        return failed.reason
    failure = env.get(KIND, name, namespace).get("status", {}).get("failure") or {}
    return failure.get("reason")


def _attacked(env: Environment, cloud: SimCloud, name: str, namespace: str,
              before: Any) -> None:
    """The object is refused, then deleted; precious is untouched throughout."""
    env.advance(600)
    assert _refused(env, name, namespace) == "ExternalResourceNotOwned"
    assert env.state(KIND, name, namespace) != "ready"
    assert _seen(cloud) == before and _changes(cloud, "precious") == 1
    env.delete(KIND, name, namespace)
    env.advance(300)
    assert not env.exists(KIND, name, namespace)
    assert "precious" in cloud.instances() and _seen(cloud) == before
    assert _changes(cloud, "precious") == 1  # its own creation, nothing since


def test_a_forged_entry_is_refused_like_no_entry() -> None:
    """The report's attack: external name of a live instance, an entry typed by hand."""
    env, cloud = _env()
    before = _victim(cloud)
    env.apply(database_manifest("db", "team-a", storage_gb=40, annotations={
        EXTERNAL_NAME: "precious", INTENT: FORGED}))
    env.advance(60)
    # Refused before any call, so the operator never sealed an entry for precious that
    # the tenant could harvest: the journal is still exactly what the tenant wrote.
    stored = env.get(KIND, "db", "team-a")["metadata"]["annotations"]
    assert stored[INTENT] == FORGED and INTENT_MAC not in stored
    _attacked(env, cloud, "db", "team-a", before)


def test_a_forged_entry_with_a_made_up_mac_is_refused() -> None:
    env, cloud = _env()
    before = _victim(cloud)
    tenants_key = b"t" * KEY_BYTES  # whatever key the tenant chooses
    env.apply(database_manifest("db", "team-a", storage_gb=40, annotations={
        EXTERNAL_NAME: "precious", INTENT: FORGED, INTENT_MAC: "ab" * 32}))
    env.advance(60)
    assert _refused(env, "db", "team-a") == "ExternalResourceNotOwned"
    obj = env.get(KIND, "db", "team-a")
    subject = Subject(KIND, "team-a", "db", obj["metadata"]["uid"], "precious")
    forged = Intent.from_dict(json.loads(FORGED))
    assert forged is not None
    annotations = dict(obj["metadata"]["annotations"])
    annotations[INTENT_MAC] = mac(tenants_key, subject, forged)
    env.api.replace({**obj, "metadata": {**obj["metadata"], "annotations": annotations}})
    _attacked(env, cloud, "db", "team-a", before)


def test_an_entry_copied_from_the_tenants_own_object_is_refused() -> None:
    """Object ``a`` legitimately created ``mine``; its sealed entry is copied onto ``b``."""
    env, cloud = _env()
    before = _victim(cloud)
    env.apply(database_manifest("a", "team-a", annotations={EXTERNAL_NAME: "mine"}))
    env.advance(120)
    assert env.state(KIND, "a", "team-a") == "ready"
    own = env.get(KIND, "a", "team-a")["metadata"]["annotations"]
    assert own[INTENT] and own[INTENT_MAC]
    env.apply(database_manifest("b", "team-a", storage_gb=40, annotations={
        EXTERNAL_NAME: "precious", INTENT: own[INTENT], INTENT_MAC: own[INTENT_MAC]}))
    _attacked(env, cloud, "b", "team-a", before)
    assert env.state(KIND, "a", "team-a") == "ready"


class Crash(BaseException):
    """The operator process dying."""


def _crash_after_create(env: Environment, cloud: SimCloud, name: str, namespace: str) -> None:
    """Reconcile ``name`` once, dying right after the cloud accepted the create."""
    real = cloud.create_instance

    def create(*args: Any, **kwargs: Any) -> Any:
        real(*args, **kwargs)
        raise Crash

    cloud.create_instance = create  # type: ignore[method-assign]
    try:
        with suppress(Crash):
            env.reconcile(KIND, name, namespace)
    finally:
        cloud.create_instance = real  # type: ignore[method-assign]


def test_an_entry_replayed_after_the_external_name_changed_is_refused() -> None:
    """The pending create sealed for ``mine``; while the engine is down, before the name
    is recorded in status, the tenant points the object at ``precious``."""
    env, cloud = _env()
    before = _victim(cloud)
    env.apply(database_manifest("db", "team-a", storage_gb=40,
                                annotations={EXTERNAL_NAME: "mine"}))
    _crash_after_create(env, cloud, "db", "team-a")
    obj = env.get(KIND, "db", "team-a")
    assert json.loads(obj["metadata"]["annotations"][INTENT])["outcome"] == "pending"
    assert "externalName" not in (obj.get("status") or {})
    annotations = {**obj["metadata"]["annotations"], EXTERNAL_NAME: "precious"}
    env.api.replace({**obj, "metadata": {**obj["metadata"], "annotations": annotations}})
    env.enqueue(KIND, "db", "team-a")
    _attacked(env, cloud, "db", "team-a", before)


def test_a_legacy_unsealed_entry_is_not_trusted_but_a_marked_resource_still_is() -> None:
    """Entries written before sealing: the resource's own mark keeps the object working;
    an unmarked resource needs adoption (docs/reliability.md, migration)."""
    env, cloud = _env()
    env.apply(database_manifest("db", "team-a", annotations={EXTERNAL_NAME: "mine"}))
    env.advance(120)
    obj = env.get(KIND, "db", "team-a")
    annotations = dict(obj["metadata"]["annotations"])
    del annotations[INTENT_MAC]  # as an older operator wrote it
    env.api.replace({**obj, "metadata": {**obj["metadata"], "annotations": annotations}})
    env.apply(database_manifest("db", "team-a", storage_gb=40,
                                annotations={EXTERNAL_NAME: "mine"}))
    env.advance(300)
    assert env.state(KIND, "db", "team-a") == "ready"   # marked as ours: still managed
    assert cloud.instances()["mine"]["storage_gb"] == 40
    with cloud._lock:  # and unmarked, as an old operator version could leave it
        cloud._instances["mine"].tags.clear()
    obj = env.get(KIND, "db", "team-a")
    annotations = dict(obj["metadata"]["annotations"])
    del annotations[INTENT_MAC]
    env.api.replace({**obj, "metadata": {**obj["metadata"], "annotations": annotations}})
    env.enqueue(KIND, "db", "team-a")
    env.advance(300)
    assert _refused(env, "db", "team-a") == "ExternalResourceNotOwned"


# ------------------------------------------------------------------ the operator's own resume
def test_a_crash_after_the_journal_write_resumes_with_the_same_key() -> None:
    env, cloud = _env()
    env.apply(database_manifest("db", "team-a", annotations={EXTERNAL_NAME: "mine"}))
    real = cloud.create_instance

    def lost(*args: Any, **kwargs: Any) -> Any:
        raise Crash

    cloud.create_instance = lost  # type: ignore[method-assign]
    with suppress(Crash):
        env.reconcile(KIND, "db", "team-a")
    cloud.create_instance = real  # type: ignore[method-assign]
    pending = json.loads(env.get(KIND, "db", "team-a")["metadata"]["annotations"][INTENT])
    assert pending["outcome"] == "pending" and "mine" not in cloud.instances()
    env.enqueue(KIND, "db", "team-a")
    env.advance(120)
    assert env.state(KIND, "db", "team-a") == "ready"
    assert cloud.creations("mine") == 1
    with cloud._lock:
        token = cloud._instances["mine"].client_token
    assert token == pending["key"]


def test_an_unmarked_resource_of_an_interrupted_create_is_still_ours_after_a_restart() -> None:
    """Crash right after the create, the mark not stored (a provider that marks in a second
    step): the restarted operator, with the same key, takes it as its own and marks it."""
    env, cloud = _env()
    env.apply(database_manifest("db", "team-a", annotations={EXTERNAL_NAME: "mine"}))
    _crash_after_create(env, cloud, "db", "team-a")
    with cloud._lock:
        cloud._instances["mine"].tags.clear()
    key = env.reconcilers[KIND].journal.key
    env.reconcilers[KIND].journal = Journal(bytes(key))  # a restart, the key kept
    env.enqueue(KIND, "db", "team-a")
    env.advance(120)
    assert env.state(KIND, "db", "team-a") == "ready"
    uid = env.get(KIND, "db", "team-a")["metadata"]["uid"]
    assert mark_uid(cloud.instances()["mine"]["tags"][OWNER_TAG]) == uid
    assert cloud.creations("mine") == 1


def test_with_another_key_the_same_entry_is_refused_never_trusted() -> None:
    """An operator that lost its key fails safe: the unmarked resource is refused."""
    env, cloud = _env()
    env.apply(database_manifest("db", "team-a", annotations={EXTERNAL_NAME: "mine"}))
    _crash_after_create(env, cloud, "db", "team-a")
    with cloud._lock:
        cloud._instances["mine"].tags.clear()
    env.reconcilers[KIND].journal = Journal(new_key())
    env.enqueue(KIND, "db", "team-a")
    env.advance(120)
    assert _refused(env, "db", "team-a") == "ExternalResourceNotOwned"
    assert cloud.instances()["mine"]["tags"] == {}


def test_the_key_never_appears_in_logs_events_or_status(caplog: Any) -> None:
    caplog.set_level(logging.DEBUG)
    env, cloud = _env()
    _victim(cloud)
    key = env.reconcilers[KIND].journal.key
    env.apply(database_manifest("a", "team-a", annotations={EXTERNAL_NAME: "mine"}))
    env.apply(database_manifest("b", "team-a", annotations={EXTERNAL_NAME: "precious",
                                                            INTENT: FORGED}))
    env.advance(300)
    env.delete(KIND, "a", "team-a")
    env.delete(KIND, "b", "team-a")
    env.advance(300)
    seen = json.dumps([e for n in ("a", "b") for e in env.events(n)])
    seen += caplog.text + repr(env.reconcilers[KIND].__dict__)
    for item in env.api.list("v1", "Secret")[0]:
        seen += json.dumps(item)
    assert key.decode() not in seen


# ------------------------------------------------------------------ the operator's options
def test_run_reports_a_bad_journal_key_in_one_line(tmp_path: Any,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    from lifecycle.cli import main

    short = tmp_path / "key"
    short.write_bytes(b"too-short-secret")
    assert main(["run", "--embedded", "--journal-key-file", str(short)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "at least 32 bytes" in err, err
    assert "too-short-secret" not in err
    assert main(["run", "--embedded", "--journal-key-file", str(short),
                 "--journal-key-secret", "ops/key"]) == 2
    assert "not both" in capsys.readouterr().err
    assert main(["run", "--embedded", "--journal-key-secret", "Bad_NS!!/key"]) == 2
    assert "NAMESPACE/NAME" in capsys.readouterr().err


def test_the_operators_reconcilers_seal_with_the_configured_key() -> None:
    from lifecycle.driver.kinds import engine_reconciler
    from lifecycle.driver.manager import ManagerOptions
    from lifecycle.machines.database import DatabaseInstance

    env, _ = _env()
    options = ManagerOptions(journal_key=KEY)
    assert KEY.decode() not in repr(options)
    made = engine_reconciler(env.operator_api, DatabaseInstance, env.reconcilers[KIND].connector,
                             options)
    assert made.journal.key == KEY  # type: ignore[attr-defined]
    default = engine_reconciler(env.operator_api, DatabaseInstance,
                                env.reconcilers[KIND].connector, ManagerOptions())
    assert default.journal.key == process_key()  # type: ignore[attr-defined]


def test_the_generated_deployment_keeps_its_key_in_a_secret_of_its_own_namespace() -> None:
    from lifecycle.driver.manifests import Options, manifests
    from lifecycle.machines.database import DatabaseInstance

    docs = manifests([DatabaseInstance], Options(kind_names=("DatabaseInstance",),
                                                 image="lifecycle:test", namespace="ops",
                                                 name="op"))
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--journal-key-secret") + 1] == "ops/op-journal-key"
    # The operator watches its own namespace: its Secrets Role there covers the key.
    role = next(d for d in docs if d["kind"] == "Role" and d["metadata"]["name"] == "op-secrets")
    assert role["metadata"]["namespace"] == "ops"
    assert {"get", "create"} <= set(role["rules"][0]["verbs"])
    # Watching another namespace, a Role in its own grants the key by name (and create).
    docs = manifests([DatabaseInstance], Options(kind_names=("DatabaseInstance",),
                                                 image="lifecycle:test", namespace="ops",
                                                 name="op", watch_namespace="team"))
    role = next(d for d in docs if d["kind"] == "Role"
                and d["metadata"]["name"] == "op-journal-key")
    assert role["metadata"]["namespace"] == "ops"
    assert {"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["op-journal-key"],
            "verbs": ["get"]} in role["rules"]
    binding = next(d for d in docs if d["kind"] == "RoleBinding"
                   and d["metadata"]["name"] == "op-journal-key")
    assert binding["roleRef"]["name"] == "op-journal-key"
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "op", "namespace": "ops"}]
