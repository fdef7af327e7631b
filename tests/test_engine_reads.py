"""The engine's cheap reads agree with the plain forms they replace.

The journal entry, a Secret's data, an external name's characters and a
parameters dict are read through fast paths; each must answer exactly what
the straightforward form (``json.loads``, ``base64.b64decode``, a per-character
check, ``attrs.asdict``) answers, malformed input included.
"""

from __future__ import annotations

import base64
import json
from types import MappingProxyType
from typing import Any

import attrs
import pytest

from lifecycle.core import objects
from lifecycle.core.errors import TerminalError
from lifecycle.core.kind import INTENT, Kind
from lifecycle.core.values import Intent
from lifecycle.machines.database import DatabaseInstance
from lifecycle.providers.simcloud.client import DatabaseParameters, _parameters_dict
from lifecycle.runtime.effects import stored_intent
from lifecycle.runtime.secrets import decode


def _plain_intent(raw: Any) -> Intent | None:
    if not isinstance(raw, str):
        return None
    try:
        return Intent.from_dict(json.loads(raw))
    except (ValueError, TypeError, AttributeError):
        return None


JOURNAL_TEXTS = [
    json.dumps({"operation": "create", "key": "u/create/1/1", "generation": 1,
                "started": "2024-01-01T00:00:00Z", "outcome": "pending"}),
    json.dumps({"operation": "update", "key": "u/update/2/3", "generation": "2",
                "started": "t"}),
    "{not json", "[]", '"text"', "null", "{}", '{"operation": "create"}',
    json.dumps({"operation": "create", "key": "k", "generation": "x", "started": "t"}),
]


@pytest.mark.parametrize("raw", JOURNAL_TEXTS)
def test_a_journal_text_reads_as_json_loads_reads_it_every_time(raw: str) -> None:
    expected = _plain_intent(raw)
    for _ in range(3):  # the first read parses, the later ones are remembered
        assert stored_intent({INTENT: raw}) == expected


def test_a_written_entry_reads_back_as_itself() -> None:
    entries = [Intent("create", f"uid/create/1/{n}", 1, "2024-01-01T00:00:00Z")
               for n in range(200)]  # more than are remembered: the oldest are parsed again
    texts = [entry.to_json() for entry in entries]
    for entry, text in zip(entries, texts, strict=True):
        assert json.loads(text) == entry.to_dict()
        assert stored_intent({INTENT: text}) == entry
    assert stored_intent({}) is None
    assert stored_intent({INTENT: 7}) is None


def _plain_decode(data: dict[str, Any]) -> dict[str, str]:
    out = {}
    for key, value in data.items():
        try:
            out[key] = base64.b64decode(value).decode()
        except (ValueError, TypeError):
            continue
    return out


SECRET_DATA = {
    "plain": base64.b64encode(b"hunter2").decode(),
    "empty": "",
    "unpadded": "aGk",
    "spaced": "aGVs\nbG8=",
    "junk": "not base64!",
    "latin1": base64.b64encode("é".encode("latin-1")).decode(),
    "utf8": base64.b64encode("é".encode()).decode(),
    "non-ascii": "é",
    "number": 5,
    "none": None,
    "list": ["aGk="],
}


def test_secret_data_decodes_as_b64decode_decodes_it() -> None:
    assert decode({"data": SECRET_DATA}) == _plain_decode(SECRET_DATA)
    assert decode({"data": "not a mapping"}) == {}
    assert decode({}) == {}


@pytest.mark.parametrize("code", [*range(0, 33), 126, 127, 128, 0x85, 159, 160, 0x2028,
                                  0x200B, 0x202E, 0xFEFF, 0x3000, 0xE9])
def test_an_external_name_with_a_control_character_is_refused(code: int) -> None:
    name = f"db{chr(code)}x"
    # C0 and C1 controls, DEL, no-break and other non-ASCII spaces, line separators,
    # zero-width and bidirectional format characters: refused; the space and é are not.
    control = code not in (32, 126, 0xE9)
    if control:
        with pytest.raises(TerminalError, match="control or invisible character"):
            DatabaseInstance.check_external_name(name)
    else:
        DatabaseInstance.check_external_name(name)


def test_unknown_parameters_are_named_sorted_and_known_ones_parse() -> None:
    kind: Kind = DatabaseInstance
    with pytest.raises(TerminalError, match=r"unknown field\(s\) in spec.forProvider: "
                                            r"storage_gb, zone$"):
        kind.parse_parameters({"forProvider": {"zone": "a", "storage_gb": 5}})
    parsed = kind.parse_parameters({"forProvider": {"storageGB": 30, "engine": "mysql"}})
    assert parsed == DatabaseParameters(engine="mysql", storageGB=30)
    assert kind.to_spec({"storage_gb": 1, "other": 2}) == {"storageGB": 1, "other": 2}


@pytest.mark.parametrize("parameters", [
    DatabaseParameters(), DatabaseParameters(version="16"),
    DatabaseParameters(engine="mysql", storageGB=50, size="large"),
])
def test_database_parameters_give_the_dict_attrs_asdict_gives(parameters: Any) -> None:
    expected = {k: v for k, v in attrs.asdict(parameters).items() if v is not None}
    assert _parameters_dict(parameters) == expected
    assert list(_parameters_dict(parameters)) == list(expected)


def test_readers_take_any_mapping_and_refuse_anything_else() -> None:
    meta = MappingProxyType({"annotations": MappingProxyType({"a": "1"}),
                             "labels": {"l": "2"}, "finalizers": ["f", 3]})
    obj = MappingProxyType({"metadata": meta, "spec": MappingProxyType({"s": 1}),
                            "status": {"t": 2}})
    assert objects.metadata(obj) is meta
    assert objects.annotations(obj) == {"a": "1"}
    assert objects.labels(obj) == {"l": "2"}
    assert objects.finalizers(obj) == ["f"]
    assert objects.spec(obj) == {"s": 1}
    assert objects.status(obj) == {"t": 2}
    for broken in ({"metadata": "m"}, {"metadata": ["annotations"]}, {}):
        for reader in (objects.metadata, objects.annotations, objects.labels,
                       objects.spec, objects.status):
            assert reader(broken) == {}
        assert objects.finalizers(broken) == []


@pytest.mark.parametrize(("value", "expected"), [
    ({}, True), ({"a": 1}, True), (MappingProxyType({}), True), (None, False), ([], False),
    ("x", False), (0, False), ([("a", 1)], False)])
def test_is_mapping(value: Any, expected: bool) -> None:
    assert objects.is_mapping(value) is expected
    assert (objects.mapping(value) == value if expected else objects.mapping(value) == {})
