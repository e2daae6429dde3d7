"""make safety: every strategy under every fault, checked; writes target/safety/results.{json,md}.

    target/py-venv/bin/python safety/run.py --module target/release/libredis_lock.so \
        [--seconds 15] [--out target/safety] [--strategies a,b] [--faults a,b] [--workloads a,b]

Exit status 1 when a row contradicts the README's guarantees (module-fence: a stale write accepted
or an update lost; module-sync-replicas: overlapping holders under failover) or when the checker
finds an element in the store that no client wrote (a harness bug).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from servers import server_version
from strategies import STRATEGIES, workload_of
from suite import FAULTS, Config, run_cell

COLUMNS = [
    "strategy",
    "fault",
    "workload",
    "seconds",
    "ops",
    "acknowledged",
    "lost_updates",
    "overlapping_holders",
    "stale_writes_accepted",
    "stale_writes_rejected",
    "grants_per_s",
    "wait_p99_ms",
]


def violations(row: dict[str, Any]) -> list[str]:
    found = []
    if row["strategy"] == "module-fence" and (row["stale_writes_accepted"] or row["lost_updates"]):
        found.append("module-fence: a stale write was accepted or an update lost")
    if (
        row["strategy"] == "module-sync-replicas"
        and row["fault"] == "failover-lost-writes"
        and row["overlapping_holders"]
    ):
        found.append("module-sync-replicas: overlapping holders under failover")
    if row.get("_unknown_elements"):
        found.append("the store holds elements no client wrote (harness bug)")
    return found


def memory_gib() -> float:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30


def markdown(doc: dict[str, Any]) -> str:
    lines = [
        f"Safety suite, {doc['date']}, redis-server {doc['server']}, {doc['machine']}.",
        "",
        "| strategy | fault | workload | s | ops | acknowledged | lost updates | overlapping holders "
        "| stale writes accepted | stale writes rejected | grants/s | wait p99 (ms) | faults injected |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in doc["runs"]:
        lines.append(
            f"| {r['strategy']} | {r['fault']} | {r['workload']} | {r['seconds']:g} | {r['ops']} | {r['acknowledged']} "
            f"| {r['lost_updates']} | {r['overlapping_holders']} | {r['stale_writes_accepted']} "
            f"| {r['stale_writes_rejected']} | {r['grants_per_s']} | {r['wait_p99_ms']} | {r.get('_faults', '')} |"
        )
    notes = [
        f"- {r['strategy']} / {r['fault']} / {r['workload']}: {r['_current_writes_rejected']} writes of the "
        "current holder rejected"
        for r in doc["runs"]
        if r.get("_current_writes_rejected")
    ]
    if notes:
        lines += ["", *notes]
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--module", default=os.environ.get("LOCK_MODULE", "target/release/libredis_lock.so"))
    ap.add_argument("--seconds", type=float, default=float(os.environ.get("SAFETY_SECONDS") or 15))
    ap.add_argument("--out", default="target/safety")
    ap.add_argument("--strategies", default=",".join(STRATEGIES))
    ap.add_argument("--faults", default=",".join(FAULTS))
    ap.add_argument("--workloads", default="lock-set,guarded,mutex")
    ap.add_argument("--clients", type=int, default=4)
    args = ap.parse_args()
    module = str(Path(args.module).resolve())
    if not Path(module).exists():
        print(f"module {module} not found (make build)", file=sys.stderr)
        return 2
    strategies = [s for s in args.strategies.split(",") if s]
    faults = [f for f in args.faults.split(",") if f]
    workloads = set(args.workloads.split(","))
    for name in strategies:
        if name not in STRATEGIES:
            print(f"unknown strategy {name}; known: {', '.join(STRATEGIES)}", file=sys.stderr)
            return 2
    for name in faults:
        if name not in FAULTS:
            print(f"unknown fault {name}; known: {', '.join(FAULTS)}", file=sys.stderr)
            return 2
    doc: dict[str, Any] = {
        "server": server_version(),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": f"{os.cpu_count()} cores, {memory_gib():.0f} GiB",
        "runs": [],
    }
    cells = [(s, f, w) for f in faults for s in strategies for w in workload_of(s) if w in workloads]
    started = time.monotonic()
    problems: list[str] = []
    for n, (strategy, fault, workload) in enumerate(cells, 1):
        cfg = Config(strategy, fault, workload, args.seconds, clients=args.clients)
        row = run_cell(cfg, module)
        doc["runs"].append(row)
        problems += [f"{strategy}/{fault}/{workload}: {p}" for p in violations(row)]
        print(
            f"[{n}/{len(cells)} {time.monotonic() - started:5.0f}s] {strategy:21} {fault:22} {workload:8} "
            f"ops {row['ops']:5} lost {row['lost_updates']:4} overlap {row['overlapping_holders']:3} "
            f"stale acc {row['stale_writes_accepted']:3} rej {row['stale_writes_rejected']:3} "
            f"grants/s {row['grants_per_s']:6} p99 {row['wait_p99_ms']:7} ms faults {row['_faults']}",
            flush=True,
        )
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.md").write_text(markdown(doc))
    # results.json has exactly the schema: server, date, runs (the machine is in results.md)
    public = {"server": doc["server"], "date": doc["date"], "runs": [{k: r[k] for k in COLUMNS} for r in doc["runs"]]}
    (out / "results.json").write_text(json.dumps(public, indent=1) + "\n")
    print(f"wrote {out / 'results.json'} and {out / 'results.md'} ({time.monotonic() - started:.0f} s)")
    for p in problems:
        print(f"CONTRADICTS THE README: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
