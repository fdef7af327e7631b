"""An in-memory simulated cloud with asynchronous operations, and a database kind's client.

:class:`SimCloud` stands in for a real cloud API in tests and demos. Its
database instances move through ``creating``, ``modifying`` and ``deleting``
states that complete only after a number of ``describe_instance`` calls (or
after some clock time), it checks credentials, validates parameters, and can
inject faults: random throttling and 5xx errors from a seeded generator,
targeted failures of the next calls of an operation, latency, and
out-of-band changes (drift, failure, disappearance). Every API call is logged
so tests can assert, for example, that an instance was never created twice.

:class:`DatabaseClient` and :class:`DatabaseConnector` implement the external
client contract of :mod:`lifecycle.runtime.contract` on top of it, translating the
cloud's own exceptions into :mod:`lifecycle.core.errors`.
"""

from __future__ import annotations

import collections
import copy
import random
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Literal

import attrs

from lifecycle.core.errors import (
    CredentialsError,
    ExternalError,
    HandledError,
    TerminalError,
    Throttled,
)
from lifecycle.core.kind import spec_field
from lifecycle.core.ownership import NotOwnedError, mark_uid
from lifecycle.core.values import Creation, Observation, ProviderStatus
from lifecycle.runtime.contract import ManagedResource, ProviderConfig
from lifecycle.testing.history import DEFAULT_LIMIT, History

# --------------------------------------------------------------------------
# The cloud's own exceptions (what a cloud SDK would raise)
# --------------------------------------------------------------------------


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


# --------------------------------------------------------------------------
# The simulated cloud
# --------------------------------------------------------------------------

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

_PARAMETER_KEYS = frozenset({"engine", "storage_gb", "version", "size"})
_MODIFIABLE_KEYS = frozenset({"storage_gb", "version", "size"})


@attrs.frozen
class CloudCall:
    """One logged API call: the operation, the instance name and how it ended."""

    operation: str
    name: str
    ok: bool
    error_code: str | None = None


@attrs.define
class _Pending:
    """An asynchronous operation in progress on one instance."""

    operation: str
    polls_left: int
    started: float
    seconds: float | None
    changes: dict[str, Any] = attrs.field(factory=dict)


@attrs.define
class _Instance:
    """The cloud's internal record of one database instance."""

    name: str
    engine: str
    version: str
    storage_gb: int
    size: str
    state: str
    status_message: str = ""
    password: str | None = attrs.field(default=None, repr=False)
    client_token: str | None = None
    pending: _Pending | None = None
    tags: dict[str, str] = attrs.field(factory=dict)

    def describe(self) -> dict[str, Any]:
        """The public description the API returns (never includes the password)."""
        return {
            "name": self.name,
            "state": self.state,
            "engine": self.engine,
            "version": self.version,
            "storage_gb": self.storage_gb,
            "size": self.size,
            "endpoint": f"{self.name}.db.simcloud.internal",
            "port": ENGINES[self.engine]["port"],
            "status_message": self.status_message,
            "tags": dict(self.tags),
        }


def _check_storage(value: Any) -> int:
    """Validate ``storage_gb``; raise :class:`CloudInvalidParameter` if it is unusable."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise CloudInvalidParameter("storage_gb must be an integer")
    if not MIN_STORAGE_GB <= value <= MAX_STORAGE_GB:
        raise CloudInvalidParameter(
            f"storage_gb must be between {MIN_STORAGE_GB} and {MAX_STORAGE_GB}, got {value}"
        )
    return value


def _check_size(value: Any) -> str:
    """Validate ``size``."""
    if value not in SIZES:
        raise CloudInvalidParameter(
            f"size must be one of {', '.join(sorted(SIZES))}, got {value!r}"
        )
    return str(value)


def _check_version(engine: str, value: Any) -> str:
    """Validate ``version`` for ``engine``."""
    if not isinstance(value, str):
        raise CloudInvalidParameter("version must be a string")
    if value not in ENGINES[engine]["versions"]:
        raise CloudInvalidParameter(f"version {value!r} is not offered for engine {engine}")
    return value


def _check_password(password: str) -> None:
    """Validate a master password without ever echoing it."""
    if not isinstance(password, str) or len(password) < MIN_PASSWORD_LENGTH:
        raise CloudInvalidParameter(
            f"the password must be a string of at least {MIN_PASSWORD_LENGTH} characters"
        )


def _unknown_keys(params: Mapping[str, Any], allowed: frozenset[str]) -> None:
    """Reject parameter names the API does not know."""
    unknown = sorted(set(params) - allowed)
    if unknown:
        raise CloudInvalidParameter(f"unknown parameters: {', '.join(unknown)}")


class SimCloud:
    """A deterministic, thread-safe, in-memory cloud offering database instances.

    Asynchronous operations complete after a number of ``describe_instance``
    calls on the instance (``create_polls``, ``modify_polls``,
    ``delete_polls``; the describe that reaches the count already shows the
    result), or, when ``create_seconds``/``modify_seconds``/``delete_seconds``
    is set, once that much ``clock`` time has passed since the request
    (evaluated lazily whenever the instance is touched). A count or duration
    of zero completes the operation within the request itself.

    Fault knobs: each API call first sleeps ``latency`` seconds outside the
    lock, then draws two numbers from ``random.Random(seed)`` (always two, so
    the outcome sequence depends only on the seed and the call order), raising
    :class:`CloudThrottled` with probability ``throttle_rate`` or else
    :class:`CloudUnavailable` with probability ``error_rate``. Targeted
    failures queued with :meth:`fail_next` are raised before those, and
    credentials are checked after targeted failures and before random ones.
    No fault ever happens after an operation has changed anything.

    ``credentials`` maps accepted access key ids to their secrets; ``None``
    accepts any non-empty pair. ``call_log`` is how many of the newest calls
    :attr:`calls` keeps (``None``: all of them); :meth:`count` counts every
    call, kept or not.
    """

    def __init__(
        self,
        *,
        seed: int = 0,
        create_polls: int = 2,
        modify_polls: int = 1,
        delete_polls: int = 1,
        create_seconds: float | None = None,
        modify_seconds: float | None = None,
        delete_seconds: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        error_rate: float = 0.0,
        throttle_rate: float = 0.0,
        retry_after: float = 1.0,
        latency: float = 0.0,
        credentials: Mapping[str, str] | None = None,
        call_log: int | None = DEFAULT_LIMIT,
    ) -> None:
        for label, polls in (
            ("create_polls", create_polls),
            ("modify_polls", modify_polls),
            ("delete_polls", delete_polls),
        ):
            if polls < 0:
                raise ValueError(f"{label} must not be negative")
        self._lock = threading.RLock()
        self._random = random.Random(seed)
        self._clock = clock
        self._sleep = sleep
        self._polls = {"create": create_polls, "modify": modify_polls, "delete": delete_polls}
        self._seconds = {
            "create": create_seconds,
            "modify": modify_seconds,
            "delete": delete_seconds,
        }
        self._credentials = dict(credentials) if credentials is not None else None
        self._instances: dict[str, _Instance] = {}
        self._creations: dict[str, int] = {}
        self._targeted: dict[str, list[CloudError]] = {op: [] for op in OPERATIONS}
        self.error_rate = 0.0
        self.throttle_rate = 0.0
        self.retry_after = 1.0
        self.latency = 0.0
        self.set_faults(
            error_rate=error_rate,
            throttle_rate=throttle_rate,
            retry_after=retry_after,
            latency=latency,
        )
        #: The newest API calls made (``call_log`` of them), oldest first.
        self.calls: History[CloudCall] = History(call_log)
        self._counts: collections.Counter[tuple[str, str, bool]] = collections.Counter()

    def __repr__(self) -> str:
        return f"SimCloud(instances={len(self._instances)}, calls={len(self.calls)})"

    # -- API ---------------------------------------------------------------

    def create_instance(
        self,
        credentials: tuple[str, str],
        name: str,
        params: Mapping[str, Any],
        *,
        password: str | None = None,
        client_token: str | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """Request a new instance and return its description (usually ``creating``).

        ``tags`` are stored with the instance in the same call.

        Creating a name that exists returns the existing instance when
        ``client_token`` matches the token of its creation, and raises
        :class:`CloudAlreadyExists` otherwise. ``engine`` and ``storage_gb``
        are required; ``version`` defaults per engine, ``size`` to ``small``.
        """

        def run() -> dict[str, Any]:
            existing = self._live(name)
            if existing is not None:
                if client_token is not None and existing.client_token == client_token:
                    return existing.describe()
                raise CloudAlreadyExists(f"an instance named {name!r} already exists")
            _unknown_keys(params, _PARAMETER_KEYS)
            engine = params.get("engine")
            if engine not in ENGINES:
                raise CloudInvalidParameter(
                    f"engine must be one of {', '.join(sorted(ENGINES))}, got {engine!r}"
                )
            if "storage_gb" not in params:
                raise CloudInvalidParameter("storage_gb is required")
            storage_gb = _check_storage(params["storage_gb"])
            size = _check_size(params.get("size", "small"))
            version = params.get("version")
            if version is None:
                version = ENGINES[engine]["default_version"]
            version = _check_version(engine, version)
            if password is not None:
                _check_password(password)
            instance = _Instance(
                name=name,
                engine=engine,
                version=version,
                storage_gb=storage_gb,
                size=size,
                state="creating",
                status_message="creating the instance",
                password=password,
                client_token=client_token,
                tags=dict(tags or {}),
            )
            self._instances[name] = instance
            self._creations[name] = self._creations.get(name, 0) + 1
            self._begin(instance, "create")
            return instance.describe()

        return self._call("create", credentials, name, run)

    def describe_instance(self, credentials: tuple[str, str], name: str) -> dict[str, Any]:
        """Return the instance's description; each call counts as one poll of pending work."""

        def run() -> dict[str, Any]:
            instance = self._live(name)
            if instance is None:
                raise CloudNotFound(f"instance {name!r} does not exist")
            if instance.pending is not None and instance.pending.seconds is None:
                instance.pending.polls_left -= 1
                if instance.pending.polls_left <= 0:
                    self._complete(instance)
                    if name not in self._instances:
                        raise CloudNotFound(f"instance {name!r} does not exist")
            return instance.describe()

        return self._call("describe", credentials, name, run)

    def modify_instance(
        self, credentials: tuple[str, str], name: str, params: Mapping[str, Any],
        *, tags: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """Request a change of ``storage_gb``, ``size`` or ``version``; ``tags`` are set
        at once (other tags kept) once the request is accepted.

        The instance shows ``modifying`` until the change completes, then the
        new values. A request that changes nothing returns the description
        unchanged. Parameters are validated first (changing ``engine`` is
        invalid); then an instance that is not ``available`` raises
        :class:`CloudBusy`.
        """

        def run() -> dict[str, Any]:
            instance = self._live(name)
            if instance is None:
                raise CloudNotFound(f"instance {name!r} does not exist")
            _unknown_keys(params, _PARAMETER_KEYS)
            if "engine" in params and params["engine"] != instance.engine:
                raise CloudInvalidParameter("the engine of an instance cannot be changed")
            changes: dict[str, Any] = {}
            if params.get("storage_gb") is not None:
                changes["storage_gb"] = _check_storage(params["storage_gb"])
            if params.get("size") is not None:
                changes["size"] = _check_size(params["size"])
            if params.get("version") is not None:
                changes["version"] = _check_version(instance.engine, params["version"])
            if instance.state != "available":
                raise CloudBusy(f"instance {name!r} is {instance.state}; retry later")
            instance.tags.update(tags or {})
            changes = {k: v for k, v in changes.items() if getattr(instance, k) != v}
            if not changes:
                return instance.describe()
            instance.state = "modifying"
            instance.status_message = "applying changes: " + ", ".join(sorted(changes))
            self._begin(instance, "modify", changes)
            return instance.describe()

        return self._call("modify", credentials, name, run)

    def delete_instance(self, credentials: tuple[str, str], name: str) -> bool:
        """Request deletion; the instance shows ``deleting`` until it is gone. Returns
        whether it is gone already (a deletion that takes no time).

        Deleting an instance that is already being deleted is accepted; a
        missing instance raises :class:`CloudNotFound`.
        """

        def run() -> bool:
            instance = self._live(name)
            if instance is None:
                raise CloudNotFound(f"instance {name!r} does not exist")
            if instance.state != "deleting":
                instance.state = "deleting"
                instance.status_message = "deleting the instance"
                self._begin(instance, "delete")
            return name not in self._instances

        return bool(self._call("delete", credentials, name, run))

    def reset_password(self, credentials: tuple[str, str], name: str, password: str) -> None:
        """Set a new master password on an instance that is not being created or deleted."""

        def run() -> None:
            instance = self._live(name)
            if instance is None:
                raise CloudNotFound(f"instance {name!r} does not exist")
            if instance.state in ("creating", "deleting"):
                raise CloudBusy(f"instance {name!r} is {instance.state}; retry later")
            _check_password(password)
            instance.password = password

        self._call("reset_password", credentials, name, run)

    # -- test and operations hooks (no credentials, not logged) ---------------

    def fail_instance(self, name: str, message: str) -> None:
        """Put an instance into the provider-side ``failed`` state, abandoning pending work."""
        with self._lock:
            instance = self._require(name)
            instance.state = "failed"
            instance.status_message = message
            instance.pending = None

    def recover_instance(self, name: str) -> None:
        """Bring an instance back to ``available``, abandoning pending work."""
        with self._lock:
            instance = self._require(name)
            instance.state = "available"
            instance.status_message = ""
            instance.pending = None

    def drift(self, name: str, **params: Any) -> None:
        """Change an instance's parameters out of band, without validation or state change."""
        with self._lock:
            instance = self._require(name)
            unknown = sorted(set(params) - _PARAMETER_KEYS)
            if unknown:
                raise ValueError(f"unknown instance fields: {', '.join(unknown)}")
            for key, value in params.items():
                setattr(instance, key, value)

    def remove_instance(self, name: str) -> None:
        """Make an instance vanish out of band, as if someone deleted it elsewhere."""
        with self._lock:
            self._require(name)
            del self._instances[name]

    def instances(self) -> dict[str, dict[str, Any]]:
        """A snapshot of every instance's description (does not count as a poll)."""
        with self._lock:
            for name in list(self._instances):
                self._live(name)
            return {name: inst.describe() for name, inst in self._instances.items()}

    def password_of(self, name: str) -> str | None:
        """The instance's current master password (for tests only)."""
        with self._lock:
            return self._require(name).password

    def set_faults(
        self,
        *,
        error_rate: float | None = None,
        throttle_rate: float | None = None,
        retry_after: float | None = None,
        latency: float | None = None,
    ) -> None:
        """Change the random fault knobs; arguments left as ``None`` keep their value."""
        with self._lock:
            if error_rate is not None:
                self.error_rate = _rate("error_rate", error_rate)
            if throttle_rate is not None:
                self.throttle_rate = _rate("throttle_rate", throttle_rate)
            if retry_after is not None:
                if retry_after < 0:
                    raise ValueError("retry_after must not be negative")
                self.retry_after = float(retry_after)
            if latency is not None:
                if latency < 0:
                    raise ValueError("latency must not be negative")
                self.latency = float(latency)

    def fail_next(self, operation: str, error: CloudError, times: int = 1) -> None:
        """Make the next ``times`` calls of ``operation`` raise (a copy of) ``error``."""
        if operation not in OPERATIONS:
            raise ValueError(
                f"unknown operation {operation!r}; expected one of {', '.join(sorted(OPERATIONS))}"
            )
        if not isinstance(error, CloudError):
            raise TypeError("error must be a CloudError")
        with self._lock:
            self._targeted[operation].extend(error for _ in range(times))

    def count(self, operation: str, name: str | None = None, ok: bool | None = None) -> int:
        """How many logged calls match ``operation`` and, when given, ``name`` and ``ok``."""
        with self._lock:
            return sum(
                number
                for (op, called, succeeded), number in self._counts.items()
                if op == operation
                and (name is None or called == name)
                and (ok is None or succeeded == ok)
            )

    def creations(self, name: str) -> int:
        """How many times an instance called ``name`` was actually materialised."""
        with self._lock:
            return self._creations.get(name, 0)

    # -- persistence ---------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """The instances (passwords and pending operations included) and creation counts.

        A JSON-serialisable document for :meth:`restore`. Pending work that
        completes after some clock time records how long it has run. Fault
        knobs, queued failures and the call log are not part of it.
        """
        with self._lock:
            now = self._clock()
            instances = []
            for inst in self._instances.values():
                doc = attrs.asdict(inst, recurse=False)
                pending = inst.pending
                if pending is not None:
                    doc["pending"] = {
                        "operation": pending.operation,
                        "polls_left": pending.polls_left,
                        # only clock-driven work needs it; 0 keeps poll-driven snapshots stable
                        "elapsed": 0.0 if pending.seconds is None else now - pending.started,
                        "seconds": pending.seconds,
                        "changes": dict(pending.changes),
                    }
                instances.append(doc)
            return {"instances": instances, "creations": dict(self._creations)}

    def restore(self, state: Mapping[str, Any]) -> None:
        """Replace every instance and creation count by a :meth:`snapshot`'s.

        Raises :class:`ValueError` when ``state`` is not such a document.
        """
        try:
            restored: dict[str, _Instance] = {}
            for doc in state["instances"]:
                fields = dict(doc)
                pending = fields.pop("pending", None)
                inst = _Instance(**fields)
                if pending is not None:
                    inst.pending = _Pending(
                        operation=str(pending["operation"]),
                        polls_left=int(pending["polls_left"]),
                        started=self._clock() - float(pending["elapsed"]),
                        seconds=None if pending["seconds"] is None else float(pending["seconds"]),
                        changes=dict(pending["changes"]),
                    )
                restored[inst.name] = inst
            creations = {str(k): int(v) for k, v in dict(state["creations"]).items()}
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ValueError(
                f"not a simulated cloud snapshot: {type(exc).__name__}: {exc}"
            ) from None
        with self._lock:
            self._instances = restored
            self._creations = creations

    # -- internals -----------------------------------------------------------

    def _call(
        self,
        operation: str,
        credentials: tuple[str, str],
        name: str,
        run: Callable[[], Any],
    ) -> Any:
        """Run one API call: latency, faults, credentials, the operation, the log entry."""
        latency = self.latency
        if latency > 0:
            self._sleep(latency)
        with self._lock:
            throttle_draw = self._random.random()
            error_draw = self._random.random()
            try:
                targeted = self._targeted[operation]
                if targeted:
                    raise copy.copy(targeted.pop(0))
                self._authenticate(credentials)
                if throttle_draw < self.throttle_rate:
                    raise CloudThrottled(retry_after=self.retry_after)
                if error_draw < self.error_rate:
                    raise CloudUnavailable()
                result = run()
            except CloudError as err:
                self._log(CloudCall(operation, name, False, err.code))
                raise
            self._log(CloudCall(operation, name, True, None))
            return result

    def _log(self, call: CloudCall) -> None:
        """Record one call in the bounded log and the counts."""
        self.calls.append(call)
        key = (call.operation, call.name, call.ok)
        self._counts[key] = self._counts.get(key, 0) + 1  # no Counter.__missing__ call

    def _authenticate(self, credentials: tuple[str, str]) -> None:
        """Raise :class:`CloudAuthError` unless the credentials are accepted."""
        try:
            key_id, secret = credentials
        except (TypeError, ValueError):
            raise CloudAuthError("credentials must be an access key id and a secret") from None
        if not isinstance(key_id, str) or not isinstance(secret, str) or not key_id or not secret:
            raise CloudAuthError("the access key id and secret must be non-empty")
        if self._credentials is None:
            return
        if key_id not in self._credentials:
            raise CloudAuthError("the access key id is not recognised", code="InvalidAccessKeyId")
        if self._credentials[key_id] != secret:
            raise CloudAuthError(
                "the request signature does not match", code="SignatureDoesNotMatch"
            )

    def _require(self, name: str) -> _Instance:
        """The live instance called ``name``; ``KeyError`` for hooks naming a missing one."""
        instance = self._live(name)
        if instance is None:
            raise KeyError(name)
        return instance

    def _live(self, name: str) -> _Instance | None:
        """The instance called ``name`` after clock-driven progress, or ``None``."""
        instance = self._instances.get(name)
        if instance is None:
            return None
        pending = instance.pending
        if (
            pending is not None
            and pending.seconds is not None
            and self._clock() - pending.started >= pending.seconds
        ):
            self._complete(instance)
        return self._instances.get(name)

    def _begin(
        self, instance: _Instance, operation: str, changes: dict[str, Any] | None = None
    ) -> None:
        """Start an asynchronous operation, completing it at once when it takes no time."""
        seconds = self._seconds[operation]
        instance.pending = _Pending(
            operation=operation,
            polls_left=self._polls[operation],
            started=self._clock(),
            seconds=seconds,
            changes=dict(changes or {}),
        )
        done = seconds <= 0 if seconds is not None else self._polls[operation] == 0
        if done:
            self._complete(instance)

    def _complete(self, instance: _Instance) -> None:
        """Finish the instance's pending operation."""
        pending = instance.pending
        instance.pending = None
        if pending is None:
            return
        if pending.operation == "delete":
            self._instances.pop(instance.name, None)
            return
        for key, value in pending.changes.items():
            setattr(instance, key, value)
        instance.state = "available"
        instance.status_message = ""


def _rate(label: str, value: float) -> float:
    """Validate a probability."""
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{label} must be between 0 and 1")
    return float(value)


# --------------------------------------------------------------------------
# The database kind's external client
# --------------------------------------------------------------------------


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


class DatabaseClient:
    """The external client of the database kind, backed by a :class:`SimCloud`."""

    def __init__(self, cloud: SimCloud, credentials: tuple[str, str]) -> None:
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
        up_to_date = True
        for key in ("engine", "storage_gb", "size", "version"):
            if key in wanted and desc[key] != wanted[key]:
                up_to_date = False
                break
        late_init = {} if "version" in wanted else {"version": desc["version"]}
        return Observation(
            exists=True,
            up_to_date=up_to_date,
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
        if resource.owner_mark and not (mark and mark_uid(mark) == mark_uid(resource.owner_mark)):
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


class DatabaseConnector:
    """Builds :class:`DatabaseClient` objects from a provider config's credentials."""

    #: The credential keys read from the provider config's Secret.
    KEY_ID = "accessKeyId"
    SECRET = "secretAccessKey"

    def __init__(self, cloud: SimCloud) -> None:
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
        """The simulated cloud's state (:meth:`SimCloud.snapshot`), to keep across restarts."""
        return self.cloud.snapshot()

    def restore(self, state: Mapping[str, Any]) -> None:
        """Put the simulated cloud back in a state :meth:`snapshot` returned."""
        self.cloud.restore(state)
