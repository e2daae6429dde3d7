-- The Python client's unlock: Redisson's RLock unlock (the `unlock` kind's layout), except that a
-- lease of 0 keeps the current TTL while holds remain (LOCK.RELEASE without lease-ms does the
-- same), so a partial release of a fixed-lease hold does not move its deadline.
-- KEYS[1] = lock hash, KEYS[2] = release channel
-- ARGV[1] = message ("0"), ARGV[2] = lease ms re-applied while holds remain (0: keep the TTL),
-- ARGV[3] = owner, ARGV[4] = publish command (PUBLISH | SPUBLISH).
-- Reply: nil (not the owner); 0 (still held); 1 (freed + published).
local lock, channel = KEYS[1], KEYS[2]
local message, lease, owner, publish = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4]
if redis.call('hexists', lock, owner) == 0 then
    return nil
end
if redis.call('hincrby', lock, owner, -1) > 0 then
    if lease > 0 then
        redis.call('pexpire', lock, lease)
    end
    return 0
end
redis.call('del', lock)
redis.call(publish, channel, message)
return 1
