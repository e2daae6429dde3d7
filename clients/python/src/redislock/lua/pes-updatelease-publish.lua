-- Redisson RPermitExpirableSemaphore updateLeaseTime (5100a65f), reimplemented from the documented behaviour.
-- KEYS[1] = count, KEYS[2] = zset, KEYS[3] = channel; ARGV[1] = id, ARGV[2] = score, ARGV[3] = now.
-- Reclaim; 1 and ZADD the new score when the id is held, else 0.
local expired = redis.call('zrangebyscore', KEYS[2], 0, ARGV[3], 'limit', 0, -1);
local reclaimed = nil;
if #expired > 0 then
    redis.call('zrem', KEYS[2], unpack(expired));
    reclaimed = redis.call('incrby', KEYS[1], #expired);
    if tonumber(reclaimed) > 0 then redis.call('publish', KEYS[3], reclaimed); end;
end;
local value = redis.call('zscore', KEYS[2], ARGV[1]);
if (value ~= false) then
    redis.call('zadd', KEYS[2], ARGV[2], ARGV[1]);
    return 1;
end;
return 0;
