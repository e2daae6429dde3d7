"""Exceptions of redislock. They extend redis-py's lock exceptions, so code that catches
``redis.exceptions.LockError`` (or ``LockNotOwnedError``) keeps working."""

from __future__ import annotations

import redis.exceptions


class LockError(redis.exceptions.LockError):
    """Base class of redislock's own errors."""


class NotOwnedError(LockError, redis.exceptions.LockNotOwnedError):
    """Release of a lock this owner does not hold (Redisson's IllegalMonitorStateException):
    never acquired, already released, expired, force-released, or marked lost by the watchdog."""


class ReplicaSyncError(LockError):
    """Fewer replicas than ``sync_replicas`` acknowledged the acquire within ``sync_timeout``;
    the lock was released again."""

    def __init__(self, acked: int, wanted: int) -> None:
        super().__init__(f"only {acked} of {wanted} replicas acknowledged the lock")
        self.acked = acked
        self.wanted = wanted
