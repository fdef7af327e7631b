"""Installing CRDs on a long-lived server merges a shared ProviderConfig kind.

The PostgreSQL kinds alone make ``host`` required in the ProviderConfig spec; the
simulated cloud's kinds keep every field. Installed one after the other on the same
server (the session's real API server is shared by every test file of a worker), the
served ProviderConfig CRD must be the one ``lifecycle crds`` gives for all of them
together, whichever came first: every field of each, required only where all agree.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import attrs
import pytest

from lifecycle.core.kind import PROVIDER_CONFIG_KIND
from lifecycle.core.providerconfig import ProviderConfigSpec
from lifecycle.registry import registrations
from lifecycle.schema.crds import crds, provider_config_crd
from lifecycle.testing.crdmerge import CRDMergeError, merged_crd, united_spec

KINDS = [r.kind for r in registrations()]
POSTGRES = [k for k in KINDS if getattr(k, "provider_config_spec", None) is not None
            and "host" in attrs.fields_dict(k.provider_config_spec)]
OTHERS = [k for k in KINDS if k not in POSTGRES]


def spec_of(doc: dict[str, Any]) -> dict[str, Any]:
    return doc["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]


def provider_config(kinds: list[Any]) -> dict[str, Any]:
    (doc,) = [d for d in crds(kinds) if d["spec"]["names"]["kind"] == PROVIDER_CONFIG_KIND]
    return doc


def test_the_kinds_split_into_a_typed_and_a_free_provider_config() -> None:
    assert POSTGRES and OTHERS
    assert "host" in spec_of(provider_config(POSTGRES))["required"]
    assert "host" not in spec_of(provider_config(OTHERS)).get("properties", {})


@pytest.mark.parametrize("first,then", [(POSTGRES, OTHERS), (OTHERS, POSTGRES)],
                         ids=["postgres-first", "others-first"])
def test_a_merge_in_either_order_is_what_all_kinds_together_give(first: list[Any],
                                                                  then: list[Any]) -> None:
    served = provider_config(first)
    merged = merged_crd(served, provider_config(then))
    assert spec_of(merged) == spec_of(provider_config(KINDS))
    assert "host" not in spec_of(merged).get("required", [])
    assert {"host", "sslMode", "credentials"} <= set(spec_of(merged)["properties"])
    # installing again changes nothing: the merge is stable
    assert spec_of(merged_crd(merged, provider_config(then))) == spec_of(merged)
    assert spec_of(merged_crd(merged, provider_config(first))) == spec_of(merged)


def test_only_a_provider_config_crd_is_merged_and_the_input_is_left_alone() -> None:
    kind_crd = next(d for d in crds(POSTGRES)
                    if d["spec"]["names"]["kind"] != PROVIDER_CONFIG_KIND)
    older = {**kind_crd, "spec": {**kind_crd["spec"], "versions": []}}
    assert merged_crd(older, kind_crd) is kind_crd  # a kind's CRD: its latest declaration
    new = provider_config(OTHERS)
    before = repr(new)
    merged_crd(provider_config(POSTGRES), new)
    assert repr(new) == before


def test_a_field_declared_differently_is_a_clear_error() -> None:
    served = spec_of(provider_config(POSTGRES))
    other = {**served, "properties": {**served["properties"], "host": {"type": "integer"}},
             "required": ["credentials"]}
    with pytest.raises(CRDMergeError, match=r"ProviderConfig spec\.host is served with another"):
        united_spec(served, other)


def test_the_real_server_serves_the_union_in_either_order(real_cluster: Any) -> None:
    """On the real API server: a private ProviderConfig group per order, so the session's
    own CRD is left alone; a config without ``host`` is accepted after both installs,
    and the typed fields' bounds are still enforced."""
    from kubernetes import client as k8s

    from lifecycle.providers.postgres.providerconfig import PostgresProviderConfigSpec
    from lifecycle.testing.envtest import install

    client = real_cluster.api_client()
    ext, custom = k8s.ApiextensionsV1Api(client), k8s.CustomObjectsApi(client)
    typed, engine = [PostgresProviderConfigSpec], [ProviderConfigSpec]
    for order in ((typed, engine), (engine, typed)):
        group = f"pcm{uuid.uuid4().hex[:6]}.example.org"
        api = f"{group}/v1alpha1"
        for specs in order:
            install(client, [provider_config_crd(api, specs)])
        served = json.loads(ext.read_custom_resource_definition(
            f"providerconfigs.{group}", _preload_content=False).data)
        expected = spec_of(provider_config_crd(api, [*typed, *engine]))
        assert spec_of(served) == expected
        assert "host" not in expected.get("required", []) and "host" in expected["properties"]
        body = {"apiVersion": api, "kind": PROVIDER_CONFIG_KIND,
                "metadata": {"name": "no-host"},
                "spec": {"credentials": {"secretRef": {"name": "s", "namespace": "default"}}}}
        custom.create_cluster_custom_object(group, "v1alpha1", "providerconfigs", body)
        with pytest.raises(k8s.ApiException) as refused:
            custom.create_cluster_custom_object(group, "v1alpha1", "providerconfigs", {
                **body, "metadata": {"name": "bad-port"}, "spec": {**body["spec"], "port": 0}})
        assert refused.value.status == 422 and "spec.port" in refused.value.body
        ext.delete_custom_resource_definition(f"providerconfigs.{group}")
