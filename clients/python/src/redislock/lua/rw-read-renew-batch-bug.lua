-- Redisson read-lock watchdog renewal, batched, 3.44-3.52 (1affef78), reimplemented from the
-- algorithm WITH its bug, on purpose (this file is a fixture: a native run must match it).
-- KEYS[2i-1] = lock hash i, KEYS[2i] = its hold-key prefix ({name}); ARGV[1] = lease ms,
-- ARGV[i+1] = the reader field renewed for lock i.
-- Reply: one integer per lock, in order (1 = field present and renewed, 0 = absent, untouched).
-- The bug: the hold loop's variable shadows the lock loop's, so hold n of a field is addressed
-- with KEYS[n+1] as its prefix instead of the lock's own prefix: right only for lock 1 with
-- count 1; otherwise other (normally nonexistent) keys are PEXPIREd and the real timeout keys are
-- not; when n+1 > #KEYS the concatenation of nil aborts the script, after the PEXPIREs already
-- made in this call (lock keys included).
local lease = ARGV[1]
local out = {}
for i = 1, #KEYS, 2 do
    local lock = KEYS[i]
    local owner = ARGV[(i + 1) / 2 + 1]
    if redis.call('hexists', lock, owner) == 1 then
        redis.call('pexpire', lock, lease)
        if redis.call('hlen', lock) > 1 then
            for _, field in ipairs(redis.call('hkeys', lock)) do
                local count = tonumber(redis.call('hget', lock, field))
                if type(count) == 'number' then
                    for i = count, 1, -1 do -- the shadowing is the bug
                        redis.call('pexpire', KEYS[i + 1] .. ':' .. field .. ':rwlock_timeout:' .. i, lease)
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
