-- Redisson NonReentrantFairLock tryLock without wait (5bea9498), reimplemented from the documented behaviour.
-- KEYS[1] = lock hash, KEYS[2] = queue list, KEYS[3] = deadlines zset; ARGV[1] = lease ms, ARGV[2] = owner,
-- ARGV[3] = now ms, ARGV[4] = wait ms, ARGV[5] = error text. Purge; nil acquired; error ARGV[5] if held by owner; 1 busy.
local lock, queue, deadlines = KEYS[1], KEYS[2], KEYS[3]
local lease, owner, now, wait = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]
local errtext = ARGV[5]
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
    return redis.error_reply(errtext)
end
return 1
