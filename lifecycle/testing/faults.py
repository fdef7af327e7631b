"""API faults the harness's reconcilers meet, by verb, kind and object name.

:class:`ApiFaults` is ``env.faults``: rules that make the Kubernetes API calls
of the engine (the reconcilers the harness runs) fail, while the test's own
calls (``env.apply``, ``env.get``, ...) go through untouched. Each rule names
a verb (``get``, ``list``, ``create``, ``update``, ``update_status``,
``patch``, ``delete`` or ``*``), optionally a kind and an object name, and
fires a number of ``times`` or with a ``probability`` drawn from a seeded
generator. A fired fault raises its error before the call does anything, as
the embedded API's own :class:`~lifecycle.sim.faults.FaultInjector` (which
it reuses) does.

A reconcile that meets one ends as a step with an ``error`` and is retried
with the work queue's backoff, as in the operator: an API error other than
NotFound becomes an :class:`~lifecycle.core.errors.UnhandledError`; a
:class:`~lifecycle.kube.errors.TooManyRequests` is backed off no sooner than
its ``retry_after``.
"""

from __future__ import annotations

from typing import Any

from lifecycle.kube.errors import ApiError, ServerError
from lifecycle.sim.faults import VERBS, Fault, FaultInjector

__all__ = ["ApiFaults", "FaultyAPI"]

#: Verb names as a user says them, mapped to the embedded API's own.
VERB_NAMES = {"update": "replace", "update_status": "replace_status",
              "status": "replace_status"}


class ApiFaults:
    """Fault rules for the engine's API calls; ``seed`` makes probabilities reproducible."""

    def __init__(self, seed: int = 0) -> None:
        self.injector = FaultInjector(seed)

    def fail(
        self,
        verb: str,
        kind: str | None = None,
        name: str | None = None,
        *,
        error: BaseException | type[BaseException] = ServerError,
        times: int | None = None,
        probability: float = 1.0,
    ) -> Fault:
        """Make matching calls raise ``error`` (a 500 by default); returns the rule.

        ``verb`` is ``get``, ``list``, ``create``, ``update`` (``replace``),
        ``update_status`` (``replace_status``, ``status``), ``patch``,
        ``delete`` or ``*``. ``kind`` and ``name`` narrow it to one kind and
        one object (a ``list`` names no object, so a rule with a ``name``
        never fails one). ``times`` limits how often it fires (``None``:
        every time); ``probability`` fires it on that share of the calls.
        ``Fault.fired`` counts the calls it failed. Raises ``ValueError`` on
        an unknown verb or a probability outside [0, 1].
        """
        real = VERB_NAMES.get(verb, verb)
        if real != "*" and real not in VERBS:
            known = sorted((VERBS - {"replace", "replace_status", "watch"}) | set(VERB_NAMES))
            raise ValueError(f"unknown verb {verb!r}; expected one of {known} or '*'")
        if times is not None and (isinstance(times, bool) or not isinstance(times, int)
                                  or times < 1):
            raise ValueError(f"times must be a whole number >= 1 or None, not {times!r}")
        return self.injector.add(real, kind, error=error, probability=probability,
                                 times=times, object_name=name)

    def remove(self, fault: Fault) -> None:
        """Remove one rule (removing it twice is harmless)."""
        self.injector.remove(fault)

    def clear(self) -> None:
        """Remove every rule."""
        self.injector.clear()

    @property
    def faults(self) -> list[Fault]:
        """The rules, in the order they are checked (the first that fires wins)."""
        return self.injector.faults


class FaultyAPI:
    """The embedded API as the harness's reconcilers see it: faults checked first.

    Every other attribute is the wrapped API's own.
    """

    def __init__(self, api: Any, faults: ApiFaults) -> None:
        self.api = api
        self.faults = faults

    def _check(self, verb: str, kind: str | None, name: str | None) -> None:
        try:
            self.faults.injector.check(verb, kind, name)
        except ApiError as exc:
            if exc.message.startswith("injected fault:"):  # name the call, not the rule
                exc.message = f"injected fault: {verb} {kind} {name or ''}".rstrip()
                exc.args = (exc.message,)
            raise

    def get(self, api_version: str, kind: str, namespace: str | None, name: str) -> Any:
        """Read one object (after the faults)."""
        self._check("get", kind, name)
        return self.api.get(api_version, kind, namespace, name)

    def list(self, api_version: str, kind: str, *args: Any, **kwargs: Any) -> Any:
        """List objects (after the faults)."""
        self._check("list", kind, None)
        return self.api.list(api_version, kind, *args, **kwargs)

    def create(self, obj: dict[str, Any], **kwargs: Any) -> Any:
        """Create an object (after the faults)."""
        self._check("create", obj.get("kind"), _name(obj))
        return self.api.create(obj, **kwargs)

    def replace(self, obj: dict[str, Any], **kwargs: Any) -> Any:
        """Replace an object (after the faults)."""
        self._check("replace", obj.get("kind"), _name(obj))
        return self.api.replace(obj, **kwargs)

    def replace_status(self, obj: dict[str, Any], **kwargs: Any) -> Any:
        """Replace an object's status (after the faults)."""
        self._check("replace_status", obj.get("kind"), _name(obj))
        return self.api.replace_status(obj, **kwargs)

    def patch(self, api_version: str, kind: str, namespace: str | None, name: str,
              *args: Any, **kwargs: Any) -> Any:
        """Patch an object (after the faults)."""
        self._check("patch", kind, name)
        return self.api.patch(api_version, kind, namespace, name, *args, **kwargs)

    def delete(self, api_version: str, kind: str, namespace: str | None, name: str,
               *args: Any, **kwargs: Any) -> Any:
        """Delete an object (after the faults)."""
        self._check("delete", kind, name)
        return self.api.delete(api_version, kind, namespace, name, *args, **kwargs)

    def __getattr__(self, attribute: str) -> Any:
        return getattr(self.api, attribute)


def _name(obj: Any) -> str | None:
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    return meta.get("name") if isinstance(meta, dict) else None
