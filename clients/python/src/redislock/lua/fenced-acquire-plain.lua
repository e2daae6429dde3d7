-- Redisson RFencedLock acquire through the RLock API (lock(), tryLock()), reimplemented from
-- the algorithm. KEYS[1] = lock hash, KEYS[2] = token counter; ARGV[1] = lease ms; ARGV[2] = owner.
-- Free or already ours: one more hold, a fresh lease, the counter INCRed; reply nil.
-- Held by someone else: the PTTL, the counter untouched.
local lock, counter, lease, owner = KEYS[1], KEYS[2], ARGV[1], ARGV[2]
if redis.call('exists', lock) == 0 or redis.call('hexists', lock, owner) == 1 then
    redis.call('hincrby', lock, owner, 1)
    redis.call('pexpire', lock, lease)
    redis.call('incr', counter)
    return nil
end
return redis.call('pttl', lock)
