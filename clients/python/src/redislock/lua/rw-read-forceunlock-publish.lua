-- Redisson RReadLock forceUnlock as 3.17-3.21 did it (23f9bc91: PUBLISH named in the script),
-- reimplemented from the algorithm.
-- KEYS[1] = read-write lock hash, KEYS[2] = channel redisson_rwlock:{name}; ARGV[1] = message ("0").
-- Mode read: DEL the hash (every reader; their timeout keys are left to expire), publish, reply 1.
-- Otherwise (missing, or write-locked) reply 0, untouched.
if redis.call('hget', KEYS[1], 'mode') == 'read' then
    redis.call('del', KEYS[1])
    redis.call('publish', KEYS[2], ARGV[1])
    return 1
end
return 0
