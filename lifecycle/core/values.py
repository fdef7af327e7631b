"""Small immutable values exchanged between the pure core, the reconciler and clients."""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from json.encoder import encode_basestring_ascii as _json_string  # what json.dumps uses
from math import floor as _floor
from time import time as _time
from typing import Any

import attrs

__all__ = [
    "Completion",
    "Condition",
    "ConditionStatus",
    "Creation",
    "HistoryEntry",
    "Intent",
    "Observation",
    "ProviderStatus",
    "Result",
    "ResultKind",
    "now",
    "rfc3339",
]


def now() -> datetime:
    """The current time in UTC, truncated to seconds as Kubernetes stores it."""
    # The clock's whole second, built directly (about twice as fast as
    # datetime.now(UTC).replace(microsecond=0)), and built once per second:
    # a reconcile asks several times, and a datetime is immutable.
    global _last_now
    second = _floor(_time())
    last = _last_now
    if last[0] != second:
        last = _last_now = (second, datetime.fromtimestamp(second, UTC))
    return last[1]


_last_now: tuple[int, datetime] = (-1, datetime.fromtimestamp(0, UTC))


def rfc3339(moment: datetime) -> str:
    """Format a time the way Kubernetes serialises ``metav1.Time`` (whole seconds, ``Z``)."""
    global _last_text
    last = _last_text
    if moment is last[0]:  # the moment now() handed out this second, formatted already
        return last[1]
    if moment.tzinfo is UTC and moment.year >= 1000:
        # The common case, formatted directly: about 2.5 times faster than strftime.
        text = "%d-%02d-%02dT%02d:%02d:%02dZ" % (  # noqa: UP031
            moment.year, moment.month, moment.day, moment.hour, moment.minute, moment.second)
        _last_text = (moment, text)
        return text
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


_last_text: tuple[datetime | None, str] = (None, "")


class ConditionStatus(enum.StrEnum):
    """The three values of ``metav1.Condition.status``."""

    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


_STATUS_BY_VALUE = {s.value: s for s in ConditionStatus}


@attrs.frozen
class Condition:
    """One entry of ``status.conditions``, with the fields of ``metav1.Condition``.

    ``last_transition_time`` changes only when ``status`` flips; see
    :func:`lifecycle.core.conditions.merge`.
    """

    type: str
    status: ConditionStatus
    reason: str
    message: str = ""
    observed_generation: int = 0
    last_transition_time: str = ""

    def to_dict(self) -> dict[str, Any]:
        """Serialise as the Kubernetes API does (camelCase keys)."""
        return {
            "type": self.type,
            "status": self.status.value,
            "reason": self.reason,
            "message": self.message,
            "observedGeneration": self.observed_generation,
            "lastTransitionTime": self.last_transition_time,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Condition:
        """Parse one condition; unknown status values read as ``Unknown``."""
        status = _STATUS_BY_VALUE.get(str(data.get("status", "Unknown")), ConditionStatus.UNKNOWN)
        generation = data.get("observedGeneration", 0)
        return cls(
            type=str(data.get("type", "")),
            status=status,
            reason=str(data.get("reason", "")),
            message=str(data.get("message", "")),
            observed_generation=generation if isinstance(generation, int) else 0,
            last_transition_time=str(data.get("lastTransitionTime", "")),
        )


class ResultKind(enum.Enum):
    """What the work queue should do with the key after a reconcile."""

    DONE = "done"
    REQUEUE_NOW = "requeue-now"
    REQUEUE_AFTER = "requeue-after"
    BACKOFF = "backoff"


@attrs.frozen
class Result:
    """The outcome of one reconcile, as the requeue matrix reads it.

    ``after`` is seconds for ``REQUEUE_AFTER``; for ``BACKOFF`` it is a lower
    bound the queue must respect (a provider's retry-after), otherwise 0.
    """

    kind: ResultKind
    after: float = 0.0
    reason: str = ""

    @classmethod
    def done(cls, reason: str = "") -> Result:
        """Forget the key until something changes."""
        return cls(ResultKind.DONE, 0.0, reason)

    @classmethod
    def now(cls, reason: str = "") -> Result:
        """Requeue immediately: the object changed in a way the next step depends on."""
        return cls(ResultKind.REQUEUE_NOW, 0.0, reason)

    @classmethod
    def later(cls, seconds: float, reason: str = "") -> Result:
        """Requeue after a fixed delay (waiting on a provider, or polling when Ready)."""
        return cls(ResultKind.REQUEUE_AFTER, float(seconds), reason)

    @classmethod
    def backoff(cls, reason: str = "", at_least: float = 0.0) -> Result:
        """Requeue with per-item exponential backoff (a handled error)."""
        return cls(ResultKind.BACKOFF, float(at_least), reason)


class ProviderStatus(enum.StrEnum):
    """The external system's own view of the resource."""

    AVAILABLE = "available"
    PENDING = "pending"
    FAILED = "failed"


def _names(names: Iterable[str]) -> tuple[str, ...]:
    return tuple(names)


@attrs.frozen
class Observation:
    """What ``observe`` learned about the external resource.

    ``late_init`` holds provider defaults to write back into the spec's
    parameters; ``connection`` the connection details to publish; ``observed``
    provider fields copied into ``status.atProvider``; ``owner`` and
    ``protected`` what the engine needs to know whose resource it is.
    """

    exists: bool
    up_to_date: bool = True
    status: ProviderStatus = ProviderStatus.AVAILABLE
    message: str = ""
    late_init: Mapping[str, Any] = attrs.field(factory=dict)
    connection: Mapping[str, str] = attrs.field(factory=dict)
    observed: Mapping[str, Any] = attrs.field(factory=dict)
    #: The ownership mark found on the resource (see :mod:`lifecycle.core.ownership`):
    #: None when the provider keeps no marks, "" when the resource carries none.
    owner: str | None = None
    #: Why the provider will never hand this resource to an object that did not
    #: create it (a superuser, a template database...); "" when it may be adopted.
    protected: str = ""
    #: The spec fields (as the spec spells them) an out-of-date resource differs in, for
    #: the drift Event: names only, never values (:func:`drift_detail` keeps only names).
    drifted: tuple[str, ...] = attrs.field(default=(), converter=_names)

    @classmethod
    def absent(cls) -> Observation:
        """The external resource does not exist."""
        return cls(exists=False, up_to_date=False)


#: What a drifted field's name may look like: a spec key or a dotted path of them. Anything
#: else (a value a provider put there by mistake) never reaches an Event.
_FIELD_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,63}(\.[A-Za-z][A-Za-z0-9_]{0,63}){0,3}")
#: The most drifted fields an Event names.
MAX_DRIFT_NAMES = 8


def drift_detail(names: Iterable[str]) -> str:
    """``": drift on a, b"`` for the field names of an observation's ``drifted`` (sorted,
    each once, at most :data:`MAX_DRIFT_NAMES` and ``...``); anything that is not a field
    name is left out; "" when none is left."""
    kept = sorted({n for n in names if isinstance(n, str) and _FIELD_NAME.fullmatch(n)})
    if not kept:
        return ""
    more = ", ..." if len(kept) > MAX_DRIFT_NAMES else ""
    return f": drift on {', '.join(kept[:MAX_DRIFT_NAMES])}{more}"


@attrs.frozen
class Completion:
    """What a mutating call may say about its own effect (``update`` and ``delete``
    return one, or an :class:`Observation` as a shorthand, or None).

    ``observation`` is the resource as the call left it, when the call's
    answer already tells (a create answered "available", a delete answered
    "gone"): the engine goes on from it in the same pass, without observing
    again. ``finished`` says the call's effect is complete when it returns (a
    synchronous system) without describing it: the engine observes once more
    in the same pass and goes on from that. With neither, the pass ends as the
    call left it and the next pass observes (the default, right for any
    provider whose operations run in the background).
    """

    finished: bool = False
    observation: Observation | None = None

    @classmethod
    def of(cls, answer: object) -> Completion:
        """The completion a call's return value declares (none for anything else)."""
        if isinstance(answer, Observation):
            return cls(observation=answer)
        if isinstance(answer, Completion | Creation):
            return cls(finished=answer.finished, observation=answer.observation)
        return cls()


@attrs.frozen
class Creation:
    """What ``create`` returned: connection details known only at creation, the
    identity a provider assigned (``external_name``) when it is not the requested
    name, and what the create says of its own effect (``finished``, ``observation``:
    as in :class:`Completion`)."""

    connection: Mapping[str, str] = attrs.field(factory=dict)
    external_name: str | None = None
    finished: bool = False
    observation: Observation | None = None


@attrs.frozen
class HistoryEntry:
    """One recorded transition, kept in a bounded list in ``status.history``."""

    source: str
    target: str
    event: str
    reason: str
    time: str

    def to_dict(self) -> dict[str, str]:
        """Serialise for status."""
        return {
            "from": self.source,
            "to": self.target,
            "event": self.event,
            "reason": self.reason,
            "time": self.time,
        }


_INTENT_JSON = '{"generation": %d, "key": %s, "operation": %s, "outcome": %s, "started": %s}'


@attrs.frozen
class Intent:
    """The intent journal entry, written before any mutating external call.

    ``operation`` is create, update or delete; ``key`` is an idempotency key
    derived from the object's uid and generation, passed to the client so a
    retry after a crash can never act twice.
    """

    operation: str
    key: str
    generation: int
    started: str
    outcome: str = "pending"

    def to_json(self) -> str:
        """The journal annotation's text: ``json.dumps(self.to_dict(), sort_keys=True)``.

        Formatted directly (the same text, about a third of the time): the
        engine writes one with every mutating call.
        """
        key, operation, outcome, started = self.key, self.operation, self.outcome, self.started
        if (self.generation.__class__ is int and key.__class__ is str
                and operation.__class__ is str and outcome.__class__ is str
                and started.__class__ is str):
            return _INTENT_JSON % (self.generation, _json_string(key), _json_string(operation),
                                   _json_string(outcome), _json_string(started))
        return json.dumps(self.to_dict(), sort_keys=True)

    def to_dict(self) -> dict[str, Any]:
        """Serialise for the journal annotation."""
        return {
            "operation": self.operation,
            "key": self.key,
            "generation": self.generation,
            "started": self.started,
            "outcome": self.outcome,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Intent | None:
        """Parse a journal entry; anything malformed reads as no entry."""
        try:
            return cls(
                operation=str(data["operation"]),
                key=str(data["key"]),
                generation=int(data["generation"]),
                started=str(data["started"]),
                outcome=str(data.get("outcome", "pending")),
            )
        except (KeyError, TypeError, ValueError):
            return None
