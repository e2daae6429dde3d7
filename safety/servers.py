"""redis-server processes on free loopback ports, started and killed by the suite."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import redis


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
    """One redis-server: no persistence (no RDB, no AOF), optionally with the module, optionally a replica."""

    def __init__(self, module: str | None = None, replica_of: int | None = None, name: str = "redis") -> None:
        self.module = module
        self.name = name
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix=f"safety-{name}-{self.port}-"))
        args = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        args += ["--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0", "--dir", str(self.dir)]
        args += ["--logfile", str(self.dir / "redis.log"), "--daemonize", "no"]
        if module:
            args += ["--loadmodule", module]
        if replica_of is not None:
            args += ["--replicaof", "127.0.0.1", str(replica_of)]
        quiet = subprocess.DEVNULL
        self.proc = subprocess.Popen(args, stdin=quiet, stdout=quiet, stderr=quiet)
        self.stopped = False
        self.conn = redis.Redis(port=self.port, socket_timeout=5, socket_connect_timeout=2)
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

    def call(self, *args: Any) -> Any:
        return self.conn.execute_command(*args)  # type: ignore[no-untyped-call]

    def link_up(self) -> bool:
        info = self.conn.info("replication")
        return bool(info.get("master_link_status") == "up")

    def signal(self, sig: int) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)
            self.stopped = sig == signal.SIGSTOP

    def kill(self) -> None:
        """SIGKILL (after SIGCONT, so a stopped server dies too) and remove its directory."""
        if self.proc.poll() is None:
            self.proc.kill()
            if self.stopped:
                os.kill(self.proc.pid, signal.SIGCONT)
            self.proc.wait(10)
        self.conn.close()
        shutil.rmtree(self.dir, ignore_errors=True)
