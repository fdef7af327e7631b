"""The tenancy policy checked against the server: what one namespace may ask of it.

A ProviderConfig's :class:`~lifecycle.providers.postgres.policy.Policy` says what the
objects using it may ask for; :class:`Tenancy` checks one object's spec against it and
against the catalog, and :class:`PolicyGate` wraps every kind's client so that no call that
changes the server runs for a refused spec:

* **role attributes**: ``superUser``, ``createrole``, ``replication``, ``bypassRls`` and
  ``createdb`` only as ``allowedRoleAttributes`` allows (``createdb`` by default);
* **memberships** (``memberOf``), through the whole graph (``pg_auth_members``
  followed upwards): never the admin role or a superuser, never a role holding an
  attribute the policy refuses (a member can ``SET ROLE`` to it), never a predefined
  ``pg_*`` role and never another namespace's role unless ``allowedMemberships`` names it;
* **settings** (``configurationParameters``): only those whose ``pg_settings.context`` is
  in ``allowedSettingContexts`` (``user``: what a role may set for itself) or named in
  ``allowedSettings``; a custom ``prefix.name`` only when named;
* **names of other objects** (a Grant's role, database and schema; a DefaultPrivileges'
  role, targetRole, database and schema; a Schema's or Extension's database; a Database's
  owner and template; a Role's ``reassignOwnedTo``): only what an object of the same
  namespace made through the same ProviderConfig (the mark comment records both:
  :func:`lifecycle.providers.postgres.marks.tenant_of`), a ``sharedDatabases`` entry, or,
  with ``crossNamespace: true``, anything else; never the admin role (but as the owner of
  a database or schema, which it is by default), a superuser or a predefined role, and
  never the server's own databases (``postgres``, templates, the admin's database) for
  a Grant, a DefaultPrivileges, a Schema or an Extension;
* **extensions**: only ``allowedExtensions`` (trusted contrib ones by default);
* **revokePublicOnDb**: only on the namespace's own database (or ``never``).

A refusal is a terminal ``PolicyDenied`` naming the rule. The engine asks first
(:meth:`PolicyGate.admit`, through the connector's ``admit``) before it takes ownership of
an object, so a refused new object gets no finalizer, external name or Secret and is
deleted at once. The gate also refuses before any statement that changes the server, for
objects that already hold ownership (a spec changed later, a policy tightened):
``observe`` of a refused object reports nothing of it (absent), so a pass that would
create it fails in ``create`` with the refusal, and deleting it calls nothing; only a
resource the object itself made and marked (before the policy refused it) is still
reported, not up to date, so that deleting the object drops it.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs

from lifecycle.core import objects
from lifecycle.core.contract import ManagedResource
from lifecycle.core.errors import ExternalError, TerminalError
from lifecycle.core.kind import FINALIZER
from lifecycle.core.values import Completion, Creation, Observation
from lifecycle.providers.postgres import marks
from lifecycle.providers.postgres.config import Session, SqlClient
from lifecycle.providers.postgres.policy import POLICY_DENIED, ROLE_ATTRIBUTES, denied
from lifecycle.providers.postgres.schema import in_database

__all__ = [
    "CHECKS", "FINISHED", "TARGET_CONFLICT", "TEMPLATES", "Claims", "Holder", "PolicyGate",
    "RoleRow", "Tenancy", "check", "target_key",
]

#: Templates every namespace may create a database from.
TEMPLATES = frozenset({"template0", "template1"})
#: Reason of a Grant or DefaultPrivileges refused because another object manages its
#: role and target.
TARGET_CONFLICT = "TargetConflict"


@attrs.frozen
class RoleRow:
    """What the policy needs to know of one role."""

    name: str
    attributes: frozenset[str]
    note: str | None

    @property
    def superuser(self) -> bool:
        """Whether the role is a superuser."""
        return "superUser" in self.attributes


_ROLE_COLUMNS = ", ".join(f"r.{column}" for column in ROLE_ATTRIBUTES.values())


def _role_row(name: str, flags: Iterable[Any], note: Any) -> RoleRow:
    held = frozenset(k for k, v in zip(ROLE_ATTRIBUTES, flags, strict=True) if v)
    return RoleRow(name, held, note if isinstance(note, str) else None)


class Tenancy:
    """Checks one object's spec against its ProviderConfig's policy and the catalog.

    ``mutating``: the check guards a change; a role or database the spec names that does
    not exist yet is then a retryable ``DependencyMissing`` (it is checked once it exists),
    else it is let through (an observation of what is not there changes nothing).
    """

    def __init__(self, session: Session, resource: ManagedResource, *, mutating: bool) -> None:
        self.session = session
        self.server = session.server
        self.policy = session.server.policy
        self.tenant = (resource.namespace, session.server.config_name)
        self.mutating = mutating

    # ------------------------------------------------------------------ helpers
    def deny(self, rule: str, message: str) -> TerminalError:
        """The refusal of ``rule``."""
        return denied(self.server.config_name, rule, message)

    def missing(self, what: str) -> None:
        """A named object that does not exist (yet): retried when guarding a change."""
        if self.mutating:
            raise ExternalError(f"{what} does not exist (yet)", reason="DependencyMissing")

    def mine(self, note: Any) -> bool:
        """Whether a mark comment records this object's namespace and provider config."""
        return marks.tenant_of(note) == self.tenant

    @property
    def whose(self) -> str:
        """This object's namespace and provider config, as messages name them."""
        return (f"namespace {self.tenant[0]!r} through provider config "
                f"{self.tenant[1]!r}")

    def roles(self, names: Iterable[str]) -> dict[str, RoleRow]:
        """The roles of ``names`` that exist."""
        rows = self.session.rows(
            f"SELECT r.rolname, {_ROLE_COLUMNS}, "
            "pg_catalog.shobj_description(r.oid, 'pg_authid') FROM pg_catalog.pg_roles r "
            "WHERE r.rolname = ANY(%s)", [sorted(set(names))],
            doing="checking roles against the policy")
        return {row[0]: _role_row(row[0], row[1:-1], row[-1]) for row in rows}

    def role_named(self, name: str, field: str, *, admin_ok: bool = False) -> None:
        """A role the spec names in ``field``: this namespace's (or, with
        ``crossNamespace``, any other), never a superuser or a predefined role, and the
        admin only where ``admin_ok``."""
        if name == self.server.username:
            if admin_ok:
                return
            raise self.deny("adminRole", f"{field} {name!r} is the provider config's admin "
                                         "role, which no object may name here")
        if name.startswith("pg_"):
            raise self.deny("predefinedRoles", f"{field} {name!r} is a role predefined by "
                                               "the server")
        row = self.roles([name]).get(name)
        if row is None:
            self.missing(f"role {name!r} (named by {field})")
            return
        if row.superuser:
            raise self.deny("superuserRoles", f"{field} {name!r} is a superuser")
        if not self.policy.cross_namespace and not self.mine(row.note):
            raise self.deny("crossNamespace", f"{field} {name!r} is not a role made by a "
                                              f"Role of {self.whose}")

    def database_named(self, name: str, field: str, *, shared_ok: bool = True) -> bool:
        """A database the spec names in ``field``: whether it is this namespace's (True),
        or another it may name (False: a ``sharedDatabases`` entry when ``shared_ok``, or
        any but the server's own with ``crossNamespace``); else refused."""
        row = self.session.row(
            "SELECT pg_catalog.shobj_description(d.oid, 'pg_database') "
            "FROM pg_catalog.pg_database d WHERE d.datname = %s", [name],
            doing=f"checking database {name!r} against the policy")
        if row is None:
            self.missing(f"database {name!r} (named by {field})")
            return False
        if self.mine(row[0]):
            return True
        if name in marks.RESERVED_DATABASES or name == self.server.database:
            raise self.deny("reservedDatabases", f"{field} {name!r} is one of the server's "
                                                 "own databases")
        if (shared_ok and name in self.policy.shared_databases) or self.policy.cross_namespace:
            return False
        if marks.tenant_of(row[0]) is None:
            # A Database marks what it creates in a second statement (CREATE DATABASE cannot
            # share a transaction): unmarked, it may be this namespace's, made a moment ago.
            # Refused, and retried with backoff rather than terminally.
            raise ExternalError(f"refused by the policy of provider config "
                                f"{self.server.config_name!r} (rule crossNamespace): {field} "
                                f"{name!r} is not marked as made by a Database of "
                                f"{self.whose} (yet)", reason=POLICY_DENIED)
        raise self.deny("crossNamespace", f"{field} {name!r} is not a database made by a "
                                          f"Database of {self.whose}")

    def schema_named(self, database: str, schema: str | None, field: str = "schema") -> None:
        """A schema of ``database`` the spec names: never one another namespace made
        (unless ``crossNamespace``)."""
        if schema is None or self.policy.cross_namespace:
            return
        with in_database(self.session, database, missing_ok=True) as session:
            if session is None:
                return
            row = session.row("SELECT pg_catalog.obj_description(n.oid, 'pg_namespace') "
                              "FROM pg_catalog.pg_namespace n WHERE n.nspname = %s", [schema],
                              doing=f"checking schema {schema!r} against the policy")
        if row is not None and marks.tenant_of(row[0]) not in (None, self.tenant):
            raise self.deny("crossNamespace", f"{field} {schema!r} of {database!r} was made "
                                              "by a Schema of another namespace")

    # ------------------------------------------------------------------ kinds
    def role(self, want: Any) -> None:
        """A Role: its attributes, memberships, settings and ``reassignOwnedTo``."""
        asked = sorted(k for k, v in want.flags().items()
                       if v and k in ROLE_ATTRIBUTES and k not in self.policy.role_attributes)
        if asked:
            hint = "; allowSuperuser: true allows superUser" if "superUser" in asked else ""
            raise self.deny("allowedRoleAttributes", f"{', '.join(asked)} is not allowed "
                            f"(allowedRoleAttributes: {sorted(self.policy.role_attributes)}"
                            f"{hint})")
        if want.member_of:
            self.memberships(want.member_of)
        if want.configuration_parameters:
            self.settings([s.name for s in want.configuration_parameters])
        if want.reassign_owned_to is not None:
            self.role_named(want.reassign_owned_to, "reassignOwnedTo")

    def memberships(self, groups: Iterable[str]) -> None:
        """``memberOf``: every role the groups are members of, directly or not, is checked."""
        groups = sorted(set(groups))
        rows = self.session.rows(
            "WITH RECURSIVE up(oid, via) AS ("
            "SELECT r.oid, r.rolname::text FROM pg_catalog.pg_roles r "
            "WHERE r.rolname = ANY(%s) UNION "
            "SELECT m.roleid, up.via FROM pg_catalog.pg_auth_members m "
            "JOIN up ON m.member = up.oid) "
            f"SELECT up.via, r.rolname, {_ROLE_COLUMNS}, "
            "pg_catalog.shobj_description(r.oid, 'pg_authid') "
            "FROM up JOIN pg_catalog.pg_roles r ON r.oid = up.oid ORDER BY 1, 2", [groups],
            doing="checking the membership graph of memberOf against the policy")
        found = {row[0] for row in rows}
        for group in groups:
            if group not in found:
                self.missing(f"role {group!r} (named by memberOf)")
        for via, name, *rest in rows:
            self._member(via, _role_row(name, rest[:-1], rest[-1]))

    def _member(self, via: str, row: RoleRow) -> None:
        name, label = row.name, f"memberOf {via!r}"
        if name == self.server.username:  # not named: only what the tenant wrote is shown
            raise self.deny("memberships", f"{label}: it is, or is a member of, the provider "
                                           "config's admin role")
        if name != via:
            label += f" (a member of {name!r})"
        if row.superuser:
            raise self.deny("memberships", f"{label}: {name!r} is a superuser")
        held = sorted(row.attributes - self.policy.role_attributes)
        if held:
            raise self.deny("memberships", f"{label}: {name!r} has {', '.join(held)}, which "
                                           "a member may use through SET ROLE")
        if name in self.policy.memberships:
            return
        if name.startswith("pg_"):
            raise self.deny("memberships", f"{label}: {name!r} is a predefined role; "
                                           "allowedMemberships does not list it")
        if not self.policy.cross_namespace and not self.mine(row.note):
            raise self.deny("memberships", f"{label}: {name!r} is not a role made by a Role "
                                           f"of {self.whose}")

    def settings(self, names: list[str]) -> None:
        """``configurationParameters``: each by its ``pg_settings.context``."""
        rows = self.session.rows(
            "SELECT n, s.name, s.context FROM unnest(%s::text[]) AS n "
            "LEFT JOIN pg_catalog.pg_settings s ON s.name = lower(n)", [names],
            doing="checking configuration parameters against the policy")
        for name, known, context in rows:
            if known is None and "." not in name:
                continue  # not a parameter at all: the client refuses it as InvalidSpec
            if not self.policy.setting_allowed(name, context):
                kind = (f"context {context!r}" if context is not None
                        else "a custom parameter, which only a superuser may set")
                raise self.deny("configurationParameters", f"{name!r} has {kind} "
                                f"(allowedSettingContexts: "
                                f"{sorted(self.policy.setting_contexts)}; allowedSettings "
                                "does not list it)")

    def database(self, want: Any) -> None:
        """A Database: its owner and template."""
        if want.owner is not None:
            self.role_named(want.owner, "owner", admin_ok=True)
        if want.template is not None and want.template not in TEMPLATES:
            self.database_named(want.template, "template", shared_ok=False)

    def grant(self, want: Any) -> None:
        """A Grant: its role, database, schema and ``revokePublicOnDb``."""
        self.role_named(want.role, "role")
        ours = self.database_named(want.database, "database")
        self.schema_named(want.database, want.schema)
        if want.revoke_public_on_db and (self.policy.revoke_public_on_db == "never"
                                         or not ours):
            raise self.deny("revokePublicOnDb", f"PUBLIC's privileges on database "
                            f"{want.database!r} may change only on a database made by a "
                            f"Database of {self.whose}"
                            + (" (and the policy says never)"
                               if self.policy.revoke_public_on_db == "never" else ""))

    def default_privileges(self, want: Any) -> None:
        """A DefaultPrivileges: its role, targetRole, database and schema."""
        self.role_named(want.role, "role")
        self.role_named(want.target_role, "targetRole")
        self.database_named(want.database, "database")
        self.schema_named(want.database, want.schema)

    def schema(self, want: Any) -> None:
        """A Schema: its database and owner."""
        self.database_named(want.database, "database")
        if want.role is not None:
            self.role_named(want.role, "role", admin_ok=True)

    def extension(self, want: Any) -> None:
        """An Extension: which one, its database and schema."""
        if not self.policy.extension_allowed(want.extension):
            raise self.deny("allowedExtensions", f"extension {want.extension!r} is not in "
                                                 "allowedExtensions")
        self.database_named(want.database, "database", shared_ok=False)
        self.schema_named(want.database, want.schema)


#: Per kind, the check of its parameters.
CHECKS: dict[str, Callable[[Tenancy, Any], None]] = {
    "Role": Tenancy.role, "Database": Tenancy.database, "Grant": Tenancy.grant,
    "DefaultPrivileges": Tenancy.default_privileges, "Schema": Tenancy.schema,
    "Extension": Tenancy.extension}


def check(client: SqlClient, resource: ManagedResource, *, mutating: bool) -> None:
    """Raise the policy's refusal of ``resource`` (terminal ``PolicyDenied``), if any."""
    rule = CHECKS.get(resource.kind)
    if rule is not None and resource.parameters is not None:
        rule(Tenancy(client.session, resource, mutating=mutating), resource.parameters)


def target_key(resource: ManagedResource) -> str | None:
    """What a Grant or DefaultPrivileges manages, with its provider config: its scope
    (role, target role, database, schema, kind of object, table) and the objects it names;
    None for the other kinds."""
    return _key_of(resource.kind, resource.parameters)


def _key_of(kind: str, want: Any) -> str | None:
    if kind not in ("Grant", "DefaultPrivileges") or want is None:
        return None
    names: list[Any] = []
    if kind == "Grant":
        names = [list(want.tables or want.sequences or ()), list(want.columns or ()),
                 [[r.name, list(r.arguments)] for r in want.routines or ()]]
    return json.dumps([kind, want.scope, names], sort_keys=True)


#: (creationTimestamp, uid, "namespace/name") of an object holding a target: ordered by age.
Holder = tuple[str, str, str]


def _conflict(resource: ManagedResource, owner: Holder) -> TerminalError:
    """The terminal refusal of ``resource`` because ``owner`` holds its role and target."""
    return TerminalError(
        f"{resource.kind} {owner[2]} (uid {owner[1]}) already manages these privileges "
        f"of {resource.parameters.role!r} on this target: one object per role and "
        "target (the older keeps it), so that two never undo each other; merge the two, "
        "or delete that one and then change this one's spec", reason=TARGET_CONFLICT)


class Claims:
    """One owner per (role, target) of the Grant-like kinds: the oldest object holding it.

    An object *holds* a target when it carries the engine's finalizer (it was admitted and
    taken over) and its spec names that role and target under that provider config. When
    two hold one, the older object (``metadata.creationTimestamp``, then uid: both set by
    the API server, neither writable by a tenant) keeps it and the other is refused with a
    terminal ``TargetConflict``; an object not yet taken over is refused while anyone
    holds the target, so it never gets the finalizer. The answer is read from the kind's
    objects (:meth:`bind` hands over the engine's list of them; see
    :class:`lifecycle.core.contract.Binds`), so a restarted operator finds the same
    owner, whatever it reconciles first.

    The holders are loaded from one list on first use and then kept as objects take and
    give up targets; a holder met by another object is checked against a fresh list
    first (it may be gone, or name another target now). Without a bound list the record
    starts empty and lives in this process only.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lister: Callable[[], Iterable[Mapping[str, Any]]] | None = None
        self._parse: Callable[[Mapping[str, Any]], Any] | None = None
        self._kind = ""
        self._held: dict[tuple[str, str], Holder] | None = None

    def bind(self, kind: Any, objects: Callable[[], Iterable[Mapping[str, Any]]]) -> None:
        """Read holders from ``objects()``, every object of ``kind`` (the engine's list)."""
        with self._lock:
            self._lister, self._kind = objects, kind.kind
            self._parse = lambda obj: kind.parse_parameters(obj.get("spec"))
            self._held = None

    def _holders(self) -> dict[tuple[str, str], Holder]:
        """Every held target and its owner, from a fresh list (empty without one)."""
        found: dict[tuple[str, str], Holder] = {}
        if self._lister is None or self._parse is None:
            return found
        for obj in self._lister():
            meta = objects.metadata(obj)
            if FINALIZER not in objects.finalizers(obj):
                continue
            try:
                key = _key_of(self._kind, self._parse(obj))
            except Exception:  # an unreadable spec holds nothing
                continue
            if key is None:
                continue
            ref = objects.mapping(objects.spec(obj).get("providerConfigRef"))
            slot = (str(ref.get("name") or "default"), key)
            holder = (str(meta.get("creationTimestamp") or ""), str(meta.get("uid") or ""),
                      f"{meta.get('namespace') or ''}/{meta.get('name')}")
            found[slot] = min(found[slot], holder) if slot in found else holder
        return found

    def claim(self, config: str, resource: ManagedResource, *, take: bool = True) -> None:
        """Check that ``resource`` may act on its target, or raise the terminal
        ``TargetConflict`` naming the object that holds it.

        ``take``: the resource holds its finalizer (a call after the engine took it
        over), so it counts as a holder itself, and keeps the target when it is the
        older; without it (the check before the takeover) any other holder refuses it.
        """
        key = target_key(resource)
        if key is None:
            return
        slot = (config, key)
        me = f"{resource.namespace}/{resource.name}"
        with self._lock:
            if self._held is None:
                self._held = self._holders()
            held = self._held.get(slot)
            if held is None or held[1] == resource.uid:
                if take and held is None:
                    self._held[slot] = ("", resource.uid, me)  # its age is read when needed
                return
            unbound = self._lister is None
        if unbound:  # nothing to read: the first claimant of this process keeps it
            raise _conflict(resource, held)
        fresh = self._holders()  # the holder may be gone, or name another target now
        with self._lock:
            assert self._held is not None
            self._held.update(fresh)
            for stale in [s for s in self._held if s not in fresh and s != slot]:
                del self._held[stale]
            owner = fresh.get(slot)
            if take and (owner is None or owner[1] == resource.uid):
                self._held[slot] = owner or ("", resource.uid, me)
                return
            if owner is None:
                self._held.pop(slot, None)
                return
            if owner[1] == resource.uid:
                return
        raise _conflict(resource, owner)

    def release(self, config: str, resource: ManagedResource) -> None:
        """Give up the resource's target (its delete ran)."""
        key = target_key(resource)
        if key is None:
            return
        with self._lock:
            record = self._held
            held = None if record is None else record.get((config, key))
            if record is not None and held is not None and held[1] == resource.uid:
                del record[(config, key)]


#: What a statement that has run reports of its effect: finished (observe it now).
FINISHED = Completion(finished=True)


class PolicyGate:
    """A kind's client behind the policy: nothing that changes the server runs for a spec
    the policy refuses, nor for a Grant-like object whose target another one manages
    (``claims``; see the module docstring)."""

    def __init__(self, client: SqlClient, claims: Claims | None = None) -> None:
        self.client = client
        self.claims = claims if claims is not None else Claims()

    def _check(self, resource: ManagedResource, *, mutating: bool) -> None:
        check(self.client, resource, mutating=mutating)
        self.claims.claim(self.client.server.config_name, resource, take=mutating)

    def __repr__(self) -> str:
        return f"PolicyGate({self.client!r})"

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)

    def admit(self, resource: ManagedResource) -> None:
        """Raise the policy's refusal, or the target's holder, without taking the target."""
        self._check(resource, mutating=False)

    def observe(self, resource: ManagedResource) -> Observation:
        """The client's observation; for a refused spec, nothing (absent) unless the object
        made and marked the resource itself, which is then reported out of date."""
        try:
            self._check(resource, mutating=False)
        except (TerminalError, ExternalError) as exc:
            if exc.reason not in (POLICY_DENIED, TARGET_CONFLICT):
                raise
            seen = self.client.observe(resource)
            if (seen.exists and seen.owner and resource.owner_mark
                    and marks.same_owner(seen.owner, resource.owner_mark)):
                return attrs.evolve(seen, up_to_date=False)
            return Observation.absent()
        seen = self.client.observe(resource)
        if seen.exists:  # what it holds is its own: the holder of its target (again)
            self.claims.claim(self.client.server.config_name, resource)
        return seen

    # Every statement has finished when it returns: each mutating call says so
    # (``finished``), and the engine observes the result in the same pass.

    def create(self, resource: ManagedResource) -> Creation:
        """The policy's refusal, else the client's create (finished when it returns)."""
        self._check(resource, mutating=True)
        return attrs.evolve(self.client.create(resource), finished=True)

    def update(self, resource: ManagedResource) -> Completion:
        """The policy's refusal, else the client's update (finished when it returns)."""
        self._check(resource, mutating=True)
        self.client.update(resource)
        return FINISHED

    def delete(self, resource: ManagedResource) -> Completion:
        """The client's delete (reached only for what observe reported; finished when it
        returns); the target is free again once it ran."""
        self.client.delete(resource)
        self.claims.release(self.client.server.config_name, resource)
        return FINISHED

    def close(self) -> None:
        """Release the client's admin connection."""
        self.client.close()
