-- Redisson NonReentrantLock acquire (3daa7be6), reimplemented from the documented behaviour.
-- KEYS[1] = lock hash; ARGV[1] = lease ms, ARGV[2] = owner, ARGV[3] = error text.
-- Reply: nil (was absent: HINCRBY 1, PEXPIRE); error ARGV[3] via redis.error_reply (owner holds it); else PTTL.
local lock, lease, owner = KEYS[1], ARGV[1], ARGV[2]
if redis.call('exists', lock) == 0 then
    redis.call('hincrby', lock, owner, 1)
    redis.call('pexpire', lock, lease)
    return nil
end
if redis.call('hexists', lock, owner) == 1 then
    return redis.error_reply(ARGV[3])
end
return redis.call('pttl', lock)
