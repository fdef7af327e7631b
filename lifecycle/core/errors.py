"""The error taxonomy of a reconcile.

A *handled* error is one the engine records on the object (a ``Failed`` state
and a condition with a reason and message) and retries according to its
severity. An *unhandled* error propagates out of the reconcile to the work
queue, which retries it with per-item exponential backoff.

Provider clients raise these classes (or let the engine wrap whatever they
raise into :class:`ExternalError`). Messages must never contain secret values:
the engine copies ``message`` verbatim into conditions and events.
"""

from __future__ import annotations

import enum

from lifecycle.core.vocabulary import Reasons

__all__ = [
    "CredentialsError",
    "ExternalError",
    "HandledError",
    "LifecycleError",
    "MachineDefinitionError",
    "Severity",
    "TerminalError",
    "Throttled",
    "UnhandledError",
]


class Severity(enum.Enum):
    """How the engine treats a handled error."""

    #: The user must act; no retry until the spec (generation) changes.
    TERMINAL = "Terminal"
    #: Transient; retried with per-item exponential backoff.
    RETRYABLE = "Retryable"
    #: Recorded in conditions only; the reconcile otherwise carries on.
    INFORMATIONAL = "Informational"


class LifecycleError(Exception):
    """Base class of every error this library raises on purpose."""


class HandledError(LifecycleError):
    """An error recorded on the object as a condition, then retried per severity.

    ``reason`` is a CamelCase condition reason; ``message`` is shown to users
    verbatim and must not contain secrets.
    """

    severity: Severity = Severity.RETRYABLE
    reason: str = Reasons.RECONCILE_ERROR

    def __init__(
        self,
        message: str,
        *,
        reason: str | None = None,
        severity: Severity | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        if reason is not None:
            self.reason = reason
        if severity is not None:
            self.severity = severity


class ExternalError(HandledError):
    """A retryable failure of the external system (network, 5xx, timeouts)."""

    reason = "ExternalError"


class Throttled(ExternalError):
    """The external system asked us to slow down; retry no sooner than ``retry_after``."""

    reason = "Throttled"

    def __init__(self, message: str, *, retry_after: float, reason: str | None = None) -> None:
        super().__init__(message, reason=reason)
        self.retry_after = float(retry_after)


class TerminalError(HandledError):
    """The request can never succeed as specified (invalid spec, quota refused by policy).

    The engine stops retrying until the object's generation changes or the
    ``reconcile`` operation annotation asks for a retry.
    """

    severity = Severity.TERMINAL
    reason = "InvalidSpec"


class CredentialsError(HandledError):
    """The provider config or its credentials Secret is missing or unusable."""

    reason = "CredentialsUnavailable"


class UnhandledError(LifecycleError):
    """An error the reconcile cannot record on the object (the API server failed).

    It propagates to the work queue, which retries with exponential backoff.
    """


class MachineDefinitionError(LifecycleError):
    """A machine class breaks a rule checked when the class is defined."""
