"""redislock: Redisson-compatible distributed locks for Python.

With the redis-lock module on the server, waiting is server-side FIFO (``LOCK.ACQUIRE ...
WAIT``); without it, the same locks run on Lua scripts and pub/sub, on Redisson's data layout,
so Python clients, Redisson (Java) clients and LOCK.* clients share locks.

    import redis, redislock
    locks = redislock.LockClient(redis.Redis())
    with locks.lock("orders:42"):
        ...
"""

from ._errors import LockError, NotOwnedError, ReplicaSyncError
from .client import Lock, LockClient
from .multi import MultiLock, RedLock

__all__ = ["Lock", "LockClient", "LockError", "MultiLock", "NotOwnedError", "RedLock", "ReplicaSyncError"]
__version__ = "0.1.0"
