"""Parent kinds: a kind made of child objects it creates and keeps, as declared.

:class:`ParentKind` names the versions a parent kind serves (oldest first,
each older one with an ``up`` conversion), its spec defaults, extra condition
types and the :class:`OwnedChild` objects it owns. :func:`convert_up` and
:func:`apply_defaults` are what a reconciler does to a stored parent before
working on it. The reconciler of parents is
:class:`lifecycle.runtime.children.ParentReconciler`; their CRDs come from
:func:`lifecycle.schema.crds.parent_crd`.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from lifecycle.core import conditions as cond
from lifecycle.core import objects
from lifecycle.core.errors import TerminalError
from lifecycle.core.values import ConditionStatus

__all__ = ["OwnedChild", "ParentKind", "Version", "apply_defaults", "convert_up", "ready_of"]


def _no_status(child: Mapping[str, Any]) -> Mapping[str, Any]:
    """No status to copy (the default of :attr:`OwnedChild.status`)."""
    return {}


def ready_of(child: Mapping[str, Any]) -> ConditionStatus:
    """A child's readiness: its ``Ready`` condition if it has one, else True (it exists)."""
    ready = cond.get(objects.status(child).get("conditions") or [], cond.READY)
    return ConditionStatus.TRUE if ready is None else ready.status


@attrs.frozen
class OwnedChild:
    """One object a parent owns (its child).

    ``build(parent)`` returns the desired object (``apiVersion``, ``kind``,
    ``metadata.name`` and the compared fields) from the converted, defaulted
    parent; the namespace defaults to the parent's. ``compare`` lists the
    top-level fields the parent manages: every value the desired object sets
    in them is kept (see :func:`covers`); values it does not set are left
    alone. ``status(child)`` is what is copied into the parent's
    ``status.subresources.<name>``; ``ready(child)`` its readiness.
    ``api_version`` and ``kind``, when given, name the child's type so an
    operator can watch it and reconcile the parent when a child changes.
    """

    name: str
    build: Callable[[Mapping[str, Any]], dict[str, Any]]
    compare: tuple[str, ...] = ("spec",)
    status: Callable[[Mapping[str, Any]], Mapping[str, Any]] = _no_status
    ready: Callable[[Mapping[str, Any]], ConditionStatus] = ready_of
    api_version: str | None = None
    kind: str | None = None

    @property
    def condition(self) -> str:
        """The parent condition type reporting this child: ``<Name>Ready``."""
        return f"{self.name[:1].upper()}{self.name[1:]}Ready"


@attrs.frozen
class Version:
    """One served version of a parent kind; ``up`` converts an object to the next one."""

    name: str
    up: Callable[[dict[str, Any]], dict[str, Any]] | None = None


@attrs.frozen
class ParentKind:
    """A kind that owns child objects.

    ``versions`` are oldest first; the last is the one the reconciler works
    in, and every older one needs an ``up`` conversion. ``defaults`` are spec
    values filled in where the spec leaves them unset (nested mappings are
    merged). ``conditions`` are extra condition types initialised to Unknown
    besides ``Ready`` and each child's ``<Name>Ready``.
    """

    group: str
    kind: str
    plural: str
    versions: tuple[Version, ...]
    children: tuple[OwnedChild, ...]
    defaults: Mapping[str, Any] = attrs.field(factory=dict)
    conditions: tuple[str, ...] = ()
    namespaced: bool = True

    def __attrs_post_init__(self) -> None:
        if not self.versions:
            raise ValueError(f"{self.kind}: declare at least one version")
        missing = [v.name for v in self.versions[:-1] if v.up is None]
        if missing:
            raise ValueError(f"{self.kind}: versions {missing} need an 'up' conversion")
        names = [c.name for c in self.children]
        if len(set(names)) != len(names):
            raise ValueError(f"{self.kind}: child names must be unique: {names}")

    @property
    def latest(self) -> str:
        """The newest version's ``group/version``."""
        return f"{self.group}/{self.versions[-1].name}"

    @property
    def api_version(self) -> str:
        """The newest version's ``group/version`` (what an operator lists and watches)."""
        return self.latest

    @property
    def api_versions(self) -> tuple[str, ...]:
        """Every served ``group/version``, newest first."""
        return tuple(f"{self.group}/{v.name}" for v in reversed(self.versions))

    @property
    def condition_types(self) -> tuple[str, ...]:
        """Every condition type the reconciler maintains on the parent."""
        return (cond.READY, *(c.condition for c in self.children), *self.conditions)


def convert_up(obj: Mapping[str, Any], kind: ParentKind) -> dict[str, Any]:
    """A copy of ``obj`` converted from its version to the newest, one step at a time.

    Raises :class:`TerminalError` for a version the kind does not serve.
    """
    converted = copy.deepcopy(dict(obj))
    group, _, version = str(converted.get("apiVersion", "")).partition("/")
    names = [v.name for v in kind.versions]
    if group != kind.group or version not in names:
        raise TerminalError(f"{kind.kind} apiVersion {converted.get('apiVersion')!r} is not "
                            f"served; expected one of {', '.join(kind.api_versions)}")
    for step in kind.versions[names.index(version):-1]:
        assert step.up is not None  # checked when the kind was declared
        converted = step.up(converted)
    converted["apiVersion"] = kind.latest
    return converted


def apply_defaults(spec: Mapping[str, Any] | None, defaults: Mapping[str, Any]) -> dict[str, Any]:
    """``spec`` with every unset (absent or None) field taken from ``defaults``, recursively."""
    out = dict(spec or {})
    for key, value in defaults.items():
        if out.get(key) is None:
            out[key] = copy.deepcopy(value)
        elif isinstance(value, Mapping) and isinstance(out[key], Mapping):
            out[key] = apply_defaults(out[key], value)
    return out
