"""Lua scripts of the ``lua`` mode: Redisson's RLock, RReadWriteLock and
RPermitExpirableSemaphore algorithms, written for this project.

The scripts are package data (``redislock/lua/<kind>.lua``), the one set of Lua scripts of the
repository: the module's tests, benchmark and profiler run the same files. Each file named
after a Redisson script kind implements that kind with Redisson's KEYS/ARGV layout and replies;
``unlock-keep-lease`` is this client's unlock (a lease of 0 keeps the TTL). They keep Redisson's
data layout (a hash ``name -> {owner: hold count}`` with a PEXPIRE lease) and release message
(``0`` on ``redisson_lock__channel:{name}``), so these scripts, Redisson clients and the module's
LOCK.* commands can work on the same keys at the same time.
"""

from __future__ import annotations

import hashlib
from importlib import resources


def _load(kind: str) -> str:
    return resources.files(__package__).joinpath("lua", f"{kind}.lua").read_text(encoding="utf-8")


# KEYS[1] lock; ARGV[1] lease ms, ARGV[2] owner. Reply nil (taken or re-entered) or the PTTL.
ACQUIRE = _load("acquire")
# KEYS[1] lock, KEYS[2] token counter; ARGV as ACQUIRE. RFencedLock's algorithm (INCR on every
# successful acquire). Reply {-1, token} or {pttl, -1}.
ACQUIRE_FENCED = _load("fenced-acquire")
# KEYS[1] lock, KEYS[2] channel; ARGV[1] message, ARGV[2] lease ms to re-arm while holds remain
# ("0" keeps the TTL), ARGV[3] owner, ARGV[4] PUBLISH or SPUBLISH. Reply nil / 0 / 1.
UNLOCK = _load("unlock-keep-lease")
# KEYS[1] lock, KEYS[2] channel; ARGV[1] message, ARGV[2] PUBLISH or SPUBLISH. Reply 1 or 0.
FORCE_UNLOCK = _load("forceunlock")
# KEYS[i] lock i; ARGV[1] lease ms, ARGV[i + 1] the owner of KEYS[i]. Reply 1 or 0 per key.
RENEW = _load("renew-batch")


# The read-write lock (Redisson's RReadWriteLock layout; see the files for KEYS/ARGV).
# KEYS[1] lock, KEYS[2] reader's timeout-key prefix; ARGV lease ms, reader, writer field. nil / PTTL.
RW_READ_ACQUIRE = _load("rw-read-acquire")
# KEYS[1] lock; ARGV lease ms, writer field. nil / PTTL.
RW_WRITE_ACQUIRE = _load("rw-write-acquire")
# KEYS[1] lock, KEYS[2] token counter; ARGV as RW_WRITE_ACQUIRE. {-1, token} / {pttl, -1}.
RW_WRITE_ACQUIRE_FENCED = _load("rw-write-fenced-acquire")
# KEYS lock, channel, timeout-key prefix, hold-key prefix; ARGV "0", reader, publish. nil / 0 / 1.
RW_READ_UNLOCK = _load("rw-read-release")
# KEYS lock, channel; ARGV "1", lease ms ("0" keeps the TTL), writer field, publish. nil / 0 / 1.
RW_WRITE_UNLOCK = _load("rw-write-release")
# KEYS lock, channel; ARGV message, publish. 1 when the lock was in that mode (and deleted), else 0.
RW_READ_FORCE_UNLOCK = _load("rw-read-forceunlock")
RW_WRITE_FORCE_UNLOCK = _load("rw-write-forceunlock")
# KEYS[2i-1] lock i, KEYS[2i] its hold-key prefix; ARGV lease ms, then per lock: count, readers.
RW_READ_RENEW = _load("rw-read-renew-batch-own")
# KEYS[1] lock. 1 when read-locked (a writer's own read holds too), else 0.
RW_READ_LOCKED = _load("rw-read-islocked")

# The semaphore: our implementations of Redisson's RPermitExpirableSemaphore scripts (the files the
# module's differential tests run too; see them for KEYS/ARGV), and a renewal of several ids.
# KEYS sem, zset, channel; ARGV n, expiry, now, no-lease score, publish, ids. 'OK' / ':<expiry>' / nil.
SEM_ACQUIRE = _load("pes-tryacquire")
# KEYS sem, channel, zset; ARGV count, now, publish, ids. How many were held (and are returned).
SEM_RELEASE = _load("pes-release-many-partial")
# KEYS sem, zset, channel; ARGV expiry, now, publish, ids. How many were held (and renewed).
SEM_RENEW = _load("sem-renew")
# KEYS sem, zset, channel; ARGV now, publish. The available permits (after expired ones return).
SEM_AVAILABLE = _load("pes-available")
# KEYS sem, channel, zset; ARGV total, publish. nil.
SEM_SET_PERMITS = _load("pes-setpermits")
# KEYS sem, channel; ARGV permits, publish. 1 set, 0 (the semaphore exists).
SEM_TRY_SET_PERMITS = _load("semaphore-trysetpermits")

ALL = (
    ACQUIRE,
    ACQUIRE_FENCED,
    UNLOCK,
    FORCE_UNLOCK,
    RENEW,
    RW_READ_ACQUIRE,
    RW_WRITE_ACQUIRE,
    RW_WRITE_ACQUIRE_FENCED,
    RW_READ_UNLOCK,
    RW_WRITE_UNLOCK,
    RW_READ_FORCE_UNLOCK,
    RW_WRITE_FORCE_UNLOCK,
    RW_READ_RENEW,
    RW_READ_LOCKED,
    SEM_ACQUIRE,
    SEM_RELEASE,
    SEM_RENEW,
    SEM_AVAILABLE,
    SEM_SET_PERMITS,
    SEM_TRY_SET_PERMITS,
)
SHA = {body: hashlib.sha1(body.encode()).hexdigest() for body in ALL}
