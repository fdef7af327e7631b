"""Structural-schema pruning, defaulting and validation of custom resources."""

from __future__ import annotations

from typing import Any

import pytest

from lifecycle.kube.errors import Invalid
from lifecycle.kube.resources import ResourceType
from lifecycle.sim import EmbeddedAPI
from lifecycle.sim.schema import admit, default, prune, unknown_fields, validate

SCHEMA: dict[str, Any] = {"type": "object", "properties": {
    "apiVersion": {"type": "string"}, "kind": {"type": "string"},
    "metadata": {"type": "object"},
    "spec": {"type": "object", "required": ["size"], "properties": {
        "size": {"type": "integer", "minimum": 1, "maximum": 10},
        "ratio": {"type": "number", "exclusiveMaximum": True, "maximum": 1},
        "on": {"type": "boolean"},
        "tier": {"type": "string", "enum": ["gold", "silver"], "default": "silver"},
        "name": {"type": "string", "minLength": 2, "maxLength": 5, "pattern": "^[a-z]+$"},
        "when": {"type": "string", "format": "date-time"},
        "port": {"type": "integer", "format": "int32"},
        "tags": {"type": "object", "additionalProperties": {"type": "string"},
                 "maxProperties": 2},
        "items": {"type": "array", "maxItems": 2, "minItems": 1, "items": {
            "type": "object", "properties": {"k": {"type": "string", "default": "x"},
                                             "n": {"type": "integer"}}}},
        "nested": {"type": "object", "default": {}, "properties": {
            "level": {"type": "integer", "default": 3}}},
        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                 "properties": {"known": {"type": "object", "properties": {
                     "a": {"type": "string"}}}}},
        "port2": {"x-kubernetes-int-or-string": True},
        "maybe": {"type": "string", "nullable": True},
        "template": {"type": "object", "x-kubernetes-embedded-resource": True,
                     "properties": {"spec": {"type": "object", "properties": {
                         "x": {"type": "string"}}}}},
    }},
    "status": {"type": "object", "properties": {"phase": {"type": "string"}}},
}, "required": ["spec"]}

WIDGET = ResourceType("example.test", "v1", "Widget", "widgets", True, schema=SCHEMA)


def widget(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "example.test/v1", "kind": "Widget",
            "metadata": {"name": "w", "namespace": "default"}, "spec": {"size": 1, **spec}}


def test_pruning_drops_undeclared_fields_everywhere_but_keeps_the_resource_fields() -> None:
    obj = widget(junk=1, items=[{"k": "a", "extra": 2}], tags={"a": "b"},
                 free={"anything": {"goes": 1}, "known": {"a": "x", "b": "pruned"}},
                 template={"apiVersion": "v1", "kind": "Pod", "metadata": {
                     "name": "p", "bogus": 1}, "spec": {"x": "1", "y": "2"}})
    obj["metadata"]["odd"] = True  # the object's own metadata is the store's to check
    obj["stray"] = {"top": 1}
    obj["status"] = {"phase": "Up", "unknown": 1}
    pruned = prune(obj, SCHEMA)
    spec = pruned["spec"]
    assert "junk" not in spec and "stray" not in pruned
    assert spec["items"] == [{"k": "a"}]
    assert spec["tags"] == {"a": "b"}
    assert spec["free"] == {"anything": {"goes": 1}, "known": {"a": "x"}}
    assert spec["template"] == {"apiVersion": "v1", "kind": "Pod",
                                "metadata": {"name": "p"}, "spec": {"x": "1"}}
    assert pruned["status"] == {"phase": "Up"}
    assert pruned["metadata"]["odd"] is True and pruned["apiVersion"] == "example.test/v1"
    assert obj["spec"]["junk"] == 1  # the input is not changed
    assert sorted(unknown_fields(obj, SCHEMA)) == [
        "spec.free.known.b", "spec.items[0].extra", "spec.junk", "spec.template.metadata.bogus",
        "spec.template.spec.y", "status.unknown", "stray"]


def test_defaults_fill_missing_fields_recursively_and_in_array_items() -> None:
    obj = default(widget(items=[{"n": 1}, {"k": "given"}], tier=None, maybe=None), SCHEMA)
    spec = obj["spec"]
    assert spec["tier"] == "silver"  # a null non-nullable field with a default is defaulted
    assert spec["maybe"] is None  # nullable: kept
    assert spec["nested"] == {"level": 3}  # the default object gets its own defaults
    assert spec["items"] == [{"n": 1, "k": "x"}, {"k": "given"}]
    assert "metadata" in obj and obj["metadata"] == {"name": "w", "namespace": "default"}
    assert "on" not in default(widget(on=None), SCHEMA)["spec"]  # null without default: gone


@pytest.mark.parametrize(("spec", "reason", "field", "message"), [
    ({"size": "yes"}, "FieldValueTypeInvalid", "spec.size",
     'Invalid value: "string": spec.size in body must be of type integer: "string"'),
    ({"size": True}, "FieldValueTypeInvalid", "spec.size",
     'Invalid value: "boolean": spec.size in body must be of type integer: "boolean"'),
    ({"size": 1.5}, "FieldValueTypeInvalid", "spec.size",
     'Invalid value: "number": spec.size in body must be of type integer: "number"'),
    ({"on": "yes"}, "FieldValueTypeInvalid", "spec.on",
     'Invalid value: "string": spec.on in body must be of type boolean: "string"'),
    ({"size": 0}, "FieldValueInvalid", "spec.size",
     "Invalid value: 0: spec.size in body should be greater than or equal to 1"),
    ({"size": 11}, "FieldValueInvalid", "spec.size",
     "Invalid value: 11: spec.size in body should be less than or equal to 10"),
    ({"ratio": 1}, "FieldValueInvalid", "spec.ratio",
     "Invalid value: 1: spec.ratio in body should be less than 1"),
    ({"tier": "bronze"}, "FieldValueNotSupported", "spec.tier",
     'Unsupported value: "bronze": supported values: "gold", "silver"'),
    ({"name": "abcdef"}, "FieldValueTooLong", "spec.name",
     "Too long: may not be more than 5 bytes"),
    ({"name": "a"}, "FieldValueInvalid", "spec.name",
     'Invalid value: "a": spec.name in body should be at least 2 chars long'),
    ({"name": "AB"}, "FieldValueInvalid", "spec.name",
     "Invalid value: \"AB\": spec.name in body should match '^[a-z]+$'"),
    ({"when": "yesterday"}, "FieldValueInvalid", "spec.when",
     'Invalid value: "yesterday": spec.when in body must be of type date-time: "yesterday"'),
    ({"port": 2**31}, "FieldValueInvalid", "spec.port",
     'Invalid value: 2147483648: spec.port in body must be of type int32: "2147483648"'),
    ({"items": [{}, {}, {}]}, "FieldValueTooMany", "spec.items",
     "Too many: 3: must have at most 2 items"),
    ({"items": []}, "FieldValueInvalid", "spec.items",
     "Invalid value: 0: spec.items in body should have at least 1 items"),
    ({"items": [{"n": "x"}]}, "FieldValueTypeInvalid", "spec.items[0].n",
     'Invalid value: "string": spec.items[0].n in body must be of type integer: "string"'),
    ({"tags": {"a": 1}}, "FieldValueTypeInvalid", "spec.tags.a",
     'Invalid value: "integer": spec.tags.a in body must be of type string: "integer"'),
    ({"tags": {"a": "1", "b": "2", "c": "3"}}, "FieldValueInvalid", "spec.tags",
     'Invalid value: {"a":"1","b":"2","c":"3"}: spec.tags in body should have at most 2 '
     "properties"),
    ({"port2": 1.5}, "FieldValueTypeInvalid", "spec.port2",
     'Invalid value: "number": spec.port2 in body must be of type integer,string: "number"'),
])
def test_each_keyword_fails_with_the_cause_a_real_server_gives(
        spec: dict[str, Any], reason: str, field: str, message: str) -> None:
    causes = validate(widget(**spec), SCHEMA)
    assert causes == [{"reason": reason, "field": field, "message": message}]


@pytest.mark.parametrize("spec", [
    {"size": 2.0}, {"ratio": 0.5}, {"ratio": 0}, {"port2": "http"}, {"port2": 80},
    {"when": "2026-01-01T00:00:00Z"}, {"when": "2026-01-01T00:00:00.5+02:00"},
    {"maybe": None}, {"name": "ab"},
])
def test_valid_values_pass(spec: dict[str, Any]) -> None:
    assert validate(widget(**spec), SCHEMA) == []


def test_required_fields_are_named() -> None:
    assert validate({"apiVersion": "example.test/v1", "kind": "Widget",
                     "metadata": {"name": "w"}}, SCHEMA) == [
        {"reason": "FieldValueRequired", "field": "spec", "message": "Required value"}]
    obj = widget()
    del obj["spec"]["size"]
    assert validate(obj, SCHEMA) == [
        {"reason": "FieldValueRequired", "field": "spec.size", "message": "Required value"}]


def test_additional_properties_false_forbids_unknown_keys() -> None:
    schema = {"type": "object", "properties": {"spec": {
        "type": "object", "properties": {"a": {"type": "string"}},
        "additionalProperties": False}}}
    obj = {"spec": {"a": "x", "b": "y"}}
    assert prune(obj, schema) == obj
    assert validate(obj, schema) == [{"reason": "FieldValueForbidden", "field": "spec.b",
                                      "message": "Forbidden: spec.b in body is a forbidden "
                                                 "property"}]


def test_admit_raises_one_invalid_with_every_cause() -> None:
    with pytest.raises(Invalid) as caught:
        admit(WIDGET, widget(size="yes", tier="bronze", junk=1))
    error = caught.value
    assert error.status == 422 and error.reason == "Invalid"
    assert str(error) == (
        'Widget.example.test "w" is invalid: [spec.size: Invalid value: "string": spec.size '
        'in body must be of type integer: "string", spec.tier: Unsupported value: "bronze": '
        'supported values: "gold", "silver"]')
    assert [c["field"] for c in error.causes] == ["spec.size", "spec.tier"]
    status = error.to_status()
    assert status["details"]["kind"] == "Widget" and status["details"]["group"] == "example.test"
    assert status["details"]["name"] == "w"


def test_status_writes_validate_status_only_and_updates_ratchet_unchanged_fields() -> None:
    bad_spec = widget(size=99)
    new = dict(bad_spec, status={"phase": 3})
    with pytest.raises(Invalid) as caught:
        admit(WIDGET, new, old=bad_spec, subresource="status")
    assert [c["field"] for c in caught.value.causes] == ["status.phase"]
    # the main resource: an unchanged invalid field is tolerated, a changed one is not
    assert admit(WIDGET, dict(bad_spec, metadata={"name": "w", "labels": {"a": "b"}}),
                 old=bad_spec)["spec"]["size"] == 99
    with pytest.raises(Invalid):
        admit(WIDGET, widget(size=98), old=bad_spec)
    # a kind with a status subresource does not validate status on the main resource
    assert admit(WIDGET, dict(widget(), status={"phase": 3}))["status"] == {"phase": 3}


def test_the_store_prunes_defaults_and_refuses_on_every_write_path() -> None:
    api = EmbeddedAPI(field_validation="Ignore")  # the schema's pruning, nothing refused
    api.register(WIDGET)
    created = api.create(widget(junk=1))
    assert "junk" not in created["spec"] and created["spec"]["tier"] == "silver"
    assert created["spec"]["nested"] == {"level": 3}
    with pytest.raises(Invalid):
        api.create(dict(widget(size="yes"), metadata={"name": "v", "namespace": "default"}))
    with pytest.raises(Invalid):
        api.replace({**created, "spec": {**created["spec"], "size": 0}})
    with pytest.raises(Invalid) as caught:
        api.patch("example.test/v1", "Widget", "default", "w", {"spec": {"tier": "bronze"}})
    assert caught.value.causes[0]["field"] == "spec.tier"
    patched = api.patch("example.test/v1", "Widget", "default", "w",
                        {"spec": {"size": 2, "more": 1}})
    assert patched["spec"]["size"] == 2 and "more" not in patched["spec"]
    assert patched["metadata"]["generation"] == 2
    with_status = api.replace_status({**patched, "status": {"phase": "Up", "x": 1}})
    assert with_status["status"] == {"phase": "Up"}
    with pytest.raises(Invalid):
        api.patch("example.test/v1", "Widget", "default", "w", {"status": {"phase": 1}},
                  subresource="status")
    # a write that only re-sends pruned or defaulted fields changes nothing
    again = api.replace({**with_status, "spec": {**with_status["spec"], "junk": 2}})
    assert again["metadata"]["resourceVersion"] == with_status["metadata"]["resourceVersion"]
