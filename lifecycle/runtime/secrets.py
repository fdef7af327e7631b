"""The connection Secret of a managed resource: its password and published details.

A kind with ``password=True`` gets a generated password written to its
connection Secret before the first external call, and every retry reuses it;
after a successful pass the connection details the provider returned are
merged into the same Secret. The Secret carries the owner's uid (and, in the
owner's namespace, a controller ownerReference) and the label
``lifecycle.dev/connection-secret: "true"``, by which the operator caches its
own Secrets and no others. A Secret without this
owner's mark (another resource's, or one the operator did not create) is
never read, merged, annotated or used as a password source: the pass fails
with ``ConnectionSecretNotOwned`` instead, and a deletion goes on without it.
A namespaced resource's Secret lives in the resource's own namespace unless
the operator allows other namespaces. Reading a Secret and decoding its data
are Kubernetes helpers (:mod:`lifecycle.kube.secrets`, re-exported here).
"""

from __future__ import annotations

import binascii
import secrets
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from lifecycle.core import objects
from lifecycle.core.errors import HandledError, TerminalError
from lifecycle.core.kind import CONNECTION_SECRET_LABEL, OWNER_UID, Kind, connection_secret_ref
from lifecycle.kube.cluster import Cluster
from lifecycle.kube.conflict import on_conflict
from lifecycle.kube.errors import AlreadyExists, Conflict, Forbidden, Invalid, NotFound
from lifecycle.kube.secrets import decode, read_secret

__all__ = ["ConnectionSecrets", "decode", "generate_password", "read_secret", "secret_owner"]


def generate_password() -> str:
    """A random password for a new external resource (32 URL-safe characters)."""
    return secrets.token_urlsafe(24)


def secret_owner(secret: Mapping[str, Any]) -> str | None:
    """The uid of the resource a connection Secret belongs to, if any."""
    owner = objects.annotations(secret).get(OWNER_UID)
    if isinstance(owner, str):
        return owner
    for ref in objects.metadata(secret).get("ownerReferences") or []:
        if isinstance(ref, Mapping) and ref.get("controller"):
            return str(ref.get("uid"))
    return None


@attrs.define
class ConnectionSecrets:
    """The connection Secrets one reconcile pass touches, each read at most once.

    ``kind`` is the owner's kind (for its ownerReference); ``password_factory``
    makes a new password; ``allow_cross_namespace`` lets a namespaced owner
    name a Secret in another namespace. Make one per pass: the Secrets read
    are cached for the pass only. A write that keeps conflicting raises
    ``ConflictsExhausted`` (:mod:`lifecycle.kube.conflict`).
    """

    api: Cluster
    kind: Kind
    password_factory: Callable[[], str] = generate_password
    allow_cross_namespace: bool = attrs.field(default=False, kw_only=True)
    _seen: dict[tuple[str, str], dict[str, Any] | None] = attrs.field(
        factory=dict, init=False, repr=False)
    #: The last ``data`` mapping decoded and its decoded form: the Secrets this pass
    #: reads or writes are never changed in place, so one decode per Secret suffices.
    _decoded: tuple[Any, dict[str, str]] = attrs.field(default=(None, {}), init=False,
                                                        repr=False)

    def check_namespace(self, owner: Mapping[str, Any]) -> None:
        """Refuse a connection Secret outside a namespaced owner's own namespace.

        Raises :class:`TerminalError` ``SecretNamespaceNotAllowed`` unless the
        kind is cluster-scoped or other namespaces are allowed.
        """
        self._checked_ref(owner)

    def _checked_ref(self, owner: Mapping[str, Any]) -> tuple[str, str]:
        """``owner``'s connection Secret (namespace, name), checked by :meth:`check_namespace`."""
        namespace, name = connection_secret_ref(owner)
        if self.kind.namespaced and not self.allow_cross_namespace:
            own = objects.metadata(owner).get("namespace")
            if namespace != own:
                raise TerminalError(
                    f"connection Secret {namespace}/{name} is outside the resource's namespace "
                    f"{own}; the operator writes connection Secrets only in the resource's own "
                    "namespace", reason="SecretNamespaceNotAllowed")
        return namespace, name

    def _decode(self, secret: Mapping[str, Any]) -> Mapping[str, str]:
        """:func:`decode` of a Secret this pass read or wrote, decoded once (read-only)."""
        data = secret.get("data")
        if data is not self._decoded[0]:
            self._decoded = (data, decode(secret))
        return self._decoded[1]

    def _read(self, owner: Mapping[str, Any], namespace: str, name: str,
              fresh: bool, creating: bool) -> Mapping[str, Any] | None:
        """The connection Secret of ``owner``, read once per pass (again when ``fresh``).

        The Secret as read, without a copy: this module's callers never change what
        they get. Raises :class:`TerminalError` ``ConnectionSecretNotOwned`` when the
        Secret exists without ``owner``'s mark (it belongs to another resource, or the
        operator did not create it). ``creating``: a None answer is followed by a
        create (see :func:`read_secret`).
        """
        key = (namespace, name)
        if fresh or key not in self._seen:
            self._seen[key] = read_secret(self.api, namespace, name,
                                          creating=creating and not fresh)
        secret = self._seen[key]
        if secret is None:
            return None
        if secret_owner(secret) != owner["metadata"]["uid"]:
            raise TerminalError(
                f"connection Secret {namespace}/{name} exists and does not belong to this "
                "resource; choose another spec.writeConnectionSecretToRef",
                reason="ConnectionSecretNotOwned")
        return secret

    def take_over(self, owner: Mapping[str, Any], *, holds: bool, read_only: bool,
                  forced: bool = False) -> str | None:
        """The connection Secret as ``owner`` is taken over, in one call: the password.

        Refuses (:class:`TerminalError`) a Secret outside a namespaced owner's
        namespace (:meth:`check_namespace`) and, unless the owner ``holds`` its
        external name already, a Secret that exists and is not the owner's
        (``ConnectionSecretNotOwned``). For a kind with a password, returns the one stored
        (``read_only``), else the one stored or a new one persisted first
        (:meth:`ensure_password`); None for a kind without.
        """
        ref = self._checked_ref(owner)
        creating = self.kind.password and not read_only
        if not holds:
            self._read(owner, *ref, False, creating)
        if not self.kind.password:
            return None
        if read_only:
            return self._stored_password(owner, ref, False)
        return self.ensure_password(owner, forced)

    def stored_password(self, owner: Mapping[str, Any], *,
                        creating: bool = False) -> str | None:
        """The password recorded in ``owner``'s connection Secret, if any."""
        return self._stored_password(owner, self._checked_ref(owner), creating)

    def _stored_password(self, owner: Mapping[str, Any], ref: tuple[str, str],
                         creating: bool) -> str | None:
        secret = self._read(owner, *ref, False, creating)
        return self._decode(secret).get("password") if secret else None

    def password(self, owner: Mapping[str, Any], read_only: bool, forced: bool,
                 deleting: bool = False) -> str | None:
        """The password for the client; generated and persisted first unless ``read_only``.

        Persisting it before any external call also covers an adopted resource
        that already existed: its Secret gets a password, and observe reports
        the mismatch so update applies it. While ``deleting``, a Secret that
        is not this owner's (or not allowed) is left alone and no password is
        given: it never blocks the deletion.
        """
        if deleting:
            try:
                return self.stored_password(owner)
            except TerminalError:
                return None
        if read_only:
            return self.stored_password(owner)
        return self.ensure_password(owner, forced)

    def ensure_password(self, owner: Mapping[str, Any], forced: bool = False) -> str:
        """Reuse the password in the connection Secret, or generate and persist one first.

        A password found only on the retry after a create that met an
        existing Secret is kept: the new one is never written over it.
        """
        ref = self._checked_ref(owner)
        stored = self._stored_password(owner, ref, True)
        if stored:
            return stored
        password = self.password_factory()
        self._publish(owner, ref, {"password": password}, forced, keep=True)
        written = self._seen.get(ref)
        return (self._decode(written).get("password") if written else None) or password

    def publish(self, owner: Mapping[str, Any], details: Mapping[str, str],
                forced: bool = False, *, keep: bool = False) -> None:
        """Merge ``details`` into ``owner``'s connection Secret; write only when it changed.

        ``forced`` writes even an unchanged Secret; ``keep`` sets only the
        keys the Secret lacks or holds empty. A missing Secret is created without reading
        it from the API server when a cache can tell (see :func:`read_secret`).
        A conflicting write is retried from a fresh read; an invalid Secret is
        a terminal error, a Secret that cannot be written (missing namespace,
        forbidden) a handled one.
        """
        self._publish(owner, self._checked_ref(owner), details, forced, keep=keep)

    def _publish(self, owner: Mapping[str, Any], ref: tuple[str, str],
                 details: Mapping[str, str], forced: bool, *, keep: bool) -> None:
        namespace, name = ref
        fresh = [False]

        def attempt() -> None:
            secret = self._read(owner, namespace, name, fresh[0], True)
            fresh[0] = True
            current = self._decode(secret) if secret else {}
            given = {k: str(v) for k, v in details.items()}
            if keep:  # only what the Secret lacks (or holds empty)
                given = {k: v for k, v in given.items() if not current.get(k)}
            wanted = {**current, **given}
            if secret is not None and wanted == current and not forced:
                return
            data = {k: binascii.b2a_base64(v.encode(), newline=False).decode()  # = b64encode
                    for k, v in wanted.items()}
            ownership = self._ownership(owner, namespace)
            try:
                if secret is None:
                    self._seen[(namespace, name)] = self.api.create({
                        "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                        "metadata": {"name": name, "namespace": namespace, **ownership,
                                     "labels": {CONNECTION_SECRET_LABEL: "true"}},
                        "data": data,
                    })
                else:
                    labels = {**objects.labels(secret), CONNECTION_SECRET_LABEL: "true"}
                    self._seen[(namespace, name)] = self.api.replace({  # read-only: a new body
                        **secret, "data": data,
                        "metadata": {**secret["metadata"], **ownership, "labels": labels}})
            except AlreadyExists:
                # Created meanwhile: like a conflict, retried from a fresh read.
                raise Conflict(f"Secret {namespace}/{name} was created meanwhile") from None
            except Invalid as exc:
                raise TerminalError(f"connection Secret {namespace}/{name} is invalid: {exc}",
                                    reason="ConnectionSecretInvalid") from None
            except (NotFound, Forbidden) as exc:
                raise HandledError(f"connection Secret {namespace}/{name} cannot be written: "
                                   f"{exc}", reason="ConnectionSecretUnavailable") from None

        on_conflict(attempt, _no_refresh, what="connection Secret write")

    def _ownership(self, owner: Mapping[str, Any], namespace: str) -> dict[str, Any]:
        """Owner annotation always; a controller ownerReference only in the owner's namespace.

        Kubernetes garbage-collects a dependent whose namespaced owner is in
        another namespace, so a cross-namespace Secret carries only the annotation.
        """
        meta = owner["metadata"]
        annotations = {OWNER_UID: meta["uid"]}
        if self.kind.namespaced and namespace != meta.get("namespace"):
            return {"annotations": annotations}
        ref = {"apiVersion": self.kind.api_version, "kind": self.kind.kind,
               "name": meta["name"], "uid": meta["uid"], "controller": True,
               "blockOwnerDeletion": True}
        return {"annotations": annotations, "ownerReferences": [ref]}


def _no_refresh() -> None:
    """Nothing to read before a retry: each attempt reads the Secret afresh."""
