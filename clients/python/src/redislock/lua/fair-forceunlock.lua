-- Redisson RFairLock forceUnlock (71ed11d4), reimplemented from the documented behaviour.
-- KEYS[1] = lock hash, KEYS[2] = queue list, KEYS[3] = deadlines zset, KEYS[4] = channel prefix;
-- ARGV[1] = message ("0"), ARGV[2] = now ms, ARGV[3] = publish command. Nil-safe purge.
-- Reply 1 when DEL removed the lock key (message published on '<prefix>:<queue head>' if any), else 0; queue kept.
local lock, queue, deadlines, prefix = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local message, now, publish = ARGV[1], tonumber(ARGV[2]), ARGV[3]
while true do
    local head = redis.call('lindex', queue, 0)
    if not head then
        break
    end
    local deadline = tonumber(redis.call('zscore', deadlines, head))
    if deadline == nil or deadline > now then
        break
    end
    redis.call('zrem', deadlines, head)
    redis.call('lpop', queue)
end
if redis.call('del', lock) == 1 then
    local head = redis.call('lindex', queue, 0)
    if head then
        redis.call(publish, prefix .. ':' .. head, message)
    end
    return 1
end
return 0
