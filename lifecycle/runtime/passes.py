"""The managed pass: one reconcile's working state, and the reads and writes on its object.

:class:`Pass` is the home of one pass of the managed reconciler: what it has
learned and decided so far, the reads of its object (the spec's parameters,
parsed once; the provider config with its credentials, read once; the
:class:`~lifecycle.core.contract.ManagedResource` handed to the provider)
and every write to it: metadata, late-initialised spec fields, status. It is
also the object as the intent journal sees it (an
:class:`~lifecycle.runtime.effects.ObjectPort`). The reconciler enters it for
two phases, each one call: :meth:`Pass.take_over` and :meth:`Pass.write_back`.

Metadata changes may be *staged* on a pass: they are not written at once but
ride on the pass's next object write (:func:`staged_meta` applies them to a
copy of the stored metadata), so the finalizer, the external name and the
journal entry before an external call cost one write, not three. Each write
keeps the object it returns as the pass's object (no read after one's own
write) and retries a 409 Conflict from a fresh read, the staged changes
applied again (:func:`~lifecycle.kube.conflict.on_conflict`; when every
attempt conflicts, ``ConflictsExhausted`` ends the pass and the reconciler
hands it to the work queue's backoff). An object that vanished ends the pass
(:class:`ObjectGone`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any

import attrs

from lifecycle.core import objects
from lifecycle.core.conclusion import Conclusion, conclusion, config_note, informational
from lifecycle.core.contract import ManagedResource, ProviderConfig
from lifecycle.core.decide import Decision, Facts
from lifecycle.core.errors import HandledError, TerminalError
from lifecycle.core.externalname import ExternalName
from lifecycle.core.guard import guarded
from lifecycle.core.kind import EXTERNAL_NAME, FINALIZER, OPERATION, Kind, check_references
from lifecycle.core.ownership import NotOwnedError, owner_mark
from lifecycle.core.values import Condition, Intent
from lifecycle.kube.cluster import Cluster
from lifecycle.kube.conflict import on_conflict
from lifecycle.kube.errors import NotFound
from lifecycle.kube.events import record_event
from lifecycle.kube.objects import add_finalizer, remove_finalizer
from lifecycle.runtime.effects import Inputs
from lifecycle.runtime.names import NameIndex
from lifecycle.runtime.reads import TTLCache, provider_config
from lifecycle.runtime.redaction import credential_values, redact_events, redact_status
from lifecycle.runtime.secrets import ConnectionSecrets

__all__ = ["Admit", "ObjectGone", "Pass", "config_note", "informational",
           "managed_name", "record_event", "staged_meta"]


#: A connector's optional ``admit`` (:func:`~lifecycle.core.contract.admission`).
Admit = Callable[[ManagedResource, ProviderConfig], Any]


class ObjectGone(Exception):
    """The reconciled object disappeared during the pass: nothing more to do."""


@attrs.define
class Pass:
    """One pass of the managed reconciler: what it has learned and decided so far, and the
    reads and writes on its object.

    ``api`` is the cluster the pass reads and writes, ``kind`` the object's
    kind, ``reads`` the reconciler's cache of supporting reads and
    ``operator`` the name in the ownership mark.
    """

    obj: dict[str, Any]
    state: str
    generation: int
    secrets: ConnectionSecrets
    api: Cluster
    kind: Kind
    reads: TTLCache = attrs.field(factory=lambda: TTLCache(0.0))
    operator: str = "lifecycle"
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
    #: The password the take-over read or persisted (:meth:`connection_secret`), if any;
    #: whether it asked for one, and the error it met (raised by :meth:`managed_resource`).
    password: str | None = attrs.field(default=None, repr=False)
    password_read: bool = False
    password_error: HandledError | None = None
    #: The index of claimed external names (the reconciler's), for :meth:`claim`.
    index: NameIndex | None = None
    #: The trusted journal entry on the object, read once after connecting: the ownership
    #: rule's, then the actions' (:meth:`Effects.act <lifecycle.runtime.effects.Effects.act>`).
    entry: Intent | None = None

    # ------------------------------------------------------------------ take-over
    def take_over(self, admit: Admit | None, *, deleting: bool, modify: bool) -> Inputs:
        """Take the object over, in order, and read what connect needs.

        Unless ``deleting``: the pass's own checks (:meth:`validate`); then the
        external name is claimed in the index (:meth:`claim`); unless the
        object holds its name already and if the policy lets the pass
        ``modify``, the connector's optional ``admit`` is asked
        (:meth:`admitted`); unless ``deleting``, the connection Secret is
        checked and its password read or first persisted, in one call
        (:meth:`connection_secret`). A refusal ends the pass as a condition
        only, nothing committed, the name this pass claimed given back. Then
        ownership is staged (:meth:`acquire`) and the connection's inputs are
        read (:meth:`inputs`). A deletion whose name another object holds has
        nothing to delete (``absent``).
        """
        refused: HandledError | None = None if deleting else self.validate()
        if refused is None:
            refused = self.claim(deleting)
            if refused is not None and deleting:
                return Inputs(absent=True)  # another object holds the name: leave it alone
        if refused is None and not (self.holds or deleting) and modify:
            refused = self.admitted(admit)
        if refused is None and not deleting:
            refused = self.connection_secret(read_only=not modify)
        if refused is not None:
            return Inputs(refused=refused)
        self.acquire()
        return self.inputs(deleting, read_only=not modify)

    def validate(self) -> TerminalError | None:
        """Check what this pass would act on; the refusal, or None when all is valid.

        Every pass checks the references and the external name (the one held,
        or the one about to be committed: an annotation set even to "" is
        taken as chosen). Before ownership is taken, the spec is checked too,
        so an invalid object never gets a finalizer and stays deletable.
        """
        try:
            check_references(self.obj)
            if self.holds:
                self.kind.check_external_name(self.name.current)
            else:
                self.kind.check_external_name(self.name.chosen)
                self.parameters()
        except TerminalError as exc:
            return exc
        return None

    def claim(self, deleting: bool) -> HandledError | None:
        """Claim the external name in the index: the conflict, or None when it is ours."""
        name = self.name.current if self.holds or deleting else self.name.claimed
        if not isinstance(name, str) or not name or self.index is None:
            return None
        holder = self.index.claim(self.obj, name)
        if holder is None:
            return None
        where = f"{holder[1]}/{holder[2]}" if holder[1] else holder[2]
        return NotOwnedError(f"external name {name[:64]!r} is held by {where}; "
                             "choose another name", reason="ExternalNameConflict")

    def admitted(self, admit: Admit | None) -> HandledError | None:
        """Ask the connector's optional ``admit`` whether the provider refuses an object not
        claimed yet, before anything is committed or created (the resource carries no
        password, and the name about to be taken): the refusal (terminal, or a failure to
        get the answer; the name is given back), or None."""
        if admit is None:
            return None
        try:
            config = self.provider_config()
            guarded(functools.partial(
                admit, self.resource(self.name.claimed, self.parameters()), config))
        except HandledError as exc:
            self.give_back()
            return exc
        return None

    def connection_secret(self, read_only: bool) -> TerminalError | None:
        """Check the connection Secret and read its password, or persist a new object's
        first, before anything is committed (:meth:`ConnectionSecrets.take_over`).

        A Secret outside the namespace or not the object's is refused (the
        name claimed by this pass given back); an error persisting the
        password is kept for the connection (:meth:`managed_resource`).
        """
        try:
            self.password = self.secrets.take_over(self.obj, holds=self.holds,
                                                   read_only=read_only, forced=self.forced)
        except TerminalError as exc:
            self.give_back()
            return exc
        except HandledError as exc:
            self.password_error = exc
        self.password_read = True
        return None

    def give_back(self) -> None:
        """Release the name this pass claimed for an object that did not hold it."""
        if not self.holds and self.index is not None and self.name.claimed:
            self.index.release(self.obj, self.name.claimed)

    def inputs(self, deleting: bool, read_only: bool) -> Inputs:
        """What connect needs: the resource (:meth:`managed_resource`) and the provider config
        (:meth:`provider_config`), or the error reading them. A deletion under a name no
        provider can hold has nothing to delete (``absent``)."""
        if deleting:
            try:
                self.kind.check_external_name(self.name.current)
            except TerminalError:
                return Inputs(absent=True)
        try:
            resource = self.managed_resource(deleting, read_only)
            return Inputs(resource, self.provider_config())
        except HandledError as exc:
            return Inputs(error=exc)

    # ------------------------------------------------------- reads on the object

    def parameters(self) -> Any:
        """The spec's parameters, parsed once per pass; a spec that does not parse raises
        its :class:`TerminalError` each time they are asked for."""
        if self.parsed is None:
            try:
                self.parsed = (self.kind.parse_parameters(self.obj.get("spec")), None)
            except TerminalError as exc:
                self.parsed = (None, exc)
        parameters, refusal = self.parsed
        if refusal is not None:
            raise refusal
        return parameters

    def provider_config(self) -> ProviderConfig:
        """The object's provider config with its credentials (noted for redaction): read
        once per pass, through the supporting reads' cache."""
        if self.config is None:
            ref = objects.mapping(objects.spec(self.obj).get("providerConfigRef"))
            name = str(ref.get("name") or "default")
            self.config = self.credentials(self.reads.get(("config", name), functools.partial(
                provider_config, self.api, name, self.kind.provider_config_api)))
        return self.config

    def resource(self, external_name: str, parameters: Any,
                 password: str | None = None) -> ManagedResource:
        """The :class:`ManagedResource` of the pass's object under ``external_name``."""
        meta = self.obj["metadata"]
        return ManagedResource(
            kind=self.kind.kind, namespace=meta.get("namespace", ""), name=meta["name"],
            uid=meta["uid"], generation=self.generation, external_name=external_name,
            parameters=parameters, password=password,
            owner_mark=owner_mark(self.operator, meta["uid"]),
            observed=objects.mapping(objects.status(self.obj).get("atProvider")))

    def managed_resource(self, deleting: bool, read_only: bool) -> ManagedResource:
        """The resource to connect to, under the name the object took ownership with
        (:func:`managed_name`), with its password: the one the take-over read or persisted
        (or the error it met), else read from the connection Secret (while ``deleting``).
        A spec that does not parse gives no parameters while ``deleting``, and raises
        otherwise."""
        self.external_name = managed_name(self)
        try:
            parameters = self.parameters()
        except TerminalError:
            if not deleting:
                raise
            parameters = None  # a broken spec must not block deletion
        password = self.password
        if self.password_error is not None:
            raise self.password_error
        if self.kind.password and password is None and not self.password_read:
            password = self.secrets.password(self.obj, deleting or read_only, self.forced,
                                             deleting=deleting)
        return self.resource(self.external_name, parameters, password)

    def credentials(self, config: Any) -> Any:
        """Note the credential values of ``config`` (a ProviderConfig) for redaction; return it."""
        self.redact = credential_values(config.credentials)
        return config

    def scrubbed(self, status: Mapping[str, Any], events: Iterable[tuple[str, str, str]]
                 ) -> tuple[dict[str, Any], list[tuple[str, str, str]]]:
        """``status`` and ``events`` with no credential value noted in this pass."""
        return redact_status(status, self.redact), redact_events(events, self.redact)

    # ------------------------------------------------------------ staged metadata
    def stage_change(self, change: Callable[[dict[str, Any]], Any], *,
                     deferred: bool = False) -> None:
        """Stage a metadata change for the next object write; unless ``deferred``, the
        pass writes it at the latest before its status."""
        self.staged.append(change)
        self.pressing = self.pressing or not deferred

    def committed(self) -> None:
        """Forget the staged changes: an object write just carried them."""
        self.staged.clear()
        self.pressing = False

    def acquire(self) -> None:
        """Take ownership: stage the finalizer and the external name.

        They are committed with the first object write of the pass: the
        pending journal entry written before any mutating external call, or,
        when the pass calls nothing, the write before the status. A resource
        can then only be created under a name the object already records, and
        the object cannot vanish while the resource exists; observing (which
        changes nothing) may come first. An object that holds both already
        stages nothing.
        """
        if not self.holds:
            self.stage_change(functools.partial(_acquire, external=self.name.claimed))

    def drop_operation(self) -> None:
        """Remove the ``reconcile`` operation annotation that forced this pass (one write)."""
        self.mutate(_drop_operation)

    # ------------------------------------- the object as the intent journal sees it
    def annotations(self) -> Mapping[str, Any]:
        """The object's annotations with the staged changes applied (read-only)."""
        if not self.staged:  # nothing to apply: the object's own, without a copy
            return objects.annotations(self.obj)
        return objects.annotations({"metadata": staged_meta(self)})

    def annotate(self, key: str, value: str) -> None:
        """Commit one annotation, with everything staged, before returning."""
        self.mutate(functools.partial(_set_annotation, key=key, value=value))

    def stage(self, key: str, value: str) -> None:
        """Set one annotation with the pass's next object write."""
        self.stage_change(functools.partial(_set_annotation, key=key, value=value))

    def defer(self, key: str, value: str) -> None:
        """Set one annotation with the pass's next object write, if it makes one."""
        self.stage_change(functools.partial(_set_annotation, key=key, value=value),
                          deferred=True)

    # ---------------------------------------------------------------- write-back
    def write_back(self, facts: Facts, decision: Decision, *, connection: Mapping[str, str],
                   clock: Callable[[], datetime], first: tuple[Facts, Decision] | None = None,
                   notices: Iterable[HandledError] = ()) -> Conclusion:
        """Write the pass back, in order, once it has acted: its conclusion.

        The ``notices`` are noted; provider defaults are late-initialised
        into the spec (:meth:`late_init`), the ``connection`` details published
        (:meth:`publish`); then the pass concludes
        (:func:`~lifecycle.core.conclusion.conclusion`; ``first``: the call's
        facts and decision before it saw what the call left) and writes the
        conclusion (:meth:`write_out`).
        """
        self.notes.extend(informational(exc, self.generation) for exc in notices)
        observation = facts.observation
        if observation is not None and observation.late_init and not facts.deleting and (
            facts.policy.allows_modify
        ):
            self.late_init(self.kind.to_spec(observation.late_init))
        if self.observed is not None:
            facts = attrs.evolve(facts, generation=self.observed)
        decision = self.publish(connection, facts, decision)
        old = objects.status(self.obj)
        done = conclusion(self.kind.machine, self.obj, facts, decision, first=first,
                          clock=clock, notes=self.notes, external_name=self.external_name,
                          dirty=self.dirty)
        self.write_out(done.plan.settled.status, done.events, old, final=done.final,
                       leaving=done.leaving)
        return done

    def publish(self, connection: Mapping[str, str], facts: Facts,
                decision: Decision) -> Decision:
        """Merge ``connection`` into the connection Secret, unless the pass deletes, fails
        or moves to a final state; the decision, failing when the Secret cannot be written."""
        transition = decision.transition
        final_next = (transition is not None
                      and self.kind.machine.table().states[transition.target].final)
        if connection and not facts.deleting and not final_next and decision.error is None:
            try:
                self.secrets.publish(self.obj, connection, self.forced)
            except HandledError as exc:
                return decision.failing(exc, "publish")
        return decision

    def write_out(self, status: dict[str, Any], events: Iterable[tuple[str, str, str]],
                  old: Mapping[str, Any], *, final: bool, leaving: bool) -> None:
        """Write the pass's conclusion, with no credential value in the status or an Event.

        Unless the state is ``final``, what is still staged is committed; the
        Events are recorded; the status is written once if it differs from
        ``old`` (or the pass is forced), unless the object is ``leaving`` with
        our finalizer; on a final state the finalizer is removed.
        """
        status, events = self.scrubbed(status, events)
        if not final:
            self.commit_staged()
        for type_, reason, message in events:
            record_event(self.api, self.obj, type_, reason, message)
        if not leaving and (status != old or self.forced):
            self.write_status(status)
        if final:
            self.mutate(functools.partial(remove_finalizer, name=FINALIZER))

    def write_status(self, status: dict[str, Any]) -> None:
        """Write ``status`` as the object's status."""
        def attempt() -> None:
            body = dict(self.obj)
            body["status"] = status
            try:
                self.obj = self.api.replace_status(body)
            except NotFound:
                raise ObjectGone from None

        on_conflict(attempt, self.refresh, what="status write")

    def mutate(self, change: Callable[[dict[str, Any]], Any]) -> None:
        """Apply the staged changes and ``change`` to metadata and commit them in one write,
        retrying 409s from a fresh read."""
        def attempt() -> None:
            body = dict(self.obj)
            body["metadata"] = staged_meta(self)
            change(body["metadata"])
            if body["metadata"] != self.obj["metadata"]:
                try:
                    self.obj = self.api.replace(body)
                except NotFound:
                    raise ObjectGone from None
            self.committed()

        on_conflict(attempt, self.refresh, what="object write")

    def commit_staged(self) -> None:
        """Commit what is staged, when something staged needs a write of its own
        (a deferred change alone waits for a later write)."""
        if self.staged and self.pressing:
            self.mutate(_unchanged)

    def late_init(self, fields: Mapping[str, Any]) -> None:
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
            missing = _missing(self.obj, fields)
            if missing:
                body = dict(self.obj)
                body["metadata"] = staged_meta(self)
                self._write_spec(body, missing)
                self.committed()

        on_conflict(attempt, self.refresh, what="late-init write")

    def _write_spec(self, body: dict[str, Any], missing: Mapping[str, Any]) -> None:
        """Write ``body`` with ``missing`` filled into its parameters; note the generation."""
        spec = self.obj["spec"]
        body["spec"] = {**spec, "forProvider": {**spec["forProvider"], **missing}}
        before = self.obj["metadata"].get("generation")
        try:
            self.obj = self.api.replace(body)
        except NotFound:
            raise ObjectGone from None
        written = (self.obj.get("spec") or {}).get("forProvider") or {}
        after = self.obj["metadata"].get("generation")
        if after != before and all(written.get(k) is not None for k in missing):
            if before == self.generation and isinstance(after, int):
                self.observed = after
            else:
                self.dirty = True
        else:
            self.notes.append(config_note(
                "LateInitNotPersisted",
                f"provider defaults for {', '.join(sorted(missing))} could not be written "
                "to spec.forProvider (pruned by the schema?)", self.generation))

    def refresh(self) -> None:
        """Read the object afresh after a conflict; gone means the pass is over."""
        meta = self.obj["metadata"]
        try:
            self.obj = self.api.get(self.kind.api_version, self.kind.kind,
                                    meta.get("namespace"), meta["name"])
        except NotFound:
            raise ObjectGone from None


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


def _set_annotation(meta: dict[str, Any], key: str, value: str) -> None:
    meta.setdefault("annotations", {})[key] = value


def _acquire(meta: dict[str, Any], external: str) -> None:
    add_finalizer(meta, FINALIZER)
    meta.setdefault("annotations", {}).setdefault(EXTERNAL_NAME, external)


def _drop_operation(meta: dict[str, Any]) -> None:
    meta.get("annotations", {}).pop(OPERATION, None)


def _unchanged(meta: dict[str, Any]) -> None:
    """No change of its own: the write carries what is staged."""


def _missing(obj: Mapping[str, Any], fields: Mapping[str, Any]) -> dict[str, Any]:
    """The ``fields`` the object's ``spec.forProvider`` leaves unset (none without one)."""
    if not fields:
        return {}
    spec = obj.get("spec")
    params = spec.get("forProvider") if objects.is_mapping(spec) else None
    if not objects.is_mapping(params):
        return {}
    return {k: v for k, v in fields.items() if params.get(k) is None and v is not None}
