"""The test harness: drive lifecycle machines from tests, on the embedded API.

The names below are loaded on first use from the modules of this package
(:mod:`~lifecycle.testing.harness`, :mod:`~lifecycle.testing.queue`,
:mod:`~lifecycle.testing.faults`, :mod:`~lifecycle.core.history`,
:mod:`~lifecycle.testing.claims`), so importing this package (as the pytest
plugin does) costs nothing until a test asks for the harness. The reference,
with an example of each name, is ``docs/harness.md``.
"""

from __future__ import annotations

import importlib
from typing import Any

_HOMES = {
    "VirtualClock": "lifecycle.testing.queue",
    "Step": "lifecycle.testing.queue",
    "Backoff": "lifecycle.testing.queue",
    "Queued": "lifecycle.testing.queue",
    "NotSettled": "lifecycle.testing.queue",
    "Environment": "lifecycle.testing.harness",
    "DEFAULT_MAX_ATTEMPTS": "lifecycle.testing.harness",
    "merge_applied": "lifecycle.testing.harness",
    "History": "lifecycle.core.history",
    "DEFAULT_LIMIT": "lifecycle.core.history",
    "ApiFaults": "lifecycle.testing.faults",
    "ClaimEnvironment": "lifecycle.testing.claims",
    "claim_manifest": "lifecycle.testing.claims",
    "class_manifest": "lifecycle.testing.claims",
}

__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'lifecycle.testing' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_HOMES))
