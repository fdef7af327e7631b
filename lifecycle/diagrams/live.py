"""Live objects: a resource, read from a cluster or a dump, drawn on its machine.

The object's current state is highlighted and the transitions recorded in
``status.history`` are numbered in order. A dump is a YAML or JSON file
holding one object or a List of them (``kubectl get -o yaml``); the
``plan`` command reads its objects through :func:`load_object` as well.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from lifecycle.core.machine import LifecycleMachine
from lifecycle.core.objects import metadata, nesting_depth
from lifecycle.diagrams.discover import has_table
from lifecycle.diagrams.model import DiagramError, LiveObject
from lifecycle.diagrams.render import render
from lifecycle.registry import RegistryError, for_object, registrations
from lifecycle.sim import yamlsafe

__all__ = [
    "MAX_BYTES",
    "MAX_DEPTH",
    "cluster_diagram",
    "load_object",
    "machine_for",
    "object_diagram",
]


def object_diagram(
    obj: Mapping[str, Any],
    machine: type[LifecycleMachine] | None = None,
    fmt: str = "svg",
) -> bytes:
    """Draw ``obj`` (an object dict) on its machine in ``fmt``.

    Without ``machine`` the machine is found from the object's apiVersion and
    kind among the registered kinds (:func:`machine_for`).
    """
    if machine is None:
        machine = machine_for(obj)
    return render(machine, fmt, LiveObject.from_dict(obj, machine))


def cluster_diagram(
    cluster: Any, kind: Any, namespace: str | None, name: str, fmt: str = "svg"
) -> bytes:
    """Read ``namespace/name`` of ``kind`` from a cluster and draw it on the kind's machine.

    ``cluster`` is anything with the :class:`lifecycle.kube.cluster.Cluster` ``get``,
    such as the embedded API of :class:`lifecycle.testing.Environment`.
    """
    obj = cluster.get(kind.api_version, kind.kind, namespace, name)
    return object_diagram(obj, kind.machine, fmt)


def load_object(path: str | Path, name: str | None = None) -> dict[str, Any]:
    """Read one object from a YAML or JSON dump (a single object or a List of them).

    With several objects, ``name`` picks one. Raises :class:`DiagramError`
    with one line when the file cannot be used.
    """
    path = Path(path)
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_BYTES + 1)  # /dev/zero or a pipe must not be read for ever
    except OSError as exc:
        raise DiagramError(f"cannot read {path}: {exc.strerror or exc}") from None
    if len(raw) > MAX_BYTES:
        raise DiagramError(f"{path} is larger than {MAX_BYTES // (1024 * 1024)} MiB; "
                           f"a dump of one object is far smaller")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DiagramError(f"{path} is not UTF-8 text (byte {exc.start})") from None
    try:
        docs = [d for d in yamlsafe.load_all(text) if d is not None]
    except yamlsafe.AliasBombError as exc:
        raise DiagramError(f"{path} is refused: {exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise DiagramError(f"{path} is not valid YAML or JSON{where}") from None
    except RecursionError:
        raise DiagramError(f"{path} is nested too deeply to read") from None
    for doc in docs:
        if nesting_depth(doc, MAX_DEPTH) > MAX_DEPTH:
            raise DiagramError(f"{path} is nested more than {MAX_DEPTH} levels deep")
    objects: list[Any] = []
    for doc in docs:
        if isinstance(doc, Mapping) and isinstance(doc.get("items"), list):
            objects.extend(doc["items"])
        else:
            objects.append(doc)
    if name is not None:
        objects = [o for o in objects
                   if isinstance(o, Mapping) and metadata(o).get("name") == name]
    if len(objects) != 1:
        which = f" named {name!r}" if name else ""
        hint = "" if name else "; pass --name"
        raise DiagramError(f"{path} holds {len(objects)} objects{which}, expected one{hint}")
    obj = objects[0]
    if not isinstance(obj, Mapping):
        raise DiagramError(f"{path} does not hold a Kubernetes object")
    problem = _shape_problem(obj)
    if problem:
        raise DiagramError(f"{path} does not hold a usable object: {problem}")
    return dict(obj)


#: The deepest nesting of mappings and lists a dump may have.
MAX_DEPTH = 64
#: The largest dump read (bytes); more is refused, never read to the end.
MAX_BYTES = 8 * 1024 * 1024


def _kind_name(value: Any) -> str:
    names: dict[type, str] = {dict: "a mapping", list: "a list", str: "a string"}
    return names.get(type(value), type(value).__name__)


def _mapping(value: Any) -> Mapping[str, Any]:
    """``value`` when it is a mapping, else an empty one."""
    return value if isinstance(value, Mapping) else {}


def _shape_problem(obj: Mapping[str, Any]) -> str | None:
    """What makes ``obj`` unusable as a Kubernetes object, or ``None`` when its shape is fine.

    Checks the fields the engine reads: ``apiVersion``/``kind`` and the
    metadata strings, the annotation and label maps, the finalizer list, and
    ``spec``/``status`` (with ``status.state``, ``status.conditions`` and
    ``status.history``).
    """
    expected: list[tuple[str, Any, type | tuple[type, ...]]] = [
        ("apiVersion", obj.get("apiVersion"), str), ("kind", obj.get("kind"), str),
        ("metadata", obj.get("metadata"), Mapping), ("spec", obj.get("spec"), Mapping),
        ("status", obj.get("status"), Mapping)]
    meta: Mapping[str, Any] = _mapping(obj.get("metadata"))
    status: Mapping[str, Any] = _mapping(obj.get("status"))
    expected += [(f"metadata.{key}", meta.get(key), str)
                 for key in ("name", "namespace", "uid", "resourceVersion")]
    expected += [(f"metadata.{key}", meta.get(key), Mapping) for key in ("annotations", "labels")]
    expected += [("metadata.finalizers", meta.get("finalizers"), list),
                 ("status.state", status.get("state"), str),
                 ("status.conditions", status.get("conditions"), list),
                 ("status.history", status.get("history"), list)]
    for field, value, want in expected:
        if value is not None and not isinstance(value, want):
            return f"{field} is {_kind_name(value)}"
    for key in ("annotations", "labels"):
        for k, v in (meta.get(key) or {}).items():
            if not isinstance(k, str) or not isinstance(v, str):
                return f"metadata.{key} must map strings to strings"
    if not all(isinstance(f, str) for f in meta.get("finalizers") or []):
        return "metadata.finalizers must be a list of strings"
    return None


def machine_for(obj: Mapping[str, Any]) -> type[LifecycleMachine]:
    """The machine of the registered kind matching the object's apiVersion and kind.

    Raises :class:`DiagramError` when no registered kind matches; a broken
    registration raises :class:`lifecycle.registry.RegistryError`.
    """
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    registrations()  # a malformed entry point is reported as itself
    machine: Any = None
    if isinstance(api_version, str) and isinstance(kind, str):
        try:
            machine = getattr(for_object(api_version, kind).kind, "machine", None)
        except RegistryError:
            machine = None
    if not has_table(machine):
        raise DiagramError(f"no bundled kind is {kind!r} of {api_version!r}, nor any other "
                           "registered kind; name the machine as MODULE:CLASS")
    return machine
