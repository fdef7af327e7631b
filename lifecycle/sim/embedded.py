"""An embedded cluster behind a real HTTP endpoint, for ``lifecycle run --embedded`` and tests.

:func:`embedded_cluster` builds an :class:`~lifecycle.sim.apiserver.EmbeddedAPI`
serving the given kinds and the engine's ProviderConfig (installed as
CustomResourceDefinition objects, as ``lifecycle crds`` prints them), seeds a default
ProviderConfig with its credentials Secret, and serves it over HTTP on
loopback, so the operator talks to it through the official client exactly as
it would to a cluster.

:class:`InProcessCluster` skips HTTP: it gives a
:class:`~lifecycle.driver.manager.Manager` the embedded API directly, with an
in-process list-and-watch source, for soaks that need many reconciles fast.
"""

from __future__ import annotations

import base64
import contextlib
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from lifecycle.core.kind import PROVIDER_CONFIG_API, PROVIDER_CONFIG_KIND, Kind
from lifecycle.kube.errors import AlreadyExists
from lifecycle.kube.resources import ResourceType
from lifecycle.schema.crds import crds, default_config_fits, provider_config_apis
from lifecycle.sim.apiserver import EmbeddedAPI
from lifecycle.sim.crds import apply_crd
from lifecycle.sim.http import APIServerHTTP
from lifecycle.sim.sharing import SharedView
from lifecycle.sim.watch import Watch

__all__ = [
    "EXAMPLE_CREDENTIALS",
    "EmbeddedListWatcher",
    "InProcessCluster",
    "embedded_cluster",
    "register_kinds",
    "seed_provider_config",
]

#: Credentials of the default ProviderConfig (what the simulated cloud accepts).
EXAMPLE_CREDENTIALS = {"accessKeyId": "AKIDEXAMPLE", "secretAccessKey": "s3cr3t"}


def seed_provider_config(api: EmbeddedAPI, name: str = "default",
                         credentials: Mapping[str, str] = EXAMPLE_CREDENTIALS,
                         namespace: str = "default",
                         api_version: str = PROVIDER_CONFIG_API,
                         spec: Mapping[str, Any] | None = None) -> None:
    """Create a ProviderConfig (of ``api_version``, ``spec`` merged into its spec) and its
    credentials Secret in ``api``."""
    secret = f"{name}-credentials"
    with contextlib.suppress(AlreadyExists):  # shared by the configs of several groups
        api.create({"apiVersion": "v1", "kind": "Secret",
                    "metadata": {"name": secret, "namespace": namespace},
                    "data": {k: base64.b64encode(v.encode()).decode()
                             for k, v in credentials.items()}})
    api.create({"apiVersion": api_version, "kind": PROVIDER_CONFIG_KIND,
                "metadata": {"name": name},
                "spec": {**(spec or {}),
                         "credentials": {"secretRef": {"name": secret,
                                                       "namespace": namespace}}}})


def embedded_cluster(kinds: Sequence[Kind], *, api: EmbeddedAPI | None = None,
                     seed_config: bool = True, bookmark_interval: float = 1.0,
                     watch_window: int = 10_000) -> APIServerHTTP:
    """An embedded API serving ``kinds`` over HTTP (started); stop it with ``.stop()``."""
    if api is None:
        api = EmbeddedAPI(bookmark_interval=bookmark_interval, watch_window=watch_window)
    register_kinds(api, kinds, seed_config=seed_config)
    return APIServerHTTP(api).start()


def register_kinds(api: EmbeddedAPI, kinds: Sequence[Kind], *, seed_config: bool = True) -> None:
    """Install the CRDs of the ProviderConfig kind and ``kinds`` in ``api`` as CRD objects.

    Each is created, or updated when it exists (re-applying the same CRDs
    changes nothing); ``seed_config`` also creates a default ProviderConfig of
    every ProviderConfig kind the kinds name whose spec needs nothing but credentials
    (:func:`~lifecycle.schema.crds.default_config_fits`: not a PostgreSQL one, whose
    server nobody can guess).
    """
    for doc in crds(kinds):
        apply_crd(api, doc)
    if seed_config:
        for api_version in provider_config_apis(kinds):
            if default_config_fits(kinds, api_version):
                seed_provider_config(api, api_version=api_version)


class EmbeddedListWatcher:
    """Lists and watches one kind of an :class:`EmbeddedAPI` in process (with bookmarks)."""

    def __init__(self, api: EmbeddedAPI | SharedView, api_version: str, kind: str,
                 namespace: str | None = None, label_selector: str | None = None, *,
                 field_selector: str | None = None) -> None:
        self.api = api
        self.api_version = api_version
        self.kind = kind
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        self._watch: Watch | None = None
        self._lock = threading.Lock()

    def list(self) -> tuple[list[dict[str, Any]], str]:
        """All objects and the list's resourceVersion."""
        return self.api.list(self.api_version, self.kind, self.namespace,
                             label_selector=self.label_selector,
                             field_selector=self.field_selector)

    def watch(self, resource_version: str, *, timeout: float,
              inactivity: float) -> Iterator[tuple[str, dict[str, Any]]]:
        """Stream events after ``resource_version``; ``Gone`` when it left the history.

        ``inactivity`` is not needed in process: the stream cannot go silent
        while bookmarks are on.
        """
        stream = self.api.watch(self.api_version, self.kind, self.namespace, resource_version,
                                label_selector=self.label_selector,
                                field_selector=self.field_selector, timeout=timeout,
                                bookmarks=True)
        with self._lock:
            self._watch = stream
        try:
            for event in stream:
                yield event.type, event.object
        finally:
            with self._lock:
                self._watch = None
            stream.stop()

    def stop(self) -> None:
        """End the running watch, if any."""
        with self._lock:
            stream = self._watch
        if stream is not None:
            stream.stop()


class InProcessCluster:
    """An :class:`EmbeddedAPI` as the cluster of a :class:`~lifecycle.driver.manager.Manager`.

    Reads and writes go straight to the API's shared view (the engine's
    ``Cluster`` protocol; the engine never changes what it reads, so nothing
    is copied on the way out); :meth:`list_watcher` gives informers
    in-process sources.
    """

    def __init__(self, api: EmbeddedAPI) -> None:
        self.api = api.shared()

    def get(self, api_version: str, kind: str, namespace: str | None,
            name: str) -> dict[str, Any]:
        """Read one object."""
        return self.api.get(api_version, kind, namespace, name)

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Create an object."""
        return self.api.create(obj)

    def replace(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Write metadata and spec."""
        return self.api.replace(obj)

    def replace_status(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Write the status subresource."""
        return self.api.replace_status(obj)

    def record_event(self, involved: dict[str, Any], type: str, reason: str,
                     message: str) -> Any:
        """Record a Kubernetes Event about ``involved``."""
        return self.api.record_event(involved, type, reason, message)

    def list(self, api_version: str, kind: str, namespace: str | None = None,
             label_selector: str | None = None) -> tuple[list[dict[str, Any]], str]:
        """List objects of a kind (and the list's resourceVersion)."""
        return self.api.list(api_version, kind, namespace, label_selector)

    def info(self, api_version: str, kind: str) -> ResourceType:
        """How the API serves a kind (``namespaced`` among others), as a cached reader asks."""
        return self.api.resource_type(api_version, kind)

    def list_watcher(self, api_version: str, kind: str, namespace: str | None = None,
                     label_selector: str | None = None, *,
                     field_selector: str | None = None) -> EmbeddedListWatcher:
        """An in-process list-and-watch source for one kind (``field_selector``: only the
        objects it matches, as ``metadata.name=NAME`` for one object)."""
        return EmbeddedListWatcher(self.api, api_version, kind, namespace, label_selector,
                                   field_selector=field_selector)
