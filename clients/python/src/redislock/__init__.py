"""redislock: Redisson-compatible distributed locks and semaphores for redis-py.

With the redis-lock module it uses native LOCK.* commands and server-side FIFO waiting; without
it, Lua scripts and pub/sub on Redisson's data layout. See ``clients/python/README.md``.
"""

from __future__ import annotations

from ._errors import LockError, LockTimeout, NotOwnedError, ReplicaSyncError, UpgradeError
from .client import Lock, LockClient, MultiLock, Permit, ReadLock, RedLock, RWLock, Semaphore, WriteLock

__version__ = "0.1.0"

__all__ = [
    "Lock",
    "LockClient",
    "LockError",
    "LockTimeout",
    "MultiLock",
    "NotOwnedError",
    "Permit",
    "RWLock",
    "ReadLock",
    "RedLock",
    "ReplicaSyncError",
    "Semaphore",
    "UpgradeError",
    "WriteLock",
]
