"""The simulated cloud provider: the database kind's client and connector, and the cloud.

- :mod:`~lifecycle.providers.simcloud.api`: the cloud's API as a client sees it, its
  exceptions, offers and limits.
- :mod:`~lifecycle.providers.simcloud.client`: :class:`DatabaseParameters` and
  :class:`DatabaseClient`, the external client contract over that API.
- :mod:`~lifecycle.providers.simcloud.connector`: :class:`DatabaseConnector`, a client
  per ProviderConfig's credentials.
- :mod:`~lifecycle.providers.simcloud.cloud`: :class:`SimCloud`, the in-memory cloud
  with asynchronous operations and fault injection.
- :mod:`~lifecycle.providers.simcloud.scenarios`: demos, harness builders and the
  crash explorer's targets, found through entry points.

The names of the first four modules are importable from here.
"""

from lifecycle.providers.simcloud.api import (
    ENGINES,
    MAX_STORAGE_GB,
    MIN_PASSWORD_LENGTH,
    MIN_STORAGE_GB,
    OPERATIONS,
    SIZES,
    STATES,
    CloudAlreadyExists,
    CloudApi,
    CloudAuthError,
    CloudBusy,
    CloudError,
    CloudInvalidParameter,
    CloudNotFound,
    CloudThrottled,
    CloudUnavailable,
)
from lifecycle.providers.simcloud.client import (
    ADMIN_USER,
    OWNER_TAG,
    DatabaseClient,
    DatabaseParameters,
)
from lifecycle.providers.simcloud.cloud import CloudCall, SimCloud
from lifecycle.providers.simcloud.connector import DatabaseConnector

__all__ = [
    "ADMIN_USER", "ENGINES", "MAX_STORAGE_GB", "MIN_PASSWORD_LENGTH", "MIN_STORAGE_GB",
    "OPERATIONS", "OWNER_TAG", "SIZES", "STATES", "CloudAlreadyExists", "CloudApi",
    "CloudAuthError", "CloudBusy", "CloudCall", "CloudError", "CloudInvalidParameter",
    "CloudNotFound", "CloudThrottled", "CloudUnavailable", "DatabaseClient", "DatabaseConnector",
    "DatabaseParameters", "SimCloud",
]
