"""Every field of every bundled CRD is described, so that ``kubectl explain`` shows what
each does: the parameters a kind declares (the PostgreSQL kinds included), the fields the
engine adds (status, providerConfigRef, claimRef, writeConnectionSecretToRef...), the
ProviderConfig's spec as each provider declares it, claims and classes; the check finds an
undocumented field of a kind built to lack one."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import attrs
import pytest

from lifecycle import registry
from lifecycle.core.kind import Kind
from lifecycle.machines.managed import ManagedResourceMachine
from lifecycle.schema.crds import crd, crds, is_claim


def undescribed(schema: dict[str, Any], path: str) -> Iterator[str]:
    """The paths of the properties under ``schema`` (items and maps too) without a
    description."""
    for name, node in (schema.get("properties") or {}).items():
        where = f"{path}.{name}"
        if not str(node.get("description") or "").strip():
            yield where
        yield from undescribed(node, where)
    if isinstance(schema.get("items"), dict):
        yield from undescribed(schema["items"], f"{path}[]")
    if isinstance(schema.get("additionalProperties"), dict):
        yield from undescribed(schema["additionalProperties"], f"{path}{{}}")


def for_provider(kind: Kind) -> dict[str, Any]:
    """The ``spec.forProvider`` schema of the kind's CRD (its served version)."""
    doc = crd(kind)
    version = next(v for v in doc["spec"]["versions"] if v.get("served"))
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    return spec["properties"]["forProvider"]  # type: ignore[no-any-return]


def managed_kinds() -> list[Kind]:
    """The bundled managed kinds (each declares its parameters as ``spec.forProvider``;
    a claim's spec is the engine's)."""
    return [r.kind for r in registry.registrations()
            if isinstance(r.kind, Kind) and r.kind.parameters is not None
            and not is_claim(r.kind)]


def test_the_postgres_kinds_are_among_those_checked() -> None:
    pytest.importorskip("psycopg")
    names = {k.kind for k in managed_kinds()}
    assert {"Role", "Database", "Grant", "Schema", "Extension",
            "DefaultPrivileges"} <= names, names


@pytest.mark.parametrize("kind", managed_kinds(), ids=lambda k: k.kind)
def test_every_declared_parameter_has_a_description(kind: Kind) -> None:
    schema = for_provider(kind)
    assert schema.get("properties"), f"{kind.kind} declares no parameters"
    assert list(undescribed(schema, f"{kind.kind}.spec.forProvider")) == []


@pytest.mark.parametrize("kind", managed_kinds(), ids=lambda k: k.kind)
def test_descriptions_are_plain_text(kind: Kind) -> None:
    text = repr(for_provider(kind))
    assert "``" not in text and ":class:" not in text and ":attr:" not in text


def bundled_crds() -> list[dict[str, Any]]:
    """The CRDs of every registered kind, with the ProviderConfig CRD of each group, as
    ``lifecycle crds`` prints them; and the ProviderConfig CRD the PostgreSQL kinds get
    when they run alone (typed by their declaration only)."""
    kinds = [r.kind for r in registry.registrations()]
    docs = crds(kinds)
    postgres = [k for k in kinds if isinstance(k, Kind) and k.provider_config_spec is not None]
    if postgres:
        docs.append(crds(postgres[:1])[0])
    return docs


def undescribed_in(doc: dict[str, Any]) -> list[str]:
    """The undescribed fields of every served version of a CRD (the root's metadata, which
    the API server forbids describing and kubectl explains from ObjectMeta, aside)."""
    found = []
    for version in doc["spec"]["versions"]:
        schema = version["schema"]["openAPIV3Schema"]
        where = f"{doc['spec']['names']['kind']}({version['name']})"
        if not str(schema.get("description") or "").strip():
            found.append(where)
        found += [p for p in undescribed(schema, where) if p != f"{where}.metadata"]
    return found


@pytest.mark.parametrize("doc", bundled_crds(), ids=lambda d: d["metadata"]["name"])
def test_every_field_of_every_bundled_crd_has_a_description(doc: dict[str, Any]) -> None:
    assert undescribed_in(doc) == []


def test_the_engine_fields_are_among_those_checked() -> None:
    docs = {d["metadata"]["name"]: d for d in bundled_crds()}
    schema = docs["databaseinstances.db.lifecycle.dev"]["spec"]["versions"][0]["schema"][
        "openAPIV3Schema"]
    spec, status = schema["properties"]["spec"], schema["properties"]["status"]
    for node in (spec["properties"]["providerConfigRef"]["properties"]["name"],
                 spec["properties"]["claimRef"]["properties"]["uid"],
                 spec["properties"]["writeConnectionSecretToRef"]["properties"]["namespace"],
                 status["properties"]["conditions"]["items"]["properties"]["reason"],
                 status["properties"]["history"]["items"]["properties"]["to"]):
        assert node["description"]
    configs = [d for d in bundled_crds() if d["spec"]["names"]["kind"] == "ProviderConfig"]
    assert any("host" in d["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"][
        "spec"]["properties"] for d in configs)


def test_the_crd_check_finds_an_undescribed_engine_field() -> None:
    doc = next(d for d in bundled_crds() if d["metadata"]["name"].startswith("providerconfigs"))
    spec = doc["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    del spec["properties"]["credentials"]["properties"]["source"]["description"]
    assert undescribed_in(doc) == ["ProviderConfig(v1alpha1).spec.credentials.source"]


@attrs.frozen
class _Item:
    """An item of a list."""

    label: str
    """Documented."""
    weight: int = 1


@attrs.frozen
class _HalfDocumented:
    """Parameters of a kind made to lack descriptions."""

    size: int = 1
    """How big it is."""
    colour: str = "red"
    items: tuple[_Item, ...] = ()
    """Documented list, whose item has an undocumented field."""


class _Machine(ManagedResourceMachine):
    """A machine for the broken kind."""


def test_the_check_finds_an_undocumented_field() -> None:
    kind = Kind(group="broken.example.org", version="v1", kind="Half", plural="halves",
                machine=_Machine, parameters=_HalfDocumented)
    found = list(undescribed(for_provider(kind), "Half.spec.forProvider"))
    assert found == ["Half.spec.forProvider.colour", "Half.spec.forProvider.items[].weight"]
