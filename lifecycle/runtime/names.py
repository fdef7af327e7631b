"""One owner per external name: the index of names claimed by objects of one kind.

Two objects naming the same external resource (the same external name
under the same provider config and, for a kind that declares
``Kind.name_scope``, in the same scope such as a database; in any
namespaces) would fight over it: each
update undoes the other's, and deleting one deletes what the other still
uses. The reconciler therefore claims a name in a :class:`NameIndex` before
it commits the finalizer; a second claimant gets ``ExternalNameConflict``
and never calls the provider.

The index is loaded from one list of the kind's objects on first use (every
object holding our finalizer and a name is a claimant; when two do, the
older object keeps the name) and then kept by the reconciler itself: a claim
when an object takes a name, a release when its finalizer is removed.
Because leader election lets only one operator process reconcile a kind,
this process sees every later claim. A holder that disappeared without its
finalizer being removed by us is found out when a conflict is reported: the
holder is read afresh first, and a holder that is gone or names another
resource no longer holds the name. An object's name is read by the pure
:func:`~lifecycle.core.externalname.external_name_of` (re-exported here).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from lifecycle.core import objects
from lifecycle.core.externalname import ExternalName, external_name_of, held_name
from lifecycle.kube.errors import NotFound

__all__ = ["Claimant", "ExternalName", "NameIndex", "external_name_of", "kind_objects",
           "name_key", "read_object"]

#: (provider config name, the kind's extra scope, external name)
NameKey = tuple[str, tuple[str, ...], str]
#: The extra scope of an object's external name (``Kind.scope_of``).
Scope = Callable[[Mapping[str, Any]], tuple[str, ...]]
#: (uid, namespace, name, creationTimestamp) of the object holding a name.
Claimant = tuple[str, str | None, str, str]


def name_key(obj: Mapping[str, Any], external_name: str, scope: Scope | None = None) -> NameKey:
    """The key an object claims: its provider config's name, its ``scope`` (none unless
    given) and the external name."""
    ref = objects.mapping(objects.spec(obj).get("providerConfigRef"))
    return (str(ref.get("name") or "default"), scope(obj) if scope else (), external_name)


def _claimant(obj: Mapping[str, Any]) -> Claimant:
    meta = objects.metadata(obj)
    return (str(meta.get("uid", "")), meta.get("namespace"), str(meta.get("name", "")),
            str(meta.get("creationTimestamp") or ""))


def _older(a: Claimant, b: Claimant) -> Claimant:
    """The claimant that keeps a name both hold: the older object (then by namespace/name)."""
    return min(a, b, key=lambda c: (c[3], c[1] or "", c[2], c[0]))


class NameIndex:
    """Claimed external names of one kind, across namespaces (thread-safe).

    ``lister`` returns every object of the kind; ``reader(namespace, name)``
    one object afresh, or None when it is gone; ``scope(obj)`` the extra scope
    of an object's name (the kind's ``Kind.scope_of``; none by default).
    """

    def __init__(self, lister: Callable[[], Iterable[Mapping[str, Any]]],
                 reader: Callable[[str | None, str], Mapping[str, Any] | None],
                 scope: Scope | None = None) -> None:
        self._lister = lister
        self._reader = reader
        self._scope = scope
        self._lock = threading.Lock()
        self._holders: dict[NameKey, Claimant] | None = None

    def _load(self) -> dict[NameKey, Claimant]:
        if self._holders is None:
            holders: dict[NameKey, Claimant] = {}
            for obj in self._lister():
                name = held_name(obj)
                if name is None:
                    continue
                key, claimant = name_key(obj, name, self._scope), _claimant(obj)
                holders[key] = _older(holders[key], claimant) if key in holders else claimant
            self._holders = holders
        return self._holders

    def load(self) -> bool:
        """Load the index now (an operator does it as its workers start, so no pass waits
        on the list); False when the list failed, which leaves it to the first claim."""
        try:
            with self._lock:
                self._load()
        except Exception:
            return False
        return True

    def claim(self, obj: Mapping[str, Any], external_name: str) -> Claimant | None:
        """Claim ``external_name`` for ``obj``: None when it is (now) obj's, else the holder.

        A holder found in the index is read afresh before it is reported: if
        it is gone, or holds another name, the claim passes to ``obj``.
        """
        key, mine = name_key(obj, external_name, self._scope), _claimant(obj)
        with self._lock:
            holder = self._load().get(key)
            if holder is None or holder[0] == mine[0]:
                self._load()[key] = mine
                return None
        fresh = self._reader(holder[1], holder[2])
        still = (fresh is not None and _claimant(fresh)[0] == holder[0]
                 and (held_name(fresh) or _intended(fresh)) == external_name
                 and name_key(fresh, external_name, self._scope) == key)
        both_hold = (still and fresh is not None and held_name(fresh) == external_name
                     and held_name(obj) == external_name)
        with self._lock:
            holders = self._load()
            current = holders.get(key)
            if current is not None and current[0] != holder[0] and current[0] != mine[0]:
                return current  # someone else claimed it meanwhile
            if still and holder[0] != mine[0]:
                if both_hold and _older(holder, mine) == mine:
                    holders[key] = mine  # both hold it: the older object keeps it
                    return None
                holders[key] = holder
                return holder
            holders[key] = mine
            return None

    def release(self, obj: Mapping[str, Any], external_name: str) -> None:
        """Give up ``obj``'s claim on ``external_name`` (its finalizer is being removed)."""
        key, uid = name_key(obj, external_name, self._scope), _claimant(obj)[0]
        with self._lock:
            holders = self._load()
            if key in holders and holders[key][0] == uid:
                del holders[key]


def kind_objects(api: Any, api_version: str, kind: str) -> list[Any]:
    """Every object of a kind, listed from ``api`` (none from a cluster that cannot list):
    what the index is loaded from, and what a connector's ``bind`` reads."""
    lister = getattr(api, "list", None)
    return lister(api_version, kind)[0] if lister is not None else []


def read_object(api: Any, api_version: str, kind: str, namespace: str | None,
                name: str) -> Mapping[str, Any] | None:
    """One object of a kind read afresh from ``api``, or None when it is gone (the index's
    check of a holder)."""
    try:
        found: Mapping[str, Any] = api.get(api_version, kind, namespace, name)
    except NotFound:
        return None
    return found


def _intended(obj: Mapping[str, Any]) -> str | None:
    """The name an object is about to claim (its annotation) when it holds none yet."""
    return external_name_of(obj).intended
