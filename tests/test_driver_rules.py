"""The driver's pure helpers: the change filter, sharding, redaction, RBAC rules."""

from __future__ import annotations

import zlib
from typing import Any

import pytest

from lifecycle.core.kind import OPERATION, PAUSED, RECONCILE_POLICY
from lifecycle.driver.filters import (
    add_triggers,
    is_ignored,
    meta_field,
    one_line,
    redacted_traceback,
    shard_of,
    update_triggers,
)
from lifecycle.driver.permissions import (
    CALL_VERBS,
    FINALIZERS_VERB,
    USES,
    lease_rules,
    rules,
    secret_rules,
    verbs_for,
)

# --------------------------------------------------------------------------- filters


def test_one_line_collapses_whitespace_and_cuts() -> None:
    assert one_line("  a \n\t b  ") == "a b"
    assert one_line("x" * 300) == "x" * 300
    assert one_line("x" * 301) == "x" * 300 + "..."
    assert one_line("abcdef", limit=3) == "abc..."
    assert one_line("abc", limit=3) == "abc"
    assert one_line(12) == "12"


def obj(generation: Any = 1, deleting: Any = None, **annotations: str) -> dict[str, Any]:
    """An object with the metadata the change filter reads."""
    meta: dict[str, Any] = {"generation": generation, "annotations": annotations}
    if deleting is not None:
        meta["deletionTimestamp"] = deleting
    return {"metadata": meta}


def test_meta_field_and_ignored() -> None:
    assert meta_field(obj(3), "generation") == 3
    assert meta_field({}, "generation") is None
    assert meta_field({"metadata": "x"}, "generation") is None
    assert is_ignored(obj(**{OPERATION: "ignore"}))
    assert not is_ignored(obj(**{OPERATION: "reconcile"})) and not is_ignored(obj())
    assert add_triggers(obj()) and not add_triggers(obj(**{OPERATION: "ignore"}))


@pytest.mark.parametrize(("old", "new", "triggers"), [
    (obj(1), obj(1), False),
    (obj(1), obj(2), True),
    (obj(1), obj(1, deleting="t"), True),
    (obj(1, deleting="t"), obj(1, deleting="t"), False),
    (obj(1), obj(1, **{OPERATION: "reconcile"}), True),
    (obj(1, **{OPERATION: "reconcile"}), obj(1, **{OPERATION: "reconcile"}), False),
    (obj(1, **{OPERATION: "ignore"}), obj(1), True),
    (obj(1, **{OPERATION: "ignore"}), obj(1, **{OPERATION: "other"}), True),
    (obj(1), obj(2, **{OPERATION: "ignore"}), False),
    (obj(1), obj(1, **{PAUSED: "true"}), True),
    (obj(1, **{PAUSED: "true"}), obj(1), True),
    (obj(1), obj(1, **{RECONCILE_POLICY: "skip"}), True),
    (obj(1, **{RECONCILE_POLICY: "skip"}), obj(1, **{RECONCILE_POLICY: "skip"}), False),
    (obj(1), obj(1, other="x"), False),
    (obj(1), obj(1, **{OPERATION: "other"}), False),
])
def test_update_triggers(old: dict, new: dict, triggers: bool) -> None:
    assert update_triggers(old, new) is triggers


def test_shard_of_is_a_stable_crc_of_namespace_and_name() -> None:
    assert shard_of(("ns", "a"), 7) == zlib.crc32(b"ns/a") % 7
    assert shard_of((None, "a"), 7) == zlib.crc32(b"/a") % 7
    assert shard_of(("", "a"), 5) == shard_of((None, "a"), 5)
    assert {shard_of(("ns", str(i)), 4) for i in range(100)} == {0, 1, 2, 3}
    assert shard_of(("ns", "a"), 1) == 0


def _raise_secret() -> None:
    raise ValueError("password=hunter2")


def test_redacted_traceback_names_code_locations_only_innermost_first() -> None:
    try:
        _raise_secret()
    except ValueError as exc:
        text = redacted_traceback(exc)
    assert "hunter2" not in text
    assert text.startswith("ValueError at test_driver_rules.py:")
    inner, outer = text.split(" at ", 1)[1].split(" <- ")
    assert inner.endswith(" in _raise_secret")
    assert outer.endswith(" in test_redacted_traceback_names_code_locations_only_innermost_first")
    assert redacted_traceback(ValueError("x")) == "ValueError"


def test_redacted_traceback_keeps_the_innermost_frames_up_to_the_limit() -> None:
    def nest(depth: int) -> None:
        if depth == 0:
            raise KeyError("secret")
        nest(depth - 1)

    try:
        nest(20)
    except KeyError as exc:
        error = exc
    assert redacted_traceback(error).count(" <- ") == 11
    assert redacted_traceback(error, limit=3).count(" <- ") == 2
    assert " in nest" in redacted_traceback(error, limit=1)
    assert "<-" not in redacted_traceback(error, limit=1)


# --------------------------------------------------------------------------- RBAC rules


def test_verbs_for_collects_every_method_s_verbs_by_subresource() -> None:
    for use, methods in USES.items():
        expected: dict[str, set[str]] = {}
        for method in methods:
            for sub, verb in CALL_VERBS[method]:
                expected.setdefault(sub, set()).add(verb)
        found = verbs_for(use)
        assert list(found) == sorted(expected)
        assert found == {sub: sorted(verbs) for sub, verbs in expected.items()}
    assert verbs_for("events") == {"": ["create", "patch"]}


def _rule(group: str, resources: list[str], use: str, sub: str = "") -> dict[str, Any]:
    return {"apiGroups": [group], "resources": resources, "verbs": verbs_for(use)[sub]}


def test_rules_group_kinds_classes_children_and_provider_configs() -> None:
    kinds = [("g.io", "things"), ("g.io", "apples"), ("a.io", "x")]
    found = rules(kinds, [("c.io", "classes")],
                  children=[("k.io", "kids"), ("g.io", "things"), ("", "secrets")],
                  provider_config_groups=("p.io", "lifecycle.dev", "p.io"))
    expected = [
        _rule("a.io", ["x"], "kind"),
        _rule("a.io", ["x/status"], "kind", "status"),
        {"apiGroups": ["a.io"], "resources": ["x/finalizers"], "verbs": [FINALIZERS_VERB]},
        _rule("g.io", ["apples", "things"], "kind"),
        _rule("g.io", ["apples/status", "things/status"], "kind", "status"),
        {"apiGroups": ["g.io"], "resources": ["apples/finalizers", "things/finalizers"],
         "verbs": [FINALIZERS_VERB]},
        _rule("c.io", ["classes"], "class"),
        _rule("k.io", ["kids"], "children"),
        _rule("lifecycle.dev", ["providerconfigs"], "providerconfigs"),
        _rule("lifecycle.dev", ["providerconfigs/status"], "providerconfigs", "status"),
        _rule("p.io", ["providerconfigs"], "providerconfigs"),
        _rule("p.io", ["providerconfigs/status"], "providerconfigs", "status"),
        _rule("", ["namespaces"], "namespaces"),
        _rule("", ["events"], "events"),
        *secret_rules(),
    ]
    assert found == expected
    assert FINALIZERS_VERB == "update"


def test_rules_without_secrets_and_the_separate_roles() -> None:
    assert rules([], secrets=False) == [
        _rule("lifecycle.dev", ["providerconfigs"], "providerconfigs"),
        _rule("lifecycle.dev", ["providerconfigs/status"], "providerconfigs", "status"),
        _rule("", ["namespaces"], "namespaces"),
        _rule("", ["events"], "events"),
    ]
    assert rules([])[-len(secret_rules()):] == secret_rules()
    assert secret_rules() == [_rule("", ["secrets"], "secrets")]
    assert lease_rules() == [_rule("coordination.k8s.io", ["leases"], "leases")]
