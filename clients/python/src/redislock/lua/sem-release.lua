-- The Python client's release of a permit's ids: Redisson's release of several ids as 3.23.4 to
-- 3.40.2 did it (whatever is held is returned; reimplemented from the algorithm, not Redisson's
-- text), on the layout of sem-release-many.lua, replying how many were held like LOCK.SEMRELEASE.
-- KEYS[1] = semaphore, KEYS[2] = channel 'redisson_sc:{name}', KEYS[3] = held-permit zset.
-- ARGV[1] = number of ids (unused), ARGV[2] = now (client clock, ms), ARGV[3] = PUBLISH | SPUBLISH,
-- ARGV[4 ..] = the permit ids.
-- Every expired permit (score <= now) goes back first (the new count published when positive),
-- so an expired id is not counted; then the given ids still held are removed and returned, the
-- number returned is published (when > 0) and replied.
local sem, channel, held = KEYS[1], KEYS[2], KEYS[3]
local now, publish = ARGV[2], ARGV[3]
local expired = redis.call('zremrangebyscore', held, 0, now)
if expired > 0 then
    local count = redis.call('incrby', sem, expired)
    if count > 0 then
        redis.call(publish, channel, count)
    end
end
local returned = 0
for i = 4, #ARGV do
    returned = returned + redis.call('zrem', held, ARGV[i])
end
if returned > 0 then
    redis.call('incrby', sem, returned)
    redis.call(publish, channel, returned)
end
return returned
