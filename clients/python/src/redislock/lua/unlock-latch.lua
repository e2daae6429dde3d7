-- Redisson RLock unlock with the idempotency latch, reimplemented from the algorithm.
-- KEYS[1] = lock hash, KEYS[2] = release channel, KEYS[3] = latch key
-- ARGV[1] = message ("0"), ARGV[2] = lease ms re-applied while holds remain, ARGV[3] = owner,
-- ARGV[4] = publish command (PUBLISH | SPUBLISH), ARGV[5] = latch PX ms.
-- Reply: a latched earlier result; nil (not the owner); 0 (still held); 1 (freed + published).
local lock, channel, latch = KEYS[1], KEYS[2], KEYS[3]
local message, lease, owner, publish, latch_px = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local earlier = redis.call('get', latch)
if earlier then
    return tonumber(earlier)
end
if redis.call('hexists', lock, owner) == 0 then
    return nil
end
local result
if redis.call('hincrby', lock, owner, -1) > 0 then
    redis.call('pexpire', lock, lease)
    result = 0
else
    redis.call('del', lock)
    redis.call(publish, channel, message)
    result = 1
end
redis.call('set', latch, result, 'px', latch_px)
return result
