"""The patch formats of the HTTP face: JSON patch, JSON merge patch and strategic merge patch.

:func:`json_patch` applies RFC 6902 operations; :func:`strategic_merge` applies a
strategic merge patch to a built-in kind with the list-merge rules of the
fields the engine and kubectl touch (``metadata.finalizers`` merges as a set,
``metadata.ownerReferences`` merges by ``uid``, every other list is replaced),
and the directives ``$patch`` (``replace``, ``delete``, ``merge``),
``$retainKeys``, ``$setElementOrder/<list>`` and ``$deleteFromPrimitiveList/<list>``.
:func:`diff_as_merge_patch` turns a patched document back into the merge patch the
store applies.
"""

from __future__ import annotations

from typing import Any

from lifecycle.kube.errors import BadRequest, Invalid
from lifecycle.kube.objects import clone

__all__ = ["diff_as_merge_patch", "json_patch", "strategic_merge"]


# ---------------------------------------------------------------------- JSON patch


def json_patch(target: Any, operations: Any) -> Any:
    """Apply a JSON patch (RFC 6902: add, remove, replace, test, copy, move) to a copy.

    Raises :class:`~lifecycle.kube.errors.Invalid` for a malformed patch or a
    failed ``test``.
    """
    if not isinstance(operations, list):
        raise Invalid("a JSON patch must be a list of operations")
    doc = clone(target)
    for op in operations:
        if not isinstance(op, dict) or "op" not in op or not isinstance(op.get("path"), str):
            raise Invalid(f"invalid JSON patch operation {op!r}")
        kind, path = op["op"], op["path"]
        value: Any = None
        if kind in ("add", "replace", "test"):
            if "value" not in op:
                raise Invalid(f"JSON patch {kind} at {path!r} needs a value")
            value = clone(op["value"])
        if kind in ("copy", "move"):
            source = op.get("from")
            if not isinstance(source, str):
                raise Invalid(f"JSON patch {kind} at {path!r} needs a from path")
            value = clone(_pointer_get(doc, source))
            if kind == "move":
                doc = _pointer_remove(doc, source)
            kind = "add"
        if kind == "add":
            doc = _pointer_set(doc, path, value, insert=True)
        elif kind == "replace":
            parent, _ = _parent(doc, path)
            if not isinstance(parent, dict):  # a missing key of an object is set, as the
                _pointer_get(doc, path)       # API server's json-patch library does
            doc = _pointer_set(doc, path, value, insert=False)
        elif kind == "remove":
            doc = _pointer_remove(doc, path)
        elif kind == "test":
            if _pointer_get(doc, path) != value:
                raise Invalid(f"testing value {path} failed: test failed")
        else:
            raise Invalid(f"Unexpected kind: {kind}")
    return doc


def _tokens(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise Invalid(f"invalid JSON pointer {path!r}")
    return [t.replace("~1", "/").replace("~0", "~") for t in path[1:].split("/")]


def _step(node: Any, token: str, path: str) -> Any:
    if isinstance(node, dict) and token in node:
        return node[token]
    if isinstance(node, list) and token.isdigit() and int(token) < len(node):
        return node[int(token)]
    raise Invalid(f'doc is missing path: "{path}": missing value')


def _pointer_get(doc: Any, path: str) -> Any:
    node = doc
    for token in _tokens(path):
        node = _step(node, token, path)
    return node


def _parent(doc: Any, path: str) -> tuple[Any, str]:
    tokens = _tokens(path)
    if not tokens:
        raise Invalid("JSON patch cannot address the whole document here")
    node = doc
    for token in tokens[:-1]:
        node = _step(node, token, path)
    return node, tokens[-1]


def _pointer_set(doc: Any, path: str, value: Any, *, insert: bool) -> Any:
    if path == "":
        return value
    parent, last = _parent(doc, path)
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        if last == "-" and insert:
            parent.append(value)
        elif last.isdigit() and int(last) <= len(parent) - (0 if insert else 1):
            if insert:
                parent.insert(int(last), value)
            else:
                parent[int(last)] = value
        else:
            raise Invalid(f"Unable to access invalid index: {last}")
    else:
        raise Invalid(f'doc is missing path: "{path}": missing value')
    return doc


def _pointer_remove(doc: Any, path: str) -> Any:
    parent, last = _parent(doc, path)
    _step(parent, last, path)
    if isinstance(parent, dict):
        del parent[last]
    else:
        del parent[int(last)]
    return doc


# ---------------------------------------------------------------- merge patch diff


def diff_as_merge_patch(before: Any, after: Any) -> Any:
    """The JSON merge patch that turns ``before`` into ``after``."""
    if not isinstance(before, dict) or not isinstance(after, dict):
        return clone(after)
    patch: dict[str, Any] = {}
    for key in before.keys() - after.keys():
        patch[key] = None
    for key, value in after.items():
        if key not in before:
            patch[key] = clone(value)
        elif before[key] != value:
            if isinstance(value, dict) and not value and isinstance(before[key], dict):
                patch[key] = {k: None for k in before[key]}
            else:
                patch[key] = diff_as_merge_patch(before[key], value)
    return patch


# ---------------------------------------------------------- strategic merge patch

#: List fields that merge instead of being replaced: path -> merge key (``None``: a
#: list of primitives merged as a set). Every other list is replaced atomically,
#: as for the fields of Secret, ConfigMap, Event, Namespace and Lease.
MERGE_LISTS: dict[tuple[str, ...], str | None] = {
    ("metadata", "finalizers"): None,
    ("metadata", "ownerReferences"): "uid",
}

_ORDER = "$setElementOrder/"
_DELETE_PRIMITIVE = "$deleteFromPrimitiveList/"


def strategic_merge(target: Any, patch: Any) -> Any:
    """Apply a strategic merge patch to a copy of ``target`` (a built-in kind's object).

    Raises :class:`~lifecycle.kube.errors.BadRequest` for a malformed patch.
    """
    if not isinstance(patch, dict):
        raise BadRequest("a strategic merge patch must be a JSON object")
    result = _merge_map(target if isinstance(target, dict) else {}, patch, ())
    return {} if result is None else result


def _merge_map(original: dict[str, Any], patch: dict[str, Any],
               path: tuple[str, ...]) -> dict[str, Any] | None:
    """Merge ``patch`` into ``original``; ``None`` when the map itself is deleted."""
    directive = patch.get("$patch")
    if directive is not None:
        if directive == "delete":
            return None
        if directive == "replace":
            return {k: clone(v) for k, v in patch.items() if not k.startswith("$")}
        if directive != "merge":
            raise BadRequest(f"unknown patch type: {directive!r} in map")
    result = dict(original)
    retain = patch.get("$retainKeys")
    if retain is not None and not (isinstance(retain, list)
                                   and all(isinstance(k, str) for k in retain)):
        raise BadRequest("$retainKeys must be a list of field names")
    orders: dict[str, Any] = {}
    deletions: dict[str, Any] = {}
    for key, value in patch.items():
        if key in ("$patch", "$retainKeys"):
            continue
        if key.startswith(_ORDER):
            orders[key[len(_ORDER):]] = value
            continue
        if key.startswith(_DELETE_PRIMITIVE):
            deletions[key[len(_DELETE_PRIMITIVE):]] = value
            continue
        if key.startswith("$"):
            raise BadRequest(f"unknown strategic merge patch directive {key!r}")
        sub = (*path, key)
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict):
            current = result.get(key)
            merged = _merge_map(current if isinstance(current, dict) else {}, value, sub)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
        elif isinstance(value, list) and sub in MERGE_LISTS and isinstance(
                result.get(key), list) and result[key]:
            result[key] = _merge_list(result[key], value, MERGE_LISTS[sub], sub)
        elif isinstance(value, list) and sub in MERGE_LISTS:
            # a list the original lacks is set as given (no merge key needed), as the
            # API server's strategic merge does, without its directives
            result[key] = [clone(item) for item in value
                           if not (isinstance(item, dict) and "$patch" in item)]
        else:
            result[key] = clone(value)
    for key, removed in deletions.items():
        if not isinstance(removed, list):
            raise BadRequest(f"{_DELETE_PRIMITIVE}{key} must be a list")
        if isinstance(result.get(key), list):
            result[key] = [item for item in result[key] if item not in removed]
    for key, order in orders.items():
        if not isinstance(order, list):
            raise BadRequest(f"{_ORDER}{key} must be a list")
        if isinstance(result.get(key), list):
            result[key] = _ordered(result[key], order, MERGE_LISTS.get((*path, key)))
    if retain is not None:
        result = {k: v for k, v in result.items() if k in retain}
    return result


def _identity(item: Any, merge_key: str | None) -> Any:
    if merge_key is None:
        return item
    return item.get(merge_key) if isinstance(item, dict) else None


def _merge_list(original: list[Any], patch: list[Any], merge_key: str | None,
                path: tuple[str, ...]) -> list[Any]:
    """Merge a list: primitives as a set, maps by ``merge_key``."""
    field = ".".join(path)
    if any(isinstance(item, dict) and item.get("$patch") == "replace" for item in patch):
        return [clone({k: v for k, v in item.items() if k != "$patch"})
                for item in patch if not (isinstance(item, dict) and "$patch" in item)]
    result = [clone(item) for item in original]
    for item in patch:
        if merge_key is None:
            if isinstance(item, dict | list):
                raise BadRequest(f"{field}: a list of primitives cannot hold {item!r}")
            if item not in result:
                result.append(item)
            continue
        if not isinstance(item, dict) or merge_key not in item:
            raise BadRequest(f"{field}: map items need the merge key {merge_key!r}")
        key = item[merge_key]
        at = next((i for i, old in enumerate(result) if _identity(old, merge_key) == key), None)
        directive = item.get("$patch")
        if directive == "delete":
            if at is not None:
                del result[at]
            continue
        if directive not in (None, "merge"):
            raise BadRequest(f"unknown patch type: {directive!r} in list {field}")
        if at is None:
            result.append(clone({k: v for k, v in item.items() if k != "$patch"}))
        else:
            merged = _merge_map(result[at], item, path)
            result[at] = merged if merged is not None else result[at]
    return result


def _ordered(items: list[Any], order: list[Any], merge_key: str | None) -> list[Any]:
    """``items`` with those named by ``order`` first, in its order; the others keep theirs."""
    wanted = [_identity(o, merge_key) if merge_key else o for o in order]
    ranked = [item for w in wanted for item in items if _identity(item, merge_key) == w]
    rest = [item for item in items if _identity(item, merge_key) not in wanted]
    return ranked + rest
