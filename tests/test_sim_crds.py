"""CustomResourceDefinitions as objects of the embedded API."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from lifecycle.kube.errors import BadRequest, Invalid, MethodNotAllowed, NotFound
from lifecycle.machines.database import DatabaseInstance
from lifecycle.schema.crds import crd, crds
from lifecycle.sim import EmbeddedAPI
from lifecycle.sim.crds import CLEANUP_FINALIZER, apply_crd
from lifecycle.sim.embedded import register_kinds

CRD_API, CRD_KIND = "apiextensions.k8s.io/v1", "CustomResourceDefinition"
DBI = "db.lifecycle.dev/v1alpha1"


def stored_crd(api: EmbeddedAPI, name: str = "databaseinstances.db.lifecycle.dev") -> dict:
    return api.get(CRD_API, CRD_KIND, None, name)


def conditions(obj: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in obj["status"]["conditions"]}


def instance(name: str = "db", **for_provider: Any) -> dict[str, Any]:
    return {"apiVersion": DBI, "kind": "DatabaseInstance",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"forProvider": {"engine": "postgres", "storageGB": 20, **for_provider}}}


def test_a_created_crd_is_established_and_serves_its_kind_with_its_schema() -> None:
    api = EmbeddedAPI()
    with pytest.raises(NotFound):
        api.resource_type(DBI, "DatabaseInstance")
    api.create(crd(DatabaseInstance))
    stored = stored_crd(api)
    assert conditions(stored) == {"NamesAccepted": ("True", "NoConflicts"),
                                  "Established": ("True", "InitialNamesAccepted")}
    assert all(c["lastTransitionTime"] for c in stored["status"]["conditions"])
    assert stored["status"]["storedVersions"] == ["v1alpha1"]
    assert stored["status"]["acceptedNames"]["shortNames"] == ["dbi"]
    assert stored["spec"]["names"]["singular"] == "databaseinstance"
    rtype = api.resource_type(DBI, "DatabaseInstance")
    assert rtype.short_names == ("dbi",) and "managed" in rtype.categories
    assert [c["name"] for c in rtype.printer_columns][:2] == ["Ready", "Synced"]
    with pytest.raises(BadRequest, match=r'unknown field "spec\.forProvider\.extra"'):
        api.create(instance(extra="pruned"))  # strict field validation, by default
    created = api.create(instance(extra="pruned"), field_validation="Ignore")
    assert "extra" not in created["spec"]["forProvider"]
    assert created["spec"]["deletionPolicy"] == "Delete"  # defaulted
    with pytest.raises(Invalid) as caught:
        api.create(instance("bad", storageGB="lots"))
    assert [c["field"] for c in caught.value.causes if c["field"] != "<nil>"] == [
        "spec.forProvider.storageGB"]


def test_reapplying_the_same_crds_changes_nothing() -> None:
    api = EmbeddedAPI()
    register_kinds(api, [DatabaseInstance])
    before = api.resource_version
    for doc in crds([DatabaseInstance]):
        apply_crd(api, doc)
    assert api.resource_version == before


def test_a_non_structural_schema_is_refused_with_422() -> None:
    api = EmbeddedAPI()
    doc = crd(DatabaseInstance)
    del doc["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["type"]
    with pytest.raises(Invalid) as caught:
        api.create(doc)
    assert caught.value.status == 422
    assert str(caught.value).startswith(
        'CustomResourceDefinition.apiextensions.k8s.io "databaseinstances.db.lifecycle.dev" '
        "is invalid")
    with pytest.raises(NotFound):
        stored_crd(api)


def test_scope_is_immutable_but_the_status_subresource_may_change() -> None:
    api = EmbeddedAPI()
    stored = api.create(crd(DatabaseInstance))
    changed = copy.deepcopy(stored_crd(api))
    changed["spec"]["scope"] = "Cluster"
    with pytest.raises(Invalid) as caught:
        api.replace(changed)
    assert caught.value.causes == [{"reason": "FieldValueInvalid", "field": "spec.scope",
                                    "message": 'Invalid value: "Cluster": field is immutable'}]
    assert api.resource_type(DBI, "DatabaseInstance").namespaced
    plain = copy.deepcopy(stored_crd(api))
    del plain["spec"]["versions"][0]["subresources"]
    api.replace(plain)
    assert not api.resource_type(DBI, "DatabaseInstance").status_subresource
    assert stored["metadata"]["uid"] == stored_crd(api)["metadata"]["uid"]


def test_versions_added_later_are_served_and_removed_ones_are_not() -> None:
    api = EmbeddedAPI()
    api.create(crd(DatabaseInstance))
    api.create(instance())
    doc = copy.deepcopy(stored_crd(api))
    v2 = copy.deepcopy(doc["spec"]["versions"][0])
    v2.update(name="v1beta1", storage=False)
    doc["spec"]["versions"].append(v2)
    api.replace(doc)
    got = api.get("db.lifecycle.dev/v1beta1", "DatabaseInstance", "default", "db")
    assert got["metadata"]["name"] == "db"  # one store behind every served version
    doc = copy.deepcopy(stored_crd(api))
    doc["spec"]["versions"][1]["served"] = False
    api.replace(doc)
    with pytest.raises(NotFound):
        api.get("db.lifecycle.dev/v1beta1", "DatabaseInstance", "default", "db")
    doc = copy.deepcopy(stored_crd(api))
    doc["spec"]["versions"] = [doc["spec"]["versions"][1] | {"storage": True, "served": True}]
    with pytest.raises(Invalid) as caught:  # v1alpha1 is still in storedVersions
        api.replace(doc)
    assert caught.value.causes[0]["field"] == "status.storedVersions[0]"


def test_a_name_another_crd_of_the_group_uses_is_not_accepted() -> None:
    api = EmbeddedAPI()
    api.create(crd(DatabaseInstance))
    other = crd(DatabaseInstance)
    other["metadata"]["name"] = "dbinstances.db.lifecycle.dev"
    other["spec"]["names"]["plural"] = "dbinstances"
    api.create(other)
    clash = stored_crd(api, "dbinstances.db.lifecycle.dev")
    assert conditions(clash)["NamesAccepted"] == ("False", "SingularConflict")
    assert conditions(clash)["Established"] == ("False", "NotAccepted")
    assert api.resource_type(DBI, "DatabaseInstance").plural == "databaseinstances"
    api.delete(CRD_API, CRD_KIND, None, "databaseinstances.db.lifecycle.dev")
    assert conditions(stored_crd(api, "dbinstances.db.lifecycle.dev"))["Established"] == (
        "True", "InitialNamesAccepted")


def test_deleting_a_crd_deletes_its_objects_then_stops_serving() -> None:
    api = EmbeddedAPI()
    api.create(crd(DatabaseInstance))
    api.create(instance("plain"))
    held = instance("held")
    held["metadata"]["finalizers"] = ["example.test/hold"]
    api.create(held)
    api.delete(CRD_API, CRD_KIND, None, "databaseinstances.db.lifecycle.dev")
    terminating = stored_crd(api)
    assert CLEANUP_FINALIZER in terminating["metadata"]["finalizers"]
    assert conditions(terminating)["Terminating"] == ("True", "InstanceDeletionInProgress")
    with pytest.raises(NotFound):
        api.get(DBI, "DatabaseInstance", "default", "plain")
    lingering = api.get(DBI, "DatabaseInstance", "default", "held")
    assert lingering["metadata"]["deletionTimestamp"]
    with pytest.raises(MethodNotAllowed):
        api.create(instance("new"))
    lingering["metadata"]["finalizers"] = []
    api.replace(lingering)
    with pytest.raises(NotFound):
        stored_crd(api)
    with pytest.raises(NotFound):
        api.resource_type(DBI, "DatabaseInstance")


def test_register_does_not_override_a_kind_a_crd_serves() -> None:
    from lifecycle.kube.resources import ResourceType

    api = EmbeddedAPI()
    api.create(crd(DatabaseInstance))
    api.register(ResourceType("db.lifecycle.dev", "v1alpha1", "DatabaseInstance",
                              "databaseinstances", namespaced=True))
    assert api.resource_type(DBI, "DatabaseInstance").schema is not None
