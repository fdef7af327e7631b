"""Every parameter a bundled kind declares is described in its CRD, so that ``kubectl
explain KIND.spec.forProvider`` shows what each field does (the PostgreSQL kinds
included); the check finds an undocumented field of a kind built to lack one."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import attrs
import pytest

from lifecycle import registry
from lifecycle.core.kind import Kind
from lifecycle.driver.crds import crd, is_claim
from lifecycle.machines.managed import ManagedResourceMachine


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
