"""What a transition's actions may do to the external resource, behind the intent journal.

A machine's actions receive an :class:`Effects` and call ``create``,
``update`` or ``delete``. Before each mutating call the journal entry
(operation, idempotency key, generation, start time) is committed to the
object's ``lifecycle.dev/intent`` annotation, with whatever else the pass
has staged (the finalizer and the external name on the first pass). A
failure is committed at once; a success is not written after the call: the
entry stays pending, and the next observation that shows the call took
effect closes it (:func:`closed_intent`), staged so that it rides on that
pass's next object write. Until then a retry reuses the pending key, exactly
as after a crash between the call and its outcome, and clients treat
create-of-existing as success, so nothing is created twice; once closed, a
later call of that operation gets a new key.

Every entry is written with its MAC (``lifecycle.dev/intent-mac``, the same
write), made with the operator's key for this object and external name
(:mod:`lifecycle.core.seal`); an entry without a MAC that checks out (written
by a tenant, copied from another object, replayed after the external name
changed) is read as no entry at all.

:func:`guarded` (:mod:`lifecycle.core.guard`, re-exported here) runs the
provider's code. :class:`Effects` knows nothing of the reconciler: it gets the
client, the resource, an :class:`ObjectPort` (read and commit annotations of
the reconciled object) and a clock. A pass enters it twice: :func:`connect`
connects and observes, :meth:`Effects.act` carries the decision out and
follows what the call left, then closes the client.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, Protocol

import attrs

from lifecycle.core.contract import (
    Connector,
    ExternalClient,
    ManagedResource,
    ProviderConfig,
    close_client,
)
from lifecycle.core.decide import Decision, Facts
from lifecycle.core.errors import ExternalError, HandledError, Severity
from lifecycle.core.guard import guarded
from lifecycle.core.kind import EXTERNAL_NAME, INTENT, INTENT_MAC
from lifecycle.core.plan import acted, after_action
from lifecycle.core.seal import Subject
from lifecycle.core.values import Completion, Creation, Intent, Observation, rfc3339
from lifecycle.runtime.journalkey import Journal

__all__ = [
    "Effects", "Inputs", "ObjectPort", "closed_intent", "connect", "guarded", "next_intent",
    "run_actions", "stored_intent",
]


def run_actions(
    decision: Decision,
    host: object,
    effects: object,
    operation: Callable[[], str | None] = lambda: None,
    passthrough: tuple[type[BaseException], ...] = (),
) -> tuple[Decision, tuple[HandledError, ...]]:
    """Carry out a decision: run its actions on the machine's ``host`` with ``effects``.

    Each action is guarded (:func:`guarded`); the first handled error ends
    them. An informational one is returned in the second item and the
    transition stands; any other makes the decision failing, with the
    operation ``operation()`` names (``action`` when it names none).
    Exceptions of the ``passthrough`` types propagate (:func:`guarded`).
    Works for any machine and effects type.
    """
    try:
        for action in decision.actions:
            guarded(functools.partial(getattr(host, action), effects), passthrough)
    except HandledError as exc:
        if exc.severity is Severity.INFORMATIONAL:
            return decision, (exc,)
        return decision.failing(exc, operation() or "action"), ()
    return decision, ()


class ObjectPort(Protocol):
    """The reconciled object as effects see it: its annotations, committing or staging one."""

    def annotations(self) -> Mapping[str, Any]:
        """The annotations of the object as last read or written, staged changes applied."""
        ...

    def annotate(self, key: str, value: str) -> None:
        """Commit one annotation (and anything staged) on the object before returning."""
        ...

    def stage(self, key: str, value: str) -> None:
        """Set one annotation with the object's next write (losing it in a crash is safe)."""
        ...

    def defer(self, key: str, value: str) -> None:
        """Set one annotation with the object's next write, if the pass makes one."""
        ...


def next_intent(previous: Intent | None, operation: str, uid: str, generation: int,
                at: datetime, *, settled: bool = False) -> Intent:
    """The journal entry for a call of ``operation`` (pure).

    A pending entry for the same operation and generation is resumed with
    its key (a crash interrupted it); otherwise a new key
    ``uid/operation/generation/sequence`` is minted, so a new intent is never
    mistaken for an old one by a provider that remembers client tokens.
    ``settled`` says the object has been seen Ready since the entry was
    written (its effect was observed; the close that says so was not worth a
    write of its own): the entry is not resumed.
    """
    if (not settled and previous is not None and previous.outcome == "pending"
            and previous.operation == operation and previous.generation == generation):
        return previous
    sequence = 1
    if previous is not None:
        tail = previous.key.rsplit("/", 1)[-1]
        sequence = int(tail) + 1 if tail.isdigit() else 1
    return Intent(operation, f"{uid}/{operation}/{generation}/{sequence}", generation,
                  rfc3339(at))


def closed_intent(intent: Intent | None, observation: Observation | None) -> Intent | None:
    """The pending ``intent`` closed as succeeded when ``observation`` shows its effect (pure).

    A create took effect when the resource exists, an update when it is up
    to date, a delete when it is absent. None when there is nothing to close:
    no pending entry, no observation, or an effect not (yet) visible, in
    which case a retry resumes the entry with its key.
    """
    if intent is None or observation is None or intent.outcome != "pending":
        return None
    done = {
        "create": observation.exists,
        "update": observation.exists and observation.up_to_date,
        "delete": not observation.exists,
    }.get(intent.operation, False)
    return attrs.evolve(intent, outcome="succeeded") if done else None


def stored_intent(annotations: Mapping[str, Any]) -> Intent | None:
    """The journal entry recorded in ``annotations``, or None when absent or unreadable.

    As written, sealed or not: for display only. What the engine acts on is
    read through :meth:`Journal.read <lifecycle.runtime.journalkey.Journal.read>`,
    which refuses an entry the operator did not seal for this object and name.
    """
    raw = annotations.get(INTENT)
    if not isinstance(raw, str):
        return None
    return _parsed_intent(raw)


# A pass reads the entry it just wrote several times: parse each text once. The
# result depends on the (immutable) text alone and Intent is frozen, so it never goes stale.
@functools.lru_cache(maxsize=64)
def _parsed_intent(raw: str) -> Intent | None:
    try:
        return Intent.from_dict(json.loads(raw))
    except (ValueError, TypeError, AttributeError):
        return None




@attrs.frozen
class Inputs:
    """What connect needs of a pass (the resource and its provider config), or why the
    pass goes on without connecting (:meth:`Pass.take_over
    <lifecycle.runtime.passes.Pass.take_over>`)."""

    #: The resource to connect to, under the name the object took ownership with.
    resource: ManagedResource | None = None
    #: The object's provider config, with its credentials.
    config: ProviderConfig | None = None
    #: A take-over check's refusal: the pass ends as a condition, nothing committed.
    refused: HandledError | None = None
    #: An error reading the connection's inputs (ownership is staged by then).
    error: HandledError | None = None
    #: A deletion with nothing to delete: its name is another object's, or invalid.
    absent: bool = False


def connect(connector: Connector, resource: ManagedResource, config: ProviderConfig,
            port: ObjectPort, clock: Callable[[], datetime], journal: Journal, *,
            defer_closes: bool = False, ready: bool = False,
            resume: bool = False) -> tuple[Effects, Observation]:
    """Connect to the provider and observe the resource: the pass's :class:`Effects` and
    what observe saw.

    ``resume`` (a deletion, for a kind whose provider assigns names): when
    nothing is seen, a create interrupted before the name it assigned was
    recorded is repeated with its journalled key to learn the name
    (:meth:`Effects.resume_create`), and the resource observed there. An
    answer of observe that is not an :class:`Observation`, or whose ownership
    mark is not text, is an ``InvalidObservation`` error. An error (handled,
    or anything else) closes the client before it propagates.
    """
    client = guarded(functools.partial(connector.connect, resource, config))
    try:
        observation = _observed(client, resource)
        effects = Effects(client, resource, port, clock, journal, defer_closes=defer_closes,
                          ready=ready)
        if resume and not observation.exists and guarded(effects.resume_create) is not None:
            observation = _observed(client, effects.resource)
    except BaseException:
        close_client(client)
        raise
    return effects, observation


def _observed(client: ExternalClient, resource: ManagedResource) -> Observation:
    """What ``client`` observes of ``resource``; an answer that is not an
    :class:`Observation`, or whose ownership mark is neither None nor text, is refused
    (``InvalidObservation``, naming only the type it had)."""
    observation = guarded(functools.partial(client.observe, resource))
    if not isinstance(observation, Observation):
        raise ExternalError(
            f"observe returned {type(observation).__name__}, not an Observation",
            reason="InvalidObservation")
    if observation.owner is not None and not isinstance(observation.owner, str):
        raise ExternalError(
            f"observe returned an ownership mark of type {type(observation.owner).__name__}, "
            "not text", reason="InvalidObservation")
    return observation


class Effects:
    """The side effects a transition's actions may perform, behind the intent journal.

    ``operation`` is the last operation started (for ``status.failure``),
    ``connection`` the connection details a create returned,
    ``external_name`` the name a provider assigned on create (committed to
    the object's external-name annotation as soon as the create returns), if any,
    and ``completion`` what the last call said of its own effect
    (:class:`~lifecycle.core.values.Completion`; see :meth:`after`).
    Entries are sealed by ``journal`` (default: this process's key) for the
    resource's kind, namespace, name, uid and external name; an entry not
    sealed so is read as none (:mod:`lifecycle.core.seal`).

    ``defer_closes`` (for a kind whose external names are its own, not
    assigned by the provider) lets a closed entry wait for a write the pass
    makes anyway, and ``ready`` says the stored state is Ready: an entry
    still pending then had its effect observed (or, after a crash, is
    repeated under a new key, which a create of a name the object already
    holds and an update both allow), so it is not resumed.
    """

    def __init__(self, client: ExternalClient, resource: ManagedResource, port: ObjectPort,
                 clock: Callable[[], datetime], journal: Journal | None = None, *,
                 defer_closes: bool = False, ready: bool = False) -> None:
        self.client = client
        self.resource = resource
        self.port = port
        self.clock = clock
        self.journal = journal if journal is not None else Journal()
        self.operation: str | None = None
        self.connection: dict[str, str] = {}
        self.external_name: str | None = None
        self.completion = Completion()
        self.defer_closes = defer_closes
        self.settled = defer_closes and ready
        self.closed = False
        self._pending: Intent | None = None
        #: The trusted entry as this act knows it (the one it was handed, then each one it
        #: wrote), or None outside an act: the journal is read once per act.
        self._known: tuple[Intent | None] | None = None
        #: A closed entry (its MAC and text) held until the act ends.
        self._closing: tuple[str, str] | None = None

    def _subject(self) -> Subject:
        """What an entry is about: the resource's kind, namespace, name, uid and external
        name (as :func:`~lifecycle.runtime.journalkey.subject_of` makes it)."""
        r = self.resource
        return Subject(r.kind, r.namespace or "", r.name, r.uid,
                       self.external_name or r.external_name)

    def trusted(self) -> Intent | None:
        """The journal entry this operator sealed for this object and external name, or None.

        Within :meth:`act`, the entry it was handed and then each entry it wrote: the
        object's annotations change during an act only through these effects.
        """
        if self._known is not None:
            return self._known[0]
        return self.journal.read(self.port.annotations(), self._subject())

    def _written(self, intent: Intent | None) -> None:
        """Note ``intent`` as the entry now on the object, for the rest of the act."""
        if self._known is not None:
            self._known = (intent,)

    def _seal(self, intent: Intent) -> str:
        """The MAC of ``intent`` about this resource (:meth:`Journal.mac
        <lifecycle.runtime.journalkey.Journal.mac>`)."""
        return self.journal.mac(intent, self._subject())

    def create(self) -> None:
        """Journal, then create (the password, if any, was persisted before connect).

        A provider that assigns the resource's identity returns it in
        ``Creation.external_name``; it is committed at once, before the
        journal entry can be closed.
        """
        self.operation = "create"
        creation = self._journalled("create", self.client.create, self._assigned)
        self.connection.update(creation.connection)
        self.completion = Completion.of(creation)

    def _assigned(self, creation: Creation) -> None:
        """Commit a name the provider assigned, before the journal entry can be closed.

        Closed first, a crash between the two writes would leave a created
        resource whose identity no object records, and the next pass would
        create another under a new key. The entry stays pending, and the
        next observation under the assigned name closes it.
        """
        if creation.external_name and creation.external_name != self.resource.external_name:
            self.external_name = creation.external_name
            self._reseal(self._pending)
            self.port.annotate(EXTERNAL_NAME, creation.external_name)

    def _reseal(self, intent: Intent | None) -> None:
        """Stage ``intent`` sealed for the name just assigned, to ride on the name's write."""
        if intent is not None:
            self.port.stage(INTENT_MAC, self._seal(intent))

    def resume_create(self) -> str | None:
        """Repeat a pending create with its journalled key; the name to observe it under.

        For a provider that names what it creates (``Kind.names_assigned``):
        a create interrupted before its name was recorded is found again by its
        idempotency key, and a name the provider assigned is committed. The
        name returned is that one, else the recorded one (the provider kept the
        requested name): the repeated call may have made the resource only
        now, so it is observed again either way. None when no create is
        pending. No new journal entry is written: the call is the pending one,
        resumed.
        """
        intent = self.trusted()
        if intent is None or intent.operation != "create" or intent.outcome != "pending":
            return None
        creation = self.client.create(attrs.evolve(self.resource, idempotency_key=intent.key))
        name = getattr(creation, "external_name", None)
        if name and name != self.resource.external_name:
            self.external_name = name
            self._reseal(intent)
            self.port.annotate(EXTERNAL_NAME, name)
            self.resource = attrs.evolve(self.resource, external_name=name)
        return str(self.resource.external_name)

    def update(self) -> None:
        """Journal, then update the external resource."""
        self.operation = "update"
        self.completion = Completion.of(self._journalled("update", self.client.update))

    def delete(self) -> None:
        """Journal, then delete the external resource (absent counts as deleted)."""
        self.operation = "delete"
        self.completion = Completion.of(self._journalled("delete", self.client.delete))

    def after(self, observe_again: bool = False) -> Observation | None:
        """The resource as the last call left it: as its answer describes it, else as
        observed now when the call said it finished (or ``observe_again``); None when
        neither tells, or observing failed (the next pass observes)."""
        if self.completion.observation is not None:
            return self.completion.observation
        if not (self.completion.finished or observe_again):
            return None
        resource = self.resource
        if self.external_name and self.external_name != resource.external_name:
            resource = attrs.evolve(resource, external_name=self.external_name)
        try:
            seen = guarded(lambda: self.client.observe(resource))
        except HandledError:
            return None
        return seen if isinstance(seen, Observation) else None

    def _journalled(self, operation: str, call: Callable[[ManagedResource], Any],
                    before_closing: Callable[[Any], None] | None = None) -> Any:
        intent = next_intent(self.trusted(), operation, self.resource.uid,
                             self.resource.generation, self.clock(), settled=self.settled)
        self._record(intent)
        self._pending = intent
        resource = attrs.evolve(self.resource, idempotency_key=intent.key)
        try:
            result = guarded(lambda: call(resource))
        except HandledError:
            self._record(attrs.evolve(intent, outcome="failed"))
            raise
        if before_closing is not None:
            before_closing(result)
        # The entry stays pending: the observation that shows the effect closes it.
        return result

    def close_observed(self, observation: Observation | None) -> bool:
        """Close a pending journal entry whose effect ``observation`` shows; whether it did.

        The closed entry is staged only when there is one to close; lost in a
        crash, it is closed again. With ``defer_closes`` it is deferred: it
        rides on the object's next write, and a pass that writes nothing else
        leaves it pending, which the Ready state that follows makes harmless
        (:func:`next_intent` does not resume it once the object is Ready).
        Within :meth:`act` it is held until the act ends, and dropped when the
        act writes a new entry over it (that write carries the entry anyway).
        """
        closed = closed_intent(self.trusted(), observation)
        if closed is None:
            return False
        self._closing = (self._seal(closed), closed.to_json())
        self._written(closed)
        if self._known is None:
            self._stage_closing()
        return True

    def _stage_closing(self) -> None:
        """Stage the closed entry held by :meth:`close_observed`, if any."""
        if self._closing is not None:
            stage = self.port.defer if self.defer_closes else self.port.stage
            stage(INTENT_MAC, self._closing[0])
            stage(INTENT, self._closing[1])
            self._closing = None

    def act(self, facts: Facts, decision: Decision, host: object, machine: Any, *,
            entry: Intent | None = None, observe_after_create: bool = False,
            passthrough: tuple[type[BaseException], ...] = ()
            ) -> tuple[Decision, tuple[HandledError, ...], tuple[Facts, Decision] | None]:
        """Carry ``decision`` out on the resource ``facts`` describe, then close the client.

        ``entry`` is the trusted journal entry on the object as the act starts (read by
        the pass for the ownership rule; :meth:`trusted` answers it, then each entry the
        act writes, without reading the object again). A pending journal entry whose
        effect the observation shows was interrupted after the call: it is closed first,
        so a later call mints a new key. The transition's actions run on the machine's
        ``host`` (:func:`run_actions`; the decision, failing or not, and the
        informational notices are returned). After a create, update or delete that
        succeeded, what the call left (:meth:`after`; observed again after a create when
        ``observe_after_create``) gives the next facts and decision when it moves the
        resource on (:func:`~lifecycle.core.plan.after_action`), its entry closed; else
        None.
        """
        self._known = (entry,)
        try:
            self.close_observed(facts.observation)
            notices: tuple[HandledError, ...] = ()
            if decision.actions:
                decision, notices = run_actions(decision, host, self, self._operation,
                                                passthrough=passthrough)
            following = None
            call = acted(decision)
            if call is not None:
                seen = self.after(observe_again=observe_after_create and call == "create")
                following = after_action(machine, facts, decision, seen)
                if following is not None:
                    self.close_observed(seen)
            self._stage_closing()
            return decision, notices, following
        finally:
            self._known = None
            self.close()

    def _operation(self) -> str | None:
        return self.operation

    def close(self) -> None:
        """Close the client (its optional ``close``), once."""
        if not self.closed:
            self.closed = True
            close_client(self.client)

    def _record(self, intent: Intent) -> None:
        """Commit the entry and its MAC in one write (the MAC staged, riding on the entry's)."""
        self._closing = None  # the entry written over a closed one
        self.port.stage(INTENT_MAC, self._seal(intent))
        self.port.annotate(INTENT, intent.to_json())
        self._written(intent)
