-- Redisson RFairLock unlock 3.22-3.23 (14f85250), reimplemented from the documented behaviour.
-- KEYS[1] = lock hash, KEYS[2] = queue list, KEYS[3] = deadlines zset, KEYS[4] = channel prefix; ARGV[1] = message ("0"),
-- ARGV[2] = lease ms, ARGV[3] = owner, ARGV[4] = now ms, ARGV[5] = publish command. Purge fails on a nil head.
-- Reply: nil (owner not a field); 0 (still held, PEXPIRE lease); 1 (deleted, or the lock key was absent);
-- a 1 publishes the message on '<prefix>:<queue head>' when the queue is not empty.
local lock, queue, deadlines, prefix = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local message, lease, owner, now = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local publish = ARGV[5]
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
if redis.call('exists', lock) == 0 then
    local head = redis.call('lindex', queue, 0)
    if head then
        redis.call(publish, prefix .. ':' .. head, message)
    end
    return 1
end
if redis.call('hexists', lock, owner) == 0 then
    return nil
end
if redis.call('hincrby', lock, owner, -1) > 0 then
    redis.call('pexpire', lock, lease)
    return 0
end
redis.call('del', lock)
local head = redis.call('lindex', queue, 0)
if head then
    redis.call(publish, prefix .. ':' .. head, message)
end
return 1
