"""A machine's compiled table, its timing, and the pure plan of one pass: exact figures."""

from __future__ import annotations

from lifecycle.core.machine import Timing, camel


def test_timing_defaults_grace_and_waits() -> None:
    timing = Timing()
    assert (timing.poll, timing.jitter, timing.default_wait, timing.ready_grace) == (
        60.0, 0.1, 5.0, None)
    assert dict(timing.wait) == {"creating": 5.0, "updating": 5.0, "deleting": 2.0}
    assert dict(timing.max_in_state) == {"creating": 1800.0, "updating": 1800.0,
                                         "deleting": 1800.0}
    assert timing.grace() == 180.0
    assert Timing(poll=10.0).grace() == 30.0
    assert Timing(poll=10.0, ready_grace=7.0).grace() == 7.0
    assert Timing(ready_grace=0.0).grace() == 0.0
    assert Timing(default_wait=9.0).wait_for("ready") == 9.0
    assert Timing().wait_for("deleting") == 2.0


def test_camel() -> None:
    assert camel("stuck_in") == "StuckIn"
    assert camel("ready") == "Ready"
    assert camel("a_b_c") == "ABC"
