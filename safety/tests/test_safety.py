"""The harness proves itself on real servers (the checker's own proofs: test_checker.py).

Every injector must bite: it fires, it does what it is for (its effect count), and the
known-broken control run beside the strategy shows anomalies. A mutation that disables an
injector (it counts itself fired and does nothing) must fail that proof. Then the two guarantees
the README states: module-fence loses nothing while its holders overlapped and the resource
refused stale writes; module-sync-replicas keeps mutual exclusion when the master dies while a
replicated holder is mid-section.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

import run
from suite import Config, run_cell

MODULE = os.environ.get("LOCK_MODULE") or str(Path(__file__).resolve().parents[2] / "target/release/libredis_lock.so")
SECONDS = float(os.environ.get("SAFETY_TEST_SECONDS") or 4)

# fault -> (a strategy to run it with, the effect that shows it did what it is for)
BITES = {
    "client-pause": ("module", "holders_paused_past_lease"),
    "net-delay": ("lua", "holders_delayed"),
    "net-drop": ("module", "unknown_outcomes"),
    "failover-lost-writes": ("module", "acknowledged_grants_the_replica_lacked"),
    "restart-no-persistence": ("redis-py", "lock_keys_lost"),
    "restart-aof": ("module", "control_locks_lost"),
    "redlock-split": ("redlock-3", "majority_splits"),
    "clock-jump": ("module", "locks_expired_by_the_jump"),
    "clock-skew": ("module", "server_seconds_per_real_second_x100"),
    "clock-behind-failover": ("module", "promoted_clock_behind_ms"),
    "nemesis": ("module", "failover-lost-writes"),
}


def assert_bites(row: dict[str, Any], effect: str) -> None:
    assert row["faults_fired"] >= 1, row
    assert row["effects"].get(effect, 0) > 0, (effect, row["effects"])
    assert row["control"]["anomalies"] > 0, row["control"]
    assert row["conclusive"], row
    assert row["main"]["unknown_elements"] == 0 and row["control"]["unknown_elements"] == 0, row


def bitten(strategy: str, fault: str, effect: str, tries: int = 3) -> dict[str, Any]:
    """A run in which the fault bit. Faults are timed against live workers, so a short run can
    miss (no control holder mid-section when the master died): up to ``tries`` seeds."""
    for seed in range(11, 11 + tries):
        row = run_cell(Config(strategy, fault, SECONDS, seed=seed), MODULE)
        try:
            assert_bites(row, effect)
            return row
        except AssertionError:
            if seed == 10 + tries:
                raise
    raise AssertionError("unreachable")


@pytest.mark.parametrize("fault", sorted(BITES))
def test_injector_bites(fault: str) -> None:
    strategy, effect = BITES[fault]
    row = bitten(strategy, fault, effect)
    if fault == "clock-skew":
        assert row["effects"][effect] >= 250, row["effects"]  # the clock ran about 3x fast
    if fault == "restart-aof":
        assert row["effects"].get("locks_held_at_kill_that_survived", 0) > 0, row["effects"]


@pytest.mark.parametrize("fault", ["client-pause", "failover-lost-writes", "clock-jump"])
def test_disabled_injector_is_caught(fault: str) -> None:
    strategy, effect = BITES[fault]
    row = run_cell(Config(strategy, fault, SECONDS, seed=11, disable_injector=True), MODULE)
    assert row["faults_fired"] >= 1  # the mutant claims to have fired...
    with pytest.raises(AssertionError):
        assert_bites(row, effect)  # ...and the proof catches it
    assert not row["conclusive"], row
    assert row["why_inconclusive"] == f"control {row['control']['variant']} stayed clean"


def test_none_control_proves_the_checker_sees_damage() -> None:
    row = run_cell(Config("module", "none", SECONDS, seed=11), MODULE)
    assert row["conclusive"] and row["control"]["variant"] == "no-lock", row
    assert row["control"]["lost_updates"] > 0 and row["control"]["mutex_violations"] > 0, row["control"]
    assert row["main"]["mutex_violations"] == 0, row["main"]  # no fault: no two holders within leases


@pytest.mark.parametrize("fault", ["client-pause", "failover-lost-writes"])
def test_module_fence_loses_nothing(fault: str) -> None:
    row = bitten("module-fence", fault, BITES[fault][1])
    main = row["main"]
    assert row["conclusive"], row  # the fault fired and fence-unchecked lost data beside it
    assert main["acknowledged"] > 0 and main["anomalies"] == 0, main
    assert main["stale_writes_rejected"] > 0, main  # the faults bit: fencing refused stale holders
    assert main["token_order_violations"] == 0 and main["duplicate_tokens"] == 0, main


def test_sync_replicas_failover_with_replicated_holder_mid_section() -> None:
    row = bitten("module-sync-replicas", "failover-lost-writes", "replicated_holder_mid_section_at_kill")
    assert row["main"]["mutex_violations"] == 0, row["main"]  # while the unsynced control's anomalies > 0


def cell(fault: str, strategy: str = "module", **main: int) -> dict[str, Any]:
    counts = {"anomalies": 0, "mutex_violations": 0, "token_order_violations": 0, "duplicate_tokens": 0}
    counts |= {"stale_reads": 0, "unknown_elements": 0, **main}
    runs = [{"faults_fired": 1, "main": counts, "control": {"anomalies": 3, "unknown_elements": 0}}]
    c: dict[str, Any] = {"strategy": strategy, "fault": fault, "control": "redis-py", "runs": runs}
    for r in runs:
        r.update(conclusive=True, why_inconclusive=None)
    run.summarize(c)
    return c


def test_run_fails_on_what_the_suite_must_not_hide() -> None:
    assert run.violations(cell("client-pause")) == []
    assert run.violations(cell("none", mutex_violations=1, anomalies=1))  # a lock bug without faults
    never = cell("clock-jump")
    never["runs"][0]["faults_fired"] = 0
    assert run.violations(never)  # an injector that never fired
    assert run.violations(cell("net-delay", "module-fence", anomalies=1))
    unclean = cell("client-pause")
    unclean["runs"][0]["control"]["anomalies"] = 0
    unclean["runs"][0].update(conclusive=False, why_inconclusive="control redis-py stayed clean")
    run.summarize(unclean)
    assert unclean["verdict"] == "inconclusive" and "stayed clean" in unclean["reason"]
