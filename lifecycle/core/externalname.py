"""An object's external name as a pass reads it, resolved once (pure).

:func:`external_name_of` is the one place an object's external name is read:
the name its status records, its ``lifecycle.dev/external-name`` annotation,
whether it carries the engine's finalizer, and every reading a step needs
(:class:`ExternalName`). The index of names claimed by objects of one kind
is :mod:`lifecycle.runtime.names`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs

from lifecycle.core import objects
from lifecycle.core.kind import EXTERNAL_NAME, FINALIZER

__all__ = ["ExternalName", "external_name_of", "held_name"]


@attrs.frozen
class ExternalName:
    """An object's external name as a pass reads it, resolved once (:func:`external_name_of`).

    A plain value: every reading a step needs is computed when it is resolved.
    """

    #: The name the status records (set once the resource was named), else None.
    recorded: str | None
    #: The external-name annotation's value as stored (None when absent; "" or another
    #: type counts as chosen, and validation refuses it).
    annotated: Any
    #: The name the object takes ownership with: the annotation when a user set one,
    #: else the kind's default name.
    claimed: str
    #: Whether the object carries the engine's finalizer.
    finalized: bool
    #: The name the object holds: the recorded one, else its annotation.
    current: Any = None
    #: The name about to be committed: the annotation, even empty, else ``claimed``.
    chosen: Any = None
    #: Whether the object already carries the finalizer and an external name.
    holds: bool = False
    #: The annotated name, when it is a non-empty string.
    intended: str | None = None
    #: The name the object holds with the finalizer committed, else None.
    held: str | None = None
    #: The name a pass manages: the recorded one, never a later edit of the annotation.
    managed: str = ""
    #: Whether the annotation was edited after the resource was named (not followed).
    renamed: bool = False


def external_name_of(obj: Mapping[str, Any],
                     default: Callable[[Mapping[str, Any]], str] | None = None) -> ExternalName:
    """Resolve ``obj``'s external name (pure): the one place an object's name is read.

    ``default(obj)`` is the name the object would take ownership with (the
    kind's ``Kind.external_name``); without it, only an annotated name is claimed.
    """
    stored = objects.status(obj).get("externalName")
    recorded = stored if isinstance(stored, str) and stored else None
    annotated = objects.annotations(obj).get(EXTERNAL_NAME)
    found = objects.metadata(obj).get("finalizers")  # as objects.finalizers(), without a list
    finalized = isinstance(found, list) and FINALIZER in found
    intended = annotated if isinstance(annotated, str) and annotated else None
    claimed = default(obj) if default is not None else (intended or "")
    chosen = claimed if annotated is None else annotated
    return ExternalName(
        recorded, annotated, claimed, finalized, current=recorded or annotated, chosen=chosen,
        holds=finalized and bool(annotated), intended=intended,
        held=(recorded or intended) if finalized else None,
        managed=recorded or str(chosen),
        renamed=recorded is not None and recorded != str(chosen))


def held_name(obj: Mapping[str, Any]) -> str | None:
    """The external name an object holds (finalizer and a name committed), else None."""
    return external_name_of(obj).held
