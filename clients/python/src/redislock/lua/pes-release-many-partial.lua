-- Redisson RPermitExpirableSemaphore release of many ids (bb41a8ec, 3.23.4-3.40), reimplemented from the documented behaviour.
-- KEYS[1] = count, KEYS[2] = channel, KEYS[3] = zset; ARGV[1] = n, ARGV[2] = now, ARGV[3] = publish command, ARGV[4..] = ids.
-- Reclaim, then ZREM the ids: 0 none; else INCRBY and publish the number removed, reply it.
local expired = redis.call('zrangebyscore', KEYS[3], 0, ARGV[2], 'limit', 0, -1);
if #expired > 0 then
    redis.call('zrem', KEYS[3], unpack(expired));
    local value = redis.call('incrby', KEYS[1], #expired);
    if tonumber(value) > 0 then redis.call(ARGV[3], KEYS[2], value); end;
end;
local removed = redis.call('zrem', KEYS[3], unpack(ARGV, 4, #ARGV));
if tonumber(removed) == 0 then
    return 0;
end;
redis.call('incrby', KEYS[1], removed);
redis.call(ARGV[3], KEYS[2], removed);
return removed;
