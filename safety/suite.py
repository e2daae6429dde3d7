"""One cell of the safety matrix (strategy x fault x workload): servers, proxy, workers, faults, check."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import random
import signal
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import checker
import worker
from proxy import Proxy
from servers import Server
from strategies import masters, uses_module

FAULTS = ["none", "client-pause", "failover-lost-writes", "partition", "restart-no-persistence"]


@dataclass
class Config:
    strategy: str
    fault: str
    workload: str
    seconds: float
    clients: int = 4
    lease_ms: int = 500  # fixed lease, no watchdog: every strategy the same
    hold_ms: int = 40  # a critical section sleeps uniformly 0..hold_ms
    sync_timeout: float = 0.2  # module-sync-replicas: WAIT 1 for at most this long
    acquire_wait: float = 1.0  # one acquire call waits at most this long (then the worker checks stop)
    fault_ms: int = 750  # pauses and partitions last 1.5 leases
    gap_ms: int = 300  # quiet time after a fault heals


class Cell:
    def __init__(self, cfg: Config, module: str) -> None:
        self.cfg = cfg
        self.module = module if uses_module(cfg.strategy) else None
        self.masters: list[Server] = []
        self.replicas: dict[int, Server] = {}
        self.store: Server | None = None
        self.spare: Server | None = None
        self.proxy: Proxy | None = None
        self.workers: list[Any] = []
        self.logs: list[Path] = []
        self.faults = 0
        self.rng = random.Random()
        ctx = multiprocessing.get_context("fork")
        self.ctx = ctx
        self.phase: Any = ctx.Array("i", cfg.clients, lock=False)
        self.grants: Any = ctx.Array("l", cfg.clients, lock=False)
        self.stop: Any = ctx.Value("i", 0, lock=False)
        self.tmp = Path(tempfile.mkdtemp(prefix="safety-cell-"))

    # --- setup and teardown -------------------------------------------------------------------

    def start(self) -> None:
        cfg = self.cfg
        self.proxy = Proxy()
        for i in range(masters(cfg.strategy)):
            server = Server(self.module, name=f"m{i}")
            self.masters.append(server)
            self.proxy.upstream(f"m{i}", server.port)
            if cfg.strategy == "module-sync-replicas" or (cfg.fault == "failover-lost-writes" and i == 0):
                self.replicas[i] = Server(self.module, replica_of=server.port, name=f"r{i}")
        if cfg.fault == "restart-no-persistence":
            self.spare = Server(self.module, name="spare")
        self.store = Server(None, name="store")
        self.proxy.upstream("store", self.store.port)
        config = {
            "strategy": cfg.strategy,
            "workload": cfg.workload,
            "lease_ms": cfg.lease_ms,
            "hold_ms": cfg.hold_ms,
            "sync_timeout": cfg.sync_timeout,
            "acquire_wait": cfg.acquire_wait,
        }
        for w in range(cfg.clients):
            ports = {f"m{i}": self.proxy.link(w, f"m{i}") for i in range(len(self.masters))}
            ports["store"] = self.proxy.link(w, "store")
            log = self.tmp / f"worker{w}.jsonl"
            self.logs.append(log)
            p = self.ctx.Process(
                target=worker.run, args=(w, config, ports, str(log), self.phase, self.grants, self.stop), daemon=True
            )
            self.workers.append(p)
        for p in self.workers:
            p.start()

    def close(self) -> None:
        self.stop.value = 1
        for w, p in enumerate(self.workers):
            if self.proxy is not None:
                with contextlib.suppress(Exception):
                    self.proxy.heal(w)
            if p.pid is not None and p.is_alive():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(p.pid, signal.SIGCONT)
        deadline = time.monotonic() + self.cfg.acquire_wait + 10
        for p in self.workers:
            p.join(max(0.1, deadline - time.monotonic()))
            if p.is_alive():
                p.kill()
                p.join(5)
        extra = [s for s in (self.store, self.spare) if s is not None]
        for server in [*self.masters, *self.replicas.values(), *extra]:
            server.kill()
        if self.proxy is not None:
            self.proxy.close()

    # --- faults ---------------------------------------------------------------------------------

    def holder(self, at_least: int, timeout: float = 1.0) -> int | None:
        """A worker that holds the lock (and, for READ, has read the resource), polled every 0.5 ms."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not self.stop.value:
            found = [i for i in range(self.cfg.clients) if self.phase[i] >= at_least]
            if found:
                return self.rng.choice(found)
            time.sleep(0.0005)
        return None

    def victim_phase(self) -> int:
        return worker.HOLDING if self.cfg.workload == "mutex" else worker.READ

    def pause_client(self) -> None:
        i = self.holder(self.victim_phase())
        if i is None:
            return
        pid = self.workers[i].pid
        os.kill(pid, signal.SIGSTOP)
        time.sleep(self.cfg.fault_ms / 1000)
        os.kill(pid, signal.SIGCONT)
        self.faults += 1

    def partition_client(self) -> None:
        assert self.proxy is not None
        i = self.holder(self.victim_phase())
        if i is None:
            return
        self.proxy.cut(i)
        time.sleep(self.cfg.fault_ms / 1000)
        self.proxy.heal(i)
        self.faults += 1

    def failover(self) -> None:
        """The replica misses the master's last writes, then the master dies and the replica is promoted."""
        assert self.proxy is not None
        master, replica = self.masters[0], self.replicas[0]
        replica.signal(signal.SIGSTOP)
        master.call("CLIENT", "KILL", "TYPE", "replica")
        # Wait for a grant the replica cannot have seen (with sync_replicas there may be none).
        before = sum(self.grants)
        deadline = time.monotonic() + 0.5
        while time.monotonic() < deadline and not (
            sum(self.grants) > before and any(self.phase[i] >= worker.HOLDING for i in range(self.cfg.clients))
        ):
            time.sleep(0.0005)
        master.proc.kill()
        replica.signal(signal.SIGCONT)
        replica.call("REPLICAOF", "NO", "ONE")
        self.proxy.retarget("m0", replica.port)
        master.kill()
        self.masters[0] = replica
        self.replicas[0] = Server(self.module, replica_of=replica.port, name="r0")
        self.faults += 1

    def restart(self) -> None:
        """A master restarted empty (no persistence) while a client holds the lock on it.

        RedLock over three masters: Kleppmann's case. A holder with every master survives one
        empty restart, so first one master is made unreachable for one client (connections
        refused), that client takes the lock on the other two (a bare majority), and one of those
        two is restarted empty while it holds the lock.
        """
        assert self.proxy is not None
        unreachable: tuple[int, str] | None = None
        if len(self.masters) == 1:
            if self.holder(worker.HOLDING) is None:
                return
            target = 0
        else:
            victim = self.rng.randrange(self.cfg.clients)
            cut = self.rng.randrange(len(self.masters))
            unreachable = (victim, f"m{cut}")
            self.proxy.down(*unreachable)
            granted = self.grants[victim]
            deadline = time.monotonic() + 2.0
            while time.monotonic() < deadline and not (
                self.grants[victim] > granted and self.phase[victim] >= worker.HOLDING
            ):
                time.sleep(0.0005)
            if self.grants[victim] == granted:
                self.proxy.up(*unreachable)
                return
            target = self.rng.choice([j for j in range(len(self.masters)) if j != cut])
        # The restarted process is started beforehand (an empty server on another port): the
        # restart then takes as long as a supervisor's fast restart, not our process start-up.
        old = self.masters[target]
        fresh = self.spare
        assert fresh is not None
        old.proc.kill()
        self.proxy.retarget(f"m{target}", fresh.port)
        self.spare = Server(self.module, name="spare")
        old.kill()
        self.masters[target] = fresh
        if target in self.replicas:
            self.replicas[target].call("REPLICAOF", "127.0.0.1", fresh.port)
        if unreachable is not None:
            time.sleep(0.1)
            self.proxy.up(*unreachable)
        self.faults += 1

    def inject(self, until: float) -> None:
        fault = self.cfg.fault
        action = {
            "client-pause": self.pause_client,
            "partition": self.partition_client,
            "failover-lost-writes": self.failover,
            "restart-no-persistence": self.restart,
        }.get(fault)
        if fault not in FAULTS:
            raise ValueError(f"unknown fault {fault}")
        time.sleep(min(0.3, max(0.0, until - time.monotonic())))  # let the workers get going
        while time.monotonic() < until:
            if action is None:
                time.sleep(min(0.1, max(0.0, until - time.monotonic())))
                continue
            action()
            time.sleep(min(self.cfg.gap_ms / 1000, max(0.0, until - time.monotonic())))

    # --- one run ---------------------------------------------------------------------------------

    def run(self) -> dict[str, Any]:
        cfg = self.cfg
        try:
            self.start()
            began = time.monotonic()
            self.inject(began + cfg.seconds)
            self.stop.value = 1
            for i in range(cfg.clients):
                if self.proxy is not None:
                    self.proxy.heal(i)
            ended = time.monotonic()
            for p in self.workers:
                p.join(cfg.acquire_wait + 10)
            assert self.store is not None
            history = [bytes(x).decode() for x in self.store.call("LRANGE", "safety:history", 0, -1)]
            final = bytes(self.store.call("GET", "safety:set") or b"").decode()
        finally:
            self.close()
        events = checker.load_events(self.logs)
        c = checker.check(events, history, final, ended)
        for log in self.logs:
            log.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            self.tmp.rmdir()
        elapsed = ended - began
        mutex = cfg.workload == "mutex"
        return {
            "strategy": cfg.strategy,
            "fault": cfg.fault,
            "workload": cfg.workload,
            "seconds": int(cfg.seconds) if float(cfg.seconds).is_integer() else cfg.seconds,
            "ops": c.grants if mutex else c.ops,
            "acknowledged": c.grants if mutex else c.acknowledged,
            "lost_updates": c.lost_updates,
            "overlapping_holders": c.overlapping_holders,
            "stale_writes_accepted": c.stale_writes_accepted,
            "stale_writes_rejected": c.stale_writes_rejected,
            "grants_per_s": round(c.grants / elapsed, 1) if elapsed > 0 else 0.0,
            "wait_p99_ms": round(checker.percentile(c.waits, 0.99) * 1000, 2),
            # not part of the results schema: the runner keeps them for the markdown notes
            "_faults": self.faults,
            "_current_writes_rejected": c.current_writes_rejected,
            "_unknown_elements": c.unknown_elements,
        }


def run_cell(cfg: Config, module: str) -> dict[str, Any]:
    return Cell(cfg, module).run()
