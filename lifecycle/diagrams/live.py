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
from lifecycle.core.objects import metadata
from lifecycle.diagrams.discover import has_table
from lifecycle.diagrams.model import DiagramError, LiveObject
from lifecycle.diagrams.render import render
from lifecycle.registry import RegistryError, for_object, registrations


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
        text = path.read_text()
    except OSError as exc:
        raise DiagramError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise DiagramError(f"{path} is not valid YAML or JSON{where}") from None
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
    return dict(obj)


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
