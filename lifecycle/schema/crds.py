"""CustomResourceDefinitions generated from kinds, and a checker of structural schemas.

:func:`crd` builds an ``apiextensions.k8s.io/v1`` CRD for a :class:`~lifecycle.core.kind.Kind`:
the spec schema comes from the kind's attrs parameters class
(``spec.forProvider``) plus the engine's common spec fields; the status
schema declares every status field the engine writes, with ``state``
restricted to the machine's states. It has the status subresource, printer
columns Ready, Synced, State, External-Name and Age (Phase in wide output),
the kind's short names, the ``managed`` category and the kind's scope. Every
field the engine adds is described, so ``kubectl explain`` describes them all.

:func:`provider_config_crd` builds the cluster-scoped ProviderConfig CRD of a
ProviderConfig kind from the spec classes its kinds declare
(``Kind.provider_config_spec``, see :mod:`lifecycle.core.providerconfig`), as
:func:`crd` does from parameters; :func:`crds` emits one per ProviderConfig kind
the given kinds name, and only those.

Two other shapes of object get CRDs of their own (see :mod:`lifecycle.core.claims`):

* a **resource claim** kind, a :class:`Kind` whose machine class sets
  ``is_claim = True``: namespaced; its spec holds the parameters class's
  fields at the top level (named by their attrs aliases, as the claim reads
  them) beside ``classRef``, ``classSelector``, ``resourceRef`` and
  ``writeConnectionSecretToRef``; its status is what
  :func:`~lifecycle.core.claims.settle_claim` writes (``bindingPhase``,
  ``resourceRef``...); printer columns Ready, Synced, Binding, Class,
  Resource and Age (State in wide output); the ``claim`` category;
* a **resource class** kind, a :class:`~lifecycle.core.claims.ClassKind`:
  cluster-scoped, no status, its template in the top-level ``specTemplate``;
* a **parent** kind, a :class:`~lifecycle.core.parents.ParentKind`: every
  declared version served (the newest stored), spec and status kept as written.

:func:`check_crd` verifies a CRD document against the API server's rules for
``apiextensions.k8s.io/v1``, including the structural-schema rules, and returns
the list of problems (empty when valid).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lifecycle.core.claims import ClassKind
from lifecycle.core.kind import PROVIDER_CONFIG_API, PROVIDER_CONFIG_KIND, Kind
from lifecycle.core.parents import ParentKind
from lifecycle.core.providerconfig import ProviderConfigSpec
from lifecycle.core.vocabulary import ConditionTypes
from lifecycle.schema.openapi import SchemaError, plain_text, schema_for_type
from lifecycle.schema.structural import check_crd, check_structural

__all__ = ["SchemaError", "check_crd", "check_structural", "claim_crd", "class_crd", "crd",
           "crds", "default_config_fits", "is_claim", "kind_description", "parent_crd",
           "provider_config_apis", "provider_config_crd", "provider_config_spec_schema",
           "provider_config_specs", "schema_for_type"]

def _meta() -> dict[str, Any]:
    """``apiVersion`` and ``kind``, described as every object's are, and ``metadata`` (new
    dicts each time: a caller may change the document it gets)."""
    return {
        "apiVersion": {"type": "string", "description": "The versioned schema of this "
                                                        "representation of the object."},
        "kind": {"type": "string",
                 "description": "The REST resource this object represents."},
        # The API server refuses anything but type (and name/generateName) on the root's
        # metadata: kubectl explain describes it from ObjectMeta.
        "metadata": {"type": "object"},
    }


def _text(description: str) -> dict[str, Any]:
    return {"type": "string", "description": description}


def _time(description: str) -> dict[str, Any]:
    return {"type": "string", "format": "date-time", "description": description}


def _ref(description: str, namespaced: bool = False) -> dict[str, Any]:
    props = {"name": _text("The object's name.")}
    if namespaced:
        props["namespace"] = _text("The object's namespace.")
    return {"type": "object", "description": description, "properties": props,
            "required": ["name"]}


def _condition_schema() -> dict[str, Any]:
    return {"type": "object", "required": ["type", "status"],
            "description": "One aspect of the object's state (Ready, Synced...).",
            "properties": {
        "type": _text("What the condition is about: Ready, Synced..."),
        "status": {"type": "string", "enum": ["True", "False", "Unknown"],
                   "description": "Whether the condition holds."},
        "reason": _text("Why, as one CamelCase word."),
        "message": _text("Why, in words."),
        "observedGeneration": {"type": "integer", "format": "int64",
                               "description": "The spec generation the condition is about."},
        "lastTransitionTime": _time("When the status last changed."),
    }}


def status_schema(kind: Kind) -> dict[str, Any]:
    """The schema of the status the engine writes for ``kind``."""
    states = list(kind.machine.table().states)
    return {"type": "object", "description": "Observed state, written by the operator.",
            "properties": {
                "state": {"type": "string", "enum": states,
                          "description": "Lifecycle machine state."},
                "observedGeneration": {"type": "integer", "format": "int64",
                                       "description": "The spec generation last acted on."},
                "phase": {"type": "string", "enum": ["Ready", "Progressing", "Terminating"],
                          "description": "The state in one word: Ready, Progressing or "
                                         "Terminating."},
                "stateSince": _time("When the object entered its state."),
                "conditions": {"type": "array", "items": _condition_schema(),
                               "description": "Ready (the external resource is usable) and "
                                              "Synced (the last reconcile succeeded), with "
                                              "their reasons.",
                               "x-kubernetes-list-type": "map",
                               "x-kubernetes-list-map-keys": ["type"]},
                "history": {"type": "array", "description": "The latest state transitions.",
                            "items": {"type": "object",
                                      "description": "One state transition.", "properties": {
                    "from": _text("The state left."), "to": _text("The state entered."),
                    "event": _text("The machine event that moved it."),
                    "reason": _text("Why, as one CamelCase word."),
                    "time": _time("When.")}}},
                "failure": {"type": "object", "description": "The last failed operation.",
                            "properties": {
                                "operation": _text("The operation: create, update, delete, "
                                                   "observe..."),
                                "reason": _text("Why it failed, as one CamelCase word."),
                                "severity": _text("Whether it is retried (transient) or "
                                                  "waits for a spec change (terminal)."),
                                "generation": {"type": "integer", "format": "int64",
                                               "description": "The spec generation it "
                                                              "failed at."}}},
                "atProvider": {"type": "object",
                               "description": "What the provider reports about the resource.",
                               "x-kubernetes-preserve-unknown-fields": True},
                "externalName": {"type": "string",
                                 "description": "The name of the external resource."},
                "operationSince": {"type": "string", "format": "date-time",
                                   "description": "When the operation under way began."},
            }}


def empty_default(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` defaulting to ``{}`` when left out, unless it has required properties or
    CEL rules: a real API server validates a default against its schema and its rules, so
    ``{}`` with required fields, or with a rule ``{}`` breaks (``has(self.database) ||
    has(self.databaseRef) ...``), makes the whole CRD invalid (422)."""
    if schema.get("required") or schema.get("x-kubernetes-validations"):
        return schema
    return {**schema, "default": {}}


def spec_schema(kind: Kind) -> dict[str, Any]:
    """The schema of ``spec``: the parameters under ``forProvider`` and the engine's fields."""
    parameters = schema_for_type(kind.parameters, where="spec.forProvider")
    parameters.setdefault("description", f"The parameters of the external resource a "
                                         f"{kind.kind} manages.")
    return {"type": "object", "description": "The desired state of the resource.",
            "properties": {
        "forProvider": empty_default(parameters),
        "providerConfigRef": {**_ref("The cluster-scoped ProviderConfig this object uses: "
                                     "the server or account, and its credentials "
                                     "(default: default)."),
                              "default": {"name": "default"}},
        "writeConnectionSecretToRef": _ref("The Secret the connection details are written "
                                           "to (in the object's namespace).",
                                           namespaced=True),
        "deletionPolicy": {"type": "string", "enum": ["Delete", "Orphan"],
                           "default": "Delete",
                           "description": "What deleting the object does to the external "
                                          "resource: Delete deletes it, Orphan leaves it."},
        "claimRef": {"type": "object", "description": "The claim this resource is bound to.",
                     "properties": {k: _text(f"The claim's {k}.") for k in (
                         "apiVersion", "kind", "namespace", "name", "uid")}},
        "reclaimPolicy": {"type": "string", "enum": ["Delete", "Retain"],
                          "description": "What releasing the bound claim does to it."},
    }}


_COLUMNS: list[dict[str, Any]] = [
    {"name": ConditionTypes.READY, "type": "string",
     "jsonPath": f".status.conditions[?(@.type=='{ConditionTypes.READY}')].status"},
    {"name": ConditionTypes.SYNCED, "type": "string",
     "jsonPath": f".status.conditions[?(@.type=='{ConditionTypes.SYNCED}')].status"},
    {"name": "State", "type": "string", "jsonPath": ".status.state"},
    {"name": "External-Name", "type": "string", "jsonPath": ".status.externalName"},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    {"name": "Phase", "type": "string", "jsonPath": ".status.phase", "priority": 1},
]


def _definition(group: str, version: str, kind: str, plural: str, namespaced: bool,
                schema: dict[str, Any], *, short_names: Sequence[str] = (),
                columns: list[dict[str, Any]] | None = None,
                categories: Sequence[str] = ("managed", "lifecycle"),
                status: bool | None = None) -> dict[str, Any]:
    """A CRD document; ``status`` (default: when there are columns) adds the subresource."""
    names: dict[str, Any] = {"kind": kind, "listKind": f"{kind}List", "plural": plural,
                             "singular": kind.lower(), "categories": list(categories)}
    if short_names:
        names["shortNames"] = list(short_names)
    served: dict[str, Any] = {"name": version, "served": True, "storage": True,
                              "schema": {"openAPIV3Schema": schema}}
    if columns is not None if status is None else status:
        served["subresources"] = {"status": {}}
    if columns is not None:
        served["additionalPrinterColumns"] = columns
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.{group}"},
            "spec": {"group": group, "names": names,
                     "scope": "Namespaced" if namespaced else "Cluster",
                     "versions": [served]}}


def crd(kind: Kind | ClassKind | ParentKind) -> dict[str, Any]:
    """The CustomResourceDefinition of a managed, claim, class or parent kind."""
    if isinstance(kind, ClassKind):
        return class_crd(kind)
    if isinstance(kind, ParentKind):
        return parent_crd(kind)
    if is_claim(kind):
        return claim_crd(kind)
    schema = {"type": "object", "description": kind_description(kind),
              "properties": {**_meta(),
                             "spec": spec_schema(kind), "status": status_schema(kind)},
              "required": ["spec"]}
    return _definition(kind.group, kind.version, kind.kind, kind.plural, kind.namespaced,
                       schema, short_names=kind.short_names, columns=_COLUMNS)


def kind_description(kind: Kind) -> str:
    """What an object of ``kind`` manages, as its CRD says it: the kind's ``description``, or
    a sentence naming the kind (never the machine's docstring, which is about the engine)."""
    if kind.description:
        return plain_text(kind.description)
    if is_claim(kind):
        return (f"{kind.kind}: a request for a managed resource, provisioned from a class "
                f"or named in spec.resourceRef, and bound to it.")
    return (f"{kind.kind}: an external resource managed through this object; spec.forProvider "
            f"says what it should be, status reports what it is.")


def provider_config_spec_schema(specs: Sequence[type | None] = ()) -> dict[str, Any]:
    """The schema of a ProviderConfig's ``spec`` for the spec classes its kinds declare.

    One class: its schema, whole (an unknown field is refused). Several (kinds of
    different providers sharing one ProviderConfig kind): every field of each, each
    required only where all require it, a field two classes declare differently is a
    :class:`SchemaError`, and the rules over a class's several fields are left out (the
    provider checks them when it reads the config). A kind that declares none (None)
    adds the engine's credentials block and keeps every other field as written.
    """
    declared = list(dict.fromkeys(s for s in specs if s is not None))
    free = not declared or None in specs
    if free:
        declared.append(ProviderConfigSpec)
    schemas = [schema_for_type(cls, where="spec") for cls in declared]
    if len(schemas) == 1:
        spec = schemas[0]
    else:
        properties: dict[str, Any] = {}
        for cls, one in zip(declared, schemas, strict=True):
            for name, node in one["properties"].items():
                if properties.setdefault(name, node) != node:
                    raise SchemaError(f"ProviderConfig spec.{name} is declared differently by "
                                      f"{cls.__qualname__} and another kind's spec class")
        required = set.intersection(*(set(one.get("required") or ()) for one in schemas))
        spec = {"type": "object", "properties": properties}
        if required:
            spec["required"] = [n for n in properties if n in required]
    if len(declared) != 1 or free:
        spec["description"] = ("How the operator reaches the provider and with which "
                               "credentials.")
    if free:
        spec["x-kubernetes-preserve-unknown-fields"] = True
        spec.pop("x-kubernetes-validations", None)
    return spec


def provider_config_crd(api_version: str = PROVIDER_CONFIG_API,
                        specs: Sequence[type | None] = ()) -> dict[str, Any]:
    """The CRD of a cluster-scoped ProviderConfig of ``api_version`` (the engine's by default),
    its spec generated from the ``specs`` classes its kinds declare
    (:func:`provider_config_spec_schema`)."""
    group, _, version = api_version.partition("/")
    schema = {"type": "object", "description": (
        "How the operator reaches a provider, with which credentials, and what the objects "
        "using it may ask for. Cluster-scoped: written by the platform administrator; a "
        "namespaced object names it in spec.providerConfigRef."), "properties": {
        **_meta(),
        "spec": provider_config_spec_schema(specs),
        "status": {"type": "object", "description": "Who uses this ProviderConfig and "
                                                      "whether it is valid, written by the "
                                                      "operator.", "properties": {
            "users": {"type": "integer", "minimum": 0,
                      "description": "How many objects use this ProviderConfig; it is not "
                                     "deleted while any does."},
            "usedBy": {"type": "array", "items": {"type": "string"},
                       "description": "The first users, as Kind namespace/name."},
            "conditions": {"type": "array", "items": _condition_schema(),
                           "x-kubernetes-list-type": "map",
                           "x-kubernetes-list-map-keys": ["type"],
                           "description": "Valid: whether the credentials can be read and "
                                          "the spec suits the providers using it (the reason "
                                          "and message say what is wrong)."}}}},
        "required": ["spec"]}
    columns = [{"name": n, "type": t, "jsonPath": p} for n, t, p in (
        ("Valid", "string", f".status.conditions[?(@.type=='{ConditionTypes.VALID}')].status"),
        ("Users", "integer", ".status.users"), ("Age", "date", ".metadata.creationTimestamp"))]
    return _definition(group, version, PROVIDER_CONFIG_KIND, "providerconfigs", False, schema,
                       categories=("lifecycle",), status=True, columns=columns)


def crds(kinds: Sequence[Kind | ClassKind | ParentKind]) -> list[dict[str, Any]]:
    """The ProviderConfig CRDs the managed kinds name, followed by one CRD per kind
    (managed, claim, class, parent)."""
    specs = provider_config_specs(kinds)
    return [*(provider_config_crd(api, specs[api]) for api in provider_config_apis(kinds)),
            *(crd(kind) for kind in kinds)]


def provider_config_apis(kinds: Sequence[Any]) -> list[str]:
    """The ProviderConfig apiVersions the managed kinds among ``kinds`` name, each once
    (the engine's own when none does)."""
    found = [k.provider_config_api for k in kinds if isinstance(k, Kind) and not is_claim(k)]
    return list(dict.fromkeys(found)) or [PROVIDER_CONFIG_API]


def provider_config_specs(kinds: Sequence[Any]) -> dict[str, list[type | None]]:
    """The ProviderConfig spec classes the managed kinds among ``kinds`` declare, by
    apiVersion (None for a kind declaring none)."""
    found: dict[str, list[type | None]] = {api: [] for api in provider_config_apis(kinds)}
    for kind in kinds:
        if isinstance(kind, Kind) and not is_claim(kind):
            found[kind.provider_config_api].append(kind.provider_config_spec)
    return {api: specs or [None] for api, specs in found.items()}


def default_config_fits(kinds: Sequence[Any], api_version: str) -> bool:
    """Whether a ProviderConfig holding nothing but ``credentials.secretRef`` is valid for
    the kinds naming ``api_version`` (a local cluster seeds such a ``default`` only then:
    a PostgreSQL config needs a host nobody can guess)."""
    spec = provider_config_spec_schema(provider_config_specs(kinds).get(api_version, [None]))
    return set(spec.get("required") or ()) <= {"credentials"}


def parent_crd(kind: ParentKind) -> dict[str, Any]:
    """A parent kind's CRD (no conversion webhook: the reconciler converts in memory)."""
    keep = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    schema = {"type": "object",
              "description": f"{kind.kind}: a parent object whose children the operator "
                             f"makes and keeps as its spec says.",
              "properties": {**_meta(),
                             "spec": {**keep, "description": "The desired state, as its "
                                                             "version declares it."},
                             "status": {**keep, "description": "Observed state, written by "
                                                               "the operator."}}}
    doc = _definition(kind.group, kind.versions[-1].name, kind.kind, kind.plural,
                      kind.namespaced, schema, columns=_COLUMNS[:1] + _COLUMNS[4:5],
                      categories=("lifecycle",))
    doc["spec"]["versions"] = [{**doc["spec"]["versions"][0], "name": v.name,
                                "storage": v is kind.versions[-1]} for v in kind.versions]
    return doc


# ----------------------------------------------------------- claims, classes
def is_claim(kind: Any) -> bool:
    """Whether ``kind`` is a resource claim kind: a Kind whose machine sets ``is_claim``."""
    return isinstance(kind, Kind) and getattr(kind.machine, "is_claim", False) is True


def _label_selector() -> dict[str, Any]:
    """A label selector; the claim reconciler honours ``matchLabels`` and refuses the rest.

    ``matchExpressions`` is declared so that a claim using it keeps it (and is
    told it is not supported) instead of losing it to pruning, which would
    widen the selector to every class.
    """
    requirement = {"type": "object", "required": ["key", "operator"], "properties": {
        "key": _text("The label's key."),
        "operator": _text("In, NotIn, Exists or DoesNotExist."),
        "values": {"type": "array", "items": {"type": "string"},
                   "description": "The values the operator compares with."}},
        "description": "One requirement on a label."}
    return {"type": "object",
            "description": "Chooses a class by its labels (matchLabels only); the first "
                           "matching class by name is used.",
            "properties": {
                "matchLabels": {"type": "object", "additionalProperties": {"type": "string"},
                                "description": "Labels a class must carry, each with this "
                                               "value."},
                "matchExpressions": {"type": "array", "items": requirement,
                                     "description": "Not supported: a claim using it is "
                                                    "refused."}},
            "x-kubernetes-map-type": "atomic"}


def claim_spec_schema(kind: Kind) -> dict[str, Any]:
    """The spec of a claim: its portable parameters and the references the reconciler reads."""
    portable = schema_for_type(kind.parameters, where="spec")
    properties: dict[str, Any] = dict(portable.get("properties") or {})
    taken = sorted(set(properties) & {"classRef", "classSelector", "resourceRef",
                                      "writeConnectionSecretToRef"})
    if taken:
        raise TypeError(f"{kind.kind} parameters use reserved claim field(s) {taken}")
    properties.update({
        "classRef": _ref("The class to provision from (set when scheduled or "
                              "defaulted)."),
        "classSelector": _label_selector(),
        "resourceRef": _ref("The managed resource bound to this claim (set when "
                            "provisioned).", namespaced=True),
        "writeConnectionSecretToRef": _ref(
            "The Secret, in the claim's namespace, receiving the connection details "
            "(default: <claim>-connection)."),
    })
    schema: dict[str, Any] = {"type": "object", "properties": properties,
                              "description": "The resource asked for: its portable "
                                             "parameters, and the class or resource to bind."}
    if portable.get("required"):
        schema["required"] = list(portable["required"])
    return schema


def claim_status_schema(kind: Kind) -> dict[str, Any]:
    """The status the claim reconciler writes (:func:`~lifecycle.core.claims.settle_claim`)."""
    states = kind.machine.table().states
    common = status_schema(kind)["properties"]
    return {"type": "object", "description": "Observed state, written by the operator.",
            "properties": {
                **{key: common[key] for key in ("state", "observedGeneration", "phase",
                                                "stateSince", "conditions", "history")},
                "bindingPhase": {"type": "string",
                                 "enum": sorted({spec.name for spec in states.values()}),
                                 "description": "The display name of the claim's state."},
                "resourceRef": _ref("The managed resource the claim is binding or bound to.",
                                    namespaced=True),
            }}


_CLAIM_COLUMNS: list[dict[str, Any]] = [
    *_COLUMNS[:2],
    {"name": "Binding", "type": "string", "jsonPath": ".status.bindingPhase"},
    {"name": "Class", "type": "string", "jsonPath": ".spec.classRef.name"},
    {"name": "Resource", "type": "string", "jsonPath": ".spec.resourceRef.name"},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    {"name": "State", "type": "string", "jsonPath": ".status.state", "priority": 1},
]


def claim_crd(kind: Kind) -> dict[str, Any]:
    """The CustomResourceDefinition of a resource claim kind (always namespaced)."""
    schema = {"type": "object", "description": kind_description(kind),
              "properties": {**_meta(),
                             "spec": empty_default(claim_spec_schema(kind)),
                             "status": claim_status_schema(kind)}}
    return _definition(kind.group, kind.version, kind.kind, kind.plural, True, schema,
                       short_names=kind.short_names, columns=_CLAIM_COLUMNS,
                       categories=("claim", "lifecycle"))


def class_template_schema() -> dict[str, Any]:
    """``specTemplate`` of a class, as :class:`~lifecycle.core.claims.ResourceClass` reads it.

    ``forProvider`` keeps unknown fields: it is a partial parameters object of
    the managed kind, checked against that kind when a resource is provisioned
    (a mistake is reported on the claims as ``InvalidClass``, not pruned away).
    """
    return {"type": "object",
            "description": "The template of the managed resources provisioned from the class.",
            "properties": {
                "forProvider": {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                                "description": "Parameters of the managed resource; a claim's "
                                               "portable fields override them."},
                "providerConfigRef": _ref("The ProviderConfig of provisioned resources "
                                          "(default: default)."),
                "reclaimPolicy": {"type": "string", "enum": ["Delete", "Retain"],
                                  "default": "Delete",
                                  "description": "What deleting the claim does to its "
                                                 "resource."},
                "resourceNamespace": {"type": "string", "minLength": 1,
                                      "description": "Where provisioned resources and their "
                                                     "Secrets live (default: lifecycle-system)."},
                "deletionPolicy": {"type": "string", "enum": ["Delete", "Orphan"],
                                   "description": "The provisioned resources' deletionPolicy."},
            }}


def cross_namespace_schema() -> dict[str, Any]:
    """A class's ``crossNamespaceBinding``: who may bind resources of other namespaces."""
    names = {"type": "array", "items": {"type": "string", "minLength": 1}}
    return {"type": "object",
            "description": "Which claim namespaces may bind managed resources of which other "
                           "namespaces (spec.resourceRef). Without it, a claim binds only "
                           "resources of its own namespace or those it provisioned.",
            "properties": {
                "resourceNamespaces": {**names, "description": "Namespaces whose resources "
                                       "may be bound (default: specTemplate.resourceNamespace)."},
                "claimNamespaces": {**names, "description": "Claim namespaces allowed."},
                "claimNamespaceSelector": {
                    "type": "object",
                    "description": "Claim namespaces allowed by their labels ({} selects all).",
                    "properties": {"matchLabels": {
                        "type": "object", "additionalProperties": {"type": "string"},
                        "description": "Labels a claim's namespace must carry."}}},
            }}


_CLASS_COLUMNS: list[dict[str, Any]] = [
    {"name": "Reclaim-Policy", "type": "string", "jsonPath": ".specTemplate.reclaimPolicy"},
    {"name": "Resource-Namespace", "type": "string",
     "jsonPath": ".specTemplate.resourceNamespace"},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]


def class_crd(kind: ClassKind) -> dict[str, Any]:
    """The CustomResourceDefinition of a resource class kind (cluster-scoped, no status).

    A class keeps its template at the top level (``specTemplate``), beside
    ``metadata``: there is no ``spec`` and no ``status``.
    """
    schema = {"type": "object",
              "description": f"A template for resources provisioned for claims ({kind.kind}).",
              "properties": {**_meta(),
                             "specTemplate": empty_default(class_template_schema()),
                             "crossNamespaceBinding": cross_namespace_schema()}}
    return _definition(kind.group, kind.version, kind.kind, kind.plural, False, schema,
                       columns=_CLASS_COLUMNS, categories=("class", "lifecycle"),
                       status=False)
