-- Redisson RSemaphore drainPermits (c87766d5), reimplemented from the documented behaviour.
-- KEYS[1] = count. 0 absent; else SET 0 and reply the old value (a bulk string).
local value = redis.call('get', KEYS[1]);
if (value == false) then
    return 0;
end;
redis.call('set', KEYS[1], 0);
return value;
