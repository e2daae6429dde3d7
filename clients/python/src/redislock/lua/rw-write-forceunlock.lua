-- Redisson RWriteLock forceUnlock from 3.22 (2e2cb2a3: publish command from ARGV), reimplemented
-- from the algorithm.
-- KEYS[1] = read-write lock hash, KEYS[2] = channel redisson_rwlock:{name}
-- ARGV[1] = message ("1"), ARGV[2] = PUBLISH | SPUBLISH.
-- Mode write: DEL the hash (the writer's own read holds too), publish, reply 1.
-- Otherwise (missing, or read-locked) reply 0, untouched.
if redis.call('hget', KEYS[1], 'mode') == 'write' then
    redis.call('del', KEYS[1])
    redis.call(ARGV[2], KEYS[2], ARGV[1])
    return 1
end
return 0
