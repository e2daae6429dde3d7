"""Benchmark of the Python client (``make bench-python``).

1. Contention: N processes (1, 8, 32) take one lock in a loop (1 ms critical section) for a few
   seconds: acquisitions/s, handoffs/s (grants to another process than the previous holder) and
   the wait from the acquire call to the grant (p50/p99), for the client in module mode
   (LOCK.ACQUIRE ... WAIT), in Lua mode (Redisson's pub/sub waiting, on a server without the
   module) and for redis-py's own ``Lock`` (SET NX + polling every 0.1 s, its default).
2. Overhead: one uncontended acquire + release through the client against the raw commands it
   sends, byte for byte (``LOCK.ACQUIRE k <uuid>:<n> 30000 WAIT 0`` / ``LOCK.RELEASE k <uuid>:<n>
   30000``, our Lua scripts by EVALSHA), and redis-py's ``Lock``.

It starts its own redis-server processes on free loopback ports and writes a markdown table to
stdout and to ``--out``.
"""

from __future__ import annotations

import argparse
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
KINDS = ("module", "lua", "redis-py Lock")


def contend(kind: str, port: int, start: Any, deadline: float, results: Any) -> None:
    r = redis.Redis(port=port)
    client = None
    if kind == "redis-py Lock":
        lock: Any = r.lock("bench:lock", timeout=30)
    else:
        client = redislock.LockClient(r, mode=kind)
        lock = client.lock("bench:lock")
    samples: list[tuple[float, float]] = []
    start.wait()
    while (left := deadline - time.monotonic()) > 0:
        asked = time.monotonic()
        got = lock.acquire(blocking_timeout=left) if kind == "redis-py Lock" else lock.acquire(timeout=left)
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


def run_overhead(module_port: int, plain_port: int, rounds: int) -> list[tuple[str, float, float, float, float]]:
    rm, rp = redis.Redis(port=module_port), redis.Redis(port=plain_port)
    module_client, lua_client = redislock.LockClient(rm, mode="module"), redislock.LockClient(rp, mode="lua")
    mlock, llock = module_client.lock("bench:o"), lua_client.lock("bench:o")
    # The raw rows send exactly what the client sends for a blocking acquire with the watchdog
    # lease and its release: an owner id of the client's form (<uuid>:<n>), WAIT 0 in module
    # mode, and the lease re-armed by the release of a kept hold.
    owner = f"{module_client.id}:1"
    for body in _scripts.ALL:
        rp.script_load(body)
    acquire, unlock = _scripts.SHA[_scripts.ACQUIRE], _scripts.SHA[_scripts.UNLOCK]

    def raw_module() -> None:
        rm.execute_command("LOCK.ACQUIRE", "bench:o", owner, 30000, "WAIT", 0)
        rm.execute_command("LOCK.RELEASE", "bench:o", owner, 30000)

    def raw_lua() -> None:
        rp.evalsha(acquire, 1, "bench:o", 30000, owner)
        rp.evalsha(unlock, 2, "bench:o", "redisson_lock__channel:{bench:o}", 0, 30000, owner, "PUBLISH")

    def client(lock: redislock.Lock) -> Any:
        def run() -> None:
            lock.acquire()
            lock.release()

        return run

    redis_py = rm.lock("bench:p", timeout=30)

    def redis_py_lock() -> None:
        redis_py.acquire()
        redis_py.release()

    raw_m, lib_m, raw_l, lib_l, plain = interleaved(
        [raw_module, client(mlock), raw_lua, client(llock), redis_py_lock], rounds
    )
    rows = [
        ("module mode", raw_m, lib_m, CPU[0], CPU[1]),
        ("lua mode", raw_l, lib_l, CPU[2], CPU[3]),
        ("redis-py Lock (SET NX PX + Lua release)", float("nan"), plain, float("nan"), CPU[4]),
    ]
    module_client.close()
    lua_client.close()
    return rows


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
    module_server, plain_server = Server(module=True), Server(module=False)
    try:
        lines = [
            f"Python client benchmark: redis-server {redis.Redis(port=module_server.port).info()['redis_version']},"
            f" Python {sys.version.split()[0]}, redis-py {redis.__version__}, {os.cpu_count()} cores"
            f" (server and clients share them); {args.seconds:g} s per run, {CRITICAL_SECTION * 1000:g} ms"
            " critical section.",
            "",
            "| N processes | strategy | acquisitions/s | handoffs/s | wait p50 (ms) | wait p99 (ms) | fairness |",
            "|---:|---|---:|---:|---:|---:|---:|",
        ]
        for n in (int(x) for x in args.processes.split(",")):
            for kind in KINDS:
                port = plain_server.port if kind == "lua" else module_server.port
                redis.Redis(port=port).delete("bench:lock")
                m = run_contention(kind, port, n, args.seconds)
                label = {"module": "redislock, module (WAIT)", "lua": "redislock, lua (pub/sub)"}.get(kind, kind)
                lines.append(
                    f"| {n} | {label} | {m['acquisitions']:,.0f} | {m['handoffs']:,.0f} "
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
            "| mode | raw commands | redislock | client overhead | client CPU, raw | client CPU, redislock"
            " | CPU overhead |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        for label, raw, lib, raw_cpu, lib_cpu in run_overhead(module_server.port, plain_server.port, args.rounds):
            raw_text = "—" if math.isnan(raw) else f"{raw:.0f}"
            overhead = "—" if math.isnan(raw) else f"{lib - raw:+.0f} ({lib / raw:.2f}x)"
            raw_cpu_text = "—" if math.isnan(raw_cpu) else f"{raw_cpu:.0f}"
            cpu_overhead = "—" if math.isnan(raw_cpu) else f"{lib_cpu - raw_cpu:+.0f} ({lib_cpu / raw_cpu:.2f}x)"
            lines.append(
                f"| {label} | {raw_text} | {lib:.0f} | {overhead} | {raw_cpu_text} | {lib_cpu:.0f} | {cpu_overhead} |"
            )
        text = "\n".join(lines) + "\n"
        print(text)
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text)
    finally:
        module_server.close()
        plain_server.close()


if __name__ == "__main__":
    main()
