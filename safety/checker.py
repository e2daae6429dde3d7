"""The checker: counts what went wrong from the workers' histories and the store's own history.

This is our own checker, not Jepsen's. Jepsen's checkers (Knossos for linearizability, Elle for
transactional anomalies) are Clojure libraries fetched from Maven Central, which this machine
cannot reach, and Porcupine is a Go library. The models checked here are small enough to check
exactly without a general search: a lease-aware lock (intervals on one clock), a list-append
register (one element per grant, the list order is the write order) and fencing tokens (a
monotonic counter). For a few thousand operations every count below is a sort and a sweep
(O(n log n)), or at worst linear in the total length of the values read (O(n^2)).

Inputs: every worker's events (``invoke`` then ``ok``/``fail``/``info`` per operation, Jepsen
style, on the machine's shared monotonic clock, see docs/safety.md), the store's history
(every read and write in the order the store executed them), its final list, and the end of the
run. An invoke never completed (the worker was killed) is an ``info`` that completed at +inf.

Anomalies (each must be 0 for a correct lock + resource):

- lost_updates: acknowledged appends missing from the final list.
- duplicated: elements that occur more than once in the final list or in any value read.
- reordered: acknowledged appends B placed before an acknowledged append A that had completed
  before B was invoked.
- stale_reads: reads missing an acknowledged append W that began after the write of the read's
  last element completed and completed itself before the read was invoked.
- mutex_violations: two workers' grants both certainly held at once (within their leases and
  before their releases).
- token_order_violations: a grant whose token is not above every token granted before it was
  invoked; duplicate_tokens: a token handed out twice.
- stale_writes_accepted: the store accepted a write of a grant already superseded, i.e. a grant
  that began later had already accessed the store. Fencing can only act once the store has seen
  the newer holder, so that is the measure; ``rejected`` ones are fencing at work.

Reported beside: expired_overlaps (two workers believed they held the lock at once, but only after
a lease ran out: expected for an unfenced lock), stale_writes_rejected, current_writes_rejected,
unknown_elements (elements nobody appended: a harness bug), waits.
"""

from __future__ import annotations

import bisect
import itertools
import json
import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

INF = math.inf
COMPLETIONS = ("ok", "fail", "info")


@dataclass
class Check:
    grants: int = 0
    acquires_unknown: int = 0
    ops: int = 0
    acknowledged: int = 0
    lost_updates: int = 0
    duplicated: int = 0
    reordered: int = 0
    stale_reads: int = 0
    mutex_violations: int = 0
    expired_overlaps: int = 0
    token_order_violations: int = 0
    duplicate_tokens: int = 0
    stale_writes_accepted: int = 0
    stale_writes_rejected: int = 0
    current_writes_rejected: int = 0
    unknown_elements: int = 0
    waits: list[float] = field(default_factory=list)

    @property
    def anomalies(self) -> int:
        """What must be 0 (expired overlaps are expected for an unfenced lock: reported beside)."""
        return (
            self.lost_updates
            + self.duplicated
            + self.reordered
            + self.stale_reads
            + self.mutex_violations
            + self.token_order_violations
            + self.duplicate_tokens
            + self.stale_writes_accepted
        )


@dataclass
class Op:
    """One operation: its invoke and its completion (``info`` at +inf when there was none)."""

    op: str
    gid: str
    w: int
    t0: float
    t1: float = INF
    type: str = "info"
    lease: float = INF  # acquire: a lock without a lease holds until released
    el: str = ""  # append
    token: int | None = None  # ok acquire
    value: list[str] = field(default_factory=list)  # ok read


def load_events(paths: list[Path]) -> list[dict[str, Any]]:
    """Every worker's events in file order; ``w`` = the worker's position in ``paths``."""
    events: list[dict[str, Any]] = []
    for worker, path in enumerate(paths):
        if not path.exists():
            continue
        for line in path.read_text().splitlines():
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut short when a worker was killed
            if isinstance(event, dict):
                event["w"] = worker
                events.append(event)
    return events


def operations(events: list[dict[str, Any]]) -> tuple[list[Op], dict[str, float]]:
    """Pairs each worker's invokes with their completions; returns the ops and the ``end`` times.

    A worker is sequential: a completion belongs to its pending invoke (same op and gid). An invoke
    left pending (the next line is another invoke, or the log ends) never completed. A completion
    without its invoke (that line was lost) is dropped: its invoke time and lease are unknown.
    """
    by_worker: dict[int, list[dict[str, Any]]] = {}
    for e in events:
        by_worker.setdefault(int(e.get("w", 0)), []).append(e)
    ops: list[Op] = []
    ends: dict[str, float] = {}
    for w, log in by_worker.items():
        pending: Op | None = None
        for e in log:
            kind, typ, t = e.get("op"), e.get("type"), e.get("t")
            if not isinstance(kind, str) or not isinstance(t, (int, float)):
                continue
            gid = str(e.get("gid"))
            if kind == "end" or typ == "end":
                ends.setdefault(gid, float(t))
            elif typ == "invoke":
                if pending is not None:
                    ops.append(pending)
                lease = e.get("lease")
                pending = Op(kind, gid, w, float(t), el=str(e.get("el", gid)))
                pending.lease = INF if lease is None else float(lease)
            elif typ in COMPLETIONS and pending is not None and (pending.op, pending.gid) == (kind, gid):
                pending.t1, pending.type = float(t), str(typ)
                token = e.get("token")
                pending.token = None if token is None else int(token)
                value = e.get("value") or []
                pending.value = [x for x in value.split(",") if x] if isinstance(value, str) else list(map(str, value))
                ops.append(pending)
                pending = None
        if pending is not None:
            ops.append(pending)
    return ops, ends


def duplicated(final: list[str], reads: list[Op]) -> int:
    """Distinct elements that occur more than once in the final list or in any value read."""
    twice: set[str] = set()
    for value in [final, *(r.value for r in reads)]:
        if len(set(value)) < len(value):
            twice.update(x for x, n in Counter(value).items() if n > 1)
    return len(twice)


def reordered(acked: list[Op], final: list[str]) -> int:
    """Acked appends B placed before some acked A in ``final`` although A.t1 < B.t0."""
    pos: dict[str, int] = {}
    for i, x in enumerate(final):
        pos.setdefault(x, i)  # a duplicate is counted as such: its first place is its place
    placed = [o for o in acked if o.el in pos]
    by_end = sorted(placed, key=lambda o: o.t1)
    count, i, furthest = 0, 0, -1  # furthest: the latest place of an A completed before B.t0
    for b in sorted(placed, key=lambda o: o.t0):
        while i < len(by_end) and by_end[i].t1 < b.t0:
            furthest = max(furthest, pos[by_end[i].el])
            i += 1
        count += furthest > pos[b.el]
    return count


def stale_reads(reads: list[Op], appends: list[Op], acked: list[Op]) -> int:
    """Reads whose last element X was overwritten by an acked W (X.t1 < W.t0, W.t1 < R.t0)."""
    done: dict[str, float] = {}  # element -> completion time of its append (the latest if several)
    for a in appends:
        done[a.el] = max(done.get(a.el, -INF), a.t1)
    by_end = sorted(acked, key=lambda o: o.t1)
    ends = [o.t1 for o in by_end]
    latest_start = list(itertools.accumulate((o.t0 for o in by_end), max))  # max W.t0 of each prefix
    count = 0
    for r in reads:
        if r.value and r.value[-1] not in done:
            continue  # written by nobody we know of: unknown (unknown_elements shows it)
        x_done = done[r.value[-1]] if r.value else -INF  # the initial empty list was there first
        n = bisect.bisect_left(ends, r.t0)  # the acked appends completed before R was invoked
        count += n > 0 and latest_start[n - 1] > x_done
    return count


def overlapping(grants: list[Op], end: Callable[[Op], float]) -> set[int]:
    """Grants G2 such that a grant G1 of another worker with G1.ok_t <= G2.ok_t has
    [G1.ok_t, end(G1)) and [G2.ok_t, end(G2)) overlapping for a positive length."""
    hits: set[int] = set()
    reach: dict[int, float] = {}  # worker -> the latest end of its grants so far
    order = sorted(range(len(grants)), key=lambda i: grants[i].t1)
    for _, same_time in itertools.groupby(order, key=lambda i: grants[i].t1):
        group = list(same_time)
        for i in group:  # grants at the same ok time count as earlier than each other
            reach[grants[i].w] = max(reach.get(grants[i].w, -INF), end(grants[i]))
        for i in group:
            g = grants[i]
            if end(g) > g.t1 and any(until > g.t1 for w, until in reach.items() if w != g.w):
                hits.add(i)
    return hits


def mutex(grants: list[Op], ops: list[Op], ends: dict[str, float], end_of_run: float) -> tuple[int, int]:
    """(mutex_violations, expired_overlaps) of the ok grants."""
    released: dict[str, float] = {}
    for o in ops:
        if o.op == "release":
            released[o.gid] = min(released.get(o.gid, INF), o.t0)

    def belief(g: Op) -> float:
        return ends.get(g.gid, end_of_run)

    def certain(g: Op) -> float:
        return min(g.t0 + g.lease, released.get(g.gid, belief(g)), end_of_run)

    violations = overlapping(grants, certain)
    expired = overlapping(grants, belief) - violations
    return len(violations), len(expired)


def tokens(grants: list[Op]) -> tuple[int, int]:
    """(token_order_violations, duplicate_tokens) of the ok grants with a token."""
    fenced = [(g.t0, g.t1, g.token) for g in grants if g.token is not None]
    by_ok = sorted(fenced, key=lambda g: g[1])
    violations, i, highest = 0, 0, -INF  # highest token granted before G2 was invoked
    for invoked, _, token in sorted(fenced):
        while i < len(by_ok) and by_ok[i][1] < invoked:
            highest = max(highest, by_ok[i][2])
            i += 1
        violations += highest >= token
    duplicates = sum(n - 1 for n in Counter(token for _, _, token in fenced).values())
    return violations, duplicates


def stale_writes(c: Check, history: list[str], began: dict[str, float]) -> None:
    """Classifies the store's writes: stale = a grant that began later had already accessed it."""
    newest = -INF  # start of the newest grant that has accessed the store so far
    for entry in history:
        parts = entry.split(" ")
        if len(parts) != 5:
            continue
        op, gid, _token, ok, _element = parts
        start = began.get(gid)
        if start is None:
            continue  # an access of a grant never acknowledged to its worker
        if op == "w":
            stale = newest > start
            if ok == "1" and stale:
                c.stale_writes_accepted += 1
            elif ok == "0" and stale:
                c.stale_writes_rejected += 1
            elif ok == "0":
                c.current_writes_rejected += 1
        newest = max(newest, start)


def waits(acquires: list[Op]) -> list[float]:
    """Per grant: its ok time minus the invoke of its worker's first attempt since its previous grant."""
    result: list[float] = []
    first: dict[int, float] = {}
    for a in acquires:  # each worker's acquires in its own order
        started = first.setdefault(a.w, a.t0)
        if a.type == "ok":
            result.append(a.t1 - started)
            del first[a.w]
    return result


def check(events: list[dict[str, Any]], history: list[str], final: list[str], end_of_run: float) -> Check:
    c = Check()
    ops, ends = operations(events)
    final = [x for x in final if x]
    acquires = [o for o in ops if o.op == "acquire"]
    grants = [o for o in acquires if o.type == "ok"]
    appends = [o for o in ops if o.op == "append"]
    acked = [o for o in appends if o.type == "ok"]
    reads = [o for o in ops if o.op == "read" and o.type == "ok"]
    c.grants = len(grants)
    c.acquires_unknown = sum(o.type == "info" for o in acquires)
    c.ops = len(appends)
    c.acknowledged = len(acked)
    in_final = set(final)
    c.lost_updates = len({o.el for o in acked} - in_final)
    c.unknown_elements = len(in_final - {o.el for o in appends})  # must be 0: only clients write
    c.duplicated = duplicated(final, reads)
    c.reordered = reordered(acked, final)
    c.stale_reads = stale_reads(reads, appends, acked)
    c.mutex_violations, c.expired_overlaps = mutex(grants, ops, ends, end_of_run)
    c.token_order_violations, c.duplicate_tokens = tokens(grants)
    stale_writes(c, history, {g.gid: g.t1 for g in grants})
    c.waits = waits(acquires)
    return c


def as_row(c: Check, elapsed: float, promise: str = "all") -> dict[str, Any]:
    """The ``main`` (or ``control``) dict of a run in results.json; ``anomalies`` counts what
    breaks the promise of the side's strategy:

    - ``lock`` (an unfenced lock: mutual exclusion within leases): mutex violations, token order,
      and what a linearizable resource can never show (duplicated, reordered, stale reads). Lost
      updates and stale writes accepted are reported beside: an unfenced lock loses them whenever
      a holder outlives its lease, which is not a broken promise.
    - ``resource`` (a fenced resource: no damage, whoever holds the lock): everything but the
      mutex violations, which fencing makes harmless rather than impossible.
    - ``all``: every count (the controls, correct without faults).
    """
    row: dict[str, Any] = {f.name: getattr(c, f.name) for f in fields(c) if f.name != "waits"}
    row["grants_per_s"] = round(c.grants / elapsed, 1) if elapsed > 0 else 0.0
    row["wait_p99_ms"] = round(percentile(c.waits, 0.99) * 1000, 2)
    if promise == "lock":
        row["anomalies"] = c.anomalies - c.lost_updates - c.stale_writes_accepted
    elif promise == "resource":
        row["anomalies"] = c.anomalies - c.mutex_violations
    elif promise == "all":
        row["anomalies"] = c.anomalies
    else:
        raise ValueError(f"unknown promise {promise}")
    return row


def percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]
