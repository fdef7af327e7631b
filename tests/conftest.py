"""Fixtures shared by the test modules of the embedded API."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from widgets import widget_api

from lifecycle.sim import EmbeddedAPI


@pytest.fixture
def api() -> Iterator[EmbeddedAPI]:
    """The embedded API serving the test kinds Widget and Gadget (modules may override)."""
    server = widget_api()
    yield server
    server.close()


#: The PostgreSQL fixtures (``postgres_server``, ``server``, ``env``): see postgres_fixtures.py.
pytest_plugins = ["postgres_fixtures"]
