"""Real redis-server processes for the tests: free loopback ports, own temp dirs, the module
(``LOCK_MODULE`` or the repository's ``target/release/libredis_lock.so``) loaded or not, always
killed and removed afterwards."""

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
from typing import Optional

import pytest
import redis

import redislock

REPO = Path(__file__).resolve().parents[3]


def module_path() -> str:
    p = os.environ.get("LOCK_MODULE") or str(REPO / "target" / "release" / "libredis_lock.so")
    if not Path(p).exists():
        pytest.exit(f"module not found at {p}: run `make build` (or set LOCK_MODULE)", returncode=2)
    return p


def free_port(cluster: bool = False) -> int:
    """A free loopback port; for a cluster node one <= 55535 whose bus port (+10000) is free."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if not cluster:
            return port
        if port <= 55535:
            with socket.socket() as b:
                try:
                    b.bind(("127.0.0.1", port + 10000))
                    return port
                except OSError:
                    continue


class Server:
    def __init__(self, module: bool = True, args: tuple[str, ...] = ()) -> None:
        self.module = module
        self.args = args
        self.dir = tempfile.mkdtemp(prefix="redislock-py-")
        self.proc: Optional[subprocess.Popen[bytes]] = None
        self.port = 0
        for _ in range(20):
            self.port = free_port("--cluster-enabled" in args)
            if self._spawn():
                return
        raise RuntimeError("no free port for redis-server")

    def _spawn(self) -> bool:
        cmd = [
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
            "--logfile",
            "redis.log",
            "--repl-diskless-sync-delay",
            "0",
            "--daemonize",
            "no",
        ]
        if self.module:
            cmd += ["--loadmodule", module_path()]
        cmd += list(self.args)
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        end = time.monotonic() + 20
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                log = self.log()
                if "Address already in use" in log:
                    return False
                raise RuntimeError(f"redis-server exited:\n{log}")
            try:
                if redis.Redis(port=self.port, socket_timeout=1).ping():
                    return True
            except redis.exceptions.RedisError:
                time.sleep(0.02)
        raise RuntimeError(f"redis-server did not answer:\n{self.log()}")

    def log(self) -> str:
        try:
            return Path(self.dir, "redis.log").read_text()
        except OSError:
            return ""

    def client(self, **kw: object) -> redis.Redis:
        return redis.Redis(port=self.port, socket_timeout=10, **kw)  # type: ignore[arg-type]

    def replicate_from(self, master: Server) -> None:
        c = self.client()
        c.execute_command("REPLICAOF", "127.0.0.1", master.port)
        end = time.monotonic() + 20
        while c.info("replication").get("master_link_status") != "up":
            if time.monotonic() > end:
                raise RuntimeError("replica link not up")
            time.sleep(0.02)
        # A replica counts for WAIT once the master has its first acknowledgement.
        m = master.client()
        n = int(m.info("replication")["connected_slaves"])
        m.set("__replica_sync__", 1)
        if m.wait(n, 10000) < n:
            raise RuntimeError("replica did not acknowledge")
        m.delete("__replica_sync__")

    def signal(self, sig: int) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, sig)

    def stop(self) -> None:
        if self.proc is not None:
            self.signal(signal.SIGCONT)
            self.proc.kill()
            self.proc.wait()
            self.proc = None

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def make_server() -> Iterator[object]:
    made: list[Server] = []

    def make(module: bool = True, args: tuple[str, ...] = ()) -> Server:
        s = Server(module, args)
        made.append(s)
        return s

    yield make
    for s in made:
        s.close()


@pytest.fixture
def module_server(make_server) -> Server:  # type: ignore[no-untyped-def]
    return make_server(True)  # type: ignore[no-any-return]


@pytest.fixture
def plain_server(make_server) -> Server:  # type: ignore[no-untyped-def]
    return make_server(False)  # type: ignore[no-any-return]


@pytest.fixture(params=["module", "lua"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def server(make_server, mode: str) -> Server:  # type: ignore[no-untyped-def]
    """A server with the module for `module` mode, without it for `lua` mode."""
    return make_server(mode == "module")  # type: ignore[no-any-return]


@pytest.fixture
def locks(server: Server) -> Iterator[redislock.LockClient]:
    c = redislock.LockClient(server.client(), lease=30)
    yield c
    c.close()


class Cluster:
    """Three masters, no replicas, every slot served."""

    def __init__(self, module: bool) -> None:
        self.nodes = [
            Server(module, ("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"))
            for _ in range(3)
        ]
        ranges = [(0, 5460), (5461, 10922), (10923, 16383)]
        for n, (a, b) in zip(self.nodes, ranges):
            n.client().execute_command("CLUSTER", "ADDSLOTSRANGE", a, b)
        first = self.nodes[0].client()
        for n in self.nodes[1:]:
            first.execute_command("CLUSTER", "MEET", "127.0.0.1", n.port)
        end = time.monotonic() + 30
        while True:
            states = [n.client().cluster("INFO") for n in self.nodes]
            if all(
                s.get("cluster_state") == "ok" and int(s.get("cluster_known_nodes", 0)) == 3 for s in states
            ):
                break
            if time.monotonic() > end:
                raise RuntimeError("cluster did not form")
            time.sleep(0.05)

    def close(self) -> None:
        for n in self.nodes:
            n.close()


@pytest.fixture
def cluster(mode: str) -> Iterator[Cluster]:
    c = Cluster(mode == "module")
    yield c
    c.close()
