"""lifecycle: explicit, validated state machines for Kubernetes managed resources.

This module is the public API in one place. Every name below is loaded on
first use from the module that defines it, so ``import lifecycle`` costs
nothing and ``import lifecycle.core`` stays as light as the core itself::

    from lifecycle import Kind, LifecycleMachine, Observation, Timing

The packages, from the bottom up: :mod:`lifecycle.core` (machines, values,
errors, conditions, the provider contract, the pure event choice and requeue
matrix), :mod:`lifecycle.kube` (Kubernetes mechanics: API errors, object
helpers, conflict retries), :mod:`lifecycle.schema` (CRDs from kinds),
:mod:`lifecycle.runtime` (the reconciler), :mod:`lifecycle.driver` (the
operator), :mod:`lifecycle.sim` (the embedded Kubernetes API),
:mod:`lifecycle.testing` (the harness and pytest plugin), :mod:`lifecycle.verify`,
:mod:`lifecycle.diagrams` and :mod:`lifecycle.cli`. Kinds are found through
:mod:`lifecycle.registry`.
"""

from __future__ import annotations

import importlib
from typing import Any

#: Where each public name is defined.
_HOMES: dict[str, str] = {
    # Declaring a kind.
    "LifecycleMachine": "lifecycle.core.machine",
    "Timing": "lifecycle.core.machine",
    "Kind": "lifecycle.core.kind",
    # What clients return and the engine records.
    "Observation": "lifecycle.core.values",
    "Creation": "lifecycle.core.values",
    "ProviderStatus": "lifecycle.core.values",
    "Result": "lifecycle.core.values",
    "ResultKind": "lifecycle.core.values",
    "Condition": "lifecycle.core.values",
    "ConditionStatus": "lifecycle.core.values",
    # Errors.
    "LifecycleError": "lifecycle.core.errors",
    "MachineDefinitionError": "lifecycle.core.errors",
    "HandledError": "lifecycle.core.errors",
    "TerminalError": "lifecycle.core.errors",
    "ExternalError": "lifecycle.core.errors",
    "Throttled": "lifecycle.core.errors",
    "CredentialsError": "lifecycle.core.errors",
    "UnhandledError": "lifecycle.core.errors",
    "Severity": "lifecycle.core.errors",
    # Running a kind.
    "Reconciler": "lifecycle.runtime.reconciler",
    "ManagedResource": "lifecycle.core.contract",
    "ProviderConfig": "lifecycle.core.contract",
    "ExternalClient": "lifecycle.core.contract",
    "Connector": "lifecycle.core.contract",
    # Registering and testing a kind.
    "Registration": "lifecycle.registry",
    "Environment": "lifecycle.testing",
}

__all__ = ["__version__", *sorted(_HOMES)]


def __getattr__(name: str) -> Any:
    """Load a public name from its home module on first use, then keep it here."""
    if name == "__version__":
        value: Any = _installed_version()
        globals()[name] = value
        return value
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'lifecycle' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The module's own names and every lazily loaded public name."""
    return sorted(set(globals()) | set(__all__))


def _installed_version() -> str:
    """The installed distribution's version (read lazily: importlib.metadata is not free)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("kube-lifecycle")
    except PackageNotFoundError:  # a source tree that was never installed
        return "0+unknown"
