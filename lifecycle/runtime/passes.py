"""The working state of one managed reconcile pass, and the small helpers around it.

:class:`Pass` is what the reconciler has learned and decided so far;
:class:`PassObject` is the reconciled object as the intent journal sees it.
Metadata changes may be *staged* on a pass: they are not written at once but
ride on the pass's next object write (:func:`staged_meta` applies them to a
copy of the stored metadata), so the finalizer, the external name and the
journal entry before an external call cost one write, not three.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs

from lifecycle.core import objects
from lifecycle.core.errors import HandledError
from lifecycle.core.kind import EXTERNAL_NAME
from lifecycle.core.values import Condition, ConditionStatus
from lifecycle.core.vocabulary import ConditionTypes
from lifecycle.runtime.names import ExternalName
from lifecycle.runtime.redaction import credential_values, redact, redact_status
from lifecycle.runtime.secrets import ConnectionSecrets

__all__ = ["ObjectGone", "Pass", "PassObject", "config_note", "informational", "managed_name",
           "staged_meta"]


class ObjectGone(Exception):
    """The reconciled object disappeared during the pass: nothing more to do."""


@attrs.define
class Pass:
    """What one reconcile has learned and decided so far (internal working state)."""

    obj: dict[str, Any]
    state: str
    generation: int
    secrets: ConnectionSecrets
    forced: bool = False
    notes: list[Condition] = attrs.Factory(list)
    dirty: bool = False
    #: The external name the client was given in this pass.
    external_name: str = ""
    #: Metadata changes not yet committed: they ride on the next object write.
    staged: list[Callable[[dict[str, Any]], Any]] = attrs.Factory(list)
    #: Whether a staged change must be committed by the end of the pass (the
    #: finalizer, the external name); deferred changes alone (a journal entry
    #: closed) wait for the next write that happens anyway.
    pressing: bool = False
    #: The generation this pass's late-initialisation write produced, when the
    #: observation also holds for it (only provider defaults were filled in).
    observed: int | None = None
    #: Whether the object carried our finalizer and its external name before the
    #: pass wrote anything that could change them (set by the reconciler).
    holds: bool = False
    #: The credential values read from the provider config's Secret in this pass: none
    #: of them is written into a condition or an Event (:mod:`lifecycle.runtime.redaction`).
    redact: tuple[str, ...] = ()
    #: The provider config read for this pass (by the admission check or the
    #: observation, whichever comes first): read once per pass.
    config: Any = None
    #: The object's external name, resolved once when the pass starts.
    name: ExternalName = attrs.field(factory=lambda: ExternalName(None, None, "", False))
    #: The spec's parameters, parsed once per pass (after its references are resolved):
    #: the parameters, or the refusal of a spec that does not parse.
    parsed: tuple[Any, Any] | None = None

    def credentials(self, config: Any) -> Any:
        """Note the credential values of ``config`` (a ProviderConfig) for redaction; return it."""
        self.redact = credential_values(config.credentials)
        return config

    def scrub(self, text: str) -> str:
        """``text`` without any credential value noted in this pass."""
        return redact(text, self.redact)

    def scrub_status(self, status: Mapping[str, Any]) -> dict[str, Any]:
        """``status`` whose condition messages hold no credential value noted in this pass."""
        return redact_status(status, self.redact)

    def stage(self, change: Callable[[dict[str, Any]], Any], *, deferred: bool = False) -> None:
        """Stage a metadata change for the next object write; unless ``deferred``, the
        pass writes it at the latest before its status."""
        self.staged.append(change)
        self.pressing = self.pressing or not deferred

    def committed(self) -> None:
        """Forget the staged changes: an object write just carried them."""
        self.staged.clear()
        self.pressing = False

    def annotations(self) -> Mapping[str, Any]:
        """The object's annotations with the staged changes applied (read-only)."""
        if not self.staged:  # nothing to apply: the object's own, without a copy
            return objects.annotations(self.obj)
        return objects.annotations({"metadata": staged_meta(self)})


class PassObject:
    """The reconciled object of one pass as the effects see it (an ObjectPort).

    ``commit(run, key, value)`` writes one annotation together with
    everything staged on ``run``.
    """

    def __init__(self, run: Pass, commit: Callable[[Pass, str, str], None]) -> None:
        self._run = run
        self._commit = commit

    def annotations(self) -> Mapping[str, Any]:
        """The object's annotations, staged changes applied."""
        return self._run.annotations()

    def annotate(self, key: str, value: str) -> None:
        """Commit one annotation, with everything staged, before returning."""
        self._commit(self._run, key, value)

    def stage(self, key: str, value: str) -> None:
        """Set one annotation with the pass's next object write."""
        self._run.stage(lambda m: m.setdefault("annotations", {}).__setitem__(key, value))

    def defer(self, key: str, value: str) -> None:
        """Set one annotation with the pass's next object write, if it makes one."""
        self._run.stage(lambda m: m.setdefault("annotations", {}).__setitem__(key, value),
                        deferred=True)


def config_note(reason: str, message: str, generation: int) -> Condition:
    """A ``ConfigValid`` False note of this generation."""
    return Condition(ConditionTypes.CONFIG_VALID, ConditionStatus.FALSE, reason, message,
                     generation)


def informational(error: HandledError, generation: int) -> Condition:
    """An ``Informational`` note carrying ``error``'s reason and message."""
    return Condition("Informational", ConditionStatus.TRUE, error.reason, error.message,
                     generation)


def staged_meta(run: Pass) -> dict[str, Any]:
    """A copy of the object's metadata with the pass's staged changes applied."""
    meta = _copy_meta(run.obj["metadata"])
    for change in run.staged:
        change(meta)
    return meta


def _copy_meta(meta: Mapping[str, Any]) -> dict[str, Any]:
    copied = dict(meta)
    annotations, labels = meta.get("annotations"), meta.get("labels")
    if objects.is_mapping(annotations):
        copied["annotations"] = dict(annotations)
    if objects.is_mapping(labels):
        copied["labels"] = dict(labels)
    finalizers = meta.get("finalizers")
    if isinstance(finalizers, list):
        copied["finalizers"] = list(finalizers)
    return copied


def managed_name(run: Pass) -> str:
    """The external name the object took ownership with (as resolved when the pass
    started); a later edit of the annotation is reported as a note on the pass, never
    followed (following it would leak the resource already named)."""
    name = run.name
    if name.recorded is not None and name.renamed:
        run.notes.append(config_note(
            "ExternalNameChanged",
            f"annotation {EXTERNAL_NAME} changed from {name.recorded!r} to "
            f"{str(name.chosen)[:64]!r} after the resource was named; "
            f"still managing {name.recorded!r}", run.generation))
        return name.recorded
    return name.managed
