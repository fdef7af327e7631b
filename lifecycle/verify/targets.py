"""Which kinds the explorer checks: each registered kind with its own target function.

A kind says how it is exercised by registering ``verify_target`` in its
:class:`~lifecycle.registry.Registration`: a function of the kind that
returns a :class:`~lifecycle.verify.model.Target`, returns None, or raises
:class:`~lifecycle.verify.model.Unavailable` when the target cannot be built
here (a server that is not configured, for instance). Nothing is guessed
from a kind's module or parameters.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from lifecycle import registry
from lifecycle.verify.model import Target, Unavailable, VerifyError


def target_for(registration: registry.Registration, label: str = "") -> Target | str:
    """The target exercising a registered kind, or a one-line reason why it cannot be explored.

    ``label`` names the target in reports and replay commands (default: the
    kind's name).
    """
    label = label or registration.name
    if registration.verify_target is None:
        return "registers no verification target (Registration.verify_target)"
    try:
        built = registration.verify_target(registration.kind)
    except Unavailable as exc:
        return str(exc)
    if built is None:
        return "its verification target is not available here"
    if not isinstance(built, Target):
        raise VerifyError(f"{label}: the verification target function returned "
                          f"{type(built).__name__}, not a Target")
    return attrs.evolve(built, label=label)


def targets(names: Sequence[str] = ()) -> tuple[list[Target], list[tuple[str, str]]]:
    """Targets for the kinds ``names``, or for every registered kind when empty.

    A name is what :func:`lifecycle.registry.find` accepts: a kind's name,
    its plural, ``plural.group`` or ``MODULE:NAME``; each target is labelled
    with the name it was asked by (every registered kind: its kind's name).
    Returns the targets and the (name, reason) pairs skipped. A name that
    finds no kind is a :class:`~lifecycle.registry.RegistryError`; a named
    kind that cannot be explored, a :class:`~lifecycle.verify.model.VerifyError`.
    """
    chosen: list[Target] = []
    skipped: list[tuple[str, str]] = []
    if names:
        for name in names:
            built = target_for(registry.find(name), name)
            if isinstance(built, str):
                raise VerifyError(f"{name}: {built}")
            chosen.append(built)
        return chosen, skipped
    for registration in registry.registrations():
        built = target_for(registration)
        if isinstance(built, str):
            skipped.append((registration.name, built))
        else:
            chosen.append(built)
    return chosen, skipped
