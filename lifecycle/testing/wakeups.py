"""The harness's requeue of objects waiting on a reference, without informers.

The operator learns that a referenced object turned Ready from its
informers (:mod:`lifecycle.driver.references`); the harness has none, so
:class:`ReferenceWakeups` is told each change the harness itself makes or
runs (an ``apply``, a ``delete``, a reconcile) with the object before and
after it. It keeps the same pure index the operator keeps
(:class:`~lifecycle.core.references.ReferenceIndex`) and asks it the same
question (:meth:`~lifecycle.core.references.ReferenceIndex.woken`), so an
object waiting on a Role is reconciled right after the Role turns Ready in
both, not at its backoff. Objects written straight into the embedded API
(``env.api``) are seen when the harness next reconciles them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lifecycle.core import objects
from lifecycle.core.kind import Kind
from lifecycle.core.references import ReferenceIndex, declared

__all__ = ["ReferenceWakeups"]

#: A harness queue key: (kind, namespace or None, name).
Key = tuple[str, str | None, str]


class ReferenceWakeups:
    """Which of the harness's objects wait on which others, and whom a change wakes.

    ``kinds`` are the harness's kinds by name; only those declaring a
    reference (referrers) and the kinds they reference (targets) are followed.
    """

    def __init__(self, kinds: Mapping[str, Kind]) -> None:
        self.referrers = {name: kind for name, kind in kinds.items()
                          if declared(kind.parameters)}
        self.targets = {d.target for kind in self.referrers.values()
                        for d in declared(kind.parameters)}
        #: The index the operator keeps too (what waits on which name or selector).
        self.index = ReferenceIndex()

    def follows(self, kind: Kind) -> bool:
        """Whether a change of an object of ``kind`` can matter: it references, or is
        referenced."""
        return kind.kind in self.referrers or (kind.api_version, kind.kind) in self.targets

    def changed(self, kind: Kind, old: Mapping[str, Any] | None,
                new: Mapping[str, Any] | None) -> list[Key]:
        """Record that an object of ``kind`` went from ``old`` to ``new`` (None: absent);
        the keys of the objects to reconcile now because of it."""
        obj = new if new is not None else old
        if obj is None:
            return []
        meta = objects.metadata(obj)
        where = (meta.get("namespace") or None, str(meta.get("name")))
        if kind.kind in self.referrers:
            self.index.update(kind.kind, kind.parameters, new, where)
        if (kind.api_version, kind.kind) not in self.targets:
            return []
        return [(referrer, key[0], key[1])
                for referrer, key in self.index.woken(kind.api_version, kind.kind, old, new)]
