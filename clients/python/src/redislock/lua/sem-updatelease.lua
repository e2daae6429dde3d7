-- Redisson RPermitExpirableSemaphore updateLeaseTime (3.22+), reimplemented from the algorithm
-- (not Redisson's text).
-- KEYS[1] = semaphore, KEYS[2] = held-permit zset, KEYS[3] = channel 'redisson_sc:{name}'.
-- ARGV[1] = permit id, ARGV[2] = the new expiry score (now + lease, or 922337203685477),
-- ARGV[3] = now (client clock, ms), ARGV[4] = PUBLISH | SPUBLISH.
-- Every expired permit (score <= now) goes back first (the new count published when positive).
-- Reply 1 and set the id's expiry when it is still held, else 0.
local sem, held, channel = KEYS[1], KEYS[2], KEYS[3]
local id, expiry, now, publish = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local expired = redis.call('zremrangebyscore', held, 0, now)
if expired > 0 then
    local count = redis.call('incrby', sem, expired)
    if count > 0 then
        redis.call(publish, channel, count)
    end
end
if redis.call('zscore', held, id) then
    redis.call('zadd', held, expiry, id)
    return 1
end
return 0
