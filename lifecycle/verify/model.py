"""What the crash explorer works with: targets, crash points, verdicts, the recorder.

A :class:`Target` says how to exercise one kind: a fresh
:class:`ExternalSystem` per run, a manifest, a spec update. A
:class:`CrashPoint` names one side-effect point and the side of it at which
the process dies; the :class:`Recorder` counts the points of a run, keeps
its trace and raises :class:`Crash` on cue. A run that breaks an invariant
yields a :class:`Counterexample`; an exploration yields a :class:`Report`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs

from lifecycle.core.contract import Connector
from lifecycle.core.errors import LifecycleError
from lifecycle.core.kind import Kind
from lifecycle.runtime.reconciler import Reconciler
from lifecycle.testing import Environment

__all__ = [
    "CONCURRENT", "PHASES", "SIDES", "VARIANTS", "Checked", "Counterexample", "Crash", "CrashPoint",
    "ExternalSystem", "Phase", "Recorder", "Report", "Target", "Unavailable", "VerifyError",
]

#: Sides of a side-effect point at which the process can die.
SIDES = ("before", "after")
#: Crash variants: the engine restarts at once, or the objects are deleted while it is down.
VARIANTS = ("restart", "delete-while-down")
#: Not a crash: the user's next action (the spec update during the create, the delete
#: during the update) lands just before the point, while the engine is mid-pass. Explored
#: with stale reads (``lifecycle verify --stale``), where the engine cannot see it yet.
CONCURRENT = "concurrent"


class Crash(BaseException):
    """The simulated death of the operator process at a side-effect point.

    A ``BaseException`` so that the engine's ``except Exception`` blocks,
    which are right to catch real errors, cannot swallow a process death.
    """



class VerifyError(LifecycleError):
    """A kind that cannot be explored as asked: printed as one line by the command line."""


class Unavailable(VerifyError):
    """Raised by a kind's target function when its target cannot be built here.

    The message says what is missing (a server, a setting). Exploring every
    registered kind lists the kind as skipped with it; naming the kind
    explicitly reports it as an error.
    """




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
    #: The password an external resource holds now, when the system can tell: a Ready
    #: object's connection Secret must hold the same one.
    password: Callable[[str], str | None] | None = None


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
    #: Objects expected to keep retrying (refused until another object lets go): a queue
    #: left with only these backing off counts as settled; ``converged`` judges them.
    waiting: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        """How reports and replay commands name this target (the name it was chosen by)."""
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
    """Die just ``side`` the ``index``-th side-effect point (1-based).

    With ``variant`` :data:`CONCURRENT` nothing dies: the user's next action
    is taken just before the point instead.
    """

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
    #: The lag of the stale-cache mode the run used (0: reads were fresh).
    stale: int = 0
    #: The kubeconfig of the real API server the run used ("": the embedded API).
    kubeconfig: str = ""

    def replay_command(self) -> str:
        """The command line that replays exactly this run, printing its trace."""
        stale = f" --stale {self.stale}" if self.stale else ""
        if self.kubeconfig:
            stale += f" --kubeconfig {self.kubeconfig}"
        if self.point is None:
            return f"lifecycle verify {self.target} --point 0{stale} --trace"
        return (f"lifecycle verify {self.target} --point {self.point.index} "
                f"--side {self.point.side} --variant {self.point.variant}{stale} --trace")

    def render(self) -> str:
        """The counterexample as text: where, what failed, the trace, how to replay."""
        if self.point is None:
            where = "without a crash"
        elif self.point.variant == CONCURRENT:
            where = f"user's next action just before point #{self.point.index} ({self.operation})"
        else:
            where = (f"crash {self.point.side} point #{self.point.index} ({self.operation}), "
                     f"variant {self.point.variant}")
        if self.stale:
            where += f", reads up to {self.stale} write(s) stale"
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



class Recorder:
    """Counts side-effect points, keeps the trace, and raises :class:`Crash` on cue."""

    def __init__(self, crash: CrashPoint | None) -> None:
        self.crash = crash
        #: With a :data:`CONCURRENT` point: the user's next action, taken just before it.
        self.interject: Callable[[], None] | None = None
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
        crash = self.crash
        armed = crash is not None and crash.index == index and self.crashed_at is None
        if armed and crash is not None and crash.variant == CONCURRENT:
            self.trace.append(f"engine {self.engine}: #{index} {label}  <- the user acts first")
            self.crashed_at = label
            if self.interject is not None:
                self.interject()
            armed = False
        if armed and crash is not None and crash.side == "before":
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

