-- Redisson RPermitExpirableSemaphore release of one id (2eac39f9), reimplemented from the documented behaviour.
-- KEYS[1] = count, KEYS[2] = channel, KEYS[3] = zset; ARGV[1] = id, ARGV[2] = permits, ARGV[3] = now.
-- 0 absent; else ZREM, INCRBY, publish the new value, 0 if it had expired else 1.
local expire = redis.call('zscore', KEYS[3], ARGV[1]);
local removed = redis.call('zrem', KEYS[3], ARGV[1]);
if tonumber(removed) == 0 then
    return 0;
end;
local value = redis.call('incrby', KEYS[1], ARGV[2]);
redis.call('publish', KEYS[2], value);
if tonumber(expire) <= tonumber(ARGV[3]) then
    return 0;
end;
return 1;
