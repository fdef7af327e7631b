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


#: Test modules that run the Go peer of the PostgreSQL benchmark (benchmarks/sqlpeer).
PEER_MODULES = ("test_sqlpeer.py", "test_bench_e2e_keys.py")


def pytest_collection_finish(session: pytest.Session) -> None:
    """Build the benchmark's Go peer once, before any test runs, when a selected test uses it.

    The first build takes minutes; done here it is not charged to one test's timeout
    (later runs find it in the user's cache directory). Without ``go`` nothing is built:
    the tests that need the peer then fail with the build's one-line error.
    """
    import shutil

    if not any(item.path.name in PEER_MODULES for item in session.items):
        return
    if shutil.which("go") is None:
        return
    from benchmarks import sqlpeer

    sqlpeer.build(log=lambda line: print(f"\n{line}", flush=True))


#: The PostgreSQL fixtures (``postgres_server``, ``server``, ``env``): see postgres_fixtures.py.
pytest_plugins = ["postgres_fixtures"]
