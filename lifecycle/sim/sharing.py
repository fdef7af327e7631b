"""How the embedded API hands out stored objects: copies, or the stored objects themselves.

A stored object is never changed after it is written (each write builds a new
dict, sharing unchanged parts with the version before it). By default every
object the API returns is a deep copy, so a caller may change what it got.
Through a :class:`SharedView` (``EmbeddedAPI.shared()``) the API returns the
stored objects themselves, and keeps a written body below the two levels it
fills in (the object and its metadata) instead of copying it deeply: reads
cost nothing, writes little, and a caller that wants to change an object it
read or wrote copies it first (:func:`lifecycle.kube.objects.clone`), as the
objects of a controller-runtime or client-go informer cache must be copied. The engine
reads through such a view in the harness, the demo and the benchmarks; test
code reading ``EmbeddedAPI`` directly keeps getting copies.

Changing a shared object would change the server's state behind its back, so
sharing comes with the mutation detector of :mod:`lifecycle.kube.sharing`: a
change to an object handed out is caught when the server touches it again,
when a newer version replaces it, and on :meth:`Lender.check`.
"""

from __future__ import annotations

import functools
import threading
from typing import Any

from lifecycle.kube.objects import clone
from lifecycle.kube.sharing import MutationDetector

__all__ = ["Lender", "SharedView"]


class Lender:
    """Hands out stored objects, copied or shared; used with the server's lock held.

    What the server returns is a copy unless the calling thread is inside a
    :class:`SharedView` call of that verb: then it is the stored object
    itself, remembered for the mutation detector when ``detect`` is on.
    """

    def __init__(self, *, detect: bool | None = None) -> None:
        self.detector = MutationDetector(detect, source="the embedded API")
        self._local = threading.local()

    def shares(self, verb: str) -> bool:
        """Whether the calling thread is inside a :class:`SharedView` call of ``verb``."""
        return self._local.__dict__.get("verb") == verb

    def in_view(self) -> bool:
        """Whether the calling thread is inside any :class:`SharedView` call."""
        return self._local.__dict__.get("verb") is not None

    def out(self, obj: dict[str, Any], verb: str, share: bool | None = None) -> dict[str, Any]:
        """What ``verb`` hands out for the stored ``obj``: a copy, or ``obj`` itself when
        sharing (``share``, or by default whether the calling thread is inside a
        :class:`SharedView` call of ``verb``)."""
        if not (self._local.__dict__.get("verb") == verb if share is None else share):
            return clone(obj)
        if self.detector.enabled:
            self.detector.lend(obj)
        return obj

    def taken(self, body: Any, verb: str, *, levels: int = 2) -> Any:
        """What the server keeps of a ``body`` written by ``verb``: a deep copy, or, inside a
        :class:`SharedView` call of ``verb``, the body itself below its first ``levels``
        levels (the object and its metadata, which the server fills in).

        A caller writing through the view hands the body over: like an object it
        read, it must not change it afterwards. The mutation detector holds it to
        that, since what is stored shares the body's parts.
        """
        if self._local.__dict__.get("verb") != verb or body.__class__ is not dict:
            return clone(body)
        if levels == 0:
            return body
        new = body.copy()
        meta = new.get("metadata")
        if levels > 1 and meta.__class__ is dict:
            new["metadata"] = meta.copy()
        return new

    def touched(self, obj: dict[str, Any]) -> None:
        """The server reads the stored ``obj`` again: it must be as it was handed out."""
        self.detector.touched(obj)

    def replaced(self, previous: dict[str, Any] | None) -> None:
        """A newer version replaced ``previous`` (or deleted it): check it one last time."""
        self.detector.replaced(previous)

    def check(self) -> None:
        """Compare every remembered object with its copy; ``SharedObjectChanged`` if any
        changed."""
        self.detector.check()


class SharedView:
    """The embedded API as a caller that never changes what it reads sees it.

    Every verb of the wrapped :class:`~lifecycle.sim.apiserver.EmbeddedAPI`
    (reads, writes, watches opened through it) returns the stored objects
    themselves instead of copies; every other attribute is the API's own.
    A body written through the view is kept below the levels the server
    fills in (:meth:`Lender.taken`): the caller hands it over and must not
    change it afterwards. A field its schema lacks is pruned unchecked unless
    the call names its own ``field_validation``: the view is the engine's, and a
    real server prunes such a field for a client that names none (the official
    client), with only a warning header. Obtain one with ``EmbeddedAPI.shared()``.
    """

    def __init__(self, api: Any, lender: Lender) -> None:
        self.api = api
        self._lender = lender

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.api, name)
        if name not in _VERBS or not callable(attr):
            return attr
        api, local = self.api, self._lender._local

        @functools.wraps(attr)
        def shared(*args: Any, **kwargs: Any) -> Any:
            state = local.__dict__  # this thread's verb being shared (see Lender.shares)
            before = state.get("verb")
            state["verb"] = name
            try:  # the verb is looked up per call: a test may have replaced it
                return getattr(api, name)(*args, **kwargs)
            finally:
                state["verb"] = before

        setattr(self, name, shared)  # built once per verb
        return shared


#: The verbs whose answers a :class:`SharedView` shares.
_VERBS = frozenset({"get", "lookup", "list", "list_page", "watch", "create", "replace",
                    "replace_status", "patch", "delete", "record_event"})
