-- Redisson RWriteLock forceUnlock as 3.17-3.21 did it (23639b0b: PUBLISH named in the script),
-- reimplemented from the algorithm.
-- KEYS[1] = read-write lock hash, KEYS[2] = channel redisson_rwlock:{name}; ARGV[1] = message ("1").
-- Mode write: DEL the hash (the writer's own read holds too), publish, reply 1.
-- Otherwise (missing, or read-locked) reply 0, untouched.
if redis.call('hget', KEYS[1], 'mode') == 'write' then
    redis.call('del', KEYS[1])
    redis.call('publish', KEYS[2], ARGV[1])
    return 1
end
return 0
