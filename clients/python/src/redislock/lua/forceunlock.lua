-- Redisson RLock forceUnlock, reimplemented from the algorithm.
-- KEYS[1] = lock hash, KEYS[2] = release channel; ARGV[1] = message ("0"), ARGV[2] = publish command.
-- Reply 1 when a lock was deleted (and the message published), 0 when there was none.
if redis.call('del', KEYS[1]) == 0 then
    return 0
end
redis.call(ARGV[2], KEYS[2], ARGV[1])
return 1
