"""The checker: counts what went wrong from the store's history and the clients' event logs.

It knows nothing about the lock. Inputs: every worker's events (grant and critical-section end
on the shared monotonic clock, writes and whether the store acknowledged them), the store's
history (every read and write in the order the store executed them) and the store's final set.

- lost_updates: acknowledged adds (the store answered OK to the client) missing from the final set.
- overlapping_holders: grants that began while another client still believed it held the lock
  (its critical section had not ended).
- stale writes: a write of a grant *superseded* at that moment, i.e. a grant that began later
  (client clock) had already accessed the store (read or write) before this write reached it.
  Fencing can only act once the store has seen the newer holder, so that is the measure;
  ``accepted`` ones are the damage, ``rejected`` ones are fencing at work.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Check:
    grants: int = 0
    ops: int = 0
    acknowledged: int = 0
    lost_updates: int = 0
    overlapping_holders: int = 0
    stale_writes_accepted: int = 0
    stale_writes_rejected: int = 0
    current_writes_rejected: int = 0
    unknown_elements: int = 0
    waits: list[float] = field(default_factory=list)


def load_events(paths: list[Path]) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    for worker, path in enumerate(paths):
        if not path.exists():
            continue
        for line in path.read_text().splitlines():
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut short when a worker was killed
            event["w"] = worker
            events.append(event)
    return events


def overlaps(intervals: list[tuple[float, float, int]]) -> int:
    """Grants that started before another worker's earlier grant had ended."""
    count = 0
    open_until: dict[int, float] = {}  # worker -> end of its latest critical section so far
    for start, end, worker in sorted(intervals):
        if any(until > start for other, until in open_until.items() if other != worker):
            count += 1
        open_until[worker] = max(open_until.get(worker, end), end)
    return count


def check(events: list[dict[str, Any]], history: list[str], final: str, end_of_run: float) -> Check:
    c = Check()
    starts: dict[str, float] = {}
    ends: dict[str, float] = {}
    worker_of: dict[str, int] = {}
    attempted: set[str] = set()
    acked: set[str] = set()
    for e in events:
        kind = e.get("k")
        if kind == "grant":
            starts[e["gid"]] = e["t"]
            worker_of[e["gid"]] = e["w"]
            c.waits.append(e["wait"])
        elif kind == "release":
            ends[e["gid"]] = e["t"]
        elif kind == "write":
            c.ops += 1
            attempted.add(e["el"])
            if e["ok"]:
                acked.add(e["el"])
    c.grants = len(starts)
    # A critical section without an end (the worker never got there) lasts to the end of the run.
    c.overlapping_holders = overlaps([(t, ends.get(g, end_of_run), worker_of[g]) for g, t in starts.items()])
    in_store = {x for x in final.split(",") if x}
    c.acknowledged = len(acked)
    c.lost_updates = len(acked - in_store)
    c.unknown_elements = len(in_store - attempted)  # must be 0: the store holds only what clients wrote
    newest = float("-inf")  # start of the newest grant that has accessed the store so far
    for entry in history:
        op, gid, _token, ok, _element = entry.split(" ")
        start = starts.get(gid)
        if start is None:
            continue  # an access whose grant event was lost (cannot happen unless a log line was cut)
        if op == "w":
            stale = newest > start
            if ok == "1" and stale:
                c.stale_writes_accepted += 1
            elif ok == "0" and stale:
                c.stale_writes_rejected += 1
            elif ok == "0":
                c.current_writes_rejected += 1
        newest = max(newest, start)
    return c


def percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]
