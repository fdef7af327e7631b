"""Names with control and invisible characters, and long names (issue 28).

``U+0085``, ``U+202E`` and ``U+200B`` were accepted in external names
(lookalike roles such as ``post\\u200bgres_5827``), although the docs said
control characters are refused; a 60-character ``metadata.name`` could not
get its default external name (69 bytes over PostgreSQL's 63).
"""

from __future__ import annotations

from typing import Any

import pytest

from lifecycle.core.kind import EXTERNAL_NAME, FINALIZER, invisible_character
from lifecycle.machines.postgres import Role
from lifecycle.providers.simcloud.scenarios.harness import database_manifest, simulated_environment

LOOKALIKES = ["post\u200bgres_5827", "admin\u202enimda", "app\x85prod", "a\ufeffb",
              "role\u2028x", "db\u00a0prod", "x\u2066y\u2069", "app\u3000db", "\U000e0041tag"]


@pytest.mark.parametrize("name", LOOKALIKES)
def test_a_lookalike_external_name_is_refused_before_anything_is_committed(name: str) -> None:
    env, cloud = simulated_environment()
    manifest = database_manifest("db")
    manifest["metadata"]["annotations"] = {EXTERNAL_NAME: name}
    env.apply(manifest)
    env.advance(60)
    obj = env.get("DatabaseInstance", "db")
    failed = next(c for c in obj["status"]["conditions"] if c["type"] == "Synced")
    assert (failed["status"], failed["reason"]) == ("False", "ReconcileError")
    assert "control or invisible character" in failed["message"]
    assert FINALIZER not in (obj["metadata"].get("finalizers") or [])
    assert not cloud.calls  # the provider never heard the name
    env.delete("DatabaseInstance", "db")
    env.advance(10)


def test_ordinary_names_pass() -> None:
    for name in ("postgres_5827", "café", "データベース", "a b", "a-b.c_d~e"):
        assert invisible_character(name) is None
        Role.check_external_name(name)


@pytest.mark.parametrize("length", [54, 55, 60, 63, 253])
def test_a_long_metadata_name_gets_a_bounded_default_external_name(length: int) -> None:
    name = ("r" * (length - 1)) + "9"
    obj: dict[str, Any] = {"metadata": {"name": name, "uid": "0123abcd-ffff-4000-8000-1234"}}
    external = Role.external_name(obj)
    assert len(external.encode()) <= 63
    assert external.endswith("-0123abcd")
    Role.check_external_name(external)
    if length <= 54:
        assert external == f"{name}-0123abcd"  # short names are unchanged
    else:
        assert external.startswith(name[:50])
    other = {"metadata": {"name": name, "uid": "99999999-ffff-4000-8000-1234"}}
    assert Role.external_name(other) != external  # the uid keeps them apart


def test_a_60_character_role_reaches_ready_on_a_real_server(superuser_env: Any) -> None:
    from lifecycle.providers.postgres.scenarios.testing import manifest

    env = superuser_env
    name = "a" * 59 + "z"
    env.apply(manifest("Role", name))
    env.advance(60)
    obj = env.get("Role", name)
    assert obj["status"]["state"] == "ready", obj["status"]
    external = obj["metadata"]["annotations"][EXTERNAL_NAME]
    assert len(external) == 63 and external.endswith(obj["metadata"]["uid"][:8])
    env.delete("Role", name)
    env.advance(60)
