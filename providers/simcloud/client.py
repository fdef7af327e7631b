"""The database kind's external client on the simulated cloud's API.

:class:`DatabaseParameters` is the kind's ``spec.forProvider``;
:class:`DatabaseClient` implements the external client contract of
:mod:`lifecycle.core.contract` over :class:`~lifecycle.providers.simcloud.api.CloudApi`,
translating the cloud's own exceptions into :mod:`lifecycle.core.errors` with
messages that never carry a credential or a password.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import attrs

from lifecycle.core.contract import ManagedResource
from lifecycle.core.errors import (
    CredentialsError,
    ExternalError,
    HandledError,
    TerminalError,
    Throttled,
)
from lifecycle.core.kind import spec_field
from lifecycle.core.ownership import NotOwnedError, mark_operator, mark_uid
from lifecycle.core.values import Creation, Observation, ProviderStatus
from lifecycle.providers.simcloud.api import (
    MAX_STORAGE_GB,
    MIN_STORAGE_GB,
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

__all__ = ["ADMIN_USER", "OWNER_TAG", "DatabaseClient", "DatabaseParameters"]


@attrs.frozen
class DatabaseParameters:
    """A database instance on the simulated cloud: its engine, storage, size and version.

    ``version`` is late-initialised: left unset, the cloud picks its default
    and the client reports it back through ``Observation.late_init``. The CRD
    declares the choices and bounds below, so the API server refuses a value
    the cloud would refuse; the cloud still checks them (an object stored
    under an older, looser CRD reaches the client as it is).
    """

    engine: Literal["postgres", "mysql"] = spec_field(
        default="postgres", validator=attrs.validators.instance_of(str), immutable=True,
        description="The database engine. It cannot be changed once the instance exists.")
    storage_gb: int = spec_field(
        default=20, validator=attrs.validators.instance_of(int), alias="storageGB",
        minimum=MIN_STORAGE_GB, maximum=MAX_STORAGE_GB,
        description=f"Allocated storage in GiB, from {MIN_STORAGE_GB} to {MAX_STORAGE_GB}; "
                    f"it can be changed in place.")
    size: Literal["small", "medium", "large"] = spec_field(
        default="small", validator=attrs.validators.instance_of(str),
        description="The instance size (CPU and memory).")
    version: str | None = spec_field(
        default=None,
        validator=attrs.validators.optional(attrs.validators.instance_of(str)),
        description="The engine version, for example 15 for postgres or 8.0 for mysql; "
                    "left unset, the cloud's default for the engine, written back here.",
    )

    @storage_gb.validator
    def _not_bool(self, attribute: attrs.Attribute, value: Any) -> None:
        """Reject ``True``/``False``, which ``instance_of(int)`` would accept."""
        if isinstance(value, bool):
            raise TypeError(f"'{attribute.name}' must be an int, not a bool")


#: The user name the cloud creates on every instance.
ADMIN_USER = "admin"
#: The tag holding the ownership mark of the object that manages an instance.
OWNER_TAG = "lifecycle.dev/owner"


def _parameters_dict(parameters: Any) -> dict[str, Any]:
    """The resource's parameters as a plain dict without unset (``None``) values."""
    if type(parameters) is DatabaseParameters:
        # Its validated fields hold plain values: what attrs.asdict gives, without its walk.
        data = {"engine": parameters.engine, "storage_gb": parameters.storage_gb,
                "size": parameters.size, "version": parameters.version}
    elif attrs.has(type(parameters)):
        data = attrs.asdict(parameters)
    elif isinstance(parameters, Mapping):
        data = dict(parameters)
    else:
        raise TypeError("parameters must be DatabaseParameters or a mapping")
    return {key: value for key, value in data.items() if value is not None}


#: The compared parameters, each with its key in ``spec.forProvider``.
_SPEC_KEYS = {"engine": "engine", "storage_gb": "storageGB", "size": "size",
              "version": "version"}


class DatabaseClient:
    """The external client of the database kind, over the cloud's API (a :class:`SimCloud`
    in this package)."""

    def __init__(self, cloud: CloudApi, credentials: tuple[str, str]) -> None:
        self._cloud = cloud
        self._credentials = credentials
        #: Set by :meth:`close`; a closed client refuses further calls.
        self.closed = False

    def __repr__(self) -> str:
        return f"DatabaseClient(key_id={self._credentials[0]!r}, closed={self.closed})"

    def observe(self, resource: ManagedResource) -> Observation:
        """Describe the instance and compare it with the resource's parameters."""
        self._check_open()
        try:
            desc = self._cloud.describe_instance(self._credentials, resource.external_name)
        except CloudNotFound:
            return Observation.absent()
        except CloudError as err:
            raise self._translate("describe", err, resource) from err
        return self._observation(desc, resource)

    @staticmethod
    def _observation(desc: Mapping[str, Any], resource: ManagedResource) -> Observation:
        """What an instance's description says, compared with the resource's parameters."""
        wanted = _parameters_dict(resource.parameters)
        state = desc["state"]
        if state == "failed":
            status = ProviderStatus.FAILED
        elif state in ("creating", "modifying", "deleting"):
            status = ProviderStatus.PENDING
        else:
            status = ProviderStatus.AVAILABLE
        # The fields that differ, by spec key, for the drift Event (never their values).
        drifted = [spec_key for key, spec_key in _SPEC_KEYS.items()
                   if key in wanted and desc[key] != wanted[key]]
        late_init = {} if "version" in wanted else {"version": desc["version"]}
        return Observation(
            exists=True,
            up_to_date=not drifted,
            drifted=drifted,
            status=status,
            message=desc["status_message"],
            late_init=late_init,
            connection={
                "endpoint": desc["endpoint"],
                "port": str(desc["port"]),
                "username": ADMIN_USER,
            },
            observed={
                "state": state,
                "version": desc["version"],
                "endpoint": desc["endpoint"],
            },
            owner=desc["tags"].get(OWNER_TAG, ""),
        )

    def create(self, resource: ManagedResource) -> Creation:
        """Request the instance; an existing instance of that name counts as success.

        The cloud answers with the instance's description: the creation carries
        it as an observation, so an instance available at once is Ready in the
        pass that created it (one still ``creating`` is waited for as usual).
        """
        self._check_open()
        desc = None
        try:
            desc = self._cloud.create_instance(
                self._credentials,
                resource.external_name,
                _parameters_dict(resource.parameters),
                password=resource.password,
                client_token=resource.idempotency_key or None,
                tags={OWNER_TAG: resource.owner_mark} if resource.owner_mark else None,
            )
        except CloudAlreadyExists:
            self._check_ours(resource)  # our earlier create, or someone else's instance
        except CloudError as err:
            raise self._translate("create", err, resource) from err
        return Creation(connection={"username": ADMIN_USER, "password": resource.password or ""},
                        observation=None if desc is None else self._observation(desc, resource))

    def update(self, resource: ManagedResource) -> Observation:
        """Request that the instance match the resource's parameters; the instance as the
        cloud's answer describes it (``modifying`` until the change completes)."""
        self._check_open()
        try:
            desc = self._cloud.modify_instance(
                self._credentials, resource.external_name, _parameters_dict(resource.parameters),
                tags={OWNER_TAG: resource.owner_mark} if resource.owner_mark else None,
            )
        except CloudError as err:
            raise self._translate("update", err, resource) from err
        return self._observation(desc, resource)

    def delete(self, resource: ManagedResource) -> Observation | None:
        """Request deletion; a missing instance counts as success. Absent when the cloud
        says the instance is gone already; None (observe later) while it is deleting."""
        self._check_open()
        try:
            gone = self._cloud.delete_instance(self._credentials, resource.external_name)
        except CloudNotFound:
            return Observation.absent()
        except CloudError as err:
            raise self._translate("delete", err, resource) from err
        return Observation.absent() if gone else None

    def close(self) -> None:
        """Release the client; idempotent."""
        self.closed = True

    def _check_ours(self, resource: ManagedResource) -> None:
        """Raise NotOwnedError unless the existing instance carries this resource's mark."""
        try:
            tags = self._cloud.describe_instance(self._credentials,
                                                 resource.external_name)["tags"]
        except CloudError as err:
            raise self._translate("create", err, resource) from err
        mark = tags.get(OWNER_TAG, "")
        if resource.owner_mark and not (mark and mark_uid(mark) == mark_uid(resource.owner_mark)
                                        and mark_operator(mark)
                                        == mark_operator(resource.owner_mark)):
            raise NotOwnedError(f"instance {resource.external_name!r} already exists and is "
                                "not this object's")

    def _check_open(self) -> None:
        """Refuse calls on a closed client."""
        if self.closed:
            raise RuntimeError("the database client is closed")

    def _translate(
        self, operation: str, err: CloudError, resource: ManagedResource
    ) -> HandledError:
        """Map a cloud exception onto the lifecycle error taxonomy, with a secret-free message."""
        secrets = [self._credentials[1], resource.password or ""]
        message = _redact(
            f"{operation} of instance {resource.external_name!r} failed: {err.code}: {err.message}",
            secrets,
        )
        if isinstance(err, CloudThrottled):
            return Throttled(message, retry_after=err.retry_after)
        if isinstance(err, CloudBusy):
            return ExternalError(message, reason="ProviderBusy")
        if isinstance(err, CloudUnavailable):
            return ExternalError(message, reason="ProviderUnavailable")
        if isinstance(err, CloudInvalidParameter):
            return TerminalError(message, reason="InvalidParameter")
        if isinstance(err, CloudAuthError):
            return CredentialsError(message, reason="InvalidCredentials")
        if isinstance(err, CloudNotFound):
            return ExternalError(message, reason="NotFound")
        return ExternalError(message, reason="ProviderError")


def _redact(text: str, secrets: list[str]) -> str:
    """Replace every occurrence of a secret in ``text`` (defence in depth)."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text
