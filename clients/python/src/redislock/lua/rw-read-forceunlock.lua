-- Redisson RReadLock forceUnlock from 3.22 (27dbe744: publish command from ARGV), reimplemented
-- from the algorithm.
-- KEYS[1] = read-write lock hash, KEYS[2] = channel redisson_rwlock:{name}
-- ARGV[1] = message ("0"), ARGV[2] = PUBLISH | SPUBLISH.
-- Mode read: DEL the hash (every reader; their timeout keys are left to expire), publish, reply 1.
-- Otherwise (missing, or write-locked) reply 0, untouched.
if redis.call('hget', KEYS[1], 'mode') == 'read' then
    redis.call('del', KEYS[1])
    redis.call(ARGV[2], KEYS[2], ARGV[1])
    return 1
end
return 0
