-- Redisson RPermitExpirableSemaphore getPermits (795a15ad), reimplemented from the documented behaviour.
-- KEYS[1] = count, KEYS[2] = zset, KEYS[3] = channel; ARGV[1] = now.
-- Reclaim; 0 without the count, else available + held.
local expired = redis.call('zrangebyscore', KEYS[2], 0, ARGV[1], 'limit', 0, -1);
local reclaimed = nil;
if #expired > 0 then
    redis.call('zrem', KEYS[2], unpack(expired));
    reclaimed = redis.call('incrby', KEYS[1], #expired);
    if tonumber(reclaimed) > 0 then redis.call('publish', KEYS[3], reclaimed); end;
end;
local value = redis.call('get', KEYS[1]);
if value == false then
    return 0;
end;
return tonumber(value) + redis.call('zcount', KEYS[2], '-inf', '+inf');
