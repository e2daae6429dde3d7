-- Redisson RSemaphore addPermits (98238d40), reimplemented from the documented behaviour.
-- KEYS[1] = count, KEYS[2] = channel; ARGV[1] = delta, ARGV[2] = publish command. SET value + delta (a Lua number), publish it; nil.
local value = redis.call('get', KEYS[1]);
if (value == false) then
    value = 0;
end;
local v = value + ARGV[1];
redis.call('set', KEYS[1], v);
redis.call(ARGV[2], KEYS[2], v);
