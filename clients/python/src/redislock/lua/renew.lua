-- Redisson watchdog renewal of one lock (up to 3.43), reimplemented from the algorithm.
-- KEYS[1] = lock hash; ARGV[1] = lease ms; ARGV[2] = owner.
-- Reply 1 (lease reset) when the owner holds the lock, else 0.
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    redis.call('pexpire', KEYS[1], ARGV[1])
    return 1
end
return 0
