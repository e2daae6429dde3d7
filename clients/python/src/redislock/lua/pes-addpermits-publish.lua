-- Redisson RPermitExpirableSemaphore addPermits (575a088d), reimplemented from the documented behaviour.
-- KEYS[1] = count, KEYS[2] = channel; ARGV[1] = delta.
-- SET value + delta (a Lua number); publish the delta when positive; nil.
local value = redis.call('get', KEYS[1]);
if (value == false) then
    value = 0;
end;
redis.call('set', KEYS[1], tonumber(value) + tonumber(ARGV[1]));
if tonumber(ARGV[1]) > 0 then
    redis.call('publish', KEYS[2], ARGV[1]);
end;
