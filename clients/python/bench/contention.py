"""Benchmark of the Python client: N processes contending on one lock, and the client's own
overhead per uncontended acquire + release.

    python clients/python/bench/contention.py [--seconds 3] [--out bench-results/python.md]

Starts its own redis-server processes (with the module for ``module`` mode, without it for
``lua`` mode and redis-py's ``Lock``), on free loopback ports, and stops them at the end. The
module is ``$LOCK_MODULE`` or the repository's ``target/release/libredis_lock.so``.

- Contention: for N = 1, 8, 32 processes, each loops acquire -> (no work) -> release on one lock
  for ``--seconds``; handoffs/s (grants per second, all processes) and the wait of each
  acquire (request to grant), p50 / p99. redis-py's ``Lock`` polls (its default 0.1 s sleep).
- Overhead: one process, uncontended, ``acquire(lease=...)`` + ``release()`` against the raw
  commands the client sends for them, µs per pair.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

import redis

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "clients" / "python" / "src"))

import redislock  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    def __init__(self, module: Optional[str]) -> None:
        self.dir = tempfile.mkdtemp(prefix="redislock-bench-")
        self.port = free_port()
        cmd = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", ""]
        cmd += ["--appendonly", "no", "--dir", self.dir, "--maxclients", "1000"]
        if module:
            cmd += ["--loadmodule", module]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        end = time.monotonic() + 20
        while True:
            try:
                if redis.Redis(port=self.port).ping():
                    return
            except redis.exceptions.ConnectionError:
                if time.monotonic() > end:
                    raise
                time.sleep(0.02)

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def worker(port: int, impl: str, seconds: float, start: Any, out: Any) -> None:
    r = redis.Redis(port=port, socket_timeout=60)
    waits: list[float] = []
    grants = 0
    if impl == "redis-py Lock":
        lock: Any = r.lock("bench:lock", timeout=30, sleep=0.1, blocking_timeout=None)
    else:
        client = redislock.LockClient(r, mode="module" if impl == "redislock module" else "lua")
        lock = client.lock("bench:lock")
    start.wait()
    end = time.monotonic() + seconds
    while True:
        t0 = time.monotonic()
        if t0 >= end:
            break
        if impl == "redis-py Lock":
            ok = lock.acquire(blocking=True, blocking_timeout=max(end - t0, 0.01))
        else:
            ok = lock.acquire(timeout=max(end - t0, 0.01), lease=30)
        if not ok:
            break
        waits.append(time.monotonic() - t0)
        grants += 1
        lock.release()
    out.put((grants, waits))


def contention(impl: str, port: int, n: int, seconds: float) -> dict[str, Any]:
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Event()
    out = ctx.Queue()
    procs = [ctx.Process(target=worker, args=(port, impl, seconds, start, out)) for _ in range(n)]
    for p in procs:
        p.start()
    time.sleep(1.0 + 0.05 * n)  # let every process connect before the start signal
    start.set()
    results = [out.get(timeout=seconds + 120) for _ in procs]
    for p in procs:
        p.join(30)
    waits = sorted(w for _, ws in results for w in ws)
    grants = sum(g for g, _ in results)
    q = statistics.quantiles(waits, n=100) if len(waits) >= 2 else [0.0] * 99
    return {
        "impl": impl,
        "n": n,
        "handoffs_per_sec": grants / seconds,
        "p50_ms": (q[49] if waits else float("nan")) * 1000,
        "p99_ms": (q[98] if waits else float("nan")) * 1000,
    }


def overhead(port: int, mode: str, pairs: int) -> tuple[float, float]:
    """(client µs per acquire+release, raw commands µs per pair)."""
    r = redis.Redis(port=port)
    client = redislock.LockClient(r, mode=mode)
    lock = client.lock("bench:over", owner="bench-owner")
    assert lock.acquire(lease=30)
    lock.release()
    t0 = time.perf_counter()
    for _ in range(pairs):
        lock.acquire(lease=30)
        lock.release()
    t_client = time.perf_counter() - t0
    if mode == "module":
        t0 = time.perf_counter()
        for _ in range(pairs):
            r.execute_command("LOCK.ACQUIRE", "bench:over", "bench-owner", 30000)
            r.execute_command("LOCK.RELEASE", "bench:over", "bench-owner")
        t_raw = time.perf_counter() - t0
    else:
        acq = client._script("acquire")
        unl = client._script("unlock")
        t0 = time.perf_counter()
        for _ in range(pairs):
            acq(keys=["bench:over"], args=[30000, "bench-owner"])
            unl(
                keys=["bench:over", "redisson_lock__channel:{bench:over}"],
                args=["0", 30000, "bench-owner", "PUBLISH"],
            )
        t_raw = time.perf_counter() - t0
    client.close()
    return t_client / pairs * 1e6, t_raw / pairs * 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--out", default="bench-results/python.md")
    ap.add_argument("--clients", default="1,8,32")
    args = ap.parse_args()
    module = os.environ.get("LOCK_MODULE") or str(REPO / "target" / "release" / "libredis_lock.so")
    with_module, without = Server(module), Server(None)
    rows = []
    try:
        for n in [int(x) for x in args.clients.split(",")]:
            for impl, srv in [
                ("redislock module", with_module),
                ("redislock lua", without),
                ("redis-py Lock", without),
            ]:
                print(f"[python] {impl}, {n} processes", file=sys.stderr)
                rows.append(contention(impl, srv.port, n, args.seconds))
        over = {m: overhead(s.port, m, 2000) for m, s in [("module", with_module), ("lua", without)]}
    finally:
        with_module.close()
        without.close()
    lines = [
        "## Python client (redislock)\n",
        f"N processes contending on one lock for {args.seconds:.0f} s each (acquire, no work, release); "
        "handoffs/s = grants per second over all processes; wait = request to grant. "
        "redis-py's Lock polls every 0.1 s (its default).\n",
        "| processes | client | handoffs/s | wait p50 ms | wait p99 ms |",
        "|---:|---|---:|---:|---:|",
    ]
    for r in rows:
        rate, p50, p99 = r["handoffs_per_sec"], r["p50_ms"], r["p99_ms"]
        lines.append(f"| {r['n']} | {r['impl']} | {rate:.0f} | {p50:.2f} | {p99:.2f} |")
    lines += [
        "",
        "Uncontended acquire + release, one process, fixed lease (no watchdog), 2 000 pairs:\n",
        "| mode | redislock µs/pair | raw commands µs/pair | client overhead |",
        "|---|---:|---:|---:|",
    ]
    for m, (c, raw) in over.items():
        lines.append(f"| {m} | {c:.1f} | {raw:.1f} | {c - raw:+.1f} µs ({c / raw:.2f}x) |")
    md = "\n".join(lines) + "\n"
    print(md)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(md)


if __name__ == "__main__":
    main()
