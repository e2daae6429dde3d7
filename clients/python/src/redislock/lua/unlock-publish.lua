-- Redisson RLock unlock as 3.17-3.21 did it (PUBLISH named in the script, no latch),
-- reimplemented from the algorithm.
-- KEYS[1] = lock hash, KEYS[2] = release channel
-- ARGV[1] = message ("0"), ARGV[2] = lease ms re-applied while holds remain, ARGV[3] = owner.
-- Reply: nil (not the owner); 0 (still held); 1 (freed + published).
local lock, channel = KEYS[1], KEYS[2]
local message, lease, owner = ARGV[1], ARGV[2], ARGV[3]
if redis.call('hexists', lock, owner) == 0 then
    return nil
end
if redis.call('hincrby', lock, owner, -1) > 0 then
    redis.call('pexpire', lock, lease)
    return 0
end
redis.call('del', lock)
redis.call('publish', channel, message)
return 1
