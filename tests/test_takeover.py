"""The take-over's order around the name index: a refusal gives back only what it claimed.

The take-over (:meth:`~lifecycle.runtime.passes.Pass.take_over`) claims the external
name before the connection Secret is checked. An object refused for its Secret
before it ever held the name gives the claim back, so the name stays free for an
object that may take it; an object that already holds the name keeps it when it
is refused, so no other object can take over the resource it names. Each check
is shown to matter: a take-over without it is caught.
"""

from __future__ import annotations

import base64
from typing import Any

import pytest

from lifecycle.core.kind import EXTERNAL_NAME
from lifecycle.kube.errors import NotFound
from lifecycle.providers.simcloud import SimCloud
from lifecycle.providers.simcloud.scenarios.harness import database_manifest, simulated_environment
from lifecycle.runtime.passes import Pass
from lifecycle.testing import Environment

KIND = "DatabaseInstance"


def _env() -> tuple[Environment, SimCloud]:
    env, cloud = simulated_environment(cloud=SimCloud(seed=3))
    env.namespace("elsewhere")
    env.api.create({
        "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": "planted", "namespace": "default"},
        "data": {"password": base64.b64encode(b"not-the-operators").decode()}})
    return env, cloud


def _named(name: str, external: str, secret: dict[str, str] | None = None) -> dict[str, Any]:
    manifest = database_manifest(name, annotations={EXTERNAL_NAME: external})
    if secret is not None:
        manifest["spec"]["writeConnectionSecretToRef"] = secret
    return manifest


def _failed(env: Environment, name: str) -> str | None:
    failed = env.condition(KIND, name, "Failed")
    return failed.reason if failed is not None and failed.status.value == "True" else None


def _release_always(self: Pass) -> None:
    """A broken give-back: the name is released even by an object that held it."""
    if self.index is not None and self.name.claimed:
        self.index.release(self.obj, self.name.claimed)


def _refused_newcomer_gives_the_name_back(env: Environment, cloud: SimCloud) -> str | None:
    env.apply(_named("first", "shared", {"name": "planted"}))
    env.run_until_idle()
    assert _failed(env, "first") == "ConnectionSecretNotOwned"
    env.apply(_named("second", "shared"))
    env.advance(600)  # a name conflict is retried: run for a while, not until idle
    return _failed(env, "second")


def test_an_object_refused_for_its_secret_leaves_the_name_free() -> None:
    env, cloud = _env()
    assert _refused_newcomer_gives_the_name_back(env, cloud) is None
    assert env.state(KIND, "second") == "ready" and "shared" in cloud.instances()


def test_a_take_over_that_keeps_the_refused_claim_is_caught(
        monkeypatch: pytest.MonkeyPatch) -> None:
    env, cloud = _env()
    monkeypatch.setattr(Pass, "give_back", lambda self: None)
    assert _refused_newcomer_gives_the_name_back(env, cloud) == "ExternalNameConflict"
    assert "shared" not in cloud.instances()


def _refused_holder_keeps_the_name(env: Environment, cloud: SimCloud) -> bool:
    """Whether the newcomer is refused by the index, before anything is written for it (the
    resource's own ownership mark would refuse it later, once its Secret is written)."""
    env.apply(_named("first", "shared"))
    env.run_until_idle()
    assert env.state(KIND, "first") == "ready"
    env.apply(_named("first", "shared", {"name": "first-conn", "namespace": "elsewhere"}))
    env.run_until_idle()
    assert _failed(env, "first") == "SecretNamespaceNotAllowed"
    env.apply(_named("second", "shared"))
    env.advance(600)
    assert _failed(env, "second") == "ExternalNameConflict"
    try:
        env.api.get("v1", "Secret", "default", "second-conn")
    except NotFound:
        return True
    return False


def test_an_object_holding_its_name_keeps_it_when_refused_for_its_secret() -> None:
    env, cloud = _env()
    assert _refused_holder_keeps_the_name(env, cloud)
    assert cloud.count("modify", "shared") == 0


def test_a_take_over_that_gives_back_a_held_name_is_caught(
        monkeypatch: pytest.MonkeyPatch) -> None:
    env, cloud = _env()
    monkeypatch.setattr(Pass, "give_back", _release_always)
    assert not _refused_holder_keeps_the_name(env, cloud)
