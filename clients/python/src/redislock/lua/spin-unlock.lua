-- Redisson SpinLock unlock before 3.24 (5b9e58d1), reimplemented from the documented behaviour.
-- KEYS[1] = lock hash; ARGV[1] = lease ms re-applied while holds remain, ARGV[2] = owner.
-- Reply: nil (not a field); 0 (still held, PEXPIRE); 1 (count 0, key deleted). Never publishes.
local lock, lease, owner = KEYS[1], ARGV[1], ARGV[2]
if redis.call('hexists', lock, owner) == 0 then
    return nil
end
if redis.call('hincrby', lock, owner, -1) > 0 then
    redis.call('pexpire', lock, lease)
    return 0
end
redis.call('del', lock)
return 1
