"""An in-memory simulated cloud of database instances with asynchronous operations.

:class:`SimCloud` implements :class:`~lifecycle.providers.simcloud.api.CloudApi` for
tests, demos and the operator's default connector. Instances move through
``creating``, ``modifying`` and ``deleting`` states that complete after a number
of ``describe_instance`` calls or some clock time. It checks credentials and
parameters, injects faults (seeded throttling and 5xx errors, targeted failures,
latency, drift, failure, disappearance) and logs every call.
"""

from __future__ import annotations

import collections
import copy
import random
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from lifecycle.core.history import DEFAULT_LIMIT, History
from lifecycle.providers.simcloud.api import (
    ENGINES,
    OPERATIONS,
    PARAMETER_KEYS,
    CloudAlreadyExists,
    CloudAuthError,
    CloudBusy,
    CloudError,
    CloudInvalidParameter,
    CloudNotFound,
    CloudThrottled,
    CloudUnavailable,
    check_known,
    check_operation,
    check_password,
    check_size,
    check_storage,
    check_version,
)

__all__ = ["CloudCall", "SimCloud"]


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
            check_known(params, PARAMETER_KEYS)
            engine = params.get("engine")
            if not isinstance(engine, str) or engine not in ENGINES:
                raise CloudInvalidParameter(
                    f"engine must be one of {', '.join(sorted(ENGINES))}, got {engine!r}"
                )
            if "storage_gb" not in params:
                raise CloudInvalidParameter("storage_gb is required")
            storage_gb = check_storage(params["storage_gb"])
            size = check_size(params.get("size", "small"))
            version = params.get("version")
            if version is None:
                version = ENGINES[engine]["default_version"]
            version = check_version(engine, version)
            if password is not None:
                check_password(password)
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
            check_known(params, PARAMETER_KEYS)
            if "engine" in params and params["engine"] != instance.engine:
                raise CloudInvalidParameter("the engine of an instance cannot be changed")
            changes: dict[str, Any] = {}
            if params.get("storage_gb") is not None:
                changes["storage_gb"] = check_storage(params["storage_gb"])
            if params.get("size") is not None:
                changes["size"] = check_size(params["size"])
            if params.get("version") is not None:
                changes["version"] = check_version(instance.engine, params["version"])
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
            check_password(password)
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
            unknown = sorted(set(params) - PARAMETER_KEYS)
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
        check_operation(operation)
        if not isinstance(error, CloudError):
            raise TypeError("error must be a CloudError")
        with self._lock:
            self._targeted[operation].extend(error for _ in range(times))

    def count(self, operation: str, name: str | None = None, ok: bool | None = None) -> int:
        """How many logged calls match ``operation`` and, when given, ``name`` and ``ok``;
        an operation the cloud does not have is refused, so a misspelt one never counts 0."""
        check_operation(operation)
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
