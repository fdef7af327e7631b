"""The crash-point explorer: proves the crash-safety invariant of SPEC section 5.

A scenario (create to Ready, a spec update to Ready, delete to Deleted) runs
once without faults to count its *side-effect points*: every API write the
engine makes (create, replace, replace_status, patch, delete, record_event,
connection Secrets included) and every mutating external call (create,
update, delete; observing changes nothing and is not a point). Then, for every
point and both sides of it, the scenario is replayed with the process dying
there: *before* (the call never happens) or *after* (the call takes effect,
then the process dies without seeing its result). A fresh engine (new
reconcilers, an empty work queue, the same API store and external system)
lists every object and takes over. A third variant also deletes the objects
while no engine runs, the window in which a resource created before its
finalizer was committed would leak.

After every phase the explorer checks:

* no external resource was created twice;
* none leaked: every external resource is tracked by the external-name
  annotation of a stored object, and none remains once all objects are gone;
* every object converged: Ready (and its generation observed) after a create
  or an update, gone after a delete.

The death is a :class:`Crash`, a ``BaseException``, so no ``except Exception``
in the engine can swallow it. A failed check is a :class:`Counterexample`
carrying a replayable trace: every reconcile, external call and API write up
to the crash and after, plus the command line that replays that one point.

Which kinds are checked: a :class:`Target` says how to exercise one kind (its
external system, a manifest, a spec update). :func:`targets` discovers every
:class:`~lifecycle.core.kind.Kind` in the ``machines`` package and pairs it with a
target: kinds whose module defines ``verify_target(kind) -> Target | None``
use it; kinds with the simulated cloud's parameters get the built-in
simulated-cloud target. The PostgreSQL kinds (:func:`postgres_target`) run
on a real server and are included only when ``LIFECYCLE_POSTGRES_DSN`` is
set; the claim kind (:func:`claim_target`) runs the claim reconciler beside
the managed-resource reconciler on the simulated cloud.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import pkgutil
import re
import secrets
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, TextIO

import attrs

from lifecycle.core.conditions import get as get_condition
from lifecycle.core.kind import EXTERNAL_NAME, FINALIZER, INTENT, Kind
from lifecycle.kube.errors import NotFound
from lifecycle.runtime.contract import Connector, ExternalClient, ManagedResource, ProviderConfig
from lifecycle.runtime.reconciler import Reconciler
from lifecycle.sim.apiserver import EmbeddedAPI
from lifecycle.testing import Environment, VirtualClock

#: Environment variable naming a PostgreSQL server for the PostgreSQL kinds.
POSTGRES_DSN_ENV = "LIFECYCLE_POSTGRES_DSN"

#: Sides of a side-effect point at which the process can die.
SIDES = ("before", "after")
#: Crash variants: the engine restarts at once, or the objects are deleted while it is down.
VARIANTS = ("restart", "delete-while-down")


class Crash(BaseException):
    """The simulated death of the operator process at a side-effect point.

    A ``BaseException`` so that the engine's ``except Exception`` blocks,
    which are right to catch real errors, cannot swallow a process death.
    """


# --------------------------------------------------------------------------
# What to explore
# --------------------------------------------------------------------------


@attrs.frozen
class ExternalSystem:
    """A fresh external system for one run, with the inventory the checks need.

    ``names()`` lists the external resources that exist now;
    ``creations(name)``, when the system can tell, says how often a resource
    of that name was materialised. Without it the explorer counts a creation
    whenever a name goes from absent to present across an external create.
    """

    connector: Connector
    names: Callable[[], set[str]]
    creations: Callable[[str], int] | None = None
    #: Credentials for the ProviderConfig the scenario creates.
    credentials: Mapping[str, str] = attrs.field(
        factory=lambda: {"accessKeyId": "AKIDVERIFY", "secretAccessKey": "verify-secret-key"},
        repr=False,
    )
    #: Extra ``spec`` fields of that ProviderConfig (where a real server is, for instance).
    provider_spec: Mapping[str, Any] = attrs.field(factory=dict)
    #: Seed of the embedded API's uids, so default external names can differ per run.
    api_seed: int = 0
    #: Called once the run is over and checked: removes what the run left on a real system.
    close: Callable[[], None] | None = None


@attrs.frozen
class Target:
    """How to exercise one kind: its external system, a manifest and a spec update.

    ``system()`` builds a fresh :class:`ExternalSystem` for each run;
    ``manifest(name)`` returns the object to create; ``update(manifest)``
    returns it with a changed spec (which must need an external update);
    ``objects`` names the objects the scenario manages side by side.
    """

    kind: Kind
    system: Callable[[], ExternalSystem]
    manifest: Callable[[str], dict[str, Any]]
    update: Callable[[dict[str, Any]], dict[str, Any]]
    label: str = ""
    objects: tuple[str, ...] = ("alpha",)
    setup: Callable[[Environment, ExternalSystem], None] | None = None
    #: Builds the engine; a target may substitute a subclass (tests use broken ones).
    reconciler: Callable[..., Reconciler] = Reconciler
    #: Installs more reconcilers on each fresh engine, writing through the given crashing API
    #: (the claim target adds the claim reconciler); called as ``extend(env, api, recorder)``.
    extend: Callable[[Environment, Any, Recorder], None] | None = None
    #: Kinds a restarted engine lists and queues (default: ``kind``).
    listed: tuple[Kind, ...] = ()
    #: The kind whose external-name annotations track external resources (default: ``kind``).
    tracking: Kind | None = None
    #: How the user applies a changed manifest (default: :meth:`Environment.apply`).
    apply: Callable[[Environment, dict[str, Any]], Any] | None = None
    #: Replaces the per-object convergence check: ``converged(env, manifests, expect)``
    #: returns the problems found (``expect`` is "ready" or "gone").
    converged: Callable[[Environment, Mapping[str, dict[str, Any]], str], list[str]] | None = None

    @property
    def name(self) -> str:
        """How reports name this target (``MODULE:NAME`` when discovered)."""
        return self.label or self.kind.kind


@attrs.frozen
class Phase:
    """One user action of the scenario and what every object must reach after it."""

    name: str
    expect: str  # "ready" or "gone"


#: The scenario: create to Ready, spec update to Ready, delete to Deleted.
PHASES = (Phase("create", "ready"), Phase("update", "ready"), Phase("delete", "gone"))


@attrs.frozen
class CrashPoint:
    """Die just ``side`` the ``index``-th side-effect point (1-based)."""

    index: int
    side: str
    variant: str = "restart"


@attrs.frozen
class Counterexample:
    """A crash point after which an invariant failed, with its replayable trace."""

    target: str
    point: CrashPoint | None
    operation: str
    problems: tuple[str, ...]
    trace: tuple[str, ...]

    def replay_command(self) -> str:
        """The command line that replays exactly this run, printing its trace."""
        if self.point is None:
            return f"lifecycle verify {self.target} --point 0 --trace"
        return (f"lifecycle verify {self.target} --point {self.point.index} "
                f"--side {self.point.side} --variant {self.point.variant} --trace")

    def render(self) -> str:
        """The counterexample as text: where, what failed, the trace, how to replay."""
        where = ("without a crash" if self.point is None else
                 f"crash {self.point.side} point #{self.point.index} ({self.operation}), "
                 f"variant {self.point.variant}")
        lines = [f"COUNTEREXAMPLE {self.target}: {where}"]
        lines += [f"  problem: {p}" for p in self.problems]
        lines.append("  trace:")
        lines += [f"    {t}" for t in self.trace]
        lines.append(f"  replay: {self.replay_command()}")
        return "\n".join(lines)


@attrs.frozen
class Checked:
    """One crash point that was explored and its verdict."""

    point: CrashPoint
    operation: str
    phase: str
    ok: bool


@attrs.define
class Report:
    """What one exploration of a target found."""

    target: str
    points: int = 0
    operations: list[str] = attrs.Factory(list)
    checked: list[Checked] = attrs.Factory(list)
    counterexamples: list[Counterexample] = attrs.Factory(list)

    @property
    def ok(self) -> bool:
        """Whether no counterexample was found."""
        return not self.counterexamples


# --------------------------------------------------------------------------
# Counting side effects and dying at one of them
# --------------------------------------------------------------------------


class Recorder:
    """Counts side-effect points, keeps the trace, and raises :class:`Crash` on cue."""

    def __init__(self, crash: CrashPoint | None) -> None:
        self.crash = crash
        self.count = 0
        self.operations: list[str] = []
        self.phases: list[str] = []
        self.trace: list[str] = []
        self.engine = 1
        self.phase = ""
        self.crashed_at: str | None = None

    def note(self, text: str) -> None:
        """Append a non-effect line (a reconcile, an observation) to the trace."""
        self.trace.append(f"engine {self.engine}: {text}")

    def effect(self, label: str, call: Callable[[], Any]) -> Any:
        """Perform one side effect, dying before or after it if this is the crash point."""
        self.count += 1
        index = self.count
        self.operations.append(label)
        self.phases.append(self.phase)
        armed = self.crash is not None and self.crash.index == index and self.crashed_at is None
        if armed and self.crash.side == "before":
            self.trace.append(f"engine {self.engine}: #{index} {label}  <- CRASH before")
            self.crashed_at = label
            raise Crash(label)
        try:
            result = call()
        except Exception as exc:
            self.trace.append(f"engine {self.engine}: #{index} {label} -> {type(exc).__name__}")
            if armed:
                self.crashed_at = label
                raise Crash(label) from None
            raise
        if armed:
            self.trace.append(f"engine {self.engine}: #{index} {label}  <- CRASH after")
            self.crashed_at = label
            raise Crash(label)
        self.trace.append(f"engine {self.engine}: #{index} {label}")
        return result


def _obj_label(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    return f"{obj.get('kind')} {ns + '/' if ns else ''}{meta.get('name')}"


class CrashingAPI:
    """The API as the engine sees it: reads pass through, every write is a side-effect point.

    Labels name the object and, for metadata writes, what changed (finalizers,
    annotation keys, the intent journal's operation and outcome); Secret data
    is never shown.
    """

    def __init__(self, api: Any, recorder: Recorder) -> None:
        self._api = api
        self._recorder = recorder

    def __getattr__(self, name: str) -> Any:
        return getattr(self._api, name)

    def get(self, api_version: str, kind: str, namespace: str | None, name: str) -> dict[str, Any]:
        """Read one object (not a side effect)."""
        return self._api.get(api_version, kind, namespace, name)

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Create an object: a side-effect point."""
        return self._recorder.effect(f"api.create {_obj_label(obj)}",
                                     lambda: self._api.create(obj))

    def replace(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Write metadata and spec: a side-effect point."""
        label = f"api.replace {_obj_label(obj)}{self._diff(obj)}"
        return self._recorder.effect(label, lambda: self._api.replace(obj))

    def replace_status(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Write status: a side-effect point."""
        state = (obj.get("status") or {}).get("state") if isinstance(obj.get("status"),
                                                                     Mapping) else None
        label = f"api.replace_status {_obj_label(obj)} (state={state})"
        return self._recorder.effect(label, lambda: self._api.replace_status(obj))

    def patch(self, api_version: str, kind: str, namespace: str | None, name: str,
              patch: dict[str, Any], **options: Any) -> dict[str, Any]:
        """Merge-patch an object: a side-effect point."""
        label = f"api.patch {kind} {namespace + '/' if namespace else ''}{name}"
        return self._recorder.effect(
            label, lambda: self._api.patch(api_version, kind, namespace, name, patch, **options))

    def delete(self, api_version: str, kind: str, namespace: str | None, name: str,
               **options: Any) -> Any:
        """Delete an object: a side-effect point."""
        label = f"api.delete {kind} {namespace + '/' if namespace else ''}{name}"
        return self._recorder.effect(
            label, lambda: self._api.delete(api_version, kind, namespace, name, **options))

    def record_event(self, involved: dict[str, Any], type: str, reason: str,
                     message: str, **options: Any) -> Any:
        """Record an Event: a side-effect point."""
        label = f"api.record_event {_obj_label(involved)} {type}/{reason}"
        return self._recorder.effect(
            label, lambda: self._api.record_event(involved, type, reason, message, **options))

    def _diff(self, obj: Mapping[str, Any]) -> str:
        if obj.get("kind") == "Secret":
            return ""
        meta = obj.get("metadata") or {}
        try:
            stored = self._api.get(obj.get("apiVersion"), obj.get("kind"),
                                   meta.get("namespace"), meta.get("name"))
        except Exception:  # the write itself will report the problem
            return ""
        old_meta = stored.get("metadata") or {}
        parts = []
        old_f, new_f = set(old_meta.get("finalizers") or []), set(meta.get("finalizers") or [])
        parts += [f"+finalizer {f}" for f in sorted(new_f - old_f)]
        parts += [f"-finalizer {f}" for f in sorted(old_f - new_f)]
        old_a, new_a = old_meta.get("annotations") or {}, meta.get("annotations") or {}
        for key in sorted(set(old_a) | set(new_a)):
            if old_a.get(key) == new_a.get(key):
                continue
            if key == INTENT and key in new_a:
                parts.append(f"intent {_intent_summary(new_a[key])}")
            elif key in new_a:
                parts.append(f"+{key.rpartition('/')[2]}")
            else:
                parts.append(f"-{key.rpartition('/')[2]}")
        if stored.get("spec") != obj.get("spec"):
            parts.append("spec")
        return f" ({', '.join(parts)})" if parts else ""


def _intent_summary(raw: str) -> str:
    try:
        data = json.loads(raw)
        return f"{data.get('operation')}:{data.get('outcome') or 'pending'}"
    except (ValueError, AttributeError):
        return "?"


class CrashingClient:
    """An external client whose create, update and delete are side-effect points."""

    def __init__(self, client: ExternalClient, connector: CrashingConnector) -> None:
        self._client = client
        self._connector = connector

    def observe(self, resource: ManagedResource) -> Any:
        """Observe (not a side effect; traced)."""
        recorder = self._connector.recorder
        try:
            observation = self._client.observe(resource)
        except Exception as exc:
            recorder.note(f"external.observe {resource.external_name} -> {type(exc).__name__}")
            raise
        if not observation.exists:
            recorder.note(f"external.observe {resource.external_name} -> absent")
            return observation
        status = getattr(observation, "status", None)
        recorder.note(
            f"external.observe {resource.external_name} -> exists"
            f"{'' if status is None else ' ' + getattr(status, 'value', str(status))}"
            f"{'' if observation.up_to_date else ' (differs from spec)'}")
        return observation

    def create(self, resource: ManagedResource) -> Any:
        """Create: a side-effect point; also counts materialisations when needed."""
        name = resource.external_name
        self._connector.seen.add(name)
        before = name in self._connector.system.names()

        def call() -> Any:
            try:
                return self._client.create(resource)
            finally:
                if not before and name in self._connector.system.names():
                    self._connector.materialised[name] = (
                        self._connector.materialised.get(name, 0) + 1)

        return self._connector.recorder.effect(f"external.create {name}", call)

    def update(self, resource: ManagedResource) -> Any:
        """Update: a side-effect point."""
        return self._connector.recorder.effect(
            f"external.update {resource.external_name}", lambda: self._client.update(resource))

    def delete(self, resource: ManagedResource) -> Any:
        """Delete: a side-effect point."""
        return self._connector.recorder.effect(
            f"external.delete {resource.external_name}", lambda: self._client.delete(resource))

    def close(self) -> None:
        """Close the wrapped client, if it can be closed."""
        close = getattr(self._client, "close", None)
        if callable(close):
            close()


class CrashingConnector:
    """Wraps a connector so every client it builds reports its side effects."""

    def __init__(self, system: ExternalSystem, recorder: Recorder) -> None:
        self.system = system
        self.recorder = recorder
        self.seen: set[str] = set()
        self.materialised: dict[str, int] = {}

    def connect(self, resource: ManagedResource, config: ProviderConfig) -> CrashingClient:
        """Connect through the real connector (not a side effect)."""
        return CrashingClient(self.system.connector.connect(resource, config), self)

    def creations(self, name: str) -> int:
        """How often ``name`` was materialised."""
        if self.system.creations is not None:
            return self.system.creations(name)
        return self.materialised.get(name, 0)


class TracedReconciler:
    """Delegates to a reconciler and writes each reconcile and its outcome to the trace."""

    def __init__(self, reconciler: Reconciler, recorder: Recorder) -> None:
        self.reconciler = reconciler
        self.recorder = recorder

    def reconcile(self, namespace: str | None, name: str) -> Any:
        """Run one reconcile, tracing its key and result."""
        key = f"{namespace}/{name}" if namespace else name
        self.recorder.note(f"reconcile {key}")
        try:
            result = self.reconciler.reconcile(namespace, name)
        except Exception as exc:
            self.recorder.note(f"reconcile {key} raised {type(exc).__name__}: {exc}")
            raise
        kind = getattr(result, "kind", None)
        self.recorder.note(f"reconcile {key} -> {getattr(kind, 'name', kind)} "
                           f"{getattr(result, 'reason', '')}".rstrip())
        return result


# --------------------------------------------------------------------------
# Running the scenario
# --------------------------------------------------------------------------


@attrs.define
class Run:
    """The outcome of one scenario run."""

    recorder: Recorder
    problems: list[str]
    phase_of_crash: str | None


def _engine(target: Target, api: Any, clock: VirtualClock, connector: CrashingConnector,
            recorder: Recorder) -> Environment:
    """A fresh engine: new reconcilers and an empty work queue over the same store.

    The managed-resource reconciler runs ``target.tracking`` (default: the
    target's kind); ``target.extend`` adds the others (a claim reconciler).
    """
    managed = target.tracking or target.kind
    env = Environment([(managed, connector)], api=api, clock=clock)
    reconciler = target.reconciler(CrashingAPI(api, recorder), managed, connector,
                                    clock=clock.now)
    env.reconcilers[managed.kind] = TracedReconciler(reconciler, recorder)  # type: ignore[assignment]
    if target.extend is not None:
        target.extend(env, CrashingAPI(api, recorder), recorder)
    return env


def _enqueue_all(env: Environment, kinds: Iterable[Kind]) -> None:
    """What a restarted operator does first: list every object and queue it."""
    for kind in kinds:
        items, _ = env.api.list(kind.api_version, kind.kind)
        for obj in items:
            meta = obj["metadata"]
            env.enqueue(kind.kind, meta["name"], meta.get("namespace"))


def _settle(env: Environment) -> str | None:
    """Run the queue until idle; a non-settling queue is returned as a problem."""
    try:
        env.run_until_idle(max_steps=2_000)
    except AssertionError as exc:
        return f"did not converge: {str(exc)[:300]}"
    return None


def run_scenario(
    target: Target,
    crash: CrashPoint | None = None,
) -> Run:
    """Run the scenario once, dying at ``crash`` (if any), and check every invariant."""
    clock = VirtualClock()
    recorder = Recorder(crash)
    system = target.system()
    try:
        return _run(target, crash, clock, recorder, system)
    finally:
        if system.close is not None:
            system.close()


def _run(target: Target, crash: CrashPoint | None, clock: VirtualClock, recorder: Recorder,
         system: ExternalSystem) -> Run:
    connector = CrashingConnector(system, recorder)
    api = EmbeddedAPI(clock=clock.now, seed=system.api_seed)
    env = _engine(target, api, clock, connector, recorder)
    env.provider_config(credentials=system.credentials, spec=system.provider_spec or None)
    if target.setup is not None:
        target.setup(env, system)
    kind = target.kind
    manifests = {name: target.manifest(name) for name in target.objects}
    problems: list[str] = []
    crashed_in: str | None = None
    deleted_while_down = False
    for phase in PHASES:
        recorder.phase = phase.name
        if not deleted_while_down:
            recorder.trace.append(f"user: {phase.name} {', '.join(target.objects)}")
            for name in target.objects:
                if phase.name == "create":
                    env.apply(manifests[name])
                elif phase.name == "update":
                    manifests[name] = target.update(manifests[name])
                    (target.apply or Environment.apply)(env, manifests[name])
                else:
                    env.delete(kind.kind, name, _namespace(manifests[name], kind))
        try:
            failure = _settle(env)
        except Crash:
            crashed_in = phase.name
            if crash is not None and crash.variant == "delete-while-down":
                deleted_while_down = True
                recorder.trace.append("user (no engine running): delete "
                                      + ", ".join(target.objects))
                for name in target.objects:
                    with contextlib.suppress(NotFound):  # already gone
                        env.api.delete(kind.api_version, kind.kind,
                                       _namespace(manifests[name], kind), name)
            recorder.engine += 1
            listed = " and ".join(k.kind for k in (target.listed or (kind,)))
            recorder.trace.append(f"engine {recorder.engine} starts: lists and queues every "
                                  f"{listed}")
            env = _engine(target, api, clock, connector, recorder)
            _enqueue_all(env, target.listed or (kind,))
            try:
                failure = _settle(env)
            except Crash:  # only one crash is ever armed
                failure = "crashed twice"
        expect = "gone" if deleted_while_down else phase.expect
        found = ([failure] if failure else []) + _check(env, target, manifests, connector, expect)
        problems += [f"after {phase.name}: {p}" for p in found]
        if found:
            break
    return Run(recorder, problems, crashed_in)


def _namespace(manifest: Mapping[str, Any], kind: Kind) -> str | None:
    return (manifest["metadata"].get("namespace") or "default") if kind.namespaced else None


def _check(env: Environment, target: Target, manifests: Mapping[str, dict[str, Any]],
           connector: CrashingConnector, expect: str) -> list[str]:
    """The invariants of SPEC section 5 after one phase."""
    kind = target.kind
    tracking = target.tracking or kind
    problems: list[str] = []
    tracked: dict[str, str] = {}
    items, _ = env.api.list(tracking.api_version, tracking.kind)
    for obj in items:
        external = (obj["metadata"].get("annotations") or {}).get(EXTERNAL_NAME)
        if external:
            tracked[external] = obj["metadata"]["name"]
    if target.converged is not None:
        problems += target.converged(env, manifests, expect)
    else:
        problems += _converged(env, kind, manifests, expect)
    existing = connector.system.names()
    for external in sorted(existing | connector.seen):
        created = connector.creations(external)
        if created > 1:
            problems.append(f"external resource {external} was created {created} times")
    for external in sorted(existing):
        if external not in tracked:
            problems.append(f"external resource {external} leaked: no object tracks it")
    return problems


def _converged(env: Environment, kind: Kind, manifests: Mapping[str, dict[str, Any]],
               expect: str) -> list[str]:
    """Every managed object Ready with its generation observed, or gone."""
    problems: list[str] = []
    for name, manifest in manifests.items():
        ns = _namespace(manifest, kind)
        try:
            obj = env.api.get(kind.api_version, kind.kind, ns, name)
        except Exception:
            obj = None
        if expect == "gone":
            if obj is not None:
                status = obj.get("status") or {}
                problems.append(f"{name} was not deleted (state={status.get('state')}, "
                                f"finalizers={obj['metadata'].get('finalizers')})")
            continue
        if obj is None:
            problems.append(f"{name} vanished")
            continue
        status = obj.get("status") if isinstance(obj.get("status"), Mapping) else {}
        ready = get_condition(status.get("conditions") or [], "Ready")
        generation = obj["metadata"].get("generation")
        if status.get("state") != "ready" or ready is None or ready.status.value != "True":
            problems.append(f"{name} did not converge to Ready (state={status.get('state')}, "
                            f"Ready={ready.status.value if ready else None} "
                            f"{ready.reason if ready else ''})")
        elif status.get("observedGeneration") != generation:
            problems.append(f"{name} is Ready but observedGeneration "
                            f"{status.get('observedGeneration')} != generation {generation}")
        if FINALIZER not in (obj["metadata"].get("finalizers") or []):
            problems.append(f"{name} is not claimed (no finalizer {FINALIZER})")
    return problems


def explore(
    target: Target,
    *,
    sides: Sequence[str] = SIDES,
    variants: Sequence[str] = VARIANTS,
    points: Iterable[int] | None = None,
    on_point: Callable[[Checked, Counterexample | None], None] | None = None,
) -> Report:
    """Explore every side-effect point of ``target``'s scenario; return a :class:`Report`.

    A first run without a crash counts the points (and must itself pass);
    then each point (or only ``points``) is replayed for every side and
    variant; ``on_point`` is called with each point's verdict as it is checked.
    """
    report = Report(target.name)
    baseline = run_scenario(target)
    report.points = baseline.recorder.count
    report.operations = list(baseline.recorder.operations)
    if baseline.problems:
        report.counterexamples.append(Counterexample(
            target.name, None, "no crash", tuple(baseline.problems),
            tuple(baseline.recorder.trace)))
    chosen = range(1, report.points + 1) if points is None else points
    for index in chosen:
        for variant in variants:
            for side in sides:
                point = CrashPoint(index, side, variant)
                run = run_scenario(target, point)
                label = run.recorder.crashed_at or "(point not reached)"
                phase = (run.recorder.phases[index - 1]
                         if index <= len(run.recorder.phases) else "-")
                problems = list(run.problems)
                if run.recorder.crashed_at is None:
                    problems.append(f"crash point #{index} was not reached: the scenario is "
                                    "not deterministic")
                checked = Checked(point, label, phase, not problems)
                example = None
                if problems:
                    example = Counterexample(target.name, point, label, tuple(problems),
                                             tuple(run.recorder.trace))
                    report.counterexamples.append(example)
                report.checked.append(checked)
                if on_point is not None:
                    on_point(checked, example)
    return report


# --------------------------------------------------------------------------
# Targets: which kinds, on which external systems
# --------------------------------------------------------------------------


def simcloud_target(kind: Kind, label: str = "") -> Target:
    """Exercise a kind backed by the simulated cloud, with asynchronous operations.

    Creating takes two polls, modifying and deleting one each, so every
    phase passes through a pending provider operation.
    """
    from lifecycle.providers.simcloud import DatabaseConnector, SimCloud
    from lifecycle.testing import database_manifest

    def system() -> ExternalSystem:
        cloud = SimCloud(seed=0, create_polls=2, modify_polls=1, delete_polls=1)
        return ExternalSystem(DatabaseConnector(cloud), lambda: set(cloud.instances()),
                              cloud.creations)

    def manifest(name: str) -> dict[str, Any]:
        data = database_manifest(name)
        data["apiVersion"], data["kind"] = kind.api_version, kind.kind
        return data

    def update(data: dict[str, Any]) -> dict[str, Any]:
        changed = json.loads(json.dumps(data))
        params = changed["spec"]["forProvider"]
        params["storage_gb"] = int(params.get("storage_gb", 20)) + 20
        return changed

    return Target(kind, system, manifest, update, label=label)


@attrs.frozen
class PostgresSettings:
    """Where the PostgreSQL server for the PostgreSQL kinds is, and the admin login."""

    host: str
    port: int
    user: str
    password: str = attrs.field(repr=False)
    database: str = "postgres"
    sslmode: str = "prefer"

    @classmethod
    def from_dsn(cls, dsn: str) -> PostgresSettings:
        """Read a libpq DSN (URI or ``key=value``); :class:`lifecycle.cli.UsageError` if bad."""
        from psycopg import conninfo

        from lifecycle.cli import UsageError

        try:
            info = conninfo.conninfo_to_dict(dsn)
        except Exception:  # the library's message may echo the password
            raise UsageError(f"{POSTGRES_DSN_ENV} is not a valid PostgreSQL connection "
                             "string") from None
        host = str(info.get("host") or "127.0.0.1")
        try:
            port = int(info.get("port") or 5432)
        except ValueError:
            raise UsageError(f"{POSTGRES_DSN_ENV}: the port must be a number") from None
        if not info.get("user") or not info.get("password"):
            raise UsageError(f"{POSTGRES_DSN_ENV} must name a user and a password (the admin "
                             "role that creates roles and databases)")
        return cls(host=host, port=port, user=str(info["user"]),
                   password=str(info["password"]), database=str(info.get("dbname") or "postgres"),
                   sslmode=str(info.get("sslmode") or "prefer"))

    def connect(self) -> Any:
        """An autocommit admin connection (psycopg)."""
        import psycopg

        from lifecycle.providers.postgres.config import SESSION_OPTIONS

        return psycopg.connect(host=self.host, port=self.port, user=self.user,
                               password=self.password, dbname=self.database,
                               sslmode=self.sslmode, connect_timeout=5, autocommit=True,
                               application_name="lifecycle-verify", options=SESSION_OPTIONS)

    def check(self) -> None:
        """Connect once; :class:`lifecycle.cli.UsageError` (secret-free) when that fails."""
        import psycopg

        from lifecycle.cli import UsageError

        try:
            self.connect().close()
        except psycopg.Error as exc:
            text = str(exc).replace(self.password, "***").strip().splitlines()
            raise UsageError(f"cannot connect to PostgreSQL at {self.host}:{self.port} as "
                             f"{self.user!r}: {text[0] if text else type(exc).__name__}"
                             ) from None


_IDENT = r'("(?:[^"]|"")*"|[^\s,]+)'
_CREATE = re.compile(r"^CREATE (?:ROLE|DATABASE) " + _IDENT)
_GRANT = re.compile(r"^GRANT .* ON DATABASE " + _IDENT + r" TO " + _IDENT)


def _unquote(identifier: str) -> str:
    if identifier.startswith('"'):
        return identifier[1:-1].replace('""', '"')
    return identifier


class _CountingSession:
    """An admin session that counts what the server acknowledged creating, per name.

    ``CREATE ROLE``/``CREATE DATABASE`` count for the name they create;
    a ``GRANT`` counts for ``<role>.<database>`` when the role held no
    explicit privilege on the database before it (it made the grant exist).
    Only statements that returned without an error are counted; the
    statement text (which may carry a password verifier) is never kept.
    """

    def __init__(self, session: Any, counts: dict[str, int]) -> None:
        self._session = session
        self._counts = counts

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)

    def execute(self, statement: Any, doing: str, secrets: Sequence[str | None] = ()) -> None:
        """Run the statement through the real session, counting a successful creation."""
        text = statement.as_string(self._session.connection)
        created: str | None = None
        grant = _GRANT.match(text)
        if grant:
            database, role = _unquote(grant.group(1)), _unquote(grant.group(2))
            if not _held(self._session.connection, role, database):
                created = f"{role}.{database}"
        else:
            create = _CREATE.match(text)
            created = _unquote(create.group(1)) if create else None
        self._session.execute(statement, doing, secrets)
        if created is not None:
            self._counts[created] = self._counts.get(created, 0) + 1

    def close(self) -> None:
        """Keep the shared connection open (the run closes it)."""


def _held(connection: Any, role: str, database: str) -> bool:
    """Whether ``role`` holds an explicit privilege on ``database``."""
    row = connection.execute(
        "SELECT count(*) FROM pg_catalog.pg_database d, "
        "LATERAL pg_catalog.aclexplode(d.datacl) a "
        "JOIN pg_catalog.pg_roles r ON r.oid = a.grantee "
        "WHERE d.datname = %s AND r.rolname = %s", [database, role]).fetchone()
    return bool(row and row[0])


class _CountingConnector:
    """Builds a kind's client on the run's admin connection, its session counting creations.

    The provider config the engine resolved is still read and checked as
    the real connector does; only the login is shared: every statement is
    autocommit and carries no session state, and a crash falls between two
    statements, never inside one, so a fresh engine re-using the connection
    sees exactly what a new login would. It saves a login per reconcile.
    """

    def __init__(self, client_class: Any, counts: dict[str, int], connection: Any) -> None:
        self.client_class = client_class
        self.counts = counts
        self.connection = connection

    def connect(self, resource: ManagedResource, config: ProviderConfig) -> Any:
        """A client whose session counts creations and whose close keeps the connection."""
        from lifecycle.providers.postgres.config import ServerConfig, Session

        session = Session(ServerConfig.from_provider_config(config), self.connection)
        return self.client_class(_CountingSession(session, self.counts))


def postgres_target(kind: Kind, settings: PostgresSettings, label: str = "") -> Target:
    """Exercise one PostgreSQL kind (Role, Database or Grant) on a real server.

    The server outlives every run, so each run gets its own names: the
    target's object is ``verify-<token>`` (random per target) and each run
    seeds the embedded API's uids at random, so the default external name
    ``verify-<token>-<uid8>`` is new in every run. *Leaked* means a role or
    database of this target's prefix that appeared during the run and that
    no stored object's external-name annotation names; for a Grant, the
    throwaway role of the run still holding a privilege on the database.
    *Created twice* is counted at the client-server boundary: every
    ``CREATE ROLE``/``CREATE DATABASE`` the server acknowledged for a name
    (and every ``GRANT`` that gave the role its first privilege), and, for
    roles and databases, every distinct OID the name was seen with. What a
    run leaves behind is dropped once it has been checked.
    """
    from lifecycle.providers.postgres.database import DatabaseClient
    from lifecycle.providers.postgres.grant import GrantClient
    from lifecycle.providers.postgres.role import RoleClient

    clients = {"Role": RoleClient, "Database": DatabaseClient, "Grant": GrantClient}
    if kind.kind not in clients:
        raise ValueError(f"{kind.kind} is not a PostgreSQL kind")
    client_class = clients[kind.kind]
    token = secrets.token_hex(3)
    prefix = f"verify-{token}"
    state: dict[str, str] = {}

    def system() -> ExternalSystem:
        counts: dict[str, int] = {}
        oids: dict[str, set[int]] = {}
        admin = settings.connect()
        run = secrets.token_hex(3)
        grantee = f"{prefix}-r{run}"
        state["grantee"] = grantee

        def names() -> set[str]:
            if kind.kind == "Grant":
                held = _held(admin, grantee, settings.database)
                return {f"{grantee}.{settings.database}"} if held else set()
            table, column = (("pg_roles", "rolname") if kind.kind == "Role"
                             else ("pg_database", "datname"))
            rows = admin.execute(f"SELECT {column}, oid FROM pg_catalog.{table} "
                                 f"WHERE starts_with({column}, %s)", [prefix + "-"]).fetchall()
            for name, oid in rows:
                oids.setdefault(name, set()).add(int(oid))
            return {name for name, _ in rows if name not in before}

        def creations(name: str) -> int:
            return max(counts.get(name, 0), len(oids.get(name, ())))

        def close() -> None:
            from psycopg import sql

            try:
                if kind.kind == "Grant":
                    admin.execute(sql.SQL("REVOKE ALL ON DATABASE {} FROM {}").format(
                        sql.Identifier(settings.database), sql.Identifier(grantee)))
                    admin.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(
                        sql.Identifier(grantee)))
                else:
                    for name in names():
                        verb = "ROLE" if kind.kind == "Role" else "DATABASE"
                        admin.execute(sql.SQL("DROP {} IF EXISTS {}").format(
                            sql.SQL(verb), sql.Identifier(name)))
            finally:
                admin.close()

        before: set[str] = set()
        if kind.kind == "Grant":
            from psycopg import sql

            admin.execute(sql.SQL("CREATE ROLE {} NOLOGIN").format(sql.Identifier(grantee)))
        else:
            before = names()
        return ExternalSystem(
            _CountingConnector(client_class, counts, admin), names, creations,
            credentials={"username": settings.user, "password": settings.password},
            provider_spec={"host": settings.host, "port": settings.port,
                           "sslmode": settings.sslmode, "database": settings.database},
            api_seed=secrets.randbits(64), close=close)

    def manifest(name: str) -> dict[str, Any]:
        spec: dict[str, Any]
        metadata: dict[str, Any] = {"name": name, "namespace": "default"}
        if kind.kind == "Role":
            spec = {"forProvider": {"login": True, "createdb": False}}
        elif kind.kind == "Database":
            spec = {"forProvider": {}}
        else:
            grantee = state["grantee"]
            spec = {"forProvider": {"role": grantee, "database": settings.database,
                                    "privileges": ["CONNECT"]}}
            metadata["annotations"] = {EXTERNAL_NAME: f"{grantee}.{settings.database}"}
        if kind.kind != "Grant":
            spec["writeConnectionSecretToRef"] = {"name": f"{name}-conn"}
        return {"apiVersion": kind.api_version, "kind": kind.kind, "metadata": metadata,
                "spec": spec}

    def update(data: dict[str, Any]) -> dict[str, Any]:
        changed = json.loads(json.dumps(data))
        params = changed["spec"]["forProvider"]
        if kind.kind == "Role":
            params["createdb"] = True
        elif kind.kind == "Database":
            params["connection_limit"] = 5
        else:
            params["privileges"] = ["CONNECT", "CREATE"]
        return changed

    return Target(kind, system, manifest, update, label=label, objects=(prefix,))


def postgres_settings() -> PostgresSettings | None:
    """The server named by ``LIFECYCLE_POSTGRES_DSN``, or None when it is not set."""
    dsn = os.environ.get(POSTGRES_DSN_ENV)
    return PostgresSettings.from_dsn(dsn) if dsn else None


def claim_target(kind: Kind, label: str = "") -> Target:
    """Exercise the bundled DatabaseClaim: dynamic provisioning on the simulated cloud.

    One default DatabaseInstanceClass (reclaim policy Delete); the claim
    names no class, so it is defaulted, provisions a DatabaseInstance,
    binds when that is Ready and propagates its connection Secret. The
    update changes the claim's ``storageGB`` (a portable field, applied only
    when provisioning, so the binding must simply survive the new
    generation); the delete releases and deletes the managed resource. Both
    reconcilers, the claim's and the managed resource's, write through the
    crashing API, so every point of either is explored; a restarted engine
    lists and queues claims and managed resources.

    Converged means: after create and update, the claim is Bound with its
    generation observed, exactly one managed resource carries the claim's
    labels, it is the one ``spec.resourceRef`` names, its ``spec.claimRef``
    has the claim's uid, it is Ready, and the claim's Secret exists; after
    delete, the claim and every managed resource provisioned for it are
    gone. External resources are tracked by the managed resources.
    """
    from lifecycle.machines.claim import DATABASE_BINDING
    from lifecycle.runtime.claims import (
        CLAIM_NAME,
        CLAIM_NAMESPACE,
        ClaimEnvironment,
        claim_manifest,
        class_manifest,
    )

    binding = DATABASE_BINDING
    if kind is not binding.claim:
        raise ValueError(f"{kind.kind} is not the bundled claim kind")
    managed = binding.managed
    base = simcloud_target(managed)

    def extend(env: Environment, api: Any, recorder: Recorder) -> None:
        claims = ClaimEnvironment(env, binding)
        claims.reconciler.api = api
        informed = env.reconcilers[kind.kind]
        informed.inner = TracedReconciler(claims.reconciler, recorder)  # type: ignore[attr-defined]

    def setup(env: Environment, system: ExternalSystem) -> None:
        env.api.create(class_manifest("standard", default=True))

    def manifest(name: str) -> dict[str, Any]:
        return claim_manifest(name, secret_name=f"{name}-db", storageGB=30)

    def update(data: dict[str, Any]) -> dict[str, Any]:
        changed = json.loads(json.dumps(data))
        changed["spec"]["storageGB"] = 50
        return changed

    def apply(env: Environment, data: dict[str, Any]) -> None:
        """Change only the fields the user wrote; keep classRef and resourceRef."""
        meta = data["metadata"]
        stored = env.api.get(kind.api_version, kind.kind, meta["namespace"], meta["name"])
        stored["spec"] = {**(stored.get("spec") or {}), **data["spec"]}
        env.api.replace(stored)
        env.enqueue(kind.kind, meta["name"], meta["namespace"])

    def converged(env: Environment, manifests: Mapping[str, dict[str, Any]],
                  expect: str) -> list[str]:
        problems: list[str] = []
        resources, _ = env.api.list(managed.api_version, managed.kind)
        for name, data in manifests.items():
            ns = data["metadata"]["namespace"]
            mine = sorted(
                f"{o['metadata']['namespace']}/{o['metadata']['name']}" for o in resources
                if (o["metadata"].get("labels") or {}).get(CLAIM_NAME) == name
                and (o["metadata"].get("labels") or {}).get(CLAIM_NAMESPACE) == ns)
            try:
                claim = env.api.get(kind.api_version, kind.kind, ns, name)
            except NotFound:
                claim = None
            if expect == "gone":
                if claim is not None:
                    problems.append(f"claim {name} was not deleted (state="
                                    f"{(claim.get('status') or {}).get('state')}, finalizers="
                                    f"{claim['metadata'].get('finalizers')})")
                if mine:
                    problems.append(f"managed resource(s) {', '.join(mine)} of claim {name} "
                                    "left behind (reclaim policy Delete)")
                continue
            if claim is None:
                problems.append(f"claim {name} vanished")
                continue
            if len(mine) != 1:
                problems.append(f"{len(mine)} managed resources provisioned for claim {name}: "
                                f"{', '.join(mine) or 'none'}")
            status = claim.get("status") or {}
            ready = get_condition(status.get("conditions") or [], "Ready")
            if status.get("state") != "bound" or ready is None or ready.status.value != "True":
                problems.append(f"claim {name} did not bind (state={status.get('state')}, "
                                f"Ready={ready.status.value if ready else None} "
                                f"{ready.reason if ready else ''})")
            elif status.get("observedGeneration") != claim["metadata"].get("generation"):
                problems.append(f"claim {name} is Bound but observedGeneration "
                                f"{status.get('observedGeneration')} != generation "
                                f"{claim['metadata'].get('generation')}")
            ref = (claim.get("spec") or {}).get("resourceRef") or {}
            try:
                resource = env.api.get(managed.api_version, managed.kind,
                                       ref.get("namespace"), ref.get("name", ""))
            except NotFound:
                resource = None
            if resource is None:
                problems.append(f"claim {name} names no existing managed resource ({ref})")
            else:
                claim_ref = (resource.get("spec") or {}).get("claimRef") or {}
                if claim_ref.get("uid") != claim["metadata"]["uid"]:
                    problems.append(f"managed resource {ref.get('name')} does not point back "
                                    f"at claim {name} (claimRef={claim_ref})")
                if (resource.get("status") or {}).get("state") != "ready":
                    problems.append(f"managed resource {ref.get('name')} is not Ready")
            try:
                env.api.get("v1", "Secret", ns, data["spec"]["writeConnectionSecretToRef"]["name"])
            except NotFound:
                problems.append(f"claim {name} has no propagated connection Secret")
        return problems

    return Target(kind, base.system, manifest, update, label=label, objects=("app",),
                  setup=setup, extend=extend, listed=(kind, managed), tracking=managed,
                  apply=apply, converged=converged)


def _kind_modules() -> Iterator[str]:
    import lifecycle.machines as machines

    for info in pkgutil.iter_modules(machines.__path__):
        yield f"lifecycle.machines.{info.name}"


def discover() -> list[tuple[str, Kind]]:
    """Every :class:`Kind` defined in a module of the ``machines`` package, as (spec, kind)."""
    found: dict[tuple[str, str], Kind] = {}
    seen: dict[tuple[str, str], str] = {}
    for module_name in _kind_modules():
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue  # a kind whose provider library is not installed
        for attr, value in sorted(vars(module).items()):
            if not isinstance(value, Kind):
                continue
            key = (value.api_version, value.kind)
            home = value.machine.__module__ == module_name
            if key in seen and not home:
                continue  # imported from its home module
            seen[key] = f"{module_name}:{attr}"
            found[key] = value
    return [(seen[key], kind) for key, kind in found.items()]


def target_for(spec: str, kind: Kind) -> Target | str:
    """The target exercising ``kind``, or a one-line reason why it cannot be explored.

    Order: the kind module's own ``verify_target(kind)``; the simulated-cloud
    target for kinds with :class:`lifecycle.providers.simcloud.DatabaseParameters`;
    the PostgreSQL kinds, which need ``LIFECYCLE_POSTGRES_DSN``.
    """
    module = importlib.import_module(spec.partition(":")[0])
    hook = getattr(module, "verify_target", None)
    if callable(hook):
        built = hook(kind)
        if isinstance(built, Target):
            return attrs.evolve(built, label=built.label or spec)
    from lifecycle.providers.simcloud import DatabaseParameters

    if kind.parameters is DatabaseParameters:
        return simcloud_target(kind, spec)
    if "postgres" in spec:
        if not os.environ.get(POSTGRES_DSN_ENV):
            return f"needs a PostgreSQL server: set {POSTGRES_DSN_ENV}"
        return (f"{POSTGRES_DSN_ENV} is set but the module defines no verify_target(kind); "
                "nothing to run")
    return "no verification target: define verify_target(kind) in its module"


def targets(specs: Sequence[str] = ()) -> tuple[list[Target], list[tuple[str, str]]]:
    """Targets for ``specs`` (``MODULE:KIND``), or for every bundled kind when empty.

    Returns the targets and the (spec, reason) pairs skipped. A spec that
    does not name a Kind, or a named kind that cannot be explored, is a
    :class:`lifecycle.cli.UsageError`.
    """
    from lifecycle.cli import UsageError, load

    chosen: list[Target] = []
    skipped: list[tuple[str, str]] = []
    if specs:
        for spec in specs:
            kind = load(spec)
            if not isinstance(kind, Kind):
                raise UsageError(f"{spec} is not a Kind (got {type(kind).__name__})")
            built = target_for(spec, kind)
            if isinstance(built, str):
                raise UsageError(f"{spec}: {built}")
            chosen.append(built)
        return chosen, skipped
    for spec, kind in discover():
        built = target_for(spec, kind)
        if isinstance(built, str):
            skipped.append((spec, built))
        else:
            chosen.append(built)
    return chosen, skipped


# --------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------


def _print_point(out: TextIO, checked: Checked, example: Counterexample | None) -> None:
    p = checked.point
    verdict = "ok  " if checked.ok else "FAIL"
    out.write(f"  {verdict} #{p.index:<3} {p.side:<6} {p.variant:<17} [{checked.phase}] "
              f"{checked.operation}\n")
    if example is not None:
        out.write(example.render() + "\n")


def run_cli(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """``lifecycle verify``: explore each target; exit 1 on any counterexample."""
    from lifecycle.cli import UsageError

    out = out if out is not None else sys.stdout

    chosen, skipped = targets(args.kinds)
    for spec, reason in skipped:
        out.write(f"SKIP {spec}: {reason}\n")
    if not chosen:
        raise UsageError("no kind to verify")
    sides = SIDES if args.side is None else (args.side,)
    variants = VARIANTS if args.variant is None else (args.variant,)
    failed = 0
    for target in chosen:
        if args.point is not None:
            failed += _replay(out, target, args.point, sides, variants)
            continue
        out.write(f"{target.name}: exploring every side-effect point of "
                  f"create -> update -> delete\n")
        report = explore(target, sides=sides, variants=variants,
                         on_point=lambda c, e: _print_point(out, c, e))
        out.write(f"{target.name}: {report.points} side-effect points, "
                  f"{len(report.checked)} crash runs "
                  f"({' and '.join(sides)} x {', '.join(variants)}), "
                  f"{len(report.counterexamples)} counterexample(s)\n")
        failed += len(report.counterexamples)
    out.write("verify: " + ("FAILED" if failed else "OK") + "\n")
    return 1 if failed else 0


def _replay(out: TextIO, target: Target, index: int, sides: Sequence[str],
            variants: Sequence[str]) -> int:
    """Replay one point (0: no crash) and print its full trace."""
    runs = ([(None, run_scenario(target))] if index == 0 else
            [(CrashPoint(index, s, v), run_scenario(target, CrashPoint(index, s, v)))
             for v in variants for s in sides])
    failed = 0
    for point, run in runs:
        where = "no crash" if point is None else f"#{index} {point.side} {point.variant}"
        out.write(f"{target.name}: replay {where}\n")
        for line in run.recorder.trace:
            out.write(f"    {line}\n")
        for problem in run.problems:
            out.write(f"  problem: {problem}\n")
        out.write(f"  {'FAIL' if run.problems else 'ok'}\n")
        failed += bool(run.problems)
    return failed


def register(subparsers: Any) -> None:
    """Add ``lifecycle verify [MODULE:KIND ...]``."""
    parser = subparsers.add_parser(
        "verify",
        help="explore a crash at every side-effect point of each kind's lifecycle",
        description=(
            "Run create -> update -> delete for each kind and, for every API write and "
            "external create/update/delete, simulate the operator dying just before and just "
            "after it (also with the objects deleted while it is down); a fresh engine takes "
            "over. Checks that nothing is created twice, nothing leaks and every object "
            "converges. With no argument: every bundled kind (the PostgreSQL kinds only when "
            f"{POSTGRES_DSN_ENV} is set). Exits 1 on a counterexample."),
    )
    parser.add_argument("kinds", nargs="*", metavar="MODULE:KIND",
                        help="kinds to verify, e.g. lifecycle.machines.database:DatabaseInstance")
    parser.add_argument("--point", type=int, default=None,
                        help="replay one point (0: the run without a crash) with its trace")
    parser.add_argument("--side", choices=SIDES, default=None, help="only this side")
    parser.add_argument("--variant", choices=VARIANTS, default=None, help="only this variant")
    parser.add_argument("--trace", action="store_true",
                        help="with --point: print the trace (always printed on replay)")
    parser.set_defaults(func=run_cli)
