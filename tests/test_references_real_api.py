"""The real kube-apiserver enforces what a Grant's CRD says about references.

Only the Grant CRD is installed (the shared ProviderConfig CRD is left as other tests set
it): a Grant naming its role and database by reference is accepted, one with neither the
field nor its reference is refused with the rule's message, and a reference carrying a
namespace is refused as an unknown field (strict field validation, as kubectl sends it).
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from kubernetes import client as k8s

from lifecycle.machines.postgres import Grant
from lifecycle.providers.postgres.scenarios.testing import manifest
from lifecycle.schema.crds import crd
from lifecycle.testing.envtest import install


def grant(namespace: str, name: str, **forprovider: Any) -> dict[str, Any]:
    doc = manifest("Grant", name, namespace=namespace, privileges=["CONNECT"])
    doc["spec"]["forProvider"].update(forprovider)
    return doc


def create(api: k8s.CustomObjectsApi, doc: dict[str, Any]) -> None:
    group, version = doc["apiVersion"].split("/")
    api.create_namespaced_custom_object(group, version, doc["metadata"]["namespace"],
                                        Grant.plural, doc, field_validation="Strict")


def test_the_real_server_checks_a_grants_references(real_cluster: Any) -> None:
    client = real_cluster.api_client()
    install(client, [crd(Grant)])
    namespace = f"t-{uuid.uuid4().hex[:8]}"
    k8s.CoreV1Api(client).create_namespace({"metadata": {"name": namespace}})
    api = k8s.CustomObjectsApi(client)

    create(api, grant(namespace, "by-ref", roleRef={"name": "app"},
                      databaseSelector={"matchLabels": {"app": "shop"}}))

    with pytest.raises(k8s.ApiException) as refused:
        create(api, grant(namespace, "neither", database="db"))
    assert refused.value.status == 422
    assert "role, roleRef or roleSelector is required" in refused.value.body

    with pytest.raises(k8s.ApiException) as elsewhere:
        create(api, grant(namespace, "elsewhere", database="db",
                          roleRef={"name": "app", "namespace": "team-b"}))
    assert elsewhere.value.status in (400, 422)
    assert "namespace" in elsewhere.value.body
