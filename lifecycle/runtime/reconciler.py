"""The generic managed reconciler: one pass of SPEC section 2, top to bottom.

Get, operation annotation, ownership and policy, orphaning deletion, claim,
connect, observe, choose one event, fire it through the machine table (its
actions call the external client behind the intent journal), publish the
connection Secret, write status if it changed, return the requeue result.

Handled errors end in the Failed state with a condition; API errors other
than NotFound propagate as :class:`UnhandledError` for the work queue's
backoff. Object writes (finalizer, annotations, late-init spec) and status
writes are separate and each retries a 409 from a fresh read.
"""

from __future__ import annotations

import base64
import json
import logging
import secrets
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

import attrs

from lifecycle.core.decide import (
    Choice,
    Facts,
    ReconcilePolicy,
    choose_event,
    gate,
    requeue,
)
from lifecycle.core.errors import (
    CredentialsError,
    ExternalError,
    HandledError,
    Severity,
    TerminalError,
    UnhandledError,
)
from lifecycle.core.kind import (
    EXTERNAL_NAME,
    FINALIZER,
    INTENT,
    OPERATION,
    OWNER_UID,
    PAUSED,
    PROVIDER_CONFIG_API,
    PROVIDER_CONFIG_KIND,
    Kind,
    connection_secret_ref,
)
from lifecycle.core.machine import TransitionSpec
from lifecycle.core.status import paused, settle
from lifecycle.core.values import (
    Condition,
    ConditionStatus,
    Intent,
    Observation,
    Result,
    now,
    rfc3339,
)
from lifecycle.kube.cluster import Cluster
from lifecycle.kube.errors import (
    AlreadyExists,
    ApiError,
    Conflict,
    Forbidden,
    Invalid,
    NotFound,
    TooManyRequests,
)
from lifecycle.runtime.contract import (
    Connector,
    ExternalClient,
    ManagedResource,
    ProviderConfig,
    close_client,
)

log = logging.getLogger("lifecycle.runtime.reconciler")

CONFLICT_RETRIES = 5


class ObjectGone(Exception):
    """The reconciled object disappeared during the pass: nothing more to do."""
T, F, U = ConditionStatus.TRUE, ConditionStatus.FALSE, ConditionStatus.UNKNOWN


def generate_password() -> str:
    """A random password for a new external resource (32 URL-safe characters)."""
    return secrets.token_urlsafe(24)


@attrs.define
class Pass:
    """What one reconcile has learned and decided so far (internal working state)."""

    obj: dict[str, Any]
    state: str
    generation: int
    forced: bool = False
    notes: list[Condition] = attrs.Factory(list)
    dirty: bool = False
    #: The external name the client was given in this pass.
    external_name: str = ""
    #: Connection Secrets as last read or written in this pass, by (namespace, name).
    secrets: dict[tuple[str, str], dict[str, Any] | None] = attrs.Factory(dict)


class Effects:
    """The side effects a transition's actions may perform, behind the intent journal.

    Before each mutating call the journal entry (operation, idempotency key,
    generation, start time) is committed to the object; afterwards its outcome
    is. A crash between the two leaves a pending entry whose key the retry
    reuses, and clients treat create-of-existing as success, so nothing is
    created twice.
    """

    def __init__(self, reconciler: Reconciler, run: Pass, client: ExternalClient,
                 resource: ManagedResource) -> None:
        self.reconciler = reconciler
        self.run = run
        self.client = client
        self.resource = resource
        self.operation: str | None = None
        self.connection: dict[str, str] = {}

    def create(self) -> None:
        """Journal, then create (the password, if any, was persisted before connect).

        A provider that assigns the resource's identity returns it in
        ``Creation.external_name``; it is committed with the journal's outcome.
        """
        self.operation = "create"
        creation = self._journalled("create", self.client.create)
        self.connection.update(creation.connection)
        if creation.external_name and creation.external_name != self.resource.external_name:
            self.reconciler.set_annotation(self.run, EXTERNAL_NAME, creation.external_name)
            self.run.external_name = creation.external_name

    def update(self) -> None:
        """Journal, then update the external resource."""
        self.operation = "update"
        self._journalled("update", self.client.update)

    def delete(self) -> None:
        """Journal, then delete the external resource (absent counts as deleted)."""
        self.operation = "delete"
        self._journalled("delete", self.client.delete)

    def _journalled(self, operation: str, call: Callable[[ManagedResource], Any]) -> Any:
        r = self.reconciler
        intent = self._intent(operation)
        r.set_annotation(self.run, INTENT, json.dumps(intent.to_dict(), sort_keys=True))
        resource = attrs.evolve(self.resource, idempotency_key=intent.key)
        try:
            result = r.guarded_call(lambda: call(resource))
        except HandledError:
            done = attrs.evolve(intent, outcome="failed")
            r.set_annotation(self.run, INTENT, json.dumps(done.to_dict(), sort_keys=True))
            raise
        done = attrs.evolve(intent, outcome="succeeded")
        r.set_annotation(self.run, INTENT, json.dumps(done.to_dict(), sort_keys=True))
        return result

    def _intent(self, operation: str) -> Intent:
        """The journal entry for this call: a pending entry for the same operation and
        generation is resumed with its key (a crash interrupted it); otherwise a new
        key is minted, so a new intent is never mistaken for an old one by a
        provider that remembers client tokens."""
        meta = self.run.obj["metadata"]
        raw = (meta.get("annotations") or {}).get(INTENT)
        previous = None
        if isinstance(raw, str):
            try:
                previous = Intent.from_dict(json.loads(raw))
            except (ValueError, TypeError, AttributeError):
                previous = None
        if (previous is not None and previous.outcome == "pending"
                and previous.operation == operation
                and previous.generation == self.run.generation):
            return previous
        sequence = 1
        if previous is not None:
            tail = previous.key.rsplit("/", 1)[-1]
            sequence = int(tail) + 1 if tail.isdigit() else 1
        key = f"{meta['uid']}/{operation}/{self.run.generation}/{sequence}"
        return Intent(operation, key, self.run.generation, rfc3339(self.reconciler.clock()))


class Reconciler:
    """Reconciles objects of one :class:`Kind` with one provider connector.

    ``operator_id`` names this operator instance for namespace ownership;
    ``default_policy`` is the operator-wide reconcile policy; ``clock`` and
    ``password_factory`` are injectable for tests. ``reads_ttl`` (seconds,
    default 0: off) lets the supporting reads every pass makes (the
    namespace's annotations, the provider config and its credentials) be
    reused for that long, the way an operator reads them from a cache; a
    change to them then takes effect within ``reads_ttl``.
    """

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
    ) -> None:
        self.api = api
        self.reads = _TTLCache(reads_ttl)
        self.kind = kind
        self.connector = connector
        self.operator_id = operator_id
        self.default_policy = default_policy
        self.clock = clock
        self.password_factory = password_factory
        self.table = kind.machine.table()
        self.host = kind.machine.guard_host()
        self.timing = kind.machine.timing

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

    def _reconcile(self, namespace: str | None, name: str) -> Result:
        kind = self.kind
        # 1. Get the object.
        try:
            obj = self.api.get(kind.api_version, kind.kind, namespace, name)
        except NotFound:
            return Result.done("NotFound")
        # 2-4. Operation annotation, ownership, policies: decided before any write.
        g = gate(kind.machine, obj,
                 self.reads.get(("ns", namespace), lambda: self._namespace_annotations(namespace)),
                 operator_id=self.operator_id, default_policy=self.default_policy)
        if g.stop == "NotOwned":
            self._event(obj, "Warning", "NotOwned", g.stop_message)
        if g.stop is not None:
            return Result.done(g.stop)
        if g.repaired is not None:
            self._event(obj, "Warning", "StateRepaired", g.notes[0].message)
        run = Pass(obj=obj, state=g.state, generation=_generation(obj), forced=g.forced,
                   notes=list(g.notes))
        if g.forced:
            self._mutate(run, lambda m: m.get("annotations", {}).pop(OPERATION, None))
        if g.paused:
            return self._paused(run)
        if g.orphan:
            facts = Facts(run.state, deleting=True, policy=ReconcilePolicy.DETACH_ON_DELETE)
            return self._finish(run, facts, choose_event(facts), observation=None)
        # 5. Claim, committed before any external call.
        annotations = run.obj["metadata"].get("annotations") or {}
        if FINALIZER not in (run.obj["metadata"].get("finalizers") or []) or not annotations.get(
            EXTERNAL_NAME
        ):
            external = kind.external_name(run.obj)

            def claim(m: dict[str, Any]) -> None:
                if FINALIZER not in m.setdefault("finalizers", []):
                    m["finalizers"].append(FINALIZER)
                m.setdefault("annotations", {}).setdefault(EXTERNAL_NAME, external)

            self._mutate(run, claim)
        # 6-7. Connect and observe.
        facts, effects = self._observe(run, g.policy, g.deleting)
        return self._fire(run, facts, effects)

    # --------------------------------------------------------------- observing
    def _observe(
        self, run: Pass, policy: ReconcilePolicy, deleting: bool
    ) -> tuple[Facts, Effects | None]:
        status = _mapping(run.obj.get("status"))
        failure = _mapping(status.get("failure"))
        base = Facts(
            state=run.state,
            deleting=deleting,
            policy=policy,
            failed_operation=failure.get("operation"),
            generation=run.generation,
            observed_generation=_int(status.get("observedGeneration")),
            forced=run.forced,
        )
        client: ExternalClient | None = None
        try:
            resource = self._resource(run, deleting, policy)
            ref = _mapping(_mapping(run.obj.get("spec")).get("providerConfigRef"))
            name = str(ref.get("name") or "default")
            config = self.reads.get(("config", name), lambda: self._provider_config(name))
            client = self.guarded_call(lambda: self.connector.connect(resource, config))
            observation = self.guarded_call(lambda: client.observe(resource))
            if not isinstance(observation, Observation):
                raise ExternalError(
                    f"observe returned {type(observation).__name__}, not an Observation",
                    reason="InvalidObservation")
        except BaseException as exc:
            if client is not None:
                close_client(client)
            if isinstance(exc, HandledError):
                return attrs.evolve(base, error=exc), None
            raise
        effects = Effects(self, run, client, resource)
        return attrs.evolve(base, observation=observation), effects

    def _resource(self, run: Pass, deleting: bool, policy: ReconcilePolicy) -> ManagedResource:
        meta = run.obj["metadata"]
        run.external_name = self._claimed_name(run)
        try:
            parameters = self.kind.parse_parameters(run.obj.get("spec"))
        except TerminalError:
            if not deleting:
                raise
            parameters = None  # a broken spec must not block deletion
        return ManagedResource(
            kind=self.kind.kind,
            namespace=meta.get("namespace", ""),
            name=meta["name"],
            uid=meta["uid"],
            generation=run.generation,
            external_name=run.external_name,
            parameters=parameters,
            password=self._password(run, deleting or not policy.allows_modify)
            if self.kind.password else None,
        )

    def guarded_call(self, call: Callable[[], Any]) -> Any:
        """Run provider or kind code; anything but a HandledError becomes an ExternalError.

        The message names only the exception class: a library's message may
        carry credentials.
        """
        try:
            return call()
        except HandledError:
            raise
        except Exception as exc:
            raise ExternalError(
                f"provider client raised {type(exc).__name__}", reason="ProviderClientError"
            ) from None

    # ----------------------------------------------------------------- firing
    def _fire(self, run: Pass, facts: Facts, effects: Effects | None) -> Result:
        choice = choose_event(facts)
        try:
            return self._finish(run, facts, choice, facts.observation, effects)
        finally:
            if effects is not None:
                close_client(effects.client)

    def _finish(
        self,
        run: Pass,
        facts: Facts,
        choice: Choice,
        observation: Observation | None,
        effects: Effects | None = None,
    ) -> Result:
        table = self.table
        error = facts.error
        transition: TransitionSpec | None = None
        failed_operation: str | None = None
        if error is not None:
            failed_operation = "connect" if isinstance(error, CredentialsError) else "observe"
        if choice.event is not None:
            try:
                transition = self._fire_event(run.state, choice.event, facts)
            except HandledError as exc:
                error, failed_operation = exc, "guard"
            if transition is None and error is None:
                error = HandledError(
                    f"event {choice.event!r} is not allowed in state {run.state!r} "
                    f"of {table.name}",
                    reason="EventNotAllowed",
                )
            elif transition is not None and choice.event == "fail" and error is None:
                # The provider reports the resource failed: remember what was under way.
                error = HandledError(choice.message, reason=choice.reason)
                failed_operation = _operation_of(run.state) or facts.failed_operation
            elif transition is not None:
                try:
                    for action in transition.actions:
                        self.guarded_call(lambda a=action: getattr(self.host, a)(effects))
                except HandledError as exc:
                    if exc.severity is Severity.INFORMATIONAL:
                        run.notes.append(_informational(exc, run.generation))
                    else:
                        error = exc
                        failed_operation = (effects.operation if effects else None) or "action"
        if observation is not None and observation.late_init and not facts.deleting and (
            facts.policy.allows_modify
        ):
            self._late_init(run, observation.late_init)
        connection: dict[str, str] = {}
        if observation is not None:
            connection.update(observation.connection)
        if effects is not None:
            connection.update(effects.connection)
        final_next = transition is not None and table.states[transition.target].final
        if connection and not facts.deleting and not final_next and error is None:
            try:
                self._publish(run, connection)
            except HandledError as exc:
                error, failed_operation = exc, "publish"
        if error is not None and (transition is None or transition.event != "fail"):
            # The chosen transition's work failed: the machine takes its fail edge instead.
            transition = self._fire_fallback(run.state, facts)
        target = transition.target if transition is not None else run.state
        self._write_status(run, facts, choice, transition, target, error, failed_operation,
                           observation)
        if table.states[target].final:
            self._mutate(run, _remove_finalizer)
        return requeue(
            state=target,
            final=table.states[target].final,
            timing=self.timing,
            key=run.obj["metadata"]["uid"],
            error=error,
            dirty=run.dirty,
            waiting=choice.event == "wait",
            deleting=facts.deleting,
        )

    def _fire_event(self, state: str, event: str, facts: Facts) -> TransitionSpec | None:
        """Pick the transition of ``event``; a guard that raises is a handled error."""
        return self.table.fire(state, event, self._guard(facts))

    def _fire_fallback(self, state: str, facts: Facts) -> TransitionSpec | None:
        """The ``fail`` transition from ``state``, if the machine has one."""
        try:
            return self._fire_event(state, "fail", facts)
        except HandledError:
            return None

    def _guard(self, facts: Facts) -> Callable[[str], bool]:
        host = self.host

        def guard(name: str) -> bool:
            try:
                return bool(getattr(host, name)(facts))
            except HandledError:
                raise
            except Exception as exc:
                raise HandledError(f"guard {name!r} raised {type(exc).__name__}",
                                   reason="GuardError") from None

        return guard

    # ----------------------------------------------------------------- status
    def _write_status(
        self,
        run: Pass,
        facts: Facts,
        choice: Choice,
        transition: TransitionSpec | None,
        target: str,
        error: HandledError | None,
        failed_operation: str | None,
        observation: Observation | None,
    ) -> None:
        old = run.obj.get("status")
        old = old if isinstance(old, Mapping) else {}
        settled = settle(
            machine=self.kind.machine, old=old, source=run.state, target=target,
            generation=run.generation, deleting=facts.deleting, policy=facts.policy,
            choice=choice, transition=transition, error=error,
            failed_operation=failed_operation, observation=observation, notes=run.notes,
            now=self.clock(), external_name=run.external_name,
        )
        for type_, reason, message in settled.events:
            self._event(run.obj, type_, reason, message)
        if settled.status != old or run.forced:
            self._status_write(run, settled.status)

    def _paused(self, run: Pass) -> Result:
        old = run.obj.get("status")
        old = old if isinstance(old, Mapping) else {}
        status = paused(old, run.state, run.generation, f"annotation {PAUSED} is 'true'",
                        self.clock())
        if status != old or run.forced:
            self._status_write(run, status)
        return Result.done("Paused")

    def _status_write(self, run: Pass, status: dict[str, Any]) -> None:
        for _ in range(CONFLICT_RETRIES):
            body = dict(run.obj)
            body["status"] = status
            try:
                run.obj = self.api.replace_status(body)
                return
            except NotFound:
                raise ObjectGone from None
            except Conflict:
                run.obj = self._refetch(run)
        raise UnhandledError("status write kept conflicting")

    # ---------------------------------------------------------- object writes
    def _mutate(self, run: Pass, change: Callable[[dict[str, Any]], Any]) -> None:
        """Apply ``change`` to metadata and commit it, retrying 409s from a fresh read."""
        for _ in range(CONFLICT_RETRIES):
            body = dict(run.obj)
            body["metadata"] = _copy_meta(run.obj["metadata"])
            change(body["metadata"])
            if body["metadata"] == run.obj["metadata"]:
                return
            try:
                run.obj = self.api.replace(body)
                return
            except NotFound:
                raise ObjectGone from None
            except Conflict:
                run.obj = self._refetch(run)
        raise UnhandledError("object write kept conflicting")

    def set_annotation(self, run: Pass, key: str, value: str) -> None:
        """Commit one annotation on the object (used by the intent journal)."""
        self._mutate(run, lambda m: m.setdefault("annotations", {}).__setitem__(key, value))

    def _late_init(self, run: Pass, fields: Mapping[str, Any]) -> None:
        """Write provider defaults into unset spec parameters (SPEC 2.8), never over a value.

        The fields still missing are recomputed from every fresh read, so a
        value the user set meanwhile wins; the pass is dirty only if the write
        really changed the spec (a schema that prunes the field is reported,
        not retried in a loop).
        """
        for _ in range(CONFLICT_RETRIES):
            spec = run.obj.get("spec")
            params = spec.get("forProvider") if isinstance(spec, Mapping) else None
            if not isinstance(params, Mapping):
                return
            missing = {k: v for k, v in fields.items() if params.get(k) is None and v is not None}
            if not missing:
                return
            body = dict(run.obj)
            body["spec"] = {**spec, "forProvider": {**params, **missing}}
            before = run.obj["metadata"].get("generation")
            try:
                run.obj = self.api.replace(body)
            except Conflict:
                run.obj = self._refetch(run)
                continue
            except NotFound:
                raise ObjectGone from None
            written = (run.obj.get("spec") or {}).get("forProvider") or {}
            if run.obj["metadata"].get("generation") != before and all(
                written.get(k) is not None for k in missing
            ):
                run.dirty = True
            else:
                run.notes.append(_config_note(
                    "LateInitNotPersisted",
                    f"provider defaults for {', '.join(sorted(missing))} could not be written "
                    "to spec.forProvider (pruned by the schema?)", run.generation))
            return
        raise UnhandledError("late-init write kept conflicting")

    def _refetch(self, run: Pass) -> dict[str, Any]:
        meta = run.obj["metadata"]
        try:
            return self.api.get(self.kind.api_version, self.kind.kind, meta.get("namespace"),
                                meta["name"])
        except NotFound:
            raise ObjectGone from None

    # -------------------------------------------------------- secrets, config
    def _read_secret(self, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            return self.api.get("v1", "Secret", namespace, name)
        except NotFound:
            return None

    def _connection_secret(self, run: Pass, namespace: str, name: str,
                           fresh: bool = False) -> dict[str, Any] | None:
        """The connection Secret, read once per pass (again when ``fresh``); a private copy."""
        key = (namespace, name)
        if fresh or key not in run.secrets:
            run.secrets[key] = self._read_secret(namespace, name)
        secret = run.secrets[key]
        if secret is None:
            return None
        owner = _secret_owner(secret)
        if owner is not None and owner != run.obj["metadata"]["uid"]:
            raise TerminalError(
                f"connection Secret {namespace}/{name} belongs to another resource; "
                "choose another spec.writeConnectionSecretToRef",
                reason="ConnectionSecretNotOwned")
        return dict(secret)

    def _stored_password(self, run: Pass) -> str | None:
        secret = self._connection_secret(run, *connection_secret_ref(run.obj))
        return _decode(secret).get("password") if secret else None

    def _claimed_name(self, run: Pass) -> str:
        """The external name the object was claimed with; a later edit of the annotation
        is reported, never followed (following it would leak the claimed resource)."""
        annotated = str((run.obj["metadata"].get("annotations") or {}).get(EXTERNAL_NAME, ""))
        claimed = _mapping(run.obj.get("status")).get("externalName")
        if isinstance(claimed, str) and claimed and claimed != annotated:
            run.notes.append(_config_note(
                "ExternalNameChanged",
                f"annotation {EXTERNAL_NAME} changed from {claimed!r} to {annotated[:64]!r} "
                f"after the resource was claimed; still managing {claimed!r}", run.generation))
            return claimed
        return annotated

    def _password(self, run: Pass, read_only: bool) -> str | None:
        """The password for the client; generated and persisted first unless ``read_only``.

        Persisting it before any external call also covers an adopted resource
        that already existed: its Secret gets a password, and observe reports
        the mismatch so update applies it.
        """
        return self._stored_password(run) if read_only else self.ensure_password(run)

    def ensure_password(self, run: Pass) -> str:
        """Reuse the password in the connection Secret, or generate and persist one first."""
        stored = self._stored_password(run)
        if stored:
            return stored
        password = self.password_factory()
        self._publish(run, {"password": password})
        return password

    def _publish(self, run: Pass, details: Mapping[str, str]) -> None:
        """Merge ``details`` into the connection Secret; write only when it changed."""
        namespace, name = connection_secret_ref(run.obj)
        for attempt in range(CONFLICT_RETRIES):
            secret = self._connection_secret(run, namespace, name, fresh=attempt > 0)
            current = _decode(secret) if secret else {}
            wanted = {**current, **{k: str(v) for k, v in details.items()}}
            if secret is not None and wanted == current and not run.forced:
                return
            data = {k: base64.b64encode(v.encode()).decode() for k, v in wanted.items()}
            try:
                if secret is None:
                    run.secrets[(namespace, name)] = self.api.create({
                        "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                        "metadata": {"name": name, "namespace": namespace,
                                     **self._secret_ownership(run, namespace)},
                        "data": data,
                    })
                else:
                    secret["data"] = data
                    secret["metadata"] = {**secret["metadata"],
                                          **self._secret_ownership(run, namespace)}
                    run.secrets[(namespace, name)] = self.api.replace(secret)
                return
            except (Conflict, AlreadyExists):
                continue
            except Invalid as exc:
                raise TerminalError(f"connection Secret {namespace}/{name} is invalid: {exc}",
                                    reason="ConnectionSecretInvalid") from None
            except (NotFound, Forbidden) as exc:
                raise HandledError(f"connection Secret {namespace}/{name} cannot be written: "
                                   f"{exc}", reason="ConnectionSecretUnavailable") from None
        raise UnhandledError("connection Secret write kept conflicting")

    def _secret_ownership(self, run: Pass, namespace: str) -> dict[str, Any]:
        """Owner annotation always; a controller ownerReference only in the owner's namespace.

        Kubernetes garbage-collects a dependent whose namespaced owner is in
        another namespace, so a cross-namespace Secret carries only the annotation.
        """
        meta = run.obj["metadata"]
        annotations = {OWNER_UID: meta["uid"]}
        if self.kind.namespaced and namespace != meta.get("namespace"):
            return {"annotations": annotations}
        owner = {"apiVersion": self.kind.api_version, "kind": self.kind.kind,
                 "name": meta["name"], "uid": meta["uid"], "controller": True,
                 "blockOwnerDeletion": True}
        return {"annotations": annotations, "ownerReferences": [owner]}

    def _provider_config(self, name: str) -> ProviderConfig:
        try:
            config = self.api.get(PROVIDER_CONFIG_API, PROVIDER_CONFIG_KIND, None, str(name))
        except NotFound:
            raise CredentialsError(f"provider config {name!r} not found",
                                   reason="ProviderConfigMissing") from None
        cspec = _mapping(config.get("spec"))
        sref = _mapping(_mapping(cspec.get("credentials")).get("secretRef"))
        if not isinstance(sref.get("name"), str) or not sref["name"]:
            raise CredentialsError(f"provider config {name!r} has no credentials.secretRef",
                                   reason="CredentialsMissing")
        sns = str(sref.get("namespace") or "default")
        secret = self._read_secret(sns, sref["name"])
        if secret is None:
            raise CredentialsError(
                f"credentials Secret {sns}/{sref['name']} of provider config {name!r} not found",
                reason="CredentialsMissing")
        return ProviderConfig(name=str(name), spec=cspec, credentials=_decode(secret))

    # ------------------------------------------------------ policy, namespace
    def _namespace_annotations(self, namespace: str | None) -> Mapping[str, str]:
        if not namespace:
            return {}
        try:
            ns = self.api.get("v1", "Namespace", None, namespace)
        except NotFound:
            return {}
        return ns["metadata"].get("annotations") or {}

    def _event(self, obj: Mapping[str, Any], type_: str, reason: str, message: str) -> None:
        try:
            self.api.record_event(obj, type_, reason, message)
        except ApiError as exc:  # events are best effort, as in client-go's recorder
            log.debug("event %s not recorded: %s", reason, exc)




def _config_note(reason: str, message: str, generation: int) -> Condition:
    return Condition("ConfigValid", F, reason, message, generation)


def _secret_owner(secret: Mapping[str, Any]) -> str | None:
    """The uid of the resource a connection Secret belongs to, if any."""
    meta = _mapping(secret.get("metadata"))
    owner = _mapping(meta.get("annotations")).get(OWNER_UID)
    if isinstance(owner, str):
        return owner
    for ref in meta.get("ownerReferences") or []:
        if isinstance(ref, Mapping) and ref.get("controller"):
            return str(ref.get("uid"))
    return None


def _informational(error: HandledError, generation: int) -> Condition:
    return Condition("Informational", ConditionStatus.TRUE, error.reason, error.message,
                     generation)


def _remove_finalizer(meta: dict[str, Any]) -> None:
    finalizers = meta.get("finalizers") or []
    if FINALIZER in finalizers:
        meta["finalizers"] = [f for f in finalizers if f != FINALIZER]


def _copy_meta(meta: Mapping[str, Any]) -> dict[str, Any]:
    copied = dict(meta)
    for key in ("annotations", "labels"):
        if isinstance(meta.get(key), Mapping):
            copied[key] = dict(meta[key])
    if isinstance(meta.get("finalizers"), list):
        copied["finalizers"] = list(meta["finalizers"])
    return copied


def _decode(secret: Mapping[str, Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in (secret.get("data") or {}).items():
        try:
            out[key] = base64.b64decode(value).decode()
        except (ValueError, TypeError):
            continue
    return out


class _TTLCache:
    """Values reused for ``ttl`` seconds (``ttl`` 0: every call loads afresh).

    Only successful loads are kept: an error (a missing provider config) is
    seen again on the next pass.
    """

    def __init__(self, ttl: float) -> None:
        self.ttl = ttl
        self._entries: dict[Any, tuple[float, Any]] = {}

    def get(self, key: Any, load: Callable[[], Any]) -> Any:
        if self.ttl <= 0:
            return load()
        moment = time.monotonic()
        entry = self._entries.get(key)
        if entry is not None and entry[0] > moment:
            return entry[1]
        value = load()
        self._entries[key] = (moment + self.ttl, value)
        return value


def _mapping(value: Any) -> Mapping[str, Any]:
    """``value`` if it is a mapping, else an empty one: stored status may be corrupt."""
    return value if isinstance(value, Mapping) else {}


def _generation(obj: Mapping[str, Any]) -> int:
    return _int(obj["metadata"].get("generation", 1)) or 1


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _operation_of(state: str) -> str | None:
    return {"creating": "create", "updating": "update", "deleting": "delete"}.get(state)
