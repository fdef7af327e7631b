"""Running the scenario, with or without a crash, and exploring every crash point."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import attrs

from lifecycle.core import objects
from lifecycle.core.conditions import get as get_condition
from lifecycle.core.kind import (
    EXTERNAL_NAME,
    FINALIZER,
    PROVIDER_CONFIG_KIND,
    Kind,
    connection_secret_ref,
)
from lifecycle.core.vocabulary import ConditionTypes
from lifecycle.kube.errors import NotFound
from lifecycle.runtime.secrets import decode, read_secret
from lifecycle.sim.apiserver import EmbeddedAPI
from lifecycle.testing import Environment, VirtualClock
from lifecycle.verify.crashing import CrashingAPI, CrashingConnector, TracedReconciler
from lifecycle.verify.model import (
    CONCURRENT,
    PHASES,
    SIDES,
    VARIANTS,
    Checked,
    Counterexample,
    Crash,
    CrashPoint,
    ExternalSystem,
    Recorder,
    Report,
    Target,
)
from lifecycle.verify.remote import RealServer
from lifecycle.verify.stale import StaleView

__all__ = ["ScenarioRun", "converged_objects", "explore", "run_scenario"]


@attrs.define
class ScenarioRun:
    """The outcome of one scenario run: its recorder (points, trace), problems, crash phase."""

    recorder: Recorder
    problems: list[str]
    phase_of_crash: str | None


def _engine(target: Target, api: Any, clock: VirtualClock, connector: CrashingConnector,
            recorder: Recorder, stale: int = 0) -> Environment:
    """A fresh engine: new reconcilers and an empty work queue over the same store.

    The managed-resource reconciler runs ``target.tracking`` (default: the
    target's kind); ``target.extend`` adds the others (a claim reconciler).
    With ``stale`` the engine reads through the operator's cache over stores
    lagging up to that many writes (:mod:`lifecycle.verify.stale`); the
    view is kept as ``env.stale_view`` for :func:`_settle`.
    """
    managed = target.tracking or target.kind
    env = Environment([(managed, connector)], api=api, clock=clock)
    engine_api: Any = CrashingAPI(api, recorder)
    view = None
    if stale:
        kinds = [managed, target.kind, *target.listed]
        pairs = [(k.api_version, k.kind) for k in kinds]
        pairs += [("v1", "Secret"), ("v1", "Namespace"),
                  *((k.provider_config_api, PROVIDER_CONFIG_KIND) for k in kinds)]
        view = StaleView(api, pairs, stale, {k.kind for k in kinds},
                         lambda kind, ns, name: env.enqueue(kind, name, ns), now=clock.now)
        start = clock.now()
        engine_api = view.cache(engine_api, lambda: (clock.now() - start).total_seconds())
    env.stale_view = view
    reconciler = target.reconciler(engine_api, managed, connector, clock=clock.now)
    env.reconcilers[managed.kind] = TracedReconciler(reconciler, recorder)
    if target.extend is not None:
        target.extend(env, engine_api, recorder)
    return env


def _enqueue_all(env: Environment, kinds: Iterable[Kind]) -> None:
    """What a restarted operator does first: list every object and queue it."""
    for kind in kinds:
        items, _ = env.api.list(kind.api_version, kind.kind)
        for obj in items:
            meta = obj["metadata"]
            env.enqueue(kind.kind, meta["name"], meta.get("namespace"))


def _settle(env: Environment, waiting: tuple[str, ...] = ()) -> str | None:
    """Run the queue until idle; a non-settling queue is returned as a problem.

    Objects named in ``waiting`` may be left backing off: the target expects
    them to be refused until another object lets go. With such objects the
    queue runs for ten virtual minutes, then only they may still be queued.
    With stale reads, an idle engine lets its stores catch up and runs again
    for what they deliver, until they bring nothing new.
    """
    view = getattr(env, "stale_view", None)
    for _ in range(100):
        failure = _run_queue(env, waiting)
        if failure is not None or view is None or not view.catch_up():
            return failure
    return "did not converge: the stores kept delivering changes"


def _run_queue(env: Environment, waiting: tuple[str, ...]) -> str | None:
    try:
        if waiting:
            env.run_until_idle(max_steps=2_000, max_attempts=None, horizon=600.0)
        else:
            env.run_until_idle(max_steps=2_000)
    except AssertionError as exc:
        left = {key for key, (_, reason) in env.pending().items() if reason != "Poll"}
        if waiting and left and all(key[2] in waiting for key in left):
            return None
        return f"did not converge: {str(exc)[:300]}"
    return None


def run_scenario(
    target: Target,
    crash: CrashPoint | None = None,
    *,
    stale: int = 0,
    server: RealServer | None = None,
) -> ScenarioRun:
    """Run the scenario once, dying at ``crash`` (if any), and check every invariant.

    ``stale``: the engine reads through caches up to that many writes behind
    (:mod:`lifecycle.verify.stale`); 0 reads fresh. ``server``: run on that
    real API server, in a world of its own (:mod:`lifecycle.verify.remote`),
    instead of a fresh embedded API.
    """
    clock = VirtualClock()
    recorder = Recorder(crash)
    system = target.system()
    api: Any = None
    try:
        api = (EmbeddedAPI(clock=clock.now, seed=system.api_seed) if server is None
               else server.open())
        return _play(target, crash, clock, recorder, system, api, stale)
    finally:
        if server is not None and api is not None:
            server.close(api)
        if system.close is not None:
            system.close()


def _act(env: Environment, target: Target, phase: str,
         manifests: dict[str, dict[str, Any]]) -> None:
    """The user's action of ``phase`` on every object of the scenario."""
    kind = target.kind
    for name in target.objects:
        if phase == "create":
            env.apply(manifests[name])
        elif phase == "update":
            manifests[name] = target.update(manifests[name])
            (target.apply or Environment.apply)(env, manifests[name])
        else:
            env.delete(kind.kind, name, _namespace(manifests[name], kind))


def _play(target: Target, crash: CrashPoint | None, clock: VirtualClock, recorder: Recorder,
          system: ExternalSystem, api: Any, stale: int = 0) -> ScenarioRun:
    connector = CrashingConnector(system, recorder)
    env = _engine(target, api, clock, connector, recorder, stale)
    env.provider_config(credentials=system.credentials, spec=system.provider_spec or None)
    if target.setup is not None:
        target.setup(env, system)
    kind = target.kind
    manifests = {name: target.manifest(name) for name in target.objects}
    problems: list[str] = []
    crashed_in: str | None = None
    deleted_while_down = False
    early: list[str] = []  # phases whose action the user took early (CONCURRENT)
    names = [phase.name for phase in PHASES]

    def act_early() -> None:
        at = names.index(recorder.phase) + 1
        if at < len(names) and names[at] not in early:
            early.append(names[at])
            recorder.trace.append(f"user (engine mid-pass): {names[at]} "
                                  f"{', '.join(target.objects)}")
            _act(env, target, names[at], manifests)

    recorder.interject = act_early
    for phase in PHASES:
        recorder.phase = phase.name
        if not deleted_while_down and phase.name not in early:
            recorder.trace.append(f"user: {phase.name} {', '.join(target.objects)}")
            _act(env, target, phase.name, manifests)
        try:
            failure = _settle(env, target.waiting)
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
            env = _engine(target, api, clock, connector, recorder, stale)
            _enqueue_all(env, target.listed or (kind,))
            try:
                failure = _settle(env, target.waiting)
            except Crash:  # only one crash is ever armed
                failure = "crashed twice"
        expect = phase.expect
        if deleted_while_down or (early and names.index(early[-1]) > names.index(phase.name)):
            expect = "gone" if deleted_while_down else PHASES[names.index(early[-1])].expect
        found = ([failure] if failure else []) + _check(env, target, manifests, connector, expect)
        problems += [f"after {phase.name}: {p}" for p in found]
        if found:
            break
    return ScenarioRun(recorder, problems, crashed_in)


def _namespace(manifest: Mapping[str, Any], kind: Kind) -> str | None:
    return (manifest["metadata"].get("namespace") or "default") if kind.namespaced else None


def _check(env: Environment, target: Target, manifests: Mapping[str, dict[str, Any]],
           connector: CrashingConnector, expect: str) -> list[str]:
    """The crash-safety invariants after one phase: none created twice, none leaked, converged."""
    kind = target.kind
    tracking = target.tracking or kind
    problems: list[str] = []
    tracked: dict[str, str] = {}
    items, _ = env.api.list(tracking.api_version, tracking.kind)
    for obj in items:
        external = objects.annotations(obj).get(EXTERNAL_NAME)
        if external:
            tracked[external] = obj["metadata"]["name"]
    if target.converged is not None:
        problems += target.converged(env, manifests, expect)
    else:
        problems += converged_objects(env, kind, manifests, expect)
    existing = connector.system.names()
    for external in sorted(existing | connector.seen):
        created = connector.creations(external)
        if created > 1:
            problems.append(f"external resource {external} was created {created} times")
    for external in sorted(existing):
        if external not in tracked:
            problems.append(f"external resource {external} leaked: no object tracks it")
    if expect == "ready" and connector.system.password is not None:
        problems += _passwords(env, items, existing, connector.system.password)
    return problems


def _passwords(env: Environment, items: Sequence[Mapping[str, Any]], existing: set[str],
               password: Callable[[str], str | None]) -> list[str]:
    """Ready objects whose connection Secret does not hold the password their resource was
    given. The passwords themselves never appear in the problems.
    """
    problems = []
    for obj in items:
        external = objects.annotations(obj).get(EXTERNAL_NAME)
        if not external or external not in existing or objects.status(obj).get(
                "state") != "ready" or FINALIZER not in objects.finalizers(obj):
            continue
        given = password(external)
        namespace, name = connection_secret_ref(obj)
        stored = decode(read_secret(env.api, namespace, name) or {}).get("password")
        if given is not None and stored != given:
            problems.append(f"{obj['metadata']['name']}'s connection Secret {namespace}/{name} "
                            f"does not hold the password external resource {external} was "
                            "given" + (" (it holds none)" if stored is None else ""))
    return problems


def converged_objects(env: Environment, kind: Kind, manifests: Mapping[str, dict[str, Any]],
               expect: str) -> list[str]:
    """The problems keeping ``manifests``' objects from being all Ready with their generation
    observed (``expect`` "ready") or all gone (``expect`` "gone")."""
    problems: list[str] = []
    for name, manifest in manifests.items():
        ns = _namespace(manifest, kind)
        try:
            obj = env.api.get(kind.api_version, kind.kind, ns, name)
        except Exception:
            obj = None
        if expect == "gone":
            if obj is not None:
                state = objects.status(obj).get("state")
                problems.append(f"{name} was not deleted (state={state}, "
                                f"finalizers={obj['metadata'].get('finalizers')})")
            continue
        if obj is None:
            problems.append(f"{name} vanished")
            continue
        status = objects.status(obj)
        ready = get_condition(status.get("conditions") or [], ConditionTypes.READY)
        generation = obj["metadata"].get("generation")
        if status.get("state") != "ready" or ready is None or ready.status.value != "True":
            problems.append(f"{name} did not converge to Ready (state={status.get('state')}, "
                            f"Ready={ready.status.value if ready else None} "
                            f"{ready.reason if ready else ''})")
        elif status.get("observedGeneration") != generation:
            problems.append(f"{name} is Ready but observedGeneration "
                            f"{status.get('observedGeneration')} != generation {generation}")
        if FINALIZER not in objects.finalizers(obj):
            problems.append(f"{name} is not claimed (no finalizer {FINALIZER})")
        lost = _lost_fields(manifest.get("spec") or {}, obj.get("spec") or {})
        if lost:
            problems.append(f"{name} lost the user's spec change: {', '.join(lost)}")
    return problems


def _lost_fields(wanted: Mapping[str, Any], stored: Mapping[str, Any],
                 prefix: str = "spec") -> list[str]:
    """Fields the user set in ``wanted`` that ``stored`` does not hold as set.

    Fields the user left out may have been defaulted or late-initialised;
    a field the user set must keep its value.
    """
    lost = []
    for key, value in wanted.items():
        path = f"{prefix}.{key}"
        if isinstance(value, Mapping) and isinstance(stored.get(key), Mapping):
            lost += _lost_fields(value, stored[key], path)
        elif stored.get(key) != value:
            lost.append(f"{path}={value!r} (stored: {stored.get(key)!r})")
    return lost


def explore(
    target: Target,
    *,
    sides: Sequence[str] = SIDES,
    variants: Sequence[str] = VARIANTS,
    points: Iterable[int] | None = None,
    on_point: Callable[[Checked, Counterexample | None], None] | None = None,
    stale: int = 0,
    server: RealServer | None = None,
) -> Report:
    """Explore every side-effect point of ``target``'s scenario; return a :class:`Report`.

    A first run without a crash counts the points (and must itself pass);
    then each point (or only ``points``: those the scenario does not have are
    skipped) is replayed for every side and
    variant; ``on_point`` is called with each point's verdict as it is checked.
    With ``stale`` every run reads through caches up to that many writes
    behind; the :data:`CONCURRENT` variant is explored on the ``before`` side
    only (the user acting just after a point is acting just before the next).
    With ``server`` every run takes place on that real API server.
    """
    report = Report(target.name)
    where = server.kubeconfig if server is not None else ""
    baseline = run_scenario(target, stale=stale, server=server)
    report.points = baseline.recorder.count
    report.operations = list(baseline.recorder.operations)
    if baseline.problems:
        report.counterexamples.append(Counterexample(
            target.name, None, "no crash", tuple(baseline.problems),
            tuple(baseline.recorder.trace), stale, where))
    chosen = (range(1, report.points + 1) if points is None
              else [i for i in points if 1 <= i <= report.points])
    for index in chosen:
        for variant in variants:
            for side in sides:
                if variant == CONCURRENT and side != "before":
                    continue
                point = CrashPoint(index, side, variant)
                outcome = run_scenario(target, point, stale=stale, server=server)
                label = outcome.recorder.crashed_at or "(point not reached)"
                phase = (outcome.recorder.phases[index - 1]
                         if index <= len(outcome.recorder.phases) else "-")
                problems = list(outcome.problems)
                if outcome.recorder.crashed_at is None:
                    problems.append(f"crash point #{index} was not reached: the scenario is "
                                    "not deterministic")
                checked = Checked(point, label, phase, not problems)
                example = None
                if problems:
                    example = Counterexample(target.name, point, label, tuple(problems),
                                             tuple(outcome.recorder.trace), stale, where)
                    report.counterexamples.append(example)
                report.checked.append(checked)
                if on_point is not None:
                    on_point(checked, example)
    return report

