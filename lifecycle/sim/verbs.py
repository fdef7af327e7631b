"""The verbs of the HTTP face: resolving resource URLs and carrying out writes.

:func:`resolve` turns a URL path into a :class:`Route` (type, namespace, name,
subresource). :class:`Verbs` carries out create (POST), replace (PUT), the
patch formats (PATCH, by ``Content-Type``) and delete (DELETE, one object or a
collection) against an :class:`~lifecycle.sim.apiserver.EmbeddedAPI`, with
``dryRun``, ``fieldValidation`` and the delete options of the request.
"""

from __future__ import annotations

from typing import Any

from lifecycle.core import objects
from lifecycle.kube.errors import (
    BadRequest,
    Conflict,
    Invalid,
    MethodNotAllowed,
    NotFound,
    UnsupportedMediaType,
)
from lifecycle.kube.resources import BUILTIN_TYPES, ResourceType
from lifecycle.kube.selectors import parse_label_selector
from lifecycle.sim import builtins, openapi, reviews
from lifecycle.sim.apiserver import EmbeddedAPI
from lifecycle.sim.crds import CRD
from lifecycle.sim.patches import diff_as_merge_patch, json_patch, strategic_merge
from lifecycle.sim.requests import Options, decode_body
from lifecycle.sim.sharing import SharedView
from lifecycle.sim.validation import check_meta_types

#: Kinds a real API server decodes into built-in types (defaults from the URL apply).
_TYPED = frozenset((*BUILTIN_TYPES, CRD))

__all__ = ["NOT_ALLOWED", "NOT_FOUND", "Route", "Verbs", "resolve", "selectors"]

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
NOT_ALLOWED = "the server does not allow this method on the requested resource"
NOT_FOUND = "the server could not find the requested resource"


class _PatchFailed(Invalid):
    """A JSON patch that does not apply: 422 with empty ``details``, as a real server says."""

    def to_status(self) -> dict[str, Any]:
        return {**super().to_status(), "details": {}}


class Route:
    """A parsed resource URL: type, namespace, name and subresource."""

    def __init__(self, rtype: ResourceType, namespace: str | None, name: str | None,
                 subresource: str | None) -> None:
        self.rtype = rtype
        self.namespace = namespace
        self.name = name
        self.subresource = subresource


def resolve(api: EmbeddedAPI, parts: list[str]) -> Route:
    """Resolve a resource path (already split) to a type, namespace, name, subresource."""
    if parts[:2] == ["api", "v1"]:
        api_version, rest = "v1", parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 3:
        api_version, rest = f"{parts[1]}/{parts[2]}", parts[3:]
    else:
        raise NotFound(NOT_FOUND)
    namespace: str | None = None
    # namespaces/NS/PLURAL... is a namespaced path, unless it is a namespace's subresource.
    if len(rest) >= 3 and rest[0] == "namespaces" and not (
        len(rest) == 3 and api_version == "v1" and rest[2] in ("status", "finalize")
    ):
        namespace, rest = rest[1], rest[2:]
    if not rest or len(rest) > 3:
        raise NotFound(NOT_FOUND)
    rtype = next((r for r in reviews.REVIEWS if (r.api_version, r.plural) == (
        api_version, rest[0]) and len(rest) == 1), None) or api.resource_type_by_plural(
        api_version, rest[0])
    if namespace is not None and not rtype.namespaced:
        raise NotFound(NOT_FOUND)
    name = rest[1] if len(rest) > 1 else None
    sub = rest[2] if len(rest) > 2 else None
    if sub is not None and (sub != "status" or not rtype.status_subresource):
        raise NotFound(NOT_FOUND)
    if rtype.namespaced and name is not None and namespace is None:
        raise NotFound(NOT_FOUND)
    return Route(rtype, namespace, name, sub)


def selectors(options: Options) -> dict[str, Any]:
    """The label and field selectors of a request as store keywords (400 if malformed)."""
    if options.label_selector:
        try:
            parse_label_selector(options.label_selector)
        except Invalid as exc:
            text = str(exc)
            prefix = "unable to parse requirement: "
            raise BadRequest(text if text.startswith(prefix) else prefix + text) from None
    found: dict[str, Any] = {}
    if options.label_selector:
        found["label_selector"] = options.label_selector
    if options.field_selector:
        found["field_selector"] = options.field_selector
    return found


class Verbs:
    """The writes of one request against ``api``; unknown-field warnings gather in
    :attr:`warnings` (``fieldValidation=Warn``)."""

    def __init__(self, api: EmbeddedAPI | SharedView) -> None:
        self.api = api
        self.warnings: list[str] = []

    def write(self, method: str, route: Route, body: Any, options: Options,
              content_type: str) -> tuple[int, Any]:
        """Carry out a POST, PUT, PATCH or DELETE; returns the HTTP status and the answer."""
        api, rtype = self.api, route.rtype
        dry: dict[str, Any] = {"dry_run": True} if options.dry_run else {}
        # the request's own fieldValidation is applied here; the API then checks nothing
        checked = {**dry, "field_validation": "Ignore"}
        if method == "POST":
            if route.name is not None:
                raise MethodNotAllowed(NOT_ALLOWED)
            obj = self._object(body, rtype, route)
            if rtype in reviews.REVIEWS:
                return 201, reviews.answer(rtype, obj)
            self._check_fields(obj, rtype, options, skip_status=rtype.status_subresource)
            return 201, api.create(obj, **checked)
        if rtype in reviews.REVIEWS:
            raise MethodNotAllowed(NOT_ALLOWED)
        if method == "DELETE":
            return 200, self._delete(route, options)
        if route.name is None:
            raise MethodNotAllowed(NOT_ALLOWED)
        if method == "PUT":
            obj = self._object(body, rtype, route)
            name = objects.metadata(obj).get("name")
            if name not in (None, "", route.name):
                raise BadRequest(f"the name of the object ({name}) does not match the name "
                                 f"on the URL ({route.name})")
            obj["metadata"]["name"] = route.name
            check_meta_types(rtype, obj)  # a body that does not decode is refused first
            if route.subresource == "status":
                api.get(rtype.api_version, rtype.kind, route.namespace, route.name)
                builtins.require_version(rtype, str(route.name),
                                         obj["metadata"].get("resourceVersion"))
                return 200, api.replace_status(obj, **dry)
            self._check_fields(obj, rtype, options, skip_status=rtype.status_subresource)
            return self._put(obj, route, checked)
        return 200, self._patch(route, body, options, content_type)

    def _put(self, obj: dict[str, Any], route: Route, dry: dict[str, Any]) -> tuple[int, Any]:
        """A PUT: an update (with a resourceVersion unless the kind allows none), or the
        create of a missing Lease or Event, as a real server's strategies allow."""
        api, rtype = self.api, route.rtype
        if rtype is not CRD:
            try:
                api.get(rtype.api_version, rtype.kind, route.namespace, str(route.name))
            except NotFound:
                if rtype not in builtins.CREATED_BY_PUT:
                    raise
                return 201, api.create(obj, **dry)
            builtins.require_version(rtype, str(route.name),
                                     obj["metadata"].get("resourceVersion"))
        return 200, api.replace(obj, **dry)

    def _object(self, body: Any, rtype: ResourceType, route: Route) -> dict[str, Any]:
        if body is None:
            raise BadRequest("the body of the request was empty")
        if not isinstance(body, dict):
            raise BadRequest(f"the body of the request must be a JSON object, not "
                             f"{type(body).__name__}")
        if rtype in _TYPED:
            # A built-in kind is decoded into its type: an apiVersion or kind the body
            # leaves out is taken from the URL. A custom resource must name both.
            body = {**body, "apiVersion": body.get("apiVersion") or rtype.api_version,
                    "kind": body.get("kind") or rtype.kind}
        for field in ("apiVersion", "kind"):
            if not isinstance(body.get(field), str) or not body[field]:
                raise BadRequest(f"Object '{'Kind' if field == 'kind' else 'apiVersion'}' "
                                 f"is missing in the request body")
        if body["apiVersion"] != rtype.api_version:
            raise BadRequest(f"the API version in the data ({body['apiVersion']}) does not "
                             f"match the expected API version ({rtype.api_version})")
        if body["kind"] != rtype.kind:
            raise BadRequest(f"the kind in the data ({body['kind']}) does not match the "
                             f"expected kind ({rtype.kind})")
        meta = body.get("metadata", {})
        if meta is None:
            meta = {}
        if not isinstance(meta, dict):
            raise BadRequest(f'{rtype.kind} in version "{rtype.version}" cannot be handled as '
                             f"a {rtype.kind}: metadata: expected an object, got "
                             f"{type(meta).__name__}")
        obj = dict(body)
        meta = dict(meta)
        if route.namespace is not None:
            if meta.get("namespace") not in (None, "", route.namespace):
                raise BadRequest("the namespace of the provided object does not match the "
                                 "namespace sent on the request")
            meta["namespace"] = route.namespace
        elif rtype.namespaced:
            raise MethodNotAllowed(NOT_ALLOWED)  # only list and watch span namespaces
        obj["metadata"] = meta
        return obj

    def _check_fields(self, obj: Any, rtype: ResourceType, options: Options, *,
                      skip_status: bool) -> None:
        """``fieldValidation``: Strict refuses unknown fields, Warn (the default) warns."""
        unknown = openapi.check_fields(obj, rtype, options.field_validation,
                                       skip_status=skip_status)
        self.warnings += [f'unknown field "{path}"' for path in unknown]

    # --------------------------------------------------------------- patch
    def patch_body(self, route: Route, raw: bytes, content_type: str) -> Any:
        builtin = openapi.is_builtin(route.rtype)
        accepted = [JSON_PATCH, MERGE_PATCH] + ([STRATEGIC_PATCH] if builtin else [])
        if content_type == APPLY_PATCH:
            raise UnsupportedMediaType(
                f"server-side apply ({APPLY_PATCH}) is not supported by this server; use "
                f"client-side apply - accepted media types include: {', '.join(accepted)}")
        if content_type not in accepted:
            raise UnsupportedMediaType(
                f"the body of the request was in an unknown format - accepted media types "
                f"include: {', '.join([*accepted, APPLY_PATCH])}")
        body = decode_body(raw, "application/json")
        if body is None:
            raise BadRequest("the body of the request was empty")
        return body

    def _patch(self, route: Route, body: Any, options: Options,
               content_type: str) -> dict[str, Any]:
        api, rtype = self.api, route.rtype
        name = str(route.name)  # routed here only with a name
        dry_run, subresource = options.dry_run, route.subresource or None
        skip_status = rtype.status_subresource and route.subresource is None
        if content_type == MERGE_PATCH:
            if not isinstance(body, dict):
                raise BadRequest("a merge patch must be a JSON object")
            self._check_fields(body, rtype, options, skip_status=skip_status)
            return api.patch(rtype.api_version, rtype.kind, route.namespace, name, body,
                             subresource=subresource, dry_run=dry_run,
                             field_validation="Ignore")
        if content_type == STRATEGIC_PATCH and not isinstance(body, dict):
            raise BadRequest("a strategic merge patch must be a JSON object")
        if content_type == JSON_PATCH and not isinstance(body, list):
            raise BadRequest("a JSON patch must be a list of operations")
        for attempt in range(5):
            current = api.get(rtype.api_version, rtype.kind, route.namespace, name)
            if content_type == JSON_PATCH:
                try:
                    result = json_patch(current, body)
                except Invalid:
                    raise _PatchFailed("the server rejected our request due to an error in "
                                       "our request") from None
            else:
                result = strategic_merge(current, body)
            if not isinstance(result, dict) or not isinstance(result.get("metadata"), dict):
                raise Invalid(f'{rtype.kind} "{route.name}" is invalid: metadata: Invalid '
                              f"value: the patched object's metadata must be an object",
                              causes=[{"reason": "FieldValueInvalid", "field": "metadata",
                                       "message": "Invalid value: must be an object"}],
                              name=route.name or "", group=rtype.group, kind=rtype.kind)
            self._check_fields(result, rtype, options, skip_status=skip_status)
            version = current["metadata"].get("resourceVersion")
            asked = result["metadata"].get("resourceVersion")
            patch = diff_as_merge_patch(current, result)
            patch.setdefault("metadata", {})["resourceVersion"] = asked or version
            try:
                return api.patch(rtype.api_version, rtype.kind, route.namespace, name,
                                 patch, subresource=subresource, dry_run=dry_run,
                                 field_validation="Ignore")
            except Conflict:
                # the object changed between the read and the write: patch it again
                if asked != version or attempt == 4:
                    raise
        raise AssertionError("unreachable")

    # -------------------------------------------------------------- delete
    def _delete(self, route: Route, options: Options) -> Any:
        api, rtype = self.api, route.rtype
        extra: dict[str, Any] = {}
        if options.dry_run:
            extra["dry_run"] = True
        if options.propagation_policy is not None:
            extra["propagation_policy"] = options.propagation_policy
        if route.subresource is not None:
            raise MethodNotAllowed(NOT_ALLOWED)
        if route.name is None:
            if rtype.kind == "Namespace" and rtype.api_version == "v1":
                raise MethodNotAllowed(NOT_ALLOWED)
            items, version = self._select(route, options)
            for item in items:
                meta = item["metadata"]
                try:
                    api.delete(rtype.api_version, rtype.kind, meta.get("namespace"),
                               meta["name"], **extra)
                except NotFound:
                    continue
            return {"apiVersion": rtype.api_version, "kind": f"{rtype.kind}List",
                    "metadata": {"resourceVersion": version},
                    "items": builtins.list_items(rtype, items)}
        pre = options.preconditions
        uid = api.get(rtype.api_version, rtype.kind, route.namespace, route.name)[
            "metadata"].get("uid")
        result = api.delete(rtype.api_version, rtype.kind, route.namespace, route.name,
                            resource_version=pre.get("resourceVersion"), uid=pre.get("uid"),
                            **extra)
        if result is not None:
            return result
        details = {"name": route.name, "group": rtype.group, "kind": rtype.plural, "uid": uid}
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                "details": {k: v for k, v in details.items() if v}}

    # ---------------------------------------------------------------- reads
    def _select(self, route: Route, options: Options,
                ) -> tuple[list[dict[str, Any]], str]:
        rtype = route.rtype
        items, version = self.api.list(rtype.api_version, rtype.kind, route.namespace,
                                            **selectors(options))
        return items, version
