-- Redisson RLock unlock as 3.22-3.23 did it (no idempotency latch), reimplemented from the
-- algorithm. Used by the benchmark as the cheaper Lua release baseline.
-- KEYS[1] = lock hash, KEYS[2] = release channel
-- ARGV[1] = message ("0"), ARGV[2] = lease ms re-applied while holds remain, ARGV[3] = owner,
-- ARGV[4] = publish command (PUBLISH | SPUBLISH).
-- Reply: nil (not the owner); 0 (still held); 1 (freed + published).
local lock, channel = KEYS[1], KEYS[2]
local message, lease, owner, publish = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
if redis.call('hexists', lock, owner) == 0 then
    return nil
end
if redis.call('hincrby', lock, owner, -1) > 0 then
    redis.call('pexpire', lock, lease)
    return 0
end
redis.call('del', lock)
redis.call(publish, channel, message)
return 1
