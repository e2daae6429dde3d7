"""The checker on planted histories: every count is planted once and proved 0 on a clean history.

The histories are built by hand on one clock (seconds). ``op`` writes one operation (its invoke and,
unless the worker was killed, its completion); ``section`` writes a whole critical section.
"""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

from checker import Check, as_row, check, load_events, percentile

Event = dict[str, Any]
END = 100.0  # end of the run in every history below
ANOMALIES = (
    "lost_updates",
    "duplicated",
    "reordered",
    "stale_reads",
    "mutex_violations",
    "token_order_violations",
    "duplicate_tokens",
    "stale_writes_accepted",
)


def op(w: int, kind: str, gid: str, t0: float, t1: float | None, typ: str = "ok", **fields: Any) -> list[Event]:
    """One operation; ``lease``/``el`` go on the invoke, ``token``/``value`` on the completion."""
    invoke = {"op": kind, "type": "invoke", "gid": gid, "t": t0, "w": w}
    invoke.update({k: v for k, v in fields.items() if k in ("lease", "el")})
    if t1 is None:
        return [invoke]  # the worker was killed before the completion
    done = {"op": kind, "type": typ, "gid": gid, "t": t1, "w": w}
    done.update({k: v for k, v in fields.items() if k in ("token", "value")})
    return [invoke, done]


def section(
    w: int,
    gid: str,
    t0: float,
    ok: float,
    end: float | None,
    lease: float = 10.0,
    token: int | None = None,
    release: bool = True,
) -> list[Event]:
    """A grant (invoked at t0, granted at ok), the end of its section, then its release."""
    events = op(w, "acquire", gid, t0, ok, lease=lease, token=token)
    if end is not None:
        events.append({"op": "end", "type": "end", "gid": gid, "t": end, "w": w})
        if release:
            events += op(w, "release", gid, end, end + 0.001)
    return events


def append(w: int, gid: str, t0: float, t1: float | None, typ: str = "ok") -> list[Event]:
    return op(w, "append", gid, t0, t1, typ, el=gid)


def read(w: int, gid: str, t0: float, t1: float, value: list[str]) -> list[Event]:
    return op(w, "read", gid, t0, t1, value=value)


def assert_only(c: Check, **expected: int) -> None:
    """The anomalies planted are counted as expected, every other anomaly is 0."""
    for name in (*ANOMALIES, "expired_overlaps", "unknown_elements"):
        assert getattr(c, name) == expected.get(name, 0), (name, c)
    assert c.anomalies == sum(v for k, v in expected.items() if k in ANOMALIES)


def clean_run(n: int, workers: int = 3) -> tuple[list[Event], list[str], list[str]]:
    """n sequential fenced sections (read then append), its store history and its final list."""
    events: list[Event] = []
    history: list[str] = []
    final: list[str] = []
    for i in range(n):
        w, gid, t = i % workers, f"{i % workers}.{i}", i * 0.01
        events += section(w, gid, t, t + 0.001, None, lease=1.0, token=i + 1)
        events += read(w, gid, t + 0.002, t + 0.003, list(final))
        events += append(w, gid, t + 0.004, t + 0.005)
        events += section(w, gid, t, t + 0.001, t + 0.006)[2:]  # end + release
        history += [f"r {gid} {i + 1} 1 -", f"w {gid} {i + 1} 1 {gid}"]
        final = [*final, gid]
    return events, history, final


def test_clean_history_counts_nothing() -> None:
    events, history, final = clean_run(30)
    c = check(events, history, final, END)
    assert_only(c)
    assert (c.grants, c.acquires_unknown, c.ops, c.acknowledged) == (30, 0, 30, 30)
    assert (c.stale_writes_rejected, c.current_writes_rejected) == (0, 0)
    assert len(c.waits) == 30


def test_lost_update() -> None:
    events = section(0, "0.1", 0, 0.1, 1, token=1) + append(0, "0.1", 0.5, 0.6)
    events += section(1, "1.1", 1, 1.1, 2, token=2) + append(1, "1.1", 1.5, 1.6)
    assert_only(check(events, [], ["0.1", "1.1"], END))
    assert_only(check(events, [], ["1.1"], END), lost_updates=1)


def test_duplicated_in_final_or_in_a_read() -> None:
    events = append(0, "a", 0, 1) + append(0, "b", 2, 3) + read(1, "r", 4, 5, ["a", "b"])
    assert_only(check(events, [], ["a", "b"], END))
    assert_only(check(events, [], ["a", "b", "a"], END), duplicated=1)
    twice = append(0, "a", 0, 1) + append(0, "b", 2, 3) + read(1, "r", 4, 5, ["a", "b", "b"])
    assert_only(check(twice, [], ["a", "b"], END), duplicated=1)
    assert_only(check(twice, [], ["a", "b", "a", "b"], END), duplicated=2)  # each element once


def test_reordered_appends() -> None:
    events = append(0, "a", 0, 1) + append(1, "b", 2, 3)  # a completed before b was invoked
    assert_only(check(events, [], ["a", "b"], END))
    assert_only(check(events, [], ["b", "a"], END), reordered=1)
    concurrent = append(0, "a", 0, 2) + append(1, "b", 1, 3)
    assert_only(check(concurrent, [], ["b", "a"], END))  # either order is linearizable
    touching = append(0, "a", 0, 1) + append(1, "b", 1, 3)  # a.t1 == b.t0: not strictly before
    assert_only(check(touching, [], ["b", "a"], END))
    unacked = append(0, "a", 0, 1, "info") + append(1, "b", 2, 3)
    assert_only(check(unacked, [], ["b", "a"], END))


def test_stale_read() -> None:
    writes = append(0, "x", 0, 1) + append(1, "w", 2, 3)
    assert_only(check([*writes, *read(2, "r", 4, 5, ["x", "w"])], [], ["x", "w"], END))
    assert_only(check([*writes, *read(2, "r", 4, 5, ["x"])], [], ["x", "w"], END), stale_reads=1)
    # the initial empty list, overwritten by an acked append completed before the read
    assert_only(check([*writes, *read(2, "r", 4, 5, [])], [], ["x", "w"], END), stale_reads=1)
    # the read was invoked while w was in flight: both values are fine
    assert_only(check([*writes, *read(2, "r", 2.5, 5, ["x"])], [], ["x", "w"], END))
    # w was invoked before x completed: x may be linearized after it
    overlapping = append(0, "x", 0, 2.5) + append(1, "w", 2, 3)
    assert_only(check([*overlapping, *read(2, "r", 4, 5, ["w", "x"])], [], ["w", "x"], END))
    # a last element nobody appended is unknown: skipped here, counted as an unknown element
    unknown = [*writes, *read(2, "r", 4, 5, ["x", "w", "zz"])]
    assert_only(check(unknown, [], ["x", "w", "zz"], END), unknown_elements=1)


def test_mutex_violation_within_leases_vs_expired_overlap() -> None:
    def shape(lease: float) -> list[Event]:
        # worker 0 holds [0.01, 2.0); worker 1 is granted at 1.0 and ends at 1.5
        return section(0, "0.1", 0, 0.01, 2.0, lease=lease) + section(1, "1.1", 0.5, 1.0, 1.5, lease=lease)

    assert_only(check(shape(5.0), [], [], END), mutex_violations=1)  # both leases still running
    assert_only(check(shape(0.5), [], [], END), expired_overlaps=1)  # 0.1's lease ran out at 0.5
    # the lease counts from the invoke: a slow grant (ok at 0.4) is certain only until 0.5
    slow = section(0, "0.1", 0, 0.4, 2.0, lease=0.5) + section(1, "1.1", 0.42, 0.45, 1.5, lease=0.5)
    assert_only(check(slow, [], [], END), mutex_violations=1)
    late = section(0, "0.1", 0, 0.4, 2.0, lease=0.5) + section(1, "1.1", 0.45, 0.5, 1.5, lease=0.5)
    assert_only(check(late, [], [], END), expired_overlaps=1)


def test_never_ended_section_lasts_to_end_of_run() -> None:
    killed = section(0, "0.1", 0, 0.01, None, lease=0.5) + section(1, "1.1", 50, 50.1, 51, lease=0.5)
    assert_only(check(killed, [], [], END), expired_overlaps=1)
    assert_only(check(killed, [], [], 50.05))  # the run was over before 1.1 was granted
    unleased = section(0, "0.1", 0, 0.01, None, lease=float("inf"))
    assert_only(check(unleased + section(1, "1.1", 50, 50.1, 51), [], [], END), mutex_violations=1)


def test_released_then_regranted_is_not_an_overlap() -> None:
    events = section(0, "0.1", 0, 0.01, 1.0, lease=5) + section(1, "1.1", 0.5, 1.001, 1.5, lease=5)
    assert_only(check(events, [], [], END))
    touching = section(0, "0.1", 0, 0.01, 1.0, lease=5) + section(1, "1.1", 0.5, 1.0, 1.5, lease=5)
    assert_only(check(touching, [], [], END))  # zero-length intersection
    # released at 1.0 but its worker kept working (end line at 3.0): only believed, not certain
    sloppy = section(0, "0.1", 0, 0.01, 3.0, lease=5, release=False) + op(0, "release", "0.1", 1.0, 1.1)
    sloppy += section(1, "1.1", 0.5, 1.2, 1.5, lease=5)
    assert_only(check(sloppy, [], [], END), expired_overlaps=1)


def test_same_worker_never_overlaps_itself() -> None:
    events = section(0, "0.1", 0, 0.01, None, lease=5) + section(0, "0.2", 0.5, 1.0, 1.5, lease=5)
    c = check(events, [], [], END)
    assert_only(c)
    assert c.grants == 2


def test_equal_grant_times_count_both() -> None:
    events = section(0, "0.1", 0, 1.0, 2.0) + section(1, "1.1", 0, 1.0, 2.0)
    assert_only(check(events, [], [], END), mutex_violations=2)


def test_token_order_violation() -> None:
    ordered = section(0, "0.1", 0, 1, 2, token=5) + section(1, "1.1", 2, 3, 4, token=6)
    assert_only(check(ordered, [], [], END))
    events = section(0, "0.1", 0, 1, 2, token=5) + section(1, "1.1", 2, 3, 4, token=4)
    assert_only(check(events, [], [], END), token_order_violations=1)
    # 1.1 was invoked before 0.1 was granted: concurrent acquires may be ordered either way
    concurrent = section(0, "0.1", 0, 1, 2, token=5) + section(1, "1.1", 0.5, 3, 4, token=4)
    assert_only(check(concurrent, [], [], END))
    # counted once per grant, however many earlier grants it is below
    many = section(0, "0.1", 0, 1, 2, token=5) + section(1, "1.1", 2, 3, 4, token=6)
    many += section(2, "2.1", 5, 6, 7, token=3)
    assert_only(check(many, [], [], END), token_order_violations=1)
    unfenced = section(0, "0.1", 0, 1, 2) + section(1, "1.1", 2, 3, 4)
    assert_only(check(unfenced, [], [], END))


def test_duplicate_token() -> None:
    concurrent = section(0, "0.1", 0, 1, 2, token=5) + section(1, "1.1", 0.5, 3, 4, token=5)
    assert_only(check(concurrent, [], [], END), duplicate_tokens=1)
    later = section(0, "0.1", 0, 1, 2, token=5) + section(1, "1.1", 2, 3, 4, token=5)
    later += section(2, "2.1", 5, 6, 7, token=5) + section(0, "0.2", 8, 9, 10, token=6)
    assert_only(check(later, [], [], END), duplicate_tokens=2, token_order_violations=2)


def test_info_acquire_and_append_are_unknown() -> None:
    events = op(0, "acquire", "0.1", 0, 0.5, "info", lease=5) + section(1, "1.1", 0.2, 0.3, 2, lease=5)
    events += append(1, "1.1", 1, 1.5, "info")
    for final in ([], ["1.1"]):  # whether the append happened or not, nothing is wrong
        c = check(events, [], final, END)
        assert_only(c)
        assert (c.grants, c.acquires_unknown, c.ops, c.acknowledged) == (1, 1, 1, 0)
    # a read of an info append's element: it completed (at the latest) at its info time
    stale = [*events, *append(2, "2.1", 2, 3), *read(0, "0.2", 4, 5, ["1.1"])]
    assert_only(check(stale, [], ["1.1", "2.1"], END), stale_reads=1)
    fresh = [*events, *append(2, "2.1", 1.2, 3), *read(0, "0.2", 4, 5, ["1.1"])]
    assert_only(check(fresh, [], ["1.1", "2.1"], END))


def test_invoke_without_completion_is_unknown_forever() -> None:
    killed = op(0, "acquire", "0.1", 0, None, lease=5) + append(1, "1.1", 1, None)
    killed += append(2, "2.1", 2, 3) + read(3, "3.1", 4, 5, ["1.1"])
    for final in ([], ["1.1"], ["2.1", "1.1"]):
        c = check(killed, [], final if "2.1" in final else [*final, "2.1"], END)
        assert_only(c)  # 1.1 may still have been in flight: reading it last is fine
        assert (c.grants, c.acquires_unknown, c.ops, c.acknowledged) == (0, 1, 2, 1)
    # a later invoke of the same worker closes the pending one (a restarted worker)
    again = op(0, "acquire", "0.1", 0, None, lease=5) + section(0, "0.2", 1, 1.5, 2)
    c = check(again, [], [], END)
    assert (c.grants, c.acquires_unknown, c.waits) == (1, 1, [1.5])


def test_load_events_skips_cut_lines(tmp_path: Path) -> None:
    logs = [tmp_path / "w0.jsonl", tmp_path / "missing.jsonl", tmp_path / "w2.jsonl"]
    logs[0].write_text('{"op":"acquire","type":"invoke","gid":"0.1","t":1.0,"lease":0.5}\n{"op":"acq')
    logs[2].write_text('{"op":"end","type":"end","gid":"2.1","t":2.0}\nnot json\n[1]\n')
    events = load_events(logs)
    assert [(e["gid"], e["w"]) for e in events] == [("0.1", 0), ("2.1", 2)]
    assert check(events, [], [], END).acquires_unknown == 1


def test_stale_writes_from_store_history() -> None:
    events = section(0, "0.1", 0, 1, 5, lease=1.5) + section(1, "1.1", 1.5, 2, 3, lease=1)
    events += append(1, "1.1", 2.2, 2.5) + append(0, "0.1", 2.6, 2.9)
    accepted = ["r 0.1 -1 1 -", "r 1.1 -1 1 -", "w 1.1 -1 1 1.1", "w 0.1 -1 1 0.1"]
    c = check(events, accepted, ["0.1"], END)
    assert_only(c, stale_writes_accepted=1, expired_overlaps=1, lost_updates=1)
    rejected = ["r 0.1 1 1 -", "r 1.1 2 1 -", "w 1.1 2 1 1.1", "w 0.1 1 0 0.1"]
    c = check(events, rejected, ["1.1"], END)
    assert (c.stale_writes_accepted, c.stale_writes_rejected, c.current_writes_rejected) == (0, 1, 0)
    current = ["r 0.1 1 1 -", "w 0.1 1 0 0.1", "r 1.1 2 1 -", "w 1.1 2 1 1.1", "bad line", "w 9.9 7 1 9.9"]
    c = check(events, current, ["1.1"], END)
    assert (c.stale_writes_accepted, c.stale_writes_rejected, c.current_writes_rejected) == (0, 0, 1)
    # a refused read of the newer holder is enough: the store had seen it
    refused_read = ["r 0.1 1 1 -", "r 1.1 2 0 -", "w 0.1 1 1 0.1"]
    assert check(events, refused_read, ["0.1"], END).stale_writes_accepted == 1


def test_unknown_elements() -> None:
    events = append(0, "a", 0, 1) + append(1, "b", 2, 3, "fail")
    assert_only(check(events, [], ["a", "b"], END))  # b was attempted: not unknown
    assert_only(check(events, [], ["a", "zz", "yy"], END), unknown_elements=2)
    assert_only(check(events, [], ["", "a"], END))  # an empty string is no element


def test_waits_computed_from_first_attempt() -> None:
    events = op(0, "acquire", "0.1", 0, 0.5, "fail", lease=1) + op(0, "acquire", "0.2", 0.6, 0.7, "info", lease=1)
    events += section(0, "0.3", 0.8, 1.0, 1.5, lease=1)
    events += section(1, "1.1", 0.2, 0.25, 0.3, lease=1)  # another worker's attempts are its own
    events += section(0, "0.4", 2.0, 2.1, 2.5, lease=1)
    events += op(0, "acquire", "0.5", 3.0, 9.0, "fail", lease=1)  # not granted: no wait recorded
    waits = check(events, [], [], END).waits
    assert sorted(round(w, 6) for w in waits) == [0.05, 0.1, 1.0]


def test_as_row_and_anomalies() -> None:
    events = section(0, "0.1", 0, 0.5, 2, token=5) + section(1, "1.1", 0.2, 1, 1.5, token=5)
    events += append(0, "0.1", 1.8, 1.9) + append(1, "1.1", 1.1, 1.2)
    c = check(events, [], ["1.1"], END)
    row = as_row(c, elapsed=0.3)
    assert list(row) == [
        "grants",
        "acquires_unknown",
        "ops",
        "acknowledged",
        *ANOMALIES[:4],
        "mutex_violations",
        "expired_overlaps",
        "token_order_violations",
        "duplicate_tokens",
        "stale_writes_accepted",
        "stale_writes_rejected",
        "current_writes_rejected",
        "unknown_elements",
        "grants_per_s",
        "wait_p99_ms",
        "anomalies",
    ]
    assert (row["lost_updates"], row["mutex_violations"], row["duplicate_tokens"]) == (1, 1, 1)
    assert row["token_order_violations"] == 0  # 1.1 was invoked before 0.1 was granted
    assert row["anomalies"] == c.anomalies == 3
    assert (row["grants_per_s"], row["wait_p99_ms"]) == (6.7, 800.0)
    assert as_row(Check(), 0)["grants_per_s"] == 0.0
    # a fenced resource: the overlap is reported, but only its damage is an anomaly
    fenced = as_row(c, elapsed=0.3, promise="resource")
    assert (fenced["mutex_violations"], fenced["anomalies"]) == (1, 2)
    lock = as_row(c, elapsed=0.3, promise="lock")  # the lost update is beside, not an anomaly
    assert (lock["lost_updates"], lock["anomalies"]) == (1, 2)


def test_percentile() -> None:
    assert percentile([], 0.99) == 0.0
    assert percentile([3.0, 1.0, 2.0], 0.5) == 2.0
    assert percentile([float(i) for i in range(1, 101)], 0.99) == 99.0


def test_five_thousand_operations_check_quickly() -> None:
    events, history, final = clean_run(1000, workers=8)  # 5 ops per section
    rng = random.Random(1)
    for i in rng.sample(range(1000), 20):  # plant lost updates
        final.remove(f"{i % 8}.{i}")
    began = time.monotonic()
    c = check(events, history, final, END)
    assert time.monotonic() - began < 5.0
    assert_only(c, lost_updates=20)
