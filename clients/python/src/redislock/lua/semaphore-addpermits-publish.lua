-- Redisson RSemaphore addPermits (af883fdf), reimplemented from the documented behaviour.
-- KEYS[1] = count, KEYS[2] = channel; ARGV[1] = delta. SET value + delta (a Lua number), publish it; nil.
local value = redis.call('get', KEYS[1]);
if (value == false) then
    value = 0;
end;
local v = value + ARGV[1];
redis.call('set', KEYS[1], v);
redis.call('publish', KEYS[2], v);
