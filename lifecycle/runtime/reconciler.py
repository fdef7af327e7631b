"""The generic managed reconciler: one pass, top to bottom.

The decisions are pure and shared with the dry run (:mod:`lifecycle.core.plan`);
this module only adds the I/O around them:

1. get the object; :func:`~lifecycle.core.decide.gate` decides from it alone
   whether the pass goes on (``ignore`` annotation, namespace ownership,
   pause, policies, a terminal failure of this generation);
2. a paused object only has its status held (:func:`~lifecycle.core.plan.held`);
   the references are resolved into the spec; a ``reconcile`` operation
   annotation is removed (first, for a paused or orphaning pass);
3. take the object over (:meth:`Pass.take_over
   <lifecycle.runtime.passes.Pass.take_over>`): the references, the spec and
   the external name are checked, the name is claimed, the connector's optional ``admit`` is asked
   whether the provider refuses the object, and the connection Secret's
   namespace and owner are checked and its password read or first persisted
   (a refusal, or a failure to ask, is a condition only: nothing is
   committed or created, no finalizer, no external call); then the finalizer
   and the external name are staged: they are committed with the first
   object write of the pass, which precedes any mutating external call (the
   pending intent-journal entry's), or at the latest before the status write
   (skipped by an orphaning deletion, which calls nothing);
4. connect and observe, and gather the facts (:func:`~lifecycle.core.plan.gather`);
   a pending intent-journal entry whose effect the observation shows is
   closed as succeeded (staged to ride on the next object write; for a kind
   naming its own resources, only if the pass makes one);
5. :func:`~lifecycle.core.decide.decide` one event and its transition, then
   run the transition's actions (the external calls, behind the intent
   journal of :class:`~lifecycle.runtime.effects.Effects`); when the call
   says what it left (:class:`~lifecycle.core.values.Completion`) and that
   moves the resource on, decide again from it in the same pass;
6. write back (:meth:`Pass.write_back
   <lifecycle.runtime.passes.Pass.write_back>`): late-initialise the spec
   (carrying whatever metadata is staged) and publish the connection Secret;
   commit what is still staged; :func:`~lifecycle.core.conclusion.conclusion`:
   status, Events and the requeue result; write the status once if it
   changed (observing the generation of a late-initialisation write of this
   pass); remove the finalizer on the final state (with no status write and
   no Normal Event when the object goes with it).

Handled errors end in the Failed state with a condition (a connect or
observe error that is not terminal holds a state reporting Ready instead:
Synced False, Ready as last observed); API errors other
than NotFound, and a write that kept conflicting, propagate as
:class:`UnhandledError` for the work queue's backoff.

The pass itself is a :class:`~lifecycle.runtime.passes.Pass`: its state and
every read and write on the object (finalizer, annotations, late-initialised
spec, status; each retries a 409 from a fresh read, staged metadata changes
re-applied to it). This module only says in which order they happen.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from datetime import datetime
from typing import ClassVar

import attrs

from lifecycle.core import objects
from lifecycle.core.conclusion import informational
from lifecycle.core.contract import Connector, admission, bind_objects
from lifecycle.core.decide import Decision, Facts, Gate, ReconcilePolicy, decide, gate
from lifecycle.core.errors import HandledError, UnhandledError
from lifecycle.core.externalname import external_name_of
from lifecycle.core.kind import Kind
from lifecycle.core.ownership import Verdict, acted_on, adoption_requested, judge
from lifecycle.core.plan import Plan, gather, held
from lifecycle.core.values import Observation, Result, now
from lifecycle.kube.cluster import Cluster
from lifecycle.kube.conflict import ConflictsExhausted
from lifecycle.kube.errors import ApiError, NotFound, TooManyRequests
from lifecycle.kube.events import record_event
from lifecycle.runtime.effects import Effects, Inputs, connect, run_actions
from lifecycle.runtime.journalkey import Journal, subject_of
from lifecycle.runtime.names import NameIndex, kind_objects, read_object
from lifecycle.runtime.passes import ObjectGone, Pass
from lifecycle.runtime.reads import TTLCache, namespace_annotations
from lifecycle.runtime.references import References
from lifecycle.runtime.secrets import ConnectionSecrets, generate_password

__all__ = ["ObjectGone", "Pass", "Reconciler"]

log = logging.getLogger("lifecycle.runtime.reconciler")

#: Errors of the engine's own that end the pass even inside a machine's actions.
PASSTHROUGH = (UnhandledError, ApiError, ObjectGone, ConflictsExhausted)


class Reconciler:
    """Reconciles objects of one :class:`Kind` with one provider connector.

    ``operator_id`` names this operator instance for namespace ownership;
    ``default_policy`` is the operator-wide reconcile policy; ``clock`` and
    ``password_factory`` are injectable for tests. ``reads_ttl`` (seconds,
    default 0: off) lets the supporting reads every pass makes (the
    namespace's annotations, the provider config and its credentials) be
    reused for that long, the way an operator reads them from a cache; a
    change to them then takes effect within ``reads_ttl``.
    ``allow_cross_namespace_secrets`` lets a namespaced object write its
    connection Secret into another namespace (refused by default with
    ``SecretNamespaceNotAllowed``). ``allow_adoption`` names the namespaces
    (``"*"``: all, cluster-scoped objects included) whose objects may adopt an
    existing external resource they did not create, with the
    ``lifecycle.dev/adopt`` annotation. ``names`` is the index of claimed
    external names (one owner per name); by default it is loaded from a list
    of the kind's objects. ``journal_key`` seals the intent journal
    (:mod:`lifecycle.runtime.journalkey`; default: this process's key).
    ``pass_type`` is the class of the pass object (:class:`Pass`).
    """

    pass_type: ClassVar[type[Pass]] = Pass

    def __init__(
        self,
        api: Cluster,
        kind: Kind,
        connector: Connector,
        *,
        operator_id: str | None = None,
        default_policy: ReconcilePolicy = ReconcilePolicy.MANAGE,
        clock: Callable[[], datetime] = now,
        password_factory: Callable[[], str] = generate_password,
        reads_ttl: float = 0.0,
        allow_cross_namespace_secrets: bool = False,
        allow_adoption: frozenset[str] = frozenset(),
        names: NameIndex | None = None,
        journal_key: bytes | None = None,
    ) -> None:
        self.api, self.journal = api, Journal() if journal_key is None else Journal(journal_key)
        self.allow_adoption = frozenset(allow_adoption)
        # A cluster that cannot list starts with an empty index.
        listed = functools.partial(kind_objects, api, kind.api_version, kind.kind)
        self.names = names if names is not None else NameIndex(
            listed, functools.partial(read_object, api, kind.api_version, kind.kind),
            kind.scope_of)
        self.allow_cross_namespace_secrets = allow_cross_namespace_secrets
        self.reads = TTLCache(reads_ttl)
        self.kind = kind
        self.connector = connector
        bind_objects(connector, kind, listed)
        self.operator_id = operator_id
        self.default_policy = default_policy
        self.clock = clock
        self.password_factory = password_factory
        self.table = kind.machine.table()
        self.host = kind.machine.guard_host()
        self.timing = kind.machine.timing
        self.references = References(kind)

    # ------------------------------------------------------------------ entry
    def reconcile(self, namespace: str | None, name: str) -> Result:
        """Run one reconcile of ``namespace/name`` and return the requeue result."""
        try:
            return self._reconcile(namespace, name)
        except ObjectGone:
            return Result.done("NotFound")
        except TooManyRequests as exc:
            # The API server asked us to slow down: back off, honouring its Retry-After.
            return Result.backoff("APIThrottled", at_least=exc.retry_after)
        except ApiError as exc:
            raise UnhandledError(f"API error during reconcile: {exc}") from exc
        except ConflictsExhausted as exc:  # a write met a 409 at every attempt
            raise UnhandledError(str(exc)) from None

    def _reconcile(self, namespace: str | None, name: str) -> Result:
        kind = self.kind
        try:
            obj = self.api.get(kind.api_version, kind.kind, namespace, name)
        except NotFound:
            return Result.done("NotFound")
        # The gate: operation annotation, ownership, policies, decided before any write.
        g = gate(kind.machine, obj, self.reads.get(("ns", namespace), functools.partial(
                     namespace_annotations, self.api, namespace)),
                 operator_id=self.operator_id, default_policy=self.default_policy)
        if g.stop == "NotOwned":
            record_event(self.api, obj, "Warning", "NotOwned", g.stop_message)
        if g.stop is not None:
            return Result.done(g.stop)
        if g.repaired is not None:
            record_event(self.api, obj, "Warning", "StateRepaired", g.notes[0].message)
        # The pass starts: its external name resolved once, read by every later step.
        run = self.pass_type(
            obj=obj, state=g.state, generation=g.generation,
            secrets=ConnectionSecrets(self.api, kind, self.password_factory,
                                      allow_cross_namespace=self.allow_cross_namespace_secrets),
            api=self.api, kind=kind, reads=self.reads, index=self.names,
            operator=self.operator_id or "lifecycle", forced=g.forced, notes=list(g.notes),
            name=external_name_of(obj, kind.external_name))
        run.holds = run.name.holds  # read by every step up to the first object write
        if g.paused or g.orphan:
            if g.forced:
                run.drop_operation()
            if g.paused:
                return self._held(run, g)
            # Leaving the external resource behind needs no provider at all.
            return self._run(run, gather(g, objects.status(run.obj)), None)
        # The references resolved into the spec; a forced pass's operation annotation removed.
        refused = None if g.deleting else self.references.resolve(run)
        if g.forced:
            run.drop_operation()
        # Take-over: the pass's checks, the name claimed, the provider asked, the connection
        # Secret, ownership staged and the connection's inputs read. A refusal is a
        # condition only, nothing committed.
        taken = Inputs(refused=refused) if refused is not None else run.take_over(
            admission(self.connector), deleting=g.deleting, modify=g.policy.allows_modify)
        if taken.refused is not None:
            return self._run(run, gather(g, objects.status(run.obj), error=taken.refused), None)
        if taken.absent:  # another object's name, or one no provider holds: nothing to delete
            return self._run(run, gather(g, objects.status(run.obj),
                                         observation=Observation.absent()), None)
        facts, effects = self._observe(run, g, taken)
        # The trusted journal entry, read once: the ownership rule's, and the actions'.
        meta = run.obj["metadata"]
        run.entry = self.journal.read(objects.annotations(run.obj), subject_of(
            kind.kind, meta.get("namespace"), meta["name"], meta["uid"], run.external_name))
        try:
            return self._run(run, self._judge(run, facts), effects)
        finally:
            if effects is not None and not effects.closed:
                effects.close()

    def _judge(self, run: Pass, facts: Facts) -> Facts:
        """Apply the ownership rule to what observe saw (:func:`lifecycle.core.ownership.judge`),
        with the trusted journal entry on the object (``run.entry``).

        A resource this object does not own is never changed: the pass fails
        with the refusal, or, when the object is being deleted, treats the
        resource as gone so that only the finalizer is removed. Under a policy
        that changes nothing (``skip``) it is only observed. A resource that
        is this object's but unmarked is updated, which writes the mark.
        """
        meta = run.obj["metadata"]
        namespace = meta.get("namespace")
        annotations = objects.annotations(run.obj)
        verdict = judge(facts.observation, uid=meta["uid"], name=run.external_name,
                        acted_before=acted_on(run.entry),
                        adopt=adoption_requested(annotations),
                        adoption_allowed="*" in self.allow_adoption or (
                            namespace is not None and namespace in self.allow_adoption),
                        namespace=namespace, operator=self.operator_id or "lifecycle")
        observation = facts.observation
        if verdict.verdict is Verdict.REFUSED and observation is not None:
            if facts.deleting:
                run.notes.append(informational(HandledError(
                    f"external resource {run.external_name[:64]!r} is not this object's: "
                    "left untouched", reason="ExternalResourceLeftAlone"), run.generation))
                return attrs.evolve(facts, observation=Observation.absent())
            if facts.policy.allows_modify:
                return attrs.evolve(facts, observation=None, error=verdict.error)
        if (verdict.verdict is Verdict.MARK and observation is not None
                and not facts.deleting and facts.policy.allows_modify):
            return attrs.evolve(facts, observation=attrs.evolve(observation, up_to_date=False))
        return facts

    # --------------------------------------------------------------- observing
    def _observe(self, run: Pass, g: Gate, taken: Inputs) -> tuple[Facts, Effects | None]:
        """Connect and observe (:func:`~lifecycle.runtime.effects.connect`) with what the
        take-over read; an error reading it or doing so becomes the facts' error."""
        old = objects.status(run.obj)
        if taken.resource is None or taken.config is None:
            return gather(g, old, error=taken.error), None
        try:
            effects, observation = connect(
                self.connector, taken.resource, taken.config, run, self.clock,
                self.journal, defer_closes=not self.kind.names_assigned,
                ready=g.state == "ready", resume=g.deleting and self.kind.names_assigned)
        except HandledError as exc:
            return gather(g, old, error=exc), None
        run.external_name = effects.resource.external_name  # as a resumed create named it
        return gather(g, old, observation=observation), effects

    # ------------------------------------------------------------------ running
    def _run(self, run: Pass, facts: Facts, effects: Effects | None) -> Result:
        """Decide, carry the decision out, conclude and write the conclusion."""
        machine = self.kind.machine
        decision = decide(machine, facts)
        first: tuple[Facts, Decision] | None = None
        notices: tuple[HandledError, ...] = ()
        if effects is not None:
            # The journal's object writes fail as the pass's own writes do.
            decision, notices, following = effects.act(
                facts, decision, self.host, machine, entry=run.entry,
                observe_after_create=self.kind.observe_after_create, passthrough=PASSTHROUGH)
            if effects.external_name:
                run.external_name = effects.external_name
            if following is not None:
                first, (facts, decision) = (facts, decision), following
        elif decision.actions:
            decision, notices = run_actions(decision, self.host, None, passthrough=PASSTHROUGH)
        connection: dict[str, str] = {}
        if facts.observation is not None:
            connection.update(facts.observation.connection)
        if effects is not None:
            connection.update(effects.connection)
        # Write back: late-init, the connection Secret, the conclusion, the object.
        done = run.write_back(facts, decision, connection=connection, clock=self.clock,
                              first=first, notices=notices)
        if done.final:
            name = external_name_of(run.obj).current  # as the pass leaves the object
            if isinstance(name, str) and name:
                self.names.release(run.obj, name)
        self._log_transition(run, done.source, done.plan)
        return done.plan.result

    def _log_transition(self, run: Pass, source: str, concluded: Plan) -> None:
        """One INFO line when the pass moved the object to another state: kind, object,
        from, to and the reason (a code, never a provider's message)."""
        if concluded.target == source:
            return
        meta = objects.metadata(run.obj)
        key = "/".join(str(p) for p in (meta.get("namespace"), meta.get("name")) if p)
        log.info("%s %s: %s -> %s (%s)", self.kind.kind, key, source, concluded.target,
                 concluded.choice.reason,
                 extra={"kind": self.kind.kind, "object": key, "from": source,
                        "to": concluded.target, "reason": concluded.choice.reason})

    def _held(self, run: Pass, g: Gate) -> Result:
        """A paused pass: hold the status (Synced False ``ReconcilePaused``), call nothing."""
        old = objects.status(run.obj)
        concluded = held(g, old, self.clock())
        if concluded.settled.status != old or run.forced:
            run.write_status(concluded.settled.status)
        return concluded.result
