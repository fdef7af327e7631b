"""The embedded API with two test kinds, shared by the store's test modules."""

from __future__ import annotations

from datetime import UTC, datetime

from lifecycle.kube.resources import ResourceType
from lifecycle.sim import EmbeddedAPI

WIDGET = ResourceType("example.test", "v1", "Widget", "widgets", namespaced=True)
GADGET = ResourceType("example.test", "v1", "Gadget", "gadgets", namespaced=False)
AV = WIDGET.api_version
FIXED = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)


def widget_api() -> EmbeddedAPI:
    """A fresh embedded API on a fixed clock serving Widget (namespaced) and Gadget."""
    server = EmbeddedAPI(clock=lambda: FIXED)
    server.register(WIDGET)
    server.register(GADGET)
    return server
