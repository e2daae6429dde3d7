-- Redisson RSemaphore release (6ef99684), reimplemented from the documented behaviour.
-- KEYS[1] = count, KEYS[2] = channel; ARGV[1] = permits. INCRBY, publish the new value; nil.
local value = redis.call('incrby', KEYS[1], ARGV[1]);
redis.call('publish', KEYS[2], value);
