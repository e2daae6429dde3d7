-- Redisson RSemaphore trySetPermits (8d41a082, and PES 44d63d48), reimplemented from the documented behaviour.
-- KEYS[1] = count, KEYS[2] = channel; ARGV[1] = permits. 1 set (absent key) and published, 0 exists.
local value = redis.call('get', KEYS[1]);
if (value == false) then
    redis.call('set', KEYS[1], ARGV[1]);
    redis.call('publish', KEYS[2], ARGV[1]);
    return 1;
end;
return 0;
