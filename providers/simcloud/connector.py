"""The database kind's connector: a :class:`DatabaseClient` per provider config's credentials.

The connector holds the cloud's API (a :class:`~lifecycle.providers.simcloud.cloud.SimCloud`
for the bundled kind) and reads the access key pair from the ProviderConfig's
Secret; missing keys are a ``CredentialsMissing`` condition, never a traceback.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lifecycle.core.contract import ManagedResource, ProviderConfig
from lifecycle.core.errors import CredentialsError
from lifecycle.providers.simcloud.api import CloudApi
from lifecycle.providers.simcloud.client import DatabaseClient

__all__ = ["DatabaseConnector"]


class DatabaseConnector:
    """Builds :class:`DatabaseClient` objects from a provider config's credentials."""

    #: The credential keys read from the provider config's Secret.
    KEY_ID = "accessKeyId"
    SECRET = "secretAccessKey"

    def __init__(self, cloud: CloudApi) -> None:
        self.cloud = cloud

    def connect(self, resource: ManagedResource, config: ProviderConfig) -> DatabaseClient:
        """Return a client for ``resource``; raise :class:`CredentialsError` if keys are missing."""
        missing = [key for key in (self.KEY_ID, self.SECRET) if not config.credentials.get(key)]
        if missing:
            raise CredentialsError(
                f"provider config {config.name!r} credentials lack "
                + " and ".join(repr(key) for key in missing),
                reason="CredentialsMissing",
            )
        return DatabaseClient(
            self.cloud, (config.credentials[self.KEY_ID], config.credentials[self.SECRET])
        )

    def snapshot(self) -> dict[str, Any]:
        """The cloud's state (:meth:`CloudApi.snapshot`), to keep across restarts."""
        return self.cloud.snapshot()

    def restore(self, state: Mapping[str, Any]) -> None:
        """Put the cloud back in a state :meth:`snapshot` returned."""
        self.cloud.restore(state)
