"""Resolving an object's references before its pass connects to the provider.

:meth:`References.resolve` is the reconciler's one call: for each field the
kind declares a reference for (:mod:`lifecycle.core.references`) that is
empty and has a ``<field>Ref`` or ``<field>Selector``, it reads the
referenced objects of the object's own namespace, chooses (pure:
:func:`~lifecycle.core.references.choose`), and writes every resolved value
into ``spec.forProvider`` in one object write, as Crossplane does (a selector
also records the reference it chose). The pass then goes on with the written
object. While any is unresolved nothing is written, and the pass ends with
:class:`~lifecycle.core.references.UnresolvedReference` before anything is
committed or called: Synced False with reason ``ReferenceUnresolved`` and a
message naming each reference and what it lacks. Deleting objects are not
resolved (what they reference is likely going too).
"""

from __future__ import annotations

from typing import Any

from lifecycle.core import objects
from lifecycle.core.errors import HandledError, TerminalError
from lifecycle.core.kind import Kind
from lifecycle.core.references import UnresolvedReference, choose, declared, pending
from lifecycle.kube.conflict import on_conflict
from lifecycle.kube.errors import NotFound
from lifecycle.runtime.passes import ObjectGone, Pass, staged_meta

__all__ = ["References"]


class References:
    """The reference resolution of one kind's passes, on the pass's own cluster
    (:class:`~lifecycle.runtime.passes.Pass`); a write that keeps conflicting raises
    ``ConflictsExhausted`` (:mod:`lifecycle.kube.conflict`)."""

    def __init__(self, kind: Kind) -> None:
        self.kind = kind
        self.declared = declared(kind.parameters)

    def resolve(self, run: Pass) -> HandledError | None:
        """Resolve the pass's object's pending references into its spec; the refusal
        (unresolved, or a malformed reference) or None when nothing is left to resolve."""
        if not self.declared:
            return None
        outcome: list[HandledError | None] = [None]

        def attempt() -> None:
            outcome[0] = self._resolve_once(run)

        on_conflict(attempt, run.refresh, what="reference write")
        return outcome[0]

    def _resolve_once(self, run: Pass) -> HandledError | None:
        try:
            wanted = pending(self.kind.parameters, run.obj.get("spec"))
        except TerminalError as exc:
            return exc
        if not wanted:
            return None
        namespace = objects.metadata(run.obj).get("namespace")
        values: dict[str, Any] = {}
        missing: list[str] = []
        for decl, ref, selector in wanted:
            if ref is not None:
                try:
                    found = [run.api.get(decl.api_version, decl.kind, namespace, ref.name)]
                except NotFound:
                    found = []
                answer = choose(decl, found, run.obj, named=ref.name)
            else:
                assert selector is not None
                labels = ",".join(f"{k}={v}" for k, v in sorted(
                    (selector.match_labels or {}).items())) or None
                lister: Any = run.api  # a cluster that lists by label (the operator's does)
                found, _ = lister.list(decl.api_version, decl.kind, namespace, labels)
                answer = choose(decl, found, run.obj, selector=selector)
            if isinstance(answer, str):
                missing.append(answer)
                continue
            values[decl.field] = answer[0]
            if ref is None and decl.ref_key:
                values[decl.ref_key] = {"name": answer[1]}
        if missing:
            return UnresolvedReference("unresolved reference(s): " + "; ".join(missing))
        self._write(run, values)
        return None

    def _write(self, run: Pass, values: dict[str, Any]) -> None:
        """Write ``values`` into ``spec.forProvider`` (with what the pass has staged); the
        pass goes on with the written object, its generation observed when it wrote the one
        right after the pass's."""
        body = dict(run.obj)
        body["metadata"] = staged_meta(run)
        spec = objects.mapping(run.obj.get("spec"))
        body["spec"] = {**spec, "forProvider": {
            **objects.mapping(spec.get("forProvider")), **values}}
        before = objects.metadata(run.obj).get("generation")
        try:
            run.obj = run.api.replace(body)
        except NotFound:
            raise ObjectGone from None
        run.committed()
        after = objects.metadata(run.obj).get("generation")
        if before == run.generation and isinstance(after, int):
            run.generation = run.observed = after
