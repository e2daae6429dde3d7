-- Redisson RPermitExpirableSemaphore release of several ids (3.41+: all or nothing),
-- reimplemented from the algorithm (not Redisson's text).
-- KEYS[1] = semaphore, KEYS[2] = channel 'redisson_sc:{name}', KEYS[3] = held-permit zset.
-- ARGV[1] = number of ids (unused), ARGV[2] = now (client clock, ms), ARGV[3] = PUBLISH | SPUBLISH,
-- ARGV[4 ..] = the permit ids.
-- Any id not held or expired (score <= now): reply 0, nothing changes. Otherwise every expired
-- permit goes back (the new count published when positive), the ids are removed and returned
-- (a repeated id counts once), the number returned is published and replied.
local sem, channel, held = KEYS[1], KEYS[2], KEYS[3]
local now, publish = tonumber(ARGV[2]), ARGV[3]
for i = 4, #ARGV do
    local score = redis.call('zscore', held, ARGV[i])
    if not score or tonumber(score) <= now then
        return 0
    end
end
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
redis.call('incrby', sem, returned)
redis.call(publish, channel, returned)
return returned
