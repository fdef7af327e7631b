"""The Kubernetes API error taxonomy, as raised by every :class:`~lifecycle.kube.cluster.Cluster`.

Each class carries the HTTP status code and the ``reason`` a real API server
puts in its ``Status`` object; :func:`error_from_status` turns a ``Status``
back into the matching class.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "AlreadyExists",
    "ApiError",
    "BadRequest",
    "Conflict",
    "EntityTooLarge",
    "Forbidden",
    "Gone",
    "Invalid",
    "MethodNotAllowed",
    "NotAcceptable",
    "NotFound",
    "ResourceVersionTooLarge",
    "ServerError",
    "TooManyRequests",
    "UnsupportedMediaType",
    "error_from_status",
]


class ApiError(Exception):
    """An error answer of the API server, with the fields of a ``metav1.Status``.

    ``str(error)`` is the message. Subclasses fix ``status`` (the HTTP code)
    and ``reason`` (the ``StatusReason``).
    """

    status: int = 500
    reason: str = "InternalError"

    def __init__(self, message: str, *, status: int | None = None, reason: str | None = None):
        super().__init__(message)
        self.message = message
        if status is not None:
            self.status = status
        if reason is not None:
            self.reason = reason

    def __str__(self) -> str:
        return self.message

    def to_status(self) -> dict[str, Any]:
        """The ``Status`` object the real API server would send for this error."""
        return {
            "apiVersion": "v1",
            "kind": "Status",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.status,
        }


class NotFound(ApiError):
    """404: the object (or the resource type, or its namespace) does not exist."""

    status = 404
    reason = "NotFound"


class AlreadyExists(ApiError):
    """409: an object with that name already exists."""

    status = 409
    reason = "AlreadyExists"


class Conflict(ApiError):
    """409: a precondition (``resourceVersion`` or uid) does not hold any more."""

    status = 409
    reason = "Conflict"


class Forbidden(ApiError):
    """403: the request is refused (for example, creating in a terminating namespace)."""

    status = 403
    reason = "Forbidden"


class Gone(ApiError):
    """410: the requested watch ``resourceVersion`` is older than the retained history."""

    status = 410
    reason = "Expired"


class Invalid(ApiError):
    """422: the object or request is malformed.

    ``causes`` lists what is wrong, field by field, as a real server puts them
    in ``details.causes``: dicts with ``reason`` (``FieldValueRequired``,
    ``FieldValueInvalid``, ``FieldValueNotSupported``, ``FieldValueTypeInvalid``,
    ...), ``message`` and ``field`` (``spec.forProvider.size``). ``name``,
    ``group`` and ``kind`` identify the object in ``details``.
    """

    status = 422
    reason = "Invalid"

    def __init__(self, message: str, *, causes: Sequence[Mapping[str, str]] = (),
                 name: str = "", group: str = "", kind: str = "",
                 status: int | None = None, reason: str | None = None):
        super().__init__(message, status=status, reason=reason)
        self.causes = [dict(c) for c in causes]
        self.details = {"name": name, "group": group, "kind": kind}

    def to_status(self) -> dict[str, Any]:
        """The ``Status`` object, with ``details`` naming the object and the causes."""
        status = super().to_status()
        if self.causes or any(self.details.values()):
            details: dict[str, Any] = {k: v for k, v in self.details.items() if v}
            if self.causes:
                details["causes"] = self.causes
            status["details"] = details
        return status


class BadRequest(ApiError):
    """400: the request itself is malformed (a bad query parameter, body or selector)."""

    status = 400
    reason = "BadRequest"


class MethodNotAllowed(ApiError):
    """405: the verb is not supported on this resource."""

    status = 405
    reason = "MethodNotAllowed"


class NotAcceptable(ApiError):
    """406: no media type the client accepts can be produced."""

    status = 406
    reason = "NotAcceptable"


class EntityTooLarge(ApiError):
    """413: the request body is over the server's limit."""

    status = 413
    reason = "RequestEntityTooLarge"


class UnsupportedMediaType(ApiError):
    """415: the request's content type is not supported (e.g. a strategic merge patch
    on a custom resource, which a real server refuses the same way)."""

    status = 415
    reason = "UnsupportedMediaType"


class ResourceVersionTooLarge(ApiError):
    """504: a list or watch asked for a resourceVersion the server has not reached.

    A real server answers ``Timeout`` with the cause ``ResourceVersionTooLarge``
    after waiting briefly; clients relist from the current state.
    """

    status = 504
    reason = "Timeout"

    def to_status(self) -> dict[str, Any]:
        """The ``Status`` object, with the ``ResourceVersionTooLarge`` cause."""
        status = super().to_status()
        status["details"] = {"causes": [{"reason": "ResourceVersionTooLarge",
                                         "message": "Too large resource version"}],
                             "retryAfterSeconds": 1}
        return status


class ServerError(ApiError):
    """500: an internal error of the server."""

    status = 500
    reason = "InternalError"


class TooManyRequests(ApiError):
    """429: the server asks the client to retry no sooner than ``retry_after`` seconds."""

    status = 429
    reason = "TooManyRequests"

    def __init__(self, message: str = "too many requests", *, retry_after: float = 1.0):
        super().__init__(message)
        self.retry_after = float(retry_after)

    def to_status(self) -> dict[str, Any]:
        """The ``Status`` object, with ``details.retryAfterSeconds``."""
        status = super().to_status()
        status["details"] = {"retryAfterSeconds": max(1, round(self.retry_after))}
        return status


_ERRORS_BY_REASON: dict[str, type[ApiError]] = {
    cls.reason: cls
    for cls in (NotFound, AlreadyExists, Conflict, Forbidden, Gone, Invalid, TooManyRequests,
                BadRequest, MethodNotAllowed, NotAcceptable, EntityTooLarge,
                UnsupportedMediaType)
}


def error_from_status(status: Mapping[str, Any]) -> ApiError:
    """Rebuild the matching :class:`ApiError` from a ``Status`` dict."""
    reason = str(status.get("reason", ""))
    code = int(status.get("code", 500) or 500)
    message = str(status.get("message", ""))
    cls = _ERRORS_BY_REASON.get(reason)
    found = status.get("details")
    details: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    if cls is TooManyRequests:
        return TooManyRequests(message, retry_after=float(details.get("retryAfterSeconds", 1)))
    causes = [c for c in details.get("causes") or [] if isinstance(c, Mapping)]
    if cls is Invalid and code == 422:
        return Invalid(message, causes=causes, name=str(details.get("name", "")),
                       group=str(details.get("group", "")), kind=str(details.get("kind", "")))
    if reason == "Timeout" and any(c.get("reason") == "ResourceVersionTooLarge" for c in causes):
        return ResourceVersionTooLarge(message)
    if cls is not None and cls.status == code:
        return cls(message)
    if code >= 500:
        return ServerError(message, status=code, reason=reason or "InternalError")
    return ApiError(message, status=code, reason=reason or "Unknown")
