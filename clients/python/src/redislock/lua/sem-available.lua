-- Redisson RPermitExpirableSemaphore availablePermits (3.22+), reimplemented from the algorithm
-- (not Redisson's text).
-- KEYS[1] = semaphore, KEYS[2] = held-permit zset, KEYS[3] = channel 'redisson_sc:{name}'.
-- ARGV[1] = now (client clock, ms), ARGV[2] = PUBLISH | SPUBLISH.
-- Every expired permit (score <= now) goes back to the semaphore; when any did, the new count is
-- published (when positive) and replied as an integer. Otherwise reply the stored value as it is
-- (a bulk string), or the integer 0 when the semaphore does not exist.
local sem, held, channel = KEYS[1], KEYS[2], KEYS[3]
local now, publish = ARGV[1], ARGV[2]
local expired = redis.call('zremrangebyscore', held, 0, now)
if expired > 0 then
    local count = redis.call('incrby', sem, expired)
    if count > 0 then
        redis.call(publish, channel, count)
    end
    return count
end
local value = redis.call('get', sem)
if value == false then
    return 0
end
return value
