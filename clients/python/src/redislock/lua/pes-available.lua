-- Redisson RPermitExpirableSemaphore availablePermits (26b3972b), reimplemented from the documented behaviour.
-- KEYS[1] = count, KEYS[2] = zset, KEYS[3] = channel; ARGV[1] = now, ARGV[2] = publish command.
-- Reclaim; reclaimed: the INCRBY result; else the GET value (bulk) or 0.
local expired = redis.call('zrangebyscore', KEYS[2], 0, ARGV[1], 'limit', 0, -1);
local reclaimed = nil;
if #expired > 0 then
    redis.call('zrem', KEYS[2], unpack(expired));
    reclaimed = redis.call('incrby', KEYS[1], #expired);
    if tonumber(reclaimed) > 0 then redis.call(ARGV[2], KEYS[3], reclaimed); end;
end;
if reclaimed ~= nil then
    return reclaimed;
end;
local value = redis.call('get', KEYS[1]);
if value == false then
    return 0;
end;
return value;
