-- Redisson RFairLock acquire (8f6ed299), reimplemented from the documented behaviour.
-- KEYS[1] = lock hash, KEYS[2] = queue list, KEYS[3] = deadlines zset; ARGV[1] = lease ms, ARGV[2] = owner,
-- ARGV[3] = wait ms, ARGV[4] = now ms. Purge; nil acquired or re-entered; already queued: max(0, PTTL);
-- else enqueue with ttl = last waiter's deadline - now (or PTTL), deadline ttl + wait + now; reply ttl.
local lock, queue, deadlines = KEYS[1], KEYS[2], KEYS[3]
local lease, owner, wait, now = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
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
if redis.call('zscore', deadlines, owner) then
    local pttl = redis.call('pttl', lock)
    if pttl < 0 then
        return 0
    end
    return pttl
end
local last = redis.call('lindex', queue, -1)
local last_deadline = false
if last and last ~= owner then
    last_deadline = redis.call('zscore', deadlines, last)
end
local ttl
if last_deadline then
    ttl = tonumber(last_deadline) - now
else
    ttl = redis.call('pttl', lock)
end
if redis.call('zadd', deadlines, ttl + wait + now, owner) == 1 then
    redis.call('rpush', queue, owner)
end
return ttl
