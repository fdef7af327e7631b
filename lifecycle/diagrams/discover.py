"""Which machines get diagrams and reference pages.

By default: the machines of the kinds registered through the
``lifecycle.kinds`` entry points (see :mod:`lifecycle.registry`), plus every
lifecycle-machine ancestor of those that compiles its own table, such as
the standard machine the bundled kinds extend. Named modules or packages
can be drawn instead: every machine class defined in them.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterable, Sequence
from types import ModuleType
from typing import Any

from lifecycle.core.kind import Kind
from lifecycle.core.machine import LifecycleMachine
from lifecycle.diagrams.model import DiagramError
from lifecycle.registry import registrations

__all__ = [
    "bundled_kinds",
    "bundled_machines",
    "has_table",
    "import_modules",
    "kinds_in",
    "machines_in",
]


def has_table(value: object) -> bool:
    """True for a :class:`LifecycleMachine` class that declares states of its own."""
    return (isinstance(value, type) and issubclass(value, LifecycleMachine)
            and "_table" in value.__dict__)


def _ordered(machines: Iterable[type[LifecycleMachine]]) -> list[type[LifecycleMachine]]:
    """Without duplicates, by defining module then class name."""
    unique = {id(m): m for m in machines}
    return sorted(unique.values(), key=lambda m: (m.__module__, m.__qualname__))


def bundled_kinds() -> list[Any]:
    """Every registered kind that has a lifecycle machine, in registry order."""
    return [r.kind for r in registrations()
            if has_table(getattr(r.kind, "machine", None))]


def bundled_machines() -> list[type[LifecycleMachine]]:
    """The machines of the registered kinds and their ancestors with a table of their own.

    Ordered by module, then class name, so generated files do not depend on
    the order in which packages register their kinds.
    """
    found: list[type[LifecycleMachine]] = []
    for kind in bundled_kinds():
        found.extend(base for base in kind.machine.__mro__ if has_table(base))
    return _ordered(found)


def import_modules(names: Sequence[str]) -> list[ModuleType]:
    """Import each named module; a package stands for itself and its public modules.

    Raises :class:`DiagramError` with one line when a name cannot be imported.
    """
    modules: list[ModuleType] = []
    for name in names:
        module = _import(name)
        modules.append(module)
        path = getattr(module, "__path__", None)
        if path is not None:
            for info in sorted(pkgutil.iter_modules(path), key=lambda i: i.name):
                if not info.name.startswith("_"):
                    modules.append(_import(f"{module.__name__}.{info.name}"))
    return list({m.__name__: m for m in modules}.values())


def _import(name: str) -> ModuleType:
    if not name or ":" in name:
        raise DiagramError(f"expected a module or package name, got {name!r}")
    try:
        return importlib.import_module(name)
    except Exception as exc:  # a broken module is named in one line, not a traceback
        raise DiagramError(f"cannot import {name}: {type(exc).__name__}: {exc}") from None


def machines_in(modules: Sequence[ModuleType]) -> list[type[LifecycleMachine]]:
    """Every machine class with its own table defined (not imported) in ``modules``."""
    return _ordered(value for module in modules for value in vars(module).values()
                    if has_table(value) and value.__module__ == module.__name__)


def kinds_in(modules: Sequence[ModuleType]) -> list[Kind]:
    """Every :class:`~lifecycle.core.kind.Kind` bound to a name in ``modules``."""
    found: list[Kind] = []
    for module in modules:
        for _, value in sorted(vars(module).items()):
            if isinstance(value, Kind) and value not in found:
                found.append(value)
    return found
