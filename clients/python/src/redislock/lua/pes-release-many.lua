-- Redisson RPermitExpirableSemaphore release of many ids (cf3ab77b, 3.41+), reimplemented from the documented behaviour.
-- KEYS[1] = count, KEYS[2] = channel, KEYS[3] = zset; ARGV[1] = n, ARGV[2] = now, ARGV[3] = publish command, ARGV[4..] = ids.
-- All or nothing: any id missing or expired replies 0; else reclaim, ZREM, INCRBY, publish the number removed.
for i = 4, #ARGV do
    local s = redis.call('zscore', KEYS[3], ARGV[i]);
    if s == false or tonumber(s) <= tonumber(ARGV[2]) then
        return 0;
    end;
end;
local expired = redis.call('zrangebyscore', KEYS[3], 0, ARGV[2], 'limit', 0, -1);
if #expired > 0 then
    redis.call('zrem', KEYS[3], unpack(expired));
    local value = redis.call('incrby', KEYS[1], #expired);
    if tonumber(value) > 0 then redis.call(ARGV[3], KEYS[2], value); end;
end;
local removed = redis.call('zrem', KEYS[3], unpack(ARGV, 4, #ARGV));
redis.call('incrby', KEYS[1], removed);
redis.call(ARGV[3], KEYS[2], removed);
return removed;
