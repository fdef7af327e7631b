"""The generic managed reconciler: one pass, top to bottom.

The decisions are pure and shared with the dry run (:mod:`lifecycle.core.plan`);
this module only adds the I/O around them:

1. get the object; :func:`~lifecycle.core.decide.gate` decides from it alone
   whether the pass goes on (``ignore`` annotation, namespace ownership,
   pause, policies, a terminal failure of this generation);
2. remove a ``reconcile`` operation annotation; a paused object only has its
   status held (:func:`~lifecycle.core.plan.held`);
3. validate, then take ownership: the references, the connection Secret's
   namespace and owner, the spec and the external name are checked first (a
   refusal is a terminal condition, with no finalizer and no external call),
   then the connector's optional ``admit`` is asked whether the provider refuses
   the object (a refusal, or a failure to ask, is a condition only: nothing is
   committed or created), then the finalizer and the external name are staged:
   they are committed
   with the first object write of the pass, which precedes any mutating
   external call (the pending intent-journal entry's), or at the latest
   before the status write (skipped by an orphaning deletion, which calls
   nothing);
4. connect and observe, and gather the facts (:func:`~lifecycle.core.plan.gather`);
   a pending intent-journal entry whose effect the observation shows is
   closed as succeeded (staged to ride on the next object write; for a kind
   naming its own resources, only if the pass makes one);
5. :func:`~lifecycle.core.decide.decide` one event and its transition, then
   run the transition's actions (the external calls, behind the intent
   journal of :class:`~lifecycle.runtime.effects.Effects`); when the call
   says what it left (:class:`~lifecycle.core.values.Completion`) and that
   moves the resource on, decide again from it in the same pass;
6. late-initialise the spec (carrying whatever metadata is staged) and
   publish the connection Secret;
7. commit what is still staged; :func:`~lifecycle.core.plan.conclude`:
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
from lifecycle.core.contract import Connector, admission, bind_objects
from lifecycle.core.decide import Decision, Facts, Gate, ReconcilePolicy, decide, gate
from lifecycle.core.errors import HandledError, TerminalError, UnhandledError
from lifecycle.core.kind import FINALIZER, Kind
from lifecycle.core.ownership import NotOwnedError, Verdict, acted_on, adoption_requested, judge
from lifecycle.core.plan import Plan, conclude, gather, held, passage
from lifecycle.core.values import Intent, Observation, Result, now
from lifecycle.kube.cluster import Cluster
from lifecycle.kube.conflict import ConflictsExhausted
from lifecycle.kube.errors import ApiError, NotFound, TooManyRequests
from lifecycle.runtime.effects import Effects, connect, guarded, run_actions
from lifecycle.runtime.journalkey import Journal, subject_of
from lifecycle.runtime.names import NameIndex, external_name_of, kind_objects, read_object
from lifecycle.runtime.passes import ObjectGone, Pass, informational, record_event
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
            api=self.api, kind=kind, reads=self.reads,
            operator=self.operator_id or "lifecycle", forced=g.forced, notes=list(g.notes),
            name=external_name_of(obj, kind.external_name))
        if g.forced:
            run.drop_operation()
        run.holds = run.name.holds  # read by every step up to the first object write
        if g.paused:
            return self._held(run, g)
        if g.orphan:
            # Leaving the external resource behind needs no provider at all.
            return self._run(run, gather(g, objects.status(run.obj)), None)
        # Take-over checks: a refusal is a condition only, before anything is committed.
        creating = self.kind.password and not g.deleting and g.policy.allows_modify
        refused: HandledError | None = None if g.deleting else (
            self.references.resolve(run) or run.validate(creating))
        if refused is None:
            refused = self._claim(run, g.deleting)
            if refused is not None and g.deleting:
                # Another object holds the name: leave its resource alone.
                return self._run(run, gather(g, objects.status(run.obj),
                                             observation=Observation.absent()), None)
            if refused is None and not (run.holds or g.deleting) and g.policy.allows_modify:
                refused = self._admit(run)
            if refused is None and creating and not run.holds:
                refused = self._first_password(run)
        if refused is not None:
            return self._run(run, gather(g, objects.status(run.obj), error=refused), None)
        # Ownership is staged, to ride on the first object write.
        run.acquire()
        facts, effects = self._observe(run, g)
        # The trusted journal entry, read once: the ownership rule's, and the actions'.
        meta = run.obj["metadata"]
        entry = self.journal.read(objects.annotations(run.obj), subject_of(
            kind.kind, meta.get("namespace"), meta["name"], meta["uid"], run.external_name))
        try:
            return self._run(run, self._judge(run, facts, entry), effects, entry)
        finally:
            if effects is not None and not effects.closed:
                effects.close()

    def _admit(self, run: Pass) -> HandledError | None:
        """Ask the connector's optional ``admit`` (:class:`~lifecycle.core.contract.Connector`)
        whether the provider refuses an object not claimed yet: the refusal, or None.

        Runs before anything is committed or created: the resource carries no
        password (no Secret is read or made) and the name about to be taken.
        On a refusal (terminal, or a failure to get the answer) the name claimed
        for the pass is given back; the pass ends with the condition only.
        """
        admit = admission(self.connector)
        if admit is None:
            return None
        name = run.name.claimed
        try:
            config = run.provider_config()
            guarded(functools.partial(admit, run.resource(name, run.parameters()), config))
        except HandledError as exc:
            self.names.release(run.obj, name)
            return exc
        return None

    def _first_password(self, run: Pass) -> TerminalError | None:
        """Persist the password of an object not claimed yet, before anything is committed.

        The Secret was looked up in a cache (:meth:`Pass.validate`); the create
        that persists the password finds one the cache does not hold. Another's
        Secret is then refused as in validation, and the name claimed for the
        pass given back. Any other error is left to the pass.
        """
        try:
            run.password = run.secrets.ensure_password(run.obj, run.forced)
        except TerminalError as exc:
            name = run.name.claimed
            if name:
                self.names.release(run.obj, name)
            return exc
        except HandledError:
            pass
        return None

    def _claim(self, run: Pass, deleting: bool) -> HandledError | None:
        """Claim the external name in the index: the conflict, or None when it is ours."""
        name = run.name.current if run.holds or deleting else run.name.claimed
        if not isinstance(name, str) or not name:
            return None
        holder = self.names.claim(run.obj, name)
        if holder is None:
            return None
        where = f"{holder[1]}/{holder[2]}" if holder[1] else holder[2]
        return NotOwnedError(f"external name {name[:64]!r} is held by {where}; "
                             "choose another name", reason="ExternalNameConflict")

    def _judge(self, run: Pass, facts: Facts, entry: Intent | None) -> Facts:
        """Apply the ownership rule to what observe saw (:func:`lifecycle.core.ownership.judge`).

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
                        acted_before=acted_on(entry),
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
    def _observe(self, run: Pass, g: Gate) -> tuple[Facts, Effects | None]:
        """Connect and observe (:func:`~lifecycle.runtime.effects.connect`); an error doing
        so becomes the facts' error."""
        old = objects.status(run.obj)
        if g.deleting:
            try:
                self.kind.check_external_name(run.name.current)
            except TerminalError:
                # No provider can hold a resource under an invalid name: nothing to delete.
                return gather(g, old, observation=Observation.absent()), None
        try:
            resource = run.managed_resource(g.deleting, not g.policy.allows_modify)
            effects, observation = connect(
                self.connector, resource, run.provider_config(), run, self.clock,
                self.journal, defer_closes=not self.kind.names_assigned,
                ready=g.state == "ready", resume=g.deleting and self.kind.names_assigned)
        except HandledError as exc:
            return gather(g, old, error=exc), None
        run.external_name = effects.resource.external_name  # as a resumed create named it
        return gather(g, old, observation=observation), effects

    # ------------------------------------------------------------------ running
    def _run(self, run: Pass, facts: Facts, effects: Effects | None,
             entry: Intent | None = None) -> Result:
        """Decide, carry the decision out (``entry``: the trusted journal entry), conclude
        and write the conclusion."""
        machine = self.kind.machine
        decision = decide(machine, facts)
        first: tuple[Facts, Decision] | None = None
        notices: tuple[HandledError, ...] = ()
        if effects is not None:
            # The journal's object writes fail as the pass's own writes do.
            decision, notices, following = effects.act(
                facts, decision, self.host, machine, entry=entry,
                observe_after_create=self.kind.observe_after_create, passthrough=PASSTHROUGH)
            if effects.external_name:
                run.external_name = effects.external_name
            if following is not None:
                first, (facts, decision) = (facts, decision), following
        elif decision.actions:
            decision, notices = run_actions(decision, self.host, None, passthrough=PASSTHROUGH)
        if notices:
            run.notes.extend(informational(exc, run.generation) for exc in notices)
        observation = facts.observation
        if observation is not None and observation.late_init and not facts.deleting and (
            facts.policy.allows_modify
        ):
            run.late_init(self.kind.to_spec(observation.late_init))
        if run.observed is not None:
            facts = attrs.evolve(facts, generation=run.observed)
        connection: dict[str, str] = {}
        if observation is not None:
            connection.update(observation.connection)
        if effects is not None:
            connection.update(effects.connection)
        transition = decision.transition
        final_next = transition is not None and self.table.states[transition.target].final
        if connection and not facts.deleting and not final_next and decision.error is None:
            try:
                run.secrets.publish(run.obj, connection, run.forced)
            except HandledError as exc:
                decision = decision.failing(exc, "publish")
        old = objects.status(run.obj)
        made: Plan | None = None
        if first is not None:  # the create's own conclusion, then the observation's on it
            made = conclude(machine, old, first[0], first[1], now=self.clock(),
                            key=run.obj["metadata"]["uid"], notes=run.notes,
                            external_name=run.external_name)
        concluded = conclude(machine, old if made is None else made.settled.status,
                             facts, decision, now=self.clock(),
                             key=run.obj["metadata"]["uid"], notes=run.notes,
                             external_name=run.external_name, dirty=run.dirty)
        events = (concluded.settled.events if made is None
                  else passage(made, concluded))
        final = self.table.states[concluded.target].final
        leaving = final and self._leaving(run)
        if leaving:
            # The object goes with our finalizer: its status and the Normal Events
            # of this step would describe an object nobody can read any more.
            events = tuple(e for e in events if e[0] != "Normal")
        run.write_back(concluded.settled.status, events, old, final=final, leaving=leaving)
        if final:
            name = external_name_of(run.obj).current  # as the pass leaves the object
            if isinstance(name, str) and name:
                self.names.release(run.obj, name)
        self._log_transition(run, made.source if made is not None else concluded.source,
                             concluded)
        return concluded.result

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

    @staticmethod
    def _leaving(run: Pass) -> bool:
        """Whether removing our finalizer lets the object go (it is deleted, and ours
        is its last finalizer)."""
        meta = objects.metadata(run.obj)
        found = meta.get("finalizers")
        return bool(meta.get("deletionTimestamp")) and (
            not isinstance(found, list) or all(f == FINALIZER for f in found))

    def _held(self, run: Pass, g: Gate) -> Result:
        """A paused pass: hold the status (Synced False ``ReconcilePaused``), call nothing."""
        old = objects.status(run.obj)
        concluded = held(g, old, self.clock())
        if concluded.settled.status != old or run.forced:
            run.write_status(concluded.settled.status)
        return concluded.result
