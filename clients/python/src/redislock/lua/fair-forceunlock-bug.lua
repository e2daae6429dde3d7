-- Redisson RFairLock forceUnlock 3.22-3.30 (047c11d7), reimplemented from the documented behaviour.
-- KEYS[1] = lock hash, KEYS[2] = queue list, KEYS[3] = deadlines zset, KEYS[4] = channel prefix;
-- ARGV[1] = message ("0"), ARGV[2] = now ms, ARGV[3] = publish command. Purge fails on a head without deadline.
-- Reply 1 when DEL removed the lock key (message published on '<prefix>:<queue head>' if any), else 0; queue kept.
local lock, queue, deadlines, prefix = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local message, now, publish = ARGV[1], tonumber(ARGV[2]), ARGV[3]
while true do
    local head = redis.call('lindex', queue, 0)
    if not head then
        break
    end
    -- a head without deadline fails here: attempt to compare nil with number
    if tonumber(redis.call('zscore', deadlines, head)) <= now then
        redis.call('zrem', deadlines, head)
        redis.call('lpop', queue)
    else
        break
    end
end
if redis.call('del', lock) == 1 then
    local head = redis.call('lindex', queue, 0)
    if head then
        redis.call(publish, prefix .. ':' .. head, message)
    end
    return 1
end
return 0
