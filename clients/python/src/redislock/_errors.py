"""Exceptions of redislock. Server errors are redis-py's own exceptions and pass through.

NotOwnedError is also redis-py's ``LockNotOwnedError`` (so ``except redis.exceptions.LockError``
written for redis-py's ``Lock`` keeps working)."""

from __future__ import annotations

import redis.exceptions


class LockError(Exception):
    """Base class of the errors redislock raises itself."""


class NotOwnedError(LockError, redis.exceptions.LockNotOwnedError):
    """The lock is not held by this owner (Redisson's IllegalMonitorStateException).

    Raised by ``release()`` when the lock is free, held by another owner, has expired, or was
    marked lost by the watchdog.
    """


class LockTimeout(LockError):
    """``with lock:`` (or ``async with``) could not acquire within the lock's ``timeout``."""


class ReplicaSyncError(LockError):
    """Fewer replicas than ``sync_replicas`` acknowledged the acquire within ``sync_timeout``.

    The lock was released again before this was raised. ``acked`` is the count WAIT replied,
    ``wanted`` the count that was asked for.
    """

    def __init__(self, acked: int, wanted: int) -> None:
        super().__init__(f"only {acked} of {wanted} replicas acknowledged the lock; released it again")
        self.acked = acked
        self.wanted = wanted
