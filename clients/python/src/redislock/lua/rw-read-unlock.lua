-- Redisson RReadLock unlock as 3.22-3.23 did it (92a54c31: publish command from ARGV, no latch),
-- reimplemented from the algorithm.
-- KEYS[1] = read-write lock hash, KEYS[2] = channel redisson_rwlock:{name},
-- KEYS[3] = this reader's timeout-key prefix ({name}:<owner>:rwlock_timeout),
-- KEYS[4] = the key prefix of every hold ({name}; hold n of field f is KEYS[4]:f:rwlock_timeout:n)
-- ARGV[1] = message ("0"), ARGV[2] = reader field (owner), ARGV[3] = PUBLISH | SPUBLISH.
-- No 'mode' (a missing key): publish anyway, reply 1 (an unlock of a lost lock looks successful).
-- Not a reader field: nil, nothing changed. Else count - 1 (HDEL at 0) and DEL this hold's
-- timeout key; if other fields remain and some hold's timeout key has a TTL > 0, PEXPIRE the hash
-- to the largest and reply 0 (even when this owner's last hold is gone); else in mode write
-- reply 0; else (the last holder, or all other readers' holds expired) DEL the hash, publish,
-- reply 1.
local lock, channel, prefix, keyprefix = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local message, reader = ARGV[1], ARGV[2]
local mode = redis.call('hget', lock, 'mode')
if not mode then
    redis.call(ARGV[3], channel, message)
    return 1
end
if redis.call('hexists', lock, reader) == 0 then
    return nil
end
local left = redis.call('hincrby', lock, reader, -1)
if left == 0 then
    redis.call('hdel', lock, reader)
end
redis.call('del', prefix .. ':' .. (left + 1))
if redis.call('hlen', lock) > 1 then
    -- the largest PTTL over every hold of every holder field (O(total holds))
    local longest = -3
    for _, field in ipairs(redis.call('hkeys', lock)) do
        local count = tonumber(redis.call('hget', lock, field))
        if type(count) == 'number' then
            for n = count, 1, -1 do
                local ttl = redis.call('pttl', keyprefix .. ':' .. field .. ':rwlock_timeout:' .. n)
                longest = math.max(longest, ttl)
            end
        end
    end
    if longest > 0 then
        redis.call('pexpire', lock, longest)
        return 0
    end
    if mode == 'write' then
        return 0
    end
end
-- the last hold, or every other reader's timeout keys have expired: the lock is free
redis.call('del', lock)
redis.call(ARGV[3], channel, message)
return 1
