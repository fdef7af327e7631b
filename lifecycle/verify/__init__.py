"""The crash-point explorer: checks that the process may die at any point safely.

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
external system, a manifest, a spec update). Kinds register a function
building their target (``Registration.verify_target``); :func:`targets`
takes every registered kind, or the ones named, and lists a kind without a
target, or whose target cannot be built here, as skipped with the reason.

Where the API lives: by default every run gets a fresh embedded API. Given a
:class:`RealServer` (``lifecycle verify --kubeconfig FILE``) every run takes
place on that real API server instead, in namespaces of its own, while the
external system and the virtual clock stay in this process
(:mod:`~lifecycle.verify.remote`).

Modules: :mod:`~lifecycle.verify.model` (targets, crash points, verdicts,
the recorder), :mod:`~lifecycle.verify.crashing` (the crashing API, client
and connector), :mod:`~lifecycle.verify.explorer` (running and exploring
the scenario), :mod:`~lifecycle.verify.remote` (a real API server) and
:mod:`~lifecycle.verify.targets` (choosing kinds). The
``lifecycle verify`` command is :mod:`lifecycle.cli.verify`.
"""

from __future__ import annotations

from lifecycle.verify.crashing import (
    CrashingAPI,
    CrashingClient,
    CrashingConnector,
    TracedReconciler,
)
from lifecycle.verify.explorer import ScenarioRun, explore, run_scenario
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
    Phase,
    Recorder,
    Report,
    Target,
    Unavailable,
    VerifyError,
)
from lifecycle.verify.remote import RealServer, ServerRefused
from lifecycle.verify.targets import target_for, targets

__all__ = [
    "CONCURRENT",
    "PHASES",
    "SIDES",
    "VARIANTS",
    "Checked",
    "Counterexample",
    "Crash",
    "CrashPoint",
    "CrashingAPI",
    "CrashingClient",
    "CrashingConnector",
    "ExternalSystem",
    "Phase",
    "RealServer",
    "Recorder",
    "Report",
    "ScenarioRun",
    "ServerRefused",
    "Target",
    "TracedReconciler",
    "Unavailable",
    "VerifyError",
    "explore",
    "run_scenario",
    "target_for",
    "targets",
]
