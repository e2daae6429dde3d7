-- Redisson RFencedLock acquire (lockAndGetToken), reimplemented from the algorithm.
-- KEYS[1] = lock hash, KEYS[2] = token counter; ARGV[1] = lease ms; ARGV[2] = owner.
-- Free or already ours: one more hold, a fresh lease and the next counter value: {-1, token}.
-- Held by someone else: {pttl, -1}, the counter untouched.
local lock, counter, lease, owner = KEYS[1], KEYS[2], ARGV[1], ARGV[2]
if redis.call('exists', lock) == 0 or redis.call('hexists', lock, owner) == 1 then
    redis.call('hincrby', lock, owner, 1)
    redis.call('pexpire', lock, lease)
    return {-1, redis.call('incr', counter)}
end
return {redis.call('pttl', lock), -1}
