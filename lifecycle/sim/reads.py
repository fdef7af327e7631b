"""The reading verbs of the embedded API: get, list (whole or by pages) and watch.

:class:`Reads` is the part of :class:`~lifecycle.sim.apiserver.EmbeddedAPI`
that reads: it serves ``GET``, ``LIST`` and ``WATCH`` from the store and the
write history the way a real API server does: label and field selectors
(malformed ones are a 400), pages with continue tokens served from one
snapshot, lists and watches at a resourceVersion (410 Gone when older than
the history, 504 ``ResourceVersionTooLarge`` when never issued).
"""

from __future__ import annotations

import builtins
import threading
from typing import Any

from lifecycle.kube.errors import (
    BadRequest,
    Gone,
    Invalid,
    NotFound,
    ResourceVersionTooLarge,
)
from lifecycle.kube.resources import ResourceType
from lifecycle.kube.selectors import LabelSelector, parse_label_selector
from lifecycle.sim.faults import FaultInjector
from lifecycle.sim.fields import (
    FieldSelector,
    decode_continue,
    encode_continue,
    field_set,
    parse_field_selector,
)
from lifecycle.sim.sharing import Lender
from lifecycle.sim.validation import check_list_options, object_key
from lifecycle.sim.watch import History, Watch, labels_of

__all__ = ["Reads"]

_CONTINUE_TOO_OLD = (
    "The provided continue parameter is too old to display a consistent list result. You can "
    "start a new list without the continue parameter, or use the continue token in this "
    "response to retrieve the remainder of the results. Continuing with the provided token "
    "results in an inconsistent list - objects that were created, modified, or deleted between "
    "the time the first chunk was returned and now may show up in the list."
)


def _sort_key(rtype: ResourceType, obj: dict[str, Any]) -> tuple[str, str]:
    meta = obj["metadata"]
    return ((meta.get("namespace") or "") if rtype.namespaced else "", meta["name"])


class Reads:
    """The reading verbs of the embedded API (mixed into ``EmbeddedAPI``)."""

    _lock: threading.RLock
    _lender: Lender
    _log: History
    _restored_rv: int
    _store: dict[tuple[str, str], dict[tuple[str | None, str], dict[str, Any]]]
    faults: FaultInjector

    def _count(self, verb: str, kind: str) -> None:
        raise NotImplementedError

    def resource_type(self, api_version: str, kind: str) -> ResourceType:
        """The registered type for ``api_version`` and ``kind``; :class:`NotFound` if none."""
        raise NotImplementedError

    def _table(self, rtype: ResourceType) -> dict[tuple[str | None, str], dict[str, Any]]:
        return self._store[(rtype.api_version, rtype.kind)]

    def _stored(self, rtype: ResourceType, key: tuple[str | None, str]) -> dict[str, Any]:
        obj = self._table(rtype).get(key)
        if obj is None:
            raise NotFound(f'{rtype.resource} "{key[1]}" not found')
        self._lender.touched(obj)
        return obj

    def _oldest(self) -> int:
        """The oldest resourceVersion whose change the history still holds."""
        return max(self._log.oldest_retained(), self._restored_rv + 1)

    def _check_not_future(self, resource_version: int) -> None:
        if resource_version > self._log.rv:
            raise ResourceVersionTooLarge(
                f"Timeout: Too large resource version: {resource_version}, "
                f"current: {self._log.rv}"
            )

    # -- read ----------------------------------------------------------------------

    def get(self, api_version: str, kind: str, namespace: str | None, name: str) -> dict[str, Any]:
        """Read one object; :class:`NotFound` if it does not exist."""
        self._count("get", kind)
        self.faults.check("get", kind)
        rtype = self.resource_type(api_version, kind)
        with self._lock:
            return self._lender.out(self._stored(rtype, object_key(rtype, namespace, name)),
                                   "get")

    def lookup(self, api_version: str, kind: str, namespace: str | None,
               name: str) -> dict[str, Any] | None:
        """Read one object like :meth:`get` (counted as a ``get``), None if it does not exist.

        For a caller that creates what is absent (as ``CachedCluster.lookup``):
        the answer is the same as ``get``'s, without an exception for a miss.
        """
        self._count("get", kind)
        self.faults.check("get", kind)
        rtype = self.resource_type(api_version, kind)
        key = object_key(rtype, namespace, name)
        with self._lock:
            found = self._table(rtype).get(key)
            if found is None:
                return None
            self._lender.touched(found)
            return self._lender.out(found, "lookup")

    def list(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        label_selector: str | None = None,
        *,
        field_selector: str | None = None,
    ) -> tuple[builtins.list[dict[str, Any]], str]:
        """List objects of a kind, optionally in one namespace and matching selectors.

        Returns the items sorted by namespace and name, and the list's
        resourceVersion (to start a watch from). Malformed selectors, and
        fields the kind cannot be selected by, raise :class:`BadRequest`.
        """
        self._count("list", kind)
        self.faults.check("list", kind)
        rtype = self.resource_type(api_version, kind)
        labels, fields = self._selectors(rtype, label_selector, field_selector)
        with self._lock:
            found = self._select(rtype, namespace, labels, fields)
            list_rv = str(self._log.rv)
            out = self._lender.out
            return [out(obj, "list") for obj in found], list_rv

    def list_page(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
        resource_version: str | None = None,
        resource_version_match: str | None = None,
    ) -> tuple[builtins.list[dict[str, Any]], str, str | None, int | None]:
        """One page of a list: ``(items, resourceVersion, continue token, remainingItemCount)``.

        With ``limit`` at most that many items come back, and a continue token
        when more remain; pages after the first are served at the first page's
        resourceVersion (a consistent snapshot), or :class:`Gone` once the
        history no longer reaches back to it. ``remainingItemCount`` is given
        only with more pages and no selector. ``resource_version`` ``"0"``
        serves the current state without paging; ``N`` needs ``N`` or newer
        (``resource_version_match`` ``"Exact"``, or a ``limit``, serves the
        state at ``N``); a version the server never issued raises
        :class:`ResourceVersionTooLarge`. Bad tokens raise :class:`BadRequest`.
        """
        self._count("list", kind)
        self.faults.check("list", kind)
        rtype = self.resource_type(api_version, kind)
        labels, fields = self._selectors(rtype, label_selector, field_selector)
        check_list_options(resource_version, resource_version_match, continue_token)
        if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool)):
            raise BadRequest(f"limit: Invalid value: {limit!r}: must be an integer")
        with self._lock:
            start: tuple[str | None, str] | None = None
            at = self._log.rv
            if continue_token:
                at, start = decode_continue(continue_token)
                self._check_not_future(at)
                if at < self._oldest() - 1:
                    raise Gone(_CONTINUE_TOO_OLD)
            elif resource_version not in (None, "", "0"):
                if not resource_version.isdigit():
                    raise Invalid(f"resourceVersion: Invalid value: {resource_version!r}")
                wanted = int(resource_version)
                self._check_not_future(wanted)
                if resource_version_match == "Exact" or (limit and not resource_version_match):
                    if wanted < self._oldest() - 1:
                        raise Gone("The resourceVersion for the provided list is too old.")
                    at = wanted
            elif resource_version == "0":
                limit = None
            table = self._table(rtype)
            if at != self._log.rv:
                table = self._log.state_at((rtype.api_version, rtype.kind), table, at)
            found = self._select(rtype, namespace, labels, fields, table)
            if start is not None:
                after = (start[0] or "", start[1])
                found = [obj for obj in found if _sort_key(rtype, obj) > after]
            token: str | None = None
            remaining: int | None = None
            if limit is not None and 0 < limit < len(found):
                last = found[limit - 1]["metadata"]
                token = encode_continue(
                    at, last.get("namespace") if rtype.namespaced else None, last["name"]
                )
                if not labels.requirements and fields.empty:
                    remaining = len(found) - limit
                found = found[:limit]
            elif limit is not None and 0 < limit == len(found) and (
                    labels.requirements or not fields.empty):
                # a full page of selected objects: as from etcd, a token when any object of
                # the range (selected or not) comes after the last one
                last = found[-1]["metadata"]
                after = (last.get("namespace") or "" if rtype.namespaced else "", last["name"])
                scope = namespace if rtype.namespaced else None
                if any((key[0] or "", key[1]) > after for key in table
                       if scope is None or key[0] == scope):
                    token = encode_continue(at, last.get("namespace") if rtype.namespaced
                                            else None, last["name"])
            out = self._lender.out
            return [out(obj, "list_page") for obj in found], str(at), token, remaining

    def _selectors(
        self, rtype: ResourceType, label_selector: str | None, field_selector: str | None
    ) -> tuple[LabelSelector, FieldSelector]:
        try:
            labels = parse_label_selector(label_selector)
        except Invalid as error:
            raise BadRequest(str(error)) from None
        fields = parse_field_selector(field_selector, rtype.api_version, rtype.kind)
        return labels, fields

    def _select(
        self,
        rtype: ResourceType,
        namespace: str | None,
        selector: LabelSelector,
        fields: FieldSelector | None = None,
        table: dict[tuple[str | None, str], dict[str, Any]] | None = None,
    ) -> builtins.list[dict[str, Any]]:
        if table is None:
            table = self._table(rtype)
        if not rtype.namespaced:
            namespace = None
        keys = sorted(
            (key for key in table if namespace is None or key[0] == namespace),
            key=lambda key: (key[0] or "", key[1]),
        )
        objects = [table[key] for key in keys]
        if selector.requirements:
            objects = [obj for obj in objects if selector.matches(labels_of(obj))]
        if fields is not None and not fields.empty:
            key = (rtype.api_version, rtype.kind)
            objects = [obj for obj in objects if fields.matches(field_set(*key, obj))]
        return objects

    # -- watch ---------------------------------------------------------------------

    def watch(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        resource_version: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        timeout: float | None = None,
        bookmarks: bool = False,
    ) -> Watch:
        """Watch a kind, optionally in one namespace and matching label and field selectors.

        With ``resource_version`` ``None`` or ``"0"`` the watch starts with an
        ``ADDED`` event per current object; otherwise it replays every change
        after that version and raises :class:`Gone` at once when the version is
        older than the retained history, :class:`ResourceVersionTooLarge` when
        the server has not issued it yet. Changes that move an object into or
        out of the selectors arrive as ``ADDED`` or ``DELETED``.
        """
        self._count("watch", kind)
        self.faults.check("watch", kind)
        rtype = self.resource_type(api_version, kind)
        selector, fields = self._selectors(rtype, label_selector, field_selector)
        if not rtype.namespaced:
            namespace = None
        with self._lock:
            initial: builtins.list[tuple[str, dict[str, Any]]] = []
            if resource_version in (None, "", "0"):
                cursor = self._log.rv
                initial = [("ADDED", obj)
                           for obj in self._select(rtype, namespace, selector, fields)]
            else:
                if not resource_version.isdigit():
                    raise Invalid(f"resourceVersion: Invalid value: {resource_version!r}")
                cursor = int(resource_version)
                self._check_not_future(cursor)
                oldest = self._oldest()
                if cursor + 1 < oldest:
                    raise Gone(f"too old resource version: {cursor} ({oldest - 1})")
            return self._log.open(
                (rtype.api_version, rtype.kind), namespace, selector, cursor, initial,
                timeout, bookmarks, fields,
            )
