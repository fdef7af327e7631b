"""The simulated cloud's API: its exceptions, its offers and limits, and the calls a client makes.

What a cloud SDK would give a client: the exceptions the API raises
(:class:`CloudError` and its kinds, never carrying a credential or a
password), what it offers (:data:`ENGINES`, :data:`SIZES`) within which bounds,
the rules it checks parameters by, and :class:`CloudApi`, the calls
:class:`~lifecycle.providers.simcloud.client.DatabaseClient` makes. The
in-memory cloud behind it is :mod:`lifecycle.providers.simcloud.cloud`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

__all__ = [
    "ENGINES", "MAX_STORAGE_GB", "MIN_PASSWORD_LENGTH", "MIN_STORAGE_GB", "OPERATIONS",
    "PARAMETER_KEYS", "SIZES", "STATES", "CloudAlreadyExists", "CloudApi", "CloudAuthError",
    "CloudBusy", "CloudError", "CloudInvalidParameter", "CloudNotFound", "CloudThrottled",
    "CloudUnavailable", "check_known", "check_operation", "check_password", "check_size",
    "check_storage", "check_version",
]


class CloudError(Exception):
    """Base class of every error the simulated cloud's API raises.

    ``code`` is a short machine-readable error code; ``message`` is
    human-readable. Neither ever contains credentials or passwords.
    """

    code: str = "InternalError"
    default_message: str = "the cloud failed to process the request"

    def __init__(self, message: str | None = None, *, code: str | None = None) -> None:
        text = message if message is not None else self.default_message
        super().__init__(text)
        self.message = text
        if code is not None:
            self.code = code

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


class CloudNotFound(CloudError):
    """The named instance does not exist."""

    code = "InstanceNotFound"
    default_message = "the instance does not exist"


class CloudAlreadyExists(CloudError):
    """An instance with that name already exists (and the client token differs)."""

    code = "InstanceAlreadyExists"
    default_message = "an instance with this name already exists"


class CloudThrottled(CloudError):
    """Too many requests; the caller should wait ``retry_after`` seconds."""

    code = "Throttling"
    default_message = "request rate exceeded"

    def __init__(
        self,
        message: str | None = None,
        *,
        retry_after: float = 1.0,
        code: str | None = None,
    ) -> None:
        super().__init__(message, code=code)
        self.retry_after = float(retry_after)


class CloudUnavailable(CloudError):
    """A transient server-side failure (a 5xx); retrying may succeed."""

    code = "ServiceUnavailable"
    default_message = "the service is temporarily unavailable"


class CloudBusy(CloudUnavailable):
    """The instance is in a state that does not allow the operation yet; retry later."""

    code = "InvalidInstanceState"
    default_message = "the instance is busy"


class CloudInvalidParameter(CloudError):
    """The request is invalid and will never succeed as sent."""

    code = "InvalidParameterValue"
    default_message = "a parameter is invalid"


class CloudAuthError(CloudError):
    """The credentials were missing or not accepted."""

    code = "AuthFailure"
    default_message = "the credentials were not accepted"


#: Engines the cloud offers, with their default version, port and accepted versions.
ENGINES: Mapping[str, Mapping[str, Any]] = {
    "postgres": {
        "default_version": "15",
        "port": 5432,
        "versions": frozenset({"12", "13", "14", "15", "16", "17"}),
    },
    "mysql": {
        "default_version": "8.0",
        "port": 3306,
        "versions": frozenset({"5.7", "8.0", "8.4"}),
    },
}
#: Instance sizes the cloud offers.
SIZES = frozenset({"small", "medium", "large"})
#: Bounds of ``storage_gb``, inclusive.
MIN_STORAGE_GB = 10
MAX_STORAGE_GB = 1000
#: Shortest password the cloud accepts.
MIN_PASSWORD_LENGTH = 8
#: API operations that are logged and can be targeted by :meth:`SimCloud.fail_next`.
OPERATIONS = frozenset({"create", "describe", "modify", "delete", "reset_password"})
#: Every instance state a description can report.
STATES = frozenset({"creating", "available", "modifying", "deleting", "failed"})

#: The parameter names an instance has.
PARAMETER_KEYS = frozenset({"engine", "storage_gb", "version", "size"})


def check_storage(value: Any) -> int:
    """Validate ``storage_gb``; raise :class:`CloudInvalidParameter` if it is unusable."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise CloudInvalidParameter("storage_gb must be an integer")
    if not MIN_STORAGE_GB <= value <= MAX_STORAGE_GB:
        raise CloudInvalidParameter(
            f"storage_gb must be between {MIN_STORAGE_GB} and {MAX_STORAGE_GB}, got {value}"
        )
    return value


def check_size(value: Any) -> str:
    """Validate ``size``."""
    if value not in SIZES:
        raise CloudInvalidParameter(
            f"size must be one of {', '.join(sorted(SIZES))}, got {value!r}"
        )
    return str(value)


def check_version(engine: str, value: Any) -> str:
    """Validate ``version`` for ``engine``."""
    if not isinstance(value, str):
        raise CloudInvalidParameter("version must be a string")
    if value not in ENGINES[engine]["versions"]:
        raise CloudInvalidParameter(f"version {value!r} is not offered for engine {engine}")
    return value


def check_password(password: str) -> None:
    """Validate a master password without ever echoing it."""
    if not isinstance(password, str) or len(password) < MIN_PASSWORD_LENGTH:
        raise CloudInvalidParameter(
            f"the password must be a string of at least {MIN_PASSWORD_LENGTH} characters"
        )


def check_known(params: Mapping[str, Any], allowed: frozenset[str]) -> None:
    """Reject parameter names the API does not know."""
    unknown = sorted(set(params) - allowed)
    if unknown:
        raise CloudInvalidParameter(f"unknown parameters: {', '.join(unknown)}")


def check_operation(operation: str) -> None:
    """Reject an operation the cloud does not have (``ValueError``, naming the known ones)."""
    if operation not in OPERATIONS:
        raise ValueError(
            f"unknown operation {operation!r}; expected one of {', '.join(sorted(OPERATIONS))}")



class CloudApi(Protocol):
    """The calls a database client makes on the cloud, each with a ``(key id, secret)`` pair.

    Every call raises a :class:`CloudError` when the cloud refuses it. The
    descriptions returned hold ``name``, ``state`` (one of :data:`STATES`),
    ``engine``, ``version``, ``storage_gb``, ``size``, ``endpoint``, ``port``,
    ``status_message`` and ``tags``; never a password.
    """

    def create_instance(
        self, credentials: tuple[str, str], name: str, params: Mapping[str, Any], *,
        password: str | None = None, client_token: str | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """Request a new instance; its description."""
        ...

    def describe_instance(self, credentials: tuple[str, str], name: str) -> dict[str, Any]:
        """The instance's description; :class:`CloudNotFound` when there is none."""
        ...

    def modify_instance(
        self, credentials: tuple[str, str], name: str, params: Mapping[str, Any], *,
        tags: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """Request a change of the instance's parameters (and tags); its description."""
        ...

    def delete_instance(self, credentials: tuple[str, str], name: str) -> bool:
        """Request deletion; whether the instance is gone already."""
        ...

    def snapshot(self) -> dict[str, Any]:
        """The cloud's whole state, to carry across a restart of what uses it."""
        ...

    def restore(self, state: Mapping[str, Any]) -> None:
        """Put the cloud back in a state :meth:`snapshot` returned."""
        ...
