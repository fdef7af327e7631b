"""The supporting reads of a pass, rule by rule (:mod:`lifecycle.runtime.reads`).

The namespace's annotations (none for a cluster-scoped object or a missing namespace),
the provider config with its credentials (a missing one is ``ProviderConfigMissing``),
and the cache that lets a reconciler reuse both for ``reads_ttl`` seconds, never
keeping a failed read.
"""

from __future__ import annotations

import base64
from typing import Any

import pytest

from lifecycle.core.contract import ProviderConfig
from lifecycle.core.errors import CredentialsError
from lifecycle.core.kind import PROVIDER_CONFIG_API, PROVIDER_CONFIG_KIND
from lifecycle.kube.errors import NotFound
from lifecycle.runtime import reads
from lifecycle.runtime.reads import TTLCache, namespace_annotations, provider_config


class Store:
    """A cluster of a few objects by exact (apiVersion, kind, namespace, name); every read
    recorded."""

    def __init__(self, *objects: dict[str, Any]) -> None:
        self.objects = {(o["apiVersion"], o["kind"], o["metadata"].get("namespace"),
                         o["metadata"]["name"]): o for o in objects}
        self.reads: list[tuple[Any, ...]] = []

    def get(self, api_version: str, kind: str, namespace: str | None, name: str) -> Any:
        self.reads.append((api_version, kind, namespace, name))
        try:
            return self.objects[(api_version, kind, namespace, name)]
        except KeyError:
            raise NotFound(f"{kind} {name} not found") from None


def namespace(name: str, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if annotations is not None:
        meta["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": meta}


def test_namespace_annotations_are_read_from_the_namespace() -> None:
    api = Store(namespace("team", {"lifecycle.dev/operator": "a"}), namespace("bare"),
                namespace("empty", {}))
    assert namespace_annotations(api, "team") == {"lifecycle.dev/operator": "a"}
    assert api.reads == [("v1", "Namespace", None, "team")]
    assert namespace_annotations(api, "bare") == {}
    assert namespace_annotations(api, "empty") == {}
    assert namespace_annotations(api, "absent") == {}


@pytest.mark.parametrize("name", [None, ""])
def test_a_cluster_scoped_object_has_no_namespace_annotations_and_reads_nothing(
        name: str | None) -> None:
    api = Store()
    assert namespace_annotations(api, name) == {}
    assert api.reads == []


def secret(name: str, data: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": name, "namespace": "default"},
            "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}}


def config(name: str, api_version: str = PROVIDER_CONFIG_API) -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": PROVIDER_CONFIG_KIND,
            "metadata": {"name": name},
            "spec": {"host": "db", "credentials": {"secretRef": {"name": "creds"}}}}


def test_the_provider_config_comes_with_its_spec_and_decoded_credentials() -> None:
    api = Store(config("pc"), secret("creds", {"password": "pw"}))
    found = provider_config(api, "pc")
    assert found == ProviderConfig(name="pc", spec=config("pc")["spec"],
                                   credentials={"password": "pw"})
    assert api.reads[0] == (PROVIDER_CONFIG_API, PROVIDER_CONFIG_KIND, None, "pc")


def test_a_kinds_own_provider_config_type_is_read_by_its_api_version() -> None:
    own = "postgresql.lifecycle.dev/v1alpha1"
    api = Store(config("pc", own), secret("creds", {"password": "pw"}))
    assert provider_config(api, "pc", own).name == "pc"
    with pytest.raises(CredentialsError):
        provider_config(api, "pc")  # not of the engine's own type


def test_a_missing_provider_config_is_provider_config_missing() -> None:
    with pytest.raises(CredentialsError) as refused:
        provider_config(Store(), "absent")
    assert refused.value.reason == "ProviderConfigMissing"
    assert str(refused.value) == "provider config 'absent' not found"


def test_the_cache_reuses_a_value_for_ttl_seconds_and_then_loads_again(
        monkeypatch: pytest.MonkeyPatch) -> None:
    now = [100.0]
    monkeypatch.setattr(reads.time, "monotonic", lambda: now[0])
    loads: list[str] = []

    def load(value: str) -> Any:
        return lambda: loads.append(value) or value

    cache = TTLCache(5.0)
    assert cache.get("k", load("first")) == "first"
    now[0] = 104.999
    assert cache.get("k", load("second")) == "first"
    assert cache.get("other", load("third")) == "third"  # keys are cached apart
    now[0] = 105.0  # the entry's time is up
    assert cache.get("k", load("fourth")) == "fourth"
    assert loads == ["first", "third", "fourth"]


@pytest.mark.parametrize("ttl", [0.0, -1.0])
def test_a_cache_without_a_ttl_loads_every_time(ttl: float) -> None:
    loads: list[int] = []
    cache = TTLCache(ttl)
    for n in range(3):
        assert cache.get("k", lambda n=n: loads.append(n) or n) == n
    assert loads == [0, 1, 2]


def test_a_failed_load_is_not_kept() -> None:
    cache = TTLCache(60.0)

    def missing() -> Any:
        raise CredentialsError("provider config 'pc' not found", reason="ProviderConfigMissing")

    for _ in range(2):
        with pytest.raises(CredentialsError):
            cache.get("pc", missing)
    assert cache.get("pc", lambda: "found") == "found"
    assert cache.get("pc", lambda: "later") == "found"


def test_a_provider_config_whose_credentials_are_missing_is_named_in_the_refusal() -> None:
    with pytest.raises(CredentialsError) as refused:
        provider_config(Store(config("pc")), "pc")
    assert refused.value.reason == "CredentialsMissing"
    assert str(refused.value) == ("credentials Secret default/creds of provider config 'pc' "
                                  "not found")


def test_a_ttl_under_a_second_still_caches(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [10.0]
    monkeypatch.setattr(reads.time, "monotonic", lambda: now[0])
    cache = TTLCache(0.5)
    assert cache.get("k", lambda: "first") == "first"
    now[0] = 10.4
    assert cache.get("k", lambda: "second") == "first"
    now[0] = 10.5
    assert cache.get("k", lambda: "third") == "third"
