"""One run of one cell of the safety matrix: servers, proxy, workers (the strategy and its control
beside it), the fault schedule (faults.py), then the checker on each side's history."""

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
from faults import Injectors, applies, replication_link
from matrix import FAULTS
from proxy import Proxy
from servers import Server
from strategies import CONTROL_LOCK_NAME, LOCK_NAME, masters, uses_module, workload_of

CLOCK_FAULTS = ("clock-jump", "clock-skew", "clock-behind-failover", "nemesis")
CLOCK_BEHIND_S = 0.5  # clock-behind-failover: each new replica's clock is one lease behind its master's


def control_of(strategy: str, fault: str) -> str:
    """The known-broken variant that runs beside ``strategy`` in the cell and must show anomalies.

    It has to be correct without the fault and broken by it, so that its anomalies prove the
    fault bit: the plain SET NX PX lock for most faults; one that takes an unanswered acquire for
    a grant for lost packets and refused connections; module-fence's own lock with a resource that
    ignores tokens where fencing is what protects; no lock at all without a fault (there the
    control only proves that the checker sees damage).
    """
    if fault == "none":
        return "no-lock"
    if fault == "clock-behind-failover":
        return "counter-fence"
    if fault in ("net-drop", "redlock-split"):
        return "redis-py-optimistic"
    if strategy == "module-fence" and fault != "restart-aof":
        return "fence-unchecked"
    return "redis-py"


@dataclass
class Config:
    strategy: str
    fault: str
    seconds: float
    seed: int = 1
    clients: int = 4  # per side: the strategy's workers, and as many for its control
    lease_ms: int = 500  # fixed lease, no watchdog: every strategy the same
    sync_timeout: float = 0.2  # module-sync-replicas: WAIT 1 for at most this long
    acquire_wait: float = 1.0  # one acquire call waits at most this long (then the worker checks stop)
    fault_ms: int = 750  # pauses, delays, drops and splits last 1.5 leases
    gap_ms: int = 300  # quiet time after a fault heals
    disable_injector: bool = False  # a mutation for the self-test: the schedule runs, nothing is done

    @property
    def control(self) -> str:
        return control_of(self.strategy, self.fault)


class Cell(Injectors):
    def __init__(self, cfg: Config, module: str) -> None:
        if not applies(cfg.strategy, cfg.fault):
            raise ValueError(f"{cfg.fault} does not apply to {cfg.strategy}")
        self.cfg = cfg
        needs_module = uses_module(cfg.strategy)
        self.module = module if needs_module else None
        self.masters: list[Server] = []
        self.replicas: dict[int, Server] = {}
        self.control_master: Server | None = None  # restart-aof: the control's own server, no AOF
        self.store: Server | None = None
        self.spare: Server | None = None
        self.proxy: Proxy | None = None
        self.workers: list[Any] = []
        self.logs: list[Path] = []
        self.faults = 0
        self.clock_offset = 0.0  # where m0's clock is (seconds from real time), under a clock fault
        self.effects: dict[str, int] = {}
        self.rng = random.Random(cfg.seed)
        ctx = multiprocessing.get_context("fork")
        self.ctx = ctx
        n = 2 * cfg.clients
        self.shared = {
            "phase": ctx.Array("i", n, lock=False),
            "grants": ctx.Array("l", n, lock=False),
            "until": ctx.Array("d", n, lock=False),
            "stop": ctx.Value("i", 0, lock=False),
        }
        self.tmp = Path(tempfile.mkdtemp(prefix="safety-cell-"))

    # --- roles: workers 0..clients-1 run the strategy, the next ones its control ---------------

    def role_of(self, w: int) -> str:
        return "main" if w < self.cfg.clients else "control"

    def members(self, role: str) -> range:
        c = self.cfg.clients
        return range(0, c) if role == "main" else range(c, 2 * c)

    def effect(self, name: str, n: int = 1) -> None:
        self.effects[name] = self.effects.get(name, 0) + n

    # --- setup and teardown -------------------------------------------------------------------

    def needs_replica(self) -> bool:
        failovers = ("failover-lost-writes", "clock-behind-failover", "nemesis")
        return self.cfg.strategy == "module-sync-replicas" or self.cfg.fault in failovers

    def replica(self, i: int) -> Server:
        """A replica of master i that replicates through the proxy (so a partition can cut it)."""
        assert self.proxy is not None
        port = self.proxy.link(replication_link(i), f"m{i}")
        behind = CLOCK_BEHIND_S if self.cfg.fault == "clock-behind-failover" else 0.0
        return self.lock_server(name=f"r{i}", replica_of=port, offset=self.clock_offset - behind)

    def clocked(self, i: int) -> bool:
        return i == 0 and self.cfg.fault in CLOCK_FAULTS

    def lock_server(self, name: str, replica_of: int | None = None, offset: float | None = None) -> Server:
        """A server for m0's role (master, replica, spare): under a clock fault it runs under the
        clock shim, set to the cell's current lock clock (``offset``: another setting)."""
        server = Server(self.module, replica_of=replica_of, name=name, clock=self.clocked(0))
        if self.clocked(0):
            server.clock_jump(self.clock_offset if offset is None else offset)
        return server

    def start(self) -> None:
        cfg = self.cfg
        self.proxy = Proxy()
        aof = cfg.fault == "restart-aof"
        for i in range(masters(cfg.strategy)):
            server = Server(self.module, name=f"m{i}", aof=aof, clock=self.clocked(i))
            self.masters.append(server)
            self.proxy.upstream(f"m{i}", server.port)
            if i == 0 and self.needs_replica():
                self.replicas[i] = self.replica(i)
        if aof:
            self.control_master = Server(None, name="c0")
            self.proxy.upstream("c0", self.control_master.port)
        if cfg.fault in ("restart-no-persistence", "nemesis"):
            self.spare = self.lock_server("spare")
        self.store = Server(None, name="store")
        self.proxy.upstream("store", self.store.port)
        for w in range(2 * cfg.clients):
            role = self.role_of(w)
            strategy = cfg.strategy if role == "main" else cfg.control
            ports = {f"m{i}": self.proxy.link(w, f"m{i}") for i in range(len(self.masters))}
            if role == "control" and self.control_master is not None:
                ports["m0"] = self.proxy.link(w, "c0")
            ports["store"] = self.proxy.link(w, "store")
            config = {
                "strategy": strategy,
                "role": role,
                "guarded": workload_of(cfg.strategy) == "guarded" if role == "main" else strategy == "counter-fence",
                "lock_name": LOCK_NAME if role == "main" else CONTROL_LOCK_NAME,
                "lease_ms": cfg.lease_ms,
                "sync_timeout": cfg.sync_timeout,
                "acquire_wait": cfg.acquire_wait,
                "seed": cfg.seed,
            }
            log = self.tmp / f"worker{w}.jsonl"
            self.logs.append(log)
            p = self.ctx.Process(target=worker.run, args=(w, config, ports, str(log), self.shared), daemon=True)
            self.workers.append(p)
        for p in self.workers:
            p.start()

    def heal_all(self) -> None:
        if self.proxy is None:
            return
        for w in range(len(self.workers)):
            with contextlib.suppress(Exception):
                self.proxy.heal(w)
                self.proxy.reset(w)
                for i in range(len(self.masters)):
                    self.proxy.up(w, f"m{i}")

    def close(self) -> None:
        self.shared["stop"].value = 1
        self.heal_all()
        for p in self.workers:
            if p.pid is not None and p.is_alive():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(p.pid, signal.SIGCONT)
        deadline = time.monotonic() + self.cfg.acquire_wait + 10
        for p in self.workers:
            p.join(max(0.1, deadline - time.monotonic()))
            if p.is_alive():
                p.kill()
                p.join(5)
        extra = [s for s in (self.store, self.spare, self.control_master) if s is not None]
        for server in [*self.masters, *self.replicas.values(), *extra]:
            server.kill()
        if self.proxy is not None:
            self.proxy.close()

    # --- one run ---------------------------------------------------------------------------------

    def read_store(self, role: str) -> tuple[list[str], list[str]]:
        assert self.store is not None
        register, _, history = worker.store_keys(role)
        entries = [bytes(x).decode() for x in self.store.call("LRANGE", history, 0, -1)]
        final = bytes(self.store.call("GET", register) or b"").decode()
        return entries, [x for x in final.split(",") if x]

    def run(self) -> dict[str, Any]:
        cfg = self.cfg
        try:
            self.start()
            began = time.monotonic()
            self.inject(began + cfg.seconds)  # every fault has healed when it returns
            self.shared["stop"].value = 1
            ended = time.monotonic()
            for p in self.workers:
                p.join(cfg.acquire_wait + 10)
            stores = {role: self.read_store(role) for role in ("main", "control")}
        finally:
            self.close()
        events = checker.load_events(self.logs)
        unknown = sum(1 for e in events if e.get("type") == "info")
        if cfg.fault in ("net-drop", "nemesis") and unknown:
            self.effect("unknown_outcomes", unknown)
        sides: dict[str, dict[str, Any]] = {}
        for role in ("main", "control"):
            mine = [e for e in events if self.role_of(e["w"]) == role]
            history, final = stores[role]
            promise = "all" if role == "control" else "resource" if cfg.strategy == "module-fence" else "lock"
            sides[role] = checker.as_row(checker.check(mine, history, final, ended), ended - began, promise)
        sides["control"]["variant"] = cfg.control
        for log in self.logs:
            log.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            self.tmp.rmdir()
        fired = cfg.fault == "none" or self.faults > 0
        clean = sides["control"]["anomalies"] == 0
        why = None
        if not fired:
            why = "the fault never fired"
        elif clean:
            why = f"control {cfg.control} stayed clean"
        return {
            "seed": cfg.seed,
            "seconds": int(cfg.seconds) if float(cfg.seconds).is_integer() else cfg.seconds,
            "faults_fired": self.faults,
            "effects": dict(sorted(self.effects.items())),
            "main": sides["main"],
            "control": sides["control"],
            "conclusive": why is None,
            "why_inconclusive": why,
        }


def run_cell(cfg: Config, module: str) -> dict[str, Any]:
    return Cell(cfg, module).run()


__all__ = ["FAULTS", "Cell", "Config", "control_of", "run_cell"]
