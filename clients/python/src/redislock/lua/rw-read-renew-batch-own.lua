-- Redisson read-lock watchdog renewal, batched, from 4.4 (38d2b478), reimplemented from the
-- algorithm: only the calling client's own holds are renewed.
-- KEYS[2i-1] = lock hash i, KEYS[2i] = its hold-key prefix ({name}).
-- ARGV[1] = lease ms; then per lock i: a count m_i followed by m_i reader fields.
-- Reply: one integer per lock, in order. 1 = at least one listed field present: for each present
-- field with count c PEXPIRE its timeout keys KEYS[2i]:<field>:rwlock_timeout:c..1, then PEXPIRE
-- the hash. 0 = none present, the hash untouched.
local lease = ARGV[1]
local out = {}
local a = 2
for i = 1, #KEYS, 2 do
    local lock, keyprefix = KEYS[i], KEYS[i + 1]
    local m = tonumber(ARGV[a])
    local any = false
    for j = a + 1, a + m do
        local field = ARGV[j]
        local count = redis.call('hget', lock, field)
        if count then
            any = true
            for n = tonumber(count), 1, -1 do
                redis.call('pexpire', keyprefix .. ':' .. field .. ':rwlock_timeout:' .. n, lease)
            end
        end
    end
    a = a + m + 1
    if any then
        redis.call('pexpire', lock, lease)
        out[#out + 1] = 1
    else
        out[#out + 1] = 0
    end
end
return out
