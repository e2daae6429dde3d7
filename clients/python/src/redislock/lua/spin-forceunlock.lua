-- Redisson SpinLock forceUnlock (51b433c3), reimplemented from the documented behaviour.
-- KEYS[1] = lock key (any type); no ARGV. 1 when DEL removed it, 0 when absent; never publishes.
if redis.call('del', KEYS[1]) == 1 then
    return 1
end
return 0
