-- Redisson RSemaphore release (ae275824), reimplemented from the documented behaviour.
-- KEYS[1] = count, KEYS[2] = channel; ARGV[1] = permits, ARGV[2] = publish command. INCRBY, publish the new value; nil.
local value = redis.call('incrby', KEYS[1], ARGV[1]);
redis.call(ARGV[2], KEYS[2], value);
