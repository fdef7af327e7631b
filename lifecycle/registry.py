"""Where lifecycle finds kinds and demos: entry points, the same for every package.

The library never imports the bundled kinds or providers. A package, ours or
a user's, declares what it offers in its ``pyproject.toml``::

    [project.entry-points."lifecycle.kinds"]
    bucket = "bucket_operator.kinds:REGISTRATIONS"

Each entry point names a :class:`Registration`, or a sequence of them. The
command line (``run``, ``crds``, ``verify``, ``diagrams``, ``plan``) looks kinds
up here by name, and ``load("MODULE:NAME")`` reaches anything else.

A plugin that fails (its module raises on import, or it names something other
than registrations) costs only its own kinds: it is left out with one warning
on the ``lifecycle.registry`` logger, :func:`failures` lists it, and asking
for a kind by a name nothing else registers says which plugins failed. The
same entry point seen twice (a stale ``*.egg-info`` beside an install of the
same project) counts once.
"""

from __future__ import annotations

import functools
import importlib
import logging
from collections.abc import Callable, Sequence
from importlib.metadata import entry_points
from typing import Any

import attrs

from lifecycle.core.errors import LifecycleError

__all__ = [
    "DEMOS_GROUP",
    "ENVIRONMENTS_GROUP",
    "KINDS_GROUP",
    "PluginFailure",
    "Registration",
    "RegistryError",
    "demo",
    "demos",
    "environment",
    "failures",
    "find",
    "for_object",
    "load",
    "refresh",
    "registrations",
]

#: Entry-point group of kind registrations.
KINDS_GROUP = "lifecycle.kinds"
#: Entry-point group of ``lifecycle demo`` scenarios: ``scenario(out, options) -> bool``.
DEMOS_GROUP = "lifecycle.demos"
#: Entry-point group of harness environments: ``build(**options) -> (Environment, extra)``;
#: the ``lifecycle_env`` pytest fixture builds the one named ``simcloud`` by default.
ENVIRONMENTS_GROUP = "lifecycle.environments"


_log = logging.getLogger(__name__)


class RegistryError(LifecycleError):
    """A name that resolves to nothing, or a registration that is malformed."""


@attrs.frozen
class PluginFailure:
    """An entry point that could not be loaded; what it registers is left out."""

    group: str
    name: str
    value: str
    error: str

    def __str__(self) -> str:
        return f"entry point {self.name} = {self.value}: {self.error}"


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
def _registered() -> tuple[tuple[Registration, ...], tuple[PluginFailure, ...]]:
    found: list[Registration] = []
    failed: list[PluginFailure] = []
    for ep in _unique(entry_points(group=KINDS_GROUP)):
        try:
            found.extend(_as_registrations(_load(ep), ep.value))
        except RegistryError as exc:
            failed.append(_failed(KINDS_GROUP, ep, str(exc), "its kinds are left out"))
    return tuple(found), tuple(failed)


def _unique(eps: Any) -> list[Any]:
    """Entry points sorted by name and value, each (name, value) once."""
    unique: dict[tuple[str, str], Any] = {}
    for ep in sorted(eps, key=lambda e: (e.name, e.value)):
        unique.setdefault((ep.name, ep.value), ep)
    return list(unique.values())


def _load(ep: Any) -> Any:
    try:
        return ep.load()
    except Exception as exc:  # a plugin's import-time failure is one line
        raise RegistryError(f"cannot load: {type(exc).__name__}: {_first_line(exc)}") from None


def _failed(group: str, ep: Any, error: str, left_out: str) -> PluginFailure:
    prefix = f"{ep.value} "
    failure = PluginFailure(group, ep.name, ep.value,
                            error[len(prefix):] if error.startswith(prefix) else error)
    _log.warning("lifecycle: skipping the plugin %s (%s): %s", failure, group, left_out)
    return failure


def failures() -> list[PluginFailure]:
    """The ``lifecycle.kinds`` entry points that failed to load (their kinds are left out)."""
    return list(_registered()[1])


def registrations() -> list[Registration]:
    """Every registered kind, in entry-point order; a kind registered twice is an error."""
    found = list(_registered()[0])
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
        broken = "; ".join(f"{f.name} = {f.value} failed: {f.error}" for f in failures())
        raise RegistryError(f"no registered kind {name!r} (registered: {known}"
                            f"{'; plugins that failed to load: ' + broken if broken else ''})")
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


def _named(group: str, what: str, wanted: str | None = None) -> dict[str, Callable[..., Any]]:
    """The entry points of ``group`` by name; one that fails is left out with a warning,
    unless it is the ``wanted`` one, whose failure is raised."""
    found: dict[str, Callable[..., Any]] = {}
    for ep in _unique(entry_points(group=group)):
        if wanted is not None and ep.name != wanted:
            continue
        try:
            found[ep.name] = _load(ep)
        except RegistryError as exc:
            if wanted is not None:
                raise RegistryError(f"{what} {ep.name} = {ep.value}: {exc}") from None
            _failed(group, ep, str(exc), f"the {what} is left out")
    return found


def demos() -> dict[str, Callable[..., bool]]:
    """The ``lifecycle demo`` scenarios, by name (a scenario that fails to load is left out
    with a warning)."""
    return _named(DEMOS_GROUP, "demo")


def demo(name: str) -> Callable[..., bool]:
    """The ``lifecycle demo`` scenario ``name``; :class:`RegistryError` saying why if it is
    not installed or fails to load."""
    names = sorted({ep.name for ep in entry_points(group=DEMOS_GROUP)})
    if name not in names:
        raise RegistryError(f"no demo scenario {name!r} (installed: {', '.join(names) or 'none'})")
    return _named(DEMOS_GROUP, "demo", name)[name]


def environment(name: str) -> Callable[..., Any]:
    """The harness environment builder registered as ``name``."""
    names = sorted(ep.name for ep in entry_points(group=ENVIRONMENTS_GROUP))
    if name not in names:
        raise RegistryError(f"no harness environment {name!r} "
                            f"(registered: {', '.join(names) or 'none'})")
    return _named(ENVIRONMENTS_GROUP, "environment", name)[name]


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:200] if text else ""
