"""A provider's refusal is asked for before the engine takes ownership of an object.

Against the session's real PostgreSQL server, once with a superuser admin and once with a
CREATEROLE CREATEDB admin (the ``env`` fixture). A Role or Database the ProviderConfig's
tenancy policy refuses ends its first pass with the terminal ``PolicyDenied`` condition
only: no finalizer, no external-name annotation, no connection Secret, nothing on the
server, and deleting it removes it at once. A server that cannot be reached leaves the
object unclaimed too, retried; an object the policy lets through converges with exactly
the API calls it made before the check existed, and one more admin session on its first
pass only.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from postgres_helpers import query

from lifecycle.core.contract import ManagedResource, ProviderConfig, admission
from lifecycle.core.kind import EXTERNAL_NAME, FINALIZER
from lifecycle.core.values import ResultKind
from lifecycle.kube.errors import NotFound
from lifecycle.providers.postgres import config as pgconfig
from lifecycle.providers.postgres.scenarios.testing import PostgresServer, manifest
from lifecycle.testing import Environment

pytestmark = pytest.mark.postgres

NS = "team-a"


@pytest.fixture(autouse=True)
def _namespace(request: pytest.FixtureRequest) -> None:
    if "env" in request.fixturenames:
        request.getfixturevalue("env").namespace(NS)


class CountingAPI:
    """The reconciler's API with every public call counted by method name."""

    def __init__(self, api: Any) -> None:
        self._api = api
        self.calls: Counter[str] = Counter()

    def __getattr__(self, name: str) -> Any:
        found = getattr(self._api, name)
        if name.startswith("_") or not callable(found):
            return found

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            return found(*args, **kwargs)

        return counted


class WithoutAdmit:
    """A connector with only ``connect``: the engine as it was before it asked first."""

    def __init__(self, connector: Any) -> None:
        self.connector = connector

    def connect(self, resource: ManagedResource, config: ProviderConfig) -> Any:
        return self.connector.connect(resource, config)


def sessions(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """A list that gets one entry per admin session opened from now on."""
    opened: list[str] = []
    original = pgconfig.Session.open.__func__  # type: ignore[attr-defined]

    def counted(cls: Any, server: Any) -> Any:
        opened.append(server.config_name)
        return original(cls, server)

    monkeypatch.setattr(pgconfig.Session, "open", classmethod(counted))
    return opened


def unclaimed(env: Environment, kind: str, name: str) -> dict[str, Any]:
    """Assert the object holds nothing of the engine's; return it."""
    obj = env.get(kind, name, NS)
    meta = obj["metadata"]
    assert FINALIZER not in (meta.get("finalizers") or []), meta
    assert EXTERNAL_NAME not in (meta.get("annotations") or {}), meta
    with pytest.raises(NotFound):
        env.api.get("v1", "Secret", NS, f"{name}-conn")
    return obj


def on_server(server: PostgresServer, name: str) -> bool:
    return bool(query(server, "SELECT 1 FROM pg_roles WHERE rolname = %s UNION ALL "
                              "SELECT 1 FROM pg_database WHERE datname = %s", name, name))


REFUSED: dict[str, tuple[dict[str, Any], str]] = {
    "Role": ({"createrole": True, "login": True}, "allowedRoleAttributes"),
    "Database": ({"owner": "pg_monitor"}, "predefinedRoles"),
}


@pytest.mark.parametrize("kind", sorted(REFUSED))
def test_a_refused_object_is_never_taken_over(
        env: Environment, server: PostgresServer, kind: str) -> None:
    params, rule = REFUSED[kind]
    env.apply(manifest(kind, "refused", namespace=NS, **params))
    step = env.reconcile(kind, "refused", NS)

    assert step.result is not None and step.result.reason == "TerminalError", step
    obj = unclaimed(env, kind, "refused")
    failed = env.condition(kind, "refused", "Failed", NS)
    assert failed is not None and failed.reason == "PolicyDenied", failed
    assert f"(rule {rule})" in failed.message
    synced = env.condition(kind, "refused", "Synced", NS)
    assert synced is not None and synced.status.value == "False" and synced.message
    env.run_until_idle()
    assert (kind, NS, "refused") not in env.pending()  # terminal: not retried
    default_name = f"refused-{obj['metadata']['uid'][:8]}"
    assert not on_server(server, default_name)
    # Nothing holds it: deleting it removes it at once, without another reconcile.
    env.delete(kind, "refused", NS)
    assert not env.exists(kind, "refused", NS)
    # Its name was given back: another object may take it.
    assert env.reconcilers[kind].names.claim(  # type: ignore[attr-defined]
        {"metadata": {"name": "other", "namespace": NS, "uid": "u-other"}},
        default_name) is None


def test_an_unreachable_server_leaves_the_object_unclaimed_and_retried(
        env: Environment, server: PostgresServer) -> None:
    found = env.api.get("lifecycle.dev/v1alpha1", "ProviderConfig", None, "default")
    down = {**found["spec"], "port": server.port + 1}
    env.provider_config("down", credentials=env.secret("default-credentials", "default"),
                        spec={k: v for k, v in down.items() if k != "credentials"})
    body = manifest("Role", "later", namespace=NS)
    body["spec"]["providerConfigRef"] = {"name": "down"}
    env.apply(body)
    step = env.reconcile("Role", "later", NS)

    assert step.result is not None and step.result.kind is ResultKind.BACKOFF, step
    unclaimed(env, "Role", "later")
    synced = env.condition("Role", "later", "Synced", NS)
    assert synced is not None and synced.status.value == "False", synced
    assert ("Role", NS, "later") in env.pending()  # retried
    # Pointed at the server, it converges.
    body["spec"]["providerConfigRef"] = {"name": "default"}
    env.apply(body)
    env.run_until_idle()
    assert env.state("Role", "later", NS) == "ready"
    assert FINALIZER in env.get("Role", "later", NS)["metadata"]["finalizers"]


def converge(env: Environment, kind: str, name: str, params: dict[str, Any],
             counting: CountingAPI, opened: list[str]) -> tuple[Counter[str], list[int]]:
    """Apply and run one object to Ready: its API calls, and the sessions of each pass."""
    counting.calls.clear()
    env.apply(manifest(kind, name, namespace=NS, **params))
    per_pass: list[int] = []
    while (kind, NS, name) in env.pending():
        before = len(opened)
        env.reconcile(kind, name, NS)
        per_pass.append(len(opened) - before)
        if env.state(kind, name, NS) == "ready":
            break
    assert env.state(kind, name, NS) == "ready"
    return Counter(counting.calls), per_pass


@pytest.mark.parametrize("kind", ["Role", "Database"])
def test_an_allowed_object_converges_with_the_same_api_calls(
        env: Environment, monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    reconciler: Any = env.reconcilers[kind]
    counting = CountingAPI(reconciler.api)
    reconciler.api = counting
    opened = sessions(monkeypatch)
    connector = reconciler.connector
    assert admission(connector) is not None

    with_admit, sessions_with = converge(env, kind, "asked", {}, counting, opened)
    reconciler.connector = WithoutAdmit(connector)
    assert admission(reconciler.connector) is None
    without, sessions_without = converge(env, kind, "not-asked", {}, counting, opened)

    assert with_admit == without, (with_admit, without)
    assert len(sessions_with) == len(sessions_without)
    assert sessions_with[0] == sessions_without[0] + 1  # the check's session, first pass
    assert sessions_with[1:] == sessions_without[1:]


def test_an_owned_object_is_not_asked_again(
        env: Environment, monkeypatch: pytest.MonkeyPatch) -> None:
    env.apply(manifest("Role", "owned", namespace=NS))
    env.run_until_idle()
    assert env.state("Role", "owned", NS) == "ready"
    reconciler: Any = env.reconcilers["Role"]
    asked: list[str] = []
    admit: Callable[..., None] = reconciler.connector.admit
    monkeypatch.setattr(reconciler.connector, "admit",
                        lambda resource, config: asked.append(resource.name) or admit(
                            resource, config), raising=False)
    env.enqueue("Role", "owned", NS)
    env.reconcile("Role", "owned", NS)
    assert asked == []


def test_a_refused_change_of_an_owned_role_leaves_it_ready(
        env: Environment, server: PostgresServer) -> None:
    """Owned already, the Role meets the policy in its client: the update is refused
    (Synced False naming the rule), and Ready stays True while the role is there."""
    env.apply(manifest("Role", "grown", namespace=NS, login=True))
    env.run_until_idle()
    assert env.state("Role", "grown", NS) == "ready"
    role = env.get("Role", "grown", NS)["metadata"]["annotations"][EXTERNAL_NAME]

    env.apply(manifest("Role", "grown", namespace=NS, login=True, createrole=True))
    env.run_until_idle()

    failed = env.condition("Role", "grown", "Failed", NS)
    assert failed is not None and failed.reason == "PolicyDenied", failed
    synced = env.condition("Role", "grown", "Synced", NS)
    assert synced is not None and synced.status.value == "False"
    assert "(rule allowedRoleAttributes)" in synced.message
    ready = env.condition("Role", "grown", "Ready", NS)
    assert ready is not None and ready.status.value == "True", ready
    assert query(server, "SELECT rolcreaterole FROM pg_roles WHERE rolname = %s", role) == [
        (False,)]
