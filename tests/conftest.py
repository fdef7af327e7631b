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


#: The files that take longest, longest first (whole-file times measured on the two-core
#: machine). Under ``-n 3 --dist loadfile`` they are handed out first, so the short files
#: fill the workers' last minutes instead of one long file running alone at the end.
LONG_FILES = (
    "test_kubectl_conformance.py", "test_mutation_canaries.py", "test_verify_postgres.py",
    "test_differential.py", "test_bench_e2e_keys.py", "test_serve.py", "test_serve_durable.py",
    "test_postgres_grants.py", "test_first_hour_cli.py", "test_user_kind.py",
    "test_serve_journal_key.py", "test_operator_rbac.py", "test_driver_soak.py",
    "test_references_operator.py", "test_sqlpeer.py", "test_envtest.py", "test_verify.py",
    "test_driver_claims_e2e.py", "test_typed_crds_servers.py", "test_bench.py",
    "test_verify_postgres_stale.py", "test_cli_inputs.py",
)


def pytest_configure(config: pytest.Config) -> None:
    """Keep the file order :func:`pytest_collection_modifyitems` chooses: xdist would sort
    the files by their number of tests, which hands the long files of few tests out last."""
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """In an xdist worker, order the files :data:`LONG_FILES` first (longest first), then
    the others by number of tests, most first (xdist's own order); each file's tests keep
    their order. A run in one process keeps the collection order."""
    if not hasattr(config, "workerinput"):
        return
    import collections

    counts = collections.Counter(item.path.name for item in items)
    rank = {name: index for index, name in enumerate(LONG_FILES)}

    def key(item: pytest.Item) -> tuple[int, int, str]:
        name = item.path.name
        if name in rank:
            return (0, rank[name], name)
        return (1, -counts[name], name)

    items.sort(key=key)  # stable: a file's tests stay in their order


#: The PostgreSQL fixtures (``postgres_server``, ``server``, ``env``): see postgres_fixtures.py.
pytest_plugins = ["postgres_fixtures"]
