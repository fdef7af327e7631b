"""A resource kind: its API identity, machine, parameters type and engine annotations."""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from lifecycle.core.errors import MachineDefinitionError, TerminalError
from lifecycle.core.machine import LifecycleMachine
from lifecycle.core.objects import is_mapping
from lifecycle.core.vocabulary import Events

__all__ = [
    "ADOPT", "CONNECTION_SECRET_LABEL", "EXTERNAL_NAME", "FINALIZER", "GROUP", "INTENT",
    "INTENT_MAC", "INVISIBLE_CATEGORIES", "OPERATION", "OWNER", "OWNER_UID", "PAUSED",
    "PROVIDER_CONFIG_API", "PROVIDER_CONFIG_KIND", "RECONCILE_POLICY", "SCHEMA_METADATA", "Kind",
    "check_machine_events", "check_references", "connection_secret_ref", "invisible_character",
    "spec_field", "spec_keys",
]

#: Group of the engine's own kinds (ProviderConfig) and annotations.
GROUP = "lifecycle.dev"
#: The finalizer the engine commits before any mutating external call.
FINALIZER = "lifecycle.dev/finalizer"
#: Operation annotation: ``reconcile`` forces a full pass, ``ignore`` stops at once.
OPERATION = "lifecycle.dev/operation"
#: Reconcile policy annotation on an object or namespace: ``manage``, ``skip`` or
#: ``detach-on-delete``.
RECONCILE_POLICY = "lifecycle.dev/reconcile-policy"
#: ``"true"`` pauses reconciliation; status says ReconcilePaused.
PAUSED = "lifecycle.dev/paused"
#: Namespace annotation naming the operator instance that owns the namespace.
OWNER = "lifecycle.dev/operator"
#: The external resource's name, persisted when the object is claimed.
EXTERNAL_NAME = "lifecycle.dev/external-name"
#: The intent journal entry (JSON), written before every mutating external call.
INTENT = "lifecycle.dev/intent"
#: The journal entry's MAC (hex HMAC-SHA256 under the operator's key, written with it):
#: only an entry whose MAC checks out is trusted (:mod:`lifecycle.core.seal`).
INTENT_MAC = "lifecycle.dev/intent-mac"
#: ``"true"`` asks to adopt an existing external resource not created by this object
#: (honoured only where the operator allows adoption).
ADOPT = "lifecycle.dev/adopt"

#: Annotation on a connection Secret naming the uid of the resource it belongs to.
OWNER_UID = "lifecycle.dev/owner-uid"
#: Label on every connection Secret the engine writes, so the operator can cache just
#: those (``lifecycle.dev/connection-secret=true``) instead of every Secret it may read.
CONNECTION_SECRET_LABEL = "lifecycle.dev/connection-secret"

PROVIDER_CONFIG_API = f"{GROUP}/v1alpha1"
PROVIDER_CONFIG_KIND = "ProviderConfig"


@attrs.frozen
class Kind:
    """A managed-resource kind: API identity, lifecycle machine and parameters type.

    ``parameters`` is an attrs class built from ``spec.forProvider``;
    ``password`` asks the engine to generate a password, persist it in the
    connection Secret before the first create, and hand it to the client.
    ``external_name_max`` is the longest external name the provider accepts,
    in UTF-8 bytes (None: no limit beyond the engine's own checks).
    ``provider_config_api`` is the apiVersion of the cluster-scoped
    ``ProviderConfig`` kind its objects name in ``spec.providerConfigRef``: a
    provider's own group (``aws.example.org/v1alpha1``), so that operators of
    different providers never share one; by default the engine's
    ``lifecycle.dev/v1alpha1``.
    ``description`` says, in plain text, what an object of the kind manages
    (the CRD's description); the fields of ``parameters`` are described by
    their own docstrings or :func:`spec_field` metadata.
    ``name_scope`` narrows where an external name must be unique: a function
    of the parsed parameters returning extra scope (say ``(database,)`` for a
    schema, whose name is unique only within its database). Two objects
    conflict only when provider config, scope and external name all match;
    None (the default) scopes names by provider config alone.
    """

    group: str
    version: str
    kind: str
    plural: str
    machine: type[LifecycleMachine]
    parameters: type
    namespaced: bool = True
    password: bool = False
    short_names: tuple[str, ...] = ()
    external_name_max: int | None = None
    #: The provider names what it creates (``Creation.external_name``): deleting an
    #: object after an interrupted create first resumes the create with its journalled
    #: key to learn the name, so the resource is deleted rather than left behind.
    names_assigned: bool = False
    #: The provider's create has finished when it returns (a SQL statement, a cloud whose
    #: create is synchronous): the pass that created the resource observes it once more
    #: and, when that shows it available, goes on to Ready in the same pass, with one
    #: status write and one connection-Secret update instead of two of each. An
    #: observation that shows anything else leaves the pass as it was (wait, then poll).
    observe_after_create: bool = False
    provider_config_api: str = PROVIDER_CONFIG_API
    #: The attrs class declaring the spec of that ProviderConfig kind (a subclass of
    #: :class:`lifecycle.core.providerconfig.ProviderConfigSpec`): its CRD is generated
    #: from it, as the kind's from ``parameters``. None: the engine's credentials block,
    #: other fields kept as written.
    provider_config_spec: type | None = None
    name_scope: Callable[[Any], tuple[str, ...]] | None = attrs.field(default=None, eq=False)
    #: What an object of the kind manages, in plain text: the CRD's description, which
    #: ``kubectl explain`` prints (empty: a sentence naming the kind).
    description: str = ""

    def __attrs_post_init__(self) -> None:
        check_machine_events(self.kind, self.machine)

    @property
    def api_version(self) -> str:
        """``group/version``."""
        return f"{self.group}/{self.version}"

    def parse_parameters(self, spec: Any) -> Any:
        """Build the typed parameters from ``spec.forProvider``.

        Each field is read under its spec key: its attrs ``alias`` when one is
        set (``storageGB`` for ``storage_gb``), else its name, as the CRD
        generator names it. Raises :class:`TerminalError` (reason
        ``InvalidSpec``) naming the offending field as the spec spells it,
        never with a traceback's worth of detail.
        """
        if not is_mapping(spec):
            raise TerminalError("spec must be an object")
        data = spec.get("forProvider", {})
        if data is None:
            data = {}
        if not is_mapping(data):
            raise TerminalError("spec.forProvider must be an object")
        known, keys = _spec_keys(self.parameters)
        if not keys.issuperset(data):
            unknown = sorted(str(k) for k in data if k not in keys)
            raise TerminalError(f"unknown field(s) in spec.forProvider: {', '.join(unknown)}")
        try:
            return self.parameters(**data)
        except (TypeError, ValueError) as exc:
            message = _short(exc)
            for name, key in known.items():
                if name != key:
                    message = message.replace(f"'{name}'", f"'{key}'")
            raise TerminalError(f"invalid spec.forProvider: {message}") from None

    def scope_of(self, obj: Mapping[str, Any]) -> tuple[str, ...]:
        """The extra scope of an object's external name (:attr:`name_scope` of its parsed
        parameters); ``()`` when the kind declares none or the spec does not parse (such an
        object is refused before it claims a name)."""
        if self.name_scope is None:
            return ()
        try:
            parameters = self.parse_parameters(obj.get("spec"))
        except TerminalError:
            return ()
        return tuple(str(part) for part in self.name_scope(parameters))

    def to_spec(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """``values`` keyed by parameter attribute name, re-keyed as ``spec.forProvider`` spells
        them (each field's alias); keys that already are spec keys, or name no field, are kept.

        Used to write provider defaults (``Observation.late_init``) back into the spec.
        """
        keys = _spec_keys(self.parameters)[0]
        return {keys.get(str(k), str(k)): v for k, v in values.items()}

    def external_name(self, obj: Mapping[str, Any]) -> str:
        """The external name to claim: the annotation if a user set it, else name-uid8.

        When ``name-uid8`` would be longer than ``external_name_max`` bytes (a
        60-character name for a 63-byte PostgreSQL identifier), the name is
        cut so that ``<cut name>-<uid8>`` fits: the uid's eight characters
        keep two objects sharing a long prefix apart, as they always do.
        """
        meta = obj["metadata"]
        chosen = (meta.get("annotations") or {}).get(EXTERNAL_NAME)
        if isinstance(chosen, str) and chosen:
            return chosen
        name, suffix = str(meta["name"]), f"-{str(meta['uid'])[:8]}"
        limit = self.external_name_max
        if limit is not None and len((name + suffix).encode("utf-8")) > limit:
            room = max(limit - len(suffix.encode("utf-8")), 1)
            name = name.encode("utf-8")[:room].decode("utf-8", "ignore").rstrip("-.") or "x"
        return f"{name}{suffix}"

    def check_external_name(self, name: Any) -> None:
        """Refuse an external name no provider could hold, before it is committed.

        The name must be a non-empty string without control or invisible
        characters (:func:`invisible_character`: NUL, U+0085, the bidirectional
        overrides such as U+202E, zero-width characters such as U+200B, every
        Unicode ``Cc``/``Cf`` character, line separators and spaces other than
        the ASCII space) and, when the kind declares ``external_name_max``, no
        longer than that many UTF-8 bytes. Raises :class:`TerminalError`
        (reason ``InvalidExternalName``); the message quotes at most 64
        characters of the name.
        """
        problem = None
        if not isinstance(name, str) or not name:
            problem = "is empty"
        elif (bad := invisible_character(name)) is not None:
            problem = f"contains a control or invisible character (U+{ord(bad):04X})"
        elif self.external_name_max is not None and (
                len(name.encode("utf-8", "surrogatepass")) > self.external_name_max):
            problem = f"is longer than {self.external_name_max} bytes"
        if problem is not None:
            shown = repr(name[:64]) if isinstance(name, str) else type(name).__name__
            raise TerminalError(
                f"external name {shown} {problem}; set a valid {EXTERNAL_NAME} annotation, "
                f"then annotate {OPERATION}=reconcile", reason="InvalidExternalName")


def check_machine_events(kind: str, machine: Any) -> None:
    """Refuse a managed kind's machine that lacks an event the engine fires.

    The event choice (:func:`lifecycle.core.decide.choose_event`) fires each of
    :data:`Events.MANAGED <lifecycle.core.vocabulary.Events.MANAGED>`; a claim machine
    (``is_claim = True``) has a choice of its own and is not checked here.
    """
    if not (isinstance(machine, type) and issubclass(machine, LifecycleMachine)):
        raise MachineDefinitionError(
            f"kind {kind}: machine must be a LifecycleMachine subclass, not {machine!r}")
    if getattr(machine, "is_claim", False) is True:
        return
    declared = set(machine.table().events)
    missing = [event for event in Events.MANAGED if event not in declared]
    if missing:
        raise MachineDefinitionError(
            f"kind {kind}: machine {machine.__name__} declares no {', '.join(missing)} "
            f"event{'s' if len(missing) > 1 else ''}; a managed resource's machine declares "
            f"every event the engine fires: {', '.join(Events.MANAGED)}")


def check_references(obj: Mapping[str, Any]) -> None:
    """Refuse a malformed ``spec.providerConfigRef`` or ``spec.writeConnectionSecretToRef``.

    Each is absent or an object whose ``name`` (and, for the Secret,
    ``namespace``) is absent or a non-empty string. Raises
    :class:`TerminalError` (reason ``InvalidReference``) naming the field.
    """
    spec = obj.get("spec")
    if not is_mapping(spec):
        spec = {}
    for field, keys in (("providerConfigRef", ("name",)),
                        ("writeConnectionSecretToRef", ("name", "namespace"))):
        ref = spec.get(field)
        if ref is None:
            continue
        if not is_mapping(ref):
            raise TerminalError(f"spec.{field} must be an object, not {type(ref).__name__}",
                                reason="InvalidReference")
        for key in keys:
            value = ref.get(key)
            if value is not None and (not isinstance(value, str) or not value):
                raise TerminalError(f"spec.{field}.{key} must be a non-empty string",
                                    reason="InvalidReference")


def spec_keys(parameters: type) -> dict[str, str]:
    """Attribute name -> key in ``spec.forProvider`` for each init field of an attrs class.

    The key is the field's attrs ``alias`` when it has one, else its name.
    """
    return dict(_spec_keys(parameters)[0])


# An attrs class's fields are fixed when it is made: its keys never change.
@functools.lru_cache(maxsize=128)
def _spec_keys(parameters: type) -> tuple[Mapping[str, str], frozenset[str]]:
    """:func:`spec_keys` (shared: read-only) and the set of its keys."""
    known = {f.name: getattr(f, "alias", None) or f.name
             for f in attrs.fields(parameters) if f.init}
    return known, frozenset(known.values())


#: Unicode categories never part of a name: controls (NUL, U+0085), formats (U+200B,
#: U+202E, U+FEFF, ...), surrogates, private use, unassigned, line and paragraph separators.
INVISIBLE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
#: The invisible characters of ASCII: the C0 controls and DEL.
_ASCII_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def invisible_character(name: str) -> str | None:
    """The first character of ``name`` that is a control or invisible one, or None.

    Those of :data:`INVISIBLE_CATEGORIES`, and every space but the ASCII one
    (U+00A0, U+3000, ...): each makes a name that looks like another
    (``post\u200bgres``) or reads backwards.
    """
    if name.isascii():  # the common case: only C0 controls and DEL, found by a regex
        found = _ASCII_CONTROL.search(name)
        return found.group() if found else None
    for ch in name:
        category = unicodedata.category(ch)
        if category in INVISIBLE_CATEGORIES or (category == "Zs" and ch != " "):
            return ch
    return None


def connection_secret_ref(obj: Mapping[str, Any]) -> tuple[str, str]:
    """(namespace, name) of a managed resource's connection Secret.

    ``spec.writeConnectionSecretToRef`` names it; the namespace defaults to
    the object's, the name to ``<name>-connection``.
    """
    meta = obj["metadata"]
    spec = obj.get("spec")
    if not is_mapping(spec):
        spec = {}
    ref = spec.get("writeConnectionSecretToRef") or {}
    if not is_mapping(ref):
        ref = {}
    namespace = ref.get("namespace") or meta.get("namespace") or "default"
    return str(namespace), str(ref.get("name") or f"{meta['name']}-connection")


def _short(exc: Exception) -> str:
    text = str(exc.args[0]) if exc.args else type(exc).__name__
    return text.splitlines()[0][:200]


#: The keys of an attrs field's ``metadata`` that the CRD generator reads (see
#: :func:`spec_field`); the OpenAPI keys are spelled as in the schema.
SCHEMA_METADATA = frozenset({
    "description", "immutable", "validations", "minimum", "maximum", "exclusiveMinimum",
    "exclusiveMaximum", "multipleOf", "minLength", "maxLength", "pattern", "minItems",
    "maxItems", "format",
})


def spec_field(*, description: str | None = None, immutable: bool = False,
               minimum: float | None = None, maximum: float | None = None,
               min_length: int | None = None, max_length: int | None = None,
               pattern: str | None = None, min_items: int | None = None,
               max_items: int | None = None, validations: Sequence[Mapping[str, str]] = (),
               metadata: Mapping[str, Any] | None = None, **kwargs: Any) -> Any:
    """An ``attrs.field`` of a parameters class whose CRD schema says more than its type.

    ``kwargs`` go to ``attrs.field`` (``default``, ``alias``, ``validator``...).
    The rest is stored in the field's ``metadata`` (:data:`SCHEMA_METADATA`),
    which ``lifecycle crds`` writes into the field's schema so that the API
    server refuses a bad value with a 422 naming the field:

    * ``description``: plain text ``kubectl explain`` prints (a docstring
      under the field works too);
    * ``minimum``/``maximum`` (inclusive) for numbers, ``min_length``/
      ``max_length``/``pattern`` for strings, ``min_items``/``max_items`` for
      lists;
    * ``immutable``: a change after creation is refused (the rule
      ``self == oldSelf`` in ``x-kubernetes-validations``);
    * ``validations``: more CEL rules, each ``{"rule": ..., "message": ...}``.

    The same keys may be written into ``attrs.field(metadata={...})``
    directly, spelled as in OpenAPI (``minLength``). They constrain what the
    API server accepts, not the Python class: an object stored before the
    schema was tightened still reaches the client, which must refuse it.
    """
    schema: dict[str, Any] = dict(metadata or {})
    for key, value in (("description", description), ("minimum", minimum),
                       ("maximum", maximum), ("minLength", min_length),
                       ("maxLength", max_length), ("pattern", pattern),
                       ("minItems", min_items), ("maxItems", max_items)):
        if value is not None:
            schema[key] = value
    if immutable:
        schema["immutable"] = True
    if validations:
        schema["validations"] = [dict(rule) for rule in validations]
    return attrs.field(metadata=schema, **kwargs)
