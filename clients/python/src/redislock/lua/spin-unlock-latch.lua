-- Redisson SpinLock unlock with the unlock latch (73ac2729), reimplemented from the documented behaviour.
-- KEYS[1] = lock hash, KEYS[2] = latch; ARGV[1] = lease ms, ARGV[2] = owner, ARGV[3] = latch PX ms.
-- Reply: tonumber(latch) if it exists; nil (not a field, no latch); 0 (still held, latch "0"); 1 (deleted, latch "1").
local lock, latch = KEYS[1], KEYS[2]
local lease, owner, latch_px = ARGV[1], ARGV[2], ARGV[3]
local earlier = redis.call('get', latch)
if earlier then
    return tonumber(earlier)
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
redis.call('set', latch, 1, 'px', latch_px)
return 1
