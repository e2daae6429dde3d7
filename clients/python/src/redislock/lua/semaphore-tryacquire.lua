-- Redisson RSemaphore tryAcquire (c7dc9d18), reimplemented from the documented behaviour.
-- KEYS[1] = count; ARGV[1] = permits. 1 taken (DECRBY), 0 missing or too few.
local value = redis.call('get', KEYS[1]);
if (value ~= false and tonumber(value) >= tonumber(ARGV[1])) then
    redis.call('decrby', KEYS[1], ARGV[1]);
    return 1;
end;
return 0;
