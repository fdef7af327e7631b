"""The walk of one reconcile through the engine's modules, recorded with ``sys.setprofile``.

:func:`walk` runs one reconcile on the harness and records each *visit* of a
*walked* module (the engine's own rooms: ``lifecycle.runtime``, the queue
ends in ``lifecycle.core.requeue``, ``lifecycle.testing.queue`` and the
harness): a call into a Python function of that module from another module.
A module calling its own functions stays in the same visit, and consecutive
visits of one module are one. What the walk passes through without being
part of the story is left out, as if it were part of its caller: the pure
core's values and readers (``lifecycle.core`` but the requeue step), the
Kubernetes helpers (``lifecycle.kube``), the embedded API server on the other
side of the wire (``lifecycle.sim``), and the kind's and provider's own code
(``lifecycle.machines``, ``lifecycle.providers``). A helper that calls back
into the module that called it (a lambda handed down, a method bounced
through another room) shows as a second visit of the caller: the callback is
entered from the helper's module.
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

#: The file name of the methods attrs generates (``__init__``, ``__eq__``...) for a value.
GENERATED = "<attrs generated"


def skipped(frame: FrameType) -> bool:
    """Whether a call into ``frame`` is left out: the harness's clock, attrs' methods."""
    code = frame.f_code
    return code.co_qualname.startswith(CLOCKS) or code.co_filename.startswith(GENERATED)


def walked(module: str) -> bool:
    """Whether calls into ``module`` are part of the walk."""
    return any(module == p.rstrip(".") or module.startswith(p) for p in WALKED)


def caller(frame: FrameType, keep: Callable[[str], bool] = walked) -> str | None:
    """The walked module of the nearest walked frame below ``frame`` (its caller, skipping
    what the walk leaves out), or None when none is walked."""
    below = frame.f_back
    while below is not None:
        module = below.f_globals.get("__name__", "")
        if keep(module) and not skipped(below):
            return str(module)
        below = below.f_back
    return None


def record(run: Callable[[], Any], keep: Callable[[str], bool] = walked) -> list[str]:
    """The modules ``run()`` visits (those ``keep`` accepts): each entry into a module
    from another one, consecutive repeats collapsed into one visit."""
    seen: list[str] = []

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event != "call" or skipped(frame):
            return
        module = frame.f_globals.get("__name__", "")
        if not keep(module) or (seen and seen[-1] == module):
            return
        if caller(frame, keep) != module:
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
