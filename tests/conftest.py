"""Fixtures shared by the test modules of the embedded API."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from widgets import widget_api

from lifecycle.sim import EmbeddedAPI

# Every embedded API of the suite checks that no caller changes an object it shared.
os.environ.setdefault("LIFECYCLE_MUTATION_DETECTOR", "1")


@pytest.fixture
def api() -> Iterator[EmbeddedAPI]:
    """The embedded API serving the test kinds Widget and Gadget (modules may override)."""
    server = widget_api()
    yield server
    server.close()


#: The PostgreSQL fixtures (``postgres_server``, ``server``, ``env``): see postgres_fixtures.py.
pytest_plugins = ["postgres_fixtures"]
