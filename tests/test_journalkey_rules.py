"""Where the journal key comes from, rule by rule (:mod:`lifecycle.runtime.journalkey`).

A file (made once, 0600, then read), ``$LIFECYCLE_JOURNAL_KEY``, or a Secret (made once,
then read; a replica that loses the race reads the winner's). Every error names the file
or Secret and what is wrong, never a byte of the key.
"""

from __future__ import annotations

import base64
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from lifecycle.core.seal import KEY_BYTES
from lifecycle.kube.errors import AlreadyExists, ApiError, Forbidden, NotFound
from lifecycle.runtime import journalkey
from lifecycle.runtime.journalkey import (
    ENV_KEY,
    JournalKeyError,
    key_from_env,
    key_from_file,
    key_from_secret,
    new_key,
    process_key,
)

GOOD = b"k" * KEY_BYTES


def test_a_new_key_is_64_hex_digits_and_fresh_each_time() -> None:
    one, two = new_key(), new_key()
    assert len(one) == 2 * KEY_BYTES and int(one, 16) >= 0
    assert one != two
    assert process_key() == process_key()  # one per process


# ------------------------------------------------------------------ a file
def test_a_missing_key_file_is_made_once_readable_by_the_operator_only(tmp_path: Path) -> None:
    path = tmp_path / "key"
    made = key_from_file(str(path))
    assert path.read_bytes() == made + b"\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert key_from_file(str(path)) == made


def test_a_key_file_is_read_up_to_4096_bytes_trailing_whitespace_stripped(
        tmp_path: Path) -> None:
    path = tmp_path / "key"
    path.write_bytes(GOOD + b" \n\n")
    assert key_from_file(str(path)) == GOOD
    path.write_bytes(b"a" * 5000)
    assert key_from_file(str(path)) == b"a" * 4096


def test_key_file_errors_name_the_file_and_the_problem(tmp_path: Path) -> None:
    short = tmp_path / "short"
    short.write_bytes(b"abc")
    with pytest.raises(JournalKeyError) as refused:
        key_from_file(str(short))
    assert str(refused.value) == (f"journal key from file {str(short)!r}: a journal key "
                                  f"needs at least {KEY_BYTES} bytes, this one has 3")
    with pytest.raises(JournalKeyError) as directory:
        key_from_file(str(tmp_path))
    assert str(directory.value) == (f"journal key file {str(tmp_path)!r} cannot be read: "
                                    "Is a directory")
    nowhere = tmp_path / "no" / "such" / "key"
    with pytest.raises(JournalKeyError) as uncreatable:
        key_from_file(str(nowhere))
    assert str(uncreatable.value) == (f"journal key file {str(nowhere)!r} cannot be created: "
                                      "No such file or directory")
    with pytest.raises(JournalKeyError) as absent:
        key_from_file(str(tmp_path / "absent"), create=False)
    assert str(absent.value) == f"journal key file {str(tmp_path / 'absent')!r} does not exist"


def test_an_os_error_without_text_is_named_by_its_class(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise PermissionError()

    monkeypatch.setattr(journalkey, "open", refuse, raising=False)
    with pytest.raises(JournalKeyError) as unreadable:
        key_from_file(str(tmp_path / "key"))
    assert str(unreadable.value).endswith("cannot be read: PermissionError")
    monkeypatch.undo()
    monkeypatch.setattr(journalkey.os, "open", refuse)
    with pytest.raises(JournalKeyError) as uncreatable:
        key_from_file(str(tmp_path / "key"))
    assert str(uncreatable.value).endswith("cannot be created: PermissionError")


def test_a_replica_that_loses_the_race_to_create_the_file_reads_the_winners(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "key"
    real_link = os.link

    def winner_first(source: str, target: str) -> None:
        Path(target).write_bytes(GOOD + b"\n")  # the other replica's key lands first
        real_link(source, target)

    monkeypatch.setattr(journalkey.os, "link", winner_first)
    assert key_from_file(str(path)) == GOOD
    assert path.read_bytes() == GOOD + b"\n"
    assert [p.name for p in tmp_path.iterdir()] == ["key"]  # no partial file left behind


def test_the_key_file_appears_whole_never_empty_or_partly_written(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "key"
    real_link = os.link
    seen: list[bytes] = []

    def linking(source: str, target: str) -> None:
        assert not Path(target).exists()  # nothing at the key's path until the link
        seen.append(Path(source).read_bytes())  # what appears there, already synced
        real_link(source, target)

    monkeypatch.setattr(journalkey.os, "link", linking)
    key = key_from_file(str(path))
    assert seen == [key + b"\n"] and len(key) >= 32
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["key"]


def test_a_lost_race_whose_winner_is_gone_is_an_error_not_a_second_create(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tries: list[str] = []

    def taken(source: str, target: str) -> None:
        tries.append(target)
        raise FileExistsError(17, "File exists")

    monkeypatch.setattr(journalkey.os, "link", taken)
    path = str(tmp_path / "key")
    with pytest.raises(JournalKeyError) as refused:
        key_from_file(path)
    assert str(refused.value) == f"journal key file {path!r} does not exist"
    assert tries == [path]
    assert list(tmp_path.iterdir()) == []


# ----------------------------------------------------------- the environment
def test_the_key_from_the_environment_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_KEY, GOOD.decode() + "\n")
    assert key_from_env() == GOOD  # the process's own environment by default
    assert key_from_env({ENV_KEY: "  "}) is None
    with pytest.raises(JournalKeyError) as refused:
        key_from_env({ENV_KEY: "hunter2"})
    assert str(refused.value) == (f"journal key from ${ENV_KEY}: a journal key needs at "
                                  f"least {KEY_BYTES} bytes, this one has 7")


# --------------------------------------------------------------- a Secret
class Secrets:
    """A cluster holding Secrets by exact (apiVersion, kind, namespace, name), recording
    every call; ``race`` makes the first create lose to another replica's."""

    def __init__(self, race: bytes | None = None) -> None:
        self.stored: dict[tuple[str, str], dict[str, Any]] = {}
        self.calls: list[tuple[str, ...]] = []
        self.race = race

    def get(self, api_version: str, kind: str, namespace: str, name: str) -> dict[str, Any]:
        self.calls.append(("get", api_version, kind, namespace, name))
        if (api_version, kind) == ("v1", "Secret") and (namespace, name) in self.stored:
            return self.stored[(namespace, name)]
        raise NotFound(f"secrets {name!r} not found")

    def create(self, body: dict[str, Any]) -> dict[str, Any]:
        meta = body["metadata"]
        self.calls.append(("create", meta["namespace"], meta["name"]))
        if self.race is not None:
            self.stored[(meta["namespace"], meta["name"])] = secret(self.race)
            raise AlreadyExists("already exists")
        self.stored[(meta["namespace"], meta["name"])] = body
        return body


def secret(key: bytes, field: str = "key") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret",
            "data": {field: base64.b64encode(key).decode()}}


def test_an_existing_key_secret_is_read_and_never_written() -> None:
    api = Secrets()
    api.stored[("ops", "k")] = secret(GOOD)
    assert key_from_secret(api, "ops", "k") == GOOD
    assert api.calls == [("get", "v1", "Secret", "ops", "k")]


def test_a_missing_key_secret_is_made_with_a_new_key_labelled_as_the_operators() -> None:
    api = Secrets()
    made = key_from_secret(api, "ops", "k")
    assert api.calls == [("get", "v1", "Secret", "ops", "k"), ("create", "ops", "k")]
    body = api.stored[("ops", "k")]
    assert body == {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                    "metadata": {"name": "k", "namespace": "ops",
                                 "labels": {"app.kubernetes.io/managed-by": "lifecycle"}},
                    "data": {"key": base64.b64encode(made).decode()}}
    assert len(made) == 2 * KEY_BYTES


def test_a_replica_that_loses_the_race_to_create_the_secret_reads_the_winners() -> None:
    api = Secrets(race=GOOD)
    assert key_from_secret(api, "ops", "k") == GOOD
    assert api.calls == [("get", "v1", "Secret", "ops", "k"), ("create", "ops", "k"),
                         ("get", "v1", "Secret", "ops", "k")]


@pytest.mark.parametrize(("stored", "message"), [
    (secret(GOOD, field="other"), "journal key Secret ops/k has no 'key' field"),
    ({"data": {"key": "%%%"}}, "journal key Secret ops/k: field 'key' is not base64"),
    (secret(b"abc"), f"journal key from Secret ops/k: a journal key needs at least "
                     f"{KEY_BYTES} bytes, this one has 3"),
    ({"data": None}, "journal key Secret ops/k has no 'key' field"),
    (None, "journal key Secret ops/k has no 'key' field"),  # a cluster answering nothing
])
def test_a_bad_key_secret_is_named_with_what_is_wrong(stored: dict[str, Any] | None,
                                                      message: str) -> None:
    api = Secrets()
    api.stored[("ops", "k")] = stored
    with pytest.raises(JournalKeyError) as refused:
        key_from_secret(api, "ops", "k")
    assert str(refused.value) == message


def test_a_key_secret_the_api_refuses_is_named_with_the_error_and_its_status() -> None:
    class Refusing:
        def get(self, *args: Any) -> Any:
            raise Forbidden("secrets is forbidden")

    with pytest.raises(JournalKeyError) as refused:
        key_from_secret(Refusing(), "ops", "k")
    assert str(refused.value) == ("journal key Secret ops/k cannot be read or created: "
                                  "Forbidden 403")

    class Failing(Secrets):
        def create(self, body: dict[str, Any]) -> dict[str, Any]:
            raise ApiError("etcd is down", status=503)

    with pytest.raises(JournalKeyError) as failed:
        key_from_secret(Failing(), "ops", "k")
    assert str(failed.value) == ("journal key Secret ops/k cannot be read or created: "
                                 "ApiError 503")


def test_an_entrys_subject_names_kind_namespace_name_uid_and_external_name() -> None:
    from lifecycle.core.seal import Subject
    from lifecycle.runtime.journalkey import subject_of

    assert subject_of("Role", "team", "app", "u-1", "app_prod") == Subject(
        "Role", "team", "app", "u-1", "app_prod")
    assert subject_of("Role", None, "app", "u-1", "x") == Subject("Role", "", "app", "u-1", "x")
