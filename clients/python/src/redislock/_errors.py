"""Exceptions of redislock. Server errors are redis-py's own exceptions and pass through.

Every error redislock raises itself is a ``redis.exceptions.LockError`` (as redis-py's ``Lock``
raises), so ``except redis.exceptions.LockError`` written for redis-py's ``Lock`` keeps working:
``NotOwnedError`` is also redis-py's ``LockNotOwnedError``, and ``LockTimeout`` is what redis-py
raises when ``with lock:`` runs out of ``blocking_timeout``. (Like redis-py's, they are therefore
also ``RedisError`` and ``ValueError``.)"""

from __future__ import annotations

import redis.exceptions


class LockError(redis.exceptions.LockError):
    """Base class of the errors redislock raises itself (a ``redis.exceptions.LockError``)."""


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


class UpgradeError(LockError):
    """A waiting write acquire of a read-write lock by an owner that holds read locks of it.

    The write lock is granted only when no other owner holds a read lock, and this owner's own
    read holds count too (a read lock cannot be upgraded): it would wait for itself. Redisson
    deadlocks there until the read holds expire; redislock raises this instead, at once. A
    non-blocking attempt (``blocking=False`` or ``timeout=0``) just returns False.
    """
