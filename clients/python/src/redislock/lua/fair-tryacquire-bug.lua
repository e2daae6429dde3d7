-- Redisson RFairLock tryLock without wait up to 3.30 (aa0a28d2), reimplemented from the documented behaviour.
-- KEYS[1] = lock hash, KEYS[2] = queue list, KEYS[3] = deadlines zset; ARGV[1] = lease ms, ARGV[2] = owner,
-- ARGV[3] = now ms, ARGV[4] = wait ms. Purge (fails on a head without deadline); nil acquired or re-entered; 1 busy.
local lock, queue, deadlines = KEYS[1], KEYS[2], KEYS[3]
local lease, owner, now, wait = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]
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
    if not head or head == owner then
        redis.call('lpop', queue)
        redis.call('zrem', deadlines, owner)
        for _, waiter in ipairs(redis.call('zrange', deadlines, 0, -1)) do
            redis.call('zincrby', deadlines, -wait, waiter)
        end
        redis.call('hset', lock, owner, 1)
        redis.call('pexpire', lock, lease)
        return nil
    end
end
if redis.call('hexists', lock, owner) == 1 then
    redis.call('hincrby', lock, owner, 1)
    redis.call('pexpire', lock, lease)
    return nil
end
return 1
