"""Where lifecycle finds kinds and demos: entry points, the same for every package.

The library never imports the bundled kinds or providers. A package, ours or
a user's, declares what it offers in its ``pyproject.toml``::

    [project.entry-points."lifecycle.kinds"]
    bucket = "bucket_operator.kinds:REGISTRATIONS"

Each entry point names a :class:`Registration`, or a sequence of them. The
command line (``run``, ``crds``, ``verify``, ``diagrams``, ``plan``) looks kinds
up here by name, and ``load("MODULE:NAME")`` reaches anything else.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable, Sequence
from importlib.metadata import entry_points
from typing import Any

import attrs

from lifecycle.core.errors import LifecycleError

#: Entry-point group of kind registrations.
KINDS_GROUP = "lifecycle.kinds"
#: Entry-point group of ``lifecycle demo`` scenarios: ``scenario(out, options) -> bool``.
DEMOS_GROUP = "lifecycle.demos"
#: Entry-point group of harness environments: ``build(**options) -> (Environment, extra)``;
#: the ``lifecycle_env`` pytest fixture builds the one named ``simcloud`` by default.
ENVIRONMENTS_GROUP = "lifecycle.environments"


class RegistryError(LifecycleError):
    """A name that resolves to nothing, or a registration that is malformed."""


@attrs.frozen
class Registration:
    """A kind as operators, the command line and the verifier find it.

    ``kind`` is a :class:`~lifecycle.core.kind.Kind` (or a claim or class
    kind). ``connector`` builds the connector the operator uses for it when
    none is given; ``verify_target`` builds the crash explorer's target for
    it. ``source`` says where it was found (an entry point or ``MODULE:NAME``).
    ``binding``, for a claim kind, is the :class:`~lifecycle.core.claims.ClaimBinding`
    that satisfies its claims (the operator runs its claim reconciler with it).
    """

    kind: Any
    connector: Callable[[], Any] | None = None
    verify_target: Callable[[Any], Any] | None = None
    source: str = ""
    binding: Any = None

    @property
    def name(self) -> str:
        """The kind's name (``DatabaseInstance``)."""
        return str(self.kind.kind)


def load(spec: str) -> object:
    """Resolve ``MODULE:NAME`` (e.g. ``lifecycle.machines.managed:ManagedResourceMachine``).

    Raises :class:`RegistryError` with a one-line message when it cannot;
    whatever the module raises while importing is reported, not propagated.
    """
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise RegistryError(f"expected MODULE:NAME, got {spec!r}")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # any import-time failure of user code is one line
        raise RegistryError(
            f"cannot import {module_name!r}: {type(exc).__name__}: {_first_line(exc)}") from None
    value: Any = module
    for part in attr.split("."):
        try:
            value = getattr(value, part)
        except AttributeError:
            raise RegistryError(f"module {module_name!r} has no {attr!r}") from None
    return value


def _as_registrations(value: Any, source: str) -> list[Registration]:
    items = value if isinstance(value, Sequence) and not isinstance(value, str) else [value]
    found = []
    for item in items:
        if not isinstance(item, Registration):
            raise RegistryError(
                f"{source} must name a Registration or a sequence of them, "
                f"found {type(item).__name__}")
        found.append(item if item.source else attrs.evolve(item, source=source))
    return found


@functools.cache
def _registered() -> tuple[Registration, ...]:
    found: list[Registration] = []
    for ep in sorted(entry_points(group=KINDS_GROUP), key=lambda e: (e.name, e.value)):
        try:
            value = ep.load()
        except Exception as exc:
            raise RegistryError(f"entry point {ep.name} = {ep.value}: cannot load: "
                                f"{type(exc).__name__}: {_first_line(exc)}") from None
        found.extend(_as_registrations(value, ep.value))
    return tuple(found)


def registrations() -> list[Registration]:
    """Every registered kind, in entry-point order; a kind registered twice is an error."""
    found = list(_registered())
    seen: dict[tuple[str, str], str] = {}
    for r in found:
        key = (r.kind.api_version, r.kind.kind)
        if key in seen:
            raise RegistryError(f"{r.kind.kind} ({key[0]}) is registered twice: "
                                f"{seen[key]} and {r.source}")
        seen[key] = r.source
    return found


def refresh() -> None:
    """Forget the cached entry points (after installing a package at run time)."""
    _registered.cache_clear()


def find(name: str) -> Registration:
    """A registered kind by name (``DatabaseInstance``), plural (``databaseinstances``),
    ``plural.group``, or ``MODULE:NAME`` of a Registration or a bare Kind."""
    if ":" in name:
        value = load(name)
        if isinstance(value, Registration):
            return value if value.source else attrs.evolve(value, source=name)
        for r in registrations():
            if r.kind is value:
                return r
        if all(hasattr(value, a) for a in ("api_version", "kind", "machine")):
            return Registration(kind=value, source=name)
        raise RegistryError(f"{name} is not a kind (got {type(value).__name__})")
    wanted = name.lower()
    matches = [r for r in registrations()
               if wanted in {r.kind.kind.lower(), str(getattr(r.kind, "plural", "")).lower(),
                             f"{getattr(r.kind, 'plural', '')}.{r.kind.group}".lower()}]
    if not matches:
        known = ", ".join(sorted(r.name for r in registrations())) or "none"
        raise RegistryError(f"no registered kind {name!r} (registered: {known})")
    if len(matches) > 1:
        raise RegistryError(f"{name!r} is ambiguous: "
                            + ", ".join(f"{m.name} ({m.kind.api_version})" for m in matches))
    return matches[0]


def for_object(api_version: str, kind: str) -> Registration:
    """The registered kind of an object with this ``apiVersion`` and ``kind``."""
    for r in registrations():
        if r.kind.api_version == api_version and r.kind.kind == kind:
            return r
    raise RegistryError(f"no registered kind for {kind} ({api_version})")


def _named(group: str, what: str) -> dict[str, Callable[..., Any]]:
    found: dict[str, Callable[..., Any]] = {}
    for ep in entry_points(group=group):
        try:
            found[ep.name] = ep.load()
        except Exception as exc:
            raise RegistryError(f"{what} {ep.name} = {ep.value}: cannot load: "
                                f"{type(exc).__name__}: {_first_line(exc)}") from None
    return found


def demos() -> dict[str, Callable[..., bool]]:
    """The ``lifecycle demo`` scenarios, by name."""
    return _named(DEMOS_GROUP, "demo")


def environment(name: str) -> Callable[..., Any]:
    """The harness environment builder registered as ``name``."""
    names = sorted(ep.name for ep in entry_points(group=ENVIRONMENTS_GROUP))
    if name not in names:
        raise RegistryError(f"no harness environment {name!r} "
                            f"(registered: {', '.join(names) or 'none'})")
    return _named(ENVIRONMENTS_GROUP, "environment")[name]


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:200] if text else ""
