-- Redisson RSemaphore trySetPermits (38bf9988), reimplemented from the documented behaviour.
-- KEYS[1] = count, KEYS[2] = channel; ARGV[1] = permits, ARGV[2] = publish command, ARGV[3] = ttl ms. 1 set (absent key) and published, 0 exists.
local value = redis.call('get', KEYS[1]);
if (value == false) then
    redis.call('set', KEYS[1], ARGV[1], 'px', ARGV[3]);
    redis.call(ARGV[2], KEYS[2], ARGV[1]);
    return 1;
end;
return 0;
