"""The locking strategies under test, as seen by one worker process.

Every strategy is used through its public API only: redislock's ``LockClient``/``lock()``/
``RedLock`` and redis-py's ``Lock``. ``ports`` maps a server name ("m0", "m1", "m2") to the
proxy port this worker reaches it through.
"""

from __future__ import annotations

from typing import Any

import redis
import redislock
from redis.backoff import NoBackoff
from redis.retry import Retry

# Known-broken variants run beside a strategy in the same cell (see suite.control_of): the plain
# SET NX PX lock (redis-py's Lock) is correct without faults and broken by every fault here except
# lost packets, where "redis-py-optimistic" (a timed-out or reset acquire counts as granted, a
# classic client bug) is; "fence-unchecked" is module-fence with a resource that ignores tokens;
# "no-lock" takes no lock at all (the checker must see its damage).
# "counter-fence" fences with a plain counter (INCR on the lock's master after the grant, as
# Redisson's RFencedLock does): a lossy failover rolls it back and tokens repeat.
CONTROLS = ["redis-py", "redis-py-optimistic", "fence-unchecked", "counter-fence", "no-lock"]
LOCK_NAME = "safety:lock"  # the strategy's lock
CONTROL_LOCK_NAME = "safety:control"  # its control's lock, beside it


def masters(strategy: str) -> int:
    return 3 if strategy == "redlock-3" else 1


def uses_module(strategy: str) -> bool:
    return strategy not in ("lua", "redis-py")


def workload_of(strategy: str) -> str:
    """Fencing tokens only mean something to a guarded resource."""
    return "guarded" if strategy == "module-fence" else "lock-set"


def connect(port: int, timeout: float = 3.0) -> redis.Redis:
    """A connection through the proxy. No automatic retries (redis-py's default backs off for
    up to seconds): the worker retries at once, like a client that has just (re)started, which
    is the adversarial case for a lock that lost its state. A request that gets no answer
    (dropped bytes) fails after ``timeout`` seconds: its outcome is unknown."""
    return redis.Redis(port=port, socket_connect_timeout=1.0, socket_timeout=timeout, retry=Retry(NoBackoff(), 0))


class Locker:
    """acquire() -> bool (within ``wait`` seconds), token (or None), release().

    Every critical section is its own operation with its own owner id (``owner=``), as separate
    requests of an application are. With the default owner (client id and thread) a release lost
    in a failover leaves the lock held by that owner on the promoted replica, and the thread's next
    acquire is a *reentrant* one (hold count 2): a worker looping acquire/release then never frees
    the lock and starves the others, which hides every other effect of the fault.
    """

    def __init__(self, strategy: str, ports: dict[str, int], lease: float, sync_timeout: float, name: str) -> None:
        self.optimistic = strategy == "redis-py-optimistic"
        self.counter = strategy == "counter-fence"
        aliases = {"redis-py-optimistic": "redis-py", "counter-fence": "redis-py", "fence-unchecked": "module-fence"}
        strategy = aliases.get(strategy, strategy)
        self.strategy = strategy
        self.name = name
        self.lease = lease
        self.sync_timeout = sync_timeout
        self.token: int | None = None
        self.clients: list[Any] = []
        self.ops = 0
        self.held: Any = None
        if strategy in ("redis-py", "no-lock"):
            self.conn = connect(ports["m0"])
        elif strategy == "redlock-3":
            self.clients = [redislock.LockClient(connect(ports[f"m{i}"]), mode="module") for i in range(3)]
        else:
            mode = "lua" if strategy == "lua" else "module"
            self.clients = [redislock.LockClient(connect(ports["m0"]), mode=mode)]

    def _new(self) -> Any:
        self.ops += 1
        if self.strategy == "redis-py":
            return self.conn.lock(self.name, timeout=self.lease, sleep=0.01)
        owner = f"{self.clients[0].id}:{self.ops}"
        if self.strategy == "redlock-3":
            return redislock.RedLock([c.lock(self.name, owner=owner) for c in self.clients])
        return self.clients[0].lock(
            self.name,
            owner=owner,
            fenced=self.strategy == "module-fence",
            sync_replicas=1 if self.strategy == "module-sync-replicas" else 0,
            sync_timeout=self.sync_timeout,
        )

    def acquire(self, wait: float) -> bool:
        self.token = None
        if self.strategy == "no-lock":
            return True
        lock = self._new()
        if self.strategy == "redis-py":
            try:
                got = bool(lock.acquire(blocking=True, blocking_timeout=wait))
            except (redis.RedisError, OSError):
                if not self.optimistic:
                    raise
                got = True  # the bug under test: an acquire with no answer taken for a grant
            if got and self.counter:
                self.token = int(self.conn.incr(f"{self.name}:counter"))
        elif self.strategy == "redlock-3":
            got = lock.acquire(timeout=wait, lease=self.lease)
        else:
            try:
                got = lock.acquire(timeout=wait, lease=self.lease)
            except redislock.ReplicaSyncError:
                return False  # the replica did not acknowledge: the client gave the lock back
            if got:
                self.token = lock.token
        self.held = lock if got else None
        return got

    def release(self) -> bool:
        """True once the release call returned (the worker's history records it as ok)."""
        lock, self.held = self.held, None
        if lock is not None:
            lock.release()
        return True

    def close(self) -> None:
        for client in self.clients:
            client.close()
