-- Redisson RLock forceUnlock as 3.17-3.21 did it (PUBLISH named in the script), reimplemented
-- from the algorithm.
-- KEYS[1] = lock (any type), KEYS[2] = release channel; ARGV[1] = message ("0").
-- Reply 1 when a key was deleted (and the message published), 0 when there was none.
if redis.call('del', KEYS[1]) == 0 then
    return 0
end
redis.call('publish', KEYS[2], ARGV[1])
return 1
