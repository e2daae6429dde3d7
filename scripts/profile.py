#!/usr/bin/env python3
"""Instructions per command, counted by callgrind: the module's hot path against the native
commands and the Lua script, on any redis-server.

    python3 scripts/profile.py --module target/release/libredis_lock.so [--server redis-server]
                               [--n 20000] [--scope call|process] [--out docs/profile/x.md]

redis-server runs under `valgrind --tool=callgrind`. Each phase (N commands, pipelined 32 at a
time over one connection) is bracketed by `callgrind_control --zero` and `--dump`, so the
count is exactly that phase's. `--scope call` counts only inside `call()` (the command itself,
its effects, its reply; needs a server binary with symbols, e.g. Debian's); `--scope process`
counts the whole process (adds reading, parsing and writing the socket; for stripped builds).
Instruction counts do not depend on the machine's load.
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ACQUIRE_LUA = (REPO / "clients" / "python" / "src" / "redislock" / "lua" / "acquire.lua").read_bytes()
RENEW_LUA = (REPO / "clients" / "python" / "src" / "redislock" / "lua" / "renew-batch.lua").read_bytes()
BATCH = 100


def enc(*args: object) -> bytes:
    out = b"*%d\r\n" % len(args)
    for a in args:
        b = a if isinstance(a, bytes) else str(a).encode()
        out += b"$%d\r\n%s\r\n" % (len(b), b)
    return out


class Conn:
    def __init__(self, port: int) -> None:
        self.s = socket.create_connection(("127.0.0.1", port))
        self.f = self.s.makefile("rb")

    def reply(self) -> bytes:
        line = self.f.readline()
        if line[:1] == b"$" and line[1:2] != b"-":
            n = int(line[1:])
            return self.f.read(n + 2)[:-2]
        if line[:1] == b"*":
            for _ in range(int(line[1:])):
                self.reply()
        if line[:1] == b"-":
            raise RuntimeError(line.decode())
        return line

    def call(self, *args: object) -> bytes:
        self.s.sendall(enc(*args))
        return self.reply()

    def run(self, cmds: list[bytes]) -> None:
        for i in range(0, len(cmds), 32):
            batch = cmds[i : i + 32]
            self.s.sendall(b"".join(batch))
            for _ in batch:
                self.reply()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def total(path: str) -> int:
    for line in Path(path).read_text().splitlines():
        if line.startswith(("summary:", "totals:")):
            return int(line.split()[1])
    raise RuntimeError(f"no totals in {path}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", default="redis-server")
    ap.add_argument("--module", default=str(REPO / "target" / "release" / "libredis_lock.so"))
    ap.add_argument("--n", type=int, default=20000)
    ap.add_argument("--scope", choices=["call", "process"], default="call")
    ap.add_argument("--out")
    ap.add_argument("--no-scripts", action="store_true", help="a module without lock.redisson-scripts")
    ap.add_argument("--keep", help="copy each phase's callgrind dump into this directory (for callgrind_annotate)")
    args = ap.parse_args()
    n = args.n
    work = tempfile.mkdtemp(prefix="lock-profile-")
    port = free_port()
    sha = __import__("hashlib").sha1(ACQUIRE_LUA).hexdigest()
    cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={work}/cg.out"]
    if args.scope == "call":
        cmd.append("--toggle-collect=call")
    cmd += [args.server, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    cmd += ["--dir", work, "--loadmodule", os.path.abspath(args.module)]
    if not args.no_scripts:
        renew_sha = __import__("hashlib").sha1(RENEW_LUA).hexdigest()
        cmd += ["redisson-extra-scripts", f"acquire:{sha}:{len(ACQUIRE_LUA)},renew-batch:{renew_sha}:{len(RENEW_LUA)}"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        end = time.monotonic() + 120
        while True:
            try:
                c = Conn(port)
                c.call("PING")
                break
            except OSError:
                if time.monotonic() > end:
                    raise
                time.sleep(0.2)
        version = [ln for ln in c.call("INFO", "server").decode().splitlines() if ln.startswith("redis_version")]
        c.call("SCRIPT", "LOAD", ACQUIRE_LUA)
        owner = "6e1d2b3c-4d5e-4f60-8a7b-9c8d7e6f5a4b:1"
        phases = [
            ("LOCK.ACQUIRE (new lock)", [enc("LOCK.ACQUIRE", f"a:{i}", owner, 30000) for i in range(n)]),
            ("LOCK.ACQUIRE (reentry)", [enc("LOCK.ACQUIRE", f"a:{i}", owner, 30000) for i in range(n)]),
            ("LOCK.RELEASE (partial)", [enc("LOCK.RELEASE", f"a:{i}", owner) for i in range(n)]),
            ("LOCK.RENEW", [enc("LOCK.RENEW", f"a:{i}", owner, 30000) for i in range(n)]),
            ("LOCK.RELEASE (full)", [enc("LOCK.RELEASE", f"a:{i}", owner) for i in range(n)]),
            ("LOCK.ACQUIRE ... WAIT (new lock)", [enc("LOCK.ACQUIRE", f"w:{i}", owner, 30000, "WAIT", 100) for i in range(n)]),
            ("SET k v PX", [enc("SET", f"s:{i}", owner, "PX", 30000) for i in range(n)]),
            ("Lua acquire (EVALSHA)", [enc("EVALSHA", sha, 1, f"l:{i}", 30000, owner) for i in range(n)]),
        ]
        c.call("SCRIPT", "LOAD", RENEW_LUA)
        rsha = __import__("hashlib").sha1(RENEW_LUA).hexdigest()
        batches = max(1, n // BATCH)
        keys = [f"b:{i}" for i in range(BATCH)]
        # An hour's lease: phases under callgrind can outlast 30 s, and a renew of expired keys
        # writes nothing (it measured ~1 000 instead of ~7 000 instructions per key at n 20000).
        for k in keys:
            c.call("LOCK.ACQUIRE", k, owner, 3600000)
        renew = enc("EVALSHA", rsha, BATCH, *keys, 3600000, *([owner] * BATCH))
        phases.append((f"Lua renew batch ({BATCH} keys) per key", [renew] * batches))
        if not args.no_scripts:
            native = [enc("EVALSHA", sha, 1, f"r:{i}", 30000, owner) for i in range(n)]
            phases.append(("native acquire (EVALSHA with lock.redisson-scripts native)", native))
            phases.append((f"native renew batch ({BATCH} keys) per key", [renew] * batches))
        rows = []
        for idx, (name, cmds) in enumerate(phases):
            if name.startswith("native"):
                c.call("CONFIG", "SET", "lock.redisson-scripts", "native")
            subprocess.run(["callgrind_control", "-z", str(proc.pid)], capture_output=True, check=False)
            c.run(cmds)
            subprocess.run(["callgrind_control", "-d", f"phase{idx}", str(proc.pid)], capture_output=True, check=False)
            dumps = sorted(glob.glob(f"{work}/cg.out.*"), key=os.path.getmtime)
            rows.append((name, total(dumps[-1]) / (len(cmds) * (BATCH if "batch" in name else 1))))
            if args.keep:
                Path(args.keep).mkdir(parents=True, exist_ok=True)
                shutil.copy(dumps[-1], Path(args.keep) / f"phase{idx}.out")
        c.call("SHUTDOWN", "NOSAVE")
    finally:
        proc.kill() if proc.poll() is None else None
        proc.wait()
        shutil.rmtree(work, ignore_errors=True)
    scope = "inside call()" if args.scope == "call" else "whole process"
    lines = [
        f"{args.server} ({version[0] if version else '?'}), instructions per command, {scope}, {n} commands per phase",
        "",
        "| command | instructions |",
        "|---|---:|",
    ]
    lines += [f"| {name} | {round(ins):,} |".replace(",", " ") for name, ins in rows]
    md = "\n".join(lines) + "\n"
    print(md)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(md)


if __name__ == "__main__":
    sys.exit(main())
