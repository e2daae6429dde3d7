-- The Python client's renewal of a permit's ids: Redisson's updateLeaseTime (pes-updatelease.lua)
-- for several ids at once, replying how many were renewed like LOCK.SEMRENEW.
-- KEYS[1] = semaphore, KEYS[2] = held-permit zset, KEYS[3] = channel 'redisson_sc:{name}'.
-- ARGV[1] = the new expiry score (now + lease), ARGV[2] = now (client clock, ms),
-- ARGV[3] = PUBLISH | SPUBLISH, ARGV[4 ..] = the permit ids.
-- Every expired permit (score <= now) goes back first (the new count published when positive),
-- so an expired id is not renewed; the ids still held get the new expiry. Reply their number.
local sem, held, channel = KEYS[1], KEYS[2], KEYS[3]
local expiry, now, publish = ARGV[1], ARGV[2], ARGV[3]
local expired = redis.call('zremrangebyscore', held, 0, now)
if expired > 0 then
    local count = redis.call('incrby', sem, expired)
    if count > 0 then
        redis.call(publish, channel, count)
    end
end
local renewed = 0
for i = 4, #ARGV do
    if redis.call('zscore', held, ARGV[i]) then
        redis.call('zadd', held, expiry, ARGV[i])
        renewed = renewed + 1
    end
end
return renewed
