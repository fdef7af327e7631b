"""References between objects: a spec field filled from another object of the namespace (pure).

A kind's parameters declare, next to a field that names an external
resource (a Grant's ``role``), two optional fields that name it through the
object managing it instead:

* ``<field>Ref`` (:func:`reference_field`): ``{name: ...}``, an object of the
  referenced kind in the referencing object's own namespace;
* ``<field>Selector`` (:func:`selector_field`): ``{matchLabels: {...},
  matchControllerRef: true}``, the one object of that kind in the namespace
  whose labels match (and, with ``matchControllerRef``, that has the same
  controller as the referencing object).

Each declares the kind it references in its attrs ``metadata``
(:data:`REFERENCE`), so the CRD generator (the fields are ordinary attrs
fields of the parameters), the reconciler (:func:`declared`, :func:`pending`)
and the operator's index from referenced to referencing objects
(:class:`ReferenceIndex`) read the same declaration.

Resolution follows Crossplane's default: a field left empty with a
reference or selector is resolved once, to the referenced object's external
name, and the value is written into the spec (a selector also writes the
reference it chose); a field already set is left as it is. A reference
resolves only to an object that is Ready, not being deleted and using the
same provider config; a selector that matches several objects resolves to
none. There is no namespace in a reference: an object names only what its
own namespace holds.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs

from lifecycle.core import objects
from lifecycle.core.errors import HandledError, Severity, TerminalError
from lifecycle.core.kind import EXTERNAL_NAME
from lifecycle.core.vocabulary import Reasons

__all__ = ["REFERENCE", "Declared", "Reference", "ReferenceIndex", "Selector",
           "UnresolvedReference", "check_given", "choose", "declared", "is_ready", "pending",
           "reference_field", "referenced_resources", "required_rules", "selector_field",
           "turned_resolvable", "value_of"]

#: The key of an attrs field's ``metadata`` declaring what the field references:
#: ``(field, api_version, kind, how)``, ``how`` being ``"ref"`` or ``"selector"``.
REFERENCE = "lifecycle.dev/reference"
#: Most objects a message names when a selector matches several.
_SHOWN = 5


class UnresolvedReference(HandledError):
    """A reference or selector names no usable object (yet): retried, and the referencing
    object is requeued when an object of the referenced kind in its namespace turns Ready."""

    severity = Severity.RETRYABLE
    reason = Reasons.REFERENCE_UNRESOLVED


def _reference(value: Any) -> Reference | None:
    if value is None or isinstance(value, Reference):
        return value
    if not objects.is_mapping(value):
        raise TypeError(f"must be an object {{name: ...}}, not {type(value).__name__}")
    extra = sorted(str(k) for k in value if k != "name")
    if extra:
        hint = (" (a reference names an object of the same namespace only)"
                if "namespace" in extra else "")
        raise TypeError(f"has unknown field(s) {', '.join(extra)}{hint}")
    name: Any = value.get("name")  # checked by Reference's validator
    return Reference(name)


def _name(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not isinstance(value, str) or not value:
        raise TypeError("name must be a non-empty string")


@attrs.frozen
class Reference:
    """An object of the referenced kind in the referencing object's namespace, by name."""

    name: str = attrs.field(validator=_name)
    """The name of the referenced object (metadata.name) in this object's namespace."""


#: A label's name (an optional DNS-subdomain prefix and a slash, then a name) and value, as
#: the API server accepts them: a selector built from anything else could say more.
_LABEL_KEY = re.compile(r"([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?"
                        r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")
_LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?")


def _labels(value: Any) -> dict[str, str] | None:
    if value is None:
        return None
    if not objects.is_mapping(value) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise TypeError("matchLabels must map label names to string values")
    for key, label in value.items():
        if not _LABEL_KEY.fullmatch(key) or not _LABEL_VALUE.fullmatch(label):
            raise ValueError(f"matchLabels {key[:64]!r}: {label[:64]!r} is not a valid "
                             "label name and value")
    return dict(value)


def _flag(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and not isinstance(value, bool):
        raise TypeError("matchControllerRef must be true or false")


@attrs.frozen
class Selector:
    """Selects the one object of the referenced kind in this object's namespace whose labels
    match."""

    match_labels: dict[str, str] | None = attrs.field(default=None, converter=_labels,
                                                      alias="matchLabels")
    """Labels the selected object carries, each with this value."""
    match_controller_ref: bool | None = attrs.field(default=None, validator=_flag,
                                                    alias="matchControllerRef")
    """Select only an object controlled by the same owner as this object (its controller
    owner reference). Default false."""

    def matches(self, obj: Mapping[str, Any], referrer: Mapping[str, Any]) -> bool:
        """Whether ``obj`` carries every label and, when asked, the controller of
        ``referrer`` (an object without a controller matches none)."""
        found = objects.labels(obj)
        if any(found.get(k) != v for k, v in (self.match_labels or {}).items()):
            return False
        if self.match_controller_ref:
            mine = _controller(referrer)
            return mine is not None and mine == _controller(obj)
        return True


def _selector(value: Any) -> Selector | None:
    if value is None or isinstance(value, Selector):
        return value
    if not objects.is_mapping(value):
        raise TypeError(f"must be an object, not {type(value).__name__}")
    extra = sorted(str(k) for k in value if k not in ("matchLabels", "matchControllerRef"))
    if extra:
        raise TypeError(f"has unknown field(s) {', '.join(extra)}")
    return Selector(**value)


def _controller(obj: Mapping[str, Any]) -> str | None:
    for ref in objects.metadata(obj).get("ownerReferences") or []:
        if objects.is_mapping(ref) and ref.get("controller") and ref.get("uid"):
            return str(ref["uid"])
    return None


def _converting(key: str, convert: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def converter(value: Any) -> Any:
        try:
            return convert(value)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"'{key}' {exc}") from None
    return converter


def reference_field(field: str, api_version: str, kind: str, plural: str = "") -> Any:
    """The optional field ``<field>Ref`` of a parameters class: ``{name}`` of a ``kind``
    object (``api_version``; its resource ``plural``, by default the kind in lower case
    with an ``s``) of the same namespace whose external name fills ``field`` (the spec key
    of the field it resolves)."""
    key = f"{field}Ref"
    return attrs.field(
        default=None, kw_only=True, alias=key, converter=_converting(key, _reference),
        metadata={REFERENCE: (field, api_version, kind, "ref", plural or f"{kind.lower()}s"),
                  "description": (
            f"A {kind} of this object's namespace, by name: once it is Ready, its external "
            f"name is written into {field} (when {field} is empty).")})


def selector_field(field: str, api_version: str, kind: str, plural: str = "") -> Any:
    """The optional field ``<field>Selector``: labels selecting the one ``kind`` object of
    the same namespace whose external name fills ``field``."""
    key = f"{field}Selector"
    return attrs.field(
        default=None, kw_only=True, alias=key, converter=_converting(key, _selector),
        metadata={REFERENCE: (field, api_version, kind, "selector",
                              plural or f"{kind.lower()}s"), "description": (
            f"Selects the one {kind} of this object's namespace with these labels: once it is "
            f"Ready, its external name is written into {field} and its name into {field}Ref "
            f"(when {field} is empty).")})


def required_rules(*fields: str) -> tuple[dict[str, str], ...]:
    """CEL rules for a parameters class's ``__schema_validations__``: each of ``fields``
    is given, or its ``<field>Ref`` or ``<field>Selector`` is."""
    return tuple({"rule": f"has(self.{f}) || has(self.{f}Ref) || has(self.{f}Selector)",
                  "message": f"{f}, {f}Ref or {f}Selector is required"} for f in fields)


def check_given(parameters: Any, *fields: str) -> None:
    """Raise ``ValueError`` naming the first of ``fields`` (attribute names) that
    ``parameters`` leaves unset without a reference or selector to fill it."""
    cls: type = type(parameters)
    by_field = {d.field: d for d in declared(cls)}
    keys = {a.name: a.alias or a.name for a in attrs.fields(type(parameters))}
    aliases = {a.alias or a.name: a.name for a in attrs.fields(type(parameters))}
    for name in fields:
        if getattr(parameters, name) is not None:
            continue
        decl = by_field.get(keys[name])
        given = decl is not None and any(
            getattr(parameters, aliases[k]) is not None for k in (decl.ref_key,
                                                                  decl.selector_key) if k)
        if not given:
            key = keys[name]
            raise ValueError(f"'{key}' is required (or {key}Ref or {key}Selector)"
                             if decl is not None else f"'{key}' is required")


@attrs.frozen
class Declared:
    """One field a kind's parameters fill from a referenced object: the field's spec key,
    the referenced kind, and the spec keys of its reference and selector (either may be
    absent: "")."""

    field: str
    api_version: str
    kind: str
    ref_key: str = ""
    selector_key: str = ""
    #: The referenced kind's resource name (for the operator's RBAC rules).
    plural: str = ""

    @property
    def target(self) -> tuple[str, str]:
        """``(api_version, kind)`` of the referenced kind."""
        return (self.api_version, self.kind)


@functools.lru_cache(maxsize=128)
def declared(parameters: type) -> tuple[Declared, ...]:
    """The references a parameters class declares, one per field they fill, in field order."""
    if not attrs.has(parameters):
        return ()
    found: dict[str, Declared] = {}
    for attribute in attrs.fields(parameters):
        meta = (attribute.metadata or {}).get(REFERENCE)
        if meta is None:
            continue
        field, api_version, kind, how, plural = meta
        key = attribute.alias or attribute.name
        before = found.get(field, Declared(field, api_version, kind, plural=plural))
        if before.target != (api_version, kind):
            raise TypeError(f"{parameters.__qualname__}: the reference and selector of "
                            f"{field!r} name different kinds")
        found[field] = attrs.evolve(before, **({"ref_key": key} if how == "ref"
                                              else {"selector_key": key}))
    return tuple(found.values())


def referenced_resources(kinds: Iterable[Any]) -> list[tuple[str, str]]:
    """``(group, plural)`` of each kind the managed ``kinds`` reference that is not among
    them: the operator watches those for the objects waiting on them (get, list, watch)."""
    run = {(getattr(k, "api_version", ""), getattr(k, "kind", "")) for k in kinds}
    found = {(d.api_version.rpartition("/")[0], d.plural): None
             for k in kinds if attrs.has(getattr(k, "parameters", None) or object)
             for d in declared(k.parameters) if d.target not in run}
    return list(found)


def pending(parameters: type, spec: Any) -> list[tuple[Declared, Reference | None,
                                                         Selector | None]]:
    """The declared references of ``spec`` (an object's spec) to resolve: each field that is
    empty and has a reference or a selector, with them parsed.

    Raises :class:`TerminalError` (``InvalidReference``) naming the key of a malformed one.
    """
    params = objects.mapping(objects.mapping(spec).get("forProvider"))
    out = []
    for decl in declared(parameters):
        if params.get(decl.field) not in (None, ""):
            continue
        try:
            ref = (_converting(decl.ref_key, _reference)(params.get(decl.ref_key))
                   if decl.ref_key else None)
            selector = (_converting(decl.selector_key, _selector)(params.get(decl.selector_key))
                        if decl.selector_key else None)
        except TypeError as exc:
            raise TerminalError(f"invalid spec.forProvider: {exc.args[0]}",
                                reason="InvalidReference") from None
        if ref is not None or selector is not None:
            out.append((decl, ref, selector))
    return out


def is_ready(obj: Mapping[str, Any]) -> bool:
    """Whether ``obj``'s Ready condition is True."""
    for condition in objects.status(obj).get("conditions") or []:
        if objects.is_mapping(condition) and condition.get("type") == "Ready":
            return condition.get("status") == "True"
    return False


def value_of(obj: Mapping[str, Any]) -> str:
    """What a reference to ``obj`` resolves to: its external name (as recorded in status,
    else its annotation); "" when it has none."""
    recorded = objects.status(obj).get("externalName")
    if isinstance(recorded, str) and recorded:
        return recorded
    annotated = objects.annotations(obj).get(EXTERNAL_NAME)
    return annotated if isinstance(annotated, str) else ""


def _config(obj: Mapping[str, Any]) -> str:
    return str(objects.mapping(objects.spec(obj).get("providerConfigRef")).get("name")
               or "default")


def choose(decl: Declared, candidates: Iterable[Mapping[str, Any]], referrer: Mapping[str, Any],
           *, named: str | None = None, selector: Selector | None = None
           ) -> tuple[str, str] | str:
    """Resolve one reference from the objects of its kind that may answer it.

    ``candidates`` are the objects of the referenced kind in the referrer's
    namespace that were read for it: the one ``named`` (a reference), or those
    the ``selector``'s labels matched. Returns ``(value, name)`` (the external
    name to write and the chosen object's name) or, unresolved, the message
    saying what is missing.
    """
    via = decl.ref_key if named is not None else decl.selector_key
    where = f"namespace {objects.metadata(referrer).get('namespace')!r}"
    if named is not None:
        found = [c for c in candidates if objects.metadata(c).get("name") == named]
        if not found:
            return f"{via}: {decl.kind} {named!r} not found in {where}"
    else:
        assert selector is not None
        found = sorted((c for c in candidates if selector.matches(c, referrer)),
                       key=lambda c: str(objects.metadata(c).get("name")))
        if not found:
            return f"{via}: no {decl.kind} in {where} matches"
        if len(found) > 1:
            names = [str(objects.metadata(c).get("name")) for c in found]
            shown = ", ".join(names[:_SHOWN]) + (", ..." if len(names) > _SHOWN else "")
            return (f"{via}: {len(found)} {decl.kind}s in {where} match ({shown}); "
                    "a selector must match exactly one")
    obj = found[0]
    name = str(objects.metadata(obj).get("name"))
    if objects.metadata(obj).get("deletionTimestamp"):
        return f"{via}: {decl.kind} {name!r} is being deleted"
    if _config(obj) != _config(referrer):
        return (f"{via}: {decl.kind} {name!r} uses provider config {_config(obj)!r}, this "
                f"object {_config(referrer)!r}")
    value = value_of(obj)
    if not is_ready(obj) or not value:
        return f"{via}: {decl.kind} {name!r} is not Ready yet"
    return (value, name)


Key = tuple[str | None, str]


def turned_resolvable(old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> bool:
    """Whether a referenced object's change may resolve what waits on it: it is Ready with
    an external name now, and was not, or its labels or external name changed."""
    if new is None or not is_ready(new) or not value_of(new):
        return False
    if objects.metadata(new).get("deletionTimestamp"):
        return False
    return old is None or not is_ready(old) or value_of(old) != value_of(new) or (
        dict(objects.labels(old)) != dict(objects.labels(new)))


class ReferenceIndex:
    """Which referencing objects wait on which objects: the operator's index from a
    referenced object to the objects that name it, kept from the referencing kinds'
    informer events.

    Only objects with a field still to resolve are held (:func:`pending`); a
    referencing object resolved, deleted or malformed leaves it. Not
    thread-safe on its own: the operator calls it from informer threads under
    its lock.
    """

    def __init__(self) -> None:
        #: (api_version, kind, namespace, name) -> referencing (kind, key)s.
        self._named: dict[tuple[str, str, str | None, str], set[tuple[str, Key]]] = {}
        #: (api_version, kind, namespace) -> (referencing (kind, key), selector, referrer).
        self._selecting: dict[tuple[str, str, str | None],
                              dict[tuple[str, Key], tuple[Selector, Mapping[str, Any]]]] = {}
        self._entries: dict[tuple[str, Key], list[tuple[str, Any]]] = {}

    def update(self, kind: str, parameters: type, obj: Mapping[str, Any] | None,
               key: Key) -> None:
        """Record what the referencing object ``key`` of ``kind`` waits on now (``obj``
        None: it is gone)."""
        who = (kind, key)
        for where, entry in self._entries.pop(who, []):
            if where == "named":
                waiting = self._named.get(entry)
                if waiting is not None:
                    waiting.discard(who)
                    if not waiting:
                        del self._named[entry]
            else:
                selecting = self._selecting.get(entry)
                if selecting is not None:
                    selecting.pop(who, None)
                    if not selecting:
                        del self._selecting[entry]
        if obj is None or objects.metadata(obj).get("deletionTimestamp"):
            return
        try:
            wanted = pending(parameters, obj.get("spec"))
        except TerminalError:
            return
        entries: list[tuple[str, Any]] = []
        for decl, ref, selector in wanted:
            if ref is not None:
                named = (decl.api_version, decl.kind, key[0], ref.name)
                self._named.setdefault(named, set()).add(who)
                entries.append(("named", named))
            elif selector is not None:
                scope = (decl.api_version, decl.kind, key[0])
                self._selecting.setdefault(scope, {})[who] = (selector, obj)
                entries.append(("selecting", scope))
        if entries:
            self._entries[who] = entries

    def waiting_on(self, api_version: str, kind: str,
                   obj: Mapping[str, Any]) -> set[tuple[str, Key]]:
        """The referencing objects (their kind and key) that ``obj``, an object of
        ``kind``, may resolve: those naming it, and those whose selector matches it."""
        meta = objects.metadata(obj)
        namespace = meta.get("namespace") or None
        found = set(self._named.get((api_version, kind, namespace, str(meta.get("name"))), ()))
        for who, (selector, referrer) in self._selecting.get(
                (api_version, kind, namespace), {}).items():
            if selector.matches(obj, referrer):
                found.add(who)
        return found

    def woken(self, api_version: str, kind: str, old: Mapping[str, Any] | None,
              new: Mapping[str, Any] | None) -> list[tuple[str, Key]]:
        """The referencing objects to queue now that an object of ``kind`` changed from
        ``old`` to ``new`` (None: absent), in a stable order.

        Those it may resolve when it turned resolvable (:func:`turned_resolvable`),
        and, when a Ready object went or changed its labels, those whose selector
        it matched: with it gone, another may now be the only one that matches.
        The rule the operator's informers and the test harness both follow.
        """
        found: set[tuple[str, Key]] = set()
        if new is not None and turned_resolvable(old, new):
            found |= self.waiting_on(api_version, kind, new)
        if old is not None and is_ready(old) and (
                new is None or dict(objects.labels(old)) != dict(objects.labels(new))):
            found |= self.waiting_on(api_version, kind, old)
        return sorted(found, key=lambda w: (w[0], w[1][0] or "", w[1][1]))

    def __len__(self) -> int:
        """How many referencing objects wait on something."""
        return len(self._entries)
