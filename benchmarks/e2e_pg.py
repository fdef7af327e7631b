"""The PostgreSQL workload of the end-to-end benchmark (in progress)."""

from __future__ import annotations

import importlib
from typing import Any

from benchmarks.e2e_servers import BenchError


def peer() -> Any:
    """The provider-sql peer's launcher module (``benchmarks/sqlpeer.py``), or a one-line error."""
    try:
        return importlib.import_module("benchmarks.sqlpeer")
    except ModuleNotFoundError as exc:
        if exc.name != "benchmarks.sqlpeer":
            raise
        raise BenchError("the provider-sql peer is not in this checkout "
                         "(benchmarks/sqlpeer.py is missing); run without --peers provider-sql"
                         ) from None


def run(config: Any, server_for: Any, workdir: Any, say: Any) -> dict[str, Any]:
    """Not yet."""
    raise BenchError("the PostgreSQL workload is not built yet")


def summary(pg: dict[str, Any]) -> str:
    """Not yet."""
    return ""


def plot_panel(pg: dict[str, Any], axis: Any) -> None:
    """Not yet."""
