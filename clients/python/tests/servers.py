"""redis-server processes on free loopback ports in temporary directories (tests and benchmark)."""

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

REPO = Path(__file__).resolve().parents[3]
MODULE_PATH = Path(os.environ.get("LOCK_MODULE", REPO / "target" / "release" / "libredis_lock.so")).resolve()
LUA_DIR = REPO / "clients" / "python" / "src" / "redislock" / "lua"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """One redis-server process."""

    def __init__(self, module: bool = True, *args: str) -> None:
        if module and not MODULE_PATH.exists():
            raise RuntimeError(f"module not built: {MODULE_PATH} (run `make build`)")
        self.module = module
        self.args = list(args)
        self.dir = tempfile.mkdtemp(prefix="redislock-test-")
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.stopped = False
        self._start()

    def _start(self) -> None:
        for _ in range(10):  # another process may take the port between probe and bind
            self.port = self.port or free_port()
            command = [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                self.dir,
                "--daemonize",
                "no",
                *self.args,
            ]
            if self.module:
                command += ["--loadmodule", str(MODULE_PATH)]
            log = open(os.path.join(self.dir, "server.log"), "ab")  # noqa: SIM115
            self.proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=self.dir)
            log.close()
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and self.proc.poll() is None:
                try:
                    with redis.Redis(port=self.port, socket_timeout=1) as probe:
                        probe.ping()
                        # Ours, not a process that took the port first (ours then exits).
                        if probe.info("server").get("process_id") == self.proc.pid:
                            return
                    time.sleep(0.02)
                except redis.ConnectionError:
                    time.sleep(0.02)
            self.kill()
            self.port = 0
        raise RuntimeError(f"redis-server did not start; see {self.dir}/server.log")

    def client(self, **kwargs: Any) -> redis.Redis:
        return redis.Redis(port=self.port, **kwargs)

    def pause(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)
        self.stopped = True

    def resume(self) -> None:
        if self.proc is not None and self.stopped:
            self.proc.send_signal(signal.SIGCONT)
            self.stopped = False

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.resume()
            self.proc.kill()
            self.proc.wait(timeout=10)

    def close(self) -> None:
        self.kill()
        shutil.rmtree(self.dir, ignore_errors=True)
