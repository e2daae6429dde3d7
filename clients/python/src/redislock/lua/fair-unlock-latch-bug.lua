-- Redisson RFairLock unlock with the unlock latch 3.24-3.30 (ca303f85), reimplemented from the documented behaviour.
-- KEYS[1] = lock hash, KEYS[2] = queue list, KEYS[3] = deadlines zset, KEYS[4] = channel prefix, KEYS[5] = latch;
-- ARGV[1] = message ("0"), ARGV[2] = lease ms, ARGV[3] = owner, ARGV[4] = now ms, ARGV[5] = publish command,
-- ARGV[6] = latch PX ms. Latch first (reply tonumber(latch)); purge fails on a nil head; 0/1 replies set the latch.
-- Reply: nil (owner not a field); 0 (still held, PEXPIRE lease); 1 (deleted, or the lock key was absent);
-- a 1 publishes the message on '<prefix>:<queue head>' when the queue is not empty.
local lock, queue, deadlines, prefix, latch = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local message, lease, owner, now = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local publish, latch_px = ARGV[5], ARGV[6]
local earlier = redis.call('get', latch)
if earlier then
    return tonumber(earlier)
end
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
    redis.call('set', latch, 1, 'px', latch_px)
    return 1
end
if redis.call('hexists', lock, owner) == 0 then
    return nil
end
if redis.call('hincrby', lock, owner, -1) > 0 then
    redis.call('pexpire', lock, lease)
    redis.call('set', latch, 0, 'px', latch_px)
    return 0
end
redis.call('del', lock)
local head = redis.call('lindex', queue, 0)
if head then
    redis.call(publish, prefix .. ':' .. head, message)
end
redis.call('set', latch, 1, 'px', latch_px)
return 1
