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

STRATEGIES = ["module", "module-fence", "module-sync-replicas", "lua", "redis-py", "redlock-3"]
LOCK_NAME = "safety:lock"


def masters(strategy: str) -> int:
    return 3 if strategy == "redlock-3" else 1


def uses_module(strategy: str) -> bool:
    return strategy not in ("lua", "redis-py")


def workload_of(strategy: str) -> list[str]:
    """The workloads a strategy runs: fencing tokens only mean something to a guarded resource."""
    return ["guarded"] if strategy == "module-fence" else ["lock-set", "mutex"]


def connect(port: int) -> redis.Redis:
    """A connection through the proxy. No automatic retries (redis-py's default backs off for
    up to seconds): the worker retries at once, like a client that has just (re)started, which
    is the adversarial case for a lock that lost its state."""
    return redis.Redis(port=port, socket_connect_timeout=1.0, retry=Retry(NoBackoff(), 0))


class Locker:
    """acquire() -> bool (within ``wait`` seconds), token (or None), release().

    Every critical section is its own operation with its own owner id (``owner=``), as separate
    requests of an application are. With the default owner (client id and thread) a release lost
    in a failover leaves the lock held by that owner on the promoted replica, and the thread's next
    acquire is a *reentrant* one (hold count 2): a worker looping acquire/release then never frees
    the lock and starves the others, which hides every other effect of the fault.
    """

    def __init__(self, strategy: str, ports: dict[str, int], lease: float, sync_timeout: float) -> None:
        self.strategy = strategy
        self.lease = lease
        self.sync_timeout = sync_timeout
        self.token: int | None = None
        self.clients: list[Any] = []
        self.ops = 0
        self.held: Any = None
        if strategy == "redis-py":
            self.conn = connect(ports["m0"])
        elif strategy == "redlock-3":
            self.clients = [redislock.LockClient(connect(ports[f"m{i}"]), mode="module") for i in range(3)]
        else:
            mode = "lua" if strategy == "lua" else "module"
            self.clients = [redislock.LockClient(connect(ports["m0"]), mode=mode)]

    def _new(self) -> Any:
        self.ops += 1
        if self.strategy == "redis-py":
            return self.conn.lock(LOCK_NAME, timeout=self.lease, sleep=0.01)
        owner = f"{self.clients[0].id}:{self.ops}"
        if self.strategy == "redlock-3":
            return redislock.RedLock([c.lock(LOCK_NAME, owner=owner) for c in self.clients])
        return self.clients[0].lock(
            LOCK_NAME,
            owner=owner,
            fenced=self.strategy == "module-fence",
            sync_replicas=1 if self.strategy == "module-sync-replicas" else 0,
            sync_timeout=self.sync_timeout,
        )

    def acquire(self, wait: float) -> bool:
        self.token = None
        lock = self._new()
        if self.strategy == "redis-py":
            got = bool(lock.acquire(blocking=True, blocking_timeout=wait))
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

    def release(self) -> None:
        lock, self.held = self.held, None
        if lock is not None:
            lock.release()

    def close(self) -> None:
        for client in self.clients:
            client.close()
