"""Kubeconfigs for the embedded API, shared by ``lifecycle serve`` and ``lifecycle run --embedded``.

Both write a kubeconfig naming the embedded API's address (no credentials:
it checks none) and refuse to overwrite one they did not write.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from lifecycle.cli import UsageError

__all__ = ["DEFAULT_KUBECONFIG", "check_kubeconfig_target", "kubeconfig", "write_kubeconfig",
           "written_by_lifecycle"]

#: Where ``lifecycle serve`` writes its kubeconfig unless told otherwise.
DEFAULT_KUBECONFIG = "lifecycle.kubeconfig"


def kubeconfig(url: str, namespace: str = "default") -> dict[str, Any]:
    """A kubeconfig for ``url`` (no credentials: the embedded API does not check any)."""
    return {
        "apiVersion": "v1", "kind": "Config", "preferences": {},
        "current-context": "lifecycle",
        "clusters": [{"name": "lifecycle", "cluster": {"server": url}}],
        "users": [{"name": "lifecycle", "user": {}}],
        "contexts": [{"name": "lifecycle", "context": {
            "cluster": "lifecycle", "user": "lifecycle", "namespace": namespace}}],
    }


def written_by_lifecycle(path: Path) -> bool:
    """Whether ``path`` is missing or holds a kubeconfig of the shape :func:`kubeconfig`
    writes (one ``lifecycle`` cluster, user and context), so writing over it loses nothing."""
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return True
    except (OSError, UnicodeError, yaml.YAMLError):
        return False
    if not isinstance(doc, dict):
        return doc is None
    names = {key: [item.get("name") for item in doc.get(key) or () if isinstance(item, dict)]
             for key in ("clusters", "users", "contexts")}
    return all(value == ["lifecycle"] for value in names.values())


def check_kubeconfig_target(path: Path) -> None:
    """A :class:`UsageError` with one line when ``path`` holds a kubeconfig lifecycle did not
    write (``~/.kube/config`` given by mistake), which must not be overwritten."""
    if not written_by_lifecycle(path):
        raise UsageError(f"--kubeconfig {path} exists and is not a kubeconfig lifecycle "
                         f"wrote; it is left untouched: name a new file (e.g. "
                         f"./{DEFAULT_KUBECONFIG})")


def write_kubeconfig(path: Path, url: str) -> None:
    """Write a kubeconfig for ``url`` to ``path`` atomically.

    A :class:`UsageError` with one line when it cannot be written, or when ``path``
    already holds another kubeconfig (``~/.kube/config`` given by mistake): that file is
    never overwritten.
    """
    check_kubeconfig_target(path)
    temporary = path.with_name(f".{path.name}.tmp")
    try:
        temporary.write_text(yaml.safe_dump(kubeconfig(url), sort_keys=False),
                             encoding="utf-8")
        os.replace(temporary, path)
    except OSError as exc:
        raise UsageError(f"cannot write the kubeconfig {path}: {exc.strerror or exc}") from None
