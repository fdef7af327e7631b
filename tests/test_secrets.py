"""Secret hygiene: credentials only from referenced Secrets, no secret in any output.

A run exercises the paths that produce text (creates, updates, deletes,
transient and throttling faults, an invalid spec, wrong and missing
credentials, a provider library whose exception message carries the
password) while capturing every log record at DEBUG, every Event, every
stored object's status and metadata, every reconcile error and stdout and
stderr. The capture is then searched for every generated password and for
the provider's secret key.
"""

from __future__ import annotations

import base64
import json
import logging
from typing import Any

import pytest

from lifecycle.core.errors import UnhandledError
from lifecycle.kube.errors import Conflict
from lifecycle.providers.simcloud import DatabaseClient, DatabaseConnector, SimCloud
from lifecycle.providers.simcloud.scenarios.harness import database_manifest, simulated_environment

KIND = "DatabaseInstance"
KEY_ID = "AKIDHYGIENE"
SECRET_KEY = "sk-hygiene-8f2d1c77e0a94b35a6c1"
WRONG_KEY = "sk-wrong-0b7e44a1c9d2f6e3"


class LeakyClient(DatabaseClient):
    """A client whose library error message carries the password (as real libraries do)."""

    def update(self, resource: Any) -> None:
        raise RuntimeError(f"server rejected password {resource.password} for {SECRET_KEY}")


class LeakyConnector(DatabaseConnector):
    """Builds :class:`LeakyClient` objects for resources named ``leaky``."""

    def connect(self, resource: Any, config: Any) -> DatabaseClient:
        client = super().connect(resource, config)
        if resource.name == "leaky":
            return LeakyClient(self.cloud, client._credentials)
        return client


def _secret(env: Any, name: str, data: dict[str, str]) -> None:
    env.api.create({"apiVersion": "v1", "kind": "Secret",
                    "metadata": {"name": name, "namespace": "default"},
                    "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}})


def _config(env: Any, name: str, secret: str) -> None:
    env.api.create({"apiVersion": "lifecycle.dev/v1alpha1", "kind": "ProviderConfig",
                    "metadata": {"name": name},
                    "spec": {"credentials": {"secretRef": {"name": secret,
                                                           "namespace": "default"}}}})


def _with_config(name: str, config: str, **params: Any) -> dict[str, Any]:
    manifest = database_manifest(name, **params)
    manifest["spec"]["providerConfigRef"] = {"name": config}
    return manifest


@pytest.fixture
def world(caplog: pytest.LogCaptureFixture) -> Any:
    caplog.set_level(logging.DEBUG)
    cloud = SimCloud(seed=3, credentials={KEY_ID: SECRET_KEY}, error_rate=0.15,
                     throttle_rate=0.05, retry_after=2.0)
    env, _ = simulated_environment(cloud=cloud)
    env.reconcilers[KIND].connector = LeakyConnector(cloud)
    generated: list[str] = []
    reconciler = env.reconcilers[KIND]
    original = reconciler.password_factory

    def remember() -> str:
        generated.append(original())
        return generated[-1]

    reconciler.password_factory = remember
    _secret(env, "good-credentials", {"accessKeyId": KEY_ID, "secretAccessKey": SECRET_KEY})
    _secret(env, "bad-credentials", {"accessKeyId": KEY_ID, "secretAccessKey": WRONG_KEY})
    _config(env, "good", "good-credentials")
    _config(env, "bad", "bad-credentials")
    _config(env, "dangling", "no-such-secret")
    env.api.faults.add("replace_status", error=Conflict, probability=0.1)
    return env, cloud, generated


def _run(env: Any) -> None:
    for name in ("alpha", "beta", "leaky"):
        env.apply(_with_config(name, "good"))
    env.apply(_with_config("wrong-creds", "bad"))
    env.apply(_with_config("no-creds", "dangling"))
    env.apply(_with_config("no-config", "absent"))
    env.apply(_with_config("invalid", "good", version="9.6"))  # not offered: InvalidParameter
    env.advance(600)
    for name in ("alpha", "leaky"):
        env.apply(_with_config(name, "good", storage_gb=40))
    env.advance(600)
    for name in ("alpha", "beta", "wrong-creds", "no-creds", "no-config", "invalid"):
        env.delete(KIND, name)
    env.advance(600)


def _everything(env: Any, caplog: pytest.LogCaptureFixture, captured: Any) -> str:
    parts = [caplog.text]
    parts += [str(r.args) + r.getMessage() for r in caplog.records]
    parts += [json.dumps(e, default=str) for e in env.events()]
    parts += [str(step) for step in env.steps]
    for api_version, kind in (("db.lifecycle.dev/v1alpha1", KIND),
                              ("lifecycle.dev/v1alpha1", "ProviderConfig")):
        items, _ = env.api.list(api_version, kind)
        parts += [json.dumps(obj, default=str) for obj in items]
    parts += [captured.out, captured.err]
    return "\n".join(parts)


def test_no_secret_in_logs_events_conditions_or_errors(
        world: Any, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]) -> None:
    env, cloud, generated = world
    _run(env)
    # The run did exercise the paths that produce text.
    assert generated, "no password was generated"
    assert any(not c.ok for c in cloud.calls)
    reasons = {e["reason"] for e in env.events()}
    text = _everything(env, caplog, capsys.readouterr())
    assert "InvalidCredentials" in text and "CredentialsMissing" in text
    assert "ProviderConfigMissing" in text and "ProviderClientError" in text
    assert reasons
    secrets = [*generated, SECRET_KEY, WRONG_KEY]
    for secret in secrets:
        assert secret not in text, "a secret value appears in the captured output"
        assert base64.b64encode(secret.encode()).decode() not in text


def test_passwords_reach_the_instance_only_through_the_connection_secret(world: Any) -> None:
    env, cloud, generated = world
    env.apply(_with_config("alpha", "good"))
    env.advance(300)
    obj = env.get(KIND, "alpha")
    external = obj["metadata"]["annotations"]["lifecycle.dev/external-name"]
    password = env.secret("alpha-conn")["password"]
    assert password in generated
    assert cloud.password_of(external) == password
    # Credentials come from the referenced config's Secret: the wrong key is refused.
    env.apply(_with_config("refused", "bad"))
    env.advance(60)
    ready = env.condition(KIND, "refused", "Ready")
    # Never observed with these credentials: Ready is Unknown, never True.
    assert ready is not None and ready.status.value == "Unknown"
    synced = env.condition(KIND, "refused", "Synced")
    assert synced is not None and "InvalidCredentials" in (synced.reason + synced.message
                                                            + json.dumps(env.events("refused")))
    assert cloud.instances().get(f"refused-{env.get(KIND, 'refused')['metadata']['uid'][:8]}") \
        is None


def test_connection_secrets_are_owned_by_their_resource(world: Any) -> None:
    env, _, _ = world
    for name in ("alpha", "beta"):
        env.apply(_with_config(name, "good"))
    env.advance(300)
    for name in ("alpha", "beta"):
        obj = env.get(KIND, name)
        secret = env.api.get("v1", "Secret", "default", f"{name}-conn")
        owners = secret["metadata"].get("ownerReferences") or []
        assert [(o["kind"], o["name"], o["uid"], o.get("controller")) for o in owners] == [
            (KIND, name, obj["metadata"]["uid"], True)]


def test_unhandled_api_errors_carry_no_secret(world: Any) -> None:
    env, _, generated = world
    env.apply(_with_config("alpha", "good"))
    env.advance(300)
    reconciler = env.reconcilers[KIND]
    obj = env.get(KIND, "alpha")
    obj["metadata"]["annotations"]["lifecycle.dev/operation"] = "reconcile"
    env.api.faults.clear()
    env.api.replace(obj)
    env.api.faults.add("replace", error=Conflict)  # every engine write now conflicts
    with pytest.raises(UnhandledError) as caught:
        reconciler.reconcile("default", "alpha")
    message = str(caught.value) + repr(caught.value)
    for secret in [*generated, SECRET_KEY]:
        assert secret not in message


def test_the_search_catches_a_leak(world: Any, caplog: pytest.LogCaptureFixture,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    """Control: a client that puts the password in a handled error's message is found."""
    from lifecycle.core.errors import ExternalError

    env, cloud, generated = world

    class Careless(DatabaseClient):
        def update(self, resource: Any) -> None:
            raise ExternalError(f"rejected {resource.password}")

    class CarelessConnector(DatabaseConnector):
        def connect(self, resource: Any, config: Any) -> DatabaseClient:
            return Careless(self.cloud, super().connect(resource, config)._credentials)

    env.reconcilers[KIND].connector = CarelessConnector(cloud)
    env.apply(_with_config("alpha", "good"))
    env.advance(300)
    env.apply(_with_config("alpha", "good", storage_gb=40))
    env.advance(60)
    text = _everything(env, caplog, capsys.readouterr())
    assert any(password in text for password in generated)


class _Unstarted:
    """A list-watch source never started: the controller below is driven pass by pass."""

    def list(self) -> Any:
        raise AssertionError("not started")

    def watch(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("not started")

    def stop(self) -> None:
        return None


def test_the_operator_log_lines_carry_no_secret(
        world: Any, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]) -> None:
    """The same run with every pass going through the driver's controller and its log lines.

    The controller logs each pass (reconcile ID, result, reason), each backoff
    and handled error at info, and an unexpected exception with a traceback;
    one pass raises an exception whose message holds a generated password.
    """
    from lifecycle.driver.manager import Controller

    env, _, generated = world
    inner = env.reconcilers[KIND]
    outcome: dict[str, Any] = {}

    class Recorded:
        def reconcile(self, namespace: str | None, name: str) -> Any:
            outcome.clear()
            try:
                outcome["result"] = inner.reconcile(namespace, name)
            except Exception as exc:
                outcome["error"] = exc
                raise
            if name == "leaky" and generated and not outcome.get("raised"):
                outcome["raised"] = True
                raise RuntimeError(f"a bug while handling {generated[-1]}")
            return outcome["result"]

    controller = Controller("databaseinstance", Recorded(), _Unstarted(), workers=1)

    class Driven:
        def reconcile(self, namespace: str | None, name: str) -> Any:
            controller.process((namespace, name))
            if "error" in outcome:
                raise outcome["error"]
            return outcome["result"]

    env.reconcilers[KIND] = Driven()
    _run(env)
    logged = [r for r in caplog.records if r.name == "lifecycle.driver.manager"]
    # The driver's lines were produced: passes, backoffs or handled errors, and the bug.
    assert any(r.levelno == logging.DEBUG and hasattr(r, "reconcileID") for r in logged)
    assert any(r.levelno == logging.INFO for r in logged)
    bug = [r for r in logged if r.levelno == logging.ERROR]
    assert bug and "RuntimeError at " in bug[0].traceback  # type: ignore[attr-defined]
    text = _everything(env, caplog, capsys.readouterr())
    text += "\n".join(json.dumps(vars(r), default=str) for r in logged)
    for secret in [*generated, SECRET_KEY, WRONG_KEY]:
        assert secret not in text, "a secret value appears in the driver's log lines"
