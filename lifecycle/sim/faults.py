"""Fault injection for the embedded API: errors, latency and dropped watches.

A :class:`FaultInjector` holds an ordered list of :class:`Fault` rules. Every
call of the embedded API checks it before doing anything, so a triggered
fault never leaves a partial write behind. Randomness comes from a private,
seeded generator, which keeps a faulty run reproducible.
"""

from __future__ import annotations

import copy
import random
import threading
import time
from collections.abc import Callable

import attrs

__all__ = ["VERBS", "WRITE_VERBS", "Fault", "FaultInjector"]

#: Every verb a fault can name (``*`` matches them all).
VERBS = frozenset(
    {"get", "list", "create", "replace", "replace_status", "patch", "delete", "watch"}
)
#: The verbs that write (counted by :meth:`EmbeddedAPI.writes`).
WRITE_VERBS = frozenset({"create", "replace", "replace_status", "patch", "delete"})


@attrs.define(eq=False)
class Fault:
    """One injected fault: on matching calls, wait ``latency`` seconds then raise ``error``.

    ``kind`` ``None`` matches every kind. ``times`` ``None`` means unlimited;
    ``fired`` counts how often the fault has triggered. ``object_name``, when
    set, limits the fault to calls about the object of that name (calls that
    pass no name never match it).
    """

    verb: str
    kind: str | None = None
    error: BaseException | type[BaseException] | None = None
    probability: float = 1.0
    times: int | None = None
    latency: float = 0.0
    name: str | None = None
    fired: int = 0
    object_name: str | None = None

    @property
    def exhausted(self) -> bool:
        """Whether the fault has triggered ``times`` times already."""
        return self.times is not None and self.fired >= self.times

    def make_error(self) -> BaseException | None:
        """A fresh exception to raise for one trigger, or ``None`` for latency only."""
        error = self.error
        if error is None:
            return None
        if isinstance(error, type):
            return error(f"injected fault: {self.verb} {self.kind or '*'}")
        return copy.copy(error)


class FaultInjector:
    """Deterministic fault injection for an embedded API.

    Faults are checked in the order they were added; the first one that
    triggers wins. A fault triggers before the operation, so nothing is
    written. Randomness comes from a private generator seeded with ``seed``.
    """

    def __init__(self, seed: int = 0) -> None:
        self._lock = threading.Lock()
        self._rng = random.Random(seed)
        self._faults: list[Fault] = []
        self._drop_hooks: list[Callable[[], None]] = []

    def add(
        self,
        verb: str,
        kind: str | None = None,
        *,
        error: BaseException | type[BaseException] | None = None,
        probability: float = 1.0,
        times: int | None = None,
        latency: float = 0.0,
        name: str | None = None,
        object_name: str | None = None,
    ) -> Fault:
        """Add a fault on ``verb`` (``*`` for every verb) and return it for later removal."""
        if verb != "*" and verb not in VERBS:
            raise ValueError(f"unknown verb {verb!r}; expected one of {sorted(VERBS)}")
        if not 0.0 <= probability <= 1.0:
            raise ValueError("probability must be within [0, 1]")
        if latency < 0:
            raise ValueError("latency must not be negative")
        fault = Fault(verb, kind, error, probability, times, latency, name,
                      object_name=object_name)
        with self._lock:
            self._faults.append(fault)
        return fault

    def remove(self, fault: Fault) -> None:
        """Remove one fault; removing a fault twice is harmless."""
        with self._lock:
            self._faults = [f for f in self._faults if f is not fault]

    def clear(self) -> None:
        """Remove every fault."""
        with self._lock:
            self._faults = []

    @property
    def faults(self) -> list[Fault]:
        """The active faults, in order."""
        with self._lock:
            return list(self._faults)

    def drop_watches(self) -> None:
        """End every open watch now, as if their connections had dropped."""
        with self._lock:
            hooks = list(self._drop_hooks)
        for hook in hooks:
            hook()

    def on_drop(self, hook: Callable[[], None]) -> None:
        """Register a callback run by :meth:`drop_watches` (used by the API itself)."""
        with self._lock:
            self._drop_hooks.append(hook)

    def check(self, verb: str, kind: str | None, name: str | None = None) -> None:
        """Trigger the first matching fault for a call (about object ``name``): sleep, raise."""
        if not self._faults:
            return
        triggered: Fault | None = None
        with self._lock:
            for fault in self._faults:
                if fault.verb not in ("*", verb) or fault.kind not in (None, kind):
                    continue
                if fault.object_name is not None and fault.object_name != name:
                    continue
                if fault.exhausted:
                    continue
                if fault.probability < 1.0 and self._rng.random() >= fault.probability:
                    continue
                fault.fired += 1
                triggered = fault
                break
        if triggered is None:
            return
        if triggered.latency > 0:
            time.sleep(triggered.latency)
        error = triggered.make_error()
        if error is not None:
            raise error
