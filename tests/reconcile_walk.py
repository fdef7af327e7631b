"""The walk of one reconcile through the engine's modules, recorded with ``sys.setprofile``.

:func:`walk` runs one reconcile on the harness and records every call into
a Python function of a *walked* module (the engine's own rooms:
``lifecycle.runtime``, the queue ends in ``lifecycle.core.requeue``,
``lifecycle.testing.queue`` and the harness); consecutive calls in the same
module are one visit. What the walk passes through without being part of
the story is left out: the pure core's values and readers (``lifecycle.core``
but the requeue step), the Kubernetes helpers (``lifecycle.kube``), the
embedded API server on the other side of the wire (``lifecycle.sim``), and
the kind's and provider's own code (``lifecycle.machines``,
``lifecycle.providers``). A helper that calls back into the module that
called it (a lambda handed down, a method bounced through another room)
shows as a second visit of the caller.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable, Iterable
from types import FrameType
from typing import Any

#: Modules the walk records: the engine's own rooms.
WALKED = ("lifecycle.runtime.", "lifecycle.core.requeue", "lifecycle.testing.queue",
          "lifecycle.testing.harness")


#: Qualified names whose calls are not part of the walk: the harness's clock (the pass
#: asks the time as it goes, as the operator asks the system clock).
CLOCKS = ("VirtualClock.",)


def walked(module: str) -> bool:
    """Whether calls into ``module`` are part of the walk."""
    return any(module == p.rstrip(".") or module.startswith(p) for p in WALKED)


def record(run: Callable[[], Any], keep: Callable[[str], bool] = walked) -> list[str]:
    """The modules ``run()`` calls into (those ``keep`` accepts), consecutive repeats
    collapsed into one visit."""
    seen: list[str] = []

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event != "call" or frame.f_code.co_qualname.startswith(CLOCKS):
            return
        module = frame.f_globals.get("__name__", "")
        if keep(module) and (not seen or seen[-1] != module):
            seen.append(module)

    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(previous)
    return seen


def visits(sequence: Iterable[str]) -> Counter[str]:
    """How many times each module is visited in a collapsed sequence."""
    return Counter(sequence)


def short(module: str) -> str:
    """``runtime/reconciler`` for ``lifecycle.runtime.reconciler``."""
    return module.removeprefix("lifecycle.").replace(".", "/")
