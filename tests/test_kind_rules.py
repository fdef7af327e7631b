"""A kind's pure rules: spec parsing, external names, references and the connection Secret."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from lifecycle.core.errors import Severity, TerminalError
from lifecycle.core.kind import (
    EXTERNAL_NAME,
    OPERATION,
    PROVIDER_CONFIG_API,
    Kind,
    check_references,
    connection_secret_ref,
    spec_keys,
)
from lifecycle.machines.managed import ManagedResourceMachine


def _positive(_instance: Any, attribute: attrs.Attribute, value: int) -> None:
    if value <= 0:
        raise ValueError(f"'{attribute.name}' must be positive")


@attrs.frozen
class Params:
    region: str = "eu"
    storage_gb: int = attrs.field(default=10, alias="storageGB", validator=_positive)
    size: int = attrs.field(default=1, validator=_positive)
    derived: str = attrs.field(init=False, default="x")


KIND = Kind(group="example.org", version="v1", kind="Thing", plural="things",
            machine=ManagedResourceMachine, parameters=Params)


def refusal(call: Any, *args: Any) -> TerminalError:
    with pytest.raises(TerminalError) as caught:
        call(*args)
    return caught.value


def test_identity_and_defaults() -> None:
    assert KIND.api_version == "example.org/v1"
    assert KIND.provider_config_api == PROVIDER_CONFIG_API == "lifecycle.dev/v1alpha1"
    assert (KIND.namespaced, KIND.password, KIND.names_assigned) == (True, False, False)
    assert (KIND.short_names, KIND.external_name_max) == ((), None)


def test_spec_keys_use_the_alias_and_skip_fields_not_in_init() -> None:
    assert spec_keys(Params) == {"region": "region", "storage_gb": "storageGB", "size": "size"}


@pytest.mark.parametrize(("spec", "expected"), [
    ({}, Params()),
    ({"forProvider": None}, Params()),
    ({"forProvider": {}}, Params()),
    ({"forProvider": {"region": "us", "storageGB": 20}}, Params(region="us", storageGB=20)),
])
def test_parse_parameters_reads_spec_keys(spec: dict, expected: Params) -> None:
    assert KIND.parse_parameters(spec) == expected


@pytest.mark.parametrize(("spec", "message"), [
    (None, "spec must be an object"),
    ([], "spec must be an object"),
    ({"forProvider": []}, "spec.forProvider must be an object"),
    ({"forProvider": "x"}, "spec.forProvider must be an object"),
    ({"forProvider": {"zeta": 1, "alpha": 2, "region": "us"}},
     "unknown field(s) in spec.forProvider: alpha, zeta"),
    # The attribute name is not a spec key when the field has an alias.
    ({"forProvider": {"storage_gb": 5}}, "unknown field(s) in spec.forProvider: storage_gb"),
    # A validator's message names the field as the spec spells it.
    ({"forProvider": {"storageGB": 0}}, "invalid spec.forProvider: 'storageGB' must be positive"),
    ({"forProvider": {"size": 0}}, "invalid spec.forProvider: 'size' must be positive"),
])
def test_parse_parameters_refusals_are_terminal_and_exact(spec: Any, message: str) -> None:
    error = refusal(KIND.parse_parameters, spec)
    assert error.message == message
    assert (error.reason, error.severity) == ("InvalidSpec", Severity.TERMINAL)


def test_a_long_or_multiline_construction_error_is_cut_to_its_first_line() -> None:
    def check(_i: Any, _a: Any, value: str) -> None:
        raise TypeError(value)

    @attrs.frozen
    class Text:
        text: str = attrs.field(validator=check)

    kind = attrs.evolve(KIND, parameters=Text)
    error = refusal(kind.parse_parameters, {"forProvider": {"text": "a" * 300 + "\nsecond"}})
    assert error.message == "invalid spec.forProvider: " + "a" * 200

    def bare(_i: Any, _a: Any, _v: Any) -> None:
        raise ValueError

    @attrs.frozen
    class Bare:
        text: str = attrs.field(validator=bare)

    error = refusal(attrs.evolve(KIND, parameters=Bare).parse_parameters,
                    {"forProvider": {"text": "t"}})
    assert error.message == "invalid spec.forProvider: ValueError"


def test_to_spec_rekeys_by_alias_and_keeps_other_keys() -> None:
    assert KIND.to_spec({"storage_gb": 3, "storageGB": 4, "other": 5, 7: 8}) == {
        "storageGB": 4, "other": 5, "7": 8}
    assert KIND.to_spec({"storage_gb": 3, "region": "r"}) == {"storageGB": 3, "region": "r"}


@pytest.mark.parametrize(("meta", "expected"), [
    ({"name": "db", "uid": "0123456789ab"}, "db-01234567"),
    ({"name": "db", "uid": "0123456789ab", "annotations": None}, "db-01234567"),
    ({"name": "db", "uid": "0123456789ab", "annotations": {EXTERNAL_NAME: ""}}, "db-01234567"),
    ({"name": "db", "uid": "0123456789ab", "annotations": {EXTERNAL_NAME: 5}}, "db-01234567"),
    ({"name": "db", "uid": "0123456789ab", "annotations": {EXTERNAL_NAME: "mine"}}, "mine"),
])
def test_external_name(meta: dict, expected: str) -> None:
    assert KIND.external_name({"metadata": meta}) == expected


@pytest.mark.parametrize("name", ["a", "x" * 63, "ünï", "a b~"])
def test_check_external_name_accepts(name: str) -> None:
    KIND.check_external_name(name)
    attrs.evolve(KIND, external_name_max=63).check_external_name(name)


@pytest.mark.parametrize(("name", "limit", "problem"), [
    ("", None, "'' is empty"),
    (None, None, "NoneType is empty"),
    (5, None, "int is empty"),
    ("a\x00b", None, "'a\\x00b' contains a control or invisible character (U+0000)"),
    ("a\x1fb", None, "'a\\x1fb' contains a control or invisible character (U+001F)"),
    ("a\x7fb", None, "'a\\x7fb' contains a control or invisible character (U+007F)"),
    ("a\x85b", None, "'a\\x85b' contains a control or invisible character (U+0085)"),
    ("post\u200bgres", None,
     "'post\\u200bgres' contains a control or invisible character (U+200B)"),
    ("app\u202eorp", None, "'app\\u202eorp' contains a control or invisible character (U+202E)"),
    ("x" * 64, 63, f"'{'x' * 64}' is longer than 63 bytes"),
    ("é" * 32, 63, f"'{'é' * 32}' is longer than 63 bytes"),
])
def test_check_external_name_refuses(name: Any, limit: int | None, problem: str) -> None:
    error = refusal(attrs.evolve(KIND, external_name_max=limit).check_external_name, name)
    assert error.message == (f"external name {problem}; set a valid {EXTERNAL_NAME} annotation, "
                             f"then annotate {OPERATION}=reconcile")
    assert (error.reason, error.severity) == ("InvalidExternalName", Severity.TERMINAL)


def test_check_external_name_quotes_at_most_64_characters() -> None:
    name = "\x01" + "y" * 100
    error = refusal(KIND.check_external_name, name)
    assert f"external name {name[:64]!r} contains" in error.message


def test_a_name_of_exactly_the_limit_is_accepted() -> None:
    attrs.evolve(KIND, external_name_max=4).check_external_name("abcd")
    attrs.evolve(KIND, external_name_max=4).check_external_name("éé")


@pytest.mark.parametrize("spec", [
    None, "x", {}, {"providerConfigRef": None},
    {"providerConfigRef": {}, "writeConnectionSecretToRef": {}},
    {"providerConfigRef": {"name": "p", "namespace": 5},
     "writeConnectionSecretToRef": {"name": "s", "namespace": "n"}},
])
def test_check_references_accepts(spec: Any) -> None:
    check_references({"spec": spec})


@pytest.mark.parametrize(("spec", "message"), [
    ({"providerConfigRef": "p"}, "spec.providerConfigRef must be an object, not str"),
    ({"writeConnectionSecretToRef": ["s"]},
     "spec.writeConnectionSecretToRef must be an object, not list"),
    ({"providerConfigRef": {"name": ""}}, "spec.providerConfigRef.name must be a non-empty string"),
    ({"providerConfigRef": {"name": 3}}, "spec.providerConfigRef.name must be a non-empty string"),
    ({"writeConnectionSecretToRef": {"name": "s", "namespace": ""}},
     "spec.writeConnectionSecretToRef.namespace must be a non-empty string"),
    ({"providerConfigRef": {"name": "p"}, "writeConnectionSecretToRef": {"name": False}},
     "spec.writeConnectionSecretToRef.name must be a non-empty string"),
])
def test_check_references_refuses(spec: dict, message: str) -> None:
    error = refusal(check_references, {"spec": spec})
    assert (error.message, error.reason) == (message, "InvalidReference")
    assert error.severity is Severity.TERMINAL


@pytest.mark.parametrize(("obj", "expected"), [
    ({"metadata": {"name": "db", "namespace": "ns"}}, ("ns", "db-connection")),
    ({"metadata": {"name": "db"}}, ("default", "db-connection")),
    ({"metadata": {"name": "db", "namespace": "ns"}, "spec": "bad"}, ("ns", "db-connection")),
    ({"metadata": {"name": "db", "namespace": "ns"},
      "spec": {"writeConnectionSecretToRef": "bad"}}, ("ns", "db-connection")),
    ({"metadata": {"name": "db", "namespace": "ns"},
      "spec": {"writeConnectionSecretToRef": {"name": "s"}}}, ("ns", "s")),
    ({"metadata": {"name": "db", "namespace": "ns"},
      "spec": {"writeConnectionSecretToRef": {"namespace": "other", "name": ""}}},
     ("other", "db-connection")),
])
def test_connection_secret_ref(obj: dict, expected: tuple[str, str]) -> None:
    assert connection_secret_ref(obj) == expected


def test_scope_of_applies_the_name_scope_to_the_parsed_parameters() -> None:
    assert KIND.name_scope is None and KIND.observe_after_create is False
    assert KIND.scope_of({"spec": {"forProvider": {"region": "us"}}}) == ()
    scoped = attrs.evolve(KIND, name_scope=lambda p: (p.region, p.size))
    assert scoped.scope_of({"spec": {"forProvider": {"region": "us", "size": 3}}}) == ("us", "3")
    assert scoped.scope_of({"spec": {}}) == ("eu", "1")
    # A spec that does not parse has no scope (the object is refused before it claims a name).
    assert scoped.scope_of({"spec": {"forProvider": {"bogus": 1}}}) == ()
    assert scoped.scope_of({}) == ()
