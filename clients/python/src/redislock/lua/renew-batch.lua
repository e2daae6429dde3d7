-- Redisson watchdog renewal (batched form, 3.44+), reimplemented from the algorithm.
-- KEYS[i] = lock hash i; ARGV[1] = lease ms; ARGV[i + 1] = the owner renewing KEYS[i].
-- Reply: an array with 1 (lease reset) or 0 (owner field absent) per key.
local lease = ARGV[1]
local out = {}
for i, lock in ipairs(KEYS) do
    if redis.call('hexists', lock, ARGV[i + 1]) == 1 then
        redis.call('pexpire', lock, lease)
        out[i] = 1
    else
        out[i] = 0
    end
end
return out
