"""The contract between the engine and a provider's external client.

A provider writes two small things per kind:

* a **connector**: ``connect(resource, config) -> ExternalClient``, building a
  client from the provider config and the credentials read from its Secret;
* an **external client** with ``observe``, ``create``, ``update``, ``delete``
  and an optional ``close``.

Idempotency rules every client must follow (the engine relies on them for
crash safety: after a crash it repeats the interrupted call, so each call
must be safe to run twice):

* ``create`` of a resource that already exists under ``resource.external_name``
  is not an error when it is this object's (it carries ``resource.owner_mark``,
  or the system keeps no marks): return as if the create succeeded. An
  existing resource without that mark is someone else's: raise
  :class:`lifecycle.core.ownership.NotOwnedError` and change nothing. When the
  external API supports client tokens, pass ``resource.idempotency_key``.
* ``delete`` of a resource that does not exist is not an error.
* ``observe`` never changes the external system.
* ``update`` brings the external resource to the desired parameters; running
  it twice is harmless.

Ownership: where the external system can store a mark (a tag, a comment),
``create`` stores ``resource.owner_mark`` on the new resource and ``update``
writes it when it is missing; ``observe`` reports the mark it finds in
``Observation.owner`` ("" for none) and, in ``Observation.protected``, why a
resource must never be adopted (a superuser role, a template database). A
client of a system without marks leaves ``owner`` as None.

What a call did: ``create`` may return, in its :class:`Creation`, the
resource as the call left it (``observation``) or say that the call has
finished when it returns (``finished``); ``update`` and ``delete`` may return
an :class:`~lifecycle.core.values.Observation` or a
:class:`~lifecycle.core.values.Completion` likewise. The engine then goes on
from that within the same pass (Ready, or the finalizer removed) instead of
waiting for the next; returning nothing keeps the next pass's observation.

Errors: raise a subclass of :class:`lifecycle.core.errors.HandledError`
(``Throttled`` with ``retry_after``, ``TerminalError`` for a spec that can
never work). Anything else raised by a client is treated as a retryable
``ExternalError`` whose message is the exception's class name only, so no
secret from a library's message can leak into a condition.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import attrs

from lifecycle.core.values import Completion, Creation, Observation

if TYPE_CHECKING:
    from lifecycle.core.kind import Kind

__all__ = [
    "Admits", "Binds", "Connector", "ExternalClient", "ManagedResource", "ProviderConfig",
    "admission", "bind_objects", "close_client",
]


@attrs.frozen
class ManagedResource:
    """The engine's view of one managed resource, handed to external clients.

    ``parameters`` is the kind's typed parameters (``spec.forProvider``);
    ``password`` is the generated password when the kind asks for one, read
    from (or first persisted to) the connection Secret before any create.
    """

    kind: str
    namespace: str
    name: str
    uid: str
    generation: int
    external_name: str
    parameters: Any
    idempotency_key: str = ""
    password: str | None = attrs.field(default=None, repr=False)
    #: The ownership mark the client stores on what it creates, and writes on
    #: ``update`` when missing (see :mod:`lifecycle.core.ownership`).
    owner_mark: str = ""
    connection: Mapping[str, str] = attrs.field(factory=dict, repr=False)
    #: What the last successful observation reported (``status.atProvider`` as stored),
    #: e.g. so a client can undo what an earlier spec asked for and this one no longer
    #: does. Empty before the first observation, and after the status was lost.
    observed: Mapping[str, Any] = attrs.field(factory=dict, repr=False)


@attrs.frozen
class ProviderConfig:
    """A resolved provider config: its spec and the credentials from its Secret."""

    name: str
    spec: Mapping[str, Any]
    credentials: Mapping[str, str] = attrs.field(repr=False)


@runtime_checkable
class ExternalClient(Protocol):
    """Talks to the external system for one managed resource."""

    def observe(self, resource: ManagedResource) -> Observation:
        """Report whether the resource exists, is up to date, and its provider status."""
        ...

    def create(self, resource: ManagedResource) -> Creation:
        """Request creation; may return before the resource is usable."""
        ...

    def update(self, resource: ManagedResource) -> Completion | Observation | None:
        """Request that the external resource match ``resource.parameters``; optionally
        what the call left (see the module docstring)."""
        ...

    def delete(self, resource: ManagedResource) -> Completion | Observation | None:
        """Request deletion; deleting a missing resource is success. Optionally what the
        call left (``Observation.absent()`` when it is gone already)."""
        ...


class Connector(Protocol):
    """Builds an :class:`ExternalClient` for one reconcile.

    A connector may also have an ``admit(resource, config)`` method
    (:class:`Admits`): the engine then asks it, once, before it takes
    ownership of an object (before the finalizer, the external name and a
    generated password are committed), whether the provider refuses the
    object's spec. It raises the refusal as a
    :class:`~lifecycle.core.errors.HandledError` (terminal for a spec that can
    never be accepted, retryable when the answer could not be had) and
    returns None to let the object through; it must change nothing in the
    external system. The ``resource`` it gets carries no password. A refused
    object keeps no finalizer and stays deletable; objects that already hold
    ownership are not asked again (their clients refuse in ``observe``,
    ``create`` and ``update`` as before).
    """

    def connect(self, resource: ManagedResource, config: ProviderConfig) -> ExternalClient:
        """Return a client for ``resource`` using ``config``'s credentials."""
        ...


class Admits(Protocol):
    """The optional part of a :class:`Connector`: the check before ownership is taken."""

    def admit(self, resource: ManagedResource, config: ProviderConfig) -> None:
        """Raise the provider's refusal of ``resource`` (a handled error), changing
        nothing; return when the provider would accept it."""
        ...


class Binds(Protocol):
    """The optional part of a :class:`Connector` that reads the kind's objects.

    The engine calls ``bind(kind, objects)`` once, when it builds its reconciler of
    ``kind``: ``objects()`` lists every object of the kind from the API server (the list
    the engine's own one-owner-per-name index reads). A connector that decides which of
    several objects owns something (the oldest, say) reads it there, from what the API
    server set and a tenant cannot write, instead of from what it happened to see first.
    """

    def bind(self, kind: Kind, objects: Callable[[], Iterable[Mapping[str, Any]]]) -> None:
        """Keep ``objects`` to list ``kind``'s objects when needed."""
        ...


def bind_objects(connector: object, kind: Kind,
                 objects: Callable[[], Iterable[Mapping[str, Any]]]) -> None:
    """Hand ``objects`` to the connector's optional ``bind`` (:class:`Binds`), if it has one."""
    bind = getattr(connector, "bind", None)
    if callable(bind):
        bind(kind, objects)


def admission(connector: object) -> Callable[[ManagedResource, ProviderConfig], None] | None:
    """The connector's optional ``admit`` (see :class:`Connector`), or None without one."""
    admit = getattr(connector, "admit", None)
    return admit if callable(admit) else None


def close_client(client: ExternalClient) -> None:
    """Call the optional ``close`` of a client, if it has one."""
    close = getattr(client, "close", None)
    if callable(close):
        close()
