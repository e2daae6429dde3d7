-- Redisson RFairLock acquireFailed (d1ddef65), reimplemented from the documented behaviour.
-- KEYS[1] = queue list, KEYS[2] = deadlines zset; ARGV[1] = owner giving up, ARGV[2] = wait ms.
-- Every waiter after the owner's first place in the queue gets ZINCRBY -wait; then ZREM and LREM (all) the owner; nil.
local queue, deadlines, owner = KEYS[1], KEYS[2], ARGV[1]
local waiters = redis.call('lrange', queue, 0, -1)
local place = nil
for i, waiter in ipairs(waiters) do
    if waiter == owner then
        place = i
        break
    end
end
if place then
    for i = place + 1, #waiters do
        redis.call('zincrby', deadlines, -ARGV[2], waiters[i])
    end
end
redis.call('zrem', deadlines, owner)
redis.call('lrem', queue, 0, owner)
