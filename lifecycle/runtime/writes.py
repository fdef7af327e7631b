"""The writes of one managed pass to its object: metadata, late-initialised spec, status.

Each write carries what the pass has staged (:class:`~lifecycle.runtime.passes.Pass`),
keeps the object it returns as the pass's object (no read after one's own
write), and retries a 409 Conflict from a fresh read with the staged changes
applied again. An object that vanished ends the pass (:class:`ObjectGone`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from lifecycle.core import objects
from lifecycle.core.kind import Kind
from lifecycle.kube.cluster import Cluster
from lifecycle.kube.errors import NotFound
from lifecycle.runtime.passes import ObjectGone, Pass, config_note, staged_meta
from lifecycle.runtime.retry import retry_conflicts

__all__ = ["ObjectWrites"]


class ObjectWrites:
    """The object writes of a reconciler's passes; ``api()`` is the cluster to write to
    (asked at each write, so a reconciler's cluster may be swapped for a cached one)."""

    def __init__(self, api: Callable[[], Cluster], kind: Kind) -> None:
        self.api = api
        self.kind = kind

    def status(self, run: Pass, status: dict[str, Any]) -> None:
        """Write ``status`` as the object's status."""
        def attempt() -> None:
            body = dict(run.obj)
            body["status"] = status
            try:
                run.obj = self.api().replace_status(body)
            except NotFound:
                raise ObjectGone from None

        retry_conflicts(attempt, lambda: self.refresh(run), what="status write")

    def mutate(self, run: Pass, change: Callable[[dict[str, Any]], Any]) -> None:
        """Apply the staged changes and ``change`` to metadata and commit them in one write,
        retrying 409s from a fresh read."""
        def attempt() -> None:
            body = dict(run.obj)
            body["metadata"] = staged_meta(run)
            change(body["metadata"])
            if body["metadata"] != run.obj["metadata"]:
                try:
                    run.obj = self.api().replace(body)
                except NotFound:
                    raise ObjectGone from None
            run.committed()

        retry_conflicts(attempt, lambda: self.refresh(run), what="object write")

    def commit_staged(self, run: Pass) -> None:
        """Commit what is staged, when something staged needs a write of its own
        (a deferred change alone waits for a later write)."""
        if run.staged and run.pressing:
            self.mutate(run, lambda m: None)

    def annotate(self, run: Pass, key: str, value: str) -> None:
        """Commit one annotation on the object (used by the intent journal)."""
        self.mutate(run, lambda m: m.setdefault("annotations", {}).__setitem__(key, value))

    def late_init(self, run: Pass, fields: Mapping[str, Any]) -> None:
        """Write provider defaults into unset spec parameters, never over a value.

        The fields still missing are recomputed from every fresh read, so a
        value the user set meanwhile wins; the write carries the staged
        metadata changes. When it wrote the generation right after the one
        this pass observed, the observation holds for it too (only the
        provider's own values were filled in) and the status observes it;
        after a concurrent spec change the pass is dirty instead. A schema
        that prunes the field is reported, not retried in a loop.
        """
        def attempt() -> None:
            missing = _missing(run.obj, fields)
            if missing:
                body = dict(run.obj)
                body["metadata"] = staged_meta(run)
                self._write_spec(run, body, missing)
                run.committed()

        retry_conflicts(attempt, lambda: self.refresh(run), what="late-init write")

    def _write_spec(self, run: Pass, body: dict[str, Any], missing: Mapping[str, Any]) -> None:
        """Write ``body`` with ``missing`` filled into its parameters; note the generation."""
        spec = run.obj["spec"]
        body["spec"] = {**spec, "forProvider": {**spec["forProvider"], **missing}}
        before = run.obj["metadata"].get("generation")
        try:
            run.obj = self.api().replace(body)
        except NotFound:
            raise ObjectGone from None
        written = (run.obj.get("spec") or {}).get("forProvider") or {}
        after = run.obj["metadata"].get("generation")
        if after != before and all(written.get(k) is not None for k in missing):
            if before == run.generation and isinstance(after, int):
                run.observed = after
            else:
                run.dirty = True
        else:
            run.notes.append(config_note(
                "LateInitNotPersisted",
                f"provider defaults for {', '.join(sorted(missing))} could not be written "
                "to spec.forProvider (pruned by the schema?)", run.generation))

    def refresh(self, run: Pass) -> None:
        """Read the object afresh after a conflict; gone means the pass is over."""
        meta = run.obj["metadata"]
        try:
            run.obj = self.api().get(self.kind.api_version, self.kind.kind,
                                     meta.get("namespace"), meta["name"])
        except NotFound:
            raise ObjectGone from None


def _missing(obj: Mapping[str, Any], fields: Mapping[str, Any]) -> dict[str, Any]:
    """The ``fields`` the object's ``spec.forProvider`` leaves unset (none without one)."""
    if not fields:
        return {}
    spec = obj.get("spec")
    params = spec.get("forProvider") if objects.is_mapping(spec) else None
    if not objects.is_mapping(params):
        return {}
    return {k: v for k, v in fields.items() if params.get(k) is None and v is not None}
