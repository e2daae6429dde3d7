-- Redisson read-lock watchdog renewal, batched, 4.0-4.3 (d6564f42), reimplemented from the
-- algorithm.
-- KEYS[2i-1] = lock hash i, KEYS[2i] = its hold-key prefix ({name}); ARGV[1] = lease ms,
-- ARGV[i+1] = the reader field renewed for lock i.
-- Reply: one integer per lock, in order. 1 = the field is present: PEXPIRE the hash and, when
-- HLEN > 1, every hold's timeout key of every numeric field (other clients' holds too).
-- 0 = absent, untouched.
local lease = ARGV[1]
local out = {}
for i = 1, #KEYS, 2 do
    local lock, keyprefix = KEYS[i], KEYS[i + 1]
    local owner = ARGV[(i + 1) / 2 + 1]
    if redis.call('hexists', lock, owner) == 1 then
        redis.call('pexpire', lock, lease)
        if redis.call('hlen', lock) > 1 then
            for _, field in ipairs(redis.call('hkeys', lock)) do
                local count = tonumber(redis.call('hget', lock, field))
                if type(count) == 'number' then
                    for n = count, 1, -1 do
                        redis.call('pexpire', keyprefix .. ':' .. field .. ':rwlock_timeout:' .. n, lease)
                    end
                end
            end
        end
        out[#out + 1] = 1
    else
        out[#out + 1] = 0
    end
end
return out
