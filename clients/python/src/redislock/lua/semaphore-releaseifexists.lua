-- Redisson RSemaphore releaseIfExists (68838024), reimplemented from the documented behaviour.
-- KEYS[1] = count, KEYS[2] = channel; ARGV[1] = permits, ARGV[2] = publish command. 0 absent; else INCRBY, publish, 1.
local value = redis.call('get', KEYS[1]);
if (value == false) then
    return 0;
end;
local v = redis.call('incrby', KEYS[1], ARGV[1]);
redis.call(ARGV[2], KEYS[2], v);
return 1;
