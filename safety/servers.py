"""redis-server processes on free loopback ports, started and killed by the suite."""

from __future__ import annotations

import hashlib
import mmap
import os
import shutil
import socket
import struct
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import redis

SHIM_SOURCE = Path(__file__).resolve().parent / "clockshim.c"


def clock_shim() -> str:
    """Build the clock shim (safety/clockshim.c) once per source version; return the .so path."""
    source = SHIM_SOURCE.read_bytes()
    out = Path(tempfile.gettempdir()) / f"safety-clockshim-{hashlib.sha1(source).hexdigest()[:12]}.so"
    if not out.exists():
        tmp = out.with_suffix(f".{os.getpid()}.so")
        subprocess.run(["cc", "-shared", "-fPIC", "-O2", "-o", str(tmp), str(SHIM_SOURCE)], check=True)
        tmp.replace(out)
    return str(out)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def server_version() -> str:
    out = subprocess.run(["redis-server", "--version"], capture_output=True, text=True, check=True).stdout
    for part in out.split():
        if part.startswith("v="):
            return part[2:]
    return out.strip()


class Server:
    """One redis-server, optionally with the module, optionally a replica.

    No persistence unless ``aof`` (appendonly, appendfsync always: ``restart()`` then comes back
    with every acknowledged write). With ``clock`` the server runs under the clock shim and
    ``clock_jump`` / ``clock_rate`` move its wall clock.
    """

    def __init__(
        self,
        module: str | None = None,
        replica_of: int | None = None,
        name: str = "redis",
        aof: bool = False,
        clock: bool = False,
    ) -> None:
        self.module = module
        self.name = name
        self.replica_of = replica_of
        self.aof = aof
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix=f"safety-{name}-{self.port}-"))
        self.clock_file: Path | None = None
        self.clock_offset = 0.0  # seconds the wall clock was moved by clock_jump
        self.env = dict(os.environ)
        if clock:
            self.clock_file = self.dir / "clock"
            self.clock_file.write_bytes(struct.pack("<qqq", 0, 1_000_000, 0))
            self.env.update(LD_PRELOAD=clock_shim(), SAFETY_CLOCK_FILE=str(self.clock_file))
        self.conn = redis.Redis(port=self.port, socket_timeout=5, socket_connect_timeout=2)
        self.launch()

    def launch(self) -> None:
        persistence = ["--appendonly", "yes", "--appendfsync", "always"] if self.aof else ["--appendonly", "no"]
        args = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", *persistence]
        args += ["--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0", "--dir", str(self.dir)]
        args += ["--logfile", str(self.dir / "redis.log"), "--daemonize", "no"]
        if self.module:
            args += ["--loadmodule", self.module]
        if self.replica_of is not None:
            args += ["--replicaof", "127.0.0.1", str(self.replica_of)]
        quiet = subprocess.DEVNULL
        self.proc = subprocess.Popen(args, stdin=quiet, stdout=quiet, stderr=quiet, env=self.env)
        replica_of = self.replica_of
        name = self.name
        deadline = time.monotonic() + 20
        while True:
            try:
                # Ours, not a process that took the port first (ours then exits: no silent mix-up).
                ours = self.conn.info("server").get("process_id") == self.proc.pid
                if ours and (replica_of is None or self.link_up()):
                    break
            except redis.RedisError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"redis-server {name} on {self.port} did not come up (see {self.dir})")
            time.sleep(0.005)

    def restart(self) -> None:
        """kill -9, then start again on the same port and directory (AOF: from the log)."""
        self.proc.kill()
        self.proc.wait(10)
        self.conn.close()
        self.launch()

    def _clock(self, offset_us: int | None = None, rate_ppm: int | None = None) -> None:
        if self.clock_file is None:
            raise RuntimeError(f"{self.name} runs without the clock shim")
        with open(self.clock_file, "r+b") as f, mmap.mmap(f.fileno(), 24) as m:
            offset, rate, anchor = struct.unpack("<qqq", m[:24])
            if rate_ppm is not None:
                # re-anchor: keep the time shown now, change the rate from here on
                now = time.clock_gettime_ns(time.CLOCK_REALTIME) // 1000
                if rate != 1_000_000 and now > anchor:
                    offset += (now - anchor) * (rate - 1_000_000) // 1_000_000
                rate, anchor = rate_ppm, now
            if offset_us is not None:
                offset += offset_us
            m[:24] = struct.pack("<qqq", offset, rate, anchor)

    def clock_jump(self, seconds: float) -> None:
        """Move the server's wall clock by ``seconds`` at once (forward: its keys expire early)."""
        self._clock(offset_us=int(seconds * 1_000_000))
        self.clock_offset += seconds

    def clock_rate(self, rate: float) -> None:
        """Make the server's wall clock run ``rate`` times as fast as real time from now on."""
        self._clock(rate_ppm=int(rate * 1_000_000))

    def server_time(self) -> float:
        sec, usec = self.call("TIME")
        return int(sec) + int(usec) / 1e6

    def call(self, *args: Any) -> Any:
        return self.conn.execute_command(*args)  # type: ignore[no-untyped-call]

    def link_up(self) -> bool:
        info = self.conn.info("replication")
        return bool(info.get("master_link_status") == "up")

    def kill(self) -> None:
        """SIGKILL and remove its directory."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self.conn.close()
        shutil.rmtree(self.dir, ignore_errors=True)
