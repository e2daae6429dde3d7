"""Benchmark of the Python client (``make bench-python``).

1. Contention: N processes (1, 8, 32) take one lock in a loop (1 ms critical section) for a few
   seconds: acquisitions/s, handoffs/s (grants to another process than the previous holder),
   the wait from the acquire call to the grant (p50/p99) and fairness (Jain's index of the
   acquisitions per process), for the client in module mode (LOCK.ACQUIRE ... WAIT) and in Lua
   mode (Redisson's pub/sub waiting), and side by side for redis-py's own ``Lock`` (SET NX +
   polling every 0.1 s, its default), python-redis-lock (SET NX + BLPOP on a signal key) and
   pottery's ``Redlock`` (one master, random retry delay up to 0.2 s), all on one server.
2. Overhead: one uncontended acquire + release through the client against the raw commands it
   sends, byte for byte (``LOCK.ACQUIRE k <uuid>:<n> 30000 WAIT 0`` / ``LOCK.RELEASE k <uuid>:<n>
   30000``, our Lua scripts by EVALSHA), and the same pair through each peer library: wall
   time and the client process's CPU time per pair.

The peers are optional (``pip install ./clients/python[bench]``); missing ones are skipped.
It starts its own redis-server processes on free loopback ports and writes a markdown table to
stdout and to ``--out``.
"""

from __future__ import annotations

import argparse
import importlib
import math
import multiprocessing
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import redis

import redislock
from redislock import _scripts

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from servers import Server

CRITICAL_SECTION = 0.001
PEERS = ("redis-py Lock", "python-redis-lock", "pottery Redlock")
KINDS = ("module", "lua", *PEERS)
LABELS = {"module": "redislock, module (WAIT)", "lua": "redislock, lua (pub/sub)"}


def available(kind: str) -> bool:
    """Whether a peer library is installed (the ``bench`` extra)."""
    module = {"python-redis-lock": "redis_lock", "pottery Redlock": "pottery"}.get(kind)
    if module is None:
        return True
    try:
        importlib.import_module(module)
    except ImportError:
        return False
    return True


def make_lock(kind: str, r: redis.Redis, name: str) -> tuple[Any, Any]:
    """(lock, redislock client or None) for ``kind``: a 30 s lease everywhere."""
    if kind == "redis-py Lock":
        return r.lock(name, timeout=30), None
    if kind == "python-redis-lock":
        return importlib.import_module("redis_lock").Lock(r, name, expire=30), None
    if kind == "pottery Redlock":
        return importlib.import_module("pottery").Redlock(key=name, masters={r}, auto_release_time=30), None
    client = redislock.LockClient(r, mode=kind)
    return client.lock(name), client


def acquire_within(kind: str, lock: Any, left: float) -> bool:
    """One blocking acquire with at most ``left`` seconds, in each library's own terms."""
    if kind == "redis-py Lock":
        return bool(lock.acquire(blocking_timeout=left))
    if kind == "python-redis-lock":  # whole seconds, at least 1
        return bool(lock.acquire(timeout=max(1, math.ceil(left))))
    return bool(lock.acquire(timeout=left))


def contend(kind: str, port: int, start: Any, deadline: float, results: Any) -> None:
    r = redis.Redis(port=port)
    lock, client = make_lock(kind, r, "bench:lock")
    samples: list[tuple[float, float]] = []
    start.wait()
    while (left := deadline - time.monotonic()) > 0:
        asked = time.monotonic()
        got = acquire_within(kind, lock, left)
        granted = time.monotonic()
        if not got:
            break
        time.sleep(CRITICAL_SECTION)
        lock.release()
        samples.append((asked, granted))
    results.put((os.getpid(), samples))
    if client is not None:
        client.close()


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run_contention(kind: str, port: int, processes: int, seconds: float) -> dict[str, float]:
    context = multiprocessing.get_context("fork")
    start, results = context.Event(), context.Queue()
    deadline = time.monotonic() + seconds + 1.0  # one second to start the processes
    workers = [context.Process(target=contend, args=(kind, port, start, deadline, results)) for _ in range(processes)]
    for w in workers:
        w.start()
    time.sleep(deadline - seconds - time.monotonic())
    begun = time.monotonic()
    start.set()
    grants: list[tuple[float, int]] = []
    waits: list[float] = []
    per_process: list[int] = []
    for _ in workers:
        pid, samples = results.get(timeout=seconds + 60)
        per_process.append(len(samples))
        grants += [(granted, pid) for _, granted in samples]
        waits += [granted - asked for asked, granted in samples]
    for w in workers:
        w.join(timeout=30)
    grants.sort()
    handoffs = sum(1 for (_, a), (_, b) in zip(grants, grants[1:]) if a != b)
    elapsed = deadline - begun
    return {
        "acquisitions": len(grants) / elapsed,
        "handoffs": handoffs / elapsed,
        "p50": percentile(waits, 0.50) * 1000,
        "p99": percentile(waits, 0.99) * 1000,
        "fairness": sum(per_process) ** 2 / (len(per_process) * sum(x * x for x in per_process) or 1),
    }


def per_call(fn: Any, rounds: int) -> tuple[float, float]:
    """µs per call: wall time, and this process's CPU time (the client's own work, syscalls
    included, without the server's time or other processes' load)."""
    started, cpu = time.perf_counter(), time.process_time()
    for _ in range(rounds):
        fn()
    return (time.perf_counter() - started) / rounds * 1e6, (time.process_time() - cpu) / rounds * 1e6


CPU: dict[int, float] = {}


def interleaved(fns: list[Any], rounds: int, repeats: int = 7) -> list[float]:
    """µs per call of each function: the median of ``repeats`` alternating runs (the machine is
    shared, so alternating keeps slow moments from landing on one side only). The median CPU
    time per call of each function is left in ``CPU`` (by position)."""
    for fn in fns:
        per_call(fn, rounds // 10)
    runs: list[list[float]] = [[] for _ in fns]
    cpu: list[list[float]] = [[] for _ in fns]
    for _ in range(repeats):
        for i, fn in enumerate(fns):
            wall, used = per_call(fn, rounds // repeats)
            runs[i].append(wall)
            cpu[i].append(used)
    CPU.clear()
    CPU.update({i: statistics.median(c) for i, c in enumerate(cpu)})
    return [statistics.median(r) for r in runs]


def run_overhead(port: int, rounds: int) -> list[tuple[str, float, float]]:
    """(label, wall µs, client CPU µs) per uncontended acquire + release, all on one server."""
    r = redis.Redis(port=port)
    module_client, lua_client = redislock.LockClient(r, mode="module"), redislock.LockClient(r, mode="lua")
    mlock, llock = module_client.lock("bench:om"), lua_client.lock("bench:ol")
    # The raw rows send exactly what the client sends for a blocking acquire with the watchdog
    # lease and its release: an owner id of the client's form (<uuid>:<n>), WAIT 0 in module
    # mode, and the lease re-armed by the release of a kept hold.
    owner = f"{module_client.id}:1"
    for body in _scripts.ALL:
        r.script_load(body)
    acquire, unlock = _scripts.SHA[_scripts.ACQUIRE], _scripts.SHA[_scripts.UNLOCK]

    def raw_module() -> None:
        r.execute_command("LOCK.ACQUIRE", "bench:rm", owner, 30000, "WAIT", 0)
        r.execute_command("LOCK.RELEASE", "bench:rm", owner, 30000)

    def raw_lua() -> None:
        r.evalsha(acquire, 1, "bench:rl", 30000, owner)
        r.evalsha(unlock, 2, "bench:rl", "redisson_lock__channel:{bench:rl}", 0, 30000, owner, "PUBLISH")

    def pair(lock: Any) -> Any:
        def run() -> None:
            lock.acquire()
            lock.release()

        return run

    rows: list[tuple[str, Any]] = [
        ("raw LOCK.ACQUIRE ... WAIT 0 + LOCK.RELEASE", raw_module),
        ("redislock, module mode", pair(mlock)),
        ("raw EVALSHA acquire + unlock (our Lua)", raw_lua),
        ("redislock, lua mode", pair(llock)),
    ]
    for kind in PEERS:
        if available(kind):
            lock, _ = make_lock(kind, r, f"bench:{kind}")
            rows.append((kind, pair(lock)))
    walls = interleaved([fn for _, fn in rows], rounds)
    module_client.close()
    lua_client.close()
    return [(label, wall, CPU[i]) for i, ((label, _), wall) in enumerate(zip(rows, walls))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--module", default=None, help="path of libredis_lock.so (default: LOCK_MODULE / make build)")
    parser.add_argument("--out", default="bench-results/python.md")
    parser.add_argument("--seconds", type=float, default=3.0, help="length of each contention run")
    parser.add_argument("--rounds", type=int, default=3000, help="acquire+release pairs per overhead row")
    parser.add_argument("--processes", default="1,8,32")
    args = parser.parse_args()
    if args.module:
        os.environ["LOCK_MODULE"] = args.module
    # One server for every strategy (the Lua mode is forced with mode="lua"; the peers ignore
    # the module), so they are measured side by side on the same process.
    server = Server(module=True)
    kinds = [k for k in KINDS if available(k)]
    skipped = [k for k in KINDS if k not in kinds]
    try:
        version = redis.Redis(port=server.port).info()["redis_version"]
        lines = [
            f"Python client benchmark: redis-server {version} (one server, the module loaded), Python"
            f" {sys.version.split()[0]}, redis-py {redis.__version__}, {os.cpu_count()} cores (server and"
            f" clients share them); {args.seconds:g} s per run, {CRITICAL_SECTION * 1000:g} ms critical section."
            + (f" Not installed, skipped: {', '.join(skipped)}." if skipped else ""),
            "",
            "| N processes | strategy | acquisitions/s | handoffs/s | wait p50 (ms) | wait p99 (ms) | fairness |",
            "|---:|---|---:|---:|---:|---:|---:|",
        ]
        for n in (int(x) for x in args.processes.split(",")):
            for kind in kinds:
                redis.Redis(port=server.port).delete("bench:lock")
                m = run_contention(kind, server.port, n, args.seconds)
                lines.append(
                    f"| {n} | {LABELS.get(kind, kind)} | {m['acquisitions']:,.0f} | {m['handoffs']:,.0f} "
                    f"| {m['p50']:.2f} | {m['p99']:.2f} | {m['fairness']:.2f} |"
                )
                print(lines[-1], file=sys.stderr, flush=True)
        lines += [
            "",
            "handoffs/s: grants to another process than the previous holder; fairness: Jain's index of"
            " the acquisitions per process (1 = equal shares). Waits still open when a run ends are not"
            " counted.",
            "",
            "Uncontended acquire + release, one connection, per pair (µs, median of 7 alternating runs;"
            " wall time, and the client process's CPU time, which the other load on a shared machine"
            " does not move):",
            "",
            "| strategy | wall (µs) | wall vs redis-py Lock | client CPU (µs) | CPU vs redis-py Lock |",
            "|---|---:|---:|---:|---:|",
        ]
        rows = run_overhead(server.port, args.rounds)
        base = {label: (wall, cpu) for label, wall, cpu in rows}.get("redis-py Lock", (math.nan, math.nan))
        for label, wall, cpu in rows:
            lines.append(f"| {label} | {wall:.0f} | {wall / base[0]:.2f}x | {cpu:.0f} | {cpu / base[1]:.2f}x |")
        text = "\n".join(lines) + "\n"
        print(text)
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text)
    finally:
        server.close()


if __name__ == "__main__":
    main()
