"""Lua scripts of the ``lua`` mode: Redisson's RLock algorithm, written for this package.

They keep Redisson's data layout (a hash ``name -> {owner: hold count}`` with a PEXPIRE lease),
its replies (acquire: nil or the holder's PTTL; unlock: nil / 0 / 1; renew: 1 / 0 per key) and its
release message (``0`` on ``redisson_lock__channel:{name}``), so these scripts, Redisson clients
and the module's LOCK.* commands can work on the same keys at the same time.
"""

from __future__ import annotations

import hashlib

# KEYS[1] lock; ARGV[1] lease ms, ARGV[2] owner.
# Taken when nobody holds the lock or this owner already does: one more hold, fresh lease, nil.
# Held by another owner: the remaining lease (PTTL), nothing written.
ACQUIRE = """
local lock, lease, owner = KEYS[1], ARGV[1], ARGV[2]
if redis.call('exists', lock) == 1 and redis.call('hexists', lock, owner) == 0 then
    return redis.call('pttl', lock)
end
redis.call('hincrby', lock, owner, 1)
redis.call('pexpire', lock, lease)
return nil
"""

# KEYS[1] lock, KEYS[2] token counter; ARGV as ACQUIRE.
# RFencedLock's algorithm: every successful acquire (reentrant ones too) increments the counter.
# Reply {-1, token} when taken, {pttl, -1} when another owner holds the lock.
ACQUIRE_FENCED = """
local lock, counter, lease, owner = KEYS[1], KEYS[2], ARGV[1], ARGV[2]
if redis.call('exists', lock) == 1 and redis.call('hexists', lock, owner) == 0 then
    return {redis.call('pttl', lock), -1}
end
redis.call('hincrby', lock, owner, 1)
redis.call('pexpire', lock, lease)
return {-1, redis.call('incr', counter)}
"""

# KEYS[1] lock, KEYS[2] release channel; ARGV[1] message, ARGV[2] lease ms to re-arm while holds
# remain ("0" keeps the current TTL), ARGV[3] owner, ARGV[4] PUBLISH or SPUBLISH.
# Reply nil: not held by this owner; 0: one hold less, still held; 1: freed and announced.
UNLOCK = """
local lock, channel = KEYS[1], KEYS[2]
local message, lease, owner, publish = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4]
if redis.call('hexists', lock, owner) == 0 then
    return nil
end
if redis.call('hincrby', lock, owner, -1) > 0 then
    if lease > 0 then
        redis.call('pexpire', lock, lease)
    end
    return 0
end
redis.call('del', lock)
redis.call(publish, channel, message)
return 1
"""

# KEYS[1] lock, KEYS[2] release channel; ARGV[1] message, ARGV[2] PUBLISH or SPUBLISH.
# Deletes the lock whoever holds it; reply 1 (deleted and announced) or 0 (there was none).
FORCE_UNLOCK = """
if redis.call('del', KEYS[1]) == 0 then
    return 0
end
redis.call(ARGV[2], KEYS[2], ARGV[1])
return 1
"""

# KEYS[i] lock i; ARGV[1] lease ms, ARGV[i + 1] the owner expected in KEYS[i].
# Reply: per key 1 (still held by that owner, lease reset) or 0 (lost: nothing changed).
RENEW = """
local lease, renewed = ARGV[1], {}
for i, lock in ipairs(KEYS) do
    if redis.call('hexists', lock, ARGV[i + 1]) == 1 then
        redis.call('pexpire', lock, lease)
        renewed[i] = 1
    else
        renewed[i] = 0
    end
end
return renewed
"""

ALL = (ACQUIRE, ACQUIRE_FENCED, UNLOCK, FORCE_UNLOCK, RENEW)
SHA = {body: hashlib.sha1(body.encode()).hexdigest() for body in ALL}
