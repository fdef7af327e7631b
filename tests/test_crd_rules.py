"""The CRDs of claims, classes and parents, field by field.

What a user can set on a claim or a class, its type, its validation and the
description ``kubectl explain`` prints, as the generated CRD declares it; and
what the embedded API (as strict as a real server) then accepts, refuses and
defaults.
"""

from __future__ import annotations

import enum
from typing import Any

import attrs
import pytest

from lifecycle.core.kind import PROVIDER_CONFIG_API
from lifecycle.core.parents import ParentKind, Version
from lifecycle.kube.errors import Invalid
from lifecycle.machines.claim import DatabaseClaim, DatabaseInstanceClass
from lifecycle.machines.database import DatabaseInstance
from lifecycle.schema.crds import (
    claim_spec_schema,
    crd,
    crds,
    provider_config_apis,
    schema_for_type,
)
from lifecycle.sim import EmbeddedAPI
from lifecycle.sim.crds import apply_crd
from lifecycle.testing.claims import claim_manifest, class_manifest


def openapi(kind: Any, version: int = 0) -> dict[str, Any]:
    return crd(kind)["spec"]["versions"][version]["schema"]["openAPIV3Schema"]


def ref(description: str, namespaced: bool = False) -> dict[str, Any]:
    fields = ("name", "namespace") if namespaced else ("name",)
    return {"type": "object", "description": description,
            "properties": {f: {"type": "string", "description": f"The object's {f}."}
                           for f in fields}, "required": ["name"]}


SELECTOR = {
    "type": "object",
    "description": "Chooses a class by its labels (matchLabels only); the first matching "
                   "class by name is used.",
    "properties": {
        "matchLabels": {"type": "object", "additionalProperties": {"type": "string"},
                        "description": "Labels a class must carry, each with this value."},
        "matchExpressions": {
            "type": "array",
            "items": {"type": "object", "required": ["key", "operator"], "properties": {
                "key": {"type": "string", "description": "The label's key."},
                "operator": {"type": "string",
                             "description": "In, NotIn, Exists or DoesNotExist."},
                "values": {"type": "array", "items": {"type": "string"},
                           "description": "The values the operator compares with."}},
                "description": "One requirement on a label."},
            "description": "Not supported: a claim using it is refused."}},
    "x-kubernetes-map-type": "atomic",
}


def test_the_claim_spec_declares_its_references_and_selector_exactly() -> None:
    spec = openapi(DatabaseClaim)["properties"]["spec"]
    assert spec["default"] == {}
    props = spec["properties"]
    assert props["classRef"] == ref(
        "The class to provision from (set when scheduled or defaulted).")
    assert props["resourceRef"] == ref(
        "The managed resource bound to this claim (set when provisioned).", namespaced=True)
    assert props["writeConnectionSecretToRef"] == ref(
        "The Secret, in the claim's namespace, receiving the connection details "
        "(default: <claim>-connection).")
    assert props["classSelector"] == SELECTOR


def test_the_claim_status_declares_binding_phase_and_resource() -> None:
    schema = openapi(DatabaseClaim)
    assert schema["description"] == DatabaseClaim.description  # what it manages, not the machine
    status = schema["properties"]["status"]
    assert status["description"] == "Observed state, written by the operator."
    props = status["properties"]
    assert set(props) == {"state", "observedGeneration", "phase", "stateSince", "conditions",
                          "history", "bindingPhase", "resourceRef"}
    assert props["bindingPhase"] == {
        "type": "string",
        "enum": sorted({s.name for s in DatabaseClaim.machine.table().states.values()}),
        "description": "The display name of the claim's state."}
    assert props["resourceRef"] == ref(
        "The managed resource the claim is binding or bound to.", namespaced=True)
    assert set(schema["properties"]) == {"apiVersion", "kind", "metadata", "spec", "status"}
    for name in ("apiVersion", "kind"):
        assert schema["properties"][name]["type"] == "string"
        assert schema["properties"][name]["description"]
    assert schema["properties"]["metadata"] == {"type": "object"}


def test_the_claim_crd_names_columns_and_subresource() -> None:
    doc = crd(DatabaseClaim)
    assert doc["metadata"]["name"] == f"{DatabaseClaim.plural}.{DatabaseClaim.group}"
    names = doc["spec"]["names"]
    assert names == {"kind": "DatabaseClaim", "listKind": "DatabaseClaimList",
                     "plural": DatabaseClaim.plural, "singular": "databaseclaim",
                     "categories": ["claim", "lifecycle"], "shortNames": ["dbc"]}
    version = doc["spec"]["versions"][0]
    assert (version["name"], version["served"], version["storage"]) == (
        DatabaseClaim.version, True, True)
    assert [(c["name"], c["jsonPath"], c.get("priority")) for c in
            version["additionalPrinterColumns"]] == [
        ("Ready", ".status.conditions[?(@.type=='Ready')].status", None),
        ("Synced", ".status.conditions[?(@.type=='Synced')].status", None),
        ("Binding", ".status.bindingPhase", None),
        ("Class", ".spec.classRef.name", None),
        ("Resource", ".spec.resourceRef.name", None),
        ("Age", ".metadata.creationTimestamp", None),
        ("State", ".status.state", 1)]


def test_a_claim_kind_whose_parameters_use_a_reserved_name_is_refused() -> None:
    @attrs.frozen
    class Clashing:
        """Parameters that take two names the claim needs for itself."""

        classRef: str = ""
        resourceRef: str = ""
        size: int = 1

    clashing = attrs.evolve(DatabaseClaim, parameters=Clashing)
    with pytest.raises(TypeError) as raised:
        claim_spec_schema(clashing)
    assert str(raised.value) == ("DatabaseClaim parameters use reserved claim field(s) "
                                 "['classRef', 'resourceRef']")
    for name in ("classSelector", "writeConnectionSecretToRef"):
        one = attrs.make_class("One", {name: attrs.field(default="")})
        with pytest.raises(TypeError, match=rf"\['{name}'\]"):
            claim_spec_schema(attrs.evolve(DatabaseClaim, parameters=one))


def test_the_class_crd_declares_its_template_exactly() -> None:
    doc = crd(DatabaseInstanceClass)
    assert doc["spec"]["scope"] == "Cluster"
    assert doc["spec"]["names"]["categories"] == ["class", "lifecycle"]
    version = doc["spec"]["versions"][0]
    assert "subresources" not in version
    assert [(c["name"], c["type"], c["jsonPath"]) for c in
            version["additionalPrinterColumns"]] == [
        ("Reclaim-Policy", "string", ".specTemplate.reclaimPolicy"),
        ("Resource-Namespace", "string", ".specTemplate.resourceNamespace"),
        ("Age", "date", ".metadata.creationTimestamp")]
    schema = version["schema"]["openAPIV3Schema"]
    assert schema["description"] == (
        "A template for resources provisioned for claims (DatabaseInstanceClass).")
    template = schema["properties"]["specTemplate"]
    assert template["default"] == {}
    assert template["description"] == (
        "The template of the managed resources provisioned from the class.")
    assert template["properties"] == {
        "forProvider": {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                        "description": "Parameters of the managed resource; a claim's "
                                       "portable fields override them."},
        "providerConfigRef": ref("The ProviderConfig of provisioned resources "
                                 "(default: default)."),
        "reclaimPolicy": {"type": "string", "enum": ["Delete", "Retain"], "default": "Delete",
                          "description": "What deleting the claim does to its resource."},
        "resourceNamespace": {"type": "string", "minLength": 1,
                              "description": "Where provisioned resources and their Secrets "
                                             "live (default: lifecycle-system)."},
        "deletionPolicy": {"type": "string", "enum": ["Delete", "Orphan"],
                           "description": "The provisioned resources' deletionPolicy."},
    }


# ------------------------------------------------ what a strict server does with them
@pytest.fixture
def api() -> EmbeddedAPI:
    served = EmbeddedAPI()
    for kind in (DatabaseClaim, DatabaseInstanceClass):
        apply_crd(served, crd(kind))
    served.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}})
    return served


def claim(**spec: Any) -> dict[str, Any]:
    body = claim_manifest("c", "team", storageGB=30)
    body["spec"].update(spec)
    return body


def test_a_selector_requirement_needs_a_key_and_an_operator(api: EmbeddedAPI) -> None:
    for missing, entry in (("key", {"operator": "In"}), ("operator", {"key": "tier"})):
        with pytest.raises(Invalid) as refused:
            api.create(claim(classSelector={"matchExpressions": [entry]}))
        assert f"spec.classSelector.matchExpressions[0].{missing}: Required value" in str(
            refused.value)
    kept = api.create(claim(classSelector={"matchExpressions": [
        {"key": "tier", "operator": "In", "values": ["gold"]}]}))
    # Kept, not pruned: the claim reconciler refuses it instead of widening the selector.
    assert kept["spec"]["classSelector"]["matchExpressions"] == [
        {"key": "tier", "operator": "In", "values": ["gold"]}]


def test_selector_labels_and_values_must_be_strings(api: EmbeddedAPI) -> None:
    with pytest.raises(Invalid) as refused:
        api.create(claim(classSelector={"matchLabels": {"tier": 1}}))
    assert "spec.classSelector.matchLabels.tier" in str(refused.value)
    with pytest.raises(Invalid) as refused:
        api.create(claim(classSelector={"matchExpressions": [
            {"key": "tier", "operator": "In", "values": [1]}]}))
    assert "spec.classSelector.matchExpressions[0].values[0]" in str(refused.value)


def test_references_need_a_name(api: EmbeddedAPI) -> None:
    for field in ("classRef", "resourceRef", "writeConnectionSecretToRef"):
        with pytest.raises(Invalid) as refused:
            api.create(claim(**{field: {"namespace": "x"} if field == "resourceRef" else {}}))
        assert f"spec.{field}.name: Required value" in str(refused.value)


def test_a_class_is_defaulted_and_validated_by_its_schema(api: EmbeddedAPI) -> None:
    stored = api.create(class_manifest("standard", class_kind=DatabaseInstanceClass))
    assert stored["specTemplate"]["reclaimPolicy"] == "Delete"
    bad = class_manifest("bad", class_kind=DatabaseInstanceClass)
    bad["specTemplate"]["reclaimPolicy"] = "Recycle"
    with pytest.raises(Invalid) as refused:
        api.create(bad)
    assert "specTemplate.reclaimPolicy" in str(refused.value)
    empty = class_manifest("empty", class_kind=DatabaseInstanceClass)
    empty["specTemplate"]["resourceNamespace"] = ""
    with pytest.raises(Invalid) as refused:
        api.create(empty)
    assert "specTemplate.resourceNamespace" in str(refused.value)


# ------------------------------------------------------- types, defaults, versions
class Tier(enum.Enum):
    """A string enum, as parameters declare choices."""

    GOLD = "gold"
    SILVER = "silver"


def test_python_types_map_to_exact_schemas() -> None:
    preserve = {"x-kubernetes-preserve-unknown-fields": True}
    assert schema_for_type(Any) == preserve
    assert schema_for_type(object) == preserve
    assert schema_for_type(list) == {"type": "array", "items": preserve}
    assert schema_for_type(tuple) == {"type": "array", "items": preserve}
    assert schema_for_type(dict) == {"type": "object", "additionalProperties": preserve}
    assert schema_for_type(dict[str, str]) == {"type": "object",
                                               "additionalProperties": {"type": "string"}}
    assert schema_for_type(Tier) == {"type": "string", "enum": ["gold", "silver"]}
    assert schema_for_type(int | str) == preserve  # a union of two types is not narrowed
    with pytest.raises(TypeError) as refused:
        schema_for_type(bytes)
    assert str(refused.value) == ("no OpenAPI schema for type bytes (supported: str, int, "
                                  "float, bool, Literal[...], an enum.Enum, X | None, list[X], "
                                  "tuple[X, ...], set[X], dict[str, X], an attrs class, Any)")


def test_defaults_are_written_as_json_values_and_none_is_no_default() -> None:
    assert schema_for_type(Tier, Tier.GOLD) == {"type": "string", "enum": ["gold", "silver"],
                                                "default": "gold"}
    assert type(schema_for_type(Tier, Tier.GOLD)["default"]) is str
    assert schema_for_type(str | None, None) == {"type": "string", "nullable": True}
    assert schema_for_type(int, 3)["default"] == 3
    assert "default" not in schema_for_type(list[str], attrs.Factory(list))
    assert "default" not in schema_for_type(tuple[str, ...], ())  # not a JSON scalar


def test_a_claim_spec_requires_what_its_parameters_require() -> None:
    @attrs.frozen
    class Sized:
        """A portable parameter without a default."""

        size: int
        note: str = ""

    schema = claim_spec_schema(attrs.evolve(DatabaseClaim, parameters=Sized))
    assert schema["required"] == ["size"]
    assert "required" not in claim_spec_schema(DatabaseClaim)


def test_provider_config_crds_follow_the_managed_kinds_not_the_claims() -> None:
    other = attrs.evolve(DatabaseInstance, provider_config_api="other.example/v1")
    assert provider_config_apis([other, DatabaseClaim]) == ["other.example/v1"]
    assert provider_config_apis([DatabaseClaim]) == [PROVIDER_CONFIG_API]
    docs = crds([other, DatabaseClaim])
    assert [d["metadata"]["name"] for d in docs] == [
        "providerconfigs.other.example", f"{DatabaseInstance.plural}.{DatabaseInstance.group}",
        f"{DatabaseClaim.plural}.{DatabaseClaim.group}"]


def test_only_the_newest_of_three_parent_versions_is_stored() -> None:
    app = ParentKind("apps.example", "App", "apps",
                     (Version("v1alpha1", up=dict), Version("v1beta1", up=dict),
                      Version("v1")), ())
    versions = crd(app)["spec"]["versions"]
    assert [(v["name"], v["storage"]) for v in versions] == [
        ("v1alpha1", False), ("v1beta1", False), ("v1", True)]
