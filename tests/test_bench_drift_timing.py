"""The PostgreSQL benchmark times each object's drift repair from its own drift.

The drifts are spread over a poll interval; the catalog is polled while they are
made, so an operator that repairs at once is timed at once, not at the end of the
spread. A fake catalog stands in for PostgreSQL: each drift is put back at the
second read after it was made (as an operator that repairs within moments would).
"""

from __future__ import annotations

import threading
from typing import Any

from benchmarks import e2e_pg

SPREAD = 2.0


class FakeCatalog:
    """Objects at the wanted state until drifted; a drift is put back two reads later."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.lock = threading.Lock()
        self.reads_left: dict[int, int] = {}

    def state(self) -> dict[tuple[str, int], Any]:
        with self.lock:
            out: dict[tuple[str, int], Any] = {}
            for i in range(self.n):
                left = self.reads_left.get(i, 0)
                drifted = left > 0
                if drifted:
                    self.reads_left[i] = left - 1
                for kind, _ in e2e_pg.KINDS:
                    out[(kind, i)] = (None if kind == "Grant" else 5) if drifted else (
                        frozenset({"CREATE", "TEMPORARY"}) if kind == "Grant" else 20)
            return out

    def drift(self, spread: float = 0.0, made: dict[int, float] | None = None
              ) -> dict[int, float]:
        import time

        made = {} if made is None else made
        started = time.perf_counter()
        for i in range(self.n):
            pause = started + i * spread / self.n - time.perf_counter()
            if pause > 0:
                time.sleep(pause)
            with self.lock:
                self.reads_left[i] = 2
            made[i] = time.perf_counter()
        return made


def test_an_early_repair_is_timed_from_its_own_drift_not_the_last_one() -> None:
    catalog = FakeCatalog(4)
    wants = e2e_pg._wants(20, frozenset({"CREATE", "TEMPORARY"}))
    repaired = e2e_pg._drift_and_repair(catalog, wants, SPREAD, 30.0)  # type: ignore[arg-type]
    assert len(repaired) == 3 * catalog.n
    # The first object's drift is repaired long before the last drift is made: timed
    # after the spread, it would read at least 3/4 of it.
    assert max(t for (kind, i), t in repaired.items() if i == 0) < SPREAD * 3 / 4
    assert all(t >= 0 for t in repaired.values())
