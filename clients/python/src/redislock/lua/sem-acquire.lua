-- Redisson RPermitExpirableSemaphore tryAcquire (3.23.4+ layout: several ids per call),
-- reimplemented from the algorithm (not Redisson's text).
-- KEYS[1] = semaphore (string: the available permits), KEYS[2] = held-permit zset
-- ('{name}:timeout': permit id -> expiry in client-clock ms), KEYS[3] = channel 'redisson_sc:{name}'.
-- ARGV[1] = n permits, ARGV[2] = expiry score of the new permits (now + lease, or the no-lease
-- score), ARGV[3] = now (client clock, ms), ARGV[4] = the no-lease score 922337203685477,
-- ARGV[5] = PUBLISH | SPUBLISH, ARGV[6 .. 5 + n] = the new permit ids.
-- First up to n expired permits (score <= now) go back to the semaphore (the new count is
-- published when positive). Then, when at least n are available: take n, one zset member per id,
-- the zset gets the semaphore's TTL when it has one; reply 'OK'. Otherwise reply ':<lowest
-- expiry>' when some held permit has a lease, nil when none will expire by itself.
local sem, held, channel = KEYS[1], KEYS[2], KEYS[3]
local n, expiry, now, forever, publish = tonumber(ARGV[1]), ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local expired = redis.call('zrangebyscore', held, 0, now, 'limit', 0, n)
if #expired > 0 then
    for _, id in ipairs(expired) do
        redis.call('zrem', held, id)
    end
    local count = redis.call('incrby', sem, #expired)
    if count > 0 then
        redis.call(publish, channel, count)
    end
end
local available = tonumber(redis.call('get', sem) or '0')
if available >= n then
    if n > 0 then
        redis.call('decrby', sem, n)
        for i = 6, 5 + n do
            redis.call('zadd', held, expiry, ARGV[i])
        end
        local ttl = redis.call('pttl', sem)
        if ttl > 0 then
            redis.call('pexpire', held, ttl)
        end
    end
    return 'OK'
end
local first = redis.call('zrange', held, 0, 0, 'withscores')
if first[1] ~= nil and tonumber(first[2]) ~= tonumber(forever) then
    return ':' .. first[2]
end
return nil
