"""A simulated Kubernetes: the embedded API server, its fault injection, and
the HTTP face the official client talks to.

The documented names are importable from here: :class:`EmbeddedAPI` (the
server), :class:`FaultInjector` and :class:`Fault` (injected errors, latency
and dropped watches), :class:`Watch` and :class:`WatchEvent` (watch streams).
"""

from lifecycle.sim.apiserver import EmbeddedAPI
from lifecycle.sim.faults import Fault, FaultInjector
from lifecycle.sim.watch import Watch, WatchEvent

__all__ = ["EmbeddedAPI", "Fault", "FaultInjector", "Watch", "WatchEvent"]
