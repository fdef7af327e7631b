"""The test harness: drive lifecycle machines from tests, on the embedded API.

The names below are loaded on first use from :mod:`lifecycle.testing.harness`,
so importing this package (as the pytest plugin does) costs nothing until a
test asks for the harness.
"""

from __future__ import annotations

import importlib
from typing import Any

_HOMES = {
    "VirtualClock": "lifecycle.testing.harness",
    "Step": "lifecycle.testing.harness",
    "Backoff": "lifecycle.testing.harness",
    "Environment": "lifecycle.testing.harness",
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
