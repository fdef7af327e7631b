"""Who owns an external resource: ownership marks and the adoption rule (pure).

Every external resource the engine creates carries a mark of its owner,
stored by the provider where it can store one (a tag, a comment): the
operator's identity and the owning object's uid, rendered by
:func:`owner_mark`. ``observe`` reports the mark it finds in
:attr:`Observation.owner <lifecycle.core.values.Observation.owner>`:

* ``None``: the provider keeps no marks; only the engine's own index of
  claimed names (one owner per external name) protects the resource;
* ``""``: the resource exists and carries no mark;
* anything else: the mark found.

:func:`judge` decides from the observation whether the pass may act on the
resource. It never calls anything; the reconciler turns its verdict into a
condition, or into an update that writes the mark.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any

import attrs

from lifecycle.core.errors import HandledError, Severity
from lifecycle.core.kind import ADOPT
from lifecycle.core.values import Intent, Observation

__all__ = [
    "NotOwnedError",
    "Ownership",
    "Verdict",
    "acted_on",
    "adoption_requested",
    "judge",
    "mark_operator",
    "mark_uid",
    "owner_mark",
]


class NotOwnedError(HandledError):
    """The external resource exists but is not this object's to change.

    Retryable: the condition clears when the other owner lets go, the
    resource is marked as this object's, or adoption is requested and
    permitted. ``reason`` is ``ExternalResourceNotOwned`` (no mark, or a
    resource the provider refuses to hand over) or ``ExternalNameConflict``
    (another object holds the name).
    """

    severity = Severity.RETRYABLE
    reason = "ExternalResourceNotOwned"


def owner_mark(operator: str, uid: str) -> str:
    """The mark stored on an external resource owned by object ``uid``: ``operator/uid``."""
    return f"{operator}/{uid}"


def mark_uid(mark: str) -> str:
    """The owning object's uid in a mark (the text after the last ``/``)."""
    return mark.rpartition("/")[2]


def mark_operator(mark: str) -> str:
    """The operator id in a mark (the text before the last ``/``)."""
    return mark.rpartition("/")[0]


def acted_on(intent: Intent | None) -> bool:
    """Whether an object's journal shows it called the provider on its external name.

    Any entry counts except a create that failed: a create refused because
    the name was taken, or rejected outright, made nothing of this object's.
    A pending create (interrupted) may have made the resource, unmarked when
    the provider could not store the mark in the same step.
    """
    return intent is not None and not (intent.operation == "create"
                                       and intent.outcome == "failed")


def adoption_requested(annotations: Mapping[str, Any]) -> bool:
    """Whether the object asks to adopt an existing resource (annotation ``"true"``)."""
    return str(annotations.get(ADOPT, "")).lower() == "true"


class Verdict(enum.Enum):
    """What a pass may do with the observed external resource."""

    #: Absent, unmarked by a provider without marks, or marked as this object's.
    OWNED = "owned"
    #: This object's, but the mark is missing: the next change writes it.
    MARK = "mark"
    #: Not this object's: change nothing.
    REFUSED = "refused"


@attrs.frozen
class Ownership:
    """The verdict of :func:`judge`, with the refusal when there is one."""

    verdict: Verdict
    error: NotOwnedError | None = None


def judge(observation: Observation | None, *, uid: str, name: str, acted_before: bool,
          adopt: bool, adoption_allowed: bool, namespace: str | None,
          operator: str | None = None) -> Ownership:
    """Decide whether this object owns the external resource ``name`` it observed.

    ``acted_before`` says this object already called the provider on this
    name (its intent journal holds an entry): an unmarked resource is then
    its own, left unmarked by a call interrupted between creating and
    marking, or created before marks existed. ``adopt`` is the object's
    request (:data:`~lifecycle.core.kind.ADOPT`), ``adoption_allowed`` the
    operator's permission for ``namespace``. A resource the provider
    protects (:attr:`Observation.protected`) is never adopted.

    ``operator`` is this operator's id: a mark is this object's only when it
    names both the uid and the operator (another operator's resource is not
    this one's, whatever uid its mark carries). Without it only the uid is
    compared.
    """
    if observation is None or not observation.exists or observation.owner is None:
        return Ownership(Verdict.OWNED)
    mark = observation.owner
    if mark and mark_uid(mark) == uid and (operator is None or mark == owner_mark(operator, uid)):
        return Ownership(Verdict.OWNED)
    if not mark and acted_before and not observation.protected:
        return Ownership(Verdict.MARK)
    if observation.protected:
        return _refused(f"external resource {name!r} cannot be managed by this object: "
                        f"{observation.protected}")
    if adopt and adoption_allowed:
        return Ownership(Verdict.MARK)
    held = (f"is marked as owned by another object (uid {mark_uid(mark)})" if mark
            else "exists and was not created by this object")
    if mark and mark_uid(mark) == uid:
        held = (f"is marked by another operator ({mark_operator(mark)[:64]!r}, not "
                f"{(operator or '')[:64]!r})")
    if adopt:
        hint = (f"adoption is not allowed in namespace {namespace!r}: the operator must be "
                f"started with it allowed there" if namespace
                else "adoption of cluster-scoped resources is not allowed by the operator")
    else:
        hint = f"to take it over, annotate {ADOPT}=true (the operator must allow adoption)"
    return _refused(f"external resource {name!r} {held}; {hint}",
                    reason="ExternalNameConflict" if mark else "ExternalResourceNotOwned")


def _refused(message: str, reason: str = "ExternalResourceNotOwned") -> Ownership:
    return Ownership(Verdict.REFUSED, NotOwnedError(message, reason=reason))
