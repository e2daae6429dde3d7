"""The harness proves itself: short cells against real servers.

A checker that never finds anything is broken, so an unguarded lock under client pauses must
show lost updates and overlapping holders; module-fence must show none (and its resource must
have rejected the paused holder's stale writes, so the pauses did bite).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from checker import check, overlaps
from suite import Config, run_cell

MODULE = os.environ.get("LOCK_MODULE") or str(Path(__file__).resolve().parents[2] / "target/release/libredis_lock.so")
SECONDS = float(os.environ.get("SAFETY_TEST_SECONDS") or 4)


def test_checker_counts_from_logs_alone() -> None:
    events = [
        {"k": "grant", "gid": "0.1", "t": 1.0, "wait": 0.0, "w": 0},
        {"k": "grant", "gid": "1.1", "t": 2.0, "wait": 0.0, "w": 1},
        {"k": "write", "gid": "1.1", "el": "1.1", "ok": True, "w": 1},
        {"k": "release", "gid": "1.1", "t": 2.5, "w": 1},
        {"k": "write", "gid": "0.1", "el": "0.1", "ok": True, "w": 0},
        {"k": "release", "gid": "0.1", "t": 3.0, "w": 0},
    ]
    history = ["r 0.1 -1 1 -", "r 1.1 -1 1 -", "w 1.1 -1 1 1.1", "w 0.1 -1 1 0.1"]
    c = check(events, history, "0.1", end_of_run=4.0)
    assert (c.acknowledged, c.lost_updates, c.overlapping_holders) == (2, 1, 1)
    assert (c.stale_writes_accepted, c.stale_writes_rejected, c.unknown_elements) == (1, 0, 0)
    assert overlaps([(0.0, 1.0, 0), (1.0, 2.0, 1), (2.0, 3.0, 0)]) == 0


@pytest.mark.parametrize("strategy", ["module", "redis-py"])
def test_unguarded_lock_loses_updates_under_client_pause(strategy: str) -> None:
    row = run_cell(Config(strategy, "client-pause", "lock-set", SECONDS), MODULE)
    assert row["_faults"] >= 1, row
    assert row["lost_updates"] > 0, row
    assert row["overlapping_holders"] > 0, row
    assert row["_unknown_elements"] == 0, row


@pytest.mark.parametrize("fault", ["client-pause", "failover-lost-writes"])
def test_module_fence_loses_nothing(fault: str) -> None:
    row = run_cell(Config("module-fence", fault, "guarded", SECONDS), MODULE)
    assert row["_faults"] >= 1, row
    assert row["acknowledged"] > 0, row
    assert row["lost_updates"] == 0, row
    assert row["stale_writes_accepted"] == 0, row
    if fault == "client-pause":
        assert row["overlapping_holders"] > 0, row  # the pauses did bite: fencing is what saved the set
