"""The fault injectors (the nemesis): each one fires again and again through a run, counts what
it did (``Cell.effects``), and hits the strategy's workers and its control's alike."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from typing import TYPE_CHECKING, Any

import redis

import worker
from matrix import FAULTS
from strategies import CONTROL_LOCK_NAME, LOCK_NAME

if TYPE_CHECKING:
    import random

    from proxy import Proxy
    from servers import Server
    from suite import Config

NEMESIS = ["client-pause", "net-delay", "net-drop", "failover-lost-writes", "restart-no-persistence", "clock-jump"]


def applies(strategy: str, fault: str) -> bool:
    """RedLock's split needs three masters; the AOF restart is a single master's."""
    if fault == "redlock-split":
        return strategy == "redlock-3"
    if fault == "restart-aof":
        return strategy != "redlock-3"
    return True


class Injectors:
    """Mixed into suite.Cell: every method below runs in the orchestrator process."""

    cfg: Config
    module: str | None
    masters: list[Server]
    replicas: dict[int, Server]
    control_master: Server | None
    spare: Server | None
    proxy: Proxy | None
    workers: list[Any]
    shared: dict[str, Any]
    faults: int
    clock_offset: float
    rng: random.Random

    def members(self, role: str) -> range:
        raise NotImplementedError

    def effect(self, name: str, n: int = 1) -> None:
        raise NotImplementedError

    def replica(self, i: int) -> Server:
        raise NotImplementedError

    def clocked(self, i: int) -> bool:
        raise NotImplementedError

    def lock_server(self, name: str, replica_of: int | None = None, offset: float | None = None) -> Server:
        raise NotImplementedError

    def holder(self, role: str, at_least: int = worker.HOLDING, ahead: float = 0.0) -> int | None:
        """A worker of ``role`` that holds the lock (and whose critical section still has at
        least ``ahead`` seconds to go), polled every 0.5 ms for up to a second."""
        shared = self.shared
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline and not shared["stop"].value:
            now = time.monotonic()
            found = [
                w for w in self.members(role) if shared["phase"][w] >= at_least and shared["until"][w] >= now + ahead
            ]
            if found:
                return self.rng.choice(found)
            time.sleep(0.0005)
        return None

    def victims(self) -> list[int]:
        """One holder on each side, past its read for the resource workloads (its write pending)."""
        return [w for w in (self.holder("main", worker.READ), self.holder("control", worker.READ)) if w is not None]

    def granted(self, role: str | None = None) -> int:
        grants = self.shared["grants"]
        members = range(2 * self.cfg.clients) if role is None else self.members(role)
        return sum(grants[w] for w in members)

    # --- client-side faults ---------------------------------------------------------------------

    def pause_clients(self) -> None:
        hit = self.victims()
        for w in hit:
            _signal(self.workers[w].pid, signal.SIGSTOP)
        time.sleep(self.cfg.fault_ms / 1000)
        for w in hit:
            _signal(self.workers[w].pid, signal.SIGCONT)
        if hit:
            self.faults += 1
            self.effect("holders_paused_past_lease", len(hit))

    def delay_clients(self) -> None:
        assert self.proxy is not None
        hit = self.victims()
        for w in hit:
            self.proxy.cut(w)
        time.sleep(self.cfg.fault_ms / 1000)
        for w in hit:
            self.proxy.heal(w)
        if hit:
            self.faults += 1
            self.effect("holders_delayed", len(hit))

    def drop_clients(self) -> None:
        """The main side's holder and any control worker (one waiting for the lock has requests in
        flight) lose every byte for 1.5 leases, then their connections are reset."""
        assert self.proxy is not None
        main = self.holder("main")
        hit = [w for w in (main, self.rng.choice(list(self.members("control")))) if w is not None]
        for w in hit:
            self.proxy.drop(w)
        time.sleep(self.cfg.fault_ms / 1000)
        for w in hit:
            self.proxy.reset(w)
        self.faults += 1
        self.effect("clients_dropped_and_reset", len(hit))

    def split_redlock(self) -> None:
        """RedLock minority / majority split: a client of each side cannot reach m0 (minority) or
        m0 and m1 (majority) for 1.5 leases (connections refused and closed)."""
        assert self.proxy is not None
        majority = self.faults % 2 == 1
        cut = ["m0", "m1"] if majority else ["m0"]
        hit = [self.rng.choice(list(self.members(role))) for role in ("main", "control")]
        before = {w: self.shared["grants"][w] for w in hit}
        for w in hit:
            for server in cut:
                self.proxy.down(w, server)
        time.sleep(self.cfg.fault_ms / 1000)
        for w in hit:
            for server in cut:
                self.proxy.up(w, server)
        self.faults += 1
        self.effect("majority_splits" if majority else "minority_splits")
        self.effect("grants_to_split_clients", sum(self.shared["grants"][w] - before[w] for w in hit))

    # --- server-side faults ---------------------------------------------------------------------

    def failover(self) -> None:
        """Partition m0 from its replica while m0 goes on acknowledging, kill m0 while a holder of
        the strategy is mid-section, promote the replica (what Sentinel does on the other side of
        the partition). The replica lacks what m0 acknowledged after the cut."""
        assert self.proxy is not None
        master, replica = self.masters[0], self.replicas[0]
        mid = self.holder("main", ahead=0.3)  # its grant reached the replica before the cut
        self.proxy.drop(replication_link(0))
        before = self.granted()
        control = {w: self.shared["grants"][w] for w in self.members("control")}
        # m0 dies while a control holder granted after the cut is mid-section (up to 0.6 s)
        deadline = time.monotonic() + 0.6
        while time.monotonic() < deadline and not any(
            self.shared["grants"][w] > n and self.shared["until"][w] > time.monotonic() + 0.15
            for w, n in control.items()
        ):
            time.sleep(0.0005)
        lost_grants = self.granted() - before
        with _quiet():
            offset = int(master.conn.info("replication").get("master_repl_offset", 0))
        with _quiet():
            offset -= int(replica.conn.info("replication").get("master_repl_offset", 0))
        holding = sum(1 for w in self.members("main") if self.shared["phase"][w] >= worker.HOLDING)
        master.proc.kill()
        replica.call("REPLICAOF", "NO", "ONE")
        self.proxy.retarget("m0", replica.port)
        self.proxy.reset(replication_link(0))
        master.kill()
        self.masters[0] = replica
        if replica.clock_file is not None:
            self.clock_offset = replica.clock_offset
            self.effect("promoted_clock_behind_ms", round((master.clock_offset - replica.clock_offset) * 1000))
        self.replicas[0] = self.replica(0)
        self.faults += 1
        self.effect("acknowledged_grants_the_replica_lacked", lost_grants)
        self.effect("replication_bytes_lost", max(0, offset))
        self.effect("holders_mid_section_at_kill", holding)
        self.effect("replicated_holder_mid_section_at_kill", int(mid is not None and holding > 0))

    def restart_empty(self) -> None:
        """A master restarted empty (no persistence) while it holds the lock; for redlock-3,
        Kleppmann's case: the holder holds a bare majority and one of its two masters restarts."""
        assert self.proxy is not None
        unreachable: tuple[int, str] | None = None
        if len(self.masters) == 1:
            if self.holder("main") is None:
                return
            target = 0
        else:
            victim = self.rng.choice(list(self.members("main")))
            cut = self.rng.randrange(1, len(self.masters))  # m0 stays reachable: the control's master
            unreachable = (victim, f"m{cut}")
            self.proxy.down(*unreachable)
            granted = self.shared["grants"][victim]
            deadline = time.monotonic() + 2.0
            while time.monotonic() < deadline and not (
                self.shared["grants"][victim] > granted and self.shared["phase"][victim] >= worker.HOLDING
            ):
                time.sleep(0.0005)
            if self.shared["grants"][victim] == granted:
                self.proxy.up(*unreachable)
                return
            target = 0 if cut != 0 and self.rng.random() < 0.5 else 3 - cut
        old = self.masters[target]
        fresh = self.spare
        assert fresh is not None
        held = _exists(old, LOCK_NAME) + _exists(old, CONTROL_LOCK_NAME)
        old.proc.kill()
        self.proxy.retarget(f"m{target}", fresh.port)
        self.spare = self.lock_server("spare")
        old.kill()
        self.masters[target] = fresh
        if unreachable is not None:
            time.sleep(0.1)
            self.proxy.up(*unreachable)
        self.faults += 1
        self.effect("lock_keys_lost", held)

    def restart_from_aof(self) -> None:
        """kill -9 m0 (AOF, fsync always) and the control's c0 (no persistence) at once while a
        holder of the strategy holds the lock; restart both on their ports and directories."""
        if self.holder("main") is None or self.holder("control", ahead=0.15) is None:
            return
        m0, c0 = self.masters[0], self.control_master
        assert c0 is not None
        held, control_held = _owner(m0, LOCK_NAME), _owner(c0, CONTROL_LOCK_NAME)
        m0.proc.kill()
        c0.proc.kill()
        m0.restart()
        c0.restart()
        self.faults += 1
        # the same owner after the restart (a waiter may take a lost lock at once: compare owners)
        self.effect("locks_held_at_kill_that_survived", int(held is not None and _owner(m0, LOCK_NAME) == held))
        self.effect(
            "control_locks_lost", int(control_held is not None and _owner(c0, CONTROL_LOCK_NAME) != control_held)
        )

    def jump_clock(self) -> None:
        """m0's wall clock jumps two leases ahead while a holder of the strategy holds the lock."""
        if self.holder("main") is None:
            return
        m0 = self.masters[0]
        before = _exists(m0, LOCK_NAME)
        jump = 2 * self.cfg.lease_ms / 1000
        self.clock_offset += jump
        for server in (m0, self.replicas.get(0), self.spare):  # every lock server's clock: an NTP step
            if server is not None and server.clock_file is not None:
                server.clock_jump(jump)
        m0.call("PING")  # active expiry runs on the server's next cycle; a lookup expires at once
        after = _exists(m0, LOCK_NAME)
        self.faults += 1
        self.effect("locks_expired_by_the_jump", before * (1 - after))

    def skew_clock(self, until: float) -> None:
        """m0's wall clock runs three times as fast as real time for the whole run."""
        m0 = self.masters[0]
        real, server = time.monotonic(), m0.server_time()
        m0.clock_rate(3.0)
        self.faults += 1
        time.sleep(max(0.0, until - time.monotonic()))
        rate = (m0.server_time() - server) / max(1e-9, time.monotonic() - real)
        self.effect("server_seconds_per_real_second_x100", round(rate * 100))

    # --- the schedule ---------------------------------------------------------------------------

    def action(self, fault: str) -> Any:
        return {
            "client-pause": self.pause_clients,
            "net-delay": self.delay_clients,
            "net-drop": self.drop_clients,
            "redlock-split": self.split_redlock,
            "failover-lost-writes": self.failover,
            "clock-behind-failover": self.failover,
            "restart-no-persistence": self.restart_empty,
            "restart-aof": self.restart_from_aof,
            "clock-jump": self.jump_clock,
        }.get(fault)

    def inject(self, until: float) -> None:
        fault = self.cfg.fault
        if fault not in FAULTS:
            raise ValueError(f"unknown fault {fault}")
        time.sleep(min(0.3, max(0.0, until - time.monotonic())))  # let the workers get going
        if fault == "none":
            time.sleep(max(0.0, until - time.monotonic()))
            return
        while time.monotonic() < until:
            step = fault
            if fault == "nemesis":
                step = self.rng.choice(NEMESIS)
            fired = self.faults
            if self.cfg.disable_injector:
                self.faults += 1  # the mutation: it counts itself fired and does nothing
            elif step == "clock-skew":
                self.skew_clock(until)
            else:
                self.action(step)()
            if fault == "nemesis" and self.faults > fired:
                self.effect(step)
            time.sleep(min(self.cfg.gap_ms / 1000, max(0.0, until - time.monotonic())))


def replication_link(i: int) -> int:
    """The proxy client id of master i's replication link (workers are 0..7)."""
    return 100 + i


def _signal(pid: int | None, sig: int) -> None:
    if pid is not None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def _exists(server: Any, key: str) -> int:
    with _quiet():
        return int(server.call("EXISTS", key))
    return 0


def _owner(server: Any, key: str) -> str | None:
    """Who holds the lock ``key`` (its hash or string value), None when nobody does."""
    with _quiet():
        kind = server.call("TYPE", key)
        kind = kind.decode() if isinstance(kind, bytes) else str(kind)
        if kind == "hash":
            return repr(sorted(server.call("HGETALL", key).items()))
        if kind == "string":
            return repr(server.call("GET", key))
    return None


def _quiet() -> contextlib.suppress:
    """Swallow a server's error while measuring an effect (the server may be going away)."""
    return contextlib.suppress(redis.RedisError, OSError)
