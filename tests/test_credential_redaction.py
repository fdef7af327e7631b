"""Every admin credential value is redacted wherever the engine writes text (issue 28).

The attack: a ProviderConfig whose ``credentialKeys`` maps the username to the
password key. The provider then shows the password wherever it shows the
username ("connecting to ... as '<password>'"), and only the server's own
text was redacted: the admin password reached condition messages and Events.
The engine now redacts every value read from the credentials Secret, whatever
its key and whatever the provider, from every condition and Event message.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from lifecycle.core.errors import CredentialsError
from lifecycle.core.kind import PROVIDER_CONFIG_API, PROVIDER_CONFIG_KIND
from lifecycle.providers.simcloud import DatabaseConnector, SimCloud
from lifecycle.providers.simcloud.scenarios.harness import database_manifest, simulated_environment
from lifecycle.runtime.redaction import credential_values, redact, redact_status

KIND = "DatabaseInstance"
PASSWORD = "adm1n-Pa55word-7c41e0"
CA_LINE = "MIIBszCCAVmgAwIBAgIUXq4bsecretcertificatebody"


class UsernameShowingConnector(DatabaseConnector):
    """A provider that names its login in its messages, as the PostgreSQL provider does."""

    def connect(self, resource: Any, config: Any) -> Any:
        user = config.credentials.get("accessKeyId", "")
        raise CredentialsError(f"connecting to db.internal:5432 as {user!r}: the server "
                               f"rejected the credentials (CA {config.credentials.get('ca', '')})",
                               reason="InvalidCredentials")


def everything(env: Any) -> str:
    items, _ = env.api.list("db.lifecycle.dev/v1alpha1", KIND)
    return "\n".join([*(json.dumps(o["status"]) for o in items if "status" in o),
                      *(json.dumps(e) for e in env.events())])


def test_a_username_mapped_to_the_password_never_reaches_conditions_or_events() -> None:
    cloud = SimCloud(seed=4)
    env, _ = simulated_environment(cloud=cloud)
    env.reconcilers[KIND].connector = UsernameShowingConnector(cloud)
    pem = f"-----BEGIN CERTIFICATE-----\n{CA_LINE}\n-----END CERTIFICATE-----\n"
    # The username key holds the password: what credentialKeys {username: password} does.
    env.provider_config(credentials={"accessKeyId": PASSWORD, "secretAccessKey": PASSWORD,
                                     "ca": pem})
    env.apply(database_manifest("db"))
    env.advance(120)
    text = everything(env)
    assert "InvalidCredentials" in text and "***" in text  # the message was written
    assert "db.internal:5432" in text  # with everything but the credentials
    for value in (PASSWORD, CA_LINE, base64.b64encode(PASSWORD.encode()).decode()):
        assert value not in text
    events = [e for e in env.events() if e["reason"] == "InvalidCredentials"]
    assert events and all(PASSWORD not in e["message"] for e in events)


def test_redaction_rules() -> None:
    values = credential_values({"username": "admin", "password": "s3cr3t-admin",
                                "port": "5432", "x": "abc", "n": ""})
    assert values == ("s3cr3t-admin", "admin", "5432")  # longest first, short ones kept
    assert redact("login s3cr3t-admin failed for admin", values) == "login *** failed for ***"
    pem = "-----BEGIN KEY-----\nAAAAsecretline\n-----END KEY-----"
    assert redact("bad key line AAAAsecretline", (pem,)) == "bad key line ***"
    status = {"conditions": [{"type": "Ready", "message": "as s3cr3t-admin"}, "junk"],
              "state": "s3cr3t-admin"}
    cleaned = redact_status(status, values)
    assert cleaned["conditions"][0]["message"] == "as ***" and cleaned["conditions"][1] == "junk"
    assert redact_status(status, ()) == status


@pytest.mark.usefixtures("server")
def test_postgres_credential_keys_mapping_the_username_to_the_password(
        server: Any, postgres_admins: Any) -> None:
    """The issue's case on a real server: ``credentialKeys: {username: password}``."""
    from postgres_fixtures import admin_environment

    from lifecycle.providers.postgres.scenarios.testing import manifest

    admin = postgres_admins["createrole"]
    env = admin_environment(server, admin)
    config = env.api.get(PROVIDER_CONFIG_API, PROVIDER_CONFIG_KIND, None, "default")
    config["spec"] = {**config["spec"], "credentialKeys": {"username": "password"}}
    env.api.replace(config)
    env.apply(manifest("Role", "app"))
    env.advance(60)
    items, _ = env.api.list("postgresql.lifecycle.dev/v1alpha1", "Role")
    text = "\n".join([*(json.dumps(o.get("status")) for o in items),
                      *(json.dumps(e) for e in env.events())])
    assert "InvalidCredentials" in text or "ConnectionRejected" in text, text[:2000]
    assert admin.password not in text
