"""Real redis-server processes for the tests: on free loopback ports, in temporary directories,
with the redis-lock module (``LOCK_MODULE``, default ``<repo>/target/release/libredis_lock.so``)
or without it; always killed and removed, even when a test fails."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

import redislock

REPO = Path(__file__).resolve().parents[3]
MODULE_PATH = Path(os.environ.get("LOCK_MODULE", REPO / "target" / "release" / "libredis_lock.so")).resolve()
LUA_DIR = REPO / "lua"


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
                    return
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


@pytest.fixture
def servers() -> Iterator[list[Server]]:
    """Start servers for one test with ``servers.append(Server(...))``; all closed afterwards."""
    started: list[Server] = []
    try:
        yield started
    finally:
        for server in started:
            server.close()


@pytest.fixture(scope="session")
def module_server() -> Iterator[Server]:
    server = Server(module=True)
    try:
        yield server
    finally:
        server.close()


@pytest.fixture(scope="session")
def plain_server() -> Iterator[Server]:
    server = Server(module=False)
    try:
        yield server
    finally:
        server.close()


@pytest.fixture(params=["module", "lua"])
def server(request: pytest.FixtureRequest, module_server: Server, plain_server: Server) -> Server:
    """The shared server of a mode (emptied): lua mode runs where the module is not loaded."""
    chosen = module_server if request.param == "module" else plain_server
    with chosen.client() as r:
        r.flushall()
        r.script_flush()
    return chosen


@pytest.fixture
def r(server: Server) -> Iterator[redis.Redis]:
    client = server.client()
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def locks(r: redis.Redis, server: Server) -> Iterator[redislock.LockClient]:
    client = redislock.LockClient(r, lease=5.0)
    assert client.mode == ("module" if server.module else "lua")
    try:
        yield client
    finally:
        client.close()


def wait_until(predicate: Any, timeout: float = 5.0, interval: float = 0.01) -> bool:
    """Poll ``predicate`` until true or ``timeout``: for state with no reply to await."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return bool(predicate())


def lua_script(name: str) -> str:
    return (LUA_DIR / f"{name}.lua").read_text()


def lock_info(r: redis.Redis, key: str) -> dict[str, Any]:
    """LOCK.INFO as a dict with str keys (RESP2 flat array or RESP3 map)."""
    reply = r.execute_command("LOCK.INFO", key)
    if reply is None:
        return {}
    items = dict(zip(reply[::2], reply[1::2])) if isinstance(reply, list) else reply
    return {k.decode() if isinstance(k, bytes) else k: v for k, v in items.items()}
