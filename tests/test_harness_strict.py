"""The harness's ``apply`` validates like ``kubectl apply``: unknown fields are refused.

A misspelt field (``partitons: 3``) used to be pruned silently, so the object
went Ready with the default while ``kubectl apply`` refuses the same
manifest. ``Environment.apply`` now refuses it by default (strict field
validation, as the API server's ``fieldValidation=Strict``), names the field,
and stores nothing; ``Warn`` and ``Ignore`` are the documented opt-outs.
"""

from __future__ import annotations

import pytest

from lifecycle.kube.errors import BadRequest
from lifecycle.providers.simcloud.scenarios.harness import database_manifest, simulated_environment
from lifecycle.testing.harness import FIELD_VALIDATION

KIND = "DatabaseInstance"


def misspelt(name: str = "orders") -> dict:
    manifest = database_manifest(name)
    manifest["spec"]["forProvider"]["storageGb"] = 40  # storageGB misspelt
    manifest["spec"]["writeConectionSecretToRef"] = {"name": "x"}
    return manifest


def test_an_unknown_field_is_refused_by_default_and_nothing_is_stored() -> None:
    env, _ = simulated_environment()
    with pytest.raises(BadRequest) as refused:
        env.apply(misspelt())
    message = str(refused.value)
    assert refused.value.status == 400
    assert ('DatabaseInstance in version "v1alpha1" cannot be handled as a DatabaseInstance: '
            'strict decoding error: unknown field "spec.forProvider.storageGb", unknown field '
            '"spec.writeConectionSecretToRef"') in message
    assert "field_validation" in message  # says how to opt out
    assert not env.exists(KIND, "orders")
    assert env.pending() == {}


def test_an_unknown_field_in_an_update_is_refused_and_the_object_kept() -> None:
    env, _ = simulated_environment()
    env.apply(database_manifest("orders", storage_gb=30))
    env.run_until_idle()
    before = env.get(KIND, "orders")
    with pytest.raises(BadRequest, match=r'unknown field "spec\.forProvider\.storageGb"'):
        env.apply(misspelt())
    assert env.get(KIND, "orders") == before


def test_yaml_text_is_checked_too_and_metadata_fields_are_known() -> None:
    env, _ = simulated_environment()
    manifest = """
apiVersion: db.lifecycle.dev/v1alpha1
kind: DatabaseInstance
metadata:
  name: orders
  labels: {team: a}
  annotations: {note: x}
  lables: {oops: 1}
spec:
  forProvider: {engine: postgres}
"""
    with pytest.raises(BadRequest, match=r'unknown field "metadata\.lables"'):
        env.apply(manifest)
    env.apply(manifest.replace("  lables: {oops: 1}\n", ""))
    assert env.exists(KIND, "orders")


def test_warn_keeps_going_with_a_warning_and_ignore_prunes_silently() -> None:
    env, _ = simulated_environment(field_validation="Warn")
    obj = env.apply(misspelt())
    assert "storageGb" not in obj["spec"]["forProvider"]  # pruned by the schema
    assert env.warnings == [
        'DatabaseInstance orders: unknown field "spec.forProvider.storageGb"',
        'DatabaseInstance orders: unknown field "spec.writeConectionSecretToRef"']
    strict, _ = simulated_environment()
    quiet = strict.apply(misspelt("other"), field_validation="Ignore")
    assert "storageGb" not in quiet["spec"]["forProvider"]
    assert strict.warnings == []
    strict.run_until_idle()
    assert strict.state(KIND, "other") == "ready"


def test_a_lenient_kind_keeps_unknown_fields_without_complaint() -> None:
    env, _ = simulated_environment()
    env.serve_lenient(KIND)
    stored = env.apply(misspelt())
    assert stored["spec"]["forProvider"]["storageGb"] == 40


def test_a_bad_mode_is_refused() -> None:
    assert FIELD_VALIDATION == ("Strict", "Warn", "Ignore")
    with pytest.raises(ValueError, match="field_validation must be one of Strict, Warn, Ignore"):
        simulated_environment(field_validation="strict")
    env, _ = simulated_environment()
    with pytest.raises(ValueError):
        env.apply(database_manifest("x"), field_validation="Loose")


def test_the_fixture_is_strict_too(lifecycle_env) -> None:
    env = lifecycle_env()
    with pytest.raises(BadRequest):
        env.apply(misspelt())
