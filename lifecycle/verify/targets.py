"""Which kinds the explorer checks: each registered kind with its own target function.

A kind says how it is exercised by registering ``verify_target`` in its
:class:`~lifecycle.registry.Registration`: a function of the kind that
returns a :class:`~lifecycle.verify.model.Target`, returns None, or raises
:class:`~lifecycle.verify.model.Unavailable` when the target cannot be built
here (a server that is not configured, for instance). Nothing is guessed
from a kind's module or parameters.

A kind whose client talks to an in-memory fake of its external API needs no
target code of its own: :func:`fake_target` builds the target from the
kind's connector class (or factory) and the fake's store, a mapping keyed by
external name (see ``docs/adding-a-kind.md``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from lifecycle import registry
from lifecycle.core.kind import Kind
from lifecycle.verify.model import ExternalSystem, Target, Unavailable, VerifyError

__all__ = ["fake_target", "scenarios_for", "target_for", "targets"]


def fake_target(
    connector: Callable[[Any], Any],
    *,
    changed: Mapping[str, Any],
    parameters: Mapping[str, Any] | None = None,
    store: Callable[[], Any] = dict,
    credentials: Mapping[str, str] | None = None,
) -> Callable[[Kind], Target]:
    """A ``verify_target`` for a kind whose client works on an in-memory fake of its API.

    ``store()`` makes a fresh fake for each run (default: an empty dict);
    ``connector(fake)`` builds the kind's connector over it, exactly as the
    operator would build it over the real API. The explorer's inventory of
    external resources is the fake's keys (a mapping keyed by external name),
    or ``fake.names()`` when the fake is not a mapping.

    The scenario creates one object whose ``spec.forProvider`` is
    ``parameters`` (default: empty, every field at its default), then lays
    ``changed`` over it, which must make ``observe`` report the resource out
    of date, then deletes it. Keys are spelled as in ``spec.forProvider``
    (each field's alias). ``credentials`` are the keys of the ProviderConfig's
    Secret (default: ``accessKeyId`` and ``secretAccessKey``).

    Use: ``Registration(Bucket, connector=..., verify_target=fake_target(
    BucketConnector, changed={"sizeGB": 2}))``.
    """
    if not isinstance(changed, Mapping) or not changed:
        raise VerifyError("fake_target needs changed=: spec.forProvider fields whose new "
                          "values need an external update")
    base = dict(parameters or {})
    secret = None if credentials is None else dict(credentials)

    def build(kind: Kind) -> Target:
        def system() -> ExternalSystem:
            fake = store()
            made = connector(fake)
            if not callable(getattr(made, "connect", None)):
                raise VerifyError(f"{kind.kind}: the connector factory returned "
                                  f"{type(made).__name__}, which has no connect() method")
            if secret is None:
                return ExternalSystem(made, lambda: _names(fake))
            return ExternalSystem(made, lambda: _names(fake), credentials=secret)

        def manifest(name: str) -> dict[str, Any]:
            metadata: dict[str, Any] = {"name": name}
            if kind.namespaced:
                metadata["namespace"] = "default"
            return {"apiVersion": kind.api_version, "kind": kind.kind, "metadata": metadata,
                    "spec": {"forProvider": json.loads(json.dumps(base)),
                             "writeConnectionSecretToRef": {"name": f"{name}-conn",
                                                            "namespace": "default"}}}

        def update(data: dict[str, Any]) -> dict[str, Any]:
            new = json.loads(json.dumps(data))
            new["spec"]["forProvider"].update(json.loads(json.dumps(dict(changed))))
            return new

        return Target(kind, system, manifest, update)

    return build


def _names(fake: Any) -> set[str]:
    """The external names a fake holds: its keys, or what its ``names()`` returns."""
    if isinstance(fake, Mapping):
        return {str(k) for k in fake}
    return {str(n) for n in fake.names()}


def target_for(registration: registry.Registration, label: str = "") -> Target | str:
    """The target exercising a registered kind, or a one-line reason why it cannot be explored.

    ``label`` names the target in reports and replay commands (default: the
    kind's name). A ``verify_target`` may return several targets (more
    scenarios of one kind): the first is the kind's own; :func:`targets`
    explores them all, the others labelled ``<label>/<scenario>``.
    """
    found = scenarios_for(registration, label)
    return found if isinstance(found, str) else found[0]


def scenarios_for(registration: registry.Registration, label: str = "") -> list[Target] | str:
    """Every target a registered kind's ``verify_target`` returns, labelled; or the reason
    it cannot be explored."""
    label = label or registration.name
    if registration.verify_target is None:
        return "registers no verification target (Registration.verify_target)"
    try:
        built = registration.verify_target(registration.kind)
    except Unavailable as exc:
        return str(exc)
    if built is None:
        return "its verification target is not available here"
    many = list(built) if isinstance(built, list | tuple) else [built]
    if not many or not all(isinstance(t, Target) for t in many):
        raise VerifyError(f"{label}: the verification target function returned "
                          f"{type(built).__name__}, not a Target")
    first, *more = many
    return [attrs.evolve(first, label=label)] + [
        attrs.evolve(t, label=f"{label}/{t.name.rpartition('/')[2]}") for t in more]


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
            base, _, scenario = name.partition("/")  # KIND/scenario: one of its scenarios
            built = scenarios_for(registry.find(base), base)
            if isinstance(built, str):
                raise VerifyError(f"{name}: {built}")
            if scenario:
                built = [t for t in built if t.name == name]
                if not built:
                    raise VerifyError(f"{base} has no verification scenario {scenario!r}")
            chosen.extend(built)
        return chosen, skipped
    for registration in registry.registrations():
        built = scenarios_for(registration)
        if isinstance(built, str):
            skipped.append((registration.name, built))
        else:
            chosen.extend(built)
    return chosen, skipped
