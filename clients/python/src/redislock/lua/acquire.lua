-- Redisson RLock acquire, reimplemented from the algorithm (not Redisson's text).
-- KEYS[1] = lock hash; ARGV[1] = lease ms; ARGV[2] = owner.
-- Free or already ours: one more hold and a fresh lease, reply nil. Else reply the PTTL.
local lock, lease, owner = KEYS[1], ARGV[1], ARGV[2]
local free = redis.call('exists', lock) == 0
if free or redis.call('hexists', lock, owner) == 1 then
    redis.call('hincrby', lock, owner, 1)
    redis.call('pexpire', lock, lease)
    return nil
end
return redis.call('pttl', lock)
